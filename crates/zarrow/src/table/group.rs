//! The group table: a group's members (child arrays, AnnData encoded groups) side by side over
//! shared dimensions, built in named steps:
//!
//! ```text
//!  open_members ─▶ select_arrays (the `arrays` option) ─▶ table_dimensions
//!    ─▶ restore_coordinates ─▶ coordinate_members ─▶ data_members ─▶ order_data
//!    ─▶ table_columns ─▶ driver_grid
//! ```
//!
//! The table's dimensions are those of the members with the most dimensions (by name, else by
//! shape); per dimension a coordinate (the 1-D array of its name; AnnData's `_index`, followed
//! by the Int64 position) or an Int64 index; then every member whose dimensions are a subset
//! of the table's, broadcast along the others. The rest is left out, with the reason.

use std::collections::{BTreeSet, HashMap, HashSet};

use futures::StreamExt;

use super::anndata;
use super::column::{dim_names, Member, MemberKind};
use super::model::TableParts;
use super::{ColumnRole, TableColumn, TableDimension, TableOptions};
use crate::grid::{ChunkGrid, GridError};
use crate::node::{Node, ZarrGroup};
use crate::{Error, Result};

/// What a child of a group opens as: a member of the table, or left out for the reason given.
pub(super) enum Opened {
    /// It reads as a column.
    Member(Box<Member>),
    /// It does not, for this reason.
    LeftOut(String),
}

/// The table's dimensions, and whether they are named (else `dim_i`, positional).
struct GroupDims {
    dims: Vec<TableDimension>,
    named: bool,
}

impl GroupDims {
    fn shape(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.size).collect()
    }
}

/// Where a member goes: over these table dimensions, or left out for the reason given; or
/// it has another length along one of the table's dimensions (the reason).
enum Placed {
    Over(Vec<usize>),
    LeftOut(String),
    Disagrees(String),
}

/// The table of `group`.
pub(super) async fn group_table(group: ZarrGroup, options: &TableOptions) -> Result<TableParts> {
    let mut left_out = Vec::new();
    let wanted = options.arrays.as_deref();
    let members = open_members(&group, wanted, &mut left_out).await?;
    let attrs = &group.metadata().attributes;
    let anndata_index = anndata::index_column(attrs);
    let (mut members, held_back) = select_arrays(&group, members, wanted)?;
    let dims = table_dimensions(&group, &members, &left_out)?;
    restore_coordinates(
        &dims,
        anndata_index.as_deref(),
        held_back,
        &mut members,
        &mut left_out,
    );
    let coord_of = coordinate_members(&dims, &members, anndata_index.as_deref());
    let mut data = data_members(&group, &dims, &members, &coord_of, &mut left_out)?;
    order_data(&mut data, &members, &anndata::column_order(attrs));
    let columns = table_columns(&dims, &members, &coord_of, &data, options)?;
    let grid = driver_grid(&dims, &columns).map_err(|e| e.in_array(group.store().location()))?;
    Ok(TableParts {
        location: group.store().location().to_string(),
        dims: dims.dims,
        grid,
        columns,
        left_out,
    })
}

/// The members of a group: child arrays and AnnData encoded groups; other child groups
/// are left out, and so are children that cannot be read — unless `wanted` names them, then
/// their error is the table's.
async fn open_members(
    group: &ZarrGroup,
    wanted: Option<&[String]>,
    left_out: &mut Vec<(String, String)>,
) -> Result<Vec<Member>> {
    let wanted: Option<HashSet<&str>> = wanted.map(|w| w.iter().map(String::as_str).collect());
    // Encoded groups' children are opened a few groups at a time (their round trips
    // overlap), in order.
    let opening: Vec<_> = group
        .children()
        .await?
        .into_iter()
        .map(|(name, node)| async move {
            let opened = match node {
                Ok(Node::Array(a)) => {
                    let dims = dim_names(&a);
                    Ok(Opened::Member(Box::new(Member::array(
                        name.clone(),
                        a,
                        dims,
                    ))))
                }
                Ok(Node::Group(g)) => anndata::encoded_member(&name, &g).await,
                Err(e) => Err(e),
            };
            (name, opened)
        })
        .collect();
    let opened: Vec<_> = futures::stream::iter(opening)
        .buffered(crate::node::OPEN_CONCURRENCY)
        .collect()
        .await;
    let mut members = Vec::new();
    for (name, opened) in opened {
        match opened {
            Ok(Opened::Member(member)) => members.push(*member),
            Ok(Opened::LeftOut(why)) => left_out.push((name, why)),
            Err(e) if wanted.as_ref().is_some_and(|w| w.contains(name.as_str())) => return Err(e),
            Err(e) => left_out.push((name, format!("unreadable: {e}"))),
        }
    }
    Ok(members)
}

/// The `arrays` option: the members it names (an error if one is missing), and the others,
/// held back (coordinates among them come back in [`restore_coordinates`]).
fn select_arrays(
    group: &ZarrGroup,
    members: Vec<Member>,
    wanted: Option<&[String]>,
) -> Result<(Vec<Member>, Vec<Member>)> {
    let Some(wanted) = wanted else {
        return Ok((members, Vec::new()));
    };
    let names: HashSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
    if let Some(w) = wanted.iter().find(|w| !names.contains(w.as_str())) {
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        return Err(Error::invalid_option(
            "arrays",
            format!(
                "group '{}' has no array '{w}' (arrays: {})",
                group.path(),
                names.join(", ")
            ),
        ));
    }
    let wanted: HashSet<&str> = wanted.iter().map(String::as_str).collect();
    Ok(members
        .into_iter()
        .partition(|m| wanted.contains(m.name.as_str())))
}

/// The table's dimensions: those of the members with the most named dimensions, else the
/// shape of the members with the most dimensions (`dim_i`).
fn table_dimensions(
    group: &ZarrGroup,
    members: &[Member],
    left_out: &[(String, String)],
) -> Result<GroupDims> {
    let named: Vec<&Member> = members
        .iter()
        .filter(|m| m.dims.is_some() && !m.shape.is_empty())
        .collect();
    if named.is_empty() {
        positional_dimensions(group, members, left_out)
    } else {
        named_dimensions(group, &named)
    }
}

/// The dimensions of the named members with the most dimensions: they must share one set of
/// names; the order is the largest one's.
fn named_dimensions(group: &ZarrGroup, named: &[&Member]) -> Result<GroupDims> {
    let max_nd = named.iter().map(|m| m.shape.len()).max().unwrap_or(0);
    let top: Vec<&Member> = (named.iter().copied())
        .filter(|m| m.shape.len() == max_nd)
        .collect();
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
        return Err(Error::table(
            group.path(),
            format!(
                "group '{}': arrays with different dimensions tie for the table's dimensions: \
                 {}; choose the arrays with the `arrays` option",
                group.path(),
                listed.join("; ")
            ),
        ));
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
        .ok_or_else(|| {
            Error::table(
                group.path(),
                format!("group '{}' holds no arrays", group.path()),
            )
        })?;
    let names = lead.dims.clone().unwrap_or_default();
    let dims = (names.into_iter().zip(&lead.shape))
        .map(|(name, &size)| TableDimension { name, size })
        .collect();
    Ok(GroupDims { dims, named: true })
}

/// Without dimension names: the shape of the members with the most dimensions, which must
/// all have that shape; dimensions `dim_i`.
fn positional_dimensions(
    group: &ZarrGroup,
    members: &[Member],
    left_out: &[(String, String)],
) -> Result<GroupDims> {
    let Some(max_nd) = members.iter().map(|m| m.shape.len()).max() else {
        let mut why = format!(
            "group '{}' holds no arrays to read as a table",
            group.path()
        );
        if !left_out.is_empty() {
            let names: Vec<&str> = left_out.iter().map(|(n, _)| n.as_str()).collect();
            why.push_str(&format!(" (children: {})", names.join(", ")));
        }
        return Err(Error::table(group.path(), why));
    };
    let top = || members.iter().filter(|m| m.shape.len() == max_nd);
    let shapes: BTreeSet<&Vec<u64>> = top().map(|m| &m.shape).collect();
    if shapes.len() > 1 {
        let listed: Vec<String> = top().map(|m| format!("{} {:?}", m.name, m.shape)).collect();
        return Err(Error::table(
            group.path(),
            format!(
                "group '{}': arrays without dimension names and of different shapes tie for the \
                 table: {}; choose the arrays with the `arrays` option",
                group.path(),
                listed.join(", ")
            ),
        ));
    }
    let shape = shapes.into_iter().next().cloned().unwrap_or_default();
    let dims = (shape.iter().enumerate())
        .map(|(d, &size)| TableDimension {
            name: format!("dim_{d}"),
            size,
        })
        .collect();
    Ok(GroupDims { dims, named: false })
}

/// Coordinates come back even when `arrays` left them out; the other members held back are
/// left out.
fn restore_coordinates(
    dims: &GroupDims,
    anndata_index: Option<&str>,
    held_back: Vec<Member>,
    members: &mut Vec<Member>,
    left_out: &mut Vec<(String, String)>,
) {
    for m in held_back {
        let is_coord = m.shape.len() == 1
            && ((dims.named
                && (dims.dims.iter())
                    .any(|d| Some(vec![d.name.clone()]) == m.dims && m.name == d.name))
                || anndata_index == Some(m.name.as_str()));
        if is_coord {
            members.push(m);
        } else {
            left_out.push((m.name, "not in the `arrays` option".into()));
        }
    }
}

/// Per dimension, the member that is its coordinate: the 1-D array named like it (AnnData:
/// `_index`).
fn coordinate_members(
    dims: &GroupDims,
    members: &[Member],
    anndata_index: Option<&str>,
) -> Vec<Option<usize>> {
    let ndim = dims.dims.len();
    (dims.dims.iter())
        .map(|dim| {
            members.iter().position(|m| {
                m.shape == [dim.size]
                    && matches!(m.kind, MemberKind::Array(_))
                    && if dims.named {
                        m.name == dim.name
                            && m.dims.as_deref() == Some(std::slice::from_ref(&dim.name))
                    } else {
                        ndim == 1 && anndata_index == Some(m.name.as_str())
                    }
            })
        })
        .collect()
}

/// The data columns: the members (not coordinates) whose dimensions are a subset of the
/// table's (by name), or, without names, of the table's shape, with the table dimension of each
/// of theirs; the others are left out. Arrays that disagree in length along a dimension are an
/// error naming them: the table is neither cut nor padded (an append seen half done by a reader
/// without the consolidated metadata looks like this; docs/writing.md).
fn data_members(
    group: &ZarrGroup,
    dims: &GroupDims,
    members: &[Member],
    coord_of: &[Option<usize>],
    left_out: &mut Vec<(String, String)>,
) -> Result<Vec<(usize, Vec<usize>)>> {
    let mut data = Vec::new();
    let mut disagree = Vec::new();
    for (i, m) in members.iter().enumerate() {
        if coord_of.contains(&Some(i)) {
            continue;
        }
        match place(dims, m) {
            Placed::Over(map) => data.push((i, map)),
            Placed::LeftOut(why) => left_out.push((m.name.clone(), why)),
            Placed::Disagrees(why) => disagree.push(format!("'{}' {why}", m.name)),
        }
    }
    if !disagree.is_empty() {
        let table: Vec<String> = (dims.dims.iter())
            .map(|d| format!("{} {}", d.name, d.size))
            .collect();
        return Err(Error::table(
            group.path(),
            format!(
                "group '{}': its arrays disagree in length: {} (the table's: {}); a write to it \
                 may be under way or was interrupted",
                group.path(),
                disagree.join(", "),
                table.join(", ")
            ),
        ));
    }
    Ok(data)
}

/// Where member `m` lies in the table: the table dimension of each of its dimensions.
fn place(dims: &GroupDims, m: &Member) -> Placed {
    let table_shape = dims.shape();
    match (&m.dims, dims.named) {
        (Some(md), true) => place_by_name(&dims.dims, md, &m.shape),
        _ if m.shape.is_empty() && dims.named => Placed::Over(Vec::new()),
        _ if m.shape == table_shape => Placed::Over((0..table_shape.len()).collect()),
        (None, true) => Placed::LeftOut(format!(
            "no dimension names, and its shape {:?} is not the table's {:?}",
            m.shape, table_shape
        )),
        _ => Placed::LeftOut(format!(
            "shape {:?} is not the table's {:?}",
            m.shape, table_shape
        )),
    }
}

/// A member's named dimensions `names` (of lengths `shape`) among the table's `dims`.
fn place_by_name(dims: &[TableDimension], names: &[String], shape: &[u64]) -> Placed {
    let mut map = Vec::with_capacity(names.len());
    for (n, s) in names.iter().zip(shape) {
        match dims.iter().position(|d| &d.name == n) {
            None => {
                let table: Vec<String> = dims.iter().map(|d| d.name.clone()).collect();
                return Placed::LeftOut(format!(
                    "dimensions {} are not a subset of the table's {}",
                    fmt_dims(names),
                    fmt_dims(&table)
                ));
            }
            Some(p) if dims[p].size != *s => {
                return Placed::Disagrees(format!("has length {s} along '{n}'"));
            }
            Some(p) => map.push(p),
        }
    }
    let distinct: BTreeSet<&usize> = map.iter().collect();
    if distinct.len() == map.len() {
        Placed::Over(map)
    } else {
        Placed::LeftOut("repeats a dimension".into())
    }
}

/// Data columns in `column-order` (AnnData's, and zarrow's writer's) first, then by name.
fn order_data(data: &mut [(usize, Vec<usize>)], members: &[Member], column_order: &[String]) {
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
}

/// The columns: per dimension its coordinate (and, in an AnnData dataframe, its position) or
/// its index, then the data columns.
fn table_columns(
    dims: &GroupDims,
    members: &[Member],
    coord_of: &[Option<usize>],
    data: &[(usize, Vec<usize>)],
    options: &TableOptions,
) -> Result<Vec<TableColumn>> {
    let data_names: BTreeSet<&str> = data
        .iter()
        .map(|(i, _)| members[*i].name.as_str())
        .collect();
    // The Int64 position along dimension `d`: `<dim>_index` where a column has its name.
    let index_column = |d: usize, dim: &str, taken: bool| {
        let name = if taken || data_names.contains(dim) {
            format!("{dim}_index")
        } else {
            dim.to_string()
        };
        TableColumn::index(name, d)
    };
    let mut columns = Vec::with_capacity(dims.dims.len() + data.len());
    for (d, dim) in dims.dims.iter().enumerate() {
        match coord_of[d] {
            Some(i) => {
                let m = &members[i];
                let role = ColumnRole::Coordinate(d);
                columns.push(TableColumn::of_member(m, m.name.clone(), role, options)?);
                // An AnnData dataframe also has its row position, named as the dense
                // matrices' index columns, so `X.dim_0 = obs.dim_0` joins them.
                if !dims.named {
                    columns.push(index_column(d, &dim.name, m.name == dim.name));
                }
            }
            None => columns.push(index_column(d, &dim.name, false)),
        }
    }
    for (i, map) in data {
        let m = &members[*i];
        let role = ColumnRole::Data(map.clone());
        columns.push(TableColumn::of_member(m, m.name.clone(), role, options)?);
    }
    Ok(columns)
}

/// The chunk grid of the driver, the first column spanning every dimension (its array's
/// grid in table dimension order); without one, one chunk of the whole table. Other columns
/// are read by the driver's chunks of rows, whatever their own grids.
fn driver_grid(dims: &GroupDims, columns: &[TableColumn]) -> Result<ChunkGrid, GridError> {
    let ndim = dims.dims.len();
    columns
        .iter()
        .filter(|c| match &c.role {
            ColumnRole::Data(map) => map.len() == ndim,
            ColumnRole::Coordinate(_) => ndim == 1,
            ColumnRole::Index(_) => false,
        })
        .find_map(|c| {
            let a = c.source_kind().main_array()?;
            let map: Vec<usize> = match &c.role {
                ColumnRole::Data(m) => m.clone(),
                _ => vec![0],
            };
            // Table dimension t is the array's dimension j where map[j] = t.
            let mut order = vec![0usize; ndim];
            for (j, &t) in map.iter().enumerate() {
                *order.get_mut(t)? = j;
            }
            Some(a.grid().transposed(&order))
        })
        .unwrap_or_else(|| {
            let shape = dims.shape();
            let whole = shape.iter().map(|s| (*s).max(1)).collect();
            ChunkGrid::new(shape, whole)
        })
}

fn fmt_dims(dims: &[String]) -> String {
    format!("({})", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::DataType as ArrowType;

    use super::super::{TableDimension, TableModel, TableOptions};
    use super::*;
    use crate::grid::ChunkRanges;

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

    /// What is wrong with the caller's `arrays` option is an option error; a node that is no
    /// table is a table error naming it.
    #[tokio::test]
    async fn errors_say_whose_they_are() {
        let arrays = |names: &[&str]| TableOptions {
            arrays: Some(names.iter().map(|n| n.to_string()).collect()),
            ..TableOptions::default()
        };
        for location in ["xarray_v3.zarr", "xarray_v3.zarr/temperature"] {
            let e = TableModel::open(&fixture(location), arrays(&["nope"]))
                .await
                .unwrap_err();
            assert!(
                matches!(&e, crate::Error::InvalidOption { key, .. } if key == "arrays"),
                "{location}: {e:?}"
            );
        }
        let e = TableModel::open(
            &fixture("anndata_uns_v3.zarr/obsm/neighbors"),
            TableOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, crate::Error::Table { .. }) && e.to_string().contains("awkward-array"),
            "{e:?}"
        );
        assert!(e.array().is_some_and(|p| p.ends_with("neighbors")), "{e:?}");
    }
}
