//! Arrays as streams of `RecordBatch`es: the "array table" of the design.
//!
//! Columns: one Int64 index column per dimension (named by `dimension_names` /
//! `_ARRAY_DIMENSIONS`, else `dim_i`), then the values (named after the array, `value` for a root
//! array; an index column that would share that name becomes `<name>_index`). Batches come chunk
//! by chunk in C order of the chunk grid, at most `batch_size` rows each.
//!
//! [`ZarrRecordBatchStreamBuilder`] is async; [`ZarrRecordBatchReaderBuilder`] wraps it with its
//! own runtime for synchronous callers. Projection decides what is fetched (index columns alone
//! fetch nothing); `with_limit` decides up front which chunks are needed, so reading stops there.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow_schema::{ArrowError, DataType as ArrowType, Field, Schema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::array::{ChunkReader, ZarrArray};
use crate::options::ZarrReadOptions;
use crate::{Error, Result};

/// Names of the columns of an array table: the dimension columns, then the value column.
pub fn array_table_names(array: &ZarrArray) -> (Vec<String>, String) {
    let value = array.name().to_string();
    let dims = (0..array.shape().len())
        .map(|d| {
            let name = array
                .metadata()
                .dimension_name(d)
                .map(str::to_string)
                .unwrap_or_else(|| format!("dim_{d}"));
            if name == value {
                format!("{name}_index")
            } else {
                name
            }
        })
        .collect();
    (dims, value)
}

/// The Int64 index columns of the in-bounds part of the chunk at `coords`, one per dimension.
pub fn index_columns(array: &ZarrArray, coords: &[u64]) -> Result<Vec<ArrayRef>> {
    let valid = array.chunk_valid_shape(coords)?;
    let cs = array.chunk_shape();
    let n: u64 = valid.iter().product();
    let mut out = Vec::with_capacity(valid.len());
    let mut repeat = n; // elements per step of this dimension, outer dims first
    let mut tile = 1u64;
    for d in 0..valid.len() {
        repeat /= valid[d].max(1);
        let origin = (coords[d] * cs[d]) as i64;
        let mut values = Vec::with_capacity(n as usize);
        for _ in 0..tile {
            for i in 0..valid[d] as i64 {
                values.extend(std::iter::repeat_n(origin + i, repeat as usize));
            }
        }
        tile *= valid[d];
        out.push(Arc::new(Int64Array::from(values)) as ArrayRef);
    }
    Ok(out)
}

/// Builds a stream of record batches over one array.
#[derive(Debug, Clone)]
pub struct ZarrRecordBatchStreamBuilder {
    array: ZarrArray,
    options: ZarrReadOptions,
    chunks: Option<Vec<Vec<u64>>>,
    batch_size: usize,
    limit: Option<usize>,
    projection: Option<Vec<usize>>,
}

impl ZarrRecordBatchStreamBuilder {
    /// Open the array at `location`.
    pub async fn try_new(location: &str) -> Result<Self> {
        Ok(Self::new(ZarrArray::open(location).await?))
    }

    /// A builder over an open array.
    pub fn new(array: ZarrArray) -> Self {
        ZarrRecordBatchStreamBuilder {
            array,
            options: ZarrReadOptions::default(),
            chunks: None,
            batch_size: 65_536,
            limit: None,
            projection: None,
        }
    }

    /// The array.
    pub fn array(&self) -> &ZarrArray {
        &self.array
    }

    /// Reader options (string type, concurrency).
    pub fn with_options(mut self, options: ZarrReadOptions) -> Self {
        self.options = options;
        self
    }

    /// Read only these chunks (read-unit coordinates), in this order.
    pub fn with_chunks(mut self, chunks: Vec<Vec<u64>>) -> Self {
        self.chunks = Some(chunks);
        self
    }

    /// Rows per batch at most (default 65,536); chunks are split, never merged.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Stop after this many rows.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Keep only these columns (indices into [`Self::schema`]).
    pub fn with_projection(mut self, projection: Vec<usize>) -> Self {
        self.projection = Some(projection);
        self
    }

    fn full_schema(&self) -> SchemaRef {
        let (dims, value) = array_table_names(&self.array);
        let mut fields: Vec<Field> = dims
            .iter()
            .map(|d| Field::new(d, ArrowType::Int64, false))
            .collect();
        fields.push(self.array.arrow_field(&value, &self.options));
        Arc::new(Schema::new(fields))
    }

    /// The schema of the batches (after projection).
    pub fn schema(&self) -> SchemaRef {
        let full = self.full_schema();
        match &self.projection {
            None => full,
            Some(p) => Arc::new(full.project(p).unwrap_or_else(|_| Schema::empty())),
        }
    }

    /// Build the stream.
    pub fn build(self) -> Result<ZarrRecordBatchStream> {
        self.options.string_type.check_available()?;
        let full = self.full_schema();
        let ndim = self.array.shape().len();
        let projection: Vec<usize> = self
            .projection
            .clone()
            .unwrap_or_else(|| (0..=ndim).collect());
        if let Some(bad) = projection.iter().find(|&&i| i > ndim) {
            return Err(Error::InvalidArgument(format!(
                "projection index {bad} out of range"
            )));
        }
        let schema: SchemaRef = Arc::new(full.project(&projection)?);
        let chunks = self
            .chunks
            .clone()
            .unwrap_or_else(|| self.array.all_chunks());
        // Decide up front which chunks a limit needs, and how many rows of the last one.
        let mut plan: Vec<(Vec<u64>, usize)> = Vec::with_capacity(chunks.len());
        let mut remaining = self.limit.unwrap_or(usize::MAX);
        for c in chunks {
            if remaining == 0 {
                break;
            }
            let rows: u64 = self.array.chunk_valid_shape(&c)?.iter().product();
            let take = (rows as usize).min(remaining);
            remaining -= take;
            plan.push((c, take));
        }
        let needs_values = projection.contains(&ndim);
        let array = self.array.clone();
        let options = self.options.clone();
        let batch_size = self.batch_size;
        let out_schema = schema.clone();
        // Fetch up to `concurrency` chunks ahead, each as its own task; decode the chunk being
        // handed out a batch at a time (see `TableModel::read_chunks`).
        let fetcher = array.clone();
        let stream = futures::stream::iter(plan)
            .map(move |(coords, take)| {
                let array = fetcher.clone();
                in_background(async move {
                    let stored = if needs_values {
                        Some(array.fetch_chunk(&coords).await?)
                    } else {
                        None
                    };
                    Ok((coords, take, stored))
                })
            })
            .buffered(self.options.concurrency.max(1))
            .and_then(move |(coords, take, stored)| {
                let array = array.clone();
                let options = options.clone();
                let projection = projection.clone();
                let schema = out_schema.clone();
                async move {
                    let mut values = match stored {
                        Some(stored) => Some(array.chunk_reader(&coords, stored, &options).await?),
                        None => None,
                    };
                    let index = index_columns(&array, &coords)?;
                    // A value column projected twice is decoded whole, once.
                    let mut whole = None;
                    if projection.iter().filter(|&&i| i == ndim).count() > 1 {
                        if let Some(reader) = values.as_mut() {
                            whole = Some(reader.next_rows(reader.remaining())?);
                        }
                    }
                    let columns = projection
                        .iter()
                        .map(|&i| {
                            if let Some(column) = index.get(i).or(whole.as_ref()) {
                                return Ok(ColumnRuns::Whole(column.clone()));
                            }
                            let reader = values.take().ok_or_else(|| {
                                Error::InvalidArgument(format!("projection index {i}: no values"))
                            })?;
                            Ok(ColumnRuns::Runs(Box::new(reader), None))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Ok::<_, Error>(futures::stream::iter(ChunkBatches::new(
                        schema, columns, take, batch_size,
                    )))
                }
            })
            .try_flatten()
            .boxed();
        Ok(ZarrRecordBatchStream {
            schema,
            inner: stream,
        })
    }
}

/// A stream of record batches (see [`ZarrRecordBatchStreamBuilder`]).
pub struct ZarrRecordBatchStream {
    schema: SchemaRef,
    inner: BoxStream<'static, Result<RecordBatch>>,
}

impl std::fmt::Debug for ZarrRecordBatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrRecordBatchStream")
            .field("schema", &self.schema)
            .finish()
    }
}

impl ZarrRecordBatchStream {
    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

impl futures::Stream for ZarrRecordBatchStream {
    type Item = Result<RecordBatch>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}

/// Synchronous reading: a [`ZarrRecordBatchStreamBuilder`] driven by a runtime of its own.
#[derive(Debug)]
pub struct ZarrRecordBatchReaderBuilder {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: ZarrRecordBatchStreamBuilder,
}

fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|e| Error::InvalidArgument(format!("cannot start a Tokio runtime: {e}")))
}

impl ZarrRecordBatchReaderBuilder {
    /// Open the array at `location`.
    pub fn try_new(location: &str) -> Result<Self> {
        let runtime = runtime()?;
        let inner = runtime.block_on(ZarrRecordBatchStreamBuilder::try_new(location))?;
        Ok(ZarrRecordBatchReaderBuilder { runtime, inner })
    }

    /// Read an already open array.
    pub fn new(array: ZarrArray) -> Result<Self> {
        Ok(ZarrRecordBatchReaderBuilder {
            runtime: runtime()?,
            inner: ZarrRecordBatchStreamBuilder::new(array),
        })
    }

    /// The array.
    pub fn array(&self) -> &ZarrArray {
        self.inner.array()
    }

    /// See [`ZarrRecordBatchStreamBuilder::with_options`].
    pub fn with_options(mut self, options: ZarrReadOptions) -> Self {
        self.inner = self.inner.with_options(options);
        self
    }

    /// See [`ZarrRecordBatchStreamBuilder::with_chunks`].
    pub fn with_chunks(mut self, chunks: Vec<Vec<u64>>) -> Self {
        self.inner = self.inner.with_chunks(chunks);
        self
    }

    /// See [`ZarrRecordBatchStreamBuilder::with_batch_size`].
    pub fn with_batch_size(mut self, n: usize) -> Self {
        self.inner = self.inner.with_batch_size(n);
        self
    }

    /// See [`ZarrRecordBatchStreamBuilder::with_limit`].
    pub fn with_limit(mut self, n: usize) -> Self {
        self.inner = self.inner.with_limit(n);
        self
    }

    /// See [`ZarrRecordBatchStreamBuilder::with_projection`].
    pub fn with_projection(mut self, p: Vec<usize>) -> Self {
        self.inner = self.inner.with_projection(p);
        self
    }

    /// The schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    /// Read one chunk as an Arrow array (its in-bounds elements, C order).
    pub fn read_chunk(&self, coords: &[u64]) -> Result<ArrayRef> {
        self.runtime
            .block_on(self.inner.array.read_chunk(coords, &self.inner.options))
    }

    /// Build the reader.
    pub fn build(self) -> Result<ZarrRecordBatchReader> {
        let _guard = self.runtime.enter();
        let stream = self.inner.build()?;
        Ok(ZarrRecordBatchReader {
            runtime: self.runtime,
            stream,
        })
    }
}

/// A synchronous iterator of record batches.
#[derive(Debug)]
pub struct ZarrRecordBatchReader {
    runtime: Arc<tokio::runtime::Runtime>,
    stream: ZarrRecordBatchStream,
}

impl Iterator for ZarrRecordBatchReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.runtime
            .block_on(self.stream.next())
            .map(|r| r.map_err(ArrowError::from))
    }
}

impl RecordBatchReader for ZarrRecordBatchReader {
    fn schema(&self) -> SchemaRef {
        self.stream.schema()
    }
}

/// What one column of a chunk's batches is cut from.
pub(crate) enum ColumnRuns {
    /// Decoded a run of rows at a time; `map` (if any) applied to each run.
    Runs(Box<ChunkReader>, Option<RunMap>),
    /// The column's rows for the whole chunk, sliced.
    Whole(ArrayRef),
}

/// What is applied to each run of a column decoded run by run (e.g. fill values → NULL).
pub(crate) type RunMap = Arc<dyn Fn(ArrayRef) -> Result<ArrayRef> + Send + Sync>;

/// The first `rows` rows of one chunk, as record batches of at most `batch_size` rows: each
/// batch is decoded when it is asked for (see [`crate::decode::rows`]), so a consumer reads it
/// while it is in cache, and nothing of the chunk is held decoded whole.
pub(crate) struct ChunkBatches {
    schema: SchemaRef,
    columns: Vec<ColumnRuns>,
    /// Rows handed out, and to hand out in all.
    done: usize,
    rows: usize,
    batch_size: usize,
}

impl ChunkBatches {
    pub(crate) fn new(
        schema: SchemaRef,
        columns: Vec<ColumnRuns>,
        rows: usize,
        batch_size: usize,
    ) -> Self {
        ChunkBatches {
            schema,
            columns,
            done: 0,
            rows,
            batch_size: batch_size.max(1),
        }
    }

    fn batch(&mut self, k: usize) -> Result<RecordBatch> {
        let offset = self.done;
        let columns = self
            .columns
            .iter_mut()
            .map(|c| match c {
                ColumnRuns::Runs(reader, map) => {
                    let run = reader.next_rows(k)?;
                    match map {
                        Some(map) => map(run),
                        None => Ok(run),
                    }
                }
                ColumnRuns::Whole(array) => Ok(array.slice(offset, k)),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(k)),
        )?)
    }
}

impl Iterator for ChunkBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let k = self.batch_size.min(self.rows - self.done);
        if k == 0 {
            return None;
        }
        let batch = self.batch(k);
        // After an error nothing more of this chunk is handed out.
        self.done = if batch.is_ok() {
            self.done + k
        } else {
            self.rows
        };
        Some(batch)
    }
}

/// `fut`, run as its own tokio task when there is a runtime (so that it makes progress while
/// its caller is busy elsewhere; aborted when the returned future is dropped), else in place.
pub(crate) fn in_background<T: Send + 'static>(
    fut: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> futures::future::BoxFuture<'static, Result<T>> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return Box::pin(fut);
    };
    struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);
    impl<T> Drop for AbortOnDrop<T> {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let mut task = AbortOnDrop(runtime.spawn(fut));
    Box::pin(async move {
        (&mut task.0)
            .await
            .map_err(|e| Error::InvalidArgument(format!("fetch task failed: {e}")))?
    })
}
