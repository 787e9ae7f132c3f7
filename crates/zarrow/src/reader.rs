//! Tables as streams of `RecordBatch`es, in the style of arrow-rs's Parquet readers.
//!
//! [`ZarrRecordBatchStreamBuilder`] opens a table (an array or a group, see [`crate::table`]),
//! exposes its schema, takes `with_projection`, `with_chunks`, `with_limit` and
//! `with_batch_size`, and either writes the read down as a [`ZarrScan`] (`scan()`) or opens it
//! (`build()`): both are the same scan ([`crate::scan`]). [`ZarrRecordBatchReaderBuilder`] is
//! the synchronous form, driving the stream on a runtime of its own (also when called from
//! inside another runtime).

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use futures::StreamExt;

use crate::array::ZarrArray;
use crate::grid::ChunkRanges;
use crate::node::Node;
use crate::options::ZarrReadOptions;
use crate::scan::{ScanContext, ZarrRecordBatchStream, ZarrScan};
use crate::table::{TableModel, TableOptions};
use crate::task::{block_on, SyncRuntime};
use crate::{Error, Result};

/// Builds a stream of record batches over a table.
///
/// ```
/// use futures::TryStreamExt;
/// use zarrow::{StringType, ZarrReadOptions, ZarrRecordBatchStreamBuilder};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let obs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/obs");
/// let options = ZarrReadOptions::default().with_string_type(StringType::LargeUtf8);
/// let stream = ZarrRecordBatchStreamBuilder::try_new(obs)
///     .await?
///     .with_options(options)
///     .with_limit(10)
///     .build()?;
/// let batches: Vec<_> = stream.try_collect().await?;
/// assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
/// // An AnnData categorical column: a dictionary of its categories, as large strings here.
/// let cell_type = batches[0].schema().field_with_name("cell_type")?.clone();
/// let large = arrow_schema::DataType::LargeUtf8;
/// assert!(matches!(cell_type.data_type(), arrow_schema::DataType::Dictionary(_, v) if **v == large));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ZarrRecordBatchStreamBuilder {
    model: Arc<TableModel>,
    scan: ZarrScan,
    /// Column indices, when projected.
    projection: Option<Vec<usize>>,
    /// An option that could not be applied (key, what is wrong), reported by `scan` and
    /// `build`.
    error: Option<(String, String)>,
}

impl ZarrRecordBatchStreamBuilder {
    /// Open the table at `location` (an array or a group) with default options.
    pub async fn try_new(location: &str) -> Result<Self> {
        Self::try_new_with_options(location, TableOptions::default()).await
    }

    /// Open the table at `location` with `options`.
    pub async fn try_new_with_options(location: &str, options: TableOptions) -> Result<Self> {
        Ok(Self::new(Arc::new(
            TableModel::open(location, options).await?,
        )))
    }

    /// A builder over an open table.
    pub fn new(model: Arc<TableModel>) -> Self {
        ZarrRecordBatchStreamBuilder {
            scan: ZarrScan::new(&model),
            model,
            projection: None,
            error: None,
        }
    }

    /// A builder over an open array (its array table).
    pub async fn for_array(array: ZarrArray) -> Result<Self> {
        let model = TableModel::from_node(Node::Array(array), TableOptions::default()).await?;
        Ok(Self::new(Arc::new(model)))
    }

    /// The table.
    pub fn model(&self) -> &Arc<TableModel> {
        &self.model
    }

    /// Reader options (string type, concurrency): the string type changes the schema. A
    /// string type this build cannot read makes `scan` and `build` fail.
    pub fn with_options(mut self, options: ZarrReadOptions) -> Self {
        match self.model.with_read_options(options) {
            Ok(model) => {
                self.scan.options = model.options().clone();
                self.model = Arc::new(model);
            }
            Err(Error::InvalidOption { key, message }) => self.error = Some((key, message)),
            Err(e) => self.error = Some(("read options".into(), e.to_string())),
        }
        self
    }

    /// Read only these chunks of rows (see [`TableModel::all_chunks`]).
    pub fn with_chunks(mut self, chunks: ChunkRanges) -> Self {
        self.scan.chunks = chunks;
        self
    }

    /// Rows per batch at most (default 65,536); chunks are split, never merged.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.scan.batch_size = batch_size.max(1);
        self
    }

    /// Stop after this many rows.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.scan.limit = Some(limit as u64);
        self
    }

    /// Keep only these columns (indices into the table's schema, in this order).
    pub fn with_projection(mut self, projection: Vec<usize>) -> Self {
        self.projection = Some(projection);
        self
    }

    /// The schema of the batches (after projection; out-of-range indices are left out here
    /// and refused by [`Self::build`]).
    pub fn schema(&self) -> SchemaRef {
        let full = self.model.schema();
        match &self.projection {
            None => full,
            Some(p) => {
                let valid: Vec<usize> = p
                    .iter()
                    .copied()
                    .filter(|&i| i < full.fields().len())
                    .collect();
                Arc::new(
                    full.project(&valid)
                        .unwrap_or_else(|_| full.as_ref().clone()),
                )
            }
        }
    }

    /// The read, written down: what [`Self::build`] runs, to run here or elsewhere. With a
    /// limit, only the chunks it needs are kept.
    pub fn scan(&self) -> Result<ZarrScan> {
        if let Some((key, message)) = &self.error {
            return Err(Error::invalid_option(key.clone(), message.clone()));
        }
        let mut scan = self.scan.clone();
        if let Some(projection) = &self.projection {
            let fields = self.model.schema();
            scan.columns = projection
                .iter()
                .map(|&i| {
                    fields
                        .fields()
                        .get(i)
                        .map(|f| f.name().clone())
                        .ok_or_else(|| {
                            Error::InvalidArgument(format!(
                                "'{}': projection index {i} out of range (the table has {} \
                                 columns)",
                                self.model.location(),
                                fields.fields().len()
                            ))
                        })
                })
                .collect::<Result<_>>()?;
        }
        if let Some(limit) = scan.limit {
            scan.chunks = scan
                .chunks
                .take_rows(self.model.grid(), limit)
                .map_err(|e| e.in_array(self.model.location()))?;
        }
        Ok(scan)
    }

    /// Build the stream.
    pub fn build(self) -> Result<ZarrRecordBatchStream> {
        self.scan()?
            .stream(self.model.clone(), ScanContext::default().for_partitions(1))
    }
}

/// Synchronous reading: a [`ZarrRecordBatchStreamBuilder`] driven by a runtime of its own.
///
/// ```
/// use arrow_array::RecordBatchReader;
/// use zarrow::ZarrRecordBatchReaderBuilder;
///
/// let obs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/obs");
/// let reader = ZarrRecordBatchReaderBuilder::try_new(obs)?
///     .with_limit(100)
///     .build()?;
/// let schema = reader.schema();
/// let batches = reader.collect::<Result<Vec<_>, _>>()?;
/// assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 100);
/// assert!(batches.iter().all(|b| b.schema() == schema));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ZarrRecordBatchReaderBuilder {
    runtime: SyncRuntime,
    inner: ZarrRecordBatchStreamBuilder,
}

impl ZarrRecordBatchReaderBuilder {
    /// Open the table at `location` (an array or a group) with default options.
    pub fn try_new(location: &str) -> Result<Self> {
        Self::try_new_with_options(location, TableOptions::default())
    }

    /// Open the table at `location` with `options`.
    pub fn try_new_with_options(location: &str, options: TableOptions) -> Result<Self> {
        let runtime = SyncRuntime::new()?;
        let inner = block_on(
            &runtime,
            ZarrRecordBatchStreamBuilder::try_new_with_options(location, options),
        )?;
        Ok(ZarrRecordBatchReaderBuilder { runtime, inner })
    }

    /// A builder over an open table.
    pub fn new(model: Arc<TableModel>) -> Result<Self> {
        Ok(ZarrRecordBatchReaderBuilder {
            runtime: SyncRuntime::new()?,
            inner: ZarrRecordBatchStreamBuilder::new(model),
        })
    }

    /// The table.
    pub fn model(&self) -> &Arc<TableModel> {
        self.inner.model()
    }

    /// See [`ZarrRecordBatchStreamBuilder::with_options`].
    pub fn with_options(mut self, options: ZarrReadOptions) -> Self {
        self.inner = self.inner.with_options(options);
        self
    }

    /// See [`ZarrRecordBatchStreamBuilder::with_chunks`].
    pub fn with_chunks(mut self, chunks: ChunkRanges) -> Self {
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

    /// See [`ZarrRecordBatchStreamBuilder::scan`].
    pub fn scan(&self) -> Result<ZarrScan> {
        self.inner.scan()
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
    runtime: SyncRuntime,
    stream: ZarrRecordBatchStream,
}

impl ZarrRecordBatchReader {
    /// What the read has done so far.
    pub fn metrics(&self) -> &crate::metrics::ScanMetrics {
        self.stream.metrics()
    }
}

impl Iterator for ZarrRecordBatchReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        block_on(&self.runtime, self.stream.next()).map(|r| r.map_err(ArrowError::from))
    }
}

impl RecordBatchReader for ZarrRecordBatchReader {
    fn schema(&self) -> SchemaRef {
        self.stream.schema()
    }
}
