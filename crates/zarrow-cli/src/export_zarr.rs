//! `zarrow export --format zarr`: the query's batches streamed into a zarr table
//! (`zarrow::TableWriter`) at a path or URL. Write options come as `--option key=value`
//! with the keys of `COPY … STORED AS ZARR` (chunk_rows, shard_rows, compression,
//! string_encoding, zarr_format, layout, dimension, overwrite, break_stale_lock,
//! stale_lock_seconds); the other `--option`s stay table (read) options.

use anyhow::{Context, Result};
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::StreamExt;
use zarrow::write::WRITE_OPTION_KEYS;
use zarrow::{TableWriteOptions, TableWriter, ZarrStore};

use crate::output::Progress;

/// Take the zarr write options out of the `--option` pairs (the rest stay table options).
/// `None` when there are none.
pub(crate) fn take_write_options(
    options: &mut Vec<(String, String)>,
) -> Result<Option<TableWriteOptions>> {
    let is_write = |k: &str| {
        let key = k.to_ascii_lowercase();
        WRITE_OPTION_KEYS.contains(&key.strip_prefix("format.").unwrap_or(&key))
    };
    let write: Vec<(String, String)> = options
        .iter()
        .filter(|(k, _)| is_write(k))
        .cloned()
        .collect();
    options.retain(|(k, _)| !is_write(k));
    if write.is_empty() {
        return Ok(None);
    }
    let options =
        TableWriteOptions::from_pairs(write.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .context("invalid zarr write options")?;
    Ok(Some(options))
}

/// Write `stream` as a zarr table at `output`: staged and published in one step, so an
/// interrupted export leaves what was there (docs/writing.md, "Write safety").
pub(crate) async fn write(
    mut stream: SendableRecordBatchStream,
    output: &str,
    options: TableWriteOptions,
) -> Result<()> {
    let store = ZarrStore::open(output).with_context(|| format!("cannot open '{output}'"))?;
    let mut writer = TableWriter::try_new(store, stream.schema(), options)
        .await
        .with_context(|| format!("cannot write zarr to '{output}'"))?;
    let mut progress = Progress::new("exported");
    while let Some(batch) = stream.next().await {
        let batch = batch.context("reading the table failed")?;
        writer
            .write(&batch)
            .await
            .with_context(|| format!("cannot write zarr to '{output}'"))?;
        progress.add(batch.num_rows());
    }
    writer
        .finish()
        .await
        .with_context(|| format!("cannot write zarr to '{output}'"))?;
    progress.finish(output);
    Ok(())
}
