//! Nodes of a zarr hierarchy: opening an array or group at a location, and walking children.
//!
//! A node's metadata is `zarr.json` (v3), else `.zarray` or `.zgroup` with `.zattrs` (v2);
//! a group's children share its format, so only that format's documents are asked for, and
//! the v2 ones at once (one round trip).
//! Children come from consolidated metadata when the group has it (v3 inline
//! `consolidated_metadata`, v2 `.zmetadata`) — one read for the whole tree, and the only way on
//! stores that cannot list (HTTP) — else from the children an AnnData element declares in its
//! attributes (`_index` and `column-order` of a dataframe, `codes`/`categories`,
//! `values`/`mask`), as anndata itself reads them, else from listing the store. A walk of the
//! tree takes it a level at a time, sibling groups at once ([`ZarrGroup::subtree`]).

use std::collections::HashSet;

use futures::{StreamExt, TryStreamExt};

use crate::array::ZarrArray;
use crate::metadata::{self, GroupMetadata, NodeMetadata};
use crate::store::ZarrStore;
use crate::{Error, Result};

/// An open group: its metadata, children and descendants.
///
/// ```
/// use zarrow::Node;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
/// let Node::Group(root) = Node::open(sample).await? else {
///     panic!("the sample is a group");
/// };
/// // Every child, opened or with the reason it cannot be.
/// let names: Vec<String> = root.children().await?.into_iter().map(|(name, _)| name).collect();
/// assert!(names.contains(&"X".to_string()) && names.contains(&"obs".to_string()));
///
/// let Node::Group(obs) = root.child("obs").await? else {
///     panic!("obs is a group");
/// };
/// assert_eq!(obs.metadata().attributes["encoding-type"], "dataframe");
/// // Every descendant, depth first, by its path below the group.
/// let below = root.walk().await?;
/// assert!(below.iter().any(|(path, node)| path == "X" && matches!(node, Node::Array(_))));
/// assert!(below.iter().any(|(path, _)| path == "obs/cell_type/codes"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ZarrGroup {
    store: ZarrStore,
    path: String,
    meta: GroupMetadata,
}

/// An array or a group.
///
/// ```
/// use zarrow::Node;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let x = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/X");
/// match Node::open(x).await? {
///     Node::Array(array) => assert_eq!(array.shape(), [2000, 200]),
///     Node::Group(_) => panic!("X is an array"),
/// }
/// // Or insist on an array: a group is an error naming the location.
/// let array = Node::open(x).await?.into_array(x)?;
/// assert_eq!(array.metadata().chunk_shape, [250, 200]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub enum Node {
    /// An array.
    Array(ZarrArray),
    /// A group.
    Group(ZarrGroup),
}

impl Node {
    /// Open the node at a location (see [`ZarrStore::open`]).
    pub async fn open(location: &str) -> Result<Node> {
        let store = ZarrStore::open(location)?;
        Node::open_store(store, "").await
    }

    /// Open the node at the root of `store`; `path` names it in messages. Its format is not
    /// known yet: `zarr.json` first, and if there is none the v2 documents (`.zarray`,
    /// `.zgroup`, `.zattrs`, `.zmetadata`) at once, in one round trip.
    pub async fn open_store(store: ZarrStore, path: &str) -> Result<Node> {
        Self::open_as(store, path, None).await
    }

    /// [`Self::open_store`] of a node whose zarr format (`zarr_format`, 2 or 3) is known —
    /// a child of a group, which shares its group's format: only that format's documents are
    /// asked for (a child of a v3 group has a `zarr.json` or is no node; one of a v2 group
    /// has `.zarray`, asked for at once with its `.zattrs`, else `.zgroup`), and no child is
    /// asked for consolidated metadata, which only a hierarchy's root holds.
    pub(crate) async fn open_as(store: ZarrStore, path: &str, format: Option<u8>) -> Result<Node> {
        let display = if path.is_empty() {
            store.location().to_string()
        } else {
            path.to_string()
        };
        if format != Some(2) {
            if let Some(bytes) = store.get_document("zarr.json", &display).await? {
                return Ok(
                    match metadata::parse_v3(&display, &bytes, store.limits())? {
                        NodeMetadata::Array(m) => {
                            Node::Array(ZarrArray::try_new(store, display, *m)?)
                        }
                        NodeMetadata::Group(mut meta) => {
                            // An Icechunk repository's nodes are read from its snapshot:
                            // its store says it has no consolidated metadata (zarr-python
                            // and xarray do not read it there), and what a table written
                            // with it holds goes stale when another tool changes an array.
                            if store.is_repository() {
                                meta.consolidated = None;
                            }
                            Node::Group(ZarrGroup {
                                store,
                                path: display,
                                meta,
                            })
                        }
                        NodeMetadata::Unreadable(entry) => return Err(entry.error(&display)),
                    },
                );
            }
            if format == Some(3) {
                return Err(Error::NodeNotFound { path: display });
            }
        }
        // At the root the v2 documents are asked for at once; below it, a child is far more
        // often an array than a group: `.zarray` with `.zattrs`, then `.zgroup` only if
        // there is no `.zarray`.
        let root = format.is_none();
        let maybe = |key: &'static str, wanted: bool| {
            let (store, display) = (&store, &display);
            async move {
                match wanted {
                    true => store.get_document(key, display).await,
                    false => Ok(None),
                }
            }
        };
        let (zarray, mut zgroup, zattrs, zmeta) = futures::try_join!(
            maybe(".zarray", true),
            maybe(".zgroup", root),
            maybe(".zattrs", true),
            maybe(".zmetadata", root),
        )?;
        if zarray.is_none() && !root {
            zgroup = store.get_document(".zgroup", &display).await?;
        }
        if let Some(zarray) = zarray {
            let m = metadata::parse_v2_array(&display, &zarray, zattrs.as_deref(), store.limits())?;
            return Ok(Node::Array(ZarrArray::try_new(store, display, m)?));
        }
        if let Some(zgroup) = zgroup {
            let mut meta = metadata::parse_v2_group(&display, &zgroup, zattrs.as_deref())?;
            if let Some(zmeta) = zmeta {
                meta.consolidated = Some(metadata::Consolidated::new(
                    metadata::parse_v2_consolidated(&display, &zmeta, store.limits())?,
                ));
            }
            return Ok(Node::Group(ZarrGroup {
                store,
                path: display,
                meta,
            }));
        }
        Err(Error::NodeNotFound { path: display })
    }

    /// The array, or an error naming `location` if the node is a group.
    pub fn into_array(self, location: &str) -> Result<ZarrArray> {
        match self {
            Node::Array(a) => Ok(a),
            Node::Group(_) => Err(Error::InvalidArgument(format!(
                "'{location}' is a group, not an array"
            ))),
        }
    }

    /// The node's path (for messages).
    pub fn path(&self) -> &str {
        match self {
            Node::Array(a) => a.path(),
            Node::Group(g) => &g.path,
        }
    }
}

impl ZarrArray {
    /// Open the array at a location.
    ///
    /// ```
    /// use zarrow::ZarrArray;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> zarrow::Result<()> {
    /// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
    /// let umap = ZarrArray::open(&format!("{sample}/obsm/X_umap")).await?;
    /// assert_eq!(umap.shape(), [2000, 2]);
    /// // A group is an error that names the location.
    /// let err = ZarrArray::open(&format!("{sample}/obs")).await.unwrap_err();
    /// assert!(err.to_string().contains("obs"), "{err}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(location: &str) -> Result<Self> {
        Node::open(location).await?.into_array(location)
    }
}

impl ZarrGroup {
    /// The group's metadata.
    pub fn metadata(&self) -> &GroupMetadata {
        &self.meta
    }

    /// The group's path (for messages).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The store, rooted at the group.
    pub fn store(&self) -> &ZarrStore {
        &self.store
    }

    fn node_from_meta(&self, relative: &str, meta: &NodeMetadata) -> Result<Node> {
        metadata::check_key(&self.path, relative)?;
        let store = self.store.child(relative);
        let path = metadata::join_path(&self.path, relative);
        match meta {
            NodeMetadata::Array(m) => {
                Ok(Node::Array(ZarrArray::try_new(store, path, (**m).clone())?))
            }
            NodeMetadata::Group(g) => {
                // A child group sees the part of the consolidated tree below it (the same
                // entries, shared).
                let consolidated = self
                    .meta
                    .consolidated
                    .as_ref()
                    .map(|all| all.below(relative));
                Ok(Node::Group(ZarrGroup {
                    store,
                    path,
                    meta: GroupMetadata {
                        zarr_format: g.zarr_format,
                        attributes: g.attributes.clone(),
                        consolidated,
                    },
                }))
            }
            NodeMetadata::Unreadable(entry) => Err(entry.error(&path)),
        }
    }

    /// The immediate children, sorted by name, each opened or with the reason it cannot be
    /// (an unsupported data type or codec, bad metadata): one unreadable node does not make
    /// its siblings unreachable. The error is for the group itself (it cannot be listed, its
    /// metadata names a hostile key, or it says it is an AnnData dataframe and is not a valid
    /// one: no `_index` or `column-order`, or a column they name is not there — anndata
    /// cannot read it either).
    pub async fn children(&self) -> Result<Vec<(String, Result<Node>)>> {
        match self.listing_of(false).await? {
            (_, Some(invalid)) => Err(invalid),
            (children, None) => Ok(children),
        }
    }

    /// The immediate children as [`Self::children`] gives them and, apart, why the group is
    /// not the AnnData dataframe it says it is: the children are then those the group holds
    /// (listed from the store; where it cannot list, those found), so that `tree` shows what
    /// is there and what is wrong.
    pub(crate) async fn listing(&self) -> Result<Listing> {
        self.listing_of(true).await
    }

    /// [`Self::listing`]; for an invalid dataframe, what the group holds is listed only if
    /// `list_invalid` (else the children are those found before the error).
    async fn listing_of(&self, list_invalid: bool) -> Result<Listing> {
        let declared = declared_children(&self.path, &self.meta.attributes);
        if let Some(all) = &self.meta.consolidated {
            let mut out = Vec::new();
            for (p, m) in all.children() {
                metadata::check_key(&self.path, p)?;
                out.push((p.to_string(), self.node_from_meta(p, m)));
            }
            let invalid = match declared {
                Ok(Some(declared)) if declared.index.is_some() => {
                    let held: HashSet<&str> = out.iter().map(|(name, _)| name.as_str()).collect();
                    declared
                        .names
                        .iter()
                        .find(|name| !held.contains(name.as_str()))
                        .map(|name| declared.missing(&self.path, name))
                }
                Ok(_) => None,
                Err(invalid) => Some(invalid),
            };
            return Ok((out, invalid));
        }
        let declared = match declared.and_then(|declared| {
            if let Some(d) = &declared {
                for name in &d.names {
                    metadata::check_key(&self.path, name)?;
                }
            }
            Ok(declared)
        }) {
            Ok(Some(declared)) => declared,
            Ok(None) => return Ok((self.open_listed().await?, None)),
            Err(invalid) if list_invalid => {
                let held = self.open_listed().await.unwrap_or_default();
                return Ok((held, Some(invalid)));
            }
            Err(invalid) => return Ok((Vec::new(), Some(invalid))),
        };
        let mut names = declared.names.clone();
        names.sort_unstable();
        // A declared child that is not there: skipped, except a dataframe's column, which
        // ends the opening (anndata fails to read it too): a hostile `column-order` of n
        // names that are not members costs OPEN_CONCURRENCY store lookups at most, not n.
        match self.open_children(names, declared.index.is_some()).await {
            Ok(out) => Ok((out, None)),
            Err((missing, found)) => {
                let invalid = declared.missing(&self.path, &missing);
                // What the group holds, for `tree` (a store that cannot list: what was found).
                let held = match list_invalid {
                    true => self.open_listed().await.unwrap_or(found),
                    false => found,
                };
                Ok((held, Some(invalid)))
            }
        }
    }

    /// The children the store lists, opened (a directory that is not a zarr node is none).
    async fn open_listed(&self) -> Result<Vec<(String, Result<Node>)>> {
        let names = self.store.list_children("").await?;
        Ok(self
            .open_children(names, false)
            .await
            .unwrap_or_else(|(_, found)| found))
    }

    /// `names` opened a few at a time (a store's round trips overlap), in order; one that is
    /// not there is skipped, or, if `required`, ends the opening: `Err` with its name and
    /// those opened before it.
    async fn open_children(
        &self,
        names: Vec<String>,
        required: bool,
    ) -> std::result::Result<Vec<(String, Result<Node>)>, (String, Vec<(String, Result<Node>)>)>
    {
        let mut opened = futures::stream::iter(names)
            .map(|name| async move {
                let path = metadata::join_path(&self.path, &name);
                let format = Some(self.meta.zarr_format);
                let node = Node::open_as(self.store.child(&name), &path, format).await;
                (name, node)
            })
            .buffered(OPEN_CONCURRENCY);
        let mut out = Vec::new();
        while let Some((name, node)) = opened.next().await {
            match node {
                Err(Error::NodeNotFound { .. }) if required => return Err((name, out)),
                Err(Error::NodeNotFound { .. }) => {}
                opened => out.push((name, opened)),
            }
        }
        Ok(out)
    }

    /// A child by relative path (`a` or `a/b`).
    pub async fn child(&self, relative: &str) -> Result<Node> {
        let relative = relative.trim_end_matches('/');
        metadata::check_key(&self.path, relative)?;
        if let Some(all) = &self.meta.consolidated {
            if let Some(m) = all.get(relative) {
                return self.node_from_meta(relative, m);
            }
            return Err(Error::NodeNotFound {
                path: metadata::join_path(&self.path, relative),
            });
        }
        Node::open_as(
            self.store.child(relative),
            &metadata::join_path(&self.path, relative),
            Some(self.meta.zarr_format),
        )
        .await
    }

    /// Every descendant that opens, depth first, with its path relative to this group (an
    /// unreadable node is skipped; [`ZarrGroup::children`] says why).
    pub async fn walk(&self) -> Result<Vec<(String, Node)>> {
        let mut out = Vec::new();
        self.subtree().await?.walk_into("", &mut out);
        Ok(out)
    }

    /// The children of this group and of every group below it ([`Self::children`] of each),
    /// fetched a level at a time: the groups of a level are listed and their children opened
    /// at once ([`OPEN_CONCURRENCY`] groups, each opening [`OPEN_CONCURRENCY`] children), so
    /// an unconsolidated hierarchy costs round trips by its depth, not by its number of
    /// groups. The result is in the order [`Self::children`] gives, whatever order the
    /// responses came in.
    pub(crate) async fn subtree(&self) -> Result<Subtree> {
        let mut levels = Vec::new();
        let mut groups = vec![self.clone()];
        while !groups.is_empty() {
            let listed: Vec<Listing> = futures::stream::iter(&groups)
                .map(ZarrGroup::listing)
                .buffered(OPEN_CONCURRENCY)
                .try_collect()
                .await?;
            groups = listed
                .iter()
                .flat_map(|(children, _)| children)
                .filter_map(|(_, node)| match node {
                    Ok(Node::Group(g)) => Some(g.clone()),
                    _ => None,
                })
                .collect();
            levels.push(listed.into_iter());
        }
        Ok(Subtree::assemble(&mut levels, 0))
    }
}

/// A group's children as [`ZarrGroup::listing`] gives them, and why the group is not the
/// AnnData dataframe it says it is.
pub(crate) type Listing = (Vec<(String, Result<Node>)>, Option<Error>);

/// A group's children ([`ZarrGroup::children`]), each child group with its own (see
/// [`ZarrGroup::subtree`]).
#[derive(Debug)]
pub(crate) struct Subtree {
    /// Name, the node or why it cannot be opened, and below a group its subtree.
    pub(crate) children: Vec<(String, Result<Node>, Option<Subtree>)>,
    /// Why the group is not the AnnData dataframe it says it is (queries refuse it).
    pub(crate) invalid: Option<Error>,
}

impl Subtree {
    /// The next listing of level `depth` with, below each of its groups, the next listing of
    /// the level under it: the levels hold the groups' listings in the order a depth-first
    /// walk meets the groups (each level lists the groups of the one above, in its order).
    fn assemble(levels: &mut [std::vec::IntoIter<Listing>], depth: usize) -> Subtree {
        let (listing, invalid) = levels
            .get_mut(depth)
            .and_then(Iterator::next)
            .unwrap_or_default();
        let children = listing
            .into_iter()
            .map(|(name, node)| {
                let below = matches!(node, Ok(Node::Group(_)))
                    .then(|| Subtree::assemble(levels, depth + 1));
                (name, node, below)
            })
            .collect();
        Subtree { children, invalid }
    }

    /// [`ZarrGroup::walk`] below `prefix` into `out`: each path is built once (not again at
    /// every level above it, which is quadratic in the depth).
    fn walk_into(self, prefix: &str, out: &mut Vec<(String, Node)>) {
        for (name, node, below) in self.children {
            let Ok(node) = node else { continue };
            let path = format!("{prefix}{name}");
            out.push((path.clone(), node));
            if let Some(below) = below {
                below.walk_into(&format!("{path}/"), out);
            }
        }
    }
}

/// How many children of a group are opened at once.
pub(crate) const OPEN_CONCURRENCY: usize = 16;

/// The children an AnnData element declares in its attributes.
struct Declared {
    /// Distinct names, in anndata's order.
    names: Vec<String>,
    /// A dataframe's index column (attribute `_index`): then each name must exist.
    index: Option<String>,
}

impl Declared {
    /// The error for a dataframe whose attributes name `name`, which it does not hold.
    fn missing(&self, path: &str, name: &str) -> Error {
        let shown = crate::text::short(name, 120);
        if self.index.as_deref() == Some(name) {
            Error::metadata(
                path,
                "_index",
                format!("names the index column '{shown}', which the group does not hold"),
            )
        } else {
            Error::metadata(
                path,
                "column-order",
                format!("names the column '{shown}', which the group does not hold"),
            )
        }
    }
}

/// The children an AnnData element names in its attributes, in anndata's order, when it is one
/// whose children are fixed by its encoding: a dataframe (`_index`, then `column-order`), a
/// categorical or a nullable array. `None` for anything else (then the store is listed); an
/// error for a dataframe without those attributes (anndata cannot read it either).
fn declared_children(
    path: &str,
    attributes: &serde_json::Map<String, serde_json::Value>,
) -> Result<Option<Declared>> {
    let names = |list: &[&str]| {
        Ok(Some(Declared {
            names: list.iter().map(|s| s.to_string()).collect(),
            index: None,
        }))
    };
    let Some(encoding) = attributes.get("encoding-type").and_then(|e| e.as_str()) else {
        return Ok(None);
    };
    match encoding {
        "dataframe" => {
            let invalid = |attribute: &str, message: &str| {
                Err(Error::metadata(
                    path,
                    attribute,
                    format!("{message} (the group says it is an AnnData dataframe)"),
                ))
            };
            let index = match attributes.get("_index") {
                Some(serde_json::Value::String(index)) => index,
                Some(_) => return invalid("_index", "not the name of the index column"),
                None => return invalid("_index", "no such attribute, naming the index column"),
            };
            let columns = match attributes.get("column-order") {
                Some(serde_json::Value::Array(columns)) => columns,
                Some(_) => return invalid("column-order", "not a list of column names"),
                None => return invalid("column-order", "no such attribute, listing the columns"),
            };
            let mut seen = HashSet::with_capacity(columns.len() + 1);
            seen.insert(index.as_str());
            let mut out = vec![index.to_string()];
            for (i, column) in columns.iter().enumerate() {
                let Some(column) = column.as_str() else {
                    return invalid(
                        "column-order",
                        &format!("entry {i} is not a column name (a string)"),
                    );
                };
                if seen.insert(column) {
                    out.push(column.to_string());
                }
            }
            Ok(Some(Declared {
                names: out,
                index: Some(index.to_string()),
            }))
        }
        "categorical" => names(&["categories", "codes"]),
        "nullable-integer" | "nullable-boolean" | "nullable-string-array" => {
            names(&["mask", "values"])
        }
        _ => Ok(None),
    }
}
