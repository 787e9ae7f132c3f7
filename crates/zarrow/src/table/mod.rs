//! Zarr nodes as tables: which arrays become which columns. Knows nothing of DataFusion
//! (zarrow-datafusion translates) and nothing of how rows are streamed (see [`crate::ZarrScan`]).
//!
//! ```text
//!  Node::Array ─▶ array table: index columns (dim names / dim_i) + the value column
//!  sparse matrix group (AnnData csr/csc) ─▶ the same columns over the stored elements
//!                  (sparse.rs)
//!  Node::Group ─▶ members: child arrays, AnnData encoded groups (anndata.rs)
//!                  │ table dims = dims of the members with the most dims (`arrays` picks)
//!                  ▼
//!                columns: per dim a coordinate (1-D array of that name, AnnData `_index`
//!                         followed by the Int64 position `dim_0`) or an Int64 index; then every member whose dims ⊆ the table's,
//!                         broadcast along the missing dims; the rest is `left_out`
//! ```
//!
//! Rows are the cells of the table's dimensions; they come out chunk by chunk, over the chunk
//! grid of a "driver" array (the first column that spans every table dimension), so that the
//! driver's chunks are read exactly once and whole. How one column is read over a chunk's box
//! of rows is `read.rs`; the kernels that lay values out (index values, broadcast) `layout.rs`.

mod anndata;
mod cf;
mod layout;
pub(crate) mod read;
mod sparse;

pub use sparse::MajorOffsets;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::array::ZarrArray;
use crate::decode::fill_array;
use crate::grid::{ChunkGrid, ChunkRanges};
use crate::metrics::ScanMetrics;
use crate::node::{Node, ZarrGroup};
use crate::options::ZarrReadOptions;
use crate::remote::RemoteOptions;
use crate::store::ZarrStore;
use crate::{Error, Result};

use cf::CfDecode;

/// How a node becomes a table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TableOptions {
    /// Reader options (string type, concurrency).
    pub read: ZarrReadOptions,
    /// Elements equal to the array's fill value become NULL.
    pub fill_as_null: bool,
    /// Apply the CF conventions (time units → Timestamp, scale_factor/add_offset,
    /// `_FillValue`/`missing_value` → NULL).
    pub decode_cf: bool,
    /// For a group: build the table from these child arrays only (coordinates of the table's
    /// dimensions are added anyway).
    pub arrays: Option<Vec<String>>,
    /// Timeouts and retries of a remote store (see [`crate::RemoteOptions`]).
    pub remote: RemoteOptions,
}

/// One dimension of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDimension {
    /// Its name (`dim_i` when unnamed).
    pub name: String,
    /// Its length.
    pub size: u64,
}

/// What a column holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnRole {
    /// The Int64 position along table dimension `.0`.
    Index(usize),
    /// A 1-D array along table dimension `.0` (its coordinate values).
    Coordinate(usize),
    /// An array over the table dimensions listed (array dimension `i` is table dimension
    /// `dims[i]`), broadcast along the others.
    Data(Vec<usize>),
}

/// One column of a table.
#[derive(Debug, Clone)]
pub struct TableColumn {
    /// The column name.
    pub name: String,
    /// What it holds.
    pub role: ColumnRole,
    /// The array (or AnnData group) it is read from; empty for index columns.
    pub source: String,
    kind: SourceKind,
}

#[derive(Debug, Clone)]
enum SourceKind {
    Index,
    Plain {
        array: ZarrArray,
        fill: Option<ArrayRef>,
        cf: Option<CfDecode>,
    },
    Masked {
        values: ZarrArray,
        mask: ZarrArray,
    },
    Categorical {
        codes: ZarrArray,
        categories: ZarrArray,
        /// pandas' `ordered`: kept as the Arrow dictionary's `dict_is_ordered`.
        ordered: bool,
        loaded: Arc<tokio::sync::OnceCell<ArrayRef>>,
    },
    /// A sparse matrix's compressed dimension: the position of each stored element, from
    /// `indptr` (read whole once; see `sparse.rs`).
    SparseMajor {
        indptr: ZarrArray,
        nnz: u64,
        loaded: Arc<tokio::sync::OnceCell<Arc<Vec<i64>>>>,
    },
    /// A sparse matrix's other dimension: `indices` as Int64, below `size`.
    SparseMinor {
        indices: ZarrArray,
        size: u64,
    },
}

impl SourceKind {
    /// The array whose chunking the column follows.
    fn main_array(&self) -> Option<&ZarrArray> {
        match self {
            SourceKind::Index => None,
            SourceKind::Plain { array, .. } => Some(array),
            SourceKind::Masked { values, .. } => Some(values),
            SourceKind::Categorical { codes, .. } => Some(codes),
            SourceKind::SparseMajor { .. } => None,
            SourceKind::SparseMinor { indices, .. } => Some(indices),
        }
    }
}

/// A zarr array or group as a table (see the module docs).
#[derive(Debug, Clone)]
pub struct TableModel {
    location: String,
    schema: SchemaRef,
    dims: Vec<TableDimension>,
    grid: ChunkGrid,
    columns: Vec<TableColumn>,
    left_out: Vec<(String, String)>,
    options: TableOptions,
    /// What the metadata requests of its store (opening its nodes) counted into.
    metadata: ScanMetrics,
}

/// A member of a group table: an array, or an AnnData encoded group that reads as one.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    path: String,
    /// All dimension names, if every dimension is named.
    dims: Option<Vec<String>>,
    shape: Vec<u64>,
    kind: MemberKind,
}

#[derive(Debug, Clone)]
enum MemberKind {
    Array(ZarrArray),
    Masked {
        values: ZarrArray,
        mask: ZarrArray,
    },
    Categorical {
        codes: ZarrArray,
        categories: ZarrArray,
        ordered: bool,
    },
}

/// Names of the columns of an array table: the dimension columns (dimension names, else
/// `dim_i`; `<name>_index` where one would take the value column's name), then the value
/// column, named after the array — `value` for the array at the root of a store (`x.zarr`).
fn array_table_names(array: &ZarrArray) -> (Vec<String>, String) {
    let mut value = array.name().to_string();
    if value.to_ascii_lowercase().ends_with(".zarr") {
        value = "value".to_string();
    }
    let dims = (0..array.shape().len())
        .map(|d| {
            let name = array
                .metadata()
                .dimension_name(d)
                .map(str::to_string)
                .unwrap_or_else(|| format!("dim_{d}"));
            if name == value {
                format!("{name}_index")
            } else {
                name
            }
        })
        .collect();
    (dims, value)
}

fn dim_names(array: &ZarrArray) -> Option<Vec<String>> {
    let ndim = array.shape().len();
    (0..ndim)
        .map(|d| array.metadata().dimension_name(d).map(str::to_string))
        .collect::<Option<Vec<_>>>()
}

fn fmt_dims(dims: &[String]) -> String {
    format!("({})", dims.join(", "))
}

impl TableModel {
    /// Open the node at `location` as a table.
    pub async fn open(location: &str, options: TableOptions) -> Result<Self> {
        let store = ZarrStore::open_configured(location, &[], &options.remote)?;
        Self::open_store(store, "", options).await
    }

    /// Open the node at the root of `store` as a table (`path` names it in messages), its
    /// metadata read under the limits of `options` ([`crate::ReadLimits`]).
    pub async fn open_store(store: ZarrStore, path: &str, options: TableOptions) -> Result<Self> {
        let node = Node::open_store(store.with_limits(options.read.limits), path).await?;
        Self::from_node(node, options).await
    }

    /// A table over an open node (its metadata was read under the limits of the store it
    /// was opened from: see [`Self::open_store`]).
    pub async fn from_node(node: Node, options: TableOptions) -> Result<Self> {
        options.read.string_type.check_available()?;
        let metadata = match &node {
            Node::Array(a) => a.store().metrics().clone(),
            Node::Group(g) => g.store().metrics().clone(),
        };
        let mut model = match node {
            Node::Array(a) => Self::array_table(a, options),
            Node::Group(g) => {
                anndata::check_table_group(&g)?;
                match sparse::open(&g).await? {
                    Some(matrix) => Self::sparse_table(&g, matrix, options),
                    None => Self::group_table(g, options).await,
                }
            }
        }?;
        model.metadata = metadata;
        Ok(model)
    }

    /// The metadata phase of the table: the requests its store made to open its nodes
    /// (documents read or found missing, listings), their bytes and time — counted into the
    /// metrics of the store it was opened from (see [`ZarrStore::with_metrics`]).
    pub fn metadata_counts(&self) -> crate::ScanCounts {
        self.metadata.counts()
    }

    /// A sparse matrix group: the dense array's columns (`dim_0`, `dim_1`, the value named
    /// after the group) over its stored elements, chunked as `data` (see `sparse.rs`).
    fn sparse_table(
        group: &ZarrGroup,
        matrix: sparse::SparseMatrix,
        options: TableOptions,
    ) -> Result<Self> {
        if options.arrays.is_some() {
            return Err(Error::InvalidArgument(format!(
                "'{}' is a sparse matrix: the `arrays` option only applies to groups",
                group.path()
            )));
        }
        let mut value = group
            .path()
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("value")
            .to_string();
        if value.is_empty() || value.to_ascii_lowercase().ends_with(".zarr") {
            value = "value".to_string();
        }
        let dim_name = |d: usize| {
            let name = format!("dim_{d}");
            if name == value {
                format!("{name}_index")
            } else {
                name
            }
        };
        let nnz = matrix.data.shape()[0];
        // The compressed dimension's positions never decrease along the stored elements: a
        // coordinate of the table's dimension, which filters on it prune by.
        let major = TableColumn {
            name: dim_name(matrix.major),
            role: ColumnRole::Coordinate(0),
            source: matrix.indptr.path().to_string(),
            kind: SourceKind::SparseMajor {
                indptr: matrix.indptr.clone(),
                nnz,
                loaded: Arc::default(),
            },
        };
        let minor_dim = 1 - matrix.major;
        let minor = TableColumn {
            name: dim_name(minor_dim),
            role: ColumnRole::Data(vec![0]),
            source: matrix.indices.path().to_string(),
            kind: SourceKind::SparseMinor {
                indices: matrix.indices.clone(),
                size: matrix.shape[minor_dim],
            },
        };
        let mut columns = if matrix.major == 0 {
            vec![major, minor]
        } else {
            vec![minor, major]
        };
        let member = Member {
            name: value.clone(),
            path: matrix.data.path().to_string(),
            dims: None,
            shape: matrix.data.shape().to_vec(),
            kind: MemberKind::Array(matrix.data.clone()),
        };
        columns.push(Self::column(
            &member,
            value,
            ColumnRole::Data(vec![0]),
            &options,
        )?);
        let dims = vec![TableDimension {
            name: "stored element".into(),
            size: nnz,
        }];
        let chunk_shape = matrix.data.chunk_shape().to_vec();
        let location = group.store().location().to_string();
        Self::finish(location, dims, chunk_shape, columns, Vec::new(), options)
    }

    fn array_table(array: ZarrArray, options: TableOptions) -> Result<Self> {
        if options.arrays.is_some() {
            return Err(Error::InvalidArgument(format!(
                "'{}' is an array: the `arrays` option only applies to groups",
                array.path()
            )));
        }
        let (dim_names, value) = array_table_names(&array);
        let dims: Vec<TableDimension> = dim_names
            .iter()
            .zip(array.shape())
            .map(|(n, s)| TableDimension {
                name: n.clone(),
                size: *s,
            })
            .collect();
        let mut columns: Vec<TableColumn> = dims
            .iter()
            .enumerate()
            .map(|(d, dim)| TableColumn {
                name: dim.name.clone(),
                role: ColumnRole::Index(d),
                source: String::new(),
                kind: SourceKind::Index,
            })
            .collect();
        let ndim = dims.len();
        let chunk_shape = array.chunk_shape().to_vec();
        let location = array.store().location().to_string();
        let member = Member {
            name: value.clone(),
            path: array.path().to_string(),
            dims: None,
            shape: array.shape().to_vec(),
            kind: MemberKind::Array(array),
        };
        columns.push(Self::column(
            &member,
            value,
            ColumnRole::Data((0..ndim).collect()),
            &options,
        )?);
        Self::finish(location, dims, chunk_shape, columns, Vec::new(), options)
    }

    fn column(
        member: &Member,
        name: String,
        role: ColumnRole,
        options: &TableOptions,
    ) -> Result<TableColumn> {
        let kind = match &member.kind {
            MemberKind::Array(array) => {
                let meta = array.metadata();
                let fill = if options.fill_as_null {
                    Some(
                        fill_array(&meta.data_type, &meta.fill_value, 1, &options.read)
                            .map_err(|e| Error::chunk(array.path(), "fill value", e))?,
                    )
                } else {
                    None
                };
                let cf = if options.decode_cf {
                    CfDecode::from_metadata(array.path(), meta)?
                } else {
                    None
                };
                SourceKind::Plain {
                    array: array.clone(),
                    fill,
                    cf,
                }
            }
            MemberKind::Masked { values, mask } => SourceKind::Masked {
                values: values.clone(),
                mask: mask.clone(),
            },
            MemberKind::Categorical {
                codes,
                categories,
                ordered,
            } => SourceKind::Categorical {
                codes: codes.clone(),
                categories: categories.clone(),
                ordered: *ordered,
                loaded: Arc::default(),
            },
        };
        Ok(TableColumn {
            name,
            role,
            source: member.path.clone(),
            kind,
        })
    }

    /// The members of a group: child arrays and AnnData encoded groups; other child groups
    /// are left out, and so are children that cannot be read — unless `wanted` names them, then
    /// their error is the table's.
    async fn members(
        group: &ZarrGroup,
        wanted: Option<&[String]>,
        left_out: &mut Vec<(String, String)>,
    ) -> Result<Vec<Member>> {
        let wanted: Option<HashSet<&str>> = wanted.map(|w| w.iter().map(String::as_str).collect());
        let mut members = Vec::new();
        // Encoded groups' children are opened a few groups at a time (their round trips
        // overlap), in order.
        let opening: Vec<_> = group
            .children()
            .await?
            .into_iter()
            .map(|(name, node)| async move {
                let member = match node {
                    Ok(Node::Array(a)) => Ok(Ok(Member {
                        name: name.clone(),
                        path: a.path().to_string(),
                        dims: dim_names(&a),
                        shape: a.shape().to_vec(),
                        kind: MemberKind::Array(a),
                    })),
                    Ok(Node::Group(g)) => anndata::encoded_member(&name, &g).await,
                    Err(e) => Err(e),
                };
                (name, member)
            })
            .collect();
        use futures::StreamExt;
        let opened: Vec<_> = futures::stream::iter(opening)
            .buffered(crate::node::OPEN_CONCURRENCY)
            .collect()
            .await;
        for (name, member) in opened {
            match member {
                Ok(Ok(member)) => members.push(member),
                Ok(Err(why)) => left_out.push((name, why)),
                Err(e) if wanted.as_ref().is_some_and(|w| w.contains(name.as_str())) => {
                    return Err(e)
                }
                Err(e) => left_out.push((name, format!("unreadable: {e}"))),
            }
        }
        Ok(members)
    }

    async fn group_table(group: ZarrGroup, options: TableOptions) -> Result<Self> {
        let mut left_out = Vec::new();
        let mut members = Self::members(&group, options.arrays.as_deref(), &mut left_out).await?;
        let attrs = &group.metadata().attributes;
        let anndata_index = anndata::index_column(attrs);
        let column_order = anndata::column_order(attrs);

        // The `arrays` option: these members only (coordinates are re-added below).
        let mut held_back: Vec<Member> = Vec::new();
        if let Some(wanted) = &options.arrays {
            let names: HashSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
            for w in wanted {
                if !names.contains(w.as_str()) {
                    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                    return Err(Error::InvalidArgument(format!(
                        "group '{}' has no array '{w}' (arrays: {})",
                        group.path(),
                        names.join(", ")
                    )));
                }
            }
            let wanted: HashSet<&str> = wanted.iter().map(String::as_str).collect();
            let (keep, rest): (Vec<Member>, Vec<Member>) = members
                .into_iter()
                .partition(|m| wanted.contains(m.name.as_str()));
            members = keep;
            held_back = rest;
        }

        // Table dimensions.
        let named: Vec<&Member> = members
            .iter()
            .filter(|m| m.dims.is_some() && !m.shape.is_empty())
            .collect();
        let (dims, named_table): (Vec<TableDimension>, bool) = if !named.is_empty() {
            let max_nd = named.iter().map(|m| m.shape.len()).max().unwrap_or(0);
            let top: Vec<&&Member> = named.iter().filter(|m| m.shape.len() == max_nd).collect();
            // Arrays by their set of dimension names, sets in order of first appearance.
            let mut sets: Vec<(BTreeSet<String>, Vec<String>)> = Vec::new();
            let mut set_at: HashMap<BTreeSet<String>, usize> = HashMap::new();
            for m in &top {
                let d = m.dims.clone().unwrap_or_default();
                let set: BTreeSet<String> = d.iter().cloned().collect();
                let at = *set_at.entry(set.clone()).or_insert_with(|| {
                    sets.push((set, Vec::new()));
                    sets.len() - 1
                });
                sets[at].1.push(format!("{} {}", m.name, fmt_dims(&d)));
            }
            if sets.len() > 1 {
                let listed: Vec<String> = sets.iter().map(|(_, names)| names.join(", ")).collect();
                return Err(Error::InvalidArgument(format!(
                    "group '{}': arrays with different dimensions tie for the table's dimensions: {}; \
                     choose the arrays with the `arrays` option",
                    group.path(),
                    listed.join("; ")
                )));
            }
            // The dimension order of the largest such array (the first by name on a tie).
            let lead = top
                .iter()
                .max_by_key(|m| {
                    (
                        m.shape.iter().product::<u64>(),
                        std::cmp::Reverse(m.name.clone()),
                    )
                })
                .copied()
                .copied();
            let lead = lead.ok_or_else(|| Error::InvalidArgument("no arrays".into()))?;
            let names = lead.dims.clone().unwrap_or_default();
            (
                names
                    .iter()
                    .zip(&lead.shape)
                    .map(|(n, s)| TableDimension {
                        name: n.clone(),
                        size: *s,
                    })
                    .collect(),
                true,
            )
        } else {
            let max_nd = members.iter().map(|m| m.shape.len()).max();
            let Some(max_nd) = max_nd else {
                let mut why = format!(
                    "group '{}' holds no arrays to read as a table",
                    group.path()
                );
                if !left_out.is_empty() {
                    let names: Vec<&str> = left_out.iter().map(|(n, _)| n.as_str()).collect();
                    why.push_str(&format!(" (children: {})", names.join(", ")));
                }
                return Err(Error::InvalidArgument(why));
            };
            let shapes: BTreeSet<Vec<u64>> = members
                .iter()
                .filter(|m| m.shape.len() == max_nd)
                .map(|m| m.shape.clone())
                .collect();
            if shapes.len() > 1 {
                let listed: Vec<String> = members
                    .iter()
                    .filter(|m| m.shape.len() == max_nd)
                    .map(|m| format!("{} {:?}", m.name, m.shape))
                    .collect();
                return Err(Error::InvalidArgument(format!(
                    "group '{}': arrays without dimension names and of different shapes tie for the table: {}; \
                     choose the arrays with the `arrays` option",
                    group.path(),
                    listed.join(", ")
                )));
            }
            let shape = shapes.into_iter().next().unwrap_or_default();
            (
                shape
                    .iter()
                    .enumerate()
                    .map(|(d, s)| TableDimension {
                        name: format!("dim_{d}"),
                        size: *s,
                    })
                    .collect(),
                false,
            )
        };
        let ndim = dims.len();
        let table_shape: Vec<u64> = dims.iter().map(|d| d.size).collect();

        // Coordinates come back even when `arrays` left them out.
        for m in held_back {
            let is_coord = m.shape.len() == 1
                && ((named_table
                    && dims
                        .iter()
                        .any(|d| Some(vec![d.name.clone()]) == m.dims && m.name == d.name))
                    || anndata_index.as_deref() == Some(m.name.as_str()));
            if is_coord {
                members.push(m);
            } else {
                left_out.push((m.name, "not in the `arrays` option".into()));
            }
        }

        // Coordinate columns: per dimension, the 1-D array named like it (AnnData: `_index`).
        let mut coord_of: Vec<Option<usize>> = vec![None; ndim];
        for (d, dim) in dims.iter().enumerate() {
            let found = members.iter().position(|m| {
                m.shape == [dim.size]
                    && matches!(m.kind, MemberKind::Array(_))
                    && if named_table {
                        m.name == dim.name
                            && m.dims.as_deref() == Some(std::slice::from_ref(&dim.name))
                    } else {
                        ndim == 1 && anndata_index.as_deref() == Some(m.name.as_str())
                    }
            });
            coord_of[d] = found;
        }

        // Data columns: members whose dims are a subset of the table's (by name), or, without
        // names, of the table's shape.
        let mut data: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, m) in members.iter().enumerate() {
            if coord_of.contains(&Some(i)) {
                continue;
            }
            let mapping: std::result::Result<Vec<usize>, String> = match (&m.dims, named_table) {
                (Some(md), true) => md
                    .iter()
                    .zip(&m.shape)
                    .map(|(n, s)| match dims.iter().position(|d| &d.name == n) {
                        None => Err(format!(
                            "dimensions {} are not a subset of the table's {}",
                            fmt_dims(md),
                            fmt_dims(&dims.iter().map(|d| d.name.clone()).collect::<Vec<_>>())
                        )),
                        Some(p) if dims[p].size != *s => Err(format!(
                            "dimension '{n}' has length {s} here but {} in the table",
                            dims[p].size
                        )),
                        Some(p) => Ok(p),
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .and_then(|v| {
                        let set: BTreeSet<&usize> = v.iter().collect();
                        if set.len() == v.len() {
                            Ok(v)
                        } else {
                            Err("repeats a dimension".into())
                        }
                    }),
                _ if m.shape.is_empty() && named_table => Ok(Vec::new()),
                _ if m.shape == table_shape => Ok((0..ndim).collect()),
                (None, true) => Err(format!(
                    "no dimension names, and its shape {:?} is not the table's {:?}",
                    m.shape, table_shape
                )),
                _ => Err(format!(
                    "shape {:?} is not the table's {:?}",
                    m.shape, table_shape
                )),
            };
            match mapping {
                Ok(map) => data.push((i, map)),
                Err(why) => left_out.push((m.name.clone(), why)),
            }
        }
        // Column order: `column-order` (AnnData's, and zarrow's writer's) first, then by name.
        let mut order: HashMap<&str, usize> = HashMap::with_capacity(column_order.len());
        for (at, name) in column_order.iter().enumerate() {
            order.entry(name.as_str()).or_insert(at);
        }
        data.sort_by_cached_key(|(i, _)| {
            let name = &members[*i].name;
            (
                order.get(name.as_str()).copied().unwrap_or(usize::MAX),
                name.clone(),
            )
        });

        let data_names: BTreeSet<&str> = data
            .iter()
            .map(|(i, _)| members[*i].name.as_str())
            .collect();
        // The Int64 position along dimension `d`: `<dim>_index` where a column has its name.
        let index_column = |d: usize, dim: &str, taken: bool| TableColumn {
            name: if taken || data_names.contains(dim) {
                format!("{dim}_index")
            } else {
                dim.to_string()
            },
            role: ColumnRole::Index(d),
            source: String::new(),
            kind: SourceKind::Index,
        };
        let mut columns = Vec::with_capacity(ndim + data.len());
        for (d, dim) in dims.iter().enumerate() {
            match coord_of[d] {
                Some(i) => {
                    let m = &members[i];
                    columns.push(Self::column(
                        m,
                        m.name.clone(),
                        ColumnRole::Coordinate(d),
                        &options,
                    )?);
                    // An AnnData dataframe also has its row position, named as the dense
                    // matrices' index columns, so `X.dim_0 = obs.dim_0` joins them.
                    if !named_table {
                        columns.push(index_column(d, &dim.name, m.name == dim.name));
                    }
                }
                None => columns.push(index_column(d, &dim.name, false)),
            }
        }
        for (i, map) in &data {
            let m = &members[*i];
            columns.push(Self::column(
                m,
                m.name.clone(),
                ColumnRole::Data(map.clone()),
                &options,
            )?);
        }

        // The driver: the first column spanning every dimension.
        let chunk_shape = columns
            .iter()
            .filter(|c| match &c.role {
                ColumnRole::Data(map) => map.len() == ndim,
                ColumnRole::Coordinate(_) => ndim == 1,
                ColumnRole::Index(_) => false,
            })
            .find_map(|c| {
                let a = c.kind.main_array()?;
                let map: Vec<usize> = match &c.role {
                    ColumnRole::Data(m) => m.clone(),
                    _ => vec![0],
                };
                let mut cs = vec![0u64; ndim];
                for (j, &t) in map.iter().enumerate() {
                    cs[t] = a.chunk_shape()[j];
                }
                Some(cs)
            })
            .unwrap_or_else(|| table_shape.iter().map(|s| (*s).max(1)).collect());
        let location = group.store().location().to_string();
        Self::finish(location, dims, chunk_shape, columns, left_out, options)
    }

    fn finish(
        location: String,
        dims: Vec<TableDimension>,
        chunk_shape: Vec<u64>,
        columns: Vec<TableColumn>,
        left_out: Vec<(String, String)>,
        options: TableOptions,
    ) -> Result<Self> {
        let mut seen = BTreeSet::new();
        for c in &columns {
            if !seen.insert(c.name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "'{location}': two columns would be named '{}'",
                    c.name
                )));
            }
        }
        let fields: Vec<Field> = columns.iter().map(|c| Self::field(c, &options)).collect();
        let mut left_out = left_out;
        left_out.sort();
        if dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.size))
            .is_none()
        {
            return Err(Error::InvalidArgument(format!(
                "'{location}': a table of {} rows has more than 2^64 rows",
                dims.iter()
                    .map(|d| d.size.to_string())
                    .collect::<Vec<_>>()
                    .join(" × ")
            )));
        }
        let shape = dims.iter().map(|d| d.size).collect();
        let grid = ChunkGrid::new(shape, chunk_shape)
            .map_err(|e| Error::InvalidArgument(format!("'{location}': {e}")))?;
        Ok(TableModel {
            location,
            schema: Arc::new(Schema::new(fields)),
            dims,
            grid,
            columns,
            left_out,
            options,
            metadata: ScanMetrics::default(),
        })
    }

    fn field(c: &TableColumn, options: &TableOptions) -> Field {
        let opts = &options.read;
        let (dt, nullable) = match &c.kind {
            SourceKind::Index => (ArrowType::Int64, false),
            SourceKind::Plain { array, cf, .. } => {
                let stored = array.arrow_field(&c.name, opts).data_type().clone();
                (
                    cf.as_ref()
                        .map_or(stored.clone(), |cf| cf.output_type(&stored)),
                    true,
                )
            }
            SourceKind::Masked { values, .. } => {
                (values.arrow_field(&c.name, opts).data_type().clone(), true)
            }
            SourceKind::SparseMajor { .. } | SourceKind::SparseMinor { .. } => {
                (ArrowType::Int64, false)
            }
            SourceKind::Categorical {
                codes,
                categories,
                ordered,
                ..
            } => {
                let key = codes.arrow_field("", opts).data_type().clone();
                let value = categories.arrow_field("", opts).data_type().clone();
                let dt = ArrowType::Dictionary(Box::new(key), Box::new(value));
                return Field::new(&c.name, dt, true).with_dict_is_ordered(*ordered);
            }
        };
        Field::new(&c.name, dt, nullable)
    }

    /// The location the table was opened from.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The Arrow schema of the rows.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The schema of a projection (indices into [`Self::schema`]).
    pub fn projected_schema(&self, projection: &[usize]) -> Result<SchemaRef> {
        Ok(Arc::new(self.schema.project(projection)?))
    }

    /// The table's dimensions.
    pub fn dimensions(&self) -> &[TableDimension] {
        &self.dims
    }

    /// The columns, in schema order.
    pub fn columns(&self) -> &[TableColumn] {
        &self.columns
    }

    /// Child arrays and groups that are not columns, with the reason.
    pub fn left_out(&self) -> &[(String, String)] {
        &self.left_out
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &TableOptions {
        &self.options
    }

    /// The table's shape (one length per dimension).
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.size).collect()
    }

    /// The index of the column `name` in the schema; an error listing the columns if there is
    /// none.
    pub fn column_index(&self, name: &str) -> Result<usize> {
        self.schema
            .index_of(name)
            .map_err(|_| Error::ColumnNotFound {
                table: self.location.clone(),
                column: name.to_string(),
                columns: self
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect(),
            })
    }

    /// The number of rows (checked to fit when the table was opened).
    pub fn num_rows(&self) -> u64 {
        self.dims.iter().map(|d| d.size).product()
    }

    /// The shape of one chunk of rows (the driver array's read unit, in table dimension order).
    pub fn chunk_shape(&self) -> &[u64] {
        self.grid.chunk_shape()
    }

    /// The grid of chunks of rows.
    pub fn grid(&self) -> &ChunkGrid {
        &self.grid
    }

    /// The number of chunks per dimension.
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.grid.grid_shape()
    }

    /// Every chunk, as ranges over the grid.
    pub fn all_chunks(&self) -> ChunkRanges {
        ChunkRanges::all(&self.grid.grid_shape())
    }

    /// The box of rows of the chunk at `coords`: (start, shape) per dimension.
    pub fn chunk_region(&self, coords: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
        self.grid
            .chunk_box(coords)
            .map_err(|e| e.in_array(&self.location))
    }

    /// The number of rows of the chunk at `coords`.
    pub fn chunk_rows(&self, coords: &[u64]) -> Result<u64> {
        self.grid
            .chunk_len(coords)
            .map_err(|e| e.in_array(&self.location))
    }

    /// The same table with other reader options (the string type changes the schema).
    pub fn with_read_options(&self, read: ZarrReadOptions) -> Result<Self> {
        read.string_type.check_available()?;
        let options = TableOptions {
            read,
            ..self.options.clone()
        };
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|c| Self::field(c, &options))
            .collect();
        Ok(TableModel {
            schema: Arc::new(Schema::new(fields)),
            options,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_util::{fixture, strings};

    #[tokio::test]
    async fn xarray_group_model() {
        let t = TableModel::open(&fixture("xarray_v3.zarr"), TableOptions::default())
            .await
            .unwrap();
        let names: Vec<&str> = t.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["time", "station", "flag", "station_name", "temperature"]
        );
        let roles: Vec<&ColumnRole> = t.columns().iter().map(|c| &c.role).collect();
        assert_eq!(
            roles,
            [
                &ColumnRole::Coordinate(0),
                &ColumnRole::Coordinate(1),
                &ColumnRole::Data(vec![0]),
                &ColumnRole::Data(vec![1]),
                &ColumnRole::Data(vec![0, 1]),
            ]
        );
        assert_eq!(t.shape(), [10, 5]);
        assert_eq!(t.chunk_shape(), [4, 3]);
        assert_eq!(t.chunk_grid_shape(), [3, 2]);
        assert!(t.left_out().is_empty());
        let t = Arc::new(t);
        let chunk = |coords: &[u64], projection: Vec<usize>| {
            let builder = crate::ZarrRecordBatchStreamBuilder::new(t.clone())
                .with_chunks(ChunkRanges::single(&t.chunk_grid_shape(), coords).unwrap())
                .with_projection(projection);
            async move {
                let batches: Vec<_> = futures::TryStreamExt::try_collect(builder.build().unwrap())
                    .await
                    .unwrap();
                assert_eq!(batches.len(), 1);
                batches.into_iter().next().unwrap()
            }
        };
        let batch = chunk(&[2, 1], vec![1, 3, 2]).await;
        assert_eq!(batch.num_rows(), 4);
        assert_eq!(
            strings(batch.column(0)),
            ["δelta", "echo 🌊", "δelta", "echo 🌊"]
        );
        assert_eq!(
            strings(batch.column(1)),
            ["Delta δ", "Echo 🌊", "Delta δ", "Echo 🌊"]
        );
        let batch = chunk(&[0, 0], vec![]).await;
        assert_eq!((batch.num_rows(), batch.num_columns()), (12, 0));
    }

    #[tokio::test]
    async fn anndata_obs_model() {
        let t = TableModel::open(&fixture("anndata_v3.zarr/obs"), TableOptions::default())
            .await
            .unwrap();
        assert_eq!(t.columns()[0].name, "_index");
        assert_eq!(t.columns()[0].role, ColumnRole::Coordinate(0));
        // the row position, as the dense matrices' first index column
        assert_eq!(
            (t.columns()[1].name.as_str(), &t.columns()[1].role),
            ("dim_0", &ColumnRole::Index(0))
        );
        assert_eq!(
            t.dimensions(),
            [TableDimension {
                name: "dim_0".into(),
                size: 20
            }]
        );
        let cell_type = t
            .schema()
            .field_with_name("cell_type")
            .unwrap()
            .data_type()
            .clone();
        assert_eq!(
            cell_type,
            ArrowType::Dictionary(Box::new(ArrowType::Int8), Box::new(ArrowType::Utf8))
        );
    }
}
