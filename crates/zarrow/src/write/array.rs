//! One Arrow array (its elements in C order) plus a shape → a zarr v3 array on a regular chunk
//! grid ([`write_array`]), through the table writer's chunk encoder and its publishing: each
//! chunk region's elements are gathered (64-bit positions), encoded by [`ChunkEncoder`] and
//! written where [`Publication`] says (staged and renamed on local file systems; on object
//! stores the chunks first, then `zarr.json` create-only), under the writer lock. NULLs are
//! written as the fill value (NaT for datetimes); edge chunks are padded with it; chunks
//! holding only the fill value are not written unless asked (as zarr-python's
//! `write_empty_chunks=False`).

use arrow_array::{Array, ArrayRef, UInt64Array};
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::chunk::{
    array_to_bytes_json, self_check_limits, v3_array_json, zarr_type, ChunkEncoder, V3Array,
    VlenEncoding,
};
use super::commit::CommitOptions;
use super::lock::LockPolicy;
use super::options::MAX_UNIT_ELEMENTS;
use super::publish::{put_doc, Publication};
use super::steps::Steps;
use crate::codec::compression::BytesToBytes;
use crate::grid::c_order;
use crate::metadata::ChunkKeyEncoding;
use crate::store::ZarrStore;
use crate::{Error, Result};

/// How to write an array.
///
/// ```
/// use arrow_array::{Array, StringArray};
/// use zarrow::{
///     write_array, BytesToBytes, VlenEncoding, ZarrArray, ZarrReadOptions, ZarrStore,
///     ZarrWriteOptions,
/// };
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let store = ZarrStore::open("memory:///labels.zarr")?;
/// let values = StringArray::from(vec!["a", "bb", "", "dddd", "e"]);
/// let options = ZarrWriteOptions {
///     chunk_shape: Some(vec![2]),
///     string_encoding: VlenEncoding::ArrowVlen { large: false },
///     compression: Some(BytesToBytes::Zstd { level: 3, checksum: false }),
///     dimension_names: Some(vec!["cell".into()]),
///     ..Default::default()
/// };
/// write_array(&store, "label", &values, &[5], &options).await?;
///
/// let array = ZarrArray::open("memory:///labels.zarr/label").await?;
/// assert_eq!(array.chunk_grid_shape(), [3]);
/// assert_eq!(array.metadata().dimension_name(0), Some("cell"));
/// let read = array.read_region(&[0], &[5], &ZarrReadOptions::default()).await?;
/// assert_eq!(read.as_ref(), &values as &dyn Array);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ZarrWriteOptions {
    /// Chunk shape; default: the whole array in one chunk (at least one element per dimension).
    /// A chunk is encoded in memory whole: one of more than 2^31 elements, or larger than
    /// `memory_budget`, is refused before anything is written.
    pub chunk_shape: Option<Vec<u64>>,
    /// The chunk encoding of strings and bytes (the table writer's `string_encoding`).
    pub string_encoding: VlenEncoding,
    /// Compression of every chunk (as the table writer's `compression`; default: none).
    pub compression: Option<BytesToBytes>,
    /// Fill value as zarr v3 JSON (default: `""` for strings and bytes, 0, false, NaT).
    pub fill_value: Option<Value>,
    /// Dimension names.
    pub dimension_names: Option<Vec<String>>,
    /// User attributes.
    pub attributes: Map<String, Value>,
    /// Write chunks that hold only the fill value (default: skip them).
    pub write_empty_chunks: bool,
    /// Replace a zarr array or group at the location (default: a location that holds
    /// anything is an error; anything but a zarr store is refused even with it).
    pub overwrite: bool,
    /// The memory one chunk may take, in bytes (`None`: only the 2^31 elements bound it).
    pub memory_budget: Option<u64>,
    /// When another writer's stale lock may be broken (see docs/writing.md).
    pub lock: LockPolicy,
}

/// What the chunks of an array are: its shape, the chunk shape and the elements of one chunk,
/// checked (64-bit counts; a chunk fits [`MAX_UNIT_ELEMENTS`]).
#[derive(Debug)]
struct Grid {
    shape: Vec<u64>,
    chunk_shape: Vec<u64>,
    chunk_len: usize,
}

impl Grid {
    /// The grid of `shape` for `values` of `len` elements, or the error (before anything is
    /// written) naming what does not fit.
    fn new(
        path: &str,
        shape: &[u64],
        len: usize,
        opts: &ZarrWriteOptions,
        element_bytes: u64,
    ) -> Result<Self> {
        let werr = |message: String| Error::Write {
            path: path.to_string(),
            message,
        };
        let elements = checked_product(shape)
            .ok_or_else(|| werr(format!("shape {shape:?} has more than 2^64 elements")))?;
        if elements != len as u64 {
            return Err(werr(format!("{len} values do not fill shape {shape:?}")));
        }
        let chunk_shape = opts
            .chunk_shape
            .clone()
            .unwrap_or_else(|| shape.iter().map(|s| (*s).max(1)).collect());
        if chunk_shape.len() != shape.len() || chunk_shape.contains(&0) {
            return Err(werr(format!(
                "bad chunk shape {chunk_shape:?} for shape {shape:?}"
            )));
        }
        let chunk_len = checked_product(&chunk_shape)
            .filter(|n| *n <= MAX_UNIT_ELEMENTS)
            .ok_or_else(|| {
                werr(format!(
                    "chunk shape {chunk_shape:?}: a chunk is encoded in memory whole; at most \
                     {MAX_UNIT_ELEMENTS} (2^31) elements"
                ))
            })?;
        let bytes = chunk_len.saturating_mul(element_bytes);
        if let Some(budget) = opts.memory_budget.filter(|b| bytes > *b) {
            return Err(werr(format!(
                "chunk shape {chunk_shape:?}: a chunk takes about {bytes} bytes in memory, more \
                 than the memory limit of {budget} bytes: use smaller chunks"
            )));
        }
        let chunk_len = usize::try_from(chunk_len)
            .map_err(|_| werr(format!("chunk shape {chunk_shape:?} too large here")))?;
        Ok(Self {
            shape: shape.to_vec(),
            chunk_shape,
            chunk_len,
        })
    }

    /// The chunk grid's shape.
    fn grid_shape(&self) -> Vec<u64> {
        (self.shape.iter().zip(&self.chunk_shape))
            .map(|(s, c)| s.div_ceil(*c))
            .collect()
    }

    /// The flat (C order) position in the array of each element of chunk `coords`, in the
    /// chunk's C order, `None` outside the array (padding); trailing padding is left out (the
    /// encoder pads). 64-bit: an array may have more than 2^32 elements.
    fn sources(&self, coords: &[u64]) -> Vec<Option<u64>> {
        let rank = self.shape.len();
        let mut sources = Vec::with_capacity(self.chunk_len);
        let mut pos = vec![0u64; rank];
        for _ in 0..self.chunk_len {
            let mut flat = Some(0u64);
            for d in 0..rank {
                let g = coords[d] * self.chunk_shape[d] + pos[d];
                // Inside the array every partial sum is below its element count.
                flat = flat
                    .filter(|_| g < self.shape[d])
                    .map(|f| f * self.shape[d] + g);
            }
            sources.push(flat);
            for d in (0..rank).rev() {
                pos[d] += 1;
                if pos[d] < self.chunk_shape[d] {
                    break;
                }
                pos[d] = 0;
            }
        }
        while sources.last() == Some(&None) {
            sources.pop();
        }
        sources
    }
}

fn checked_product(dims: &[u64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |n, d| n.checked_mul(*d))
}

/// Write `values` (C order) as a zarr v3 array of `shape` at `path` below `store`.
///
/// The array is written as a table is ([`crate::write_table`]): every check (shape, chunk
/// shape, type, fill value; a chunk of more than 2^31 elements or over
/// [`ZarrWriteOptions::memory_budget`]) runs before anything is written; the writer lock is
/// held while it writes; a location that holds anything is refused unless
/// [`ZarrWriteOptions::overwrite`] (which replaces only a zarr store); the array becomes
/// visible at once, complete (see docs/writing.md, "Write safety").
///
/// ```
/// use arrow_array::{Array, Float64Array};
/// use zarrow::{write_array, ZarrArray, ZarrReadOptions, ZarrStore, ZarrWriteOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let location = dir.path().to_string_lossy().into_owned();
/// let store = ZarrStore::open(&location)?;
/// let values = Float64Array::from(vec![0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
/// let options = ZarrWriteOptions {
///     chunk_shape: Some(vec![1, 3]),
///     ..Default::default()
/// };
/// write_array(&store, "grid", &values, &[2, 3], &options).await?;
///
/// let array = ZarrArray::open(&format!("{location}/grid")).await?;
/// assert_eq!(array.shape(), &[2, 3]);
/// let row = array.read_region(&[1, 0], &[1, 3], &ZarrReadOptions::default()).await?;
/// assert_eq!(row.as_ref(), &Float64Array::from(vec![3.5, 4.5, 5.5]) as &dyn Array);
/// // What is there is not replaced without `overwrite`.
/// assert!(write_array(&store, "grid", &values, &[2, 3], &options).await.is_err());
/// # Ok(())
/// # }
/// ```
pub async fn write_array(
    store: &ZarrStore,
    path: &str,
    values: &dyn Array,
    shape: &[u64],
    opts: &ZarrWriteOptions,
) -> Result<()> {
    let werr = |message: String| Error::Write {
        path: path.to_string(),
        message,
    };
    if let Some(names) = &opts.dimension_names {
        if names.len() != shape.len() {
            return Err(werr("dimension_names length differs from shape".into()));
        }
    }
    let (data_type, default_fill, fixed) = zarr_type(values.data_type())?;
    let grid = Grid::new(
        path,
        shape,
        values.len(),
        opts,
        fixed.map_or(16, |n| n as u64),
    )?;
    let fill_json = opts.fill_value.clone().unwrap_or(default_fill);
    let parsed_type =
        crate::data_type::parse_v3_data_type(&data_type).map_err(|e| werr(e.to_string()))?;
    let fill = crate::data_type::parse_fill_value(&parsed_type, &fill_json, false)
        .map_err(|e| werr(e.to_string()))?;
    let mut codecs = vec![array_to_bytes_json(
        fixed.is_some(),
        opts.string_encoding,
        parsed_type == crate::DataType::String,
    )];
    codecs.extend(opts.compression.as_ref().map(BytesToBytes::to_v3_json));
    let meta = v3_array_json(V3Array {
        shape,
        data_type: &data_type,
        chunk_shape: &grid.chunk_shape,
        fill_value: fill_json,
        codecs,
        attributes: opts.attributes.clone(),
        dimension_names: opts.dimension_names.as_deref(),
    });
    let meta_bytes = serde_json::to_vec_pretty(&meta).map_err(|e| werr(e.to_string()))?;
    // The metadata must parse as what we meant: the reader's own parser checks it.
    crate::metadata::parse_v3(path, &meta_bytes, &self_check_limits())?;
    let encoder = ChunkEncoder {
        fixed,
        null_bytes: &fill.bytes,
        string_encoding: opts.string_encoding,
        compression: opts.compression.as_ref(),
    };
    let publication = Publication::prepare(
        &store.child(path),
        "write_array",
        opts.overwrite,
        opts.lock,
        Steps::default(),
        &CommitOptions::default(),
    )
    .await?;
    let target = publication.store();
    let key_encoding = ChunkKeyEncoding::Default { separator: '/' };
    for coords in c_order(&grid.grid_shape()) {
        let key = key_encoding.key(&coords);
        let indices = UInt64Array::from(grid.sources(&coords));
        let chunk: ArrayRef = arrow_select::take::take(values, &indices, None)?;
        if !opts.write_empty_chunks && encoder.only_null(chunk.as_ref())? {
            continue;
        }
        let stored = encoder.stored(chunk.as_ref(), grid.chunk_len, path, &key)?;
        target.put(&key, Bytes::from(stored)).await?;
    }
    let create = publication.root_create_only();
    put_doc(target, "", "zarr.json", meta_bytes, create).await?;
    publication.publish("write_array").await.map(|_| ())
}

/// Write a v3 group `zarr.json` at `path` below `store`.
///
/// ```
/// use serde_json::{json, Map};
/// use zarrow::{write_group, Node, ZarrStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let store = ZarrStore::open("memory:///experiment.zarr")?;
/// let mut attributes = Map::new();
/// attributes.insert("title".into(), json!("run 7"));
/// write_group(&store, "", &attributes).await?;
/// write_group(&store, "raw", &Map::new()).await?;
///
/// let Node::Group(root) = Node::open("memory:///experiment.zarr").await? else {
///     panic!("a group was written");
/// };
/// assert_eq!(root.metadata().attributes["title"], "run 7");
/// assert!(matches!(root.child("raw").await?, Node::Group(_)));
/// # Ok(())
/// # }
/// ```
pub async fn write_group(
    store: &ZarrStore,
    path: &str,
    attributes: &Map<String, Value>,
) -> Result<()> {
    let meta = json!({"zarr_format": 3, "node_type": "group", "attributes": attributes});
    let bytes = serde_json::to_vec_pretty(&meta).map_err(|e| Error::Write {
        path: path.to_string(),
        message: e.to_string(),
    })?;
    store.child(path).put("zarr.json", Bytes::from(bytes)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(chunk_shape: &[u64]) -> ZarrWriteOptions {
        ZarrWriteOptions {
            chunk_shape: Some(chunk_shape.to_vec()),
            ..Default::default()
        }
    }

    #[test]
    fn positions_past_2_pow_32_do_not_wrap() {
        // 3 × 2^32 elements, never allocated: the grid of an empty array is checked against
        // `len` only, so build it as the writer would for that many values.
        let shape = [3, 1u64 << 32];
        let grid = Grid::new("a", &shape, (3u64 << 32) as usize, &opts(&[1, 4]), 8).unwrap();
        assert_eq!(grid.chunk_len, 4);
        assert_eq!(grid.grid_shape(), [3, 1 << 30]);
        let last_row = grid.sources(&[2, 0]);
        let first = 2u64 << 32;
        assert_eq!(
            last_row,
            [
                Some(first),
                Some(first + 1),
                Some(first + 2),
                Some(first + 3)
            ]
        );
        // The last chunk of the last row ends at the last element.
        let end = grid.sources(&[2, (1 << 30) - 1]);
        assert_eq!(end.last(), Some(&Some((3u64 << 32) - 1)));
    }

    /// The names in `dir` (sorted).
    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn an_array_is_published_whole_and_replaced_only_with_overwrite() {
        use arrow_array::Int32Array;
        let dir = tempfile::tempdir().unwrap();
        let store = ZarrStore::open(dir.path().to_str().unwrap()).unwrap();
        let values = Int32Array::from_iter_values(0..6);
        write_array(&store, "a", &values, &[2, 3], &opts(&[1, 2]))
            .await
            .unwrap();
        // No lock or staging directory is left beside it.
        assert_eq!(names(dir.path()), ["a"]);
        assert_eq!(names(&dir.path().join("a/c/1")), ["0", "1"]);
        let again = write_array(&store, "a", &values, &[2, 3], &opts(&[1, 2])).await;
        let e = again.unwrap_err().to_string();
        assert!(e.contains("already exists"), "{e}");
        let replace = ZarrWriteOptions {
            overwrite: true,
            ..opts(&[2, 3])
        };
        write_array(&store, "a", &values, &[2, 3], &replace)
            .await
            .unwrap();
        assert_eq!(names(dir.path()), ["a"]);
        assert_eq!(names(&dir.path().join("a/c/0")), ["0"]);
        // Refused before anything is written: an element count past 2^64 (it would wrap to
        // the 0 elements given), a chunk of 2^32 elements.
        let empty = Int32Array::from(Vec::<i32>::new());
        for (shape, chunk) in [([1 << 32, 1 << 32], [1, 1]), ([0, 0], [1 << 16, 1 << 16])] {
            let e = write_array(&store, "b", &empty, &shape, &opts(&chunk)).await;
            assert!(matches!(e, Err(Error::Write { .. })), "{e:?}");
        }
        assert_eq!(names(dir.path()), ["a"]);
    }

    #[test]
    fn edge_chunks_pad_inside_and_leave_trailing_padding_to_the_encoder() {
        let grid = Grid::new("a", &[3, 3], 9, &opts(&[2, 2]), 8).unwrap();
        assert_eq!(grid.sources(&[0, 1]), [Some(2), None, Some(5)]);
        assert_eq!(grid.sources(&[1, 0]), [Some(6), Some(7)]);
        assert_eq!(grid.sources(&[1, 1]), [Some(8)]);
    }

    #[test]
    fn counts_that_overflow_or_exceed_a_chunk_are_refused() {
        let refused = |shape: &[u64], len: usize, o: &ZarrWriteOptions| {
            Grid::new("a", shape, len, o, 8).unwrap_err().to_string()
        };
        // 2^64 elements: the count would wrap to 0 and match an empty array.
        let e = refused(&[1 << 32, 1 << 32], 0, &opts(&[1, 1]));
        assert!(e.contains("more than 2^64"), "{e}");
        // An empty array with a chunk of 2^32 elements: refused before anything is written.
        let e = refused(&[0, 0], 0, &opts(&[1 << 16, 1 << 16]));
        assert!(e.contains("2^31"), "{e}");
        let budget = ZarrWriteOptions {
            memory_budget: Some(1000),
            ..opts(&[1000])
        };
        let e = refused(&[0], 0, &budget);
        assert!(e.contains("8000 bytes") && e.contains("1000 bytes"), "{e}");
        let e = refused(&[2, 3], 5, &opts(&[1, 3]));
        assert!(e.contains("5 values do not fill"), "{e}");
    }
}
