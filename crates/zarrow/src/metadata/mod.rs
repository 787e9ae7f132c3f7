//! Zarr metadata: v3 `zarr.json`, v2 `.zarray`/`.zgroup`/`.zattrs`, consolidated metadata.
//!
//! Both versions parse into one model — [`ArrayMetadata`] (shape, regular chunk grid, data type,
//! fill value, [`CodecChain`], chunk key encoding, dimension names, attributes) and
//! [`GroupMetadata`] — so nothing past this module looks at a version number except for
//! display. v2 specifics become ordinary v3 concepts: the dtype's byte order becomes the `bytes`
//! codec's endian, `order: "F"` a transpose, `filters` + `compressor` the codec chain,
//! `dimension_separator` a v2 chunk key encoding, `_ARRAY_DIMENSIONS` dimension names.

use std::sync::Arc;

mod chunk_grid;

use serde_json::{Map, Value};

use crate::codec::{parse_v2_chain, parse_v3_chain, ArrayToBytes, CodecChain};
use crate::data_type;
pub use crate::data_type::{DataType, DataTypeError, Endian, FillValue, NpTimeUnit, StructField};
use crate::grid::ChunkGrid;
use crate::{Error, ReadLimits, Result};

/// A child path taken from metadata (a consolidated key, a name an AnnData attribute gives):
/// it must stay inside the store, so `..` and `.` parts, empty parts (a leading `/`: an
/// absolute path) and backslashes are refused, naming the key. (Symlinks in a local store are
/// followed, as zarr-python does: the user chose the location.)
pub fn check_key(group: &str, key: &str) -> Result<()> {
    let bad = key.contains('\\')
        || key
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(Error::metadata(
            group,
            "child key",
            format!("'{key}' is not a path inside the store (no '..', '.', absolute paths or backslashes)"),
        ));
    }
    Ok(())
}

/// How chunk grid coordinates become store keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkKeyEncoding {
    /// v3 `default`: `c/1/2` (separator `/` or `.`).
    Default {
        /// The separator.
        separator: char,
    },
    /// v2 style: `1.2` (or `1/2`); `0` for zero-dimensional arrays.
    V2 {
        /// The separator.
        separator: char,
    },
}

impl ChunkKeyEncoding {
    /// The key of chunk `coords`, relative to the array.
    pub fn key(&self, coords: &[u64]) -> String {
        match self {
            ChunkKeyEncoding::Default { separator } => {
                let mut key = String::from("c");
                for c in coords {
                    key.push(*separator);
                    key.push_str(&c.to_string());
                }
                key
            }
            ChunkKeyEncoding::V2 { separator } => {
                if coords.is_empty() {
                    return "0".into();
                }
                let parts: Vec<String> = coords.iter().map(u64::to_string).collect();
                parts.join(&separator.to_string())
            }
        }
    }
}

/// Metadata of one array, either version.
///
/// ```
/// use zarrow::{DataType, ZarrArray};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let x = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/X");
/// let array = ZarrArray::open(x).await?;
/// let meta = array.metadata();
/// assert_eq!((meta.zarr_format, meta.ndim()), (3, 2));
/// assert_eq!((&meta.shape[..], &meta.chunk_shape[..]), (&[2000, 200][..], &[250, 200][..]));
/// assert_eq!(meta.data_type, DataType::Float32);
/// assert_eq!(meta.num_elements(), 400_000);
/// assert!(meta.sharding().is_none());
/// assert_eq!(meta.attributes["encoding-type"], "array");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayMetadata {
    /// 2 or 3.
    pub zarr_format: u8,
    /// The array shape.
    pub shape: Vec<u64>,
    /// The (outer) chunk shape of the regular grid; for sharded arrays, the shard shape. For a
    /// rectilinear grid, the largest chunk along each dimension.
    pub chunk_shape: Vec<u64>,
    /// The (outer) chunk grid over the shape: which elements each chunk (or shard) holds.
    pub chunk_grid: ChunkGrid,
    /// The element type.
    pub data_type: DataType,
    /// The fill value.
    pub fill_value: FillValue,
    /// The codec chain.
    pub codecs: CodecChain,
    /// The chunk key encoding.
    pub chunk_key_encoding: ChunkKeyEncoding,
    /// Dimension names (v3 `dimension_names`, v2 `_ARRAY_DIMENSIONS`).
    pub dimension_names: Option<Vec<Option<String>>>,
    /// User attributes.
    pub attributes: Map<String, Value>,
}

/// Metadata of one group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupMetadata {
    /// 2 or 3.
    pub zarr_format: u8,
    /// User attributes.
    pub attributes: Map<String, Value>,
    /// Consolidated metadata of the descendants.
    pub consolidated: Option<Consolidated>,
}

/// Consolidated metadata as a group sees it: the entries of the document it was read from
/// (paths relative to that document's group, sorted), shared by every group below — a child
/// group gets the same entries behind a longer prefix, never a copy, so a deep hierarchy costs
/// its document once, not once per level.
#[derive(Debug, Clone, PartialEq)]
pub struct Consolidated {
    entries: Arc<Vec<(String, NodeMetadata)>>,
    /// The group's path below the document's group, with a trailing `/` (empty at the top).
    prefix: String,
}

impl Consolidated {
    /// The entries of a consolidated document, as its own group sees them.
    pub fn new(mut entries: Vec<(String, NodeMetadata)>) -> Self {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Consolidated {
            entries: Arc::new(entries),
            prefix: String::new(),
        }
    }

    /// The descendants: (path relative to the group, node), sorted by path. The entries below
    /// a prefix are one sorted run, found by binary search: a group's walk costs its own
    /// descendants, not the whole document.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &NodeMetadata)> {
        let entries = self.entries.as_slice();
        let start = entries.partition_point(|(p, _)| p.as_str() < self.prefix.as_str());
        entries[start..]
            .iter()
            .map_while(|(p, m)| p.strip_prefix(self.prefix.as_str()).map(|rest| (rest, m)))
            .filter(|(rest, _)| !rest.is_empty())
    }

    /// The immediate children that have an entry of their own, sorted by name. Each child's
    /// subtree is stepped over by binary search, so listing every group of a document of `n`
    /// entries costs O(n log n) in all, however the hierarchy is shaped.
    pub fn children(&self) -> Vec<(&str, &NodeMetadata)> {
        let entries = self.entries.as_slice();
        let prefix = self.prefix.as_str();
        let mut i = entries.partition_point(|(p, _)| p.as_str() < prefix);
        let mut out = Vec::new();
        while let Some((path, meta)) = entries.get(i) {
            let Some(rest) = path.strip_prefix(prefix) else {
                break;
            };
            let first = rest.split('/').next().unwrap_or(rest);
            if first.is_empty() {
                i += 1; // no child's entry (`check_key` refuses such keys)
                continue;
            }
            if first.len() == rest.len() {
                out.push((rest, meta));
                i += 1;
            }
            // Step over `first`'s descendants: `first/…` is one sorted run, which starts here
            // or (after siblings such as `first-b` that sort between) later, where the same
            // step skips it.
            let below = format!("{prefix}{first}/");
            let in_run = |(p, _): &(String, NodeMetadata)| p.starts_with(below.as_str());
            if entries.get(i).is_some_and(in_run) {
                i += entries[i..].partition_point(in_run);
            }
        }
        out
    }

    /// The entry at `relative` (below the group), by binary search.
    pub fn get(&self, relative: &str) -> Option<&NodeMetadata> {
        if relative.is_empty() {
            return None;
        }
        let key = format!("{}{relative}", self.prefix);
        let entries = self.entries.as_slice();
        let i = entries.partition_point(|(p, _)| p.as_str() < key.as_str());
        entries.get(i).filter(|(p, _)| *p == key).map(|(_, m)| m)
    }

    /// The same metadata as the child group `relative` sees it.
    pub fn below(&self, relative: &str) -> Self {
        Consolidated {
            entries: self.entries.clone(),
            prefix: format!("{}{relative}/", self.prefix),
        }
    }
}

/// Metadata of a node.
///
/// ```
/// use zarrow::{DataType, Node, NodeMetadata};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr");
/// let Node::Group(root) = Node::open(sample).await? else {
///     panic!("the sample is a group");
/// };
/// // A consolidated group knows its descendants' metadata without reading their documents.
/// let consolidated = root.metadata().consolidated.as_ref().expect("consolidated");
/// match consolidated.get("var/gene_symbol") {
///     Some(NodeMetadata::Array(meta)) => assert_eq!(meta.data_type, DataType::String),
///     other => panic!("expected an array, found {other:?}"),
/// }
/// assert!(matches!(consolidated.get("obs"), Some(NodeMetadata::Group(_))));
/// assert!(consolidated.get("no/such/node").is_none());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum NodeMetadata {
    /// An array.
    Array(Box<ArrayMetadata>),
    /// A group.
    Group(GroupMetadata),
    /// An entry of consolidated metadata that does not parse (an unsupported data type, bad
    /// metadata): kept, not failing the whole document, so that the hierarchy around it stays
    /// readable; opening it gives its error.
    Unreadable(Box<UnreadableEntry>),
}

/// A consolidated entry that did not parse, as written (see [`NodeMetadata::Unreadable`]).
#[derive(Debug, Clone, PartialEq)]
pub struct UnreadableEntry {
    /// 2 (`.zarray` and `.zattrs`) or 3 (`zarr.json`).
    zarr_format: u8,
    doc: Map<String, Value>,
    attributes: Map<String, Value>,
    /// The limits it was parsed under.
    limits: ReadLimits,
}

impl UnreadableEntry {
    /// Why the entry cannot be read: the error of parsing it again, under the node path `path`.
    pub fn error(&self, path: &str) -> Error {
        let parsed = if self.zarr_format == 3 {
            parse_v3_value(path, &self.doc, &self.limits).map(|_| ())
        } else {
            parse_v2_array_value(path, &self.doc, self.attributes.clone(), &self.limits).map(|_| ())
        };
        parsed.err().unwrap_or_else(|| {
            Error::metadata(path, "consolidated metadata", "entry could not be read")
        })
    }
}

impl ArrayMetadata {
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The sharding codec, if the array is sharded.
    pub fn sharding(&self) -> Option<&crate::codec::Sharding> {
        match &self.codecs.array_to_bytes {
            ArrayToBytes::Sharding(s) => Some(s),
            _ => None,
        }
    }

    /// The sharding codecs, outermost first: one for a sharded array, more when shards hold
    /// shards (nested `sharding_indexed`, as tensorstore writes), none otherwise.
    pub fn shard_levels(&self) -> Vec<&crate::codec::Sharding> {
        let mut levels = Vec::new();
        let mut chain = &self.codecs;
        while let ArrayToBytes::Sharding(s) = &chain.array_to_bytes {
            levels.push(&**s);
            chain = &s.codecs;
        }
        levels
    }

    /// The shape of the unit zarrow reads and decodes: the innermost chunk for sharded arrays,
    /// else the chunk.
    pub fn read_chunk_shape(&self) -> &[u64] {
        match self.shard_levels().last() {
            Some(s) => &s.chunk_shape,
            None => &self.chunk_shape,
        }
    }

    /// The chain that decodes one read unit (the innermost chain for sharded arrays).
    pub fn read_chain(&self) -> &CodecChain {
        match self.shard_levels().last() {
            Some(s) => &s.codecs,
            None => &self.codecs,
        }
    }

    /// The grid of read units: the chunk grid, or for sharded arrays the regular grid of
    /// innermost chunks (every shard's edges are multiples of theirs: checked when parsed).
    pub fn read_grid(&self) -> ChunkGrid {
        match self.shard_levels().last() {
            // Cannot fail on parsed metadata: the inner shape has the array's dimensions and
            // positive extents, and no more chunks than the shape has elements.
            Some(s) => ChunkGrid::new(self.shape.clone(), s.chunk_shape.clone())
                .unwrap_or_else(|_| self.chunk_grid.clone()),
            None => self.chunk_grid.clone(),
        }
    }

    /// The number of read units along each dimension.
    pub fn read_grid_shape(&self) -> Vec<u64> {
        self.read_grid().grid_shape()
    }

    /// Total number of elements (checked to fit when the metadata was parsed).
    pub fn num_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The dimension names, with `None` for unnamed dimensions.
    pub fn dimension_name(&self, dim: usize) -> Option<&str> {
        self.dimension_names
            .as_ref()
            .and_then(|n| n.get(dim))
            .and_then(|n| n.as_deref())
    }
}

fn as_u64_vec(v: Option<&Value>) -> Option<Vec<u64>> {
    v?.as_array()?.iter().map(Value::as_u64).collect()
}

fn parse_json(path: &str, key: &str, bytes: &[u8]) -> Result<Map<String, Value>> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| Error::metadata(path, key, format!("not valid JSON: {e}")))?;
    match value {
        Value::Object(o) => Ok(o),
        _ => Err(Error::metadata(path, key, "not a JSON object")),
    }
}

/// Keys of v3 array metadata that zarrow understands.
const V3_ARRAY_KEYS: &[&str] = &[
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "storage_transformers",
    "dimension_names",
];

/// Fail on an unknown extension point that must be understood.
fn check_must_understand(path: &str, key: &str, name: &str, value: &Value) -> Result<()> {
    let optional = value
        .get("must_understand")
        .and_then(Value::as_bool)
        .is_some_and(|m| !m);
    if optional {
        Ok(())
    } else {
        Err(Error::MustUnderstand {
            array: path.to_string(),
            name: format!("{name} (in {key})"),
        })
    }
}

/// Parse a v3 `zarr.json` document; a data type whose element is over the item limit of
/// `limits` is an error.
pub fn parse_v3(path: &str, bytes: &[u8], limits: &ReadLimits) -> Result<NodeMetadata> {
    let doc = parse_json(path, "zarr.json", bytes)?;
    parse_v3_value(path, &doc, limits)
}

fn parse_v3_value(
    path: &str,
    doc: &Map<String, Value>,
    limits: &ReadLimits,
) -> Result<NodeMetadata> {
    const KEY: &str = "zarr.json";
    match doc.get("zarr_format").and_then(Value::as_u64) {
        Some(3) => {}
        other => {
            return Err(Error::metadata(
                path,
                KEY,
                format!("zarr_format must be 3, found {other:?}"),
            ))
        }
    }
    let attributes = match doc.get("attributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => return Err(Error::metadata(path, KEY, "attributes is not an object")),
    };
    match doc.get("node_type").and_then(Value::as_str) {
        Some("group") => {
            let consolidated = match doc.get("consolidated_metadata") {
                Some(Value::Object(cm)) => {
                    let entries =
                        cm.get("metadata")
                            .and_then(Value::as_object)
                            .ok_or_else(|| {
                                Error::metadata(path, KEY, "consolidated_metadata without metadata")
                            })?;
                    let mut nodes = Vec::with_capacity(entries.len());
                    for (child, meta) in entries {
                        check_key(path, child)?;
                        let child_path = join_path(path, child);
                        let meta = meta.as_object().ok_or_else(|| {
                            Error::metadata(&child_path, KEY, "consolidated entry is not an object")
                        })?;
                        let node = match parse_v3_value(&child_path, meta, limits) {
                            Ok(node) => node,
                            Err(_) => NodeMetadata::Unreadable(Box::new(UnreadableEntry {
                                zarr_format: 3,
                                doc: meta.clone(),
                                attributes: Map::new(),
                                limits: *limits,
                            })),
                        };
                        nodes.push((child.clone(), node));
                    }
                    Some(Consolidated::new(nodes))
                }
                _ => None,
            };
            Ok(NodeMetadata::Group(GroupMetadata {
                zarr_format: 3,
                attributes,
                consolidated,
            }))
        }
        Some("array") => Ok(NodeMetadata::Array(Box::new(parse_v3_array(
            path, doc, attributes, limits,
        )?))),
        other => Err(Error::metadata(
            path,
            KEY,
            format!("bad node_type {other:?}"),
        )),
    }
}

fn parse_v3_array(
    path: &str,
    doc: &Map<String, Value>,
    attributes: Map<String, Value>,
    limits: &ReadLimits,
) -> Result<ArrayMetadata> {
    const KEY: &str = "zarr.json";
    for (k, v) in doc {
        if !V3_ARRAY_KEYS.contains(&k.as_str()) {
            check_must_understand(path, KEY, k, v)?;
        }
    }
    if let Some(st) = doc.get("storage_transformers").and_then(Value::as_array) {
        if let Some(t) = st.first() {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
            return Err(Error::MustUnderstand {
                array: path.to_string(),
                name: format!("storage transformer {name}"),
            });
        }
    }
    let shape = as_u64_vec(doc.get("shape"))
        .ok_or_else(|| Error::metadata(path, KEY, "shape missing or not a list of integers"))?;
    let grid = doc
        .get("chunk_grid")
        .ok_or_else(|| Error::metadata(path, KEY, "chunk_grid missing"))?;
    let chunk_grid = chunk_grid::parse_v3_grid(path, KEY, &shape, grid)?;
    let data_type_json = doc
        .get("data_type")
        .ok_or_else(|| Error::metadata(path, KEY, "data_type missing"))?;
    let data_type = data_type::parse_v3_data_type(data_type_json)
        .and_then(|dt| data_type::check_item_limit(&dt, limits).map(|()| dt))
        .map_err(|e| match e {
            DataTypeError::Unsupported => Error::UnsupportedDataType {
                array: path.to_string(),
                data_type: data_type_json.to_string(),
            },
            other => Error::metadata_caused_by(path, KEY, other.to_string(), other),
        })?;
    let codecs = doc
        .get("codecs")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::metadata(path, KEY, "codecs missing"))?;
    let codecs =
        parse_v3_chain(codecs, &data_type, shape.len()).map_err(|e| e.into_error(path, KEY))?;
    let fill_json = doc.get("fill_value").cloned().unwrap_or(Value::Null);
    let fill_value = data_type::parse_fill_value(&data_type, &fill_json, false)
        .map_err(|e| Error::metadata_caused_by(path, KEY, format!("fill_value: {e}"), e))?;
    let cke = doc.get("chunk_key_encoding");
    let sep = |default: char| -> Result<char> {
        match cke
            .and_then(|c| c.get("configuration"))
            .and_then(|c| c.get("separator"))
            .and_then(Value::as_str)
        {
            None => Ok(default),
            Some("/") => Ok('/'),
            Some(".") => Ok('.'),
            Some(other) => Err(Error::metadata(
                path,
                KEY,
                format!("bad separator '{other}'"),
            )),
        }
    };
    let chunk_key_encoding = match cke.and_then(|c| c.get("name")).and_then(Value::as_str) {
        None | Some("default") => ChunkKeyEncoding::Default {
            separator: sep('/')?,
        },
        Some("v2") => ChunkKeyEncoding::V2 {
            separator: sep('.')?,
        },
        Some(other) => {
            return Err(Error::UnsupportedCodec {
                array: path.to_string(),
                codec: format!("chunk key encoding '{other}'"),
                reason: "only default and v2 are supported".into(),
            })
        }
    };
    let dimension_names = match doc.get("dimension_names") {
        None | Some(Value::Null) => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect(),
        ),
        Some(_) => return Err(Error::metadata(path, KEY, "dimension_names is not a list")),
    };
    let meta = ArrayMetadata {
        zarr_format: 3,
        shape,
        chunk_shape: chunk_grid.chunk_shape().to_vec(),
        chunk_grid,
        data_type,
        fill_value,
        codecs,
        chunk_key_encoding,
        dimension_names,
        attributes,
    };
    validate_array(path, KEY, meta)
}

/// Checks every version shares: dimensions agree, chunks are non-empty, shards divide evenly.
fn validate_array(path: &str, key: &str, meta: ArrayMetadata) -> Result<ArrayMetadata> {
    let ndim = meta.shape.len();
    if let Some(names) = &meta.dimension_names {
        if names.len() != ndim {
            return Err(Error::metadata(
                path,
                key,
                "dimension_names length differs from shape",
            ));
        }
    }
    // Every shard's edges (each run of a rectilinear grid) divide by the inner chunk's.
    let shard_edges: Vec<Vec<u64>> = (0..ndim)
        .map(|d| meta.chunk_grid.runs(d).iter().map(|r| r.0).collect())
        .collect();
    let mut outer = shard_edges;
    for s in meta.shard_levels() {
        let divides = outer
            .iter()
            .zip(&s.chunk_shape)
            .all(|(edges, i)| edges.iter().all(|o| o % i == 0));
        if !divides {
            return Err(Error::metadata(
                path,
                key,
                format!(
                    "inner chunk shape {:?} does not divide the shard shape {:?}",
                    s.chunk_shape, meta.chunk_shape
                ),
            ));
        }
        outer = s.chunk_shape.iter().map(|&c| vec![c]).collect();
    }
    if meta.sharding().is_some()
        && (!meta.codecs.array_to_array.is_empty() || !meta.codecs.bytes_to_bytes.is_empty())
    {
        return Err(Error::UnsupportedCodec {
            array: path.to_string(),
            codec: "sharding_indexed".into(),
            reason: "codecs outside sharding_indexed (shards are read by ranges)".into(),
        });
    }
    let elements: Option<u64> = meta
        .read_chunk_shape()
        .iter()
        .try_fold(1u64, |acc, &c| acc.checked_mul(c));
    if elements.is_none_or(|n| n > u32::MAX as u64) {
        return Err(Error::metadata(
            path,
            key,
            "chunk has more than 2^32 elements",
        ));
    }
    Ok(meta)
}

/// Parse v2 `.zarray` (plus the `.zattrs` document, if any); a dtype whose element is over
/// the item limit of `limits` is an error.
pub fn parse_v2_array(
    path: &str,
    zarray: &[u8],
    zattrs: Option<&[u8]>,
    limits: &ReadLimits,
) -> Result<ArrayMetadata> {
    let doc = parse_json(path, ".zarray", zarray)?;
    let attributes = match zattrs {
        Some(b) => parse_json(path, ".zattrs", b)?,
        None => Map::new(),
    };
    parse_v2_array_value(path, &doc, attributes, limits)
}

fn parse_v2_array_value(
    path: &str,
    doc: &Map<String, Value>,
    attributes: Map<String, Value>,
    limits: &ReadLimits,
) -> Result<ArrayMetadata> {
    const KEY: &str = ".zarray";
    match doc.get("zarr_format").and_then(Value::as_u64) {
        Some(2) => {}
        other => {
            return Err(Error::metadata(
                path,
                KEY,
                format!("zarr_format must be 2, found {other:?}"),
            ))
        }
    }
    let shape =
        as_u64_vec(doc.get("shape")).ok_or_else(|| Error::metadata(path, KEY, "shape missing"))?;
    let chunk_shape = as_u64_vec(doc.get("chunks"))
        .ok_or_else(|| Error::metadata(path, KEY, "chunks missing"))?;
    let dtype_json = doc
        .get("dtype")
        .ok_or_else(|| Error::metadata(path, KEY, "dtype missing"))?;
    let parsed = match dtype_json {
        Value::String(dtype) => data_type::parse_v2_dtype(dtype),
        // A structured dtype: fields carry their own byte order.
        Value::Array(_) => {
            data_type::parse_v2_structured(dtype_json).map(|dt| (dt, Endian::Little))
        }
        _ => Err(DataTypeError::Unsupported),
    };
    let parsed =
        parsed.and_then(|(dt, e)| data_type::check_item_limit(&dt, limits).map(|()| (dt, e)));
    let (mut data_type, endian) = parsed.map_err(|e| match e {
        DataTypeError::Unsupported => Error::UnsupportedDataType {
            array: path.to_string(),
            data_type: match dtype_json {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
        },
        other => Error::metadata_caused_by(path, KEY, other.to_string(), other),
    })?;
    let order_f = match doc.get("order").and_then(Value::as_str) {
        None | Some("C") => false,
        Some("F") => true,
        Some(other) => return Err(Error::metadata(path, KEY, format!("bad order '{other}'"))),
    };
    let codecs = parse_v2_chain(
        &data_type,
        endian,
        order_f,
        shape.len(),
        doc.get("filters"),
        doc.get("compressor"),
    )
    .map_err(|e| e.into_error(path, KEY))?;
    if codecs.array_to_bytes == ArrayToBytes::VlenBytes {
        data_type = DataType::Bytes;
    }
    let fill_json = doc.get("fill_value").cloned().unwrap_or(Value::Null);
    let fill_value = data_type::parse_fill_value(&data_type, &fill_json, true)
        .map_err(|e| Error::metadata_caused_by(path, KEY, format!("fill_value: {e}"), e))?;
    let separator = match doc.get("dimension_separator").and_then(Value::as_str) {
        None | Some(".") => '.',
        Some("/") => '/',
        Some(other) => {
            return Err(Error::metadata(
                path,
                KEY,
                format!("bad dimension_separator '{other}'"),
            ))
        }
    };
    let dimension_names = attributes
        .get("_ARRAY_DIMENSIONS")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect::<Vec<_>>()
        });
    let dimension_names = dimension_names.filter(|n| n.len() == shape.len());
    let chunk_grid = chunk_grid::regular_grid(path, KEY, &shape, chunk_shape.clone())?;
    let meta = ArrayMetadata {
        zarr_format: 2,
        shape,
        chunk_shape,
        chunk_grid,
        data_type,
        fill_value,
        codecs,
        chunk_key_encoding: ChunkKeyEncoding::V2 { separator },
        dimension_names,
        attributes,
    };
    validate_array(path, KEY, meta)
}

/// Parse v2 `.zgroup` (plus `.zattrs`).
pub fn parse_v2_group(path: &str, zgroup: &[u8], zattrs: Option<&[u8]>) -> Result<GroupMetadata> {
    let doc = parse_json(path, ".zgroup", zgroup)?;
    match doc.get("zarr_format").and_then(Value::as_u64) {
        Some(2) => {}
        other => {
            return Err(Error::metadata(
                path,
                ".zgroup",
                format!("zarr_format must be 2, found {other:?}"),
            ))
        }
    }
    let attributes = match zattrs {
        Some(b) => parse_json(path, ".zattrs", b)?,
        None => Map::new(),
    };
    Ok(GroupMetadata {
        zarr_format: 2,
        attributes,
        consolidated: None,
    })
}

/// Parse a v2 `.zmetadata` document into (relative path, node) entries; an array whose
/// metadata does not parse (under `limits`) is kept as [`NodeMetadata::Unreadable`].
pub fn parse_v2_consolidated(
    path: &str,
    bytes: &[u8],
    limits: &ReadLimits,
) -> Result<Vec<(String, NodeMetadata)>> {
    const KEY: &str = ".zmetadata";
    let doc = parse_json(path, KEY, bytes)?;
    let meta = doc
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or_else(|| Error::metadata(path, KEY, "no metadata object"))?;
    let mut nodes = Vec::new();
    for (key, value) in meta {
        let (node, kind) = match key.rsplit_once('/') {
            Some((node, kind)) => (node, kind),
            None => ("", key.as_str()),
        };
        if node.is_empty() && !key.starts_with('/') {
            continue; // the group itself
        }
        check_key(path, node)?;
        let attrs = || -> Result<Map<String, Value>> {
            match meta.get(&format!("{node}/.zattrs")) {
                Some(Value::Object(o)) => Ok(o.clone()),
                Some(_) => Err(Error::metadata(
                    path,
                    KEY,
                    format!("{node}/.zattrs is not an object"),
                )),
                None => Ok(Map::new()),
            }
        };
        let obj = || {
            value
                .as_object()
                .ok_or_else(|| Error::metadata(path, KEY, format!("{key} is not an object")))
        };
        match kind {
            ".zarray" => {
                let child = join_path(path, node);
                let (doc, attributes) = (obj()?, attrs()?);
                let entry = match parse_v2_array_value(&child, doc, attributes.clone(), limits) {
                    Ok(m) => NodeMetadata::Array(Box::new(m)),
                    Err(_) => NodeMetadata::Unreadable(Box::new(UnreadableEntry {
                        zarr_format: 2,
                        doc: doc.clone(),
                        attributes,
                        limits: *limits,
                    })),
                };
                nodes.push((node.to_string(), entry));
            }
            ".zgroup" => nodes.push((
                node.to_string(),
                NodeMetadata::Group(GroupMetadata {
                    zarr_format: 2,
                    attributes: attrs()?,
                    consolidated: None,
                }),
            )),
            _ => {}
        }
    }
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(nodes)
}

/// Join a node path and a relative child path with `/`.
pub fn join_path(parent: &str, child: &str) -> String {
    let parent = parent.trim_end_matches('/');
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}/{child}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consolidated_entries_are_shared_by_every_level() {
        // A chain of groups a/a/a/… 64 deep with an array at the bottom: every level sees its
        // descendants through the same entries (no level copies them).
        let group = || {
            NodeMetadata::Group(GroupMetadata {
                zarr_format: 3,
                ..Default::default()
            })
        };
        let mut entries = Vec::new();
        let mut path = String::new();
        for _ in 0..64 {
            path = if path.is_empty() {
                "a".into()
            } else {
                format!("{path}/a")
            };
            entries.push((path.clone(), group()));
        }
        let top = Consolidated::new(entries);
        let (first_path, first_node) = top.iter().last().unwrap();
        assert_eq!(first_path.matches('/').count(), 63);
        let mut level = top.clone();
        for depth in 1..64 {
            level = level.below("a");
            let entries: Vec<_> = level.iter().collect();
            assert_eq!(entries.len(), 64 - depth);
            assert_eq!(entries[0].0, "a");
            let (_, deepest) = entries.last().unwrap();
            assert!(
                std::ptr::eq(*deepest, first_node),
                "depth {depth} copied the entries"
            );
        }
        assert_eq!(level.below("a").iter().count(), 0);
    }

    #[test]
    fn consolidated_children_step_over_subtrees() {
        // `a-b` and `a.c` sort between `a` and `a/x`; `b/y` has no entry of its own.
        let group = || {
            NodeMetadata::Group(GroupMetadata {
                zarr_format: 3,
                ..Default::default()
            })
        };
        let paths = ["a", "a-b", "a.c", "a/x", "a/x/y", "a/z", "b/y", "c", "c/d"];
        let top = Consolidated::new(paths.iter().map(|p| (p.to_string(), group())).collect());
        let names = |c: &Consolidated| {
            c.children()
                .iter()
                .map(|(p, _)| p.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&top), ["a", "a-b", "a.c", "c"]);
        assert_eq!(names(&top.below("a")), ["x", "z"]);
        assert_eq!(names(&top.below("a").below("x")), ["y"]);
        assert_eq!(names(&top.below("b")), ["y"]);
        assert!(names(&top.below("a-b")).is_empty());
        assert!(top.get("a/x/y").is_some() && top.below("a").get("x/y").is_some());
        assert!(top.get("a/x/q").is_none() && top.get("").is_none());
    }

    #[test]
    fn chunk_keys() {
        assert_eq!(
            ChunkKeyEncoding::Default { separator: '/' }.key(&[1, 2]),
            "c/1/2"
        );
        assert_eq!(ChunkKeyEncoding::Default { separator: '.' }.key(&[]), "c");
        assert_eq!(ChunkKeyEncoding::V2 { separator: '.' }.key(&[1, 2]), "1.2");
        assert_eq!(ChunkKeyEncoding::V2 { separator: '/' }.key(&[]), "0");
    }

    #[test]
    fn v3_array() {
        let doc = br#"{"zarr_format":3,"node_type":"array","shape":[10],"data_type":"string",
            "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},
            "chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
            "fill_value":"","codecs":[{"name":"vlen-utf8","configuration":{}}],
            "attributes":{},"dimension_names":["obs"]}"#;
        let NodeMetadata::Array(a) = parse_v3("a", doc, &ReadLimits::default()).unwrap() else {
            panic!("not an array")
        };
        assert_eq!(a.read_grid_shape(), vec![3]);
        assert_eq!(a.dimension_name(0), Some("obs"));
    }

    #[test]
    fn v3_must_understand_extension() {
        let doc = br#"{"zarr_format":3,"node_type":"array","shape":[10],"data_type":"int8",
            "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},
            "fill_value":0,"codecs":[{"name":"bytes"}],"frobnicate":{"must_understand":true}}"#;
        assert!(matches!(
            parse_v3("a", doc, &ReadLimits::default()),
            Err(Error::MustUnderstand { .. })
        ));
        let doc = br#"{"zarr_format":3,"node_type":"array","shape":[10],"data_type":"int8",
            "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},
            "fill_value":0,"codecs":[{"name":"bytes"}],"frobnicate":{"must_understand":false}}"#;
        assert!(parse_v3("a", doc, &ReadLimits::default()).is_ok());
    }

    #[test]
    fn element_counts_that_overflow_are_errors() {
        // 2^32 × 2^32 elements: the product wraps to 0 without the check.
        let doc = br#"{"zarr_format":3,"node_type":"array","shape":[4294967296,4294967296],
            "data_type":"int8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1,1]}},
            "fill_value":0,"codecs":[{"name":"bytes"}]}"#;
        let e = parse_v3("big", doc, &ReadLimits::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("big") && e.contains("more than 2^64 elements"),
            "{e}"
        );
        let doc = br#"{"zarr_format":2,"shape":[4294967296,4294967296],"chunks":[1,1],
            "dtype":"|i1","order":"C","fill_value":0,"filters":null,"compressor":null}"#;
        let e = parse_v2_array("big", doc, None, &ReadLimits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 2^64 elements"), "{e}");
    }

    #[test]
    fn the_item_limit_is_the_read_options_one() {
        // A 32 MiB element: over the default item limit, read under a raised one.
        let v3 = br#"{"zarr_format":3,"node_type":"array","shape":[1],
            "data_type":{"name":"raw_bytes","configuration":{"length_bytes":33554432}},
            "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1]}},
            "fill_value":0,"codecs":[{"name":"bytes"}]}"#;
        let v2 = br#"{"zarr_format":2,"shape":[1],"chunks":[1],"dtype":"|S33554432",
            "order":"C","fill_value":null,"filters":null,"compressor":null}"#;
        let raised = ReadLimits {
            max_item_bytes: 64 << 20,
            ..Default::default()
        };
        let e = parse_v3("big", v3, &ReadLimits::default()).unwrap_err();
        assert!(
            matches!(&e, Error::Metadata { path, message, .. }
            if path == "big" && message.contains("max_item_bytes")),
            "{e}"
        );
        assert!(parse_v3("big", v3, &raised).is_ok());
        let e = parse_v2_array("big", v2, None, &ReadLimits::default()).unwrap_err();
        assert!(e.to_string().contains("ZARROW_MAX_ITEM_BYTES"), "{e}");
        assert!(parse_v2_array("big", v2, None, &raised).is_ok());
    }

    #[test]
    fn v2_object_fill_values() {
        for (fill, expected) in [
            ("0", &b"0"[..]),
            ("\"0\"", b"0"),
            ("\"\"", b""),
            ("null", b""),
        ] {
            let doc = format!(
                r#"{{"zarr_format":2,"shape":[3],"chunks":[2],"dtype":"|O","order":"C",
                "fill_value":{fill},"filters":[{{"id":"vlen-utf8"}}],"compressor":null}}"#
            );
            let m = parse_v2_array("a", doc.as_bytes(), None, &ReadLimits::default()).unwrap();
            assert_eq!(&*m.fill_value.bytes, expected, "fill {fill}");
            assert_eq!(
                m.chunk_key_encoding,
                ChunkKeyEncoding::V2 { separator: '.' }
            );
        }
    }

    #[test]
    fn v2_vlen_bytes_is_binary() {
        let doc = br#"{"zarr_format":2,"shape":[3],"chunks":[2],"dtype":"|O","order":"C",
            "fill_value":"AAE=","filters":[{"id":"vlen-bytes"}],"compressor":null}"#;
        let m = parse_v2_array("a", doc, None, &ReadLimits::default()).unwrap();
        assert_eq!(m.data_type, DataType::Bytes);
        assert_eq!(&*m.fill_value.bytes, &[0, 1]);
    }

    #[test]
    fn bad_json_is_a_metadata_error() {
        let err = parse_v3("x/y", b"{not json", &ReadLimits::default()).unwrap_err();
        assert!(err.to_string().contains("x/y"), "{err}");
        assert!(matches!(err, Error::Metadata { .. }));
    }
}
