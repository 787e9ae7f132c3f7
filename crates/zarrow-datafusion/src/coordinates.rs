//! What a scan knows of a coordinate column whose values planning read anyway (to prune
//! chunks by a filter on it): whether the values are monotonic along their dimension, which
//! makes the column an output ordering of the scan where the first dimension's index is one
//! (the coordinate of dimension 0, ascending or descending), and their min/max over each run
//! of chunks, as column statistics. Nothing is read here: a coordinate no filter needed has
//! neither.

use std::ops::Range;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::compute::kernels::cmp::{gt_eq, lt_eq};
use datafusion::arrow::compute::SortOptions;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
use zarrow::{ChunkGrid, ChunkRanges};

/// A coordinate column of a scan and the values planning read of it.
#[derive(Debug, Clone)]
pub(crate) struct KnownCoordinate {
    /// Its position in the scan's schema.
    pub at: usize,
    /// Its dimension.
    pub d: usize,
    /// Its values, one per position along the dimension.
    values: ArrayRef,
    /// The order the values follow along the dimension (no nulls), if they do.
    pub order: Option<SortOptions>,
}

impl PartialEq for KnownCoordinate {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.d, self.order) == (other.at, other.d, other.order)
            && self.values.to_data() == other.values.to_data()
    }
}

impl Eq for KnownCoordinate {}

impl KnownCoordinate {
    /// The coordinate at `at` of dimension `d` with `values`.
    pub(crate) fn new(at: usize, d: usize, values: ArrayRef) -> Self {
        KnownCoordinate {
            at,
            d,
            order: monotonic(&values),
            values,
        }
    }

    /// Min/max of the values at the positions of `chunks` (a run of chunks of `grid`) along
    /// the coordinate's dimension: exact along dimension 0, whose chunks a run takes in order
    /// from its first to its last; along another, exact only where the run is its whole
    /// selection (else a bound).
    pub(crate) fn statistics(&self, grid: &ChunkGrid, chunks: &ChunkRanges) -> ColumnStatistics {
        let unknown = ColumnStatistics::new_unknown();
        let (Some(first), Some(last)) = (chunks.iter().next(), chunks.iter_rev().next()) else {
            return unknown;
        };
        let Some(ranges) = chunks.dims().get(self.d) else {
            return unknown;
        };
        let (along, exact): (Vec<Range<u64>>, bool) = match (self.d, first.first(), last.first()) {
            (0, Some(&lo), Some(&hi)) => (clip(ranges, lo..hi.saturating_add(1)), true),
            (0, _, _) => return unknown,
            _ => {
                let whole: u64 = chunks
                    .dims()
                    .iter()
                    .map(|r| r.iter().map(|r| r.end - r.start).sum::<u64>())
                    .fold(1u64, u64::saturating_mul);
                (ranges.clone(), whole == chunks.len())
            }
        };
        let positions: Vec<Range<u64>> = along
            .into_iter()
            .map(|r| grid.elements(self.d, r))
            .filter(|p| !p.is_empty() && p.end <= self.values.len() as u64)
            .collect();
        let Some((min, max, nulls)) = self.extremes(&positions) else {
            return unknown;
        };
        let value = |v: ScalarValue| match exact {
            true => Precision::Exact(v),
            false => Precision::Inexact(v),
        };
        ColumnStatistics {
            null_count: match nulls {
                0 => Precision::Exact(0),
                _ => Precision::Absent,
            },
            min_value: value(min),
            max_value: value(max),
            ..unknown
        }
    }

    /// Min, max (nulls aside) and number of nulls of the values at `positions`, if any is
    /// not null.
    fn extremes(&self, positions: &[Range<u64>]) -> Option<(ScalarValue, ScalarValue, usize)> {
        let slices: Vec<ArrayRef> = positions
            .iter()
            .map(|p| {
                self.values
                    .slice(p.start as usize, (p.end - p.start) as usize)
            })
            .collect();
        let nulls = slices.iter().map(|s| s.null_count()).sum();
        let (min, max) = match (self.order, slices.first(), slices.last()) {
            // Monotonic (no nulls): the first and last values.
            (Some(order), Some(a), Some(b)) => {
                let first = ScalarValue::try_from_array(a, 0).ok()?;
                let last = ScalarValue::try_from_array(b, b.len() - 1).ok()?;
                match order.descending {
                    false => (first, last),
                    true => (last, first),
                }
            }
            _ => {
                let data_type = self.values.data_type();
                let mut min = MinAccumulator::try_new(data_type).ok()?;
                let mut max = MaxAccumulator::try_new(data_type).ok()?;
                for slice in &slices {
                    min.update_batch(std::slice::from_ref(slice)).ok()?;
                    max.update_batch(std::slice::from_ref(slice)).ok()?;
                }
                (min.evaluate().ok()?, max.evaluate().ok()?)
            }
        };
        (!min.is_null() && !max.is_null()).then_some((min, max, nulls))
    }
}

/// `ranges` (sorted, disjoint) cut to `within`.
fn clip(ranges: &[Range<u64>], within: Range<u64>) -> Vec<Range<u64>> {
    ranges
        .iter()
        .map(|r| r.start.max(within.start)..r.end.min(within.end))
        .filter(|r| !r.is_empty())
        .collect()
}

/// The order `values` follow, if they have no nulls and follow one: ascending (each at most
/// the next, nulls last as `ORDER BY` has it) or else descending (nulls first). Floats compare
/// in IEEE total order (NaN last), as DataFusion sorts them.
fn monotonic(values: &ArrayRef) -> Option<SortOptions> {
    if values.null_count() > 0 {
        return None;
    }
    let n = values.len();
    if n < 2 {
        return Some(SortOptions::new(false, false));
    }
    let (a, b) = (values.slice(0, n - 1), values.slice(1, n - 1));
    let all = |holds: Option<datafusion::arrow::array::BooleanArray>| {
        holds.is_some_and(|h| h.null_count() == 0 && h.true_count() == n - 1)
    };
    if all(lt_eq(&a, &b).ok()) {
        return Some(SortOptions::new(false, false));
    }
    if all(gt_eq(&a, &b).ok()) {
        return Some(SortOptions::new(true, true));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};

    use super::*;

    #[test]
    fn monotonic_values_are_told_apart() {
        let asc: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 2, 5]));
        let desc: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN, 3.0, -0.0, -1.0]));
        let neither: ArrayRef = Arc::new(StringArray::from(vec!["b", "a", "c"]));
        let nulls: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3)]));
        assert_eq!(monotonic(&asc), Some(SortOptions::new(false, false)));
        assert_eq!(monotonic(&desc), Some(SortOptions::new(true, true)));
        assert_eq!(monotonic(&neither), None);
        assert_eq!(monotonic(&nulls), None);
    }

    #[test]
    fn runs_are_clipped() {
        assert_eq!(clip(&[0..3, 5..9], 2..6), vec![2..3, 5..6]);
    }
}
