//! What a scan knows of its index columns without reading a chunk: the positions a run of
//! chunks spans along each dimension are the grid's, so the index columns' min/max per run are
//! exact statistics, and a scan that reads one chunk along every dimension but the first gives
//! its rows in ascending order of the first dimension's index column (C order within a chunk,
//! chunks in order within a partition): its output ordering. A coordinate column whose values
//! planning read (see `coordinates.rs`) adds its ordering (dimension 0's, if monotonic) and
//! its min/max.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::Schema;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use zarrow::table::{ColumnRole, TableModel};
use zarrow::{ChunkGrid, ChunkRanges};

use crate::coordinates::KnownCoordinate;

/// The index columns among a scan's columns, and the grid they follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexColumns {
    /// Per index column of the scan: its position in the scan's schema and its dimension.
    columns: Vec<(usize, usize)>,
    /// Chunk extent and length of each table dimension.
    chunk: Vec<u64>,
    size: Vec<u64>,
    /// Whether each partition gives its rows in ascending order of dimension 0's positions
    /// (the scan reads one chunk along every other dimension).
    ordered: bool,
    /// The table's chunk grid (for the coordinates' positions).
    grid: ChunkGrid,
    /// The coordinate columns among the scan's whose values planning read.
    coordinates: Vec<KnownCoordinate>,
}

impl IndexColumns {
    /// The index columns of `schema` (the scan's columns) in `model`, for a scan of `chunks`.
    pub(crate) fn new(model: &TableModel, schema: &Schema, chunks: &ChunkRanges) -> Self {
        let columns: Vec<(usize, usize)> = model
            .columns()
            .iter()
            .filter_map(|col| match col.role {
                ColumnRole::Index(d) => Some((schema.index_of(&col.name).ok()?, d)),
                _ => None,
            })
            .collect();
        let one_chunk_across = chunks
            .dims()
            .iter()
            .skip(1)
            .all(|ranges| ranges.iter().map(|r| r.end - r.start).sum::<u64>() <= 1);
        IndexColumns {
            ordered: one_chunk_across,
            columns,
            chunk: model.chunk_shape().to_vec(),
            size: model.dimensions().iter().map(|d| d.size).collect(),
            grid: model.grid().clone(),
            coordinates: Vec::new(),
        }
    }

    /// With the values planning read of coordinate columns: `(dimension, name, values)`.
    /// Those not among `schema`'s columns (the scan's), or not of their column's type, are
    /// left out.
    pub(crate) fn with_coordinates(
        mut self,
        schema: &Schema,
        values: &[(usize, String, ArrayRef)],
    ) -> Self {
        self.coordinates = values
            .iter()
            .filter_map(|(d, name, values)| {
                let at = schema.index_of(name).ok()?;
                (schema.field(at).data_type() == values.data_type())
                    .then(|| KnownCoordinate::new(at, *d, values.clone()))
            })
            .collect();
        self
    }

    /// The orderings every partition's rows follow, if they do: dimension 0's index
    /// ascending, and its coordinate where its values are monotonic.
    pub(crate) fn orderings(&self, schema: &Schema) -> Vec<LexOrdering> {
        if !self.ordered {
            return Vec::new();
        }
        let index = self.leading(schema);
        let coordinates = self.coordinates.iter().filter_map(|c| {
            let order = c.order.filter(|_| c.d == 0)?;
            let column = Column::new(schema.field(c.at).name(), c.at);
            Some(PhysicalSortExpr::new(Arc::new(column), order))
        });
        index
            .into_iter()
            .chain(coordinates)
            .filter_map(|sort| LexOrdering::new([sort]))
            .collect()
    }

    /// Dimension 0's index ascending, if the scan reads it: the order of the chunks' rows
    /// (C order of the grid), chunk by chunk, whether or not the rows follow it.
    pub(crate) fn leading(&self, schema: &Schema) -> Option<PhysicalSortExpr> {
        let &(at, _) = self.columns.iter().find(|&&(_, d)| d == 0)?;
        let column = Column::new(schema.field(at).name(), at);
        Some(PhysicalSortExpr::new(
            Arc::new(column),
            SortOptions::new(false, false),
        ))
    }

    /// Statistics of the index columns (and known coordinates) over the chunks of one run
    /// (all of it read), each column at its position in a schema of `width` columns (the
    /// others unknown).
    pub(crate) fn statistics(&self, chunks: &ChunkRanges, width: usize) -> Vec<ColumnStatistics> {
        let mut out = vec![ColumnStatistics::new_unknown(); width];
        for c in &self.coordinates {
            if let Some(stats) = out.get_mut(c.at) {
                *stats = c.statistics(&self.grid, chunks);
            }
        }
        let (Some(first), Some(last)) = (chunks.iter().next(), chunks.iter_rev().next()) else {
            return out;
        };
        for &(at, d) in &self.columns {
            let (Some(&chunk), Some(&size)) = (self.chunk.get(d), self.size.get(d)) else {
                continue;
            };
            // Along dimension 0 (the outermost of C order) the first chunk starts the run's
            // range and the last ends it; along the others, the run spans at most its
            // selection's ranges.
            let (lo, hi, exact) = match (d, first.first(), last.first()) {
                (0, Some(&lo), Some(&hi)) => (lo, hi, true),
                (0, _, _) => continue,
                _ => match (chunks.dims()[d].first(), chunks.dims()[d].last()) {
                    (Some(a), Some(b)) => (a.start, b.end.saturating_sub(1), false),
                    _ => continue,
                },
            };
            let min = lo.saturating_mul(chunk).min(size);
            let end = hi.saturating_add(1).saturating_mul(chunk).min(size);
            let (Ok(min), Ok(max)) = (i64::try_from(min), i64::try_from(end.saturating_sub(1)))
            else {
                continue;
            };
            if end <= min as u64 {
                continue;
            }
            let value = |v: i64| match exact {
                true => Precision::Exact(ScalarValue::Int64(Some(v))),
                false => Precision::Inexact(ScalarValue::Int64(Some(v))),
            };
            out[at] = ColumnStatistics {
                null_count: Precision::Exact(0),
                min_value: value(min),
                max_value: value(max),
                ..ColumnStatistics::new_unknown()
            };
        }
        out
    }
}
