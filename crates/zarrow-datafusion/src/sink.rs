//! Writing zarr tables from queries: `COPY (SELECT …) TO 'out.zarr' STORED AS ZARR` through
//! [`ZarrSink`], which streams the query's batches into `zarrow::TableWriter` (memory reserved
//! in the session's pool), and `INSERT INTO t SELECT …` on a zarr table: [`crate::ZarrTable`]'s
//! `insert_into` plans a `DataSinkExec` over [`ZarrAppendSink`], which appends the query's rows
//! along the table's dimension through `zarrow::write::append::TableAppender` (new chunks
//! first, the partial last chunk rewritten merged, the grown metadata last, under the table's
//! writer lock; see docs/writing.md; on an Icechunk branch, in a session committed once, see
//! docs/icechunk.md). Appending only: `INSERT OVERWRITE` and `REPLACE INTO` are not supported.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::{not_impl_err, plan_err};
use datafusion::datasource::physical_plan::FileSinkConfig;
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::StreamExt;
use zarrow::table::{ColumnRole, TableModel};
use zarrow::write::append::TableAppender;
use zarrow::write::LockPolicy;
use zarrow::{TableWriteOptions, TableWriter, ZarrStore};

use crate::error::to_datafusion_error;
use crate::options::ZarrTableOptions;
use crate::store::registered_store;

/// Writes a query's result as a zarr table at the `COPY` target.
#[derive(Debug)]
pub struct ZarrSink {
    config: FileSinkConfig,
    options: TableWriteOptions,
    metrics: ExecutionPlanMetricsSet,
}

impl ZarrSink {
    /// A sink writing to `config`'s target with `options`.
    pub fn new(config: FileSinkConfig, options: TableWriteOptions) -> Self {
        Self {
            config,
            options,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    fn store(&self, context: &TaskContext) -> Result<ZarrStore> {
        let location = self.config.original_url.as_str();
        match registered_store(context.runtime_env().as_ref(), location) {
            Some(store) => Ok(store),
            None => ZarrStore::open(location).map_err(to_datafusion_error),
        }
    }
}

impl DisplayAs for ZarrSink {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::TreeRender => write!(f, "location={}", self.config.original_url),
            _ => write!(
                f,
                "ZarrSink(location={}, zarr_format={}, chunk_rows={})",
                self.config.original_url, self.options.zarr_format, self.options.chunk_rows
            ),
        }
    }
}

#[async_trait]
impl DataSink for ZarrSink {
    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn schema(&self) -> &SchemaRef {
        self.config.output_schema()
    }

    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> Result<u64> {
        if self.config.original_url.is_empty() {
            return plan_err!("COPY … STORED AS ZARR needs a target location");
        }
        let rows = MetricBuilder::new(&self.metrics).output_rows(0);
        let reservation = MemoryConsumer::new("ZarrSink").register(context.memory_pool());
        let store = self.store(context)?;
        let mut options = self.options.clone();
        // A unit of rows larger than the session's memory limit is refused before anything
        // is written (it could never be reserved).
        if let MemoryLimit::Finite(limit) = context.memory_pool().memory_limit() {
            options.memory_budget = Some(limit as u64);
        }
        let mut writer = TableWriter::try_new(store, data.schema(), options)
            .await
            .map_err(to_datafusion_error)?;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            rows.add(batch.num_rows());
            writer.write(&batch).await.map_err(to_datafusion_error)?;
            if reservation.try_resize(writer.buffered_bytes()).is_err() {
                // Over the pool's limit: let the chunks in flight land, then try again.
                writer.drain().await.map_err(to_datafusion_error)?;
                reservation.try_resize(writer.buffered_bytes())?;
            }
        }
        let written = writer.finish().await.map_err(to_datafusion_error)?;
        reservation.free();
        Ok(written)
    }
}

/// Where an append sink leaves the table's model re-read after appending.
pub(crate) type AppendedModel = Arc<std::sync::RwLock<Option<Arc<TableModel>>>>;

/// The plan of `INSERT INTO table <input>`.
/// `model` is the table's at `location` as it stands; the sink leaves the model re-read after
/// appending in `appended`.
pub(crate) fn insert_plan(
    location: &str,
    model: Arc<TableModel>,
    options: ZarrTableOptions,
    appended: AppendedModel,
    input: Arc<dyn ExecutionPlan>,
    insert_op: InsertOp,
) -> Result<Arc<dyn ExecutionPlan>> {
    if insert_op != InsertOp::Append {
        return not_impl_err!(
            "{insert_op} on a zarr table: only INSERT INTO (appending rows) is supported"
        );
    }
    // Index columns (the positions along the dimension) are not stored: whatever the query
    // gives for them, NULL included (`INSERT INTO t (a, b) …` leaves them NULL), is ignored.
    let fields: Vec<Field> = model
        .schema()
        .fields()
        .iter()
        .zip(model.columns())
        .map(|(f, c)| match c.role {
            ColumnRole::Index(_) => f.as_ref().clone().with_nullable(true),
            _ => f.as_ref().clone(),
        })
        .collect();
    let sink = ZarrAppendSink {
        location: location.to_string(),
        schema: Arc::new(Schema::new(fields)),
        options,
        appended,
        metrics: ExecutionPlanMetricsSet::new(),
    };
    Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
}

/// Appends a query's rows to the zarr table at `location`.
#[derive(Debug)]
pub struct ZarrAppendSink {
    location: String,
    schema: SchemaRef,
    options: ZarrTableOptions,
    /// The table's model, re-read here once rows are appended.
    appended: AppendedModel,
    metrics: ExecutionPlanMetricsSet,
}

impl ZarrAppendSink {
    fn store(&self, context: &TaskContext) -> Result<ZarrStore> {
        let store = match registered_store(context.runtime_env().as_ref(), &self.location) {
            Some(store) => store,
            None => ZarrStore::open_configured(&self.location, &[], &self.options.remote)
                .map_err(to_datafusion_error)?,
        };
        Ok(store.with_limits(self.options.read.limits))
    }
}

impl DisplayAs for ZarrAppendSink {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::TreeRender => write!(f, "location={}", self.location),
            _ => write!(f, "ZarrAppendSink(location={})", self.location),
        }
    }
}

#[async_trait]
impl DataSink for ZarrAppendSink {
    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> Result<u64> {
        let rows = MetricBuilder::new(&self.metrics).output_rows(0);
        let reservation = MemoryConsumer::new("ZarrAppendSink").register(context.memory_pool());
        let read = self.options.to_table_options().read;
        let store = self.store(context)?;
        let lock = LockPolicy {
            break_stale: self.options.break_stale_lock,
            ..Default::default()
        };
        let mut appender =
            TableAppender::try_new_with(store.clone(), self.schema.clone(), read, lock)
                .await
                .map_err(to_datafusion_error)?;
        // A unit of the table's rows larger than the session's memory limit could never be
        // reserved: refused before anything is written.
        let budget = match context.memory_pool().memory_limit() {
            MemoryLimit::Finite(limit) => Some(limit as u64),
            _ => None,
        };
        appender
            .check_memory_budget(budget)
            .map_err(to_datafusion_error)?;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            rows.add(batch.num_rows());
            appender.write(&batch).await.map_err(to_datafusion_error)?;
            if reservation.try_resize(appender.buffered_bytes()).is_err() {
                appender.drain().await.map_err(to_datafusion_error)?;
                reservation.try_resize(appender.buffered_bytes())?;
            }
        }
        let appended = appender.finish().await.map_err(to_datafusion_error)?;
        reservation.free();
        if appended > 0 {
            // Later scans of this table see the new rows (its model had the old shape).
            let model = TableModel::open_store(store, "", self.options.to_table_options())
                .await
                .map_err(to_datafusion_error)?;
            *self.appended.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(model));
        }
        Ok(appended)
    }
}
