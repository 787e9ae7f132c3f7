//! What a statement that writes an Icechunk repository reports: the id of the snapshot it
//! committed. `COPY … TO 'icechunk+…' STORED AS ZARR` and `INSERT INTO` a table registered at
//! a branch answer a `snapshot_id` column next to DataFusion's `count` (NULL when nothing was
//! committed: an `INSERT` of no rows); `EXPLAIN ANALYZE` shows it on the
//! [`IcechunkCommitExec`] above the sink, and [`committed_snapshots`] finds it in an executed
//! plan (the `zarrow` command's `--verbose`). Writes to other locations answer `count` alone,
//! as DataFusion's sinks do.
//!
//! A sink leaves the id in a [`CommittedSnapshot`] it shares with the node above it:
//! DataFusion's `DataSinkExec` answers a row count only.

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{Distribution, EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties,
};
use futures::StreamExt;

/// The name of the column that carries the committed snapshot's id.
pub const SNAPSHOT_ID_COLUMN: &str = "snapshot_id";

/// Where a sink leaves the id of the snapshot its statement committed.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommittedSnapshot(Arc<Mutex<Option<String>>>);

impl CommittedSnapshot {
    /// Record what the write committed (`None`: nothing).
    pub(crate) fn set(&self, snapshot: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = snapshot;
    }

    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `sink` (a `DataSinkExec` whose sink records into `committed`) as the plan of a statement
/// writing `location`: under an [`IcechunkCommitExec`] for an Icechunk location, as it is
/// for any other.
pub(crate) fn report_commit(
    location: &str,
    sink: Arc<dyn ExecutionPlan>,
    committed: CommittedSnapshot,
) -> Arc<dyn ExecutionPlan> {
    // Told apart as `ZarrStore::open` tells a repository from a store.
    if !location.starts_with(zarrow::ICECHUNK_PREFIX) {
        return sink;
    }
    Arc::new(IcechunkCommitExec::new(location, sink, committed))
}

/// The snapshot each Icechunk write of an executed `plan` committed: `(location, id)`.
pub fn committed_snapshots(plan: &dyn ExecutionPlan) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(commit) = plan.downcast_ref::<IcechunkCommitExec>() {
        if let Some(id) = commit.snapshot_id() {
            out.push((commit.location.clone(), id));
        }
    }
    for child in plan.children() {
        out.extend(committed_snapshots(child.as_ref()));
    }
    out
}

/// Above the sink of a write to an Icechunk repository: its `count` row with the id of the
/// snapshot the write committed (see the module docs).
#[derive(Debug)]
pub struct IcechunkCommitExec {
    location: String,
    input: Arc<dyn ExecutionPlan>,
    committed: CommittedSnapshot,
    properties: Arc<PlanProperties>,
}

impl IcechunkCommitExec {
    fn new(location: &str, input: Arc<dyn ExecutionPlan>, committed: CommittedSnapshot) -> Self {
        let mut fields: Vec<Field> = input
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(SNAPSHOT_ID_COLUMN, DataType::Utf8, true));
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            input.pipeline_behavior(),
            input.boundedness(),
        );
        IcechunkCommitExec {
            location: location.to_string(),
            input,
            committed,
            properties: Arc::new(properties),
        }
    }

    /// The repository location written.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The id of the snapshot committed, once the write has run (`None` before, or when
    /// nothing was committed).
    pub fn snapshot_id(&self) -> Option<String> {
        self.committed.get()
    }
}

impl DisplayAs for IcechunkCommitExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.snapshot_id();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "IcechunkCommitExec: location={}", self.location)?;
                match snapshot {
                    Some(id) => write!(f, ", snapshot_id={id}"),
                    None => Ok(()),
                }
            }
            DisplayFormatType::TreeRender => match snapshot {
                Some(id) => write!(f, "snapshot_id={id}"),
                None => Ok(()),
            },
        }
    }
}

impl ExecutionPlan for IcechunkCommitExec {
    fn name(&self) -> &str {
        "IcechunkCommitExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
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
        let Some(input) = children.into_iter().next() else {
            return datafusion::common::internal_err!("IcechunkCommitExec has one input");
        };
        Ok(Arc::new(Self::new(
            &self.location,
            input,
            self.committed.clone(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = self.schema();
        let committed = self.committed.clone();
        let out = schema.clone();
        // The sink's count row comes once its write (and commit) is done.
        let stream = input.map(move |batch| {
            let batch = batch?;
            let id = committed.get();
            let ids = StringArray::from(vec![id; batch.num_rows()]);
            let mut columns = batch.columns().to_vec();
            columns.push(Arc::new(ids));
            Ok(RecordBatch::try_new(out.clone(), columns)?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
