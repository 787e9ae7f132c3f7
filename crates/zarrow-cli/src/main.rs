//! The `zarrow` command: SQL over Zarr stores, table schemas, hierarchy trees and exports.
//!
//! ```text
//! zarrow sql [--format table|csv|json|ndjson|markdown] [--output FILE] "<SQL>[; <SQL> …]"
//! zarrow sql [-f FILE.sql …]      # files; without a query: SQL piped on stdin, or the shell
//! zarrow schema <location>
//! zarrow tree <location>
//! zarrow export <location> --output FILE [--format arrow|arrow-stream|parquet|csv|ndjson|zarr] [--query SQL]
//! zarrow completions bash|zsh|fish
//! ```
//!
//! Thin over the two libraries: `tree` uses only the core crate, the others go through a
//! DataFusion session from `zarrow-datafusion`. Errors print `error: …` and the causes on stderr
//! and exit with status 1.

mod address_space;
mod export;
mod export_zarr;
mod hints;
mod memory;
mod output;
mod schema;
mod shell;
mod sql;
mod statements;
mod warnings;

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

/// mimalloc, as datafusion-cli uses: decoded chunks are large, short-lived buffers, and it
/// hands their memory back to the next chunk instead of faulting in fresh pages each time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// zarrow's version and the DataFusion and Arrow it is built with.
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (DataFusion {}, Arrow {})",
        env!("CARGO_PKG_VERSION"),
        datafusion::DATAFUSION_VERSION,
        arrow::ARROW_VERSION
    )
});

/// SQL over Zarr stores, table schemas, hierarchy trees and exports.
#[derive(Debug, Parser)]
#[command(name = "zarrow", version = VERSION.as_str(), about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run SQL statements and print each result; without a query, an interactive shell.
    ///
    /// The statements come from the argument, `-f FILE` (repeatable), SQL piped on standard
    /// input, or, on a terminal, a shell (`\d`, `\d NAME`, `\q`, history, tab completion,
    /// Ctrl-C cancels the running statement).
    ///
    /// Zarr arrays and groups can be queried by location (`SELECT * FROM 'data/pbmc.zarr/obs'`)
    /// or registered with `CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '…'`; Parquet, CSV,
    /// JSON and Arrow files work by location too. `SET zarrow.<option> = …` changes table options.
    Sql(SqlArgs),
    /// Print the Arrow schema of the table at a location, then the arrays left out of it.
    Schema(SchemaArgs),
    /// Print the hierarchy at a location: groups and arrays with shape, chunks, data type,
    /// codecs and fill value.
    Tree(TreeArgs),
    /// Write the table at a location (or a query's result) to a file, batch by batch.
    Export(ExportArgs),
    /// Print a shell completion script, e.g. `zarrow completions bash > /etc/bash_completion.d/zarrow`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// Table options shared by the commands that build tables.
#[derive(Debug, Clone, Default, Args)]
struct TableArgs {
    /// How strings (and bytes) are represented in Arrow.
    #[arg(long, value_enum, value_name = "TYPE")]
    string_type: Option<StringTypeArg>,
    /// A table option, `key=value`; repeatable. Keys: `string_type`, `fill_as_null=true`
    /// (fill values become NULL), `decode_cf=true` (CF conventions), `max_item_bytes=N` (read
    /// limits in bytes), `timeout=30s` (remote stores), …: every key is in docs/options.md, with
    /// the environment variable (`ZARROW_MAX_ITEM_BYTES`, `ZARROW_TIMEOUT`, …) that gives its
    /// default here. `schema` and `export` also take `arrays=a,b` (the arrays of a group table)
    /// and `dictionary=a,b` (string columns as dictionaries); `sql` refuses those two, which are
    /// no session settings (give them in `CREATE EXTERNAL TABLE … OPTIONS`).
    #[arg(long = "option", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    options: Vec<(String, String)>,
}

impl TableArgs {
    /// The options as the `key → value` map the table provider parses: the settings the
    /// environment gives (`ZARROW_MAX_ITEM_BYTES`, `ZARROW_TIMEOUT`, … — the CLI is where
    /// zarrow reads them), then the options given, which win.
    fn to_map(&self) -> HashMap<String, String> {
        let mut map: HashMap<String, String> = zarrow::options::env_options()
            .into_iter()
            .chain(self.options.iter().cloned())
            .collect();
        if let Some(t) = self.string_type {
            map.insert("string_type".into(), t.option_value().into());
        }
        map
    }
}

/// `--string-type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StringTypeArg {
    /// `Utf8` / `Binary` (i32 offsets), the default.
    Utf8,
    /// `LargeUtf8` / `LargeBinary` (i64 offsets).
    #[value(name = "large_utf8", alias = "large-utf8")]
    LargeUtf8,
    /// `Utf8View` / `BinaryView`.
    View,
}

impl StringTypeArg {
    fn option_value(self) -> &'static str {
        match self {
            StringTypeArg::Utf8 => "utf8",
            StringTypeArg::LargeUtf8 => "large_utf8",
            StringTypeArg::View => "view",
        }
    }
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

#[derive(Debug, Args)]
struct SqlArgs {
    /// One or more SQL statements separated by `;`. Without it (and without `--file`), SQL
    /// piped on standard input is run; on a terminal an interactive shell opens (statements end
    /// with `;`; `\d` lists the tables, `\d NAME` describes one, `\q` quits).
    #[arg(value_name = "SQL", conflicts_with = "file")]
    sql: Option<String>,
    /// Run the statements of this file (`-` for standard input); repeatable, in order, in one
    /// session. The first failing statement stops the command, its line named.
    #[arg(long, short = 'f', value_name = "FILE")]
    file: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = output::SqlFormat::Table)]
    format: output::SqlFormat,
    /// Write to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// After each statement, print on standard error what its zarr scans did (chunks read
    /// and pruned, requests and bytes fetched, fetch, decompression and decode time, rows;
    /// the snapshot read, for an Icechunk table), the snapshot a write to an Icechunk
    /// repository committed, and how long it took, planning included (`elapsed 0.123 s`).
    #[arg(long, short = 'v')]
    verbose: bool,
    #[command(flatten)]
    table: TableArgs,
    #[command(flatten)]
    runtime: memory::RuntimeArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Where queries run: in this process, or on a Ballista cluster.
#[derive(Debug, Clone, Default, Args)]
struct ClusterArgs {
    /// Run the query on the Ballista cluster whose scheduler is at this URL
    /// (`df://HOST:PORT`; `zarrow-scheduler` and `zarrow-executor` from the zarrow-ballista
    /// crate). This process plans (it reads the tables' metadata); executors read the chunks;
    /// `--memory-limit` applies to this process only.
    #[arg(long, value_name = "URL")]
    cluster: Option<String>,
}

#[derive(Debug, Args)]
struct SchemaArgs {
    /// The array or group: a path, `file://`, `s3://`, `gs://`, `az://` or `http(s)://` URL.
    location: String,
    #[command(flatten)]
    table: TableArgs,
}

#[derive(Debug, Args)]
struct TreeArgs {
    /// The array or group: a path, `file://`, `s3://`, `gs://`, `az://` or `http(s)://` URL.
    location: String,
}

#[derive(Debug, Args)]
struct ExportArgs {
    /// The array or group to export: a path, `file://`, `s3://`, `gs://`, `az://` or
    /// `http(s)://` URL. With `--query` it is the table `t`.
    location: String,
    /// The file to write (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// Output format; default from the file extension (.arrow/.feather/.ipc, .arrows,
    /// .parquet, .csv, .ndjson/.jsonl, .zarr). For zarr, `--option` also takes the write
    /// options chunk_rows, shard_rows, compression, string_encoding, zarr_format, layout,
    /// dimension, overwrite, break_stale_lock, stale_lock_seconds (as `COPY … STORED AS ZARR
    /// OPTIONS`).
    #[arg(long, value_enum)]
    format: Option<export::ExportFormat>,
    /// Export this query's result instead of the whole table; the table at the location is `t`
    /// (e.g. `SELECT * FROM t WHERE cell_type = 'B'`).
    #[arg(long, value_name = "SQL")]
    query: Option<String>,
    #[command(flatten)]
    table: TableArgs,
    #[command(flatten)]
    runtime: memory::RuntimeArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

fn main() -> ExitCode {
    // Before any thread starts (see `address_space`).
    let room = address_space::fit();
    // Never show a panic as a panic: say it is a bug, on one line, and exit 1 like other errors.
    // A panic inside icechunk while it reads a repository is caught and reported as that
    // read's error (naming the repository), so it is no internal error.
    std::panic::set_hook(Box::new(|info| {
        if zarrow::panic_is_guarded() {
            return;
        }
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let whose = info.location().and_then(|l| dependency_of(l.file()));
        match whose {
            Some(krate) => eprintln!(
                "error: internal error inside {krate}, a library zarrow runs on (a bug there, \
                 not in your data; please report it to zarrow, which will take it upstream): \
                 {msg}{at}"
            ),
            None => {
                eprintln!("error: internal error (a bug in zarrow, please report it): {msg}{at}")
            }
        }
    }));
    warnings::init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors exit 1 like every other error; --help and --version exit 0.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli, room)));
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Ok(Err(e)) if e.downcast_ref::<warnings::Interrupted>().is_some() => {
            report(&e);
            e.downcast_ref::<warnings::Interrupted>()
                .map_or(ExitCode::FAILURE, |i| ExitCode::from(i.status))
        }
        Ok(Err(e)) => {
            report(&e);
            ExitCode::FAILURE
        }
        Err(_) => ExitCode::FAILURE,
    }
}

/// The dependency (crate and version) whose source `file` is, from a path into cargo's
/// registry (`…/registry/src/<index>/datafusion-physical-plan-55.2.0/src/…`); `None` for
/// zarrow's own code.
fn dependency_of(file: &str) -> Option<String> {
    let rest = file.split("/registry/src/").nth(1)?;
    let krate = rest.split('/').nth(1)?;
    (!krate.starts_with("zarrow")).then(|| krate.to_string())
}

/// Run a command; `room`: what is left under an address-space limit (see `address_space`).
fn run(cli: Cli, room: Option<u64>) -> Result<()> {
    // The settings the environment gives are read here, at the edge, into the options of
    // every command: one that does not parse is an error naming its variable before anything
    // is read.
    zarrow::ReadLimits::from_env()?;
    zarrow::RemoteOptions::from_env()?;
    let runtime = address_space::runtime(room)
        .build()
        .map_err(|e| anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async move {
        match cli.command {
            Command::Sql(a) => sql::run(a).await,
            Command::Schema(a) => schema::run(a).await,
            Command::Tree(a) => {
                let open = async {
                    let limits = zarrow::ReadLimits::from_env()?;
                    let remote = zarrow::RemoteOptions::from_env()?;
                    let store = zarrow::ZarrStore::open_configured(&a.location, &[], &remote)?
                        .with_limits(limits);
                    let node = zarrow::Node::open_store(store, "").await?;
                    Ok::<_, anyhow::Error>(zarrow::tree::render_node(&a.location, node).await?)
                };
                let text = open
                    .await
                    .with_context(|| format!("cannot open '{}'", a.location))?;
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                out.flush().map_err(anyhow::Error::from)
            }
            Command::Export(a) => export::run(a).await,
            Command::Completions { shell } => {
                use clap::CommandFactory;
                let mut out = std::io::stdout().lock();
                clap_complete::generate(shell, &mut Cli::command(), "zarrow", &mut out);
                out.flush().map_err(anyhow::Error::from)
            }
        }
    })
}

/// `error: <message>` then `  caused by: <cause>` for each cause that adds something, then
/// `  hint: …` where a common mistake is likely (see `hints`).
pub(crate) fn report(e: &anyhow::Error) {
    let mut stderr = std::io::stderr().lock();
    let lines = error_lines(e);
    for (i, line) in lines.iter().enumerate() {
        let line = hints::tidy(line);
        let _ = if i == 0 {
            writeln!(stderr, "error: {line}")
        } else {
            writeln!(stderr, "  caused by: {line}")
        };
    }
    for hint in hints::hints(&lines.join("\n")) {
        let _ = writeln!(stderr, "  hint: {hint}");
    }
}

/// DataFusion and Arrow variants that only put a label before their source's message.
const WRAPPERS: &[&str] = &[
    "External error: ",
    "SQL error: ",
    "Arrow error: ",
    "IO error: ",
    "Object Store error: ",
    "Parquet error: ",
];

/// The messages of an error's chain, without repetition: library errors often repeat their
/// source's text in their own message, or only put a label before it (then the source's own
/// message is the one kept).
fn error_lines(e: &anyhow::Error) -> Vec<String> {
    let messages: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    let tail = |s: &str| s.split_once(": ").map_or(s, |(_, t)| t).to_string();
    let mut lines: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if m.trim().is_empty() {
            continue;
        }
        if let Some(next) = messages.get(i + 1) {
            let wrapper = WRAPPERS.iter().any(|w| m.starts_with(w));
            if wrapper
                && !next.trim().is_empty()
                && (m.contains(next.as_str()) || m.contains(&tail(next)))
            {
                continue;
            }
        }
        if lines.iter().any(|l| l.contains(m.as_str())) {
            continue;
        }
        lines.push(m.clone());
    }
    if lines.is_empty() {
        lines.push(e.to_string());
    }
    lines
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.to_string().contains("Broken pipe")
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_in_a_dependency_names_it() {
        let datafusion = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/\
                          datafusion-physical-plan-55.2.0/src/joins/utils.rs";
        assert_eq!(
            super::dependency_of(datafusion).as_deref(),
            Some("datafusion-physical-plan-55.2.0")
        );
        assert_eq!(super::dependency_of("crates/zarrow/src/scan/mod.rs"), None);
    }
}
