//! How a zarr scan sits in a scheduler's plan so that each Ballista task reads only its own
//! partitions.
//!
//! Before a task's plan goes to an executor, Ballista's scheduler restricts the plan's leaves to
//! the task's slice of partitions — but only leaves it knows: shuffle readers and
//! `DataSourceExec` file scans, whose file groups it slices. Any other leaf keeps all its
//! partitions, and every task would read all of them (duplicated rows). So on the scheduler a
//! [`ZarrScanExec`] is planned as a `DataSourceExec` over a [`ZarrScanSource`], with one file
//! group per partition (a run of chunks), each holding one placeholder file that carries the
//! partition's number. The scheduler slices those groups like any file scan; the physical codec
//! turns what is left back into a `ZarrScanExec` of just those partitions (see
//! [`crate::codec`]). The placeholder is never opened: it only exists between planning and
//! encoding.
//!
//! [`ZarrSchedulerTable`] is the table the scheduler's logical decoder gives: a [`ZarrTable`]
//! whose scans come out this way.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, Result, Statistics};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileGroup, FileOpener, FileScanConfig, FileScanConfigBuilder, FileSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan, PhysicalExpr};
use object_store::ObjectStore;
use zarrow_datafusion::{ZarrScanExec, ZarrTable};

/// The file source of a zarr scan on a scheduler (see the module docs): it holds the whole
/// scan; the file groups say which of its partitions a task reads.
#[derive(Debug, Clone)]
pub struct ZarrScanSource {
    exec: Arc<ZarrScanExec>,
    schema: TableSchema,
    metrics: ExecutionPlanMetricsSet,
}

impl ZarrScanSource {
    /// The scan this source stands for.
    pub fn exec(&self) -> &ZarrScanExec {
        &self.exec
    }
}

/// The partition of the scan a placeholder file stands for.
#[derive(Debug, Clone, Copy)]
struct ZarrPartition(usize);

/// `exec` as the scheduler plans it: a `DataSourceExec` with one file group per partition.
pub fn scan_as_file_groups(exec: ZarrScanExec) -> Arc<DataSourceExec> {
    let schema = exec.schema();
    let groups = (0..exec.partitions().len())
        .map(|i| {
            let file = PartitionedFile::new(format!("zarr-partition-{i}"), 0)
                .with_extension(ZarrPartition(i));
            FileGroup::new(vec![file])
        })
        .collect();
    let source = ZarrScanSource {
        exec: Arc::new(exec),
        schema: TableSchema::from(schema),
        metrics: ExecutionPlanMetricsSet::new(),
    };
    let config = FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(source))
        .with_file_groups(groups)
        .build();
    DataSourceExec::from_data_source(config)
}

/// If `plan` is a zarr scan planned by [`scan_as_file_groups`] (and perhaps sliced since):
/// the scan of the partitions left, with the scan's limit lowered to the config's.
pub fn file_groups_as_scan(plan: &dyn ExecutionPlan) -> Option<Result<ZarrScanExec>> {
    let exec = plan.downcast_ref::<DataSourceExec>()?;
    let config = (exec.data_source().as_ref() as &dyn Any).downcast_ref::<FileScanConfig>()?;
    let source = (config.file_source().as_ref() as &dyn Any).downcast_ref::<ZarrScanSource>()?;
    let mut kept = Vec::new();
    for group in &config.file_groups {
        for file in group.files() {
            match file.extension::<ZarrPartition>() {
                Some(&ZarrPartition(i)) => kept.push(i),
                None => {
                    return Some(internal_err!(
                        "a zarr scan's file group lost its partition number"
                    ))
                }
            }
        }
    }
    Some(
        source
            .exec
            .select_partitions(&kept, config.limit.map(|l| l as u64)),
    )
}

impl FileSource for ZarrScanSource {
    fn create_file_opener(
        &self,
        _object_store: Arc<dyn ObjectStore>,
        _base_config: &FileScanConfig,
        _partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        internal_err!(
            "a zarr scan planned for Ballista is read by executors as a ZarrScanExec, never as files"
        )
    }

    fn table_schema(&self) -> &TableSchema {
        &self.schema
    }

    fn with_batch_size(&self, _batch_size: usize) -> Arc<dyn FileSource> {
        Arc::new(self.clone())
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        &self.metrics
    }

    fn file_type(&self) -> &str {
        "zarr"
    }

    fn fmt_extra(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let exec = &self.exec;
        let info = exec.parts().3;
        write!(
            f,
            ", location={}, chunks={}/{} ({} pruned)",
            exec.scan().location,
            info.kept_chunks,
            info.total_chunks,
            exec.chunks_pruned()
        )
    }

    fn supports_repartitioning(&self) -> bool {
        false
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }
}

/// A [`ZarrTable`] decoded on a scheduler: its scans are planned as file groups (see the
/// module docs); everything else is the table's.
#[derive(Debug)]
pub struct ZarrSchedulerTable(pub ZarrTable);

#[async_trait]
impl TableProvider for ZarrSchedulerTable {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self.0.scan(state, projection, filters, limit).await?;
        match plan.downcast_ref::<ZarrScanExec>() {
            Some(exec) => Ok(scan_as_file_groups(exec.clone())),
            None => internal_err!("a zarr table planned something other than a ZarrScanExec"),
        }
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.0.supports_filters_pushdown(filters)
    }

    fn statistics(&self) -> Option<Statistics> {
        self.0.statistics()
    }
}
