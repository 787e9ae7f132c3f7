//! Opening a zarr scan's runs of chunks, one partition at a time: the [`ZarrOpener`] that
//! [`crate::ZarrSource`] makes for each partition reads each of its files, a [`ZarrRun`], by
//! [`ZarrScan::stream`] on the open table (the one planned on, or, where the plan was decoded,
//! opened once from the run's location through the object store the task's runtime has
//! registered, else zarrow's own resolution), with the partition's budget in the runtime's
//! memory pool; its counters go into the partition's metrics as it reads.

use std::sync::{Arc, Mutex};

use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileOpenFuture, FileOpener};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::physical_expr::PhysicalExpr;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;
use zarrow::table::TableModel;
use zarrow::{ScanContext, ScanCounts, ScanMetrics, ZarrScan};

use crate::error::to_datafusion_error;
use crate::metrics::PartitionMetrics;
use crate::pruning::RunTimePruner;
use crate::store::registered_store;

/// One file of a zarr scan: a run of chunks and its exact rows (after the run's limit).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ZarrRun {
    /// The read of the run (location, options, columns, chunks, limit).
    pub scan: ZarrScan,
    /// The rows it gives.
    pub rows: u64,
}

/// Adds a partition's scan counters to its metrics as they grow.
struct Publisher {
    metrics: PartitionMetrics,
    counters: ScanMetrics,
    /// What was added so far.
    seen: Mutex<ScanCounts>,
}

impl Publisher {
    /// Add what the counters count beyond what was added before; the counts now.
    fn publish(&self) -> ScanCounts {
        let now = self.counters.counts();
        let Ok(mut seen) = self.seen.lock() else {
            return now;
        };
        self.metrics.add_since(&now, &seen);
        *seen = now;
        now
    }
}

/// Opens the runs of one partition: what its source shares with all of them (the open table,
/// the runtime, the pushed filters' pruner), and the partition's own place and metrics.
#[derive(Clone)]
pub(crate) struct ZarrOpener {
    /// The columns each run's scan reads, in order.
    pub(crate) table_schema: TableSchema,
    /// The session's batch size, if it set one.
    pub(crate) batch_size: Option<usize>,
    /// The open table, shared by the partitions (opened by the first that needs it).
    pub(crate) model: Arc<OnceCell<Arc<TableModel>>>,
    /// The runtime the plan runs in: its object stores and memory pool.
    pub(crate) runtime: Option<Arc<RuntimeEnv>>,
    /// The context the partitions share (the cache pruning filled).
    pub(crate) ctx: ScanContext,
    /// The process that reads the chunks (a Ballista executor): named in errors and logged.
    pub(crate) executor: Option<Arc<str>>,
    /// The pushed filters that may change while the query runs (see `ZarrSource`).
    pub(crate) filters: Option<Arc<dyn PhysicalExpr>>,
    /// Their pruner, made by the first partition that needs it and shared.
    pub(crate) pruner: Arc<OnceCell<Option<Arc<RunTimePruner>>>>,
    /// Each run is read last chunk first.
    pub(crate) reverse: bool,
    pub(crate) partition: usize,
    /// How many partitions the scan has (they share the read-ahead's part of the pool).
    pub(crate) partitions: usize,
    /// The scan's limit (each partition reads at most this many rows).
    pub(crate) limit: Option<u64>,
    pub(crate) metrics: PartitionMetrics,
}

impl ZarrOpener {
    /// The open table of `scan`: the source's, or opened once from its location.
    async fn model(&self, scan: &ZarrScan) -> Result<Arc<TableModel>> {
        let runtime = self.runtime.clone();
        self.model
            .get_or_try_init(|| async move {
                let store = runtime
                    .as_deref()
                    .and_then(|r| registered_store(r, &scan.location));
                let options = scan.options.clone();
                let model = match store {
                    Some(store) => TableModel::open_store(store, &scan.location, options).await,
                    None => TableModel::open(&scan.location, options).await,
                };
                model.map(Arc::new).map_err(to_datafusion_error)
            })
            .await
            .cloned()
    }

    /// The pruner of the pushed filters on `model`, if there are filters and they refer to
    /// a dimension's index or coordinate columns.
    async fn run_time_pruner(&self, model: &TableModel) -> Result<Option<Arc<RunTimePruner>>> {
        let Some(filters) = self.filters.clone() else {
            return Ok(None);
        };
        let schema = self.table_schema.table_schema().clone();
        let read = self.ctx.read_context(model.options().read.clone());
        self.pruner
            .get_or_try_init(|| async move {
                let pruner = RunTimePruner::new(model, filters, schema, &read).await?;
                Ok::<_, DataFusionError>(pruner.map(Arc::new))
            })
            .await
            .cloned()
    }

    /// Partition `partition`'s budget (of `partitions`) in the runtime's memory pool, if
    /// there is a runtime.
    fn reservation(
        &self,
        partition: usize,
        partitions: usize,
    ) -> Option<Arc<dyn zarrow::ScanMemory>> {
        let pool = &self.runtime.as_ref()?.memory_pool;
        let limit = pool.memory_limit();
        let read_ahead = match limit {
            MemoryLimit::Finite(limit) => Some(limit / READ_AHEAD_SHARE / partitions.max(1)),
            MemoryLimit::Infinite | MemoryLimit::Unknown => None,
        };
        let consumer = MemoryConsumer::new(format!("ZarrScan[{partition}]"));
        Some(Arc::new(PoolReservation {
            reservation: consumer.register(pool),
            bounded: !matches!(limit, MemoryLimit::Infinite),
            read_ahead,
        }))
    }
}

impl FileOpener for ZarrOpener {
    fn open(&self, file: PartitionedFile) -> Result<FileOpenFuture> {
        let Some(run) = file.extension::<ZarrRun>() else {
            return Err(DataFusionError::Plan(format!(
                "the zarr scan's file {} carries no run of chunks",
                file.path()
            )));
        };
        let mut scan = run.scan.clone();
        if let Some(batch_size) = self.batch_size {
            scan.batch_size = batch_size;
        }
        scan.limit = match (scan.limit, self.limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let opener = self.clone();
        let metrics = self.metrics.clone();
        let (partition, partitions) = (self.partition, self.partitions);
        let executor = opener.executor.clone();
        let named = executor.clone();
        let name = move |e: DataFusionError| match &named {
            Some(executor) => e.context(format!("executor {executor}")),
            None => e,
        };
        let name_stream = name.clone();
        let open = async move {
            let model = opener.model(&scan).await?;
            if let Some(limit) = scan.limit {
                // Only the chunks the limit needs.
                scan.chunks = scan
                    .chunks
                    .take_rows(model.grid(), limit)
                    .map_err(|e| to_datafusion_error(e.in_array(model.location())))?;
            }
            let counters = ScanMetrics::new();
            let chunk_filter = match scan.limit {
                // A limit's rows are the first ones: no pruning (nor reversing) changes them.
                Some(_) => None,
                None => opener.run_time_pruner(&model).await?,
            };
            let ctx = ScanContext {
                metrics: counters.clone(),
                memory: opener.reservation(partition, partitions),
                chunk_filter: chunk_filter.map(|p| p as Arc<dyn zarrow::ChunkFilter>),
                reverse: opener.reverse,
                ..opener.ctx.clone()
            }
            .for_partitions(partitions);
            // Only an executor logs its tasks.
            let task = executor.as_ref().map(|executor| {
                let task = format!(
                    "executor {executor}: zarr scan of {} ({} chunks: {})",
                    scan.location,
                    scan.chunks.len(),
                    scan.chunks
                );
                log::info!("{task} started");
                task
            });
            let stream = scan.stream(model, ctx).map_err(to_datafusion_error)?;
            // What the stream counts goes to the metrics batch by batch (the rest at its
            // end), so a plan's metrics tell a running scan's progress.
            let publisher = Arc::new(Publisher {
                metrics,
                counters,
                seen: Mutex::new(ScanCounts::default()),
            });
            let live = publisher.clone();
            let done = futures::stream::once(async move {
                let c = publisher.publish();
                if let Some(task) = task {
                    log::info!(
                        "{task} done: rows={} chunks_read={} requests={} bytes_fetched={}",
                        c.rows_out,
                        c.chunks_read,
                        c.requests,
                        c.bytes_fetched
                    );
                }
                Ok(None)
            });
            let stream = stream
                .map(move |batch| {
                    live.publish();
                    batch
                })
                .map_err(to_datafusion_error)
                .map_err(name_stream)
                .map_ok(Some)
                .chain(done)
                .try_filter_map(|b| futures::future::ready(Ok(b)));
            Ok(stream.boxed())
        };
        Ok(Box::pin(async move { open.await.map_err(name) }))
    }
}

/// Under a finite memory pool, a zarr scan's partitions together read ahead while they hold
/// at most 1/`READ_AHEAD_SHARE` of the pool's limit (each its share): the rest is left to
/// the query's other operators (sorts, joins and aggregations that spill past it). A chunk
/// whose turn has come is still read whatever the share, if the pool grants it.
const READ_AHEAD_SHARE: usize = 2;

/// A partition's reservation in the session's memory pool, as the scan's budget: what the
/// stream holds (stored bytes fetched ahead, columns read whole) is counted there, so a
/// `--memory-limit` bounds it (see `zarrow::ScanMemory`).
#[derive(Debug)]
struct PoolReservation {
    reservation: MemoryReservation,
    /// Whether the pool has a limit (see `is_bounded`).
    bounded: bool,
    /// The partition's share of the pool for read-ahead ([`READ_AHEAD_SHARE`]).
    read_ahead: Option<usize>,
}

impl zarrow::ScanMemory for PoolReservation {
    fn try_grow(&self, bytes: usize) -> std::result::Result<(), zarrow::MemoryError> {
        self.reservation
            .try_grow(bytes)
            .map_err(|e| zarrow::MemoryError::Refused {
                bytes,
                source: match e {
                    // Its message alone: the scan's error becomes DataFusion's kind again.
                    DataFusionError::ResourcesExhausted(m) => m.into(),
                    other => Box::new(other),
                },
            })
    }

    fn shrink(&self, bytes: usize) {
        // Never below zero (which would panic): a guard gives back only what it reserved.
        let _ = self.reservation.try_shrink(bytes);
    }

    /// DataFusion's `UnboundedMemoryPool` (the default runtime) only counts: the scan reads
    /// ahead `concurrency` chunks. A finite pool, or one that does not say (custom pools),
    /// is a limit.
    fn is_bounded(&self) -> bool {
        self.bounded
    }

    fn read_ahead_limit(&self) -> Option<usize> {
        self.read_ahead
    }
}
