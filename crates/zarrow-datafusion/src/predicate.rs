//! [`ZarrPredicate`]: a SQL predicate over a zarr table for callers without a query engine
//! (the Python package's `scan(filter=...)`). DataFusion parses it against the table's schema;
//! its conjuncts on dimension and coordinate columns prune chunks exactly as a SQL query's
//! filters do (pruning.rs), and [`BatchFilter`] applies the whole predicate to the batches read.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{DFSchema, SchemaError};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use datafusion::execution::SessionState;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::PhysicalExpr;
use zarrow::table::TableModel;
use zarrow::{ChunkRanges, ReadContext};

use crate::pruning;
use crate::source::ScanPlanInfo;

/// A SQL predicate (`"time >= 10 AND label LIKE 'a%'"`) over one table (see the module docs).
#[derive(Debug, Clone)]
pub struct ZarrPredicate {
    state: SessionState,
    expr: Expr,
    columns: Vec<String>,
}

/// What pruning by a predicate kept.
#[derive(Debug, Clone)]
pub struct PrunedChunks {
    /// The chunks that may hold matching rows.
    pub chunks: ChunkRanges,
    /// Chunks in the table, kept, and the predicate (as `EXPLAIN` shows a SQL scan's).
    pub info: ScanPlanInfo,
}

impl ZarrPredicate {
    /// Parse `sql` against `model`'s columns. A column the table does not have is a
    /// [`SchemaError::FieldNotFound`] naming it and the valid ones.
    pub fn parse(model: &TableModel, sql: &str) -> Result<Self> {
        let state = SessionContext::new().state();
        let schema = DFSchema::try_from(model.schema().as_ref().clone())?;
        let expr = state.create_logical_expr(sql, &schema)?;
        // Refuse a predicate that cannot be evaluated, or is not a boolean, now, not at the
        // first batch.
        let physical = state.create_physical_expr(expr.clone(), &schema)?;
        let kind = physical.data_type(schema.as_arrow())?;
        if !matches!(kind, DataType::Boolean | DataType::Null) {
            return Err(DataFusionError::Plan(format!(
                "the predicate {expr} is a {kind}, not a boolean"
            )));
        }
        let refs = expr.column_refs();
        let columns = model
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|name| refs.iter().any(|c| &c.name == name))
            .collect();
        Ok(ZarrPredicate {
            state,
            expr,
            columns,
        })
    }

    /// The columns the predicate refers to, in the table's order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The parsed predicate.
    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// The chunks of `model` that may hold rows the predicate keeps, pruned as a SQL query's
    /// filters are (conjuncts over data columns, or several dimensions, prune nothing).
    pub async fn prune(&self, model: &TableModel, ctx: &ReadContext) -> Result<PrunedChunks> {
        let conjuncts: Vec<Expr> = split_conjunction(&self.expr).into_iter().cloned().collect();
        let pruned = pruning::prune_chunks(&self.state, model, &conjuncts, ctx).await?;
        Ok(PrunedChunks {
            info: ScanPlanInfo {
                total_chunks: model.grid().num_chunks(),
                kept_chunks: pruned.chunks.len(),
                predicate: pruned.predicate,
            },
            chunks: pruned.chunks,
        })
    }

    /// The predicate for batches of `schema` (which must hold [`Self::columns`]).
    pub fn batch_filter(&self, schema: &SchemaRef) -> Result<BatchFilter> {
        let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
        let physical = self
            .state
            .create_physical_expr(self.expr.clone(), &df_schema)?;
        Ok(BatchFilter { physical })
    }
}

/// A predicate bound to one batch schema: keeps the rows it is true for (NULL drops a row, as
/// in SQL's `WHERE`).
#[derive(Debug, Clone)]
pub struct BatchFilter {
    physical: Arc<dyn PhysicalExpr>,
}

impl BatchFilter {
    /// The rows of `batch` the predicate keeps.
    pub fn filter(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mask = self
            .physical
            .evaluate(batch)?
            .into_array(batch.num_rows())?;
        let mask = datafusion::arrow::array::AsArray::as_boolean_opt(mask.as_ref())
            .ok_or_else(|| {
                DataFusionError::Plan(format!(
                    "the filter {} is not a boolean: it is {}",
                    self.physical,
                    mask.data_type()
                ))
            })?
            .clone();
        Ok(filter_record_batch(batch, &mask)?)
    }
}

/// The column a failed [`ZarrPredicate::parse`] did not find, and the valid ones.
pub fn missing_column(e: &DataFusionError) -> Option<(String, Vec<String>)> {
    match e.find_root() {
        DataFusionError::SchemaError(err, _) => match err.as_ref() {
            SchemaError::FieldNotFound {
                field,
                valid_fields,
            } => Some((
                field.name.clone(),
                valid_fields.iter().map(|c| c.name.clone()).collect(),
            )),
            _ => None,
        },
        _ => None,
    }
}
