//! Zarr nodes as tables: which arrays become which columns, and reading the rows of one
//! chunk of the table. Knows nothing of DataFusion (zarrow-datafusion translates).
//!
//! ```text
//!  Node::Array ─▶ array table: index columns (dim names / dim_i) + the value column
//!  Node::Group ─▶ members: child arrays, AnnData encoded groups (categorical, nullable-*)
//!                  │ table dims = dims of the members with the most dims (`arrays` picks)
//!                  ▼
//!                columns: per dim a coordinate (1-D array of that name, AnnData `_index`)
//!                         or an Int64 index; then every member whose dims ⊆ the table's,
//!                         broadcast along the missing dims; the rest is `left_out`
//!  read_chunk(driver coords) ─▶ per projected column: read_region of its array over the
//!        driver chunk's box ─▶ mask / categories / CF / fill_as_null ─▶ broadcast ─▶ batch
//! ```
//!
//! Rows are the cells of the table's dimensions; they come out chunk by chunk, over the chunk
//! grid of a "driver" array (the first column that spans every table dimension), so that the
//! driver's chunks are read exactly once and whole.

mod cf;

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Int64Array, PrimitiveArray, RecordBatch, RecordBatchOptions,
    UInt32Array, UInt64Array,
};
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;

use crate::array::{grid_coords, ZarrArray};
use crate::decode::fill_array;
use crate::node::{Node, ZarrGroup};
use crate::options::ZarrReadOptions;
use crate::reader::{array_table_names, ChunkBatches, ColumnRuns, RunMap};
use crate::region::ChunkCache;
use crate::{Error, Result};

use cf::{equals_scalar, null_where, CfDecode};

/// How a node becomes a table.
#[derive(Debug, Clone, Default)]
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
        loaded: Arc<tokio::sync::OnceCell<ArrayRef>>,
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
        }
    }
}

/// A zarr array or group as a table (see the module docs).
#[derive(Debug, Clone)]
pub struct TableModel {
    location: String,
    schema: SchemaRef,
    dims: Vec<TableDimension>,
    chunk_shape: Vec<u64>,
    columns: Vec<TableColumn>,
    left_out: Vec<(String, String)>,
    options: TableOptions,
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
    },
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
        let node = Node::open(location).await?;
        Self::from_node(node, options).await
    }

    /// A table over an open node.
    pub async fn from_node(node: Node, options: TableOptions) -> Result<Self> {
        options.read.string_type.check_available()?;
        match node {
            Node::Array(a) => Self::array_table(a, options),
            Node::Group(g) => Self::group_table(g, options).await,
        }
    }

    fn array_table(array: ZarrArray, options: TableOptions) -> Result<Self> {
        if options.arrays.is_some() {
            return Err(Error::InvalidArgument(format!(
                "'{}' is an array: the `arrays` option only applies to groups",
                array.path()
            )));
        }
        let (mut dim_names, mut value) = array_table_names(&array);
        // The array at the root of a store (`x.zarr`) is `value`, as the design names it.
        if value.to_ascii_lowercase().ends_with(".zarr") {
            value = "value".to_string();
            for d in &mut dim_names {
                if *d == value {
                    *d = format!("{value}_index");
                }
            }
        }
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
            MemberKind::Categorical { codes, categories } => SourceKind::Categorical {
                codes: codes.clone(),
                categories: categories.clone(),
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
    /// are left out.
    async fn members(
        group: &ZarrGroup,
        left_out: &mut Vec<(String, String)>,
    ) -> Result<Vec<Member>> {
        let mut members = Vec::new();
        for (name, node) in group.children().await? {
            match node {
                Node::Array(a) => members.push(Member {
                    name: name.clone(),
                    path: a.path().to_string(),
                    dims: dim_names(&a),
                    shape: a.shape().to_vec(),
                    kind: MemberKind::Array(a),
                }),
                Node::Group(g) => {
                    let encoding = g
                        .metadata()
                        .attributes
                        .get("encoding-type")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let child_array = |n: &'static str| {
                        let g = g.clone();
                        async move {
                            match g.child(n).await {
                                Ok(Node::Array(a)) => Ok(Some(a)),
                                Ok(Node::Group(_)) | Err(Error::NodeNotFound { .. }) => Ok(None),
                                Err(e) => Err(e),
                            }
                        }
                    };
                    match encoding.as_str() {
                        "categorical" => match (child_array("codes").await?, child_array("categories").await?) {
                            (Some(codes), Some(categories)) if codes.metadata().data_type.arrow_type(Default::default(), Default::default()).is_signed_integer() && categories.shape().len() == 1 => {
                                members.push(Member {
                                    name: name.clone(),
                                    path: g.path().to_string(),
                                    dims: dim_names(&codes),
                                    shape: codes.shape().to_vec(),
                                    kind: MemberKind::Categorical { codes, categories },
                                })
                            }
                            _ => left_out.push((name, "categorical group without signed integer `codes` and 1-D `categories`".into())),
                        },
                        "nullable-integer" | "nullable-boolean" | "nullable-string-array" => {
                            match (child_array("values").await?, child_array("mask").await?) {
                                (Some(values), Some(mask))
                                    if mask.shape() == values.shape()
                                        && mask.metadata().data_type == crate::DataType::Bool =>
                                {
                                    members.push(Member {
                                        name: name.clone(),
                                        path: g.path().to_string(),
                                        dims: dim_names(&values),
                                        shape: values.shape().to_vec(),
                                        kind: MemberKind::Masked { values, mask },
                                    })
                                }
                                _ => left_out.push((
                                    name,
                                    format!("{encoding} group without `values` and a boolean `mask` of the same shape"),
                                )),
                            }
                        }
                        "" => left_out.push((name.clone(), format!("a group: read '{}' as a table of its own", g.path()))),
                        other => left_out.push((
                            name.clone(),
                            format!("a group (encoding-type {other}): read '{}' as a table of its own", g.path()),
                        )),
                    }
                }
            }
        }
        Ok(members)
    }

    async fn group_table(group: ZarrGroup, options: TableOptions) -> Result<Self> {
        let mut left_out = Vec::new();
        let mut members = Self::members(&group, &mut left_out).await?;
        let attrs = &group.metadata().attributes;
        let anndata_index = attrs
            .get("_index")
            .and_then(Value::as_str)
            .map(str::to_string);
        let column_order: Vec<String> = attrs
            .get("column-order")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();

        // The `arrays` option: these members only (coordinates are re-added below).
        let mut held_back: Vec<Member> = Vec::new();
        if let Some(wanted) = &options.arrays {
            for w in wanted {
                if !members.iter().any(|m| &m.name == w) {
                    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                    return Err(Error::InvalidArgument(format!(
                        "group '{}' has no array '{w}' (arrays: {})",
                        group.path(),
                        names.join(", ")
                    )));
                }
            }
            let (keep, rest): (Vec<Member>, Vec<Member>) =
                members.into_iter().partition(|m| wanted.contains(&m.name));
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
            let mut sets: Vec<(BTreeSet<String>, Vec<String>)> = Vec::new();
            for m in &top {
                let d = m.dims.clone().unwrap_or_default();
                let set: BTreeSet<String> = d.iter().cloned().collect();
                if let Some(entry) = sets.iter_mut().find(|(s, _)| *s == set) {
                    entry.1.push(format!("{} {}", m.name, fmt_dims(&d)));
                } else {
                    sets.push((set, vec![format!("{} {}", m.name, fmt_dims(&d))]));
                }
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
        // Column order: AnnData `column-order` first, then by name.
        data.sort_by_key(|(i, _)| {
            let name = &members[*i].name;
            (
                column_order
                    .iter()
                    .position(|c| c == name)
                    .unwrap_or(usize::MAX),
                name.clone(),
            )
        });

        let data_names: BTreeSet<&str> = data
            .iter()
            .map(|(i, _)| members[*i].name.as_str())
            .collect();
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
                }
                None => {
                    let name = if data_names.contains(dim.name.as_str()) {
                        format!("{}_index", dim.name)
                    } else {
                        dim.name.clone()
                    };
                    columns.push(TableColumn {
                        name,
                        role: ColumnRole::Index(d),
                        source: String::new(),
                        kind: SourceKind::Index,
                    });
                }
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
        Ok(TableModel {
            location,
            schema: Arc::new(Schema::new(fields)),
            dims,
            chunk_shape,
            columns,
            left_out,
            options,
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
            SourceKind::Categorical {
                codes, categories, ..
            } => {
                let key = codes.arrow_field("", opts).data_type().clone();
                let value = categories.arrow_field("", opts).data_type().clone();
                (ArrowType::Dictionary(Box::new(key), Box::new(value)), true)
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

    /// The number of rows.
    pub fn num_rows(&self) -> u64 {
        self.dims.iter().map(|d| d.size).product()
    }

    /// The shape of one chunk of rows (the driver array's read unit, in table dimension order).
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk_shape
    }

    /// The number of chunks per dimension.
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.dims
            .iter()
            .zip(&self.chunk_shape)
            .map(|(d, c)| d.size.div_ceil(*c))
            .collect()
    }

    /// Every chunk's coordinates, in C order.
    pub fn all_chunks(&self) -> Vec<Vec<u64>> {
        grid_coords(&self.chunk_grid_shape())
    }

    /// The box of rows of the chunk at `coords`: (start, shape) per dimension.
    pub fn chunk_region(&self, coords: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
        let grid = self.chunk_grid_shape();
        if coords.len() != grid.len() || coords.iter().zip(&grid).any(|(c, g)| c >= g) {
            return Err(Error::InvalidArgument(format!(
                "'{}': chunk {coords:?} outside the chunk grid {grid:?}",
                self.location
            )));
        }
        let start: Vec<u64> = coords
            .iter()
            .zip(&self.chunk_shape)
            .map(|(c, s)| c * s)
            .collect();
        let shape = start
            .iter()
            .zip(&self.chunk_shape)
            .zip(&self.dims)
            .map(|((st, cs), d)| (*cs).min(d.size - st))
            .collect();
        Ok((start, shape))
    }

    /// The number of rows of the chunk at `coords`.
    pub fn chunk_rows(&self, coords: &[u64]) -> Result<u64> {
        Ok(self.chunk_region(coords)?.1.iter().product())
    }

    /// The values of column `column` over the box `start .. start + shape` of the table's
    /// dimensions, in C order (broadcast where the column has fewer dimensions).
    pub async fn read_column_region(
        &self,
        column: usize,
        start: &[u64],
        shape: &[u64],
        opts: &ZarrReadOptions,
    ) -> Result<ArrayRef> {
        self.read_column(column, start, shape, opts, None).await
    }

    /// The whole coordinate (or index) column of dimension `dim`, decoded: what filters on
    /// that dimension are pruned with.
    pub async fn read_dimension_values(
        &self,
        dim: usize,
        opts: &ZarrReadOptions,
        cache: Option<&ChunkCache>,
    ) -> Result<ArrayRef> {
        let column = self
            .columns
            .iter()
            .position(
                |c| matches!(c.role, ColumnRole::Coordinate(d) | ColumnRole::Index(d) if d == dim),
            )
            .ok_or_else(|| Error::InvalidArgument(format!("no dimension {dim}")))?;
        let src = self.columns[column].kind.main_array();
        match src {
            None => {
                let size = self.dims[dim].size as i64;
                Ok(Arc::new(Int64Array::from_iter_values(0..size)))
            }
            Some(_) => {
                let mut start = vec![0u64; self.dims.len()];
                let mut shape = vec![1u64; self.dims.len()];
                start[dim] = 0;
                shape[dim] = self.dims[dim].size;
                self.read_column(column, &start, &shape, opts, cache).await
            }
        }
    }

    /// Does column `c` follow the driver's chunking (its array spans the table dimensions in
    /// order, in chunks of the driver's shape)? Then the table's chunk `k` is exactly its
    /// array's chunk `k`.
    fn is_aligned(&self, c: &TableColumn) -> bool {
        let ColumnRole::Data(map) = &c.role else {
            return false;
        };
        map.len() == self.dims.len()
            && map.iter().enumerate().all(|(i, &t)| i == t)
            && c.kind
                .main_array()
                .is_some_and(|a| a.chunk_shape() == self.chunk_shape.as_slice())
    }

    /// The stored bytes of chunk `coords` of each projected column that is a plain array
    /// following the driver's chunking (`Some`; the inner `None`: not stored, the fill
    /// value); `None` for the other columns, which [`Self::chunk_batches`] reads whole.
    async fn fetch_aligned(&self, coords: &[u64], projection: &[usize]) -> Result<Fetched> {
        let reads = projection.iter().map(|&i| async move {
            match self.fetched_ahead(i) {
                Some(array) => array.fetch_chunk(coords).await.map(Some),
                None => Ok(None),
            }
        });
        futures::future::try_join_all(reads).await
    }

    /// The array of column `i` if it is a plain array following the driver's chunking: one
    /// whose chunks [`Self::read_chunks`] fetches ahead and decodes a batch at a time.
    fn fetched_ahead(&self, i: usize) -> Option<&ZarrArray> {
        match self.columns.get(i) {
            Some(
                c @ TableColumn {
                    kind: SourceKind::Plain { array, .. },
                    ..
                },
            ) if self.is_aligned(c) => Some(array),
            _ => None,
        }
    }

    /// Column `column` over the box `start .. start + shape`, decoded whole.
    async fn read_column(
        &self,
        column: usize,
        start: &[u64],
        shape: &[u64],
        opts: &ZarrReadOptions,
        cache: Option<&ChunkCache>,
    ) -> Result<ArrayRef> {
        let c = self
            .columns
            .get(column)
            .ok_or_else(|| Error::InvalidArgument(format!("column {column} out of range")))?;
        let map: Vec<usize> = match &c.role {
            ColumnRole::Index(d) => return Ok(index_values(start, shape, *d)),
            ColumnRole::Coordinate(d) => vec![*d],
            ColumnRole::Data(m) => m.clone(),
        };
        let a_start: Vec<u64> = map.iter().map(|&t| start[t]).collect();
        let a_shape: Vec<u64> = map.iter().map(|&t| shape[t]).collect();
        // Arrays that follow the driver's chunking are read once per chunk; others go
        // through the cache.
        let cache = if self.is_aligned(c) { None } else { cache };
        let values = match &c.kind {
            SourceKind::Index => return Ok(index_values(start, shape, 0)),
            SourceKind::Plain { array, fill, cf } => {
                let v = array
                    .read_region_cached(&a_start, &a_shape, opts, cache)
                    .await?;
                plain_values(array, fill.as_ref(), cf.as_ref(), v)?
            }
            SourceKind::Masked { values, mask } => {
                let (v, m) = futures::try_join!(
                    values.read_region_cached(&a_start, &a_shape, opts, cache),
                    mask.read_region_cached(&a_start, &a_shape, opts, cache)
                )?;
                null_where(v, m.as_boolean())?
            }
            SourceKind::Categorical {
                codes,
                categories,
                loaded,
            } => {
                let cats = loaded
                    .get_or_try_init(|| async {
                        categories.read_region(&[0], categories.shape(), opts).await
                    })
                    .await?
                    .clone();
                let k = codes
                    .read_region_cached(&a_start, &a_shape, opts, cache)
                    .await?;
                dictionary(codes.path(), k, cats)?
            }
        };
        broadcast(values, shape, &map)
    }

    /// Read the rows of chunk `coords`, the columns of `projection` (indices into
    /// [`Self::schema`]). Only the arrays of projected columns are fetched.
    pub async fn read_chunk(
        &self,
        coords: &[u64],
        projection: &[usize],
        opts: &ZarrReadOptions,
    ) -> Result<RecordBatch> {
        let (start, shape) = self.chunk_region(coords)?;
        let rows: u64 = shape.iter().product();
        let schema = self.projected_schema(projection)?;
        let reads = projection
            .iter()
            .map(|&i| Box::pin(self.read_column(i, &start, &shape, opts, None)));
        let columns: Vec<ArrayRef> = futures::future::try_join_all(reads).await?;
        Ok(RecordBatch::try_new_with_options(
            schema,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows as usize)),
        )?)
    }

    /// The first `take` rows of chunk `coords`, projected, as batches of at most `batch_size`
    /// rows. Columns that follow the driver's chunking come from `fetched` (their stored
    /// bytes, from [`Self::fetch_aligned`]) and are decoded a batch at a time; the others are
    /// read whole for the chunk's box, through `cache`, and sliced.
    #[allow(clippy::too_many_arguments)]
    async fn chunk_batches(
        &self,
        coords: &[u64],
        take: usize,
        projection: &[usize],
        fetched: Fetched,
        opts: &ZarrReadOptions,
        cache: &ChunkCache,
        batch_size: usize,
    ) -> Result<ChunkBatches> {
        let (start, shape) = self.chunk_region(coords)?;
        let schema = self.projected_schema(projection)?;
        let reads = projection.iter().zip(fetched).map(|(&i, stored)| {
            let (start, shape) = (&start, &shape);
            async move {
                let column = self.columns.get(i);
                match (column.map(|c| &c.kind), stored) {
                    (Some(SourceKind::Plain { array, fill, cf }), Some(stored)) => {
                        let reader = array.chunk_reader(coords, stored, opts).await?;
                        let map = (fill.is_some() || cf.is_some()).then(|| {
                            let (array, fill, cf) = (array.clone(), fill.clone(), cf.clone());
                            Arc::new(move |v| plain_values(&array, fill.as_ref(), cf.as_ref(), v))
                                as RunMap
                        });
                        Ok(ColumnRuns::Runs(Box::new(reader), map))
                    }
                    _ => self
                        .read_column(i, start, shape, opts, Some(cache))
                        .await
                        .map(ColumnRuns::Whole),
                }
            }
        });
        let columns = futures::future::try_join_all(reads).await?;
        Ok(ChunkBatches::new(schema, columns, take, batch_size))
    }

    /// A stream of the rows of `chunks` (in this order), projected, in batches of at most
    /// `batch_size` rows, stopping after `limit` rows.
    ///
    /// Two stages. First the stored bytes of the chunks ahead are fetched, `opts.concurrency`
    /// array chunks in flight (for a table of four arrays, two chunks of rows ahead), each
    /// fetch its own tokio task where there is a runtime, so that it makes progress while this
    /// stream decodes. Then the chunk being handed out is decoded a batch at a time as the
    /// consumer asks (see [`crate::decode::rows`]). What is buffered is compressed bytes.
    /// Arrays that do not follow the driver's chunking (broadcast ones, coordinates) are
    /// fetched and decoded whole in the second stage, through `cache` (pass one cache to the
    /// streams of all partitions of a scan; `None`: a cache of 64 MiB for this stream).
    pub fn read_chunks(
        self: &Arc<Self>,
        chunks: Vec<Vec<u64>>,
        projection: Vec<usize>,
        opts: ZarrReadOptions,
        batch_size: usize,
        limit: Option<usize>,
        cache: Option<Arc<ChunkCache>>,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        if let Some(bad) = projection.iter().find(|&&i| i >= self.columns.len()) {
            return Err(Error::InvalidArgument(format!(
                "projection index {bad} out of range"
            )));
        }
        let mut plan = Vec::with_capacity(chunks.len());
        let mut remaining = limit.unwrap_or(usize::MAX);
        for c in chunks {
            if remaining == 0 {
                break;
            }
            let rows = self.chunk_rows(&c)? as usize;
            let take = rows.min(remaining);
            remaining -= take;
            plan.push((c, take));
        }
        let cache = cache.unwrap_or_else(|| Arc::new(ChunkCache::new(64 << 20)));
        // `concurrency` counts chunk reads in flight: a chunk of rows fetches one chunk per
        // column that follows the driver's chunking.
        let per_chunk = projection
            .iter()
            .filter(|&&i| self.fetched_ahead(i).is_some())
            .count();
        let ahead = (opts.concurrency / per_chunk.max(1)).max(1);
        let projection = Arc::new(projection);
        let (fetcher, fetch_projection) = (self.clone(), projection.clone());
        let decoder = self.clone();
        Ok(futures::stream::iter(plan)
            .map(move |(coords, take)| {
                let this = fetcher.clone();
                let projection = fetch_projection.clone();
                crate::reader::in_background(async move {
                    let fetched = this.fetch_aligned(&coords, &projection).await?;
                    Ok((coords, take, fetched))
                })
            })
            .buffered(ahead)
            .and_then(move |(coords, take, fetched)| {
                let this = decoder.clone();
                let projection = projection.clone();
                let opts = opts.clone();
                let cache = cache.clone();
                async move {
                    let batches = this
                        .chunk_batches(
                            &coords,
                            take,
                            &projection,
                            fetched,
                            &opts,
                            &cache,
                            batch_size,
                        )
                        .await?;
                    Ok::<_, Error>(futures::stream::iter(batches))
                }
            })
            .try_flatten()
            .boxed())
    }
}

/// Elements of a plain array's column as the table shows them: equal to the fill value → NULL
/// (`fill`, the `fill_as_null` option), then the CF conventions (`cf`, `decode_cf`).
fn plain_values(
    array: &ZarrArray,
    fill: Option<&ArrayRef>,
    cf: Option<&CfDecode>,
    mut v: ArrayRef,
) -> Result<ArrayRef> {
    if let Some(fill) = fill {
        if let Some(mask) = equals_scalar(v.as_ref(), fill.as_ref()) {
            v = null_where(v, &mask)?;
        }
    }
    if let Some(cf) = cf {
        v = cf.apply(array.path(), v)?;
    }
    Ok(v)
}

/// What [`TableModel::fetch_aligned`] fetched for each projected column.
type Fetched = Vec<Option<Option<Bytes>>>;

/// Int64 positions along dimension `dim` for the box `start .. start + shape`, C order.
fn index_values(start: &[u64], shape: &[u64], dim: usize) -> ArrayRef {
    let n: u64 = shape.iter().product();
    let inner: u64 = shape[dim + 1..].iter().product();
    let outer: u64 = shape[..dim].iter().product();
    let mut values = Vec::with_capacity(n as usize);
    for _ in 0..outer {
        for i in 0..shape[dim] {
            values.extend(std::iter::repeat_n((start[dim] + i) as i64, inner as usize));
        }
    }
    Arc::new(Int64Array::from(values))
}

/// Values over the array dims `map` (array dim `i` = table dim `map[i]`), laid out in C order
/// of the array's box, spread over the table box `shape` (C order).
fn broadcast(values: ArrayRef, shape: &[u64], map: &[usize]) -> Result<ArrayRef> {
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
    for pos in grid_coords(shape) {
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

/// AnnData categorical codes → a dictionary array; negative codes are NULL.
fn dictionary(path: &str, codes: ArrayRef, categories: ArrayRef) -> Result<ArrayRef> {
    let n = categories.len();
    macro_rules! dict {
        ($t:ty) => {{
            let keys: PrimitiveArray<$t> = codes
                .as_primitive::<$t>()
                .iter()
                .map(|k| k.filter(|k| *k >= 0))
                .collect();
            if let Some(bad) = keys.iter().flatten().find(|k| *k as i64 >= n as i64) {
                return Err(Error::InvalidArgument(format!(
                    "categorical '{path}': code {bad} but only {n} categories"
                )));
            }
            Arc::new(DictionaryArray::<$t>::try_new(keys, categories)?) as ArrayRef
        }};
    }
    Ok(match codes.data_type() {
        ArrowType::Int8 => dict!(Int8Type),
        ArrowType::Int16 => dict!(Int16Type),
        ArrowType::Int32 => dict!(Int32Type),
        ArrowType::Int64 => dict!(Int64Type),
        other => {
            return Err(Error::InvalidArgument(format!(
                "categorical '{path}': codes of type {other} are not supported"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::StringArray;

    use super::*;

    use crate::test_util::fixture;

    fn strings(a: &ArrayRef) -> Vec<&str> {
        a.as_string::<i32>()
            .iter()
            .map(|v| v.unwrap_or("NULL"))
            .collect()
    }

    #[test]
    fn index_and_broadcast() {
        let idx = index_values(&[2, 3], &[2, 2], 1);
        assert_eq!(idx.as_primitive::<Int64Type>().values(), &[3, 4, 3, 4]);
        let idx = index_values(&[2, 3], &[2, 2], 0);
        assert_eq!(idx.as_primitive::<Int64Type>().values(), &[2, 2, 3, 3]);
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
        let opts = ZarrReadOptions::default();
        let batch = t.read_chunk(&[2, 1], &[1, 3, 2], &opts).await.unwrap();
        assert_eq!(batch.num_rows(), 4);
        assert_eq!(
            strings(batch.column(0)),
            ["δelta", "echo 🌊", "δelta", "echo 🌊"]
        );
        assert_eq!(
            strings(batch.column(1)),
            ["Delta δ", "Echo 🌊", "Delta δ", "Echo 🌊"]
        );
        let batch = t.read_chunk(&[0, 0], &[], &opts).await.unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (12, 0));
    }

    #[tokio::test]
    async fn anndata_obs_model() {
        let t = TableModel::open(&fixture("anndata_v3.zarr/obs"), TableOptions::default())
            .await
            .unwrap();
        assert_eq!(t.columns()[0].name, "_index");
        assert_eq!(t.columns()[0].role, ColumnRole::Coordinate(0));
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
