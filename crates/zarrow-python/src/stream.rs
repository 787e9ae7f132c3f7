//! `scan(...)`: a table read as a stream of Arrow record batches behind the Arrow PyCapsule
//! interface (`__arrow_c_stream__`), so pyarrow, polars, DuckDB and pandas take the batches
//! as zarrow made them: the C stream hands over buffers, it copies none. Also `tree` and
//! `write_array`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::{make_array, Array, RecordBatch, RecordBatchReader};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow::ffi_stream::FFI_ArrowArrayStream;
use futures::{StreamExt, TryStreamExt};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};
use zarrow::{Node, TableModel, TableWriteOptions, ZarrWriteOptions};

use crate::errors::{to_py, ZarrowError};
use crate::options::{table_options, TableKwargs};
use crate::plan::{Batches, ScanCounters, ScanPlan, ScanRequest};
use crate::runtime::{block_on, runtime};

/// A schema as an `arrow_schema` PyCapsule.
pub(crate) fn schema_capsule<'py>(
    py: Python<'py>,
    schema: &Schema,
) -> PyResult<Bound<'py, PyCapsule>> {
    let ffi = FFI_ArrowSchema::try_from(schema)
        .map_err(|e| ZarrowError::new_err(format!("cannot export the schema: {e}")))?;
    PyCapsule::new_with_value(py, ffi, c"arrow_schema")
}

/// The batches of a scan, for a C stream consumer: each `next` waits for the next batch on
/// the module's runtime (called from the consumer's thread, without the GIL).
struct BlockingReader {
    schema: SchemaRef,
    stream: Batches,
}

impl Iterator for BlockingReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => return Some(Err(ArrowError::ExternalError(e.to_string().into()))),
        };
        rt.block_on(self.stream.next())
            .map(|r| r.map_err(ArrowError::from))
    }
}

impl RecordBatchReader for BlockingReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Where a `ZarrStream` is: planned (nothing read yet), streaming, or read.
enum State {
    Planned(Box<ScanPlan>),
    Streaming(Batches),
    Done,
}

impl State {
    /// The stream, started if it was only planned; `None` once read.
    fn stream(&mut self) -> PyResult<Option<&mut Batches>> {
        if let State::Planned(plan) = self {
            let stream = plan.batches(&plan.scan, 1).map_err(to_py)?;
            *self = State::Streaming(stream);
        }
        Ok(match self {
            State::Streaming(stream) => Some(stream),
            _ => None,
        })
    }
}

/// A table being read: hand it to `pyarrow.RecordBatchReader.from_stream`,
/// `polars.from_arrow`, `duckdb`, … (read once). Iterating it yields `ZarrBatch`es.
///
/// Example::
///
///     >>> stream = zarrow.scan("data/pbmc_sample.zarr/obs", filter="dim_0 < 100")
///     >>> table = pyarrow.RecordBatchReader.from_stream(stream).read_all()
///     >>> stream.metrics["chunks_pruned"]
#[pyclass(name = "ZarrStream", module = "zarrow", frozen)]
pub(crate) struct PyZarrStream {
    schema: SchemaRef,
    batch_size_given: bool,
    counters: ScanCounters,
    state: Mutex<State>,
}

impl PyZarrStream {
    fn state(&self) -> PyResult<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| ZarrowError::new_err("the stream's lock is poisoned"))
    }
}

#[pymethods]
impl PyZarrStream {
    /// The batches as an `arrow_array_stream` PyCapsule (the Arrow PyCapsule interface).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The batches come as their schema says; a consumer that asked for another one casts.
        let _ = requested_schema;
        let mut state = self.state()?;
        if state.stream()?.is_none() {
            return Err(ZarrowError::new_err(
                "the stream was read already: scan again",
            ));
        }
        let State::Streaming(stream) = std::mem::replace(&mut *state, State::Done) else {
            unreachable!("stream() left a started stream");
        };
        let reader = BlockingReader {
            schema: self.schema.clone(),
            stream,
        };
        let ffi = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, ffi, c"arrow_array_stream")
    }

    /// The schema as an `arrow_schema` PyCapsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, self.schema.as_ref())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch (an object with `__arrow_c_array__`: `pyarrow.record_batch(b)`), read
    /// with the GIL released; zarrow's exceptions for what goes wrong.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyZarrBatch>> {
        let mut state = self.state()?;
        let Some(stream) = state.stream()? else {
            return Ok(None);
        };
        match block_on(py, stream.next())? {
            Some(Ok(batch)) => Ok(Some(PyZarrBatch { batch })),
            Some(Err(e)) => {
                *state = State::Done;
                Err(to_py(e))
            }
            None => {
                *state = State::Done;
                Ok(None)
            }
        }
    }

    /// Every batch at once, for a stream not started yet: the chunks split into one run per
    /// worker of the module's runtime, read at the same time with the GIL released, a batch
    /// per chunk unless `batch_size` was given; in order. What `read_table` uses.
    fn read_all(&self, py: Python<'_>) -> PyResult<Vec<PyZarrBatch>> {
        let mut state = self.state()?;
        let State::Planned(mut plan) = std::mem::replace(&mut *state, State::Done) else {
            return Err(ZarrowError::new_err(
                "read_all needs a stream nothing was read from: scan again",
            ));
        };
        if !self.batch_size_given {
            plan.scan.batch_per_chunk(&plan.model);
        }
        let read = async move {
            // A limit on filtered rows takes the first ones: one run, in order. Otherwise a
            // run per worker of the runtime, of nearly equal stored bytes.
            let parts = match plan.limit_after_filter() {
                true => vec![plan.scan.clone()],
                false => {
                    let workers = zarrow::ScanContext::workers();
                    plan.scan.split_by_stored_bytes(&plan.model, workers).await
                }
            };
            let streams = parts
                .iter()
                .map(|part| plan.batches(part, parts.len()))
                .collect::<zarrow::Result<Vec<_>>>()?;
            let tasks = streams
                .into_iter()
                .map(|s| tokio::spawn(s.try_collect::<Vec<_>>()))
                .collect::<Vec<_>>();
            let mut batches = Vec::new();
            for task in tasks {
                match task.await {
                    Ok(part) => batches.extend(part?),
                    Err(e) => {
                        return Err(zarrow::Error::InvalidArgument(format!(
                            "a read task failed: {e}"
                        )))
                    }
                }
            }
            Ok(batches)
        };
        let batches = block_on(py, read)?.map_err(to_py)?;
        Ok(batches
            .into_iter()
            .map(|batch| PyZarrBatch { batch })
            .collect())
    }

    /// What the scan has done so far, by name: `chunks_total`, `chunks_kept` and
    /// `chunks_pruned` (by `filter`/`prune`, before the scan starts), `chunks_read`,
    /// `rows_read`, `rows_out` (after the filter), `requests`, `bytes_fetched`,
    /// `fetch_seconds`, `decode_seconds`.
    #[getter]
    fn metrics(&self) -> HashMap<&'static str, f64> {
        self.counters.snapshot().into_iter().collect()
    }

    /// The column names.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }
}

/// One record batch, for `pyarrow.record_batch(...)` (the Arrow PyCapsule interface).
///
/// Example::
///
///     >>> batch = next(iter(zarrow.scan("data/pbmc_sample.zarr/obs")))
///     >>> pyarrow.record_batch(batch).num_rows
#[pyclass(name = "ZarrBatch", module = "zarrow", frozen)]
pub(crate) struct PyZarrBatch {
    batch: RecordBatch,
}

#[pymethods]
impl PyZarrBatch {
    /// The batch as a struct array: `(arrow_schema, arrow_array)` PyCapsules.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let array = arrow::array::StructArray::from(self.batch.clone());
        let (array, schema) = arrow::ffi::to_ffi(&array.to_data())
            .map_err(|e| ZarrowError::new_err(format!("cannot export the batch: {e}")))?;
        let schema = PyCapsule::new_with_value(py, schema, c"arrow_schema")?;
        let array = PyCapsule::new_with_value(py, array, c"arrow_array")?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }

    /// The number of rows.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }
}

/// The plan of a read of the table at `location`.
fn open_plan(
    py: Python<'_>,
    location: &str,
    columns: Option<Vec<String>>,
    mut request: ScanRequest,
    kwargs: TableKwargs,
) -> PyResult<ScanPlan> {
    let options = kwargs.table_options()?;
    let store = kwargs.store(location)?;
    let opened = block_on(py, async {
        let node = Node::open_store(store.clone(), "").await?;
        TableModel::from_node(node, options).await
    })?;
    let model =
        opened.map_err(|e| crate::usage::explain_open_error(py, location, &store, to_py(e)))?;
    if let Some(columns) = columns {
        let projection = columns
            .iter()
            .map(|c| model.column_index(c).map_err(to_py))
            .collect::<PyResult<Vec<usize>>>()?;
        request.projection = Some(projection);
    }
    block_on(py, ScanPlan::new(Arc::new(model), request))?.map_err(to_py)
}

/// Read the table at `location` (an array or a group) as a stream of Arrow record batches.
///
/// `filter` is a SQL predicate (DataFusion's SQL) the rows handed out satisfy; its parts on
/// dimension, index and coordinate columns skip the chunks that cannot match, as a SQL
/// query's `WHERE` does. `prune` only skips chunks (for a caller that filters itself).
/// `limit` counts rows after the filter. `dictionary` names string or binary columns read as
/// Arrow dictionaries, a batch's distinct values and a key a row (polars `Categorical`, pandas
/// `category`). `range_split_bytes` (default 8 MiB; 0: never) splits
/// a larger chunk read into ranged GETs in flight at once, `coalesce_bytes` (default 1 MiB)
/// reads ranges of one object that close to each other (a shard's inner chunks) by one GET.
/// `ZarrStream.metrics` shows what was read.
///
/// Example::
///
///     >>> import duckdb, zarrow
///     >>> stream = zarrow.scan("data/pbmc_sample.zarr/obs", ["cell_type"], filter="dim_0 < 100")
///     >>> duckdb.sql("SELECT cell_type, count(*) FROM stream GROUP BY ALL").fetchall()
#[pyfunction]
#[pyo3(signature = (location, columns=None, *, filter=None, prune=None, batch_size=None, limit=None, string_type=None, fill_as_null=None, decode_cf=None, arrays=None, dictionary=None, storage_options=None, r#ref=None, range_split_bytes=None, coalesce_bytes=None, **unknown))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan(
    py: Python<'_>,
    location: String,
    columns: Option<Vec<String>>,
    filter: Option<String>,
    prune: Option<String>,
    batch_size: Option<usize>,
    limit: Option<usize>,
    string_type: Option<String>,
    fill_as_null: Option<bool>,
    decode_cf: Option<bool>,
    arrays: Option<Vec<String>>,
    dictionary: Option<Vec<String>>,
    storage_options: Option<HashMap<String, String>>,
    r#ref: Option<String>,
    range_split_bytes: Option<u64>,
    coalesce_bytes: Option<u64>,
    unknown: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyZarrStream> {
    let valid = [
        &["columns", "filter", "prune", "batch_size", "limit"][..],
        &table_options(),
    ]
    .concat();
    crate::usage::check_no_unknown("scan", unknown, &valid)?;
    let kwargs = TableKwargs::reading(
        storage_options,
        string_type,
        fill_as_null,
        decode_cf,
        arrays,
        dictionary,
        r#ref,
        range_split_bytes,
        coalesce_bytes,
    )?;
    let request = ScanRequest {
        projection: None,
        filter,
        prune,
        batch_size,
        limit,
    };
    let plan = open_plan(py, &location, columns, request, kwargs)?;
    Ok(PyZarrStream {
        schema: plan.schema.clone(),
        batch_size_given: batch_size.is_some(),
        counters: plan.metrics.clone(),
        state: Mutex::new(State::Planned(Box::new(plan))),
    })
}

/// The hierarchy at `location` as text: groups and arrays with shape, chunks, data type,
/// codecs and fill value.
///
/// Example::
///
///     >>> print(zarrow.tree("data/pbmc_sample.zarr"))
#[pyfunction]
#[pyo3(signature = (location, *, storage_options=None))]
pub(crate) fn tree(
    py: Python<'_>,
    location: String,
    storage_options: Option<HashMap<String, String>>,
) -> PyResult<String> {
    let store = TableKwargs::new(storage_options).store(&location)?;
    block_on(py, async {
        let node = Node::open_store(store, "").await?;
        zarrow::tree::render_node(&location, node).await
    })?
    .map_err(to_py)
}

/// Write an Arrow array (anything with `__arrow_c_array__`: pyarrow, polars, …) as a zarr v3
/// array at `location`. `string_encoding` and `compression` take the values of `write_table`'s
/// options of those names; `encoding` is the old name of `string_encoding` (deprecated).
///
/// Example::
///
///     >>> zarrow.write_array("labels.zarr", pyarrow.array(["a", "b"]), compression="zstd")
#[pyfunction]
#[pyo3(signature = (location, array, *, shape=None, chunks=None, string_encoding=None, compression=None, dimension_names=None, overwrite=false, storage_options=None, encoding=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_array(
    py: Python<'_>,
    location: String,
    array: Bound<'_, PyAny>,
    shape: Option<Vec<u64>>,
    chunks: Option<Vec<u64>>,
    string_encoding: Option<String>,
    compression: Option<String>,
    dimension_names: Option<Vec<String>>,
    overwrite: bool,
    storage_options: Option<HashMap<String, String>>,
    encoding: Option<String>,
) -> PyResult<()> {
    let values = import_array(&array)?;
    // The table writer's options parse both (one spelling of each value).
    let mut parsed = TableWriteOptions {
        compression: None,
        ..Default::default()
    };
    if let Some(value) = deprecated_encoding(py, string_encoding, encoding)? {
        parsed.set("string_encoding", &value).map_err(to_py)?;
    }
    if let Some(value) = &compression {
        parsed.set("compression", value).map_err(to_py)?;
    }
    let shape = shape.unwrap_or_else(|| vec![values.len() as u64]);
    let options = ZarrWriteOptions {
        chunk_shape: chunks,
        string_encoding: parsed.string_encoding,
        compression: parsed.compression,
        dimension_names,
        overwrite,
        ..Default::default()
    };
    let store = TableKwargs::new(storage_options).store(&location)?;
    block_on(py, async {
        zarrow::write_array(&store, "", values.as_ref(), &shape, &options).await
    })?
    .map_err(to_py)
}

/// `write_array`'s string encoding: `string_encoding`, or the deprecated `encoding` keyword
/// and `large_arrow_vlen` value (each with a `DeprecationWarning`).
fn deprecated_encoding(
    py: Python<'_>,
    string_encoding: Option<String>,
    encoding: Option<String>,
) -> PyResult<Option<String>> {
    let warn = |message: &std::ffi::CStr| {
        let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
        PyErr::warn(py, category.as_any(), message, 2)
    };
    let value = match (string_encoding, encoding) {
        (Some(_), Some(_)) => {
            return Err(ZarrowError::new_err(
                "give string_encoding only (encoding is its deprecated name)",
            ))
        }
        (None, Some(old)) => {
            warn(c"write_array: encoding= is deprecated; use string_encoding=")?;
            Some(old)
        }
        (value, None) => value,
    };
    Ok(match value.as_deref() {
        Some("large_arrow_vlen") => {
            warn(c"write_array: 'large_arrow_vlen' is deprecated; use 'arrow_vlen_large'")?;
            Some("arrow_vlen_large".to_string())
        }
        _ => value,
    })
}

/// An array from the Arrow PyCapsule interface (`__arrow_c_array__`), checked before use: both
/// capsules by name, neither released (a capsule pair handed out twice, or consumed by another
/// reader, has a NULL release callback), the schema with a format string.
fn import_array(obj: &Bound<'_, PyAny>) -> PyResult<Arc<dyn Array>> {
    let pair = obj.call_method0("__arrow_c_array__").map_err(|_| {
        ZarrowError::new_err("expected an Arrow array (an object with __arrow_c_array__)")
    })?;
    let bad = |what: &str| {
        ZarrowError::new_err(format!(
            "__arrow_c_array__ did not return (schema, array) capsules: {what}"
        ))
    };
    let pair = pair.cast::<PyTuple>().map_err(|_| bad("not a tuple"))?;
    if pair.len() != 2 {
        return Err(bad(&format!("a tuple of {} items", pair.len())));
    }
    let schema = pair.get_item(0)?;
    let array = pair.get_item(1)?;
    let schema = schema
        .cast::<PyCapsule>()
        .map_err(|_| bad("the first item is not a capsule"))?;
    let array = array
        .cast::<PyCapsule>()
        .map_err(|_| bad("the second item is not a capsule"))?;
    let schema_ptr = schema
        .pointer_checked(Some(c"arrow_schema"))
        .map_err(|_| bad("the first capsule is not named 'arrow_schema'"))?;
    let array_ptr = array
        .pointer_checked(Some(c"arrow_array"))
        .map_err(|_| bad("the second capsule is not named 'arrow_array'"))?;
    // SAFETY: the capsules' names were checked: by the Arrow PyCapsule interface an
    // `arrow_schema` capsule holds an `ArrowSchema` and an `arrow_array` capsule an
    // `ArrowArray`, both non-NULL (`pointer_checked`). They are read only after their release
    // callbacks (and the schema's format) are checked non-NULL: a released struct holds
    // dangling pointers. The schema is borrowed; the array is moved out (`from_raw` leaves a
    // released struct behind, as the interface asks of a consumer).
    let data = unsafe {
        let schema = schema_ptr.cast::<FFI_ArrowSchema>().as_ref();
        if schema.release.is_none() || schema.format.is_null() {
            return Err(bad("the schema was already released"));
        }
        if array_ptr.cast::<FFI_ArrowArray>().as_ref().is_released() {
            return Err(bad(
                "the array was already released (consumed by an earlier import)",
            ));
        }
        let array = FFI_ArrowArray::from_raw(array_ptr.cast::<FFI_ArrowArray>().as_ptr());
        from_ffi(array, schema)
    }
    .map_err(|e| ZarrowError::new_err(format!("cannot import the array: {e}")))?;
    Ok(make_array(data))
}
