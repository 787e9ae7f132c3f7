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
//! indptr[r + 1]`: `indptr` is read whole once (it is checked: from 0, non-decreasing, ending
//! at `nnz`, no longer than the chunk limit allows; a scan under a memory budget reserves it
//! first), the other dimension is `indices` as Int64, checked against the matrix shape. Both
//! are checked whenever the matrix is read, whichever of its columns a query asks for: their
//! readers are `read/sparse.rs`'s.

use serde_json::Value;

use super::column::{ColumnSource, Member};
use super::model::TableParts;
use super::{dim_column_name, value_column_name};
use super::{ColumnRole, TableColumn, TableDimension, TableOptions};
use crate::grid::ChunkGrid;
use crate::node::{Node, ZarrGroup};
use crate::options::ZarrReadOptions;
use crate::{Error, Result, ZarrArray};

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
    let bad = |why: String| {
        Error::table(
            group.path(),
            format!("sparse matrix '{}': {why}", group.path()),
        )
    };
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
    let (data, indices, indptr) =
        futures::try_join!(array("data"), array("indices"), array("indptr"))?;
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

/// A sparse matrix group's table: the dense array's columns (`dim_0`, `dim_1`, the value
/// named after the group) over its stored elements, chunked as `data`.
pub(super) fn sparse_table(
    group: &ZarrGroup,
    matrix: SparseMatrix,
    options: &TableOptions,
) -> Result<TableParts> {
    options.refuse_arrays(group.path(), "a sparse matrix")?;
    let name = group.path().trim_end_matches('/').rsplit('/').next();
    let value = value_column_name(name.unwrap_or(""));
    let dim_name = |d: usize| dim_column_name(format!("dim_{d}"), &value);
    let nnz = matrix.data.shape()[0];
    // The compressed dimension's positions never decrease along the stored elements: a
    // coordinate of the table's dimension, which filters on it prune by.
    let major = TableColumn::sourced(
        dim_name(matrix.major),
        ColumnRole::Coordinate(0),
        &matrix.indptr,
        ColumnSource::SparseMajor {
            indptr: matrix.indptr.clone(),
            nnz,
        },
    );
    let minor_dim = 1 - matrix.major;
    let minor = TableColumn::sourced(
        dim_name(minor_dim),
        ColumnRole::Data(vec![0]),
        &matrix.indices,
        ColumnSource::SparseMinor {
            indices: matrix.indices.clone(),
            size: matrix.shape[minor_dim],
        },
    );
    let mut columns = if matrix.major == 0 {
        vec![major, minor]
    } else {
        vec![minor, major]
    };
    // Stored elements are read by ranges: chunks of rows of the data's largest chunk.
    let chunk_shape = matrix.data.chunk_shape().to_vec();
    let grid = ChunkGrid::new(vec![nnz], chunk_shape).map_err(|e| e.in_array(group.path()))?;
    let member = Member::array(value.clone(), matrix.data, None);
    let role = ColumnRole::Data(vec![0]);
    columns.push(TableColumn::of_member(&member, value, role, options)?);
    let dims = vec![TableDimension {
        name: "stored element".into(),
        size: nnz,
    }];
    Ok(TableParts {
        location: group.store().location().to_string(),
        dims,
        grid,
        columns,
        left_out: Vec::new(),
    })
}
