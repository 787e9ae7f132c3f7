//! [`ZarrScanExec`]: the scan of a [`crate::ZarrTable`] — the chunks left after pruning,
//! split into partitions, each read as a stream of record batches.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Statistics};
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::TryStreamExt;
use zarrow::region::ChunkCache;
use zarrow::table::TableModel;
use zarrow::ZarrReadOptions;

use crate::error::to_datafusion_error;

/// Reads chunks of a zarr table: one partition per contiguous run of kept chunks (at most
/// `target_partitions`), each a stream reading `concurrency` chunks at a time.
#[derive(Debug, Clone)]
pub struct ZarrScanExec {
    location: String,
    model: Arc<TableModel>,
    projection: Vec<usize>,
    schema: SchemaRef,
    /// Kept chunks (C order), before the limit.
    chunks: Vec<Vec<u64>>,
    total_chunks: usize,
    predicate: Option<String>,
    limit: Option<usize>,
    target_partitions: usize,
    read: ZarrReadOptions,
    /// Chunks per partition, after the limit.
    partitions: Vec<Vec<Vec<u64>>>,
    rows: Vec<u64>,
    props: Arc<PlanProperties>,
    cache: Arc<ChunkCache>,
}

impl ZarrScanExec {
    /// A scan of `chunks` (those kept of `total_chunks`) of `model`, projected; `cache` holds
    /// read units of arrays read by more than one chunk of rows, for all partitions.
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        location: String,
        model: Arc<TableModel>,
        projection: Vec<usize>,
        chunks: Vec<Vec<u64>>,
        total_chunks: usize,
        predicate: Option<String>,
        limit: Option<usize>,
        target_partitions: usize,
        read: ZarrReadOptions,
        cache: Arc<ChunkCache>,
    ) -> Result<Self> {
        let schema = model
            .projected_schema(&projection)
            .map_err(to_datafusion_error)?;
        let mut exec = ZarrScanExec {
            location,
            model,
            projection,
            schema: schema.clone(),
            chunks,
            total_chunks,
            predicate,
            limit,
            target_partitions: target_partitions.max(1),
            read,
            partitions: Vec::new(),
            rows: Vec::new(),
            props: Arc::new(PlanProperties::new(
                EquivalenceProperties::new(schema),
                Partitioning::UnknownPartitioning(1),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )),
            cache,
        };
        exec.plan_partitions()?;
        Ok(exec)
    }

    /// Split the chunks into partitions; with a limit, only the chunks it needs, in one.
    fn plan_partitions(&mut self) -> Result<()> {
        let mut chunks = Vec::new();
        let mut rows = Vec::new();
        let mut needed = self.limit.unwrap_or(usize::MAX) as u64;
        for c in &self.chunks {
            if needed == 0 {
                break;
            }
            let r = self.model.chunk_rows(c).map_err(to_datafusion_error)?;
            needed = needed.saturating_sub(r);
            chunks.push(c.clone());
            rows.push(r);
        }
        let n = if self.limit.is_some() {
            1
        } else {
            self.target_partitions.min(chunks.len()).max(1)
        };
        let mut partitions = vec![Vec::new(); n];
        let mut partition_rows = vec![0u64; n];
        let per = chunks.len().div_ceil(n).max(1);
        for (i, (c, r)) in chunks.into_iter().zip(rows).enumerate() {
            partitions[i / per].push(c);
            partition_rows[i / per] += r;
        }
        if let Some(limit) = self.limit {
            partition_rows[0] = partition_rows[0].min(limit as u64);
        }
        self.partitions = partitions;
        self.rows = partition_rows;
        self.props = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(self.schema.clone()),
            Partitioning::UnknownPartitioning(n),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(())
    }

    /// The chunks each partition reads.
    pub fn partitions(&self) -> &[Vec<Vec<u64>>] {
        &self.partitions
    }

    /// The number of chunks read (after pruning and the limit).
    pub fn chunks_read(&self) -> usize {
        self.partitions.iter().map(Vec::len).sum()
    }

    /// The number of chunks pruned by filters.
    pub fn chunks_pruned(&self) -> usize {
        self.total_chunks - self.chunks.len()
    }

    fn projected_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }
}

impl DisplayAs for ZarrScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let kept = self.chunks.len();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "ZarrScanExec: location={}, projection=[{}], chunks={kept}/{} ({} pruned), partitions={}",
                    self.location,
                    self.projected_names().join(", "),
                    self.total_chunks,
                    self.chunks_pruned(),
                    self.partitions.len()
                )?;
                if let Some(limit) = self.limit {
                    write!(f, ", limit={limit}")?;
                }
                if let Some(p) = &self.predicate {
                    write!(f, ", predicate={p}")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "location={}", self.location)?;
                writeln!(f, "chunks={kept}/{}", self.total_chunks)?;
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
        let Some(chunks) = self.partitions.get(partition) else {
            return internal_err!(
                "ZarrScanExec: partition {partition} of {}",
                self.partitions.len()
            );
        };
        let batch_size = context.session_config().batch_size();
        let stream = self
            .model
            .read_chunks(
                chunks.clone(),
                self.projection.clone(),
                self.read.clone(),
                batch_size,
                self.limit,
                Some(self.cache.clone()),
            )
            .map_err(to_datafusion_error)?
            .map_err(to_datafusion_error);
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
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
        let mut exec = self.clone();
        exec.limit = match (self.limit, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        exec.plan_partitions().ok()?;
        Some(Arc::new(exec))
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }
}
