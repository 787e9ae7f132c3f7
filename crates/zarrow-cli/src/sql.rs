//! `zarrow sql`: run `;`-separated statements in a zarr-aware DataFusion session and print each
//! result (statements without columns — `CREATE …`, `SET …` — print nothing).

use anyhow::{bail, Context, Result};
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use futures::StreamExt;

use crate::memory::RuntimeArgs;
use crate::output::{refuse_inside_inputs, ResultWriter, Sink, SqlFormat};
use crate::{ClusterArgs, SqlArgs, TableArgs};

pub(crate) async fn run(args: SqlArgs) -> Result<()> {
    let ctx = session(
        &args.table,
        &args.runtime,
        &args.cluster,
        SessionConfig::new(),
        false,
    )
    .await?;
    let state = ctx.state();
    let dialect_name = state.config().options().sql_parser.dialect;
    let dialect = dialect_from_str(dialect_name)
        .with_context(|| format!("unsupported SQL dialect '{dialect_name}'"))?;
    let statements = DFParser::parse_sql_with_dialect(&args.sql, dialect.as_ref())?;
    if args.verbose && args.cluster.cluster.is_some() {
        eprintln!(
            "note: zarr scans run on the cluster's executors; each logs what it read \
             (`zarr scan of … done: … bytes_fetched=…`)"
        );
    }
    anyhow::ensure!(!statements.is_empty(), "no SQL statement given");
    let total = statements.len();

    let mut sink = Sink::open(args.output.as_deref(), &[])?;
    let mut printed = 0usize;
    for (i, statement) in statements.into_iter().enumerate() {
        // With several statements, say which one failed.
        let context = |e: DataFusionError| {
            let mut e = anyhow::Error::new(e);
            if let Some(url) = &args.cluster.cluster {
                e = e.context(format!("on the cluster at {url}"));
            }
            if total > 1 {
                e.context(format!("statement {} of {total} failed", i + 1))
            } else {
                e
            }
        };
        let plan = ctx
            .state()
            .statement_to_plan(statement)
            .await
            .map_err(context)?;
        let df = ctx.execute_logical_plan(plan).await.map_err(context)?;
        let task = Arc::new(df.task_ctx());
        let physical = df.create_physical_plan().await.map_err(context)?;
        if let Some(output) = &args.output {
            let mut scans = Vec::new();
            collect_scans(physical.as_ref(), &mut scans);
            let inputs: Vec<&str> = scans.iter().map(|s| s.scan().location.as_str()).collect();
            refuse_inside_inputs(output, &inputs)?;
        }
        let mut stream = execute_stream(physical.clone(), task).map_err(context)?;
        let schema = stream.schema();
        if schema.fields().is_empty() {
            while let Some(batch) = stream.next().await {
                batch.map_err(context)?;
            }
            if args.verbose {
                print_scans(physical.as_ref(), i + 1, total);
            }
            continue;
        }
        if printed > 0 && args.format == SqlFormat::Csv {
            use std::io::Write;
            writeln!(sink)?;
        }
        let mut writer = ResultWriter::new(args.format, schema, &mut sink);
        while let Some(batch) = stream.next().await {
            writer.write(&batch.map_err(context)?)?;
        }
        writer.finish()?;
        printed += 1;
        if args.verbose {
            print_scans(physical.as_ref(), i + 1, total);
        }
    }
    sink.finish()
}

/// What the zarr scans of an executed plan did, on standard error (`--verbose`).
fn print_scans(plan: &dyn ExecutionPlan, statement: usize, total: usize) {
    let mut scans = Vec::new();
    collect_scans(plan, &mut scans);
    for scan in scans {
        let what = if total > 1 {
            format!("statement {statement}: ")
        } else {
            String::new()
        };
        eprintln!(
            "{what}scan of {}: chunks_pruned={} {}",
            scan.scan().location,
            scan.chunks_pruned(),
            scan.scan_counts()
        );
    }
}

fn collect_scans<'a>(
    plan: &'a dyn ExecutionPlan,
    out: &mut Vec<&'a zarrow_datafusion::ZarrScanExec>,
) {
    if let Some(scan) = plan.downcast_ref::<zarrow_datafusion::ZarrScanExec>() {
        out.push(scan);
    }
    for child in plan.children() {
        collect_scans(child.as_ref(), out);
    }
}

/// A DataFusion session that knows zarr (`STORED AS ZARR`, `FROM '<location>'`, `zarrow.*`
/// settings), with the command's table options as session settings, so every zarr table the
/// statements create uses them.
///
/// `arrays` names arrays of one group, so it is no session setting: with `per_table_ok` it is
/// skipped (the caller passes it to its table), else it is an error.
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
        if key == "arrays" {
            if per_table_ok {
                continue;
            }
            bail!(
                "the option 'arrays' applies to one table: use CREATE EXTERNAL TABLE t STORED AS ZARR \
                 LOCATION '…' OPTIONS ('arrays' '{value}')"
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
