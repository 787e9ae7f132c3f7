//! `write_table`: any Arrow stream (`__arrow_c_stream__`: pyarrow tables and readers, polars
//! frames, DuckDB results) written as a zarr table, batch by batch as the stream yields them
//! (never collected), with the GIL released; the options are those of `COPY … STORED AS ZARR`.

use std::collections::HashMap;

use arrow::array::RecordBatchReader;
use arrow::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCapsule, PyDict};
use zarrow::{TableWriteOptions, TableWriter};

use crate::errors::{to_py, ZarrowError};
use crate::options::TableKwargs;
use crate::runtime::block_on;

/// The Arrow stream `data` exports through the Arrow PyCapsule interface.
fn import_stream(data: &Bound<'_, PyAny>) -> PyResult<ArrowArrayStreamReader> {
    let capsule = data.call_method0("__arrow_c_stream__").map_err(|_| {
        ZarrowError::new_err(
            "expected Arrow data with __arrow_c_stream__ (a pyarrow Table or \
             RecordBatchReader, a polars DataFrame, a DuckDB result, …)",
        )
    })?;
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| ZarrowError::new_err("__arrow_c_stream__ did not return a capsule"))?;
    let ptr = capsule
        .pointer_checked(Some(c"arrow_array_stream"))
        .map_err(|_| ZarrowError::new_err("the capsule is not named 'arrow_array_stream'"))?;
    // SAFETY: by the Arrow PyCapsule interface an `arrow_array_stream` capsule holds a
    // non-NULL `ArrowArrayStream`; `from_raw` moves it out and marks the capsule's struct
    // released, so the capsule's destructor does not release it a second time.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr().cast()) };
    ArrowArrayStreamReader::try_new(stream)
        .map_err(|e| ZarrowError::new_err(format!("cannot read the Arrow stream: {e}")))
}

/// A keyword option's value as the string the option parser takes.
fn option_value(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.into());
    }
    Ok(value.str()?.to_string())
}

/// Write `data` (anything with `__arrow_c_stream__`) as a zarr table at `location`: a group of
/// 1-D arrays, one per column, over one dimension (or, with `layout="anndata"`, an AnnData
/// dataframe). Options (keywords): chunk_rows, shard_rows, compression, string_encoding,
/// zarr_format, layout, index, dimension, overwrite, break_stale_lock, stale_lock_seconds
/// (docs/writing.md, "Write safety"), create_repository, commit_message (Icechunk locations,
/// docs/icechunk.md). Returns the number of rows written and the snapshot an Icechunk commit
/// made (`None` for other stores): `zarrow.write_table` (Python) makes them one `WriteResult`.
#[pyfunction]
#[pyo3(name = "_write_table", signature = (location, data, *, storage_options=None, **options))]
pub(crate) fn write_table(
    py: Python<'_>,
    location: String,
    data: Bound<'_, PyAny>,
    storage_options: Option<HashMap<String, String>>,
    options: Option<Bound<'_, PyDict>>,
) -> PyResult<(u64, Option<String>)> {
    let mut write_options = TableWriteOptions::default();
    if let Some(options) = options {
        for (key, value) in options.iter() {
            let key: String = key.extract()?;
            write_options
                .set(&key, &option_value(&value)?)
                .map_err(to_py)?;
        }
    }
    write_options.validate().map_err(to_py)?;
    let store = TableKwargs::new(storage_options).store(&location)?;
    let mut reader = import_stream(&data)?;
    let schema = reader.schema();
    block_on(py, async move {
        let mut writer = TableWriter::try_new(store, schema, write_options).await?;
        // The producer's next batch is pulled only once this one is handed to the encoders.
        for batch in reader.by_ref() {
            writer.write(&batch?).await?;
        }
        let written = writer.finish_written().await?;
        Ok::<_, zarrow::Error>((written.rows, written.snapshot))
    })?
    .map_err(to_py)
}
