//! Kernels that lay a table's values out over a box of rows, in C order: the Int64 positions
//! of an index column, and the broadcast of an array over fewer dimensions than the table.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, UInt32Array, UInt64Array};

use crate::grid::c_order;
use crate::Result;

/// Int64 positions along dimension `dim` for the box `start .. start + shape`, C order.
pub(crate) fn index_values(start: &[u64], shape: &[u64], dim: usize) -> ArrayRef {
    let n: u64 = shape.iter().product();
    index_run(start, shape, dim, 0, n as usize)
}

/// Rows `offset .. offset + k` (C order) of [`index_values`]: made a run at a time, so an
/// index column costs a batch's worth of memory whatever the size of the chunk's box.
pub(crate) fn index_run(
    start: &[u64],
    shape: &[u64],
    dim: usize,
    offset: usize,
    k: usize,
) -> ArrayRef {
    let inner: u64 = shape[dim + 1..].iter().product::<u64>().max(1);
    let len = shape[dim].max(1);
    let values =
        (offset as u64..(offset + k) as u64).map(|row| (start[dim] + (row / inner) % len) as i64);
    Arc::new(Int64Array::from_iter_values(values))
}

/// Values over the array dims `map` (array dim `i` = table dim `map[i]`), laid out in C order
/// of the array's box, spread over the table box `shape` (C order).
pub(crate) fn broadcast(values: ArrayRef, shape: &[u64], map: &[usize]) -> Result<ArrayRef> {
    let ndim = shape.len();
    if map.len() == ndim && map.iter().enumerate().all(|(i, &t)| i == t) {
        return Ok(values);
    }
    // stride (in the array's box) of each table dimension; 0 where broadcast
    let mut strides = vec![0u64; ndim];
    let mut s = 1u64;
    for &t in map.iter().rev() {
        strides[t] = s;
        s *= shape[t];
    }
    let n: u64 = shape.iter().product();
    let mut idx: Vec<u64> = Vec::with_capacity(n as usize);
    for pos in c_order(shape) {
        idx.push(pos.iter().zip(&strides).map(|(p, s)| p * s).sum());
    }
    if ndim == 0 {
        idx = vec![0];
    }
    let taken = if s <= u32::MAX as u64 {
        let idx = UInt32Array::from_iter_values(idx.into_iter().map(|i| i as u32));
        arrow_select::take::take(values.as_ref(), &idx, None)?
    } else {
        let idx = UInt64Array::from(idx);
        arrow_select::take::take(values.as_ref(), &idx, None)?
    };
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::StringArray;

    use super::*;
    use crate::test_util::strings;

    #[test]
    fn index_and_broadcast() {
        let idx = index_values(&[2, 3], &[2, 2], 1);
        assert_eq!(idx.as_primitive::<Int64Type>().values(), &[3, 4, 3, 4]);
        let idx = index_values(&[2, 3], &[2, 2], 0);
        assert_eq!(idx.as_primitive::<Int64Type>().values(), &[2, 2, 3, 3]);
        // Runs of the index are the slices of the whole one, in every dimension of a 3-D box.
        let (start, shape) = ([1, 5, 9], [3, 2, 4]);
        for dim in 0..3 {
            let whole = index_values(&start, &shape, dim);
            for (offset, k) in [(0, 24), (0, 5), (5, 7), (23, 1), (12, 0)] {
                assert_eq!(
                    index_run(&start, &shape, dim, offset, k).as_ref(),
                    whole.slice(offset, k).as_ref(),
                    "dim {dim}, rows {offset}+{k}"
                );
            }
        }
        let ab: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        assert_eq!(
            strings(&broadcast(ab.clone(), &[2, 2], &[1]).unwrap()),
            ["a", "b", "a", "b"]
        );
        assert_eq!(
            strings(&broadcast(ab.clone(), &[2, 2], &[0]).unwrap()),
            ["a", "a", "b", "b"]
        );
        assert_eq!(strings(&broadcast(ab, &[], &[]).unwrap()), ["a", "b"]);
        // an array over (y, x) in a table over (x, y): a transpose
        let yx: ArrayRef = Arc::new(StringArray::from(vec![
            "y0x0", "y0x1", "y1x0", "y1x1", "y2x0", "y2x1",
        ]));
        assert_eq!(
            strings(&broadcast(yx, &[2, 3], &[1, 0]).unwrap()),
            ["y0x0", "y1x0", "y2x0", "y0x1", "y1x1", "y2x1"]
        );
    }
}
