//! [`ZarrScanExec`]: the scan of a [`crate::ZarrTable`] — a [`ZarrScan`] (the chunks left
//! after pruning, the projection, the limit) split into partitions of nearly equal numbers of
//! chunks, each read by [`ZarrScan::stream`].
//!
//! The plan holds only the scan and what it shows (`EXPLAIN`): it can be written down and run
//! elsewhere. When it has no open table (it was rebuilt from its scan, e.g. on a Ballista
//! executor), each partition opens the table from the scan's location when it starts, through
//! the object store the task's runtime has registered for it, else zarrow's own resolution.
//! Each partition counts what it does into [`ScanMetrics`], shown by `EXPLAIN ANALYZE`.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Statistics};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{Count, Metric, MetricValue, MetricsSet, Time};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};
use zarrow::table::TableModel;
use zarrow::{ScanContext, ScanMetrics, ZarrScan};

use crate::error::to_datafusion_error;
use crate::table::registered_store;

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

/// Reads a [`ZarrScan`] in partitions (see the module docs).
#[derive(Debug)]
pub struct ZarrScanExec {
    scan: ZarrScan,
    partitions: Vec<ZarrScan>,
    /// Rows of each partition (exact).
    rows: Vec<u64>,
    info: ScanPlanInfo,
    schema: SchemaRef,
    model: Option<Arc<TableModel>>,
    props: Arc<PlanProperties>,
    ctx: ScanContext,
    /// Each partition's counters, once it has started.
    metrics: Arc<Mutex<Vec<Option<ScanMetrics>>>>,
    /// The process that reads the chunks, named in its errors (a Ballista executor).
    executor: Option<Arc<str>>,
}

impl Clone for ZarrScanExec {
    fn clone(&self) -> Self {
        // A clone is a new plan: its counters start at zero.
        ZarrScanExec {
            metrics: Arc::new(Mutex::new(vec![None; self.partitions.len()])),
            scan: self.scan.clone(),
            partitions: self.partitions.clone(),
            rows: self.rows.clone(),
            info: self.info.clone(),
            schema: self.schema.clone(),
            model: self.model.clone(),
            props: self.props.clone(),
            ctx: self.ctx.clone(),
            executor: self.executor.clone(),
        }
    }
}

impl ZarrScanExec {
    /// A scan of `model` in at most `target_partitions` partitions; `ctx` is shared by them.
    pub fn try_new(
        model: Arc<TableModel>,
        scan: ZarrScan,
        info: ScanPlanInfo,
        target_partitions: usize,
        ctx: ScanContext,
    ) -> Result<Self> {
        let projection = scan.projection(&model).map_err(to_datafusion_error)?;
        let schema = model
            .projected_schema(&projection)
            .map_err(to_datafusion_error)?;
        let (partitions, rows) = plan_partitions(&model, &scan, target_partitions)?;
        Ok(Self::from_parts(
            scan,
            partitions,
            rows,
            info,
            schema,
            Some(model),
            ctx,
        ))
    }

    /// A scan rebuilt from what [`Self::parts`] gives (no open table: each partition opens it
    /// from the scan's location when it starts).
    pub fn from_parts(
        scan: ZarrScan,
        partitions: Vec<ZarrScan>,
        rows: Vec<u64>,
        info: ScanPlanInfo,
        schema: SchemaRef,
        model: Option<Arc<TableModel>>,
        ctx: ScanContext,
    ) -> Self {
        let props = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(partitions.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        ZarrScanExec {
            metrics: Arc::new(Mutex::new(vec![None; partitions.len()])),
            scan,
            partitions,
            rows,
            info,
            schema,
            model,
            props,
            ctx,
            executor: None,
        }
    }

    /// This plan, run by `executor`: its read errors name it (`executor <name>: …`), as a
    /// Ballista executor marks the scans it decodes.
    pub fn with_executor(mut self, executor: &str) -> Self {
        self.executor = Some(executor.into());
        self
    }

    /// The scan of only the partitions `indices` (in that order), each reading at most `limit`
    /// rows if given: what one Ballista task runs of a scan whose partitions are spread
    /// over tasks.
    pub fn select_partitions(&self, indices: &[usize], limit: Option<u64>) -> Result<Self> {
        let lower = |l: Option<u64>| tighter_limit(l, limit);
        let mut partitions = Vec::with_capacity(indices.len());
        let mut rows = Vec::with_capacity(indices.len());
        for &i in indices {
            let (Some(p), Some(&r)) = (self.partitions.get(i), self.rows.get(i)) else {
                return internal_err!("ZarrScanExec: partition {i} of {}", self.partitions.len());
            };
            let mut p = p.clone();
            p.limit = lower(p.limit);
            rows.push(limit.map_or(r, |l| r.min(l)));
            partitions.push(p);
        }
        let mut scan = self.scan.clone();
        scan.limit = lower(scan.limit);
        Ok(Self::from_parts(
            scan,
            partitions,
            rows,
            self.info.clone(),
            self.schema.clone(),
            self.model.clone(),
            self.ctx.clone(),
        )
        .with_executor_of(self))
    }

    /// The executor named in this plan's errors, if any.
    pub fn executor(&self) -> Option<&str> {
        self.executor.as_deref()
    }

    /// The scan, its partitions, their rows, the plan info and the schema: all the plan is.
    pub fn parts(&self) -> (&ZarrScan, &[ZarrScan], &[u64], &ScanPlanInfo, &SchemaRef) {
        (
            &self.scan,
            &self.partitions,
            &self.rows,
            &self.info,
            &self.schema,
        )
    }

    /// The whole scan.
    pub fn scan(&self) -> &ZarrScan {
        &self.scan
    }

    /// The scan of each partition.
    pub fn partitions(&self) -> &[ZarrScan] {
        &self.partitions
    }

    /// The number of chunks read (after pruning and the limit).
    pub fn chunks_read(&self) -> u64 {
        self.partitions.iter().map(|p| p.chunks.len()).sum()
    }

    /// The number of chunks pruned by filters.
    pub fn chunks_pruned(&self) -> u64 {
        self.info.total_chunks - self.info.kept_chunks
    }

    /// The counts of every partition started so far, added up, after the metadata phase of
    /// opening the table (when it was opened here, not by an executor).
    pub fn scan_counts(&self) -> zarrow::ScanCounts {
        let mut total = self
            .model
            .as_ref()
            .map(|m| m.metadata_counts())
            .unwrap_or_default();
        if let Ok(all) = self.metrics.lock() {
            for m in all.iter().flatten() {
                total += m.counts();
            }
        }
        total
    }

    fn with_executor_of(mut self, other: &ZarrScanExec) -> Self {
        self.executor = other.executor.clone();
        self
    }

    fn projected_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }
}

/// The smaller of two row limits, either of which may be absent.
fn tighter_limit(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The partitions of `scan` (with a limit: one, holding only the chunks it needs) and the
/// rows of each.
fn plan_partitions(
    model: &TableModel,
    scan: &ZarrScan,
    target_partitions: usize,
) -> Result<(Vec<ZarrScan>, Vec<u64>)> {
    let partitions = scan.split(target_partitions.max(1));
    let rows = partitions
        .iter()
        .map(|p| {
            let rows = p.chunks.rows(model.grid()).map_err(to_datafusion_error)?;
            Ok(p.limit.map_or(rows, |l| rows.min(l)))
        })
        .collect::<Result<_>>()?;
    Ok((partitions, rows))
}

impl DisplayAs for ZarrScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let (kept, total) = (self.info.kept_chunks, self.info.total_chunks);
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "ZarrScanExec: location={}, projection=[{}], chunks={kept}/{total} ({} pruned), partitions={}",
                    self.scan.location,
                    self.projected_names().join(", "),
                    self.chunks_pruned(),
                    self.partitions.len()
                )?;
                if let Some(limit) = self.scan.limit {
                    write!(f, ", limit={limit}")?;
                }
                if let Some(p) = &self.info.predicate {
                    write!(f, ", predicate={p}")?;
                }
                if matches!(t, DisplayFormatType::Verbose) {
                    write!(f, ", ranges={}", self.scan.chunks)?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "location={}", self.scan.location)?;
                writeln!(f, "chunks={kept}/{total}")?;
                write!(f, "pruned={}", self.chunks_pruned())
            }
        }
    }
}

impl ExecutionPlan for ZarrScanExec {
    fn name(&self) -> &str {
        "ZarrScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("ZarrScanExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(scan) = self.partitions.get(partition) else {
            return internal_err!(
                "ZarrScanExec: partition {partition} of {}",
                self.partitions.len()
            );
        };
        let scan = ZarrScan {
            batch_size: context.session_config().batch_size(),
            ..scan.clone()
        };
        let metrics = ScanMetrics::new();
        if let Ok(mut all) = self.metrics.lock() {
            if let Some(slot) = all.get_mut(partition) {
                *slot = Some(metrics.clone());
            }
        }
        let consumer = MemoryConsumer::new(format!("ZarrScan[{partition}]"));
        let pool = context.memory_pool();
        let bounded = !matches!(pool.memory_limit(), MemoryLimit::Infinite);
        let memory = PoolReservation(consumer.register(pool), bounded);
        let ctx = ScanContext {
            metrics: metrics.clone(),
            memory: Some(Arc::new(memory)),
            ..self.ctx.clone()
        };
        // Only an executor logs its tasks (see below): no description for local scans.
        let task = self.executor.as_ref().map(|_| {
            format!(
                "zarr scan of {} ({} chunks: {})",
                scan.location,
                scan.chunks.len(),
                scan.chunks
            )
        });
        let stream = match &self.model {
            Some(model) => scan
                .stream(model.clone(), ctx)
                .map_err(to_datafusion_error)?
                .boxed(),
            None => {
                let store = registered_store(context.runtime_env().as_ref(), &scan.location);
                futures::stream::once(async move {
                    let model = match store {
                        Some(store) => {
                            TableModel::open_store(store, &scan.location, scan.options.clone())
                                .await?
                        }
                        None => TableModel::open(&scan.location, scan.options.clone()).await?,
                    };
                    scan.stream(Arc::new(model), ctx)
                })
                .try_flatten()
                .boxed()
            }
        };
        let stream = stream.map_err(to_datafusion_error);
        let (Some(executor), Some(task)) = (self.executor.clone(), task) else {
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                self.schema.clone(),
                stream,
            )));
        };
        // On an executor: errors name it, and its log tells what each task read.
        log::info!("executor {executor}: {task} started");
        let named = executor.clone();
        let done = futures::stream::once(async move {
            let c = metrics.counts();
            log::info!(
                "executor {executor}: {task} done: rows={} chunks_read={} requests={} bytes_fetched={}",
                c.rows_out,
                c.chunks_read,
                c.requests,
                c.bytes_fetched
            );
            Ok(None)
        });
        let stream = stream
            .map(move |r| r.map_err(|e| e.context(format!("executor {named}"))))
            .map_ok(Some)
            .chain(done)
            .try_filter_map(|b| futures::future::ready(Ok(b)));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let mut set = MetricsSet::new();
        let count = |name: &'static str, n: u64, p: usize| {
            let c = Count::new();
            c.add(usize::try_from(n).unwrap_or(usize::MAX));
            let value = match name {
                "output_rows" => MetricValue::OutputRows(c),
                _ => MetricValue::Count {
                    name: Cow::Borrowed(name),
                    count: c,
                },
            };
            Arc::new(Metric::new(value, Some(p)))
        };
        let time = |name: &'static str, d: std::time::Duration, p: usize| {
            let t = Time::new();
            t.add_duration(d);
            Arc::new(Metric::new(
                MetricValue::Time {
                    name: Cow::Borrowed(name),
                    time: t,
                },
                Some(p),
            ))
        };
        // The metadata phase (opening the table), then the chunks.
        let metadata = |set: &mut MetricsSet, c: &zarrow::ScanCounts, p: usize| {
            set.push(count("metadata_requests", c.metadata_requests, p));
            set.push(count("metadata_bytes", c.metadata_bytes, p));
            set.push(time("metadata_time", c.metadata_time, p));
        };
        if let Some(model) = &self.model {
            metadata(&mut set, &model.metadata_counts(), 0);
        }
        let all = self.metrics.lock().ok()?;
        for (p, m) in all.iter().enumerate() {
            let Some(m) = m else { continue };
            let c = m.counts();
            metadata(&mut set, &c, p);
            set.push(count("output_rows", c.rows_out, p));
            set.push(count("chunks_read", c.chunks_read, p));
            set.push(count("requests", c.requests, p));
            set.push(count("bytes_fetched", c.bytes_fetched, p));
            set.push(time("fetch_time", c.fetch_time, p));
            set.push(time("decompress_time", c.decompress_time, p));
            set.push(time("decode_time", c.decode_time, p));
        }
        let pruned = Count::new();
        pruned.add(usize::try_from(self.chunks_pruned()).unwrap_or(usize::MAX));
        set.push(Arc::new(Metric::new(
            MetricValue::Count {
                name: Cow::Borrowed("chunks_pruned"),
                count: pruned,
            },
            None,
        )));
        Some(set)
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let rows: u64 = match args.partition() {
            None => self.rows.iter().sum(),
            Some(p) => match self.rows.get(p) {
                Some(r) => *r,
                None => {
                    return internal_err!(
                        "ZarrScanExec: partition {p} of {}",
                        self.partitions.len()
                    )
                }
            },
        };
        let mut stats = Statistics::new_unknown(&self.schema);
        if let Ok(rows) = usize::try_from(rows) {
            stats = stats.with_num_rows(Precision::Exact(rows));
        }
        Ok(Arc::new(stats))
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let model = self.model.as_ref()?;
        let limit = tighter_limit(self.scan.limit, limit.map(|l| l as u64));
        let mut scan = self.scan.clone();
        scan.limit = limit;
        if let Some(limit) = limit {
            scan.chunks = scan.chunks.take_rows(model.grid(), limit).ok()?;
        }
        let target = self.partitions.len();
        let (partitions, rows) = plan_partitions(model, &scan, target).ok()?;
        Some(Arc::new(
            Self::from_parts(
                scan,
                partitions,
                rows,
                self.info.clone(),
                self.schema.clone(),
                Some(model.clone()),
                self.ctx.clone(),
            )
            .with_executor_of(self),
        ))
    }

    fn fetch(&self) -> Option<usize> {
        self.scan.limit.and_then(|l| usize::try_from(l).ok())
    }
}

/// A partition's reservation in the session's memory pool, as the scan's budget: what the
/// stream holds (stored bytes fetched ahead, columns read whole) is counted there, so a
/// `--memory-limit` bounds it (see `zarrow::scan::ScanMemory`).
#[derive(Debug)]
struct PoolReservation(MemoryReservation, bool);

impl zarrow::scan::ScanMemory for PoolReservation {
    fn try_grow(&self, bytes: usize) -> std::result::Result<(), String> {
        self.0.try_grow(bytes).map_err(|e| match e {
            DataFusionError::ResourcesExhausted(m) => m,
            other => other.to_string(),
        })
    }

    fn shrink(&self, bytes: usize) {
        // Never below zero (which would panic): a guard gives back only what it reserved.
        let _ = self.0.try_shrink(bytes);
    }

    /// DataFusion's `UnboundedMemoryPool` (the default runtime) only counts: the scan reads
    /// ahead `concurrency` chunks. A finite pool, or one that does not say (custom pools),
    /// is a limit.
    fn is_bounded(&self) -> bool {
        self.1
    }
}
