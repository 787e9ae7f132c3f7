//! `zarrow sql`: statements run in a zarr-aware DataFusion session, each result printed
//! (statements without columns — `CREATE …`, `SET …` — print nothing).
//!
//! The SQL comes from the argument, `--file`s, standard input, or the interactive shell
//! (`crate::shell`); all of them go through one [`Runner`], which splits the text
//! (`crate::statements`), runs each statement or backslash command, and names the statement and
//! its line when one fails.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::error::DataFusionError;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use futures::StreamExt;
use zarrow::options::keys::Group;
use zarrow_datafusion::{metrics, zarr_scans};

use crate::memory::RuntimeArgs;
use crate::output::{refuse_inside_inputs, Progress, ResultWriter, Sink, SqlFormat};
use crate::statements::Piece;
use crate::{ClusterArgs, SqlArgs, TableArgs};

pub(crate) async fn run(args: SqlArgs) -> Result<()> {
    // As datafusion-cli: `SHOW`, `SHOW ALL` and `information_schema.df_settings` (the
    // `zarrow.*` settings among them) work.
    let ctx = session(
        &args.table,
        &args.runtime,
        &args.cluster,
        SessionConfig::new().with_information_schema(true),
        false,
    )
    .await?;
    if args.verbose && args.cluster.cluster.is_some() {
        eprintln!(
            "note: zarr scans run on the cluster's executors; each logs what it read \
             (`zarr scan of … done: … bytes_fetched=…`)"
        );
    }
    let interactive = args.sql.is_none() && args.file.is_empty() && std::io::stdin().is_terminal();
    let mut runner = Runner {
        ctx,
        format: args.format,
        verbose: args.verbose,
        cluster: args.cluster.cluster.clone(),
        output: args.output.clone(),
        sink: Sink::open(args.output.as_deref(), &[])?,
        printed: 0,
        interactive,
    };
    if let Some(sql) = &args.sql {
        runner.run_text(sql, &Source::Argument).await?;
    } else if !args.file.is_empty() {
        for file in &args.file {
            let (text, source) = if file.as_os_str() == "-" {
                (read_stdin()?, Source::Stdin)
            } else {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("cannot read '{}'", file.display()))?;
                (text, Source::File(file.clone()))
            };
            if runner.run_text(&text, &source).await? == Flow::Quit {
                break;
            }
        }
    } else if interactive {
        crate::shell::run(&mut runner).await?;
    } else {
        runner.run_text(&read_stdin()?, &Source::Stdin).await?;
    }
    runner.sink.finish()
}

fn read_stdin() -> Result<String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read SQL from standard input")?;
    Ok(text)
}

/// Where a text of statements came from, to name a failing statement's place.
pub(crate) enum Source {
    /// The command line.
    Argument,
    /// A `--file`.
    File(PathBuf),
    /// Standard input, piped.
    Stdin,
    /// What was typed at the shell's prompt.
    Shell,
}

/// Whether to go on after a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// `\q`.
    Quit,
}

/// Runs statements and commands in one session, printing results to one sink.
pub(crate) struct Runner {
    ctx: SessionContext,
    format: SqlFormat,
    verbose: bool,
    cluster: Option<String>,
    output: Option<PathBuf>,
    sink: Sink,
    /// Results printed so far (CSV and Markdown results are separated by a blank line).
    printed: usize,
    /// The shell: Ctrl-C cancels the running statement, not the process.
    interactive: bool,
}

impl Runner {
    /// The session (the shell completes its table names).
    pub(crate) fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Run every statement and command of `text`, stopping at the first that fails (the error
    /// names it and its line) or at `\q`.
    pub(crate) async fn run_text(&mut self, text: &str, source: &Source) -> Result<Flow> {
        let pieces = crate::statements::split(text).all();
        if pieces.is_empty() {
            match source {
                Source::Shell => return Ok(Flow::Continue),
                Source::File(p) => bail!("no SQL statement in '{}'", p.display()),
                Source::Argument | Source::Stdin => bail!("no SQL statement given"),
            }
        }
        let total = pieces.len();
        for (i, piece) in pieces.iter().enumerate() {
            let flow = self.run_piece(piece).await.map_err(|e| {
                let place = match source {
                    Source::File(p) => format!(" of '{}'", p.display()),
                    Source::Stdin => " of standard input".to_string(),
                    Source::Argument | Source::Shell => String::new(),
                };
                if total > 1 || !place.is_empty() {
                    e.context(format!(
                        "statement {} of {total}, at line {}{place}, failed",
                        i + 1,
                        piece.line
                    ))
                } else {
                    e
                }
            })?;
            if flow == Flow::Quit {
                return Ok(Flow::Quit);
            }
        }
        Ok(Flow::Continue)
    }

    /// One statement or command; in the shell, Ctrl-C cancels it.
    async fn run_piece(&mut self, piece: &Piece) -> Result<Flow> {
        let interactive = self.interactive;
        let work = async {
            if piece.command {
                return self.command(&piece.text).await;
            }
            let dialect_name = self.ctx.state().config().options().sql_parser.dialect;
            let dialect = dialect_from_str(dialect_name)
                .with_context(|| format!("unsupported SQL dialect '{dialect_name}'"))?;
            let statements = DFParser::parse_sql_with_dialect(&piece.text, dialect.as_ref())?;
            for statement in statements {
                self.statement(statement).await?;
            }
            Ok(Flow::Continue)
        };
        // Dropping the statement's future cancels it: a writer deletes its staged files and
        // its lock, an INSERT undoes its writes.
        let result = if interactive {
            tokio::select! {
                result = work => result,
                _ = tokio::signal::ctrl_c() => Err(anyhow!("cancelled")),
            }
        } else {
            tokio::select! {
                result = work => result,
                stop = crate::warnings::stop_signal() => Err(stop.into()),
            }
        };
        self.sink.flush().context("cannot write the output")?;
        result
    }

    /// Plan, run and print one statement.
    async fn statement(&mut self, statement: Statement) -> Result<()> {
        let started = Instant::now();
        let cluster = self.cluster.clone();
        let context = |e: DataFusionError| {
            let e = anyhow::Error::new(e);
            match &cluster {
                Some(url) => e.context(format!("on the cluster at {url}")),
                None => e,
            }
        };
        // An option given twice to COPY … STORED AS ZARR (DataFusion keeps the last).
        zarrow_datafusion::check_statement(&statement).map_err(context)?;
        // (An INSERT without a column list may leave out the table's row position.)
        let plan = zarrow_datafusion::plan_statement(&self.ctx.state(), statement)
            .await
            .map_err(context)?;
        let df = self.ctx.execute_logical_plan(plan).await.map_err(context)?;
        let task = Arc::new(df.task_ctx());
        let physical = df.create_physical_plan().await.map_err(context)?;
        let scans = zarr_scans(physical.as_ref());
        if let Some(output) = &self.output {
            let inputs: Vec<&str> = scans.iter().map(|s| s.location()).collect();
            refuse_inside_inputs(output, &inputs)?;
        }
        let mut stream = execute_stream(physical.clone(), task).map_err(context)?;
        let schema = stream.schema();
        // Rows scanned so far, on a terminal's stderr, while a long scan has printed nothing.
        let mut progress =
            (!scans.is_empty()).then(|| Progress::after("scanned", Duration::from_secs(1)));
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let planned: u64 = scans.iter().map(|s| s.chunks_planned()).sum();
        let has_columns = !schema.fields().is_empty();
        if has_columns {
            self.begin_result()?;
        }
        let streams = self.format.streams();
        let mut writer = ResultWriter::new(self.format, schema, &mut self.sink);
        loop {
            let batch = tokio::select! {
                batch = stream.next() => batch,
                _ = tick.tick() => {
                    if let Some(p) = progress.as_mut() {
                        let counts = scans.iter().map(|s| s.counts());
                        let (rows, chunks) = counts.fold((0, 0), |(r, c), n| (r + n.rows_out, c + n.chunks_read));
                        p.set(rows, &format!(", {chunks}/{planned} chunks"));
                    }
                    continue;
                }
            };
            let Some(batch) = batch else { break };
            let batch = batch.map_err(context)?;
            if has_columns {
                if streams && batch.num_rows() > 0 {
                    // rows are printing: the progress line (erased when dropped) is in their way
                    progress = None;
                }
                writer.write(&batch)?;
            }
        }
        drop(progress);
        if has_columns {
            writer.finish()?;
            self.printed += 1;
        } else {
            drop(writer);
        }
        // the result before what its scans did
        self.sink.flush().context("cannot write the output")?;
        if self.verbose {
            print_scans(physical.as_ref());
            // planning included, as a user waits for it
            eprintln!("elapsed {:.3} s", started.elapsed().as_secs_f64());
        }
        Ok(())
    }

    /// Before a result: a blank line between CSV or Markdown results.
    fn begin_result(&mut self) -> Result<()> {
        if self.printed > 0 && matches!(self.format, SqlFormat::Csv | SqlFormat::Markdown) {
            writeln!(self.sink)?;
        }
        Ok(())
    }

    /// Print a result made here (`\d`), as query results are printed.
    fn print_batch(&mut self, batch: RecordBatch) -> Result<()> {
        self.begin_result()?;
        let mut writer = ResultWriter::new(self.format, batch.schema(), &mut self.sink);
        writer.write(&batch)?;
        writer.finish()?;
        self.printed += 1;
        Ok(())
    }

    /// A backslash command: `\q`, `\d`, `\d NAME`, `\?`.
    async fn command(&mut self, text: &str) -> Result<Flow> {
        let (name, arg) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let arg = arg.trim();
        match name {
            "q" | "quit" if arg.is_empty() => return Ok(Flow::Quit),
            "d" if arg.is_empty() => {
                let mut schemas = Vec::new();
                let mut names = Vec::new();
                let mut types = Vec::new();
                for table in tables(&self.ctx) {
                    let kind = match self.ctx.table_provider(table.reference()).await {
                        Ok(provider) => provider.table_type().to_string(),
                        Err(_) => String::new(),
                    };
                    schemas.push(table.schema.clone());
                    names.push(table.name.clone());
                    types.push(kind);
                }
                let schema = Arc::new(Schema::new(vec![
                    Field::new("table_schema", DataType::Utf8, false),
                    Field::new("table_name", DataType::Utf8, false),
                    Field::new("table_type", DataType::Utf8, false),
                ]));
                let batch = RecordBatch::try_new(
                    schema,
                    vec![
                        Arc::new(StringArray::from(schemas)),
                        Arc::new(StringArray::from(names)),
                        Arc::new(StringArray::from(types)),
                    ],
                )?;
                self.print_batch(batch)?;
            }
            "d" => {
                let provider = self.ctx.table_provider(arg).await.with_context(|| {
                    format!("no table '{arg}' in this session; \\d lists the tables")
                })?;
                let schema = provider.schema();
                let fields = schema.fields();
                let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
                let types: Vec<String> = fields.iter().map(|f| f.data_type().to_string()).collect();
                let nullable: Vec<&str> = fields
                    .iter()
                    .map(|f| if f.is_nullable() { "YES" } else { "NO" })
                    .collect();
                let out = Arc::new(Schema::new(vec![
                    Field::new("column_name", DataType::Utf8, false),
                    Field::new("data_type", DataType::Utf8, false),
                    Field::new("is_nullable", DataType::Utf8, false),
                ]));
                let batch = RecordBatch::try_new(
                    out,
                    vec![
                        Arc::new(StringArray::from(names)),
                        Arc::new(StringArray::from(types)),
                        Arc::new(StringArray::from(nullable)),
                    ],
                )?;
                self.print_batch(batch)?;
            }
            "?" | "h" | "help" => {
                writeln!(
                    self.sink,
                    "\\d            list the tables of this session\n\
                     \\d NAME       the columns of a table\n\
                     \\q            quit (also Ctrl-D)\n\
                     \\?            this help\n\
                     SQL statements end with ';' and may span lines; Ctrl-C cancels a running one."
                )?;
            }
            _ => bail!("unknown command '\\{text}'; \\? lists the commands"),
        }
        Ok(Flow::Continue)
    }
}

/// A table registered in a session.
pub(crate) struct TableName {
    catalog: String,
    schema: String,
    name: String,
    /// The name as typed: bare in the default catalog and schema, else qualified.
    pub(crate) shown: String,
}

impl TableName {
    fn reference(&self) -> datafusion::common::TableReference {
        datafusion::common::TableReference::full(
            self.catalog.as_str(),
            self.schema.as_str(),
            self.name.as_str(),
        )
    }
}

/// The tables registered in the session (`information_schema` left out), sorted.
pub(crate) fn tables(ctx: &SessionContext) -> Vec<TableName> {
    let state = ctx.state();
    let options = &state.config().options().catalog;
    let mut out = Vec::new();
    for catalog_name in ctx.catalog_names() {
        let Some(catalog) = ctx.catalog(&catalog_name) else {
            continue;
        };
        for schema_name in catalog.schema_names() {
            if schema_name == "information_schema" {
                continue;
            }
            let Some(schema) = catalog.schema(&schema_name) else {
                continue;
            };
            for name in schema.table_names() {
                let shown = if catalog_name != options.default_catalog {
                    format!("{catalog_name}.{schema_name}.{name}")
                } else if schema_name != options.default_schema {
                    format!("{schema_name}.{name}")
                } else {
                    name.clone()
                };
                out.push(TableName {
                    catalog: catalog_name.clone(),
                    schema: schema_name.clone(),
                    name,
                    shown,
                });
            }
        }
    }
    out.sort_by(|a, b| a.shown.cmp(&b.shown));
    out
}

/// What the zarr scans of an executed plan did, on standard error (`--verbose`).
/// An Icechunk table's scan names the snapshot it read; a write to a repository, the
/// snapshot it committed.
fn print_scans(plan: &dyn ExecutionPlan) {
    for scan in zarr_scans(plan) {
        let at = scan
            .snapshot_id()
            .map(|id| format!(" at snapshot {id}"))
            .unwrap_or_default();
        eprintln!(
            "scan of {}{at}: {}={} {}",
            scan.location(),
            metrics::CHUNKS_PRUNED,
            scan.chunks_pruned(),
            scan.counts()
        );
    }
    for (location, id) in zarrow_datafusion::committed_snapshots(plan) {
        eprintln!("committed snapshot {id} to {location}");
    }
}

/// A DataFusion session that knows zarr (`STORED AS ZARR`, `FROM '<location>'`, `zarrow.*`
/// settings), with the command's table options as session settings, so every zarr table the
/// statements create uses them.
///
/// The table options that are no session settings (`arrays` names arrays of one group,
/// `dictionary` columns of one table): with `per_table_ok` they are skipped (the caller passes
/// them to its table), else they are an error.
///
/// With `--cluster`, the session's queries run on that Ballista cluster.
pub(crate) async fn session(
    table: &TableArgs,
    runtime: &RuntimeArgs,
    cluster: &ClusterArgs,
    config: SessionConfig,
    per_table_ok: bool,
) -> Result<SessionContext> {
    let ctx = match &cluster.cluster {
        None => zarrow_datafusion::zarr_session_context_with_runtime(config, runtime.runtime()?),
        Some(url) => {
            zarrow_ballista::cluster_session_context_with_runtime(url, config, runtime.runtime()?)
                .await
                .with_context(|| format!("cannot connect to the cluster at {url}"))?
        }
    };
    let mut options: Vec<(String, String)> = table.to_map().into_iter().collect();
    options.sort();
    for (key, value) in options {
        if zarrow::options::keys::option_key(&key)
            .is_some_and(|o| o.scope.table && !o.scope.session && o.group == Group::Table)
        {
            if per_table_ok {
                continue;
            }
            bail!(
                "the option '{key}' applies to one table: use CREATE EXTERNAL TABLE t STORED AS ZARR \
                 LOCATION '…' OPTIONS ('{key}' '{value}')"
            );
        }
        let sql = format!("SET zarrow.{key} = '{}'", value.replace('\'', "''"));
        ctx.sql(&sql)
            .await
            .map(|_| ())
            .with_context(|| format!("invalid table option {key}={value}"))?;
    }
    Ok(ctx)
}
