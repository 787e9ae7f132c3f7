//! AnnData sparse matrices as tables: a `csr_matrix` / `csc_matrix` group (or an older one with
//! `h5sparse_format`) is the dense array's table without the zeros.
//!
//! ```text
//!  indptr [n_major + 1]   indices [nnz]   data [nnz]
//!        │                     │              │
//!        ▼                     ▼              ▼
//!   dim_0 (CSR) / dim_1 (CSC)  the other dim   the value column, named after the group
//! ```
//!
//! The table has one dimension, the stored elements (`nnz`), chunked as `data` is, so `data`'s
//! chunks are read once each and handed out a batch at a time like any array's. The
//! compressed dimension's position of element `k` is the `r` with `indptr[r] <= k <
//! indptr[r + 1]`: `indptr` is read whole once (it is checked: non-decreasing, within `data`,
//! no longer than the chunk limit allows), the other dimension is `indices` as Int64, checked
//! against the matrix shape.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, Int64Array};
use arrow_schema::DataType as ArrowType;
use serde_json::Value;

use crate::node::{Node, ZarrGroup};
use crate::options::ZarrReadOptions;
use crate::{Error, ReadContext, Result, ZarrArray};

/// The arrays and shape of a sparse matrix group.
#[derive(Debug, Clone)]
pub(super) struct SparseMatrix {
    pub(super) data: ZarrArray,
    pub(super) indices: ZarrArray,
    pub(super) indptr: ZarrArray,
    /// The dense matrix's shape.
    pub(super) shape: [u64; 2],
    /// The compressed dimension: 0 for CSR (rows), 1 for CSC (columns).
    pub(super) major: usize,
}

/// The compressed dimension of a sparse matrix group (`Some(0)` CSR, `Some(1)` CSC), from its
/// `encoding-type`, or anndata's older `h5sparse_format`.
fn major_of(group: &ZarrGroup) -> Option<usize> {
    let attrs = &group.metadata().attributes;
    let format = attrs
        .get("encoding-type")
        .and_then(Value::as_str)
        .or_else(|| attrs.get("h5sparse_format").and_then(Value::as_str))?;
    match format {
        "csr_matrix" | "csr" => Some(0),
        "csc_matrix" | "csc" => Some(1),
        _ => None,
    }
}

/// The sparse matrix a group holds; `Ok(None)` for any other group.
pub(super) async fn open(group: &ZarrGroup) -> Result<Option<SparseMatrix>> {
    let Some(major) = major_of(group) else {
        return Ok(None);
    };
    let bad =
        |why: String| Error::InvalidArgument(format!("sparse matrix '{}': {why}", group.path()));
    let attrs = &group.metadata().attributes;
    let shape = attrs
        .get("shape")
        .or_else(|| attrs.get("h5sparse_shape"))
        .and_then(Value::as_array)
        .and_then(|s| {
            let v: Option<Vec<u64>> = s.iter().map(Value::as_u64).collect();
            v.filter(|v| v.len() == 2)
        })
        .ok_or_else(|| bad("no `shape` attribute of two dimensions".into()))?;
    let array = |name: &'static str| async move {
        match group.child(name).await {
            Ok(Node::Array(a)) if a.shape().len() == 1 => Ok(a),
            Ok(_) | Err(Error::NodeNotFound { .. }) => Err(bad(format!("no 1-D `{name}` array"))),
            Err(e) => Err(e),
        }
    };
    let (data, indices, indptr) = (
        array("data").await?,
        array("indices").await?,
        array("indptr").await?,
    );
    let integer = |a: &ZarrArray| {
        a.arrow_field("", &ZarrReadOptions::default())
            .data_type()
            .is_integer()
    };
    if !integer(&indices) || !integer(&indptr) {
        return Err(bad("`indices` and `indptr` must be integers".into()));
    }
    if indices.shape() != data.shape() {
        return Err(bad(format!(
            "`indices` has {} elements, `data` {}",
            indices.shape()[0],
            data.shape()[0]
        )));
    }
    if Some(indptr.shape()[0]) != shape[major].checked_add(1) {
        return Err(bad(format!(
            "`indptr` has {} elements for {} {}",
            indptr.shape()[0],
            shape[major],
            if major == 0 { "rows" } else { "columns" }
        )));
    }
    Ok(Some(SparseMatrix {
        data,
        indices,
        indptr,
        shape: [shape[0], shape[1]],
        major,
    }))
}

/// `indptr`, read whole and checked: non-decreasing from 0, ending within `data`'s `nnz`
/// elements, and no larger than the chunk limit (it is held for the table's life).
pub(super) async fn load_indptr(
    indptr: &ZarrArray,
    nnz: u64,
    ctx: &ReadContext,
) -> Result<Arc<Vec<i64>>> {
    let n = indptr.shape()[0];
    let bad =
        |why: String| Error::InvalidArgument(format!("sparse matrix '{}': {why}", indptr.path()));
    if n.saturating_mul(8) > ctx.options.max_chunk_bytes as u64 {
        return Err(bad(format!(
            "{n} offsets are more than the {} bytes zarrow holds of one array (ZARROW_MAX_CHUNK_BYTES)",
            ctx.options.max_chunk_bytes
        )));
    }
    let raw = indptr.read_region_in(&[0], &[n], ctx).await?;
    let offsets: Vec<i64> = as_i64(raw.as_ref())
        .ok_or_else(|| bad("offsets are not integers".into()))?
        .into_iter()
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| bad("an offset does not fit in 64 bits".into()))?;
    if offsets.first().is_some_and(|&o| o != 0) {
        return Err(bad(format!("offsets start at {}, not 0", offsets[0])));
    }
    if let Some(w) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(bad(format!(
            "offsets decrease at {w}: {} then {}",
            offsets[w],
            offsets[w + 1]
        )));
    }
    if let Some(&last) = offsets.last() {
        if last as u64 > nnz {
            return Err(bad(format!(
                "the last offset {last} is past the {nnz} stored elements"
            )));
        }
    }
    Ok(Arc::new(offsets))
}

/// A sparse matrix's `indptr`, as what the compressed-dimension positions of the stored
/// elements are: non-decreasing, so the positions over any run of elements are bounded by two
/// binary searches — what chunk pruning uses instead of reading `nnz` positions.
#[derive(Debug, Clone)]
pub struct MajorOffsets(Arc<Vec<i64>>);

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

impl From<Arc<Vec<i64>>> for MajorOffsets {
    fn from(offsets: Arc<Vec<i64>>) -> Self {
        Self(offsets)
    }
}

/// `indptr` as the table holds it: loaded (and checked) on first use, once.
pub(super) async fn loaded_indptr(
    loaded: &tokio::sync::OnceCell<Arc<Vec<i64>>>,
    indptr: &ZarrArray,
    nnz: u64,
    ctx: &ReadContext,
) -> Result<Arc<Vec<i64>>> {
    Ok(loaded
        .get_or_try_init(|| load_indptr(indptr, nnz, ctx))
        .await?
        .clone())
}

/// The compressed-dimension positions of stored elements `start .. start + len`.
pub(super) fn major_positions(
    offsets: &[i64],
    start: u64,
    len: u64,
    path: &str,
) -> Result<ArrayRef> {
    let end = start.saturating_add(len);
    let last = offsets.last().copied().unwrap_or(0) as u64;
    if end > last {
        return Err(Error::InvalidArgument(format!(
            "sparse matrix '{path}': stored elements {start}..{end} lie past indptr's last offset {last}"
        )));
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

/// The values of an integer array as i64 (`None` for a value that does not fit, a u64 past
/// i64::MAX); `None` if the array is not of integers.
fn as_i64(a: &dyn Array) -> Option<Vec<Option<i64>>> {
    macro_rules! ints {
        ($t:ty) => {
            a.as_primitive::<$t>()
                .values()
                .iter()
                .map(|v| i64::try_from(*v).ok())
                .collect()
        };
    }
    Some(match a.data_type() {
        ArrowType::Int8 => ints!(Int8Type),
        ArrowType::Int16 => ints!(Int16Type),
        ArrowType::Int32 => ints!(Int32Type),
        ArrowType::Int64 => ints!(Int64Type),
        ArrowType::UInt8 => ints!(UInt8Type),
        ArrowType::UInt16 => ints!(UInt16Type),
        ArrowType::UInt32 => ints!(UInt32Type),
        ArrowType::UInt64 => ints!(UInt64Type),
        _ => return None,
    })
}

/// `indices` as Int64 positions along the other dimension, each checked against its size.
pub(super) fn minor_positions(indices: ArrayRef, size: u64, path: &str) -> Result<ArrayRef> {
    let values = as_i64(indices.as_ref()).ok_or_else(|| {
        Error::InvalidArgument(format!("sparse matrix '{path}': indices are not integers"))
    })?;
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        match v {
            Some(v) if v >= 0 && (v as u64) < size => out.push(v),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "sparse matrix '{path}': index {} is outside the {size} positions of its \
                     dimension",
                    other.map_or("past 2^63".to_string(), |v| v.to_string())
                )))
            }
        }
    }
    Ok(Arc::new(Int64Array::from(out)))
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
        let offsets = MajorOffsets::from(Arc::new(vec![0, 2, 2, 5, 6]));
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
    fn indices_are_checked() {
        let ok: ArrayRef = Arc::new(arrow_array::Int32Array::from(vec![0, 4, 2]));
        assert_eq!(
            minor_positions(ok, 5, "m").unwrap().data_type(),
            &ArrowType::Int64
        );
        let bad: ArrayRef = Arc::new(arrow_array::Int32Array::from(vec![0, 5]));
        assert!(minor_positions(bad, 5, "m").is_err());
        let negative: ArrayRef = Arc::new(arrow_array::Int32Array::from(vec![-1]));
        assert!(minor_positions(negative, 5, "m").is_err());
    }
}
