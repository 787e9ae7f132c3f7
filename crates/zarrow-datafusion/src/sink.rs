//! Writing zarr tables from queries, through one sink, [`ZarrSink`]:
//! - `COPY (SELECT …) TO 'out.zarr' STORED AS ZARR OPTIONS (…)` ([`crate::ZarrFormat`]) writes
//!   a new table through `zarrow::TableWriter`;
//! - `INSERT INTO t SELECT …` on a zarr table ([`crate::ZarrTable`]'s `insert_into`) appends
//!   the query's rows along the table's dimension through
//!   `zarrow::write::append::TableAppender` (new chunks first, the partial last chunk rewritten
//!   merged, the grown metadata last, under the table's writer lock; see docs/writing.md; on an
//!   Icechunk branch, in a session committed once, see docs/icechunk.md). Appending only:
//!   `INSERT OVERWRITE` and `REPLACE INTO` are not supported.
//!
//! Both stream the query's batches into a [`TableWrite`], with what it buffers reserved in
//! the session's memory pool: one write loop ([`ZarrSink::write_all`]).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{not_impl_err, plan_err};
use datafusion::datasource::physical_plan::FileSinkConfig;
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::StreamExt;
use zarrow::table::{ColumnRole, TableModel};
use zarrow::write::append::TableAppender;
use zarrow::write::LockPolicy;
use zarrow::write::Written;
use zarrow::{TableWriteOptions, TableWriter, ZarrStore};

use crate::commit::{report_commit, CommittedSnapshot};
use crate::error::to_datafusion_error;
use crate::options::ZarrTableOptions;
use crate::store::registered_store;

/// Where an append sink leaves the table's model re-read after appending.
pub(crate) type AppendedModel = Arc<std::sync::RwLock<Option<Arc<TableModel>>>>;

/// A table being written by a [`ZarrSink`]: batches in, the rows written out at the end.
#[async_trait]
trait TableWrite: Send {
    /// Write a batch (its chunks may still be in flight).
    async fn write(&mut self, batch: &RecordBatch) -> zarrow::Result<()>;
    /// Wait for the chunks in flight.
    async fn drain(&mut self) -> zarrow::Result<()>;
    /// Bytes held now.
    fn buffered_bytes(&self) -> usize;
    /// Write what is left and the metadata (and commit, on an Icechunk branch): the rows
    /// written and the snapshot committed.
    async fn finish(self: Box<Self>) -> zarrow::Result<Written>;
}

#[async_trait]
impl TableWrite for TableWriter {
    async fn write(&mut self, batch: &RecordBatch) -> zarrow::Result<()> {
        TableWriter::write(self, batch).await
    }
    async fn drain(&mut self) -> zarrow::Result<()> {
        TableWriter::drain(self).await
    }
    fn buffered_bytes(&self) -> usize {
        TableWriter::buffered_bytes(self)
    }
    async fn finish(self: Box<Self>) -> zarrow::Result<Written> {
        TableWriter::finish_written(*self).await
    }
}

/// Rows appended to a table; once some are, the table's model is re-read into `appended`,
/// so later scans of the table see them (its model had the old shape).
struct Appending {
    appender: TableAppender,
    store: ZarrStore,
    options: ZarrTableOptions,
    appended: AppendedModel,
}

#[async_trait]
impl TableWrite for Appending {
    async fn write(&mut self, batch: &RecordBatch) -> zarrow::Result<()> {
        self.appender.write(batch).await
    }
    async fn drain(&mut self) -> zarrow::Result<()> {
        self.appender.drain().await
    }
    fn buffered_bytes(&self) -> usize {
        self.appender.buffered_bytes()
    }
    async fn finish(self: Box<Self>) -> zarrow::Result<Written> {
        let Appending {
            appender,
            store,
            options,
            appended,
        } = *self;
        let written = appender.finish_written().await?;
        if written.rows > 0 {
            let model = TableModel::open_store(store, "", options.to_table_options()).await?;
            *appended.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(model));
        }
        Ok(written)
    }
}

/// What a [`ZarrSink`] writes.
#[derive(Debug)]
enum Target {
    /// A new table (`COPY`), with these options.
    Copy(TableWriteOptions),
    /// Rows appended to the table there (`INSERT INTO`), opened with `options`.
    Append {
        options: ZarrTableOptions,
        /// The table's model, re-read here once rows are appended.
        appended: AppendedModel,
    },
}

/// Writes a query's result as a zarr table: a new one at a `COPY` target, or appended to a
/// zarr table by `INSERT INTO` (see the module docs).
#[derive(Debug)]
pub struct ZarrSink {
    location: String,
    schema: SchemaRef,
    target: Target,
    metrics: ExecutionPlanMetricsSet,
    /// The snapshot the write committed (an Icechunk target), for the node above.
    committed: CommittedSnapshot,
}

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
    let sink = ZarrSink {
        location: location.to_string(),
        schema: Arc::new(Schema::new(fields)),
        target: Target::Append { options, appended },
        metrics: ExecutionPlanMetricsSet::new(),
        committed: CommittedSnapshot::default(),
    };
    Ok(sink.plan(input, None))
}

impl ZarrSink {
    /// A sink writing a new table to `config`'s target with `options` (`COPY`).
    pub fn new(config: FileSinkConfig, options: TableWriteOptions) -> Self {
        Self {
            location: config.original_url.clone(),
            schema: config.output_schema().clone(),
            target: Target::Copy(options),
            metrics: ExecutionPlanMetricsSet::new(),
            committed: CommittedSnapshot::default(),
        }
    }

    /// The plan writing `input` through this sink: DataFusion's `DataSinkExec`, under the node
    /// that reports the snapshot committed where the location is an Icechunk branch.
    pub(crate) fn plan(
        self,
        input: Arc<dyn ExecutionPlan>,
        order_requirements: Option<LexRequirement>,
    ) -> Arc<dyn ExecutionPlan> {
        let location = self.location.clone();
        let committed = self.committed.clone();
        let exec = DataSinkExec::new(input, Arc::new(self), order_requirements);
        report_commit(&location, Arc::new(exec), committed)
    }

    /// The store at the sink's location: the one the runtime has registered for it, else
    /// zarrow's own (for appending, with the table's remote settings and limits).
    fn store(&self, context: &TaskContext) -> Result<ZarrStore> {
        let registered = registered_store(context.runtime_env().as_ref(), &self.location);
        match &self.target {
            Target::Copy(_) => match registered {
                Some(store) => Ok(store),
                None => ZarrStore::open(&self.location).map_err(to_datafusion_error),
            },
            Target::Append { options, .. } => {
                let store = match registered {
                    Some(store) => store,
                    None => ZarrStore::open_configured(&self.location, &[], &options.remote)
                        .map_err(to_datafusion_error)?,
                };
                Ok(store.with_limits(options.read.limits))
            }
        }
    }

    /// The write of `schema`'s batches, refused before anything is written when a unit of
    /// rows (a chunk or shard of every column) is larger than `budget`, the session's memory
    /// limit (it could never be reserved).
    async fn begin(
        &self,
        store: ZarrStore,
        schema: SchemaRef,
        budget: Option<u64>,
    ) -> zarrow::Result<Box<dyn TableWrite>> {
        match &self.target {
            Target::Copy(options) => {
                let mut options = options.clone();
                if budget.is_some() {
                    options.memory_budget = budget;
                }
                Ok(Box::new(
                    TableWriter::try_new(store, schema, options).await?,
                ))
            }
            Target::Append { options, appended } => {
                let read = options.to_table_options().read;
                let lock = LockPolicy {
                    break_stale: options.break_stale_lock,
                    ..Default::default()
                };
                let appender =
                    TableAppender::try_new_with(store.clone(), self.schema.clone(), read, lock)
                        .await?;
                appender.check_memory_budget(budget)?;
                Ok(Box::new(Appending {
                    appender,
                    store,
                    options: options.clone(),
                    appended: appended.clone(),
                }))
            }
        }
    }
}

impl DisplayAs for ZarrSink {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (t, &self.target) {
            (DisplayFormatType::TreeRender, _) => write!(f, "location={}", self.location),
            (_, Target::Copy(options)) => write!(
                f,
                "ZarrSink(location={}, zarr_format={}, chunk_rows={})",
                self.location, options.zarr_format, options.chunk_rows
            ),
            (_, Target::Append { .. }) => {
                write!(f, "ZarrSink(location={}, append=true)", self.location)
            }
        }
    }
}

#[async_trait]
impl DataSink for ZarrSink {
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
        if self.location.is_empty() {
            return plan_err!("COPY … STORED AS ZARR needs a target location");
        }
        let rows = MetricBuilder::new(&self.metrics).output_rows(0);
        let reservation = MemoryConsumer::new("ZarrSink").register(context.memory_pool());
        let store = self.store(context)?;
        let budget = match context.memory_pool().memory_limit() {
            MemoryLimit::Finite(limit) => Some(limit as u64),
            _ => None,
        };
        let mut table = self
            .begin(store, data.schema(), budget)
            .await
            .map_err(to_datafusion_error)?;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            rows.add(batch.num_rows());
            table.write(&batch).await.map_err(to_datafusion_error)?;
            if reservation.try_resize(table.buffered_bytes()).is_err() {
                // Over the pool's limit: let the chunks in flight land, then try again.
                table.drain().await.map_err(to_datafusion_error)?;
                reservation.try_resize(table.buffered_bytes())?;
            }
        }
        let written = table.finish().await.map_err(to_datafusion_error)?;
        reservation.free();
        self.committed.set(written.snapshot);
        Ok(written.rows)
    }
}
