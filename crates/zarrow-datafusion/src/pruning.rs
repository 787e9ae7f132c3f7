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
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, UInt64Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::error::Result;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{Accumulator, Expr};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{
    conjunction as physical_conjunction, create_physical_expr,
    split_conjunction as split_physical_conjunction, DynamicFilterTracking, PhysicalExpr,
};
use datafusion::physical_expr_common::physical_expr::{
    snapshot_generation, snapshot_physical_expr,
};
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
    /// The coordinate values read to prune by, as `(dimension, column, values)`.
    pub coordinates: Vec<(usize, String, ArrayRef)>,
}

/// The dimension a filter is about, if it refers to the columns of exactly one dimension.
fn dimension_of(model: &TableModel, expr: &Expr) -> Option<usize> {
    dimension_of_columns(model, expr.column_refs().iter().map(|c| c.name.as_str()))
}

/// The dimension of `columns`, if they are the index and coordinate columns of exactly one.
fn dimension_of_columns<'a>(
    model: &TableModel,
    columns: impl IntoIterator<Item = &'a str>,
) -> Option<usize> {
    let mut dims = HashSet::new();
    for name in columns {
        let column = model.columns().iter().find(|col| col.name == name)?;
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
            coordinates: Vec::new(),
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
    let mut coordinates = Vec::new();
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
        let Some(pruner) = DimensionPruner::new(model, d, &referenced, ctx).await? else {
            continue;
        };
        dims[d] = pruner.kept_runs(&predicate);
        coordinates.extend(
            (pruner.coordinates.iter()).map(|(name, values)| (d, name.clone(), values.clone())),
        );
    }
    let chunks = ChunkRanges::from_dims(&grid, dims)
        .map_err(|e| to_datafusion_error(e.in_array(model.location())))?;
    Ok(Pruned {
        chunks,
        predicate: display,
        coordinates,
    })
}

/// Pruning by filters a query learns while it runs (a hash join's build side, a top-k's
/// threshold: DataFusion's dynamic filters), chunk by chunk as the scan reaches them (see
/// [`zarrow::ChunkFilter`]). The conjuncts of the filter's current state that refer to one
/// dimension's index and coordinate columns prune along it, as at planning
/// ([`DimensionPruner::kept_runs`]); the kept runs are worked out again only when the filter
/// has changed. Coordinates are read once, when the pruner is made (through the scan's cache).
#[derive(Debug)]
pub(crate) struct RunTimePruner {
    /// The filters, bound to `schema` (the scan's columns).
    predicate: Arc<dyn PhysicalExpr>,
    schema: SchemaRef,
    /// The pruners of the dimensions the filters refer to.
    dims: Vec<(usize, DimensionPruner)>,
    /// What the filter kept when it was last looked at.
    kept: Mutex<Option<Kept>>,
}

/// What a run-time filter keeps at one generation.
#[derive(Debug)]
struct Kept {
    generation: u64,
    /// The kept runs of chunks along each of the pruner's dimensions (`None`: all).
    runs: Vec<Option<Vec<Range<u64>>>>,
    /// The conjuncts over several dimensions, judged chunk by chunk.
    across: Option<PruningPredicate>,
}

impl RunTimePruner {
    /// The pruner of `predicate` (over the columns of `schema`) on `model`, or `None` if it
    /// refers to no dimension's index or coordinate columns.
    pub(crate) async fn new(
        model: &TableModel,
        predicate: Arc<dyn PhysicalExpr>,
        schema: SchemaRef,
        ctx: &ReadContext,
    ) -> Result<Option<Self>> {
        let columns: HashSet<String> = collect_columns(&predicate)
            .into_iter()
            .map(|c| c.name().to_string())
            .collect();
        let mut dims: Vec<(usize, DimensionPruner)> = Vec::new();
        for name in &columns {
            let Some(d) = dimension_of_columns(model, [name.as_str()]) else {
                continue;
            };
            if dims.iter().any(|(e, _)| *e == d) {
                continue;
            }
            if let Some(pruner) = DimensionPruner::new(model, d, &columns, ctx).await? {
                dims.push((d, pruner));
            }
        }
        if dims.is_empty() {
            return Ok(None);
        }
        Ok(Some(RunTimePruner {
            predicate,
            schema,
            dims,
            kept: Mutex::new(None),
        }))
    }

    /// What the filter as it is now keeps.
    fn kept_now(&self, generation: u64) -> Kept {
        let mut kept = Kept {
            generation,
            runs: vec![None; self.dims.len()],
            across: None,
        };
        let now = match snapshot_physical_expr(self.predicate.clone()) {
            Ok(now) => now,
            Err(e) => {
                log::debug!("zarr: no run-time pruning: {e}");
                return kept;
            }
        };
        let mut per_dim: HashMap<usize, Vec<Arc<dyn PhysicalExpr>>> = HashMap::new();
        let mut across = Vec::new();
        for conjunct in split_physical_conjunction(&now) {
            // Conjuncts on the columns of the pruner's dimensions only: of one, or of several.
            let dims: HashSet<Option<usize>> = collect_columns(conjunct)
                .iter()
                .map(|c| self.dimension_of(c.name()))
                .collect();
            match dims.into_iter().collect::<Vec<_>>()[..] {
                [Some(d)] => per_dim.entry(d).or_default().push(conjunct.clone()),
                ref several if several.iter().all(Option::is_some) => across.push(conjunct.clone()),
                _ => {}
            }
        }
        for (runs, (d, pruner)) in kept.runs.iter_mut().zip(&self.dims) {
            *runs = per_dim
                .remove(d)
                .and_then(|exprs| self.predicate_of(exprs))
                .map(|p| pruner.kept_runs(&p));
        }
        kept.across = self.predicate_of(across);
        kept
    }

    /// The pruning predicate of the conjunction of `exprs`, if it prunes anything.
    fn predicate_of(&self, exprs: Vec<Arc<dyn PhysicalExpr>>) -> Option<PruningPredicate> {
        if exprs.is_empty() {
            return None;
        }
        let expr = physical_conjunction(exprs);
        pruning_predicate(Ok(expr.clone()), self.schema.clone(), &expr)
    }

    /// Whether the chunk at `coords` may match `predicate` (over several dimensions): the
    /// statistics of each dimension's columns over the chunk, as one container.
    fn chunk_may_match(&self, predicate: &PruningPredicate, coords: &[u64]) -> bool {
        let mut stats = RunStatistics::default();
        for (d, pruner) in &self.dims {
            let Some(&c) = coords.get(*d) else {
                return true;
            };
            let one = pruner.statistics(std::slice::from_ref(&(c..c + 1)));
            stats.min.extend(one.min);
            stats.max.extend(one.max);
            stats.non_null.extend(one.non_null);
            stats.rows = one.rows;
        }
        match predicate.prune(&stats) {
            Ok(keep) => keep.first().copied().unwrap_or(true),
            Err(e) => {
                log::debug!("zarr: run-time pruning failed: {e}");
                true
            }
        }
    }

    /// The dimension of the pruner whose column `name` is.
    fn dimension_of(&self, name: &str) -> Option<usize> {
        self.dims
            .iter()
            .find(|(_, p)| p.has_column(name))
            .map(|(d, _)| *d)
    }
}

impl zarrow::ChunkFilter for RunTimePruner {
    fn may_match(&self, coords: &[u64]) -> bool {
        let generation = snapshot_generation(&self.predicate);
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let kept = match &*kept {
            Some(k) if k.generation == generation => k,
            _ => kept.insert(self.kept_now(generation)),
        };
        let along = self.dims.iter().zip(&kept.runs).all(|((d, _), runs)| {
            let (Some(runs), Some(&c)) = (runs, coords.get(*d)) else {
                return true;
            };
            // The runs are sorted and disjoint: the last that starts at or before `c`.
            let at = runs.partition_point(|r| r.start <= c);
            at > 0 && runs[at - 1].contains(&c)
        });
        along
            && kept
                .across
                .as_ref()
                .is_none_or(|p| self.chunk_may_match(p, coords))
    }

    fn is_settled(&self) -> bool {
        !matches!(
            DynamicFilterTracking::classify(&self.predicate),
            DynamicFilterTracking::Watching(_)
        )
    }
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
    let physical = DFSchema::try_from(schema.as_ref().clone())
        .and_then(|df_schema| physical_expr(state, expr.clone(), &df_schema));
    pruning_predicate(physical, schema, &expr)
}

/// `expr` planned in this library, as `SessionState::create_physical_expr` plans it (coerced
/// to `df_schema`, with the session's options and execution properties), without asking the
/// session to. Through datafusion-ffi (a table registered in datafusion-python), the session
/// is the caller's: it would plan the expression on its side of the boundary and hand back an
/// opaque foreign expression that a pruning predicate cannot look into, so nothing would be
/// pruned.
fn physical_expr(
    state: &dyn Session,
    expr: Expr,
    df_schema: &DFSchema,
) -> Result<Arc<dyn PhysicalExpr>> {
    let props = state.execution_props();
    let context = SimplifyContext::builder()
        .with_schema(Arc::new(df_schema.clone()))
        .with_config_options(Arc::new(state.config_options().clone()))
        .with_query_execution_start_time(props.query_execution_start_time)
        .build();
    let expr = ExprSimplifier::new(context).coerce(expr, df_schema)?;
    create_physical_expr(&expr, df_schema, props, &PhysicalPlanningContext::default())
}

/// The pruning predicate of `physical` (the filter `what`) over `schema`, or `None` (logged)
/// if none can be built or it keeps everything.
fn pruning_predicate(
    physical: Result<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    what: &dyn std::fmt::Display,
) -> Option<PruningPredicate> {
    let predicate = physical.and_then(|physical| {
        PruningPredicateBuilder::new()
            .with_file_schema(schema)
            .try_build(physical)
    });
    match predicate {
        Ok(p) if !p.always_true() => Some(p),
        Ok(_) => None,
        Err(e) => {
            log::debug!("zarr: no chunk pruning for {what}: {e}");
            None
        }
    }
}

/// Pruning along one dimension: what a run of chunks along it spans.
#[derive(Debug)]
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

    /// Whether `name` is one of the dimension's columns the pruner has statistics of.
    fn has_column(&self, name: &str) -> bool {
        self.index.iter().any(|n| n == name)
            || self.coordinates.iter().any(|(n, _)| n == name)
            || self.sorted.iter().any(|(n, _)| n == name)
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
#[derive(Default)]
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
