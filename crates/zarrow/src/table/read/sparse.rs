//! The readers of a sparse matrix's position columns (see `table/sparse.rs` for the table):
//! the compressed dimension's position of stored element `k` is the `r` with `indptr[r] <= k
//! < indptr[r + 1]` — `indptr` is read whole once per reader, and checked (from 0,
//! non-decreasing, ending at `nnz`, no longer than the chunk limit allows); the other
//! dimension is `indices` as Int64, checked against the matrix shape. Both are checked
//! whenever the matrix is read, whichever of its columns a query asks for.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, Int64Array};
use arrow_buffer::ScalarBuffer;
use arrow_schema::DataType as ArrowType;
use tokio::sync::OnceCell;

use super::{Checked, ColumnReader, Placement, RowBox, Values};
use crate::error::ChunkError;
use crate::{Error, ReadContext, Result, ZarrArray};

/// A sparse matrix's `indptr`, loaded (and checked) on first use, once per reader — and once
/// per scan: it is held in the scan's cache, which its partitions share.
pub(crate) struct Indptr {
    array: ZarrArray,
    /// The stored elements (`data`'s length), where the offsets must end.
    nnz: u64,
    loaded: OnceCell<MajorOffsets>,
}

impl Indptr {
    pub(super) fn new(array: ZarrArray, nnz: u64) -> Self {
        Indptr {
            array,
            nnz,
            loaded: OnceCell::new(),
        }
    }

    /// The offsets, read and checked the first time.
    pub(super) async fn load(&self, ctx: &ReadContext) -> Result<MajorOffsets> {
        let read = || async {
            let load = || async {
                let offsets = load_indptr(&self.array, self.nnz, ctx).await?;
                Ok(Arc::new(Int64Array::from(offsets)) as ArrayRef)
            };
            let offsets = match &ctx.cache {
                Some(cache) => {
                    let key = format!("indptr of {}", self.array.path());
                    cache.get_or_hold(&key, load).await?
                }
                None => load().await?,
            };
            let offsets = offsets.as_primitive_opt::<Int64Type>().ok_or_else(|| {
                let path = self.array.path();
                let held = offsets.data_type();
                Error::table(
                    path,
                    format!("sparse matrix '{path}': offsets held as {held}"),
                )
            })?;
            Ok::<_, Error>(MajorOffsets(offsets.values().clone()))
        };
        Ok(self.loaded.get_or_try_init(read).await?.clone())
    }

    /// The bytes held while it is loaded: the offsets as i64, and as read while they are
    /// converted.
    pub(super) fn held_bytes(&self) -> u64 {
        let n = self.array.shape()[0];
        let item = self.array.metadata().data_type.fixed_size().unwrap_or(8) as u64;
        n.saturating_mul(8 + item)
    }
}

/// The compressed dimension's column: the position of each stored element, from `indptr`.
pub(super) struct MajorReader {
    indptr: Arc<Indptr>,
    at: Placement,
}

impl MajorReader {
    pub(super) fn new(indptr: Arc<Indptr>, at: Placement) -> Self {
        MajorReader { indptr, at }
    }
}

impl ColumnReader for MajorReader {
    fn read<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Values<'a> {
        Box::pin(async move {
            let offsets = self.indptr.load(&self.at.context(ctx)).await?;
            let (start, shape) = self.at.array_box(rows);
            let positions =
                major_positions(&offsets.0, start[0], shape[0], self.indptr.array.path())?;
            self.at.lay_out(positions, rows)
        })
    }

    fn check<'a>(&'a self, _: &'a RowBox, ctx: &'a ReadContext) -> Checked<'a> {
        Box::pin(async move { self.indptr.load(ctx).await.map(drop) })
    }
}

/// The other dimension's column: `indices` as Int64, below `size`.
pub(super) struct MinorReader {
    indices: ZarrArray,
    size: u64,
    at: Placement,
}

impl MinorReader {
    pub(super) fn new(indices: ZarrArray, size: u64, at: Placement) -> Self {
        MinorReader { indices, size, at }
    }
}

impl ColumnReader for MinorReader {
    fn read<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Values<'a> {
        Box::pin(async move {
            let values = self.at.read(&self.indices, rows, ctx).await?;
            let (start, _) = self.at.array_box(rows);
            let positions = minor_positions(values, self.size, &self.indices, start[0])?;
            self.at.lay_out(positions, rows)
        })
    }

    fn check<'a>(&'a self, rows: &'a RowBox, ctx: &'a ReadContext) -> Checked<'a> {
        Box::pin(async move { self.read(rows, ctx).await.map(drop) })
    }
}

/// `indptr`, read whole, no larger than the chunk limit (it is held for the table's life),
/// and checked (see [`check_indptr`]; its length was checked at open): a bad offset is an
/// error naming `indptr` and its chunk.
async fn load_indptr(indptr: &ZarrArray, nnz: u64, ctx: &ReadContext) -> Result<Vec<i64>> {
    let n = indptr.shape()[0];
    let bad = |why: String| {
        Error::table(
            indptr.path(),
            format!("sparse matrix '{}': {why}", indptr.path()),
        )
    };
    if n.saturating_mul(8) > ctx.options.limits.max_chunk_bytes as u64 {
        return Err(bad(format!(
            "{n} offsets are more than the {} bytes zarrow holds of one array (max_chunk_bytes, ZARROW_MAX_CHUNK_BYTES)",
            ctx.options.limits.max_chunk_bytes
        )));
    }
    let raw = indptr.read_region_in(&[0], &[n], ctx).await?;
    let offsets = as_i64(raw.as_ref())
        .ok_or_else(|| bad("offsets are not integers".into()))?
        .map_err(|k| {
            element_error(
                indptr,
                k as u64,
                ChunkError::Offsets(format!("indptr's element {k} does not fit in 64 bits")),
            )
        })?;
    drop(raw);
    check_indptr(&offsets, nnz)
        .map_err(|bad| element_error(indptr, bad.element as u64, ChunkError::Offsets(bad.why)))?;
    Ok(offsets)
}

/// An offset of `indptr` that is wrong: which element, and why.
#[derive(Debug, PartialEq, Eq)]
struct BadOffset {
    element: usize,
    why: String,
}

impl BadOffset {
    fn at(element: usize, why: String) -> Self {
        BadOffset { element, why }
    }
}

/// Where and why `offsets` are not a sparse matrix's `indptr` over `nnz` stored elements:
/// they start at 0, never decrease, and end at `nnz`.
fn check_indptr(offsets: &[i64], nnz: u64) -> std::result::Result<(), BadOffset> {
    if let Some(&first) = offsets.first().filter(|&&o| o != 0) {
        return Err(BadOffset::at(0, format!("offsets start at {first}, not 0")));
    }
    if let Some(w) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(BadOffset::at(
            w + 1,
            format!(
                "offsets decrease at element {}: {} then {}",
                w + 1,
                offsets[w],
                offsets[w + 1]
            ),
        ));
    }
    let end = offsets.len().saturating_sub(1);
    match offsets.last().map(|&last| (last, u64::try_from(last))) {
        Some((last, Ok(l))) if l > nnz => Err(BadOffset::at(
            end,
            format!("the last offset {last} is past the {nnz} stored elements of `data`"),
        )),
        Some((last, _)) if u64::try_from(last) != Ok(nnz) => Err(BadOffset::at(
            end,
            format!("the last offset {last} leaves stored elements of the {nnz} in `data` out"),
        )),
        _ => Ok(()),
    }
}

/// The error of element `k` of the 1-D `array`, naming its chunk.
fn element_error(array: &ZarrArray, k: u64, source: ChunkError) -> Error {
    let chunk = array.grid().chunks_in(0, &(k..k + 1)).start;
    Error::chunk(
        array.path(),
        array.chunk_location(&[chunk]).to_string(),
        source,
    )
}

/// A sparse matrix's `indptr`, as what the compressed-dimension positions of the stored
/// elements are: non-decreasing, so the positions over any run of elements are bounded by two
/// binary searches — what chunk pruning uses instead of reading `nnz` positions.
#[derive(Debug, Clone)]
pub struct MajorOffsets(ScalarBuffer<i64>);

impl MajorOffsets {
    /// The smallest and largest position of stored elements `elements` (`None` if the range
    /// is empty or lies past the last offset).
    pub fn position_bounds(&self, elements: std::ops::Range<u64>) -> Option<(i64, i64)> {
        let last = self.0.last().copied().unwrap_or(0) as u64;
        if elements.is_empty() || elements.end > last {
            return None;
        }
        // the position of element k: the last r with offsets[r] <= k
        let position = |k: u64| self.0.partition_point(|&o| o as u64 <= k) as i64 - 1;
        Some((position(elements.start), position(elements.end - 1)))
    }
}

impl From<Vec<i64>> for MajorOffsets {
    fn from(offsets: Vec<i64>) -> Self {
        Self(offsets.into())
    }
}

/// The compressed-dimension positions of stored elements `start .. start + len`.
fn major_positions(offsets: &[i64], start: u64, len: u64, path: &str) -> Result<ArrayRef> {
    let end = start.saturating_add(len);
    let last = offsets.last().copied().unwrap_or(0) as u64;
    if end > last {
        return Err(Error::table(
            path,
            format!(
                "sparse matrix '{path}': stored elements {start}..{end} lie past indptr's last \
                 offset {last}"
            ),
        ));
    }
    let mut out = Vec::with_capacity(len as usize);
    // The row of `start`: the last `r` with offsets[r] <= start.
    let mut r = offsets
        .partition_point(|&o| o as u64 <= start)
        .saturating_sub(1);
    for k in start..end {
        while offsets[r + 1] as u64 <= k {
            r += 1;
        }
        out.push(r as i64);
    }
    Ok(Arc::new(Int64Array::from(out)))
}

/// The values of an integer array as i64 (`Err(k)`: element `k` does not fit, a u64 past
/// i64::MAX); `None` if the array is not of integers.
fn as_i64(a: &dyn Array) -> Option<std::result::Result<Vec<i64>, usize>> {
    macro_rules! ints {
        ($t:ty) => {{
            let values = a.as_primitive::<$t>().values();
            let mut out = Vec::with_capacity(values.len());
            for (k, v) in values.iter().enumerate() {
                match i64::try_from(*v) {
                    Ok(v) => out.push(v),
                    Err(_) => return Some(Err(k)),
                }
            }
            out
        }};
    }
    Some(Ok(match a.data_type() {
        ArrowType::Int8 => ints!(Int8Type),
        ArrowType::Int16 => ints!(Int16Type),
        ArrowType::Int32 => ints!(Int32Type),
        ArrowType::Int64 => ints!(Int64Type),
        ArrowType::UInt8 => ints!(UInt8Type),
        ArrowType::UInt16 => ints!(UInt16Type),
        ArrowType::UInt32 => ints!(UInt32Type),
        ArrowType::UInt64 => ints!(UInt64Type),
        _ => return None,
    }))
}

/// `indices`' stored elements `start ..` (`values`) as Int64 positions along the other
/// dimension, each checked against its `size`: one outside is an error naming `indices` and
/// its chunk.
fn minor_positions(
    values: ArrayRef,
    size: u64,
    indices: &ZarrArray,
    start: u64,
) -> Result<ArrayRef> {
    let not_integers = || {
        let path = indices.path();
        Error::table(
            path,
            format!("sparse matrix '{path}': indices are not integers"),
        )
    };
    let outside = |k: usize, value: String| {
        let k = start + k as u64;
        element_error(
            indices,
            k,
            ChunkError::Invalid(format!(
                "index {value} of stored element {k} is outside the {size} positions of its \
                 dimension"
            )),
        )
    };
    let positions = as_i64(values.as_ref())
        .ok_or_else(not_integers)?
        .map_err(|k| outside(k, "past 2^63".into()))?;
    if let Some(k) = positions.iter().position(|&v| v < 0 || v as u64 >= size) {
        return Err(outside(k, positions[k].to_string()));
    }
    Ok(Arc::new(Int64Array::from(positions)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_stored_elements() {
        // rows 0: 2 elements, 1: none, 2: 3 elements, 3: 1
        let offsets = [0, 2, 2, 5, 6];
        let rows = major_positions(&offsets, 0, 6, "m").unwrap();
        let rows = rows.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(rows.values().to_vec(), [0, 0, 2, 2, 2, 3]);
        let part = major_positions(&offsets, 3, 2, "m").unwrap();
        let part = part.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(part.values().to_vec(), [2, 2]);
        assert!(major_positions(&offsets, 5, 2, "m").is_err());
        assert!(major_positions(&[0], 0, 0, "m").unwrap().is_empty());
    }

    #[test]
    fn position_bounds_of_runs_of_elements() {
        let offsets = MajorOffsets::from(vec![0, 2, 2, 5, 6]);
        assert_eq!(offsets.position_bounds(0..6), Some((0, 3)));
        assert_eq!(offsets.position_bounds(2..5), Some((2, 2)));
        assert_eq!(offsets.position_bounds(1..3), Some((0, 2)));
        assert_eq!(offsets.position_bounds(5..6), Some((3, 3)));
        assert_eq!(offsets.position_bounds(3..3), None);
        assert_eq!(offsets.position_bounds(5..7), None);
        // the same as the positions themselves
        let all = major_positions(&[0, 2, 2, 5, 6], 0, 6, "m").unwrap();
        let all = all.as_any().downcast_ref::<Int64Array>().unwrap();
        for s in 0..6u64 {
            for e in s + 1..=6 {
                let part = &all.values()[s as usize..e as usize];
                let want = (*part.iter().min().unwrap(), *part.iter().max().unwrap());
                assert_eq!(offsets.position_bounds(s..e), Some(want), "{s}..{e}");
            }
        }
    }

    #[test]
    fn indptr_is_checked() {
        assert_eq!(check_indptr(&[0, 2, 2, 5, 6], 6), Ok(()));
        assert_eq!(check_indptr(&[0], 0), Ok(()));
        let at = |offsets: &[i64], nnz| check_indptr(offsets, nnz).unwrap_err().element;
        assert_eq!(at(&[1, 2, 6], 6), 0);
        // The issue's: `0,3,2,5,6` decreases at element 2.
        assert_eq!(at(&[0, 3, 2, 5, 6], 6), 2);
        assert_eq!(at(&[0, 2, 5], 6), 2);
        assert_eq!(at(&[0, 2, 7], 6), 2);
        assert_eq!(at(&[0, 2, -1], 6), 2);
    }
}
