//! Filters on dimension and coordinate columns → the chunks that may hold matching rows.
//!
//! Each chunk of the table is a pruning "container" (as a row group is for Parquet): the
//! min/max of an index column over a chunk is its range along that dimension, and of a
//! coordinate column the min/max of the coordinate values in that range (the coordinate
//! array is read once, whole). DataFusion's `PruningPredicate` does the rest. A predicate
//! that cannot be built is logged and prunes nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, UInt64Array};
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Accumulator, Expr};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use zarrow::region::ChunkCache;
use zarrow::table::{ColumnRole, TableModel};
use zarrow::ZarrReadOptions;

use crate::error::to_datafusion_error;

/// Coordinates longer than this are not read for pruning.
const MAX_COORDINATE_LEN: u64 = 50_000_000;

/// The outcome of pruning.
#[derive(Debug)]
pub(crate) struct Pruned {
    /// The chunks kept, in C order.
    pub kept: Vec<Vec<u64>>,
    /// The predicate used, for display.
    pub predicate: Option<String>,
}

struct ChunkStatistics {
    min: HashMap<String, ArrayRef>,
    max: HashMap<String, ArrayRef>,
    non_null: HashSet<String>,
    rows: Vec<u64>,
}

impl PruningStatistics for ChunkStatistics {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.min.get(&column.name).cloned()
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.max.get(&column.name).cloned()
    }

    fn num_containers(&self) -> usize {
        self.rows.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        self.non_null
            .contains(&column.name)
            .then(|| Arc::new(UInt64Array::from(vec![0u64; self.rows.len()])) as ArrayRef)
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(UInt64Array::from(self.rows.clone())))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// Keep the chunks of `chunks` that `filters` (on dimension/coordinate columns) may match.
pub(crate) async fn prune_chunks(
    state: &dyn Session,
    model: &TableModel,
    filters: &[Expr],
    chunks: Vec<Vec<u64>>,
    read: &ZarrReadOptions,
    cache: &ChunkCache,
) -> Result<Pruned> {
    let Some(expr) = conjunction(filters.to_vec()) else {
        return Ok(Pruned {
            kept: chunks,
            predicate: None,
        });
    };
    let schema = model.schema();
    let predicate = DFSchema::try_from(schema.as_ref().clone())
        .and_then(|df_schema| state.create_physical_expr(expr.clone(), &df_schema))
        .and_then(|physical| {
            PruningPredicateBuilder::new()
                .with_file_schema(schema.clone())
                .try_build(physical)
        });
    let predicate = match predicate {
        Ok(p) => p,
        Err(e) => {
            log::debug!("zarr: no chunk pruning for {expr}: {e}");
            return Ok(Pruned {
                kept: chunks,
                predicate: None,
            });
        }
    };
    let display = Some(expr.to_string());
    if predicate.always_true() {
        return Ok(Pruned {
            kept: chunks,
            predicate: display,
        });
    }
    let referenced: HashSet<String> = expr.column_refs().iter().map(|c| c.name.clone()).collect();
    let regions: Vec<(Vec<u64>, Vec<u64>)> = chunks
        .iter()
        .map(|c| model.chunk_region(c))
        .collect::<zarrow::Result<_>>()
        .map_err(to_datafusion_error)?;
    let mut stats = ChunkStatistics {
        min: HashMap::new(),
        max: HashMap::new(),
        non_null: HashSet::new(),
        rows: regions
            .iter()
            .map(|(_, shape)| shape.iter().product())
            .collect(),
    };
    for col in model.columns() {
        if !referenced.contains(&col.name) {
            continue;
        }
        match col.role {
            ColumnRole::Index(d) => {
                let min =
                    Int64Array::from_iter_values(regions.iter().map(|(start, _)| start[d] as i64));
                let max = Int64Array::from_iter_values(
                    regions
                        .iter()
                        .map(|(start, shape)| (start[d] + shape[d]) as i64 - 1),
                );
                stats.min.insert(col.name.clone(), Arc::new(min));
                stats.max.insert(col.name.clone(), Arc::new(max));
                stats.non_null.insert(col.name.clone());
            }
            ColumnRole::Coordinate(d) => {
                if model.dimensions()[d].size > MAX_COORDINATE_LEN {
                    continue;
                }
                let values = model
                    .read_dimension_values(d, read, Some(cache))
                    .await
                    .map_err(to_datafusion_error)?;
                let mut mins = Vec::with_capacity(regions.len());
                let mut maxs = Vec::with_capacity(regions.len());
                for (start, shape) in &regions {
                    let part = values.slice(start[d] as usize, shape[d] as usize);
                    let mut min = MinAccumulator::try_new(part.data_type())?;
                    let mut max = MaxAccumulator::try_new(part.data_type())?;
                    min.update_batch(std::slice::from_ref(&part))?;
                    max.update_batch(std::slice::from_ref(&part))?;
                    mins.push(min.evaluate()?);
                    maxs.push(max.evaluate()?);
                }
                if mins.is_empty() {
                    continue;
                }
                stats
                    .min
                    .insert(col.name.clone(), ScalarValue::iter_to_array(mins)?);
                stats
                    .max
                    .insert(col.name.clone(), ScalarValue::iter_to_array(maxs)?);
            }
            ColumnRole::Data(_) => {}
        }
    }
    let keep = match predicate.prune(&stats) {
        Ok(k) => k,
        Err(e) => {
            log::debug!("zarr: chunk pruning failed for {expr}: {e}");
            return Ok(Pruned {
                kept: chunks,
                predicate: display,
            });
        }
    };
    let kept = chunks
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect();
    Ok(Pruned {
        kept,
        predicate: display,
    })
}
