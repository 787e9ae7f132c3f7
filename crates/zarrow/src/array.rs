//! One zarr array: its metadata, its grid of read units, and reading a unit as an Arrow array.
//!
//! The read unit is the chunk, or for sharded arrays the inner chunk: shards are only containers,
//! read by ranged GETs — the index first (cached per shard), then exactly the inner chunks asked
//! for. A unit whose key (or index entry) is absent is the fill value. Decoding a whole unit
//! runs on the blocking pool when called inside a Tokio runtime, off the I/O threads.
//!
//! ```text
//! read_chunk(coords)   ─▶ fetch (GET key │ shard index + ranged GET) ─▶ decode ─▶ select in-bounds
//! chunk_reader(bytes)  ─▶ ChunkReader: the in-bounds rows decoded a run at a time (decode::rows)
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::ArrayRef;
use arrow_schema::Field;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::GetRange;

use crate::codec::IndexLocation;
use crate::decode::{decode_bytes, fill_array, ChunkRows, ChunkSelection};
use crate::error::ChunkError;
use crate::metadata::ArrayMetadata;
use crate::options::ZarrReadOptions;
use crate::store::ZarrStore;
use crate::{Error, Result};

/// Where a read unit's bytes are in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkLocation {
    /// The store key (relative to the array) of the chunk or of its shard.
    pub key: String,
    /// For sharded arrays, the inner chunk's position in the shard index (C order).
    pub inner: Option<usize>,
}

impl std::fmt::Display for ChunkLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.inner {
            Some(i) => write!(f, "{} (inner chunk {i})", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// A decoded shard index: per inner chunk `(offset, nbytes)`, `None` when absent.
#[derive(Debug)]
struct ShardIndex {
    entries: Vec<Option<(u64, u64)>>,
}

/// An open zarr array.
#[derive(Debug, Clone)]
pub struct ZarrArray {
    store: ZarrStore,
    path: String,
    meta: Arc<ArrayMetadata>,
    shard_indexes: Arc<Mutex<HashMap<String, Arc<Option<ShardIndex>>>>>,
}

impl ZarrArray {
    /// An array from its store (rooted at the array) and parsed metadata. `path` names the array
    /// in messages.
    pub fn new(store: ZarrStore, path: impl Into<String>, meta: ArrayMetadata) -> Self {
        ZarrArray {
            store,
            path: path.into(),
            meta: Arc::new(meta),
            shard_indexes: Arc::default(),
        }
    }

    /// Open the array at a location.
    pub async fn open(location: &str) -> Result<Self> {
        match crate::node::Node::open(location).await? {
            crate::node::Node::Array(a) => Ok(a),
            crate::node::Node::Group(_) => Err(Error::InvalidArgument(format!(
                "'{location}' is a group, not an array"
            ))),
        }
    }

    /// The metadata.
    pub fn metadata(&self) -> &ArrayMetadata {
        &self.meta
    }

    /// The array's path (for messages).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The array's last path component (`value` for a root array).
    pub fn name(&self) -> &str {
        let name = self.path.rsplit('/').next().unwrap_or("");
        if name.is_empty() {
            "value"
        } else {
            name
        }
    }

    /// The store, rooted at the array.
    pub fn store(&self) -> &ZarrStore {
        &self.store
    }

    /// The shape.
    pub fn shape(&self) -> &[u64] {
        &self.meta.shape
    }

    /// The shape of a read unit (inner chunk for sharded arrays).
    pub fn chunk_shape(&self) -> &[u64] {
        self.meta.read_chunk_shape()
    }

    /// The number of read units per dimension.
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.meta.read_grid_shape()
    }

    /// The Arrow field of the values (nullable: NaT, and masks in tables, give nulls).
    pub fn arrow_field(&self, name: &str, opts: &ZarrReadOptions) -> Field {
        let dt = self
            .meta
            .data_type
            .arrow_type(opts.string_type, opts.binary_type());
        Field::new(name, dt, true)
    }

    /// The in-bounds extent of the read unit at `coords`.
    pub fn chunk_valid_shape(&self, coords: &[u64]) -> Result<Vec<u64>> {
        let cs = self.chunk_shape();
        let grid = self.chunk_grid_shape();
        if coords.len() != cs.len() || coords.iter().zip(&grid).any(|(c, g)| c >= g) {
            return Err(Error::InvalidArgument(format!(
                "array '{}': chunk {coords:?} outside the chunk grid {grid:?}",
                self.path
            )));
        }
        Ok(coords
            .iter()
            .zip(cs)
            .zip(self.shape())
            .map(|((c, size), shape)| (shape - c * size).min(*size))
            .collect())
    }

    /// Where the read unit at `coords` lives.
    pub fn chunk_location(&self, coords: &[u64]) -> ChunkLocation {
        match self.meta.sharding() {
            None => ChunkLocation {
                key: self.meta.chunk_key_encoding.key(coords),
                inner: None,
            },
            Some(s) => {
                let per_shard: Vec<u64> = self
                    .meta
                    .chunk_shape
                    .iter()
                    .zip(&s.chunk_shape)
                    .map(|(o, i)| o / i)
                    .collect();
                let shard: Vec<u64> = coords.iter().zip(&per_shard).map(|(c, p)| c / p).collect();
                let mut inner = 0u64;
                for (c, p) in coords.iter().zip(&per_shard) {
                    inner = inner * p + c % p;
                }
                ChunkLocation {
                    key: self.meta.chunk_key_encoding.key(&shard),
                    inner: Some(inner as usize),
                }
            }
        }
    }

    fn chunk_error(&self, loc: &ChunkLocation, source: ChunkError) -> Error {
        Error::chunk(self.path.clone(), loc.to_string(), source)
    }

    /// The stored bytes of a read unit; `None` if it is not stored (fill value).
    pub async fn fetch_chunk(&self, coords: &[u64]) -> Result<Option<Bytes>> {
        let loc = self.chunk_location(coords);
        match loc.inner {
            None => self.store.get_opt(&loc.key).await,
            Some(inner) => {
                let index = self.shard_index(&loc).await?;
                let Some(index) = index.as_ref() else {
                    return Ok(None);
                };
                match index.entries.get(inner).copied().flatten() {
                    None => Ok(None),
                    Some((offset, nbytes)) => self
                        .store
                        .get_range(&loc.key, offset..offset + nbytes)
                        .await
                        .map(Some),
                }
            }
        }
    }

    async fn shard_index(&self, loc: &ChunkLocation) -> Result<Arc<Option<ShardIndex>>> {
        if let Some(hit) = self
            .shard_indexes
            .lock()
            .ok()
            .and_then(|m| m.get(&loc.key).cloned())
        {
            return Ok(hit);
        }
        let Some(s) = self.meta.sharding() else {
            return Ok(Arc::new(None));
        };
        let n: u64 = self
            .meta
            .chunk_shape
            .iter()
            .zip(&s.chunk_shape)
            .map(|(o, i)| o / i)
            .product();
        let checksum = s.index_codecs.bytes_to_bytes.len() as u64 * 4;
        let index_size = n * 16 + checksum;
        let range = match s.index_location {
            IndexLocation::Start => GetRange::Bounded(0..index_size),
            IndexLocation::End => GetRange::Suffix(index_size),
        };
        let index = match self.store.get_range_opt(&loc.key, range).await {
            Err(Error::Store { source, .. }) if is_range_error(&source) => {
                return Err(self.chunk_error(
                    loc,
                    ChunkError::ShardIndex(format!(
                        "shard is shorter than its {index_size}-byte index"
                    )),
                ))
            }
            Err(e) => return Err(e),
            Ok(None) => None,
            Ok(Some((bytes, size))) => Some(
                parse_shard_index(
                    &s.index_codecs,
                    bytes,
                    n as usize,
                    index_size,
                    size,
                    s.index_location,
                )
                .map_err(|e| self.chunk_error(loc, e))?,
            ),
        };
        let index = Arc::new(index);
        if let Ok(mut m) = self.shard_indexes.lock() {
            m.insert(loc.key.clone(), index.clone());
        }
        Ok(index)
    }

    /// Decode stored bytes of the read unit at `coords` (or the fill value for `None`) into
    /// its in-bounds elements in C order.
    pub fn decode_chunk(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
    ) -> Result<ArrayRef> {
        let valid = self.chunk_valid_shape(coords)?;
        let selection = self.selection(&valid);
        self.unit_rows(&selection, stored, opts)
            .and_then(|mut rows| rows.next_rows(rows.remaining()))
            .map_err(|e| self.chunk_error(&self.chunk_location(coords), e))
    }

    /// Which elements of a read unit whose in-bounds extent is `valid` are its rows, C order.
    fn selection(&self, valid: &[u64]) -> ChunkSelection {
        let chunk_shape = self.meta.read_chunk_shape();
        let order = self.meta.read_chain().transpose_order(chunk_shape.len());
        ChunkSelection::new(chunk_shape, valid, order.as_deref())
    }

    /// The rows `selection` picks of a read unit, from its stored bytes (`None`: the fill
    /// value), ready to be decoded run by run (see [`ChunkRows::new`]).
    fn unit_rows(
        &self,
        selection: &ChunkSelection,
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
    ) -> std::result::Result<ChunkRows, ChunkError> {
        let meta = &self.meta;
        match stored {
            None => fill_array(&meta.data_type, &meta.fill_value, selection.len(), opts)
                .map(ChunkRows::decoded),
            Some(bytes) => {
                let n = meta.read_chunk_shape().iter().product::<u64>() as usize;
                ChunkRows::new(
                    meta.read_chain(),
                    &meta.data_type,
                    n,
                    selection,
                    bytes,
                    opts,
                )
            }
        }
    }

    /// Read the read unit at `coords`: its in-bounds elements in C order.
    pub async fn read_chunk(&self, coords: &[u64], opts: &ZarrReadOptions) -> Result<ArrayRef> {
        let stored = self.fetch_chunk(coords).await?;
        self.decode_fetched(coords, stored, opts).await
    }

    /// [`Self::decode_chunk`] of a unit's fetched bytes, on the blocking pool when large and
    /// inside a runtime (decoding is CPU work: it stays off the I/O threads).
    async fn decode_fetched(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
    ) -> Result<ArrayRef> {
        let big = stored.as_ref().is_some_and(|b| b.len() > 64 * 1024);
        if big && tokio::runtime::Handle::try_current().is_ok() {
            let this = self.clone();
            let coords = coords.to_vec();
            let opts = opts.clone();
            tokio::task::spawn_blocking(move || this.decode_chunk(&coords, stored, &opts))
                .await
                .map_err(|e| Error::InvalidArgument(format!("decode task failed: {e}")))?
        } else {
            self.decode_chunk(coords, stored, opts)
        }
    }

    /// The in-bounds rows of the read unit at `coords`, from its stored bytes (from
    /// [`Self::fetch_chunk`]; `None`: the fill value), to be decoded a run of rows at a time by
    /// [`ChunkReader::next_rows`] — see [`crate::decode::rows`]. A unit that has to be decoded
    /// whole is decoded here, on the blocking pool when large and inside a runtime.
    pub async fn chunk_reader(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
    ) -> Result<ChunkReader> {
        let valid = self.chunk_valid_shape(coords)?;
        let chunk = self.chunk_location(coords).to_string();
        let selection = self.selection(&valid);
        let meta = &self.meta;
        let cheap = ChunkRows::starts_cheaply(meta.read_chain(), &meta.data_type, &selection);
        let big = stored.as_ref().is_some_and(|b| b.len() > 64 * 1024);
        let rows = if !cheap && big && tokio::runtime::Handle::try_current().is_ok() {
            let (this, opts) = (self.clone(), opts.clone());
            tokio::task::spawn_blocking(move || this.unit_rows(&selection, stored, &opts))
                .await
                .map_err(|e| Error::InvalidArgument(format!("decode task failed: {e}")))?
        } else {
            self.unit_rows(&selection, stored, opts)
        };
        match rows {
            Ok(rows) => Ok(ChunkReader {
                rows,
                array: self.path.clone(),
                chunk,
            }),
            Err(e) => Err(Error::chunk(self.path.clone(), chunk, e)),
        }
    }

    /// Read several read units, in the order given: `opts.concurrency` fetches in flight,
    /// each its own task where there is a runtime, and at most as many units decoded at
    /// once as the machine has cores ([`decoders`]), since decoding more at once than there
    /// are cores to run them only adds memory and cache misses.
    pub async fn read_chunks(
        &self,
        coords: &[Vec<u64>],
        opts: &ZarrReadOptions,
    ) -> Result<Vec<ArrayRef>> {
        let concurrency = opts.concurrency.max(1);
        futures::stream::iter(coords.iter().map(|c| {
            let (this, coords) = (self.clone(), c.clone());
            crate::reader::in_background(async move {
                let stored = this.fetch_chunk(&coords).await?;
                Ok((coords, stored))
            })
        }))
        .buffered(concurrency)
        .map_ok(|(coords, stored)| async move { self.decode_fetched(&coords, stored, opts).await })
        .try_buffered(decoders().min(concurrency))
        .try_collect()
        .await
    }

    /// Every read unit's coordinates, in C order of the grid.
    pub fn all_chunks(&self) -> Vec<Vec<u64>> {
        grid_coords(&self.chunk_grid_shape())
    }
}

fn is_range_error(e: &object_store::Error) -> bool {
    let msg = e.to_string();
    msg.contains("range") || msg.contains("Range")
}

/// One read unit's in-bounds rows, handed out a run at a time ([`ZarrArray::chunk_reader`]);
/// errors name the array and the chunk.
#[derive(Debug)]
pub struct ChunkReader {
    rows: ChunkRows,
    array: String,
    chunk: String,
}

impl ChunkReader {
    /// Rows not handed out yet.
    pub fn remaining(&self) -> usize {
        self.rows.remaining()
    }

    /// Whether rows are decoded run by run (else the unit was decoded whole and runs are
    /// slices of it).
    pub fn is_incremental(&self) -> bool {
        self.rows.is_incremental()
    }

    /// The next `k` rows, in C order (fewer at the end of the unit).
    pub fn next_rows(&mut self, k: usize) -> Result<ArrayRef> {
        self.rows
            .next_rows(k)
            .map_err(|e| Error::chunk(self.array.clone(), self.chunk.clone(), e))
    }
}

/// How many read units [`ZarrArray::read_chunks`] decodes at once: the cores this process
/// may run on.
fn decoders() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// All coordinates of a grid, in C order.
pub fn grid_coords(grid: &[u64]) -> Vec<Vec<u64>> {
    let total: u64 = grid.iter().product();
    let mut out = Vec::with_capacity(total as usize);
    if total == 0 {
        return out;
    }
    let mut idx = vec![0u64; grid.len()];
    loop {
        out.push(idx.clone());
        let mut d = grid.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < grid[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

fn parse_shard_index(
    chain: &crate::codec::CodecChain,
    bytes: Bytes,
    n: usize,
    index_size: u64,
    shard_size: u64,
    location: IndexLocation,
) -> Result<ShardIndex, ChunkError> {
    if (bytes.len() as u64) != index_size {
        return Err(ChunkError::ShardIndex(format!(
            "index is {} bytes, expected {index_size}",
            bytes.len()
        )));
    }
    let raw = decode_bytes(chain, bytes, n * 16)?;
    if raw.len() != n * 16 {
        return Err(ChunkError::ShardIndex(format!(
            "decoded index is {} bytes, expected {}",
            raw.len(),
            n * 16
        )));
    }
    let (data_start, data_end) = match location {
        IndexLocation::Start => (index_size, shard_size),
        IndexLocation::End => (0, shard_size.saturating_sub(index_size)),
    };
    let mut entries = Vec::with_capacity(n);
    for (i, e) in raw.chunks_exact(16).enumerate() {
        let offset = u64::from_le_bytes(e[..8].try_into().unwrap_or_default());
        let nbytes = u64::from_le_bytes(e[8..].try_into().unwrap_or_default());
        if offset == u64::MAX && nbytes == u64::MAX {
            entries.push(None);
            continue;
        }
        let end = offset.checked_add(nbytes);
        if offset < data_start || end.is_none_or(|end| end > data_end) {
            return Err(ChunkError::ShardIndex(format!(
                "inner chunk {i}: bytes {offset}+{nbytes} outside the shard's data ({data_start}..{data_end})"
            )));
        }
        entries.push(Some((offset, nbytes)));
    }
    Ok(ShardIndex { entries })
}
