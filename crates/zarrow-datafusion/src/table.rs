//! [`ZarrTable`]: a zarr array or group as a DataFusion `TableProvider`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::{plan_err, Statistics};
use datafusion::error::Result;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use zarrow::table::{ColumnRole, TableModel};
use zarrow::{Node, ScanContext, ZarrScan, ZarrStore};

use crate::error::to_datafusion_error;
use crate::options::{ZarrConfig, ZarrTableOptions};
use crate::pruning;
use crate::sink::{insert_plan, AppendedModel};
use crate::source::{ScanPlan, ScanPlanInfo, ZarrRun, ZarrSource};
use crate::store::registered_store;

/// A zarr array or group as a table (rows are the cells of its dimensions; see
/// [`zarrow::table`] for which arrays become which columns).
///
/// ```
/// use std::sync::Arc;
///
/// use datafusion::catalog::TableProvider;
/// use datafusion::prelude::SessionContext;
/// use zarrow_datafusion::{ZarrTable, ZarrTableOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> datafusion::error::Result<()> {
/// let obs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/obs");
/// let table = ZarrTable::try_new(obs, ZarrTableOptions::default()).await?;
/// assert!(table.schema().field_with_name("cell_type").is_ok());
/// let ctx = SessionContext::new();
/// ctx.register_table("obs", Arc::new(table))?;
/// let df = ctx.sql("SELECT * FROM obs LIMIT 7").await?;
/// assert_eq!(df.count().await?, 7);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ZarrTable {
    location: String,
    model: Arc<TableModel>,
    options: ZarrTableOptions,
    /// The model after an `INSERT INTO` through this table (its rows grew); scans and
    /// statistics use it (see [`Self::current_model`]).
    appended: AppendedModel,
}

impl ZarrTable {
    /// Open the node at `location` (a local path, `file://`, `memory://`, or a cloud URL with
    /// credentials from the environment).
    pub async fn try_new(location: &str, options: ZarrTableOptions) -> Result<Self> {
        let store = ZarrStore::open_configured(location, &[], &options.remote)
            .map_err(to_datafusion_error)?;
        let node = Node::open_store(store.with_limits(options.read.limits), "")
            .await
            .map_err(to_datafusion_error)?;
        Self::from_node(location, node, options).await
    }

    /// Open the node at the root of `store` (e.g. `ZarrStore::new(object_store, "data/x.zarr")`).
    pub async fn try_new_with_store(store: ZarrStore, options: ZarrTableOptions) -> Result<Self> {
        let location = store.location().to_string();
        let node = Node::open_store(store.with_limits(options.read.limits), "")
            .await
            .map_err(to_datafusion_error)?;
        Self::from_node(&location, node, options).await
    }

    /// Open `location` through the object stores registered in the session's runtime (as
    /// datafusion-cli registers `s3://…` with its credentials), falling back to
    /// [`Self::try_new`].
    pub async fn try_new_with_session(
        state: &dyn Session,
        location: &str,
        options: ZarrTableOptions,
    ) -> Result<Self> {
        Self::try_new_with_runtime(state.runtime_env(), location, options).await
    }

    /// Open `location` through the object stores registered in `runtime`, falling back to
    /// [`Self::try_new`] (what a plan's decoder has: a task's runtime, no session).
    pub async fn try_new_with_runtime(
        runtime: &RuntimeEnv,
        location: &str,
        options: ZarrTableOptions,
    ) -> Result<Self> {
        if let Some(store) = registered_store(runtime, location) {
            let node = Node::open_store(store.with_limits(options.read.limits), location)
                .await
                .map_err(to_datafusion_error)?;
            return Self::from_node(location, node, options).await;
        }
        Self::try_new(location, options).await
    }

    async fn from_node(location: &str, node: Node, options: ZarrTableOptions) -> Result<Self> {
        let model = TableModel::from_node(node, options.to_table_options())
            .await
            .map_err(to_datafusion_error)?;
        Ok(ZarrTable {
            location: location.trim_end_matches('/').to_string(),
            model: Arc::new(model),
            options,
            appended: AppendedModel::default(),
        })
    }

    /// Child arrays (and groups) that are not columns, with the reason.
    pub fn left_out(&self) -> &[(String, String)] {
        self.model.left_out()
    }

    /// The table model (dimensions, columns, chunk grid) as the table was opened.
    pub fn model(&self) -> &Arc<TableModel> {
        &self.model
    }

    /// The table model now: as opened, or as re-read after an `INSERT INTO` through this
    /// table (more rows).
    pub fn current_model(&self) -> Arc<TableModel> {
        let appended = self.appended.read().unwrap_or_else(|e| e.into_inner());
        appended.clone().unwrap_or_else(|| self.model.clone())
    }

    /// [`Self::current_model`], or, when another writer replaced the local table since it was
    /// opened (`COPY … overwrite`), the table opened again: a registered table follows the
    /// table at its location. A replacement with other columns is an error.
    async fn unreplaced_model(&self, state: &dyn Session) -> Result<Arc<TableModel>> {
        let current = self.current_model();
        if !current.replaced() {
            return Ok(current);
        }
        let options = self.options.clone();
        let reopened = Self::try_new_with_session(state, &self.location, options).await?;
        if reopened.schema() != self.schema() {
            return plan_err!(
                "the table at '{}' was replaced by one with other columns since it was \
                 registered ({} now); register it again",
                self.location,
                reopened.schema()
            );
        }
        let model = reopened.model().clone();
        *self.appended.write().unwrap_or_else(|e| e.into_inner()) = Some(model.clone());
        Ok(model)
    }

    /// The cell an append sink updates (see `sink.rs`).
    pub(crate) fn appended_model(&self) -> AppendedModel {
        self.appended.clone()
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &ZarrTableOptions {
        &self.options
    }

    /// The location the table was opened from.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Whether every column `expr` refers to is a dimension or coordinate column (the
    /// filters chunks can be pruned by).
    fn prunable(&self, expr: &Expr) -> bool {
        let refs = expr.column_refs();
        !refs.is_empty()
            && refs.iter().all(|c| {
                self.model.columns().iter().any(|col| {
                    col.name == c.name
                        && matches!(col.role, ColumnRole::Index(_) | ColumnRole::Coordinate(_))
                })
            })
    }
}

#[async_trait]
impl TableProvider for ZarrTable {
    fn schema(&self) -> SchemaRef {
        self.model.schema()
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
        let config = ZarrConfig::from_config_options(state.config_options());
        let current = self.unreplaced_model(state).await?;
        let read = current
            .options()
            .read
            .clone()
            .with_concurrency(config.concurrency());
        let model = Arc::new(
            current
                .with_read_options(read.clone())
                .map_err(to_datafusion_error)?,
        );
        let projection = projection
            .cloned()
            .unwrap_or_else(|| (0..model.columns().len()).collect());
        let prunable: Vec<Expr> = filters
            .iter()
            .filter(|f| self.prunable(f))
            .cloned()
            .collect();
        // One context for the whole scan: pruning and every partition share its cache.
        let ctx = ScanContext::default();
        let read_ctx = ctx.read_context(read);
        let started = Instant::now();
        let mut pruned = pruning::prune_chunks(state, &model, &prunable, &read_ctx).await?;
        let pruning_time = started.elapsed();
        let kept_chunks = pruned.chunks.len();
        let coordinates = std::mem::take(&mut pruned.coordinates);
        let mut scan = ZarrScan::new(&model);
        scan.columns = projection
            .iter()
            .map(|&i| model.schema().field(i).name().clone())
            .collect();
        scan.batch_size = state.config().batch_size();
        scan.chunks = match limit {
            Some(l) => pruned
                .chunks
                .take_rows(model.grid(), l as u64)
                .map_err(|e| to_datafusion_error(e.in_array(model.location())))?,
            None => pruned.chunks,
        };
        scan.limit = limit.map(|l| l as u64);
        let plan = ScanPlan {
            location: model.location().to_string(),
            snapshot: model.snapshot_id().map(String::from),
            info: ScanPlanInfo {
                total_chunks: model.grid().num_chunks(),
                kept_chunks,
                predicate: pruned.predicate,
            },
            chunks: scan.chunks.clone(),
            pruning_nanos: u64::try_from(pruning_time.as_nanos()).unwrap_or(u64::MAX),
        };
        // The partitions: runs of nearly equal stored bytes (one with a limit).
        let groups = scan
            .split_by_stored_bytes(&model, state.config().target_partitions())
            .await
            .into_iter()
            .map(|scan| {
                let rows = scan
                    .chunks
                    .rows(model.grid())
                    .map_err(|e| to_datafusion_error(e.in_array(model.location())))?;
                let rows = scan.limit.map_or(rows, |l| rows.min(l));
                Ok(vec![ZarrRun { scan, rows }])
            })
            .collect::<Result<Vec<_>>>()?;
        let schema = model
            .projected_schema(&projection)
            .map_err(to_datafusion_error)?;
        let source = ZarrSource::new(schema)
            .with_index_columns(&model, &scan.chunks)
            .with_coordinate_values(&coordinates)
            .with_plan(plan)
            .with_model(model, ctx)
            .with_runtime(state.runtime_env().clone());
        Ok(source.into_exec(groups, limit))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if self.prunable(f) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    /// `INSERT INTO`: appends rows along the table's dimension (see `sink.rs`).
    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        insert_plan(
            &self.location,
            self.current_model(),
            self.options.clone(),
            self.appended_model(),
            input,
            insert_op,
        )
    }

    fn statistics(&self) -> Option<Statistics> {
        let model = self.current_model();
        let rows = usize::try_from(model.num_rows()).ok()?;
        Some(Statistics::new_unknown(&model.schema()).with_num_rows(Precision::Exact(rows)))
    }
}
