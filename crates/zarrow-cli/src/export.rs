//! `zarrow export`: the table at a location (or a query over it) to a file, batch by batch as
//! DataFusion produces them — the table is never collected in memory.

use std::path::Path;

use anyhow::{bail, Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use clap::ValueEnum;
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use zarrow_datafusion::{SessionContextZarrExt, ZarrTableOptions};

use crate::output::{Progress, Sink};
use crate::ExportArgs;

/// `zarrow export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Arrow IPC file (`.arrow`, `.feather`, `.ipc`).
    Arrow,
    /// Arrow IPC stream (`.arrows`).
    ArrowStream,
    /// Parquet, zstd-compressed (`.parquet`, `.pq`).
    Parquet,
    /// CSV with a header row (`.csv`).
    Csv,
    /// One JSON object per line (`.ndjson`, `.jsonl`).
    Ndjson,
    /// A zarr table: a group of 1-D arrays (`.zarr`; see `--option` for its write options).
    Zarr,
}

impl ExportFormat {
    /// The format a file name implies.
    fn from_path(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        Ok(match ext.as_str() {
            "arrow" | "feather" | "ipc" => ExportFormat::Arrow,
            "arrows" => ExportFormat::ArrowStream,
            "parquet" | "pq" => ExportFormat::Parquet,
            "csv" => ExportFormat::Csv,
            "ndjson" | "jsonl" => ExportFormat::Ndjson,
            "zarr" => ExportFormat::Zarr,
            "" => bail!(
                "cannot tell the format of '{}' without an extension; pass --format \
                 (arrow, arrow-stream, parquet, csv, ndjson, zarr)",
                path.display()
            ),
            other => bail!(
                "unknown output extension '.{other}'; pass --format (arrow, arrow-stream, parquet, \
                 csv, ndjson, zarr) or use .arrow, .arrows, .parquet, .csv, .ndjson, .zarr"
            ),
        })
    }
}

/// A writer of one of the export formats over a [`Sink`].
enum Writer {
    Arrow(arrow::ipc::writer::FileWriter<Sink>),
    ArrowStream(arrow::ipc::writer::StreamWriter<Sink>),
    Parquet(Box<ArrowWriter<Sink>>),
    Csv(arrow::csv::Writer<Sink>),
    Ndjson(arrow::json::LineDelimitedWriter<Sink>),
}

impl Writer {
    fn new(format: ExportFormat, schema: &SchemaRef, sink: Sink) -> Result<Self> {
        Ok(match format {
            ExportFormat::Arrow => {
                Writer::Arrow(arrow::ipc::writer::FileWriter::try_new(sink, schema)?)
            }
            ExportFormat::ArrowStream => {
                Writer::ArrowStream(arrow::ipc::writer::StreamWriter::try_new(sink, schema)?)
            }
            ExportFormat::Parquet => {
                let props = WriterProperties::builder()
                    .set_compression(Compression::ZSTD(ZstdLevel::default()))
                    .build();
                Writer::Parquet(Box::new(ArrowWriter::try_new(
                    sink,
                    schema.clone(),
                    Some(props),
                )?))
            }
            ExportFormat::Csv => Writer::Csv(
                arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(sink),
            ),
            ExportFormat::Zarr => bail!("zarr output is written by export_zarr.rs"),
            ExportFormat::Ndjson => Writer::Ndjson(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::LineDelimited>(sink),
            ),
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            Writer::Arrow(w) => w.write(batch)?,
            Writer::ArrowStream(w) => w.write(batch)?,
            Writer::Parquet(w) => w.write(batch)?,
            Writer::Csv(w) => w.write(batch)?,
            Writer::Ndjson(w) => w.write(batch)?,
        }
        Ok(())
    }

    /// Write footers and flush; the sink is handed back.
    fn finish(self) -> Result<Sink> {
        Ok(match self {
            Writer::Arrow(mut w) => {
                w.finish()?;
                w.into_inner()?
            }
            Writer::ArrowStream(mut w) => {
                w.finish()?;
                w.into_inner()?
            }
            Writer::Parquet(w) => w.into_inner()?,
            Writer::Csv(w) => w.into_inner(),
            Writer::Ndjson(mut w) => {
                w.finish()?;
                w.into_inner()
            }
        })
    }
}

pub(crate) async fn run(mut args: ExportArgs) -> Result<()> {
    let format = match args.format {
        Some(f) => f,
        None => ExportFormat::from_path(&args.output)?,
    };
    let write_options = crate::export_zarr::take_write_options(&mut args.table.options)?;
    if format != ExportFormat::Zarr && write_options.is_some() {
        bail!("zarr write options (--option chunk_rows=…) need --format zarr");
    }
    // Refused before anything is read: an output inside the store being exported.
    let sink = match format {
        ExportFormat::Zarr => None,
        _ => Some(Sink::open(Some(&args.output), &[args.location.as_str()])?),
    };
    // Without a query, one partition: the file gets the rows in the table's order (chunk by
    // chunk, C order of the chunk grid); chunk reads still run concurrently.
    let mut config = SessionConfig::new();
    if args.query.is_none() {
        config = config.with_target_partitions(1);
    }
    let ctx = crate::sql::session(&args.table, &args.runtime, &args.cluster, config, true).await?;
    // `concurrency` is a session setting only
    let mut table_options = args.table.to_map();
    table_options.remove("concurrency");
    let options =
        ZarrTableOptions::from_options(&table_options).context("invalid table options")?;
    ctx.register_zarr("t", &args.location, options)
        .await
        .with_context(|| format!("cannot open '{}' as a table", args.location))?;
    let sql = args.query.as_deref().unwrap_or("SELECT * FROM t");
    let df = ctx.sql(sql).await.context("the query failed")?;
    let mut stream = df.execute_stream().await.context("the query failed")?;
    let schema = stream.schema();
    let Some(sink) = sink else {
        let output = args.output.to_string_lossy();
        return crate::export_zarr::write(stream, &output, write_options.unwrap_or_default()).await;
    };

    let mut writer = Writer::new(format, &schema, sink)
        .with_context(|| format!("cannot write {} output", format_name(format)))?;
    let mut progress = Progress::new("exported");
    while let Some(batch) = stream.next().await {
        let batch = batch.context("reading the table failed")?;
        writer
            .write(&batch)
            .with_context(|| format!("cannot write {} output", format_name(format)))?;
        progress.add(batch.num_rows());
    }
    let sink = writer
        .finish()
        .with_context(|| format!("cannot write {} output", format_name(format)))?;
    sink.finish()?;
    progress.finish(&args.output.display().to_string());
    Ok(())
}

fn format_name(format: ExportFormat) -> &'static str {
    match format {
        ExportFormat::Arrow => "Arrow IPC",
        ExportFormat::ArrowStream => "Arrow IPC stream",
        ExportFormat::Parquet => "Parquet",
        ExportFormat::Csv => "CSV",
        ExportFormat::Ndjson => "NDJSON",
        ExportFormat::Zarr => "zarr",
    }
}
