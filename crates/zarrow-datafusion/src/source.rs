//! [`ZarrSource`]: the read side of [`crate::ZarrFormat`], a DataFusion `FileSource`. A zarr
//! scan is a `DataSourceExec` over a `FileScanConfig` whose file groups are the partitions: each
//! holds one `PartitionedFile` standing for a run of chunks, the [`ZarrRun`] (a serializable
//! [`zarrow::ZarrScan`] and its exact rows) in its extensions. DataFusion gives the partitions,
//! limit, statistics and metrics; a scheduler (Ballista) slices the groups like any file
//! scan's.
//!
//! Each partition's runs are read by its opener ([`crate::opener`]); their counters go into the
//! source's `ExecutionPlanMetricsSet` per partition as they read; [`zarr_scans`] finds the
//! scans of a plan and adds them up.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::ArrayRef;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_datafusion_err, Statistics};
use datafusion::config::ConfigOptions;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileGroup, FileOpener, FileScanConfig, FileScanConfigBuilder, FileSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::physical_expr::{
    conjunction, DynamicFilterTracking, EquivalenceProperties, PhysicalExpr, PhysicalSortExpr,
};
use datafusion::physical_plan::filter_pushdown::{FilterPushdownPropagation, PushedDown};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::SortOrderPushdownResult;
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan};
use object_store::ObjectStore;
use tokio::sync::OnceCell;
use zarrow::table::TableModel;
use zarrow::{ChunkRanges, ScanContext, ScanCounts};

use crate::index_columns::IndexColumns;
use crate::metrics::{self, PartitionMetrics};
use crate::opener::ZarrOpener;
pub use crate::opener::ZarrRun;
use crate::options::ZarrConfig;
use crate::pruning::RunTimePruner;

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
    /// The Icechunk snapshot the table is read at (`None`: not an Icechunk location).
    #[serde(default)]
    pub snapshot: Option<String>,
    /// Chunks in the table and kept by pruning, and the predicate.
    pub info: ScanPlanInfo,
    /// The chunks the scan reads (kept, and cut to a limit's), for `EXPLAIN VERBOSE`.
    pub chunks: ChunkRanges,
    /// Time spent pruning, in nanoseconds.
    pub pruning_nanos: u64,
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

    /// With the values of coordinate columns that planning read (to prune by a filter on
    /// them), as `(dimension, column, values)`, after [`Self::with_index_columns`]: their
    /// min/max per run as statistics, and dimension 0's as an output ordering where its
    /// values are monotonic (see `coordinates.rs`).
    pub fn with_coordinate_values(mut self, values: &[(usize, String, ArrayRef)]) -> Self {
        let schema = self.table_schema.table_schema().clone();
        if let Some(index) = self.index.take() {
            let index = (*index).clone().with_coordinates(&schema, values);
            self.index = Some(Arc::new(index));
        }
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
        let orderings = index.as_deref().map(|i| i.orderings(&schema));
        let config = FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(self))
            .with_file_groups(groups)
            .with_statistics(merge(&totals))
            .with_output_ordering(orderings.unwrap_or_default())
            .with_limit(limit)
            .build();
        DataSourceExec::from_data_source(config)
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
            table_schema: self.table_schema.clone(),
            batch_size: self.batch_size,
            model: self.model.clone(),
            runtime: self.runtime.clone(),
            ctx: self.ctx.clone(),
            executor: self.executor.clone(),
            filters: self.filters.clone(),
            pruner: self.pruner.clone(),
            reverse: self.reverse,
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
                if let Some(snapshot) = &plan.snapshot {
                    write!(f, ", snapshot={snapshot}")?;
                }
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
                if let Some(snapshot) = &plan.snapshot {
                    writeln!(f, "snapshot={snapshot}")?;
                }
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

    /// The Icechunk snapshot the table is read at (`None`: not an Icechunk location).
    pub fn snapshot_id(&self) -> Option<&str> {
        self.source.plan().and_then(|p| p.snapshot.as_deref())
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
