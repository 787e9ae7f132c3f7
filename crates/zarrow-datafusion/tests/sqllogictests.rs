//! Runs the `.slt` files in `tests/slt/` (sqllogictest format) against a
//! `zarr_session_context`, from the workspace root so locations read
//! `tests/fixtures/data/…`.
//!
//! Values print as Arrow displays them, NULL as `NULL`, the empty string as `(empty)`, with
//! backslash, newline, tab and carriage return escaped (`\\`, `\n`, `\t`, `\r`); an
//! EXPLAIN plan becomes one result line per plan line, leading spaces shown as `-`. Rows are
//! compared exactly (no whitespace normalisation) and column types strictly:
//! `I` integer, `R` float, `T` string (also dictionary of strings), `B` boolean,
//! `P` timestamp, `?` anything else.
//!
//! `cargo test -p zarrow-datafusion --test sqllogictests [-- <file filter>]`; add `--complete`
//! to rewrite the expected results from what the engine returns (then review the diff).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::DataFusionError;
use datafusion::prelude::{SessionConfig, SessionContext};
use sqllogictest::{
    default_normalizer, strict_column_validator, AsyncDB, ColumnType, DBOutput, Normalizer, Runner,
};
use zarrow_datafusion::zarr_session_context;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Col {
    Int,
    Float,
    Text,
    Bool,
    Timestamp,
    Other,
}

impl ColumnType for Col {
    fn from_char(value: char) -> Option<Self> {
        Some(match value {
            'I' => Col::Int,
            'R' => Col::Float,
            'T' => Col::Text,
            'B' => Col::Bool,
            'P' => Col::Timestamp,
            _ => Col::Other,
        })
    }

    fn to_char(&self) -> char {
        match self {
            Col::Int => 'I',
            Col::Float => 'R',
            Col::Text => 'T',
            Col::Bool => 'B',
            Col::Timestamp => 'P',
            Col::Other => '?',
        }
    }
}

fn col_type(dt: &DataType) -> Col {
    match dt {
        d if d.is_integer() => Col::Int,
        d if d.is_floating() => Col::Float,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Col::Text,
        DataType::Dictionary(_, v) if col_type(v) == Col::Text => Col::Text,
        DataType::Boolean => Col::Bool,
        DataType::Timestamp(..) => Col::Timestamp,
        _ => Col::Other,
    }
}

struct ZarrDb {
    ctx: SessionContext,
}

fn rows(batches: &[RecordBatch], explain: bool) -> Result<Vec<Vec<String>>, DataFusionError> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for batch in batches {
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()?;
        for r in 0..batch.num_rows() {
            let mut row = Vec::new();
            let mut extra = Vec::new();
            for (c, f) in formatters.iter().enumerate() {
                let v = f.value(r).to_string();
                let v = if v.is_empty() && !batch.column(c).is_null(r) {
                    "(empty)".to_string()
                } else {
                    v
                };
                if explain && v.contains('\n') {
                    let mut lines = v.lines().filter(|l| !l.trim().is_empty()).map(|l| {
                        let indent = l.len() - l.trim_start().len();
                        format!("{}{}", "-".repeat(indent), l.trim())
                    });
                    if let Some(first) = lines.next() {
                        row.push(first);
                    }
                    extra.extend(lines.map(|l| vec![l]));
                } else {
                    row.push(
                        v.replace('\\', "\\\\")
                            .replace('\n', "\\n")
                            .replace('\t', "\\t")
                            .replace('\r', "\\r"),
                    );
                }
            }
            out.push(row);
            out.extend(extra);
        }
    }
    Ok(out)
}

/// `EXPLAIN ANALYZE` lines with the metrics' values left out (they are timings and counts
/// that vary): `metrics=[output_rows=35, fetch_time=1ms]` → `metrics=[output_rows, fetch_time]`.
fn metric_names(line: &str) -> String {
    let Some(start) = line.find("metrics=[") else {
        return line.to_string();
    };
    let inner_start = start + "metrics=[".len();
    let Some(len) = line[inner_start..].find(']') else {
        return line.to_string();
    };
    let names: Vec<&str> = line[inner_start..inner_start + len]
        .split(", ")
        .map(|m| m.split('=').next().unwrap_or(m).trim())
        .filter(|m| !m.is_empty())
        .collect();
    format!(
        "{}metrics=[{}]{}",
        &line[..start],
        names.join(", "),
        &line[inner_start + len + 1..]
    )
}

#[async_trait]
impl AsyncDB for ZarrDb {
    type Error = DataFusionError;
    type ColumnType = Col;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Col>, DataFusionError> {
        let df = self.ctx.sql(sql).await?;
        let types: Vec<Col> = df
            .schema()
            .fields()
            .iter()
            .map(|f| col_type(f.data_type()))
            .collect();
        let is_query = {
            let s = sql.trim_start().to_ascii_lowercase();
            s.starts_with("select")
                || s.starts_with("with")
                || s.starts_with("explain")
                || s.starts_with("show")
                || s.starts_with("describe")
                || s.starts_with("values")
        };
        let batches = df.collect().await?;
        if !is_query {
            return Ok(DBOutput::StatementComplete(0));
        }
        let lower = sql.trim_start().to_ascii_lowercase();
        let explain = lower.starts_with("explain");
        let mut rows = rows(&batches, explain)?;
        if lower.starts_with("explain analyze") {
            for row in &mut rows {
                for cell in row.iter_mut() {
                    *cell = metric_names(cell);
                }
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "zarrow"
    }
}

/// Exact comparison: each row's values joined by one space must equal the expected line.
fn exact_validator(_: Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    let actual: Vec<String> = actual.iter().map(|r| r.join(" ")).collect();
    actual.len() == expected.len() && actual.iter().zip(expected).all(|(a, e)| a == e.trim_end())
}

/// Which files to run, from the arguments as libtest takes them: names (a file runs when its
/// path contains one, or always when none is given) and `--skip NAME` / `--skip=NAME` (a file
/// whose path contains NAME does not run); other flags are ignored. `cargo test --workspace --
/// --skip some_test` passes its `--skip` here too, and its value is not a name to select.
#[derive(Debug, Default, PartialEq)]
struct Selection {
    include: Vec<String>,
    skip: Vec<String>,
}

impl Selection {
    fn from_args(args: impl IntoIterator<Item = String>) -> Self {
        let mut selection = Selection::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--skip" {
                selection.skip.extend(args.next());
            } else if let Some(name) = arg.strip_prefix("--skip=") {
                selection.skip.push(name.to_string());
            } else if !arg.starts_with('-') {
                selection.include.push(arg);
            }
        }
        selection
    }

    fn keeps(&self, path: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|f| path.contains(f.as_str())))
            && !self.skip.iter().any(|f| path.contains(f.as_str()))
    }
}

/// The runner has no `#[test]`s of its own (no libtest harness): check its argument parsing
/// before each run.
fn check_selection() {
    let args = ["--include-ignored", "--skip", "copy_10m", "--skip=b", "x"].map(String::from);
    let selection = Selection::from_args(args);
    assert_eq!(
        selection,
        Selection {
            include: vec!["x".into()],
            skip: vec!["copy_10m".into(), "b".into()]
        }
    );
    assert!(selection.keeps("slt/x.slt") && !selection.keeps("slt/xb.slt"));
}

fn main() {
    check_selection();

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let slt_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    std::env::set_current_dir(&root).expect("cd to the workspace root");
    let selection = Selection::from_args(std::env::args().skip(1));
    let complete = std::env::args().any(|a| a == "--complete");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&slt_dir)
        .expect("tests/slt")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .filter(|p| selection.keeps(&p.to_string_lossy()))
        .collect();
    files.sort();
    // Only names given on the command line may select no file: run whole, the runner must
    // find the files it is for.
    assert!(
        !files.is_empty() || !selection.include.is_empty(),
        "no .slt file in {}",
        slt_dir.display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut failed = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let result = runtime.block_on(async {
            let mut runner = Runner::new(|| async {
                let config = SessionConfig::new()
                    .with_target_partitions(4)
                    .with_batch_size(8192);
                Ok(ZarrDb {
                    ctx: zarr_session_context(config),
                })
            });
            runner.with_validator(exact_validator);
            runner.with_column_validator(strict_column_validator);
            if complete {
                runner
                    .update_test_file(
                        file,
                        " ",
                        exact_validator,
                        default_normalizer,
                        strict_column_validator,
                    )
                    .await
                    .map_err(|e| e.to_string())
            } else {
                runner.run_file_async(file).await.map_err(|e| e.to_string())
            }
        });
        match result {
            Ok(()) => println!("ok    {name}"),
            Err(e) => {
                println!("FAIL  {name}\n{e}");
                failed.push(name);
            }
        }
    }
    println!("{} slt files, {} failed", files.len(), failed.len());
    if !failed.is_empty() {
        std::process::exit(1);
    }
}
