//! [`ZarrSource`]: the read side of [`crate::ZarrFormat`], a DataFusion `FileSource`. A zarr
//! scan is a `DataSourceExec` over a `FileScanConfig` whose file groups are the partitions: each
//! holds one `PartitionedFile` standing for a run of chunks, the [`ZarrRun`] (a serializable
//! [`ZarrScan`] and its exact rows) in its extensions. DataFusion gives the partitions, limit,
//! statistics and metrics; a scheduler (Ballista) slices the groups like any file scan's.
//!
//! Each run is read by [`ZarrScan::stream`] on the open table (the one planned on, or, where
//! the plan was decoded, opened once from the run's location through the object store the
//! task's runtime has registered, else zarrow's own resolution). Its counters go into the
//! source's `ExecutionPlanMetricsSet` per partition as it reads; [`zarr_scans`] finds the
//! scans of a plan and adds them up.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_datafusion_err, Statistics};
use datafusion::config::ConfigOptions;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileGroup, FileOpenFuture, FileOpener, FileScanConfig, FileScanConfigBuilder, FileSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::physical_expr::{
    conjunction, DynamicFilterTracking, EquivalenceProperties, PhysicalExpr, PhysicalSortExpr,
};
use datafusion::physical_plan::filter_pushdown::{FilterPushdownPropagation, PushedDown};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::SortOrderPushdownResult;
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use tokio::sync::OnceCell;
use zarrow::table::TableModel;
use zarrow::{ChunkRanges, ScanContext, ScanCounts, ScanMetrics, ZarrScan};

use crate::error::to_datafusion_error;
use crate::index_columns::IndexColumns;
use crate::metrics::{self, PartitionMetrics};
use crate::options::ZarrConfig;
use crate::pruning::RunTimePruner;
use crate::store::registered_store;

/// What `EXPLAIN` shows of how the scan's chunks were chosen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScanPlanInfo {
    /// Chunks of rows in the table.
    pub total_chunks: u64,
    /// Chunks kept by pruning (before the limit).
    pub kept_chunks: u64,
    /// The filter pruned with, for display.
    pub predicate: Option<String>,
}

/// How a scan's chunks were chosen, as its source shows and carries it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScanPlan {
    /// The table's location.
    pub location: String,
    /// Chunks in the table and kept by pruning, and the predicate.
    pub info: ScanPlanInfo,
    /// The chunks the scan reads (kept, and cut to a limit's), for `EXPLAIN VERBOSE`.
    pub chunks: ChunkRanges,
    /// Time spent pruning, in nanoseconds.
    pub pruning_nanos: u64,
}

/// One file of a zarr scan: a run of chunks and its exact rows (after the run's limit).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ZarrRun {
    /// The read of the run (location, options, columns, chunks, limit).
    pub scan: ZarrScan,
    /// The rows it gives.
    pub rows: u64,
}

/// The zarr `FileSource` (see the module docs).
#[derive(Debug, Clone)]
pub struct ZarrSource {
    table_schema: TableSchema,
    metrics: ExecutionPlanMetricsSet,
    batch_size: Option<usize>,
    plan: Option<Arc<ScanPlan>>,
    /// The open table, shared by the partitions (opened by the first that needs it).
    model: Arc<OnceCell<Arc<TableModel>>>,
    /// The runtime the plan runs in: its object stores and memory pool.
    runtime: Option<Arc<RuntimeEnv>>,
    ctx: ScanContext,
    /// The process that reads the chunks (a Ballista executor): named in errors and logged.
    executor: Option<Arc<str>>,
    /// The filters pushed into the scan that may change while the query runs (DataFusion's
    /// dynamic filters: a hash join's build side, a top-k's threshold), over the scan's
    /// columns: each partition skips the chunks they rule out as it reaches them. Static
    /// filters were used at planning.
    filters: Option<Arc<dyn PhysicalExpr>>,
    /// Their pruner, made by the first partition that needs it and shared.
    pruner: Arc<OnceCell<Option<Arc<RunTimePruner>>>>,
    /// Each partition reads its chunks last first (a sort on the index column descending
    /// was pushed into the scan).
    reverse: bool,
    /// The scan's index columns (statistics, output ordering), when planned on a table.
    index: Option<Arc<IndexColumns>>,
}

impl ZarrSource {
    /// A source reading columns `table_schema` (what each run's scan reads, in order).
    pub fn new(table_schema: impl Into<TableSchema>) -> Self {
        ZarrSource {
            table_schema: table_schema.into(),
            metrics: ExecutionPlanMetricsSet::new(),
            batch_size: None,
            plan: None,
            model: Arc::new(OnceCell::new()),
            runtime: None,
            ctx: ScanContext::default(),
            executor: None,
            filters: None,
            pruner: Arc::new(OnceCell::new()),
            reverse: false,
            index: None,
        }
    }

    /// With how its chunks were chosen: shown by `EXPLAIN`, and `chunks_pruned` and
    /// `pruning_time` in its metrics.
    pub fn with_plan(mut self, plan: ScanPlan) -> Self {
        let pruned = plan.info.total_chunks.saturating_sub(plan.info.kept_chunks);
        let spent = Duration::from_nanos(plan.pruning_nanos);
        metrics::record_pruning(&self.metrics, pruned, spent);
        self.plan = Some(Arc::new(plan));
        self
    }

    /// With the open table (the one the scan was planned on) and the context its partitions
    /// share (the cache pruning filled).
    ///
    /// The requests that opened the table are the scan's metadata phase (`metadata_requests`,
    /// `metadata_bytes`, `metadata_time`, unlabelled): for a table opened by the query
    /// (`FROM 'x.zarr'`) that is this query's; a registered table's were made when it was
    /// registered. A run opened by its partition (an executor) counts its own, labelled.
    pub fn with_model(mut self, model: Arc<TableModel>, ctx: ScanContext) -> Self {
        metrics::record_opening(&self.metrics, &model.metadata_counts());
        self.model = Arc::new(OnceCell::from(model));
        self.ctx = ctx;
        self
    }

    /// With the index columns of `model` among the source's columns, for a scan of `chunks`:
    /// their exact statistics per run, and the output ordering where it holds (see
    /// `index_columns.rs`).
    pub fn with_index_columns(mut self, model: &TableModel, chunks: &ChunkRanges) -> Self {
        let schema = self.table_schema.table_schema().clone();
        self.index = Some(Arc::new(IndexColumns::new(model, &schema, chunks)));
        self
    }

    /// Running in `runtime`: tables open through its object stores, partitions reserve
    /// memory in its pool.
    pub fn with_runtime(mut self, runtime: Arc<RuntimeEnv>) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// Run by `executor`: read errors name it (`executor <name>: …`), and each partition
    /// logs when it starts and what it read, as a Ballista executor marks what it decodes.
    pub fn with_executor(mut self, executor: &str) -> Self {
        self.executor = Some(executor.into());
        self
    }

    /// How the chunks were chosen, if known.
    pub fn plan(&self) -> Option<&ScanPlan> {
        self.plan.as_deref()
    }

    /// The executor named in errors, if any.
    pub fn executor(&self) -> Option<&str> {
        self.executor.as_deref()
    }

    /// The scan `DataSourceExec` of `groups` (each a partition of runs), each partition
    /// reading at most `limit` rows: the statistics are the runs' exact rows, cut to it, and
    /// without a limit the index columns' exact ranges; the output ordering where it holds.
    pub fn into_exec(self, groups: Vec<Vec<ZarrRun>>, limit: Option<usize>) -> Arc<DataSourceExec> {
        let schema = self.table_schema.table_schema().clone();
        let limit_rows = limit.map(|l| l as u64);
        let index = self.index.clone();
        // A run's statistics (rows, and the index columns' ranges when it is read whole).
        let run_stats = |run: &ZarrRun| {
            let rows = limit_rows.map_or(run.rows, |l| run.rows.min(l));
            let mut stats = Statistics::new_unknown(&schema);
            if let (Some(index), None) = (&index, limit_rows) {
                stats.column_statistics = index.statistics(&run.scan.chunks, schema.fields().len());
            }
            match usize::try_from(rows) {
                Ok(rows) => stats.with_num_rows(Precision::Exact(rows)),
                Err(_) => stats,
            }
        };
        let merge = |all: &[Statistics]| {
            Statistics::try_merge_iter(all.iter(), &schema)
                .unwrap_or_else(|_| Statistics::new_unknown(&schema))
        };
        let mut totals = Vec::new();
        let groups = groups
            .into_iter()
            .map(|runs| {
                let stats: Vec<Statistics> = runs.iter().map(run_stats).collect();
                let mut group = merge(&stats);
                // (a limit cuts the partition's rows, not each run's)
                let rows: u64 = runs.iter().map(|r| r.rows).sum();
                if let (Some(l), Ok(cut)) = (limit_rows, usize::try_from(rows)) {
                    let cut = cut.min(usize::try_from(l).unwrap_or(usize::MAX));
                    group.num_rows = Precision::Exact(cut);
                }
                totals.push(group.clone());
                let files = runs
                    .into_iter()
                    .zip(stats)
                    .map(|(run, stats)| {
                        PartitionedFile::new(run.scan.location.clone(), 0)
                            .with_statistics(Arc::new(stats))
                            .with_extension(run)
                    })
                    .collect();
                FileGroup::new(files).with_statistics(Arc::new(group))
            })
            .collect();
        let ordering = index.as_deref().and_then(|i| i.ordering(&schema));
        let config = FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(self))
            .with_file_groups(groups)
            .with_statistics(merge(&totals))
            .with_output_ordering(ordering.into_iter().collect())
            .with_limit(limit)
            .build();
        DataSourceExec::from_data_source(config)
    }

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

impl FileSource for ZarrSource {
    fn create_file_opener(
        &self,
        _object_store: Arc<dyn ObjectStore>,
        base_config: &FileScanConfig,
        partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        Ok(Arc::new(ZarrOpener {
            source: self.clone(),
            partition,
            partitions: base_config.file_groups.len(),
            limit: base_config.limit.map(|l| l as u64),
            metrics: PartitionMetrics::new(&self.metrics, partition),
        }))
    }

    fn table_schema(&self) -> &TableSchema {
        &self.table_schema
    }

    fn with_batch_size(&self, batch_size: usize) -> Arc<dyn FileSource> {
        Arc::new(ZarrSource {
            batch_size: Some(batch_size),
            ..self.clone()
        })
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        &self.metrics
    }

    fn file_type(&self) -> &str {
        "zarr"
    }

    fn fmt_extra(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let Some(plan) = &self.plan else {
            return Ok(());
        };
        let (kept, total) = (plan.info.kept_chunks, plan.info.total_chunks);
        let pruned = total.saturating_sub(kept);
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    ", location={}, chunks={kept}/{total} ({pruned} pruned)",
                    plan.location
                )?;
                match (&plan.info.predicate, &self.filters) {
                    (Some(p), Some(d)) => write!(f, ", predicate={p} AND {d}")?,
                    (Some(p), None) => write!(f, ", predicate={p}")?,
                    (None, Some(d)) => write!(f, ", predicate={d}")?,
                    (None, None) => {}
                }
                if self.reverse {
                    write!(f, ", reverse=true")?;
                }
                if matches!(t, DisplayFormatType::Verbose) {
                    write!(f, ", ranges={}", plan.chunks)?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "location={}", plan.location)?;
                writeln!(f, "chunks={kept}/{total}")?;
                writeln!(f, "pruned={pruned}")
            }
        }
    }

    /// A sort on the index column of dimension 0 descending makes each partition read its
    /// chunks last first: a top-k (`ORDER BY dim_0 DESC LIMIT k`) then meets its rows first
    /// and its threshold prunes the rest. Inexact: the sort stays (rows within a chunk are
    /// still ascending).
    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
        eq_properties: &EquivalenceProperties,
    ) -> Result<SortOrderPushdownResult<Arc<dyn FileSource>>> {
        let schema = self.table_schema.table_schema().clone();
        let leading = self.index.as_deref().and_then(|i| i.leading(&schema));
        let (Some(leading), Some(first)) = (leading, order.first()) else {
            return Ok(SortOrderPushdownResult::Unsupported);
        };
        if eq_properties.ordering_satisfy(order.iter().cloned())? {
            return Ok(SortOrderPushdownResult::Exact {
                inner: Arc::new(self.clone()),
            });
        }
        // Reading the chunks last first gives dim_0 descending chunk by chunk (exactly so
        // where the scan's rows follow dim_0; else by rows of chunks): what a top-k wants.
        let reversed = EquivalenceProperties::new_with_orderings(schema, [[leading.reverse()]]);
        if self.reverse || !reversed.ordering_satisfy([first.clone()])? {
            return Ok(SortOrderPushdownResult::Unsupported);
        }
        Ok(SortOrderPushdownResult::Inexact {
            inner: Arc::new(ZarrSource {
                reverse: true,
                ..self.clone()
            }),
        })
    }

    /// The partitions are runs of chunks made for the session's target partitions; byte
    /// ranges of a "file" mean nothing here.
    fn supports_repartitioning(&self) -> bool {
        false
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // The pushed filters (how a dynamic filter's producer sees it is used); no projection
        // expressions: the columns are the runs' scans'.
        match &self.filters {
            Some(filters) => f(filters),
            None => Ok(TreeNodeRecursion::Continue),
        }
    }

    /// Keeps the filters that may change while the query runs (dynamic filters) to prune
    /// chunks by as the partitions reach them, unless `zarrow.runtime_pruning` is off. Every
    /// filter is still applied above the scan (pruning is by chunk, never by row); static
    /// filters were used at planning.
    fn try_pushdown_filters(
        &self,
        filters: Vec<Arc<dyn PhysicalExpr>>,
        config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn FileSource>>> {
        let not_applied = vec![PushedDown::No; filters.len()];
        let enabled = ZarrConfig::from_config_options(config).runtime_pruning();
        let dynamic: Vec<Arc<dyn PhysicalExpr>> = filters
            .into_iter()
            .filter(|f| enabled && DynamicFilterTracking::classify(f).contains_dynamic_filter())
            .collect();
        if dynamic.is_empty() {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                not_applied,
            ));
        }
        let filters = conjunction(self.filters.clone().into_iter().chain(dynamic));
        let source = ZarrSource {
            filters: Some(filters),
            pruner: Arc::new(OnceCell::new()),
            ..self.clone()
        };
        Ok(
            FilterPushdownPropagation::with_parent_pushdown_result(not_applied)
                .with_updated_node(Arc::new(source) as Arc<dyn FileSource>),
        )
    }
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

/// Opens the runs of one partition.
struct ZarrOpener {
    source: ZarrSource,
    partition: usize,
    /// How many partitions the scan has (they share the read-ahead's part of the pool).
    partitions: usize,
    /// The scan's limit (each partition reads at most this many rows).
    limit: Option<u64>,
    metrics: PartitionMetrics,
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
        if let Some(batch_size) = self.source.batch_size {
            scan.batch_size = batch_size;
        }
        scan.limit = match (scan.limit, self.limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let source = self.source.clone();
        let metrics = self.metrics.clone();
        let (partition, partitions) = (self.partition, self.partitions);
        let executor = source.executor.clone();
        let named = executor.clone();
        let name = move |e: DataFusionError| match &named {
            Some(executor) => e.context(format!("executor {executor}")),
            None => e,
        };
        let name_stream = name.clone();
        let open = async move {
            let model = source.model(&scan).await?;
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
                None => source.run_time_pruner(&model).await?,
            };
            let ctx = ScanContext {
                metrics: counters.clone(),
                memory: source.reservation(partition, partitions),
                chunk_filter: chunk_filter.map(|p| p as Arc<dyn zarrow::ChunkFilter>),
                reverse: source.reverse,
                ..source.ctx.clone()
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

/// A zarr scan in a physical plan: a `DataSourceExec` whose file source is a [`ZarrSource`].
#[derive(Debug, Clone, Copy)]
pub struct ZarrScanRef<'a> {
    /// The scan's configuration (file groups, limit).
    pub config: &'a FileScanConfig,
    /// Its source.
    pub source: &'a ZarrSource,
}

impl<'a> ZarrScanRef<'a> {
    /// `plan` if it is a zarr scan.
    pub fn of(plan: &'a dyn ExecutionPlan) -> Option<Self> {
        let exec = plan.downcast_ref::<DataSourceExec>()?;
        let config = exec.data_source().downcast_ref::<FileScanConfig>()?;
        let source = (config.file_source().as_ref() as &dyn Any).downcast_ref::<ZarrSource>()?;
        Some(ZarrScanRef { config, source })
    }

    /// The table's location ("" if the source was made without a plan).
    pub fn location(&self) -> &str {
        self.source.plan().map_or("", |p| p.location.as_str())
    }

    /// The runs of each partition.
    pub fn groups(&self) -> Result<Vec<Vec<ZarrRun>>> {
        self.config
            .file_groups
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|file| {
                        file.extension::<ZarrRun>().cloned().ok_or_else(|| {
                            exec_datafusion_err!("a zarr scan's file carries no run of chunks")
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// The chunks the partitions are planned to read (before a limit's cut).
    pub fn chunks_planned(&self) -> u64 {
        self.config
            .file_groups
            .iter()
            .flat_map(|g| g.iter())
            .filter_map(|f| f.extension::<ZarrRun>())
            .map(|r| r.scan.chunks.len())
            .sum()
    }

    /// The chunks pruned by filters.
    pub fn chunks_pruned(&self) -> u64 {
        self.source.plan().map_or(0, |p| {
            p.info.total_chunks.saturating_sub(p.info.kept_chunks)
        })
    }

    /// What the partitions have done so far, added up.
    pub fn counts(&self) -> ScanCounts {
        metrics::scan_counts(&self.source.metrics().clone_inner())
    }
}

/// The zarr scans of `plan`, leaves first in plan order.
pub fn zarr_scans(plan: &dyn ExecutionPlan) -> Vec<ZarrScanRef<'_>> {
    let mut out = Vec::new();
    collect(plan, &mut out);
    out
}

fn collect<'a>(plan: &'a dyn ExecutionPlan, out: &mut Vec<ZarrScanRef<'a>>) {
    if let Some(scan) = ZarrScanRef::of(plan) {
        out.push(scan);
    }
    for child in plan.children() {
        collect(child.as_ref(), out);
    }
}
