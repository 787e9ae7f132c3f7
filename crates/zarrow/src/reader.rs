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
use futures::StreamExt;

use crate::array::ZarrArray;
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
        let stream = futures::stream::iter(plan)
            .map(move |(coords, take)| {
                let array = array.clone();
                let options = options.clone();
                let projection = projection.clone();
                let schema = out_schema.clone();
                async move {
                    let values = if needs_values {
                        Some(array.read_chunk(&coords, &options).await?)
                    } else {
                        None
                    };
                    let index = index_columns(&array, &coords)?;
                    let columns: Vec<ArrayRef> = projection
                        .iter()
                        .map(|&i| {
                            if i < ndim {
                                index[i].clone()
                            } else {
                                values.clone().unwrap_or_else(|| index[0].clone())
                            }
                        })
                        .collect();
                    let rows = index.first().map_or(1, |a| a.len());
                    let batch = RecordBatch::try_new_with_options(
                        schema,
                        columns,
                        &RecordBatchOptions::new().with_row_count(Some(rows)),
                    )?;
                    Ok::<_, Error>(futures::stream::iter(crate::reader::split_batch(
                        &batch, take, batch_size,
                    )))
                }
            })
            .buffered(self.options.concurrency.max(1))
            .flat_map(|r| match r {
                Ok(s) => s.boxed(),
                Err(e) => futures::stream::iter(vec![Err(e)]).boxed(),
            })
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

/// The first `take` rows of a chunk's batch, as batches of at most `batch_size` rows (slices:
/// no copy).
pub(crate) fn split_batch(
    batch: &RecordBatch,
    take: usize,
    batch_size: usize,
) -> Vec<Result<RecordBatch>> {
    let rows = take.min(batch.num_rows());
    let batch_size = batch_size.max(1);
    (0..rows)
        .step_by(batch_size)
        .map(|offset| Ok(batch.slice(offset, batch_size.min(rows - offset))))
        .collect()
}
