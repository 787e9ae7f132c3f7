//! The scan: one description of what to read from a table, and the one way it is read.
//!
//! A [`ZarrScan`] says which table (location and [`TableOptions`]), which columns (by name),
//! which chunks of rows (ranges over the table's chunk grid, see [`crate::grid`]), how many
//! rows at most and in batches of what size. It is plain data: `serde` writes it down, it
//! clones cheaply, and its size is that of its ranges, never of the grid. Given only a
//! serialized scan (and store credentials from its environment), any process opens the same
//! table and produces the same batches — what the Python package and Ballista executors do.
//!
//! ```text
//!  TableModel ─▶ ZarrRecordBatchStreamBuilder (with_projection, with_chunks, with_limit, …)
//!                 │ .scan()                                  │ .build()
//!                 ▼                                          ▼
//!              ZarrScan ──serde──▶ elsewhere: ZarrScan::open ─▶ ZarrRecordBatchStream
//!                 └── ZarrScan::stream(model, ScanContext) ──┘   (stream.rs: the pipeline)
//! ```
//!
//! The sync reader, the async stream builder and zarrow-datafusion's `ZarrSource` (the file
//! source of a zarr `DataSourceExec`) all read through [`ZarrScan::stream`].

mod ahead;
mod memory;
mod stream;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use memory::ScanMemory;
pub use stream::ZarrRecordBatchStream;

use crate::array::{ChunkCache, ReadContext};
use crate::grid::ChunkRanges;
use crate::metrics::ScanMetrics;
use crate::options::ZarrReadOptions;
use crate::store::ZarrStore;
use crate::table::{TableModel, TableOptions, TableReader};
use crate::{Error, Result};

/// The default number of rows per batch.
pub const DEFAULT_BATCH_SIZE: usize = 65_536;

/// The default budget of a scan's cache of decoded read units (arrays read by more than one
/// chunk of rows: coordinates, broadcast arrays).
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// A serializable description of a read of a table (see the module docs).
///
/// ```
/// use futures::TryStreamExt;
/// use zarrow::{TableModel, TableOptions, ZarrScan};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let x = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/X");
/// let model = TableModel::open(x, TableOptions::default()).await?;
/// let mut scan = ZarrScan::new(&model);
/// assert_eq!(scan.chunks.len(), 8); // 2000 × 200 in chunks of 250 × 200
/// assert_eq!(scan.columns.last().map(String::as_str), Some("X"));
/// scan.limit = Some(1000);
///
/// // Plan here, read anywhere: the scan is plain data.
/// let planned = ZarrScan::from_json(&scan.to_json()?)?;
/// assert_eq!(planned, scan);
/// let batches: Vec<_> = planned.open().await?.try_collect().await?;
/// assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1000);
///
/// // Partitions: runs of chunks, together the whole scan.
/// scan.limit = None;
/// let parts = scan.split(3);
/// assert_eq!(parts.len(), 3);
/// assert_eq!(parts.iter().map(|p| p.chunks.len()).sum::<u64>(), 8);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZarrScan {
    /// Where the table is: a node location as [`ZarrStore::open`] takes it.
    pub location: String,
    /// How the node becomes a table.
    pub options: TableOptions,
    /// The columns read, by name, in output order.
    pub columns: Vec<String>,
    /// The chunks of rows read, over the table's chunk grid.
    pub chunks: ChunkRanges,
    /// At most this many rows.
    pub limit: Option<u64>,
    /// Rows per batch at most (chunks are split, never merged).
    pub batch_size: usize,
}

/// What the streams of one scan share while they run: the cache of decoded read units and the
/// counters. Partitions of one scan pass clones of one context.
///
/// ```
/// use std::sync::Arc;
///
/// use futures::TryStreamExt;
/// use zarrow::{ChunkCache, ScanContext, TableModel, TableOptions, ZarrScan};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let x = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/X");
/// let model = Arc::new(TableModel::open(x, TableOptions::default()).await?);
/// let scan = ZarrScan::new(&model);
/// let ctx = ScanContext {
///     cache: Arc::new(ChunkCache::new(8 << 20)),
///     ..Default::default()
/// };
/// let mut rows = 0;
/// for part in scan.split(2) {
///     let batches: Vec<_> = part.stream(model.clone(), ctx.clone())?.try_collect().await?;
///     rows += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
/// }
/// // Both partitions counted into the one context.
/// let counts = ctx.metrics.counts();
/// assert_eq!((rows, counts.rows_out), (2000 * 200, 2000 * 200));
/// assert_eq!(counts.chunks_read, 8);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ScanContext {
    /// Decoded read units of arrays read by more than one chunk of rows.
    pub cache: Arc<ChunkCache>,
    /// What the scan counts into.
    pub metrics: ScanMetrics,
    /// The budget the scan reserves what it holds from (see [`ScanMemory`]); `None`: no limit.
    /// Give each stream (partition) its own.
    pub memory: Option<Arc<dyn ScanMemory>>,
    /// Decoding ahead of the consumer: with n > 0 the n chunks after the one being handed out
    /// are decoded, each a task on the runtime's worker threads, and wait decoded for their
    /// turn (up to 32 MiB of each: the rest of a larger chunk is decoded as it is handed out); the consumer only hands out batches. 0 (the default): each batch is decoded
    /// when it is asked for, on the consumer's thread. Ignored under a bounded memory budget,
    /// which cannot reserve a decoded chunk before it is decoded. See
    /// [`ScanContext::for_partitions`].
    pub decode_ahead: usize,
    /// Judges each chunk of rows right before it is fetched, and again before it is decoded:
    /// a chunk it rules out is skipped and counted as pruned at run time (see
    /// [`ChunkFilter`]). Ignored by a scan with a limit, whose rows are the first ones.
    pub chunk_filter: Option<Arc<dyn ChunkFilter>>,
    /// Read the chunks in the reverse of the scan's order (for a query that wants the last
    /// rows first, as `ORDER BY dim_0 DESC LIMIT k`). Ignored by a scan with a limit.
    pub reverse: bool,
}

/// A test of chunks of rows that may change while a scan runs (the filters a query engine
/// learns as it runs, such as a join's build side or a top-k's threshold): whether the chunk
/// at `coords` (over the table's chunk grid) may hold rows the query needs. `false` must mean
/// that no row of the chunk is needed; when in doubt, `true`.
///
/// ```
/// use std::sync::Arc;
///
/// use futures::TryStreamExt;
/// use zarrow::{ChunkFilter, ScanContext, TableModel, TableOptions, ZarrScan};
///
/// /// Only the last chunk of rows.
/// #[derive(Debug)]
/// struct LastChunk(u64);
///
/// impl ChunkFilter for LastChunk {
///     fn may_match(&self, coords: &[u64]) -> bool {
///         coords[0] == self.0
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let x = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/X");
/// let model = Arc::new(TableModel::open(x, TableOptions::default()).await?);
/// let ctx = ScanContext {
///     chunk_filter: Some(Arc::new(LastChunk(7))),
///     ..Default::default()
/// };
/// let batches: Vec<_> = ZarrScan::new(&model).stream(model, ctx.clone())?.try_collect().await?;
/// let counts = ctx.metrics.counts();
/// assert_eq!((counts.chunks_read, counts.chunks_pruned_at_run_time), (1, 7));
/// assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 250 * 200);
/// # Ok(())
/// # }
/// ```
pub trait ChunkFilter: std::fmt::Debug + Send + Sync {
    /// Whether the chunk of rows at `coords` may hold rows the query needs.
    fn may_match(&self, coords: &[u64]) -> bool;

    /// Whether the filter will not change any more. While it may, a stream decodes no chunk
    /// ahead of its consumer, so that each chunk is judged as late as possible.
    fn is_settled(&self) -> bool {
        true
    }
}

impl Default for ScanContext {
    fn default() -> Self {
        ScanContext {
            cache: Arc::new(ChunkCache::new(DEFAULT_CACHE_BYTES)),
            metrics: ScanMetrics::default(),
            memory: None,
            decode_ahead: 0,
            chunk_filter: None,
            reverse: false,
        }
    }
}

/// The most chunks (and objects of an array) a scan weighs to balance its partitions by
/// stored bytes ([`ZarrScan::split_by_stored_bytes`]): ten pages of an S3 listing.
const MAX_WEIGHED_CHUNKS: usize = 10_000;

impl ScanContext {
    /// The context of this scan's reads with `options`: its chunk cache and its counters
    /// (pruning reads coordinates through it, and every partition shares them).
    pub fn read_context(&self, options: ZarrReadOptions) -> ReadContext {
        ReadContext {
            options,
            cache: Some(self.cache.clone()),
            metrics: self.metrics.clone(),
        }
    }

    /// The threads a scan's work runs on: the current Tokio runtime's workers (1 for a
    /// current-thread runtime), or, outside a runtime, the cores this process may use (its
    /// CPU affinity and quota). What a reader splits a whole-table read into runs by.
    pub fn workers() -> usize {
        crate::task::workers()
    }

    /// The context for one of `partitions` streams that run at once, on the threads that run
    /// them: the current Tokio runtime's workers (where the chunks decoded ahead run), or,
    /// outside a runtime, the cores this process may use ([`Self::workers`]). With at
    /// least as many streams as workers, each decodes as it hands out (`decode_ahead` 0), as
    /// DataFusion's partitions do. With fewer, each decodes ahead on its share of the workers
    /// (`decode_ahead` = workers / partitions, at most 8), so that a lone stream, such as
    /// `zarrow export`'s or a Python reader's, decodes on every worker instead of one while
    /// its consumer takes the batches.
    ///
    /// ```
    /// use zarrow::ScanContext;
    ///
    /// # #[tokio::main(flavor = "multi_thread", worker_threads = 3)]
    /// # async fn main() {
    /// // On a runtime of 3 workers, whatever the machine's cores:
    /// assert_eq!(ScanContext::default().for_partitions(3).decode_ahead, 0);
    /// assert_eq!(ScanContext::default().for_partitions(1).decode_ahead, 3);
    /// // On one thread nothing runs beside the consumer.
    /// let one = std::thread::spawn(|| {
    ///     let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    ///     rt.block_on(async { ScanContext::default().for_partitions(1).decode_ahead })
    /// });
    /// assert_eq!(one.join().unwrap(), 0);
    /// # }
    /// ```
    pub fn for_partitions(mut self, partitions: usize) -> Self {
        let workers = Self::workers();
        let partitions = partitions.max(1);
        self.decode_ahead = if partitions >= workers {
            0
        } else {
            (workers / partitions).min(crate::task::MAX_DECODE_AHEAD)
        };
        self
    }
}

impl ZarrScan {
    /// A scan of every row and column of `model`.
    pub fn new(model: &TableModel) -> Self {
        ZarrScan {
            location: model.location().to_string(),
            options: model.options().clone(),
            columns: model.columns().iter().map(|c| c.name.clone()).collect(),
            chunks: model.all_chunks(),
            limit: None,
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }

    /// The scan as JSON.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self)
            .map_err(|e| Error::InvalidArgument(format!("cannot serialize the scan: {e}")))
    }

    /// A scan from [`Self::to_json`]'s output.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json)
            .map_err(|e| Error::InvalidArgument(format!("not a zarrow scan: {e}")))
    }

    /// Split into at most `n` scans of nearly equal numbers of chunks, in order (a limit
    /// keeps the scan whole: its rows are the first ones).
    pub fn split(&self, n: usize) -> Vec<ZarrScan> {
        if self.limit.is_some() {
            return vec![self.clone()];
        }
        self.with_runs(self.chunks.split(n))
    }

    /// This scan over each of `runs` (parts of its chunks).
    fn with_runs(&self, runs: Vec<ChunkRanges>) -> Vec<ZarrScan> {
        (runs.into_iter())
            .map(|chunks| ZarrScan {
                chunks,
                ..self.clone()
            })
            .collect()
    }

    /// Split into at most `n` scans of nearly equal stored bytes, in order, as DataFusion
    /// splits Parquet files by bytes: a chunk that stores more (less compressible, a larger
    /// last chunk of a rectilinear grid) is not left to one partition beside others'. The
    /// bytes come from one listing of each projected array (`model` is the table the scan was
    /// planned on); where none tells them (a store that cannot list, more than 10,000 chunks
    /// or objects), the runs are of equal counts ([`Self::split`]).
    pub async fn split_by_stored_bytes(&self, model: &TableModel, n: usize) -> Vec<ZarrScan> {
        let weighed = self.limit.is_none() && n > 1 && self.chunks.len() > 1;
        let weights = match self.projection(model) {
            Ok(projection) if weighed && self.chunks.len() <= MAX_WEIGHED_CHUNKS as u64 => {
                TableReader::new(model)
                    .stored_bytes(&self.chunks, &projection, MAX_WEIGHED_CHUNKS)
                    .await
            }
            _ => None,
        };
        match weights {
            Some(weights) => self.with_runs(self.chunks.split_weighted(n, &weights)),
            None => self.split(n),
        }
    }

    /// Open the table at the scan's location (stores from [`ZarrStore::open`], credentials
    /// from the environment) and read it; the stream's metrics count the opening as the
    /// scan's metadata phase.
    pub async fn open(&self) -> Result<ZarrRecordBatchStream> {
        let store = ZarrStore::open_configured(&self.location, &[], &self.options.remote)?;
        self.open_with_store(store).await
    }

    /// Open the table at the root of `store` (e.g. one an application registered) and read
    /// it, the opening counted as the scan's metadata phase.
    pub async fn open_with_store(&self, store: ZarrStore) -> Result<ZarrRecordBatchStream> {
        let ctx = ScanContext::default().for_partitions(1);
        let store = store.with_metrics(ctx.metrics.clone());
        let model = TableModel::open_store(store, &self.location, self.options.clone()).await?;
        self.stream(Arc::new(model), ctx)
    }

    /// The indices of the scan's columns in `model`'s schema; an error if the table no
    /// longer has them or its chunk grid changed (the store changed since planning).
    pub fn projection(&self, model: &TableModel) -> Result<Vec<usize>> {
        self.chunks
            .check(&model.chunk_grid_shape())
            .map_err(|e| e.in_array(&self.location))?;
        self.columns
            .iter()
            .map(|name| model.column_index(name))
            .collect()
    }

    /// Batches of one chunk of rows each (chunks are never merged; at most 2^24 rows, so a
    /// batch's string offsets stay small), for a reader that wants the whole table: fewer
    /// batches cost less than the default size's.
    pub fn batch_per_chunk(&mut self, model: &TableModel) {
        let chunk_rows = model
            .chunk_shape()
            .iter()
            .product::<u64>()
            .clamp(1, 1 << 24);
        self.batch_size = chunk_rows as usize;
    }

    /// Read the whole scan into memory, its chunks split into `partitions` runs of nearly
    /// equal stored bytes ([`Self::split_by_stored_bytes`]) read at once (each its own task
    /// when there is a runtime, as DataFusion runs partitions); the batches
    /// come back in the scan's order. What a reader that wants everything (`read_table`,
    /// benchmarks) uses instead of one stream.
    pub async fn read_all(
        &self,
        model: Arc<TableModel>,
        partitions: usize,
    ) -> Result<Vec<arrow_array::RecordBatch>> {
        use futures::TryStreamExt;

        let parts = self.split_by_stored_bytes(&model, partitions.max(1)).await;
        let ctx = ScanContext::default().for_partitions(parts.len());
        let parts: Vec<_> = parts
            .into_iter()
            .map(|part| {
                let stream = part.stream(model.clone(), ctx.clone());
                crate::task::in_background(
                    "read",
                    async move { stream?.try_collect::<Vec<_>>().await },
                )
            })
            .collect();
        let mut batches = Vec::new();
        for part in futures::future::try_join_all(parts).await? {
            batches.extend(part);
        }
        Ok(batches)
    }

    /// Read the scan from an open table (the one it was planned on, or one opened from its
    /// location and options), sharing `ctx` with the other streams of the scan.
    pub fn stream(
        &self,
        model: Arc<TableModel>,
        ctx: ScanContext,
    ) -> Result<ZarrRecordBatchStream> {
        let projection = self.projection(&model)?;
        stream::open(self, model, projection, ctx)
    }
}

#[cfg(test)]
mod tests;
