//! Filters on dimension and coordinate columns → the chunks that may hold matching rows, as
//! ranges over the chunk grid.
//!
//! Each conjunct of the filters that refers to the columns of one dimension only (its index
//! column, its coordinate) prunes along that dimension; conjuncts over several dimensions are
//! left to DataFusion (pushdown is inexact: it re-applies every filter). Along a dimension,
//! DataFusion's `PruningPredicate` judges "containers": runs of chunks, whose min/max are the
//! run's range of positions (index column) or the min/max of the coordinate's values over it
//! (the coordinate array is read once, whole; a sparse matrix's compressed dimension is
//! bounded by binary searches in its `indptr` instead). Runs start coarse — at most [`FANOUT`] of them
//! over the dimension — and the kept ones are cut finer, level by level, while a level judges
//! at most [`BUDGET`] containers, so pruning costs what the kept ranges cost, not what the
//! grid holds (2^40 chunks along a dimension are a handful of levels). The kept chunks are the
//! product of the kept runs of every dimension. A predicate that cannot be built is logged and
//! prunes nothing.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, UInt64Array};
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{Accumulator, Expr};
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use zarrow::table::{ColumnRole, MajorOffsets, TableModel, TableReader};
use zarrow::{ChunkGrid, ChunkRanges, ReadContext};

use crate::error::to_datafusion_error;

/// Coordinates longer than this are not read for pruning.
const MAX_COORDINATE_LEN: u64 = 50_000_000;

/// Runs a dimension is first cut into, and each kept run is cut into at the next level.
const FANOUT: u64 = 1024;

/// The most containers one level judges; past it, the kept runs stay as coarse as they are.
const BUDGET: u64 = 1 << 20;

/// The outcome of pruning.
#[derive(Debug)]
pub(crate) struct Pruned {
    /// The chunks kept.
    pub chunks: ChunkRanges,
    /// The predicate used, for display.
    pub predicate: Option<String>,
}

/// The dimension a filter is about, if it refers to the columns of exactly one dimension.
fn dimension_of(model: &TableModel, expr: &Expr) -> Option<usize> {
    let mut dims = HashSet::new();
    for c in expr.column_refs() {
        let column = model.columns().iter().find(|col| col.name == c.name)?;
        match column.role {
            ColumnRole::Index(d) | ColumnRole::Coordinate(d) => dims.insert(d),
            ColumnRole::Data(_) => return None,
        };
    }
    (dims.len() == 1).then(|| dims.into_iter().next()).flatten()
}

/// Keep the chunks of `model` that `filters` (on dimension/coordinate columns) may match.
pub(crate) async fn prune_chunks(
    state: &dyn Session,
    model: &TableModel,
    filters: &[Expr],
    ctx: &ReadContext,
) -> Result<Pruned> {
    let all = model.all_chunks();
    let Some(expr) = conjunction(filters.to_vec()) else {
        return Ok(Pruned {
            chunks: all,
            predicate: None,
        });
    };
    let display = Some(expr.to_string());
    let mut per_dim: HashMap<usize, Vec<Expr>> = HashMap::new();
    for conjunct in split_conjunction(&expr) {
        if let Some(d) = dimension_of(model, conjunct) {
            per_dim.entry(d).or_default().push(conjunct.clone());
        }
    }
    let grid = model.chunk_grid_shape();
    let mut dims: Vec<Vec<Range<u64>>> = grid
        .iter()
        .map(|&g| std::iter::once(0..g).collect())
        .collect();
    for (d, exprs) in per_dim {
        let referenced: HashSet<String> = exprs
            .iter()
            .flat_map(|e| e.column_refs())
            .map(|c| c.name.clone())
            .collect();
        let Some(predicate) = build_predicate(state, model, exprs) else {
            continue;
        };
        match DimensionPruner::new(model, d, &referenced, ctx).await? {
            Some(pruner) => dims[d] = pruner.kept_runs(&predicate),
            None => continue,
        }
    }
    let chunks = ChunkRanges::from_dims(&grid, dims)
        .map_err(|e| to_datafusion_error(e.in_array(model.location())))?;
    Ok(Pruned {
        chunks,
        predicate: display,
    })
}

/// The pruning predicate of `exprs` (a conjunction), or `None` (logged) if none can be built
/// or it keeps everything.
fn build_predicate(
    state: &dyn Session,
    model: &TableModel,
    exprs: Vec<Expr>,
) -> Option<PruningPredicate> {
    let expr = conjunction(exprs)?;
    let schema = model.schema();
    let predicate = DFSchema::try_from(schema.as_ref().clone())
        .and_then(|df_schema| state.create_physical_expr(expr.clone(), &df_schema))
        .and_then(|physical| {
            PruningPredicateBuilder::new()
                .with_file_schema(schema.clone())
                .try_build(physical)
        });
    match predicate {
        Ok(p) if !p.always_true() => Some(p),
        Ok(_) => None,
        Err(e) => {
            log::debug!("zarr: no chunk pruning for {expr}: {e}");
            None
        }
    }
}

/// Pruning along one dimension: what a run of chunks along it spans.
struct DimensionPruner {
    /// The table's chunk grid, the dimension, and its number of chunks.
    grid: ChunkGrid,
    d: usize,
    chunks: u64,
    /// Rows of the table per position along the dimension (for row counts).
    rows_per_position: u64,
    /// The dimension's columns the predicate may refer to: index columns by name, and
    /// coordinate columns with their values.
    index: Vec<String>,
    coordinates: Vec<(String, ArrayRef)>,
    /// Coordinates that are a sparse matrix's compressed dimension: bounded per run by its
    /// `indptr`, whatever the number of stored elements.
    sorted: Vec<(String, MajorOffsets)>,
}

impl DimensionPruner {
    async fn new(
        model: &TableModel,
        d: usize,
        referenced: &HashSet<String>,
        ctx: &ReadContext,
    ) -> Result<Option<Self>> {
        let size = model.dimensions()[d].size;
        let mut pruner = DimensionPruner {
            grid: model.grid().clone(),
            d,
            chunks: model.chunk_grid_shape()[d],
            rows_per_position: model
                .dimensions()
                .iter()
                .enumerate()
                .filter(|(e, _)| *e != d)
                .map(|(_, dim)| dim.size)
                .fold(1u64, u64::saturating_mul),
            index: Vec::new(),
            coordinates: Vec::new(),
            sorted: Vec::new(),
        };
        let reader = TableReader::new(model);
        for col in model.columns() {
            match col.role {
                ColumnRole::Index(e) if e == d => pruner.index.push(col.name.clone()),
                ColumnRole::Coordinate(e) if e == d && referenced.contains(&col.name) => {
                    let sorted = reader
                        .sparse_offsets(d, ctx)
                        .await
                        .map_err(to_datafusion_error)?;
                    if let Some(offsets) = sorted {
                        pruner.sorted.push((col.name.clone(), offsets));
                    } else if size <= MAX_COORDINATE_LEN {
                        let values = reader
                            .read_dimension_values(d, ctx)
                            .await
                            .map_err(to_datafusion_error)?;
                        pruner.coordinates.push((col.name.clone(), values));
                    }
                }
                _ => {}
            }
        }
        if pruner.chunks == 0
            || (pruner.index.is_empty()
                && pruner.coordinates.is_empty()
                && pruner.sorted.is_empty())
        {
            return Ok(None);
        }
        Ok(Some(pruner))
    }

    /// The runs of chunks `predicate` may match, sorted and merged.
    fn kept_runs(&self, predicate: &PruningPredicate) -> Vec<Range<u64>> {
        let whole = std::iter::once(0..self.chunks).collect::<Vec<_>>();
        let mut runs = cut(&whole, FANOUT);
        loop {
            let keep = match predicate.prune(&self.statistics(&runs)) {
                Ok(keep) => keep,
                Err(e) => {
                    log::debug!("zarr: chunk pruning failed: {e}");
                    vec![true; runs.len()]
                }
            };
            let kept: Vec<Range<u64>> = runs
                .into_iter()
                .zip(keep)
                .filter_map(|(r, k)| k.then_some(r))
                .collect();
            let finer = cut(&kept, FANOUT);
            if finer.len() == kept.len() || finer.len() as u64 > BUDGET {
                return merge(kept);
            }
            runs = finer;
        }
    }

    /// Min/max of this dimension's columns over each run of chunks.
    fn statistics(&self, runs: &[Range<u64>]) -> RunStatistics {
        let rows = |r: &Range<u64>| self.grid.elements(self.d, r.clone());
        let mut stats = RunStatistics {
            min: HashMap::new(),
            max: HashMap::new(),
            non_null: HashSet::new(),
            rows: runs
                .iter()
                .map(|r| {
                    let p = rows(r);
                    (p.end - p.start).saturating_mul(self.rows_per_position)
                })
                .collect(),
        };
        for name in &self.index {
            let min = Int64Array::from_iter_values(runs.iter().map(|r| rows(r).start as i64));
            let max = Int64Array::from_iter_values(runs.iter().map(|r| rows(r).end as i64 - 1));
            stats.min.insert(name.clone(), Arc::new(min));
            stats.max.insert(name.clone(), Arc::new(max));
            stats.non_null.insert(name.clone());
        }
        for (name, offsets) in &self.sorted {
            let bounds: Vec<Option<(i64, i64)>> = runs
                .iter()
                .map(|r| offsets.position_bounds(rows(r)))
                .collect();
            let min = Int64Array::from_iter(bounds.iter().map(|b| b.map(|b| b.0)));
            let max = Int64Array::from_iter(bounds.iter().map(|b| b.map(|b| b.1)));
            stats.min.insert(name.clone(), Arc::new(min));
            stats.max.insert(name.clone(), Arc::new(max));
            stats.non_null.insert(name.clone());
        }
        for (name, values) in &self.coordinates {
            let mut mins = Vec::with_capacity(runs.len());
            let mut maxs = Vec::with_capacity(runs.len());
            for r in runs {
                let p = rows(r);
                let part = values.slice(p.start as usize, (p.end - p.start) as usize);
                let extremes = MinAccumulator::try_new(part.data_type())
                    .and_then(|mut min| {
                        min.update_batch(std::slice::from_ref(&part))?;
                        min.evaluate()
                    })
                    .and_then(|min| {
                        let mut max = MaxAccumulator::try_new(part.data_type())?;
                        max.update_batch(std::slice::from_ref(&part))?;
                        Ok((min, max.evaluate()?))
                    });
                match extremes {
                    Ok((min, max)) => {
                        mins.push(min);
                        maxs.push(max);
                    }
                    Err(_) => break,
                }
            }
            if mins.len() != runs.len() {
                continue;
            }
            if let (Ok(min), Ok(max)) = (
                ScalarValue::iter_to_array(mins),
                ScalarValue::iter_to_array(maxs),
            ) {
                stats.min.insert(name.clone(), min);
                stats.max.insert(name.clone(), max);
            }
        }
        stats
    }
}

/// Each run cut into at most `parts` runs of nearly equal length.
fn cut(runs: &[Range<u64>], parts: u64) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    for r in runs {
        let len = r.end - r.start;
        let n = parts.min(len).max(1);
        let (per, extra) = (len / n, len % n);
        let mut at = r.start;
        for i in 0..n {
            let k = per + u64::from(i < extra);
            out.push(at..at + k);
            at += k;
        }
    }
    out
}

/// Adjacent runs joined.
fn merge(runs: Vec<Range<u64>>) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::with_capacity(runs.len());
    for r in runs {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// The statistics of runs of chunks along one dimension, one container a run.
struct RunStatistics {
    min: HashMap<String, ArrayRef>,
    max: HashMap<String, ArrayRef>,
    non_null: HashSet<String>,
    rows: Vec<u64>,
}

impl PruningStatistics for RunStatistics {
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

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_cut_and_merged() {
        assert_eq!(cut(&[0..10], 3), vec![0..4, 4..7, 7..10]);
        assert_eq!(cut(&[0..2, 5..6], 4), vec![0..1, 1..2, 5..6]);
        assert_eq!(merge(vec![0..1, 1..2, 5..6, 6..9]), vec![0..2, 5..9]);
    }
}
