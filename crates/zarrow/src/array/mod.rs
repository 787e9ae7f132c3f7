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

pub mod cache;
#[cfg(test)]
mod fetch_tests;
pub mod region;
mod shard;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::ArrayRef;
use arrow_schema::Field;
use bytes::Bytes;

pub use cache::ChunkCache;

use crate::decode::{ChunkRows, ChunkSelection};
use crate::error::ChunkError;
use crate::grid::{ChunkGrid, ChunkRanges};
use crate::metadata::ArrayMetadata;
use crate::metrics::ScanMetrics;
use crate::options::ZarrReadOptions;
use crate::store::ZarrStore;
use crate::task::blocking;
use crate::{Error, Result};
use shard::{ShardIndexes, ShardReadError};

/// What a read needs besides coordinates: the reader options, the cache of decoded read units
/// a scan shares between its reads (if any), and the counters of the scan.
#[derive(Debug, Clone, Default)]
pub struct ReadContext {
    /// Reader options.
    pub options: ZarrReadOptions,
    /// Decoded read units of arrays read by more than one chunk of rows.
    pub cache: Option<Arc<ChunkCache>>,
    /// What the reads count into.
    pub metrics: ScanMetrics,
}

impl ReadContext {
    /// A context with these options, no cache and fresh counters.
    pub fn new(options: ZarrReadOptions) -> Self {
        ReadContext {
            options,
            ..Default::default()
        }
    }
}

/// Where a read unit's bytes are in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkLocation {
    /// The store key (relative to the array) of the chunk or of its shard.
    pub key: String,
    /// For sharded arrays, the inner chunk's position in the shard index (C order).
    pub inner: Option<usize>,
    /// For shards of shards, the position in each deeper shard's index, outermost first.
    pub nested: Vec<usize>,
}

impl std::fmt::Display for ChunkLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.inner {
            Some(i) => {
                write!(f, "{} (inner chunk {i}", self.key)?;
                for n in &self.nested {
                    write!(f, "/{n}")?;
                }
                f.write_str(")")
            }
            None => f.write_str(&self.key),
        }
    }
}

/// An open zarr array: its metadata, and reads of chunks or of any region.
///
/// ```
/// use zarrow::{ZarrArray, ZarrReadOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> zarrow::Result<()> {
/// let location = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/pbmc_sample.zarr/var/n_cells");
/// let array = ZarrArray::open(location).await?;
/// assert_eq!(array.shape().len(), 1);
/// let options = ZarrReadOptions::default();
/// let first = array.read_region(&[0], &[5], &options).await?;
/// assert_eq!(first.len(), 5);
/// assert_eq!(first.data_type(), array.arrow_field("n_cells", &options).data_type());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ZarrArray {
    store: ZarrStore,
    path: String,
    meta: Arc<ArrayMetadata>,
    grid: Arc<ChunkGrid>,
    shards: ShardIndexes,
}

impl ZarrArray {
    /// An array from its store (rooted at the array) and parsed metadata. `path` names the array
    /// in messages. Fails when the grid of read units has more than 2^64 of them.
    pub fn try_new(store: ZarrStore, path: impl Into<String>, meta: ArrayMetadata) -> Result<Self> {
        let path = path.into();
        let grid = meta.read_grid();
        // A fill value that does not decode is the metadata's fault, said once here — not an
        // error blamed on whichever chunk is missing first.
        crate::decode::fill_array(
            &meta.data_type,
            &meta.fill_value,
            1,
            &ZarrReadOptions::default().with_limits(*store.limits()),
        )
        .map_err(|e| Error::metadata(&path, "fill_value", e))?;
        Ok(ZarrArray {
            store,
            path,
            meta: Arc::new(meta),
            grid: Arc::new(grid),
            shards: ShardIndexes::default(),
        })
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

    /// The shape of a read unit (inner chunk for sharded arrays); for a rectilinear grid, the
    /// largest along each dimension (see [`Self::grid`] for each unit's).
    pub fn chunk_shape(&self) -> &[u64] {
        self.grid.chunk_shape()
    }

    /// The number of read units per dimension.
    pub fn chunk_grid_shape(&self) -> Vec<u64> {
        self.grid.grid_shape()
    }

    /// The grid of read units.
    pub fn grid(&self) -> &ChunkGrid {
        &self.grid
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
        self.grid
            .chunk_box(coords)
            .map(|(_, shape)| shape)
            .map_err(|e| e.in_array(&self.path))
    }

    /// Where the read unit at `coords` lives.
    pub fn chunk_location(&self, coords: &[u64]) -> ChunkLocation {
        let levels = self.meta.shard_levels();
        if levels.is_empty() {
            return ChunkLocation {
                key: self.meta.chunk_key_encoding.key(coords),
                inner: None,
                nested: Vec::new(),
            };
        }
        // The shard holding the unit's first element, the unit's offset in it, and each
        // level's position measured in elements (the shapes divide: checked on open).
        let (shard, mut parent, offset) = self.shard_of(coords);
        let mut positions = Vec::with_capacity(levels.len());
        for s in &levels {
            let mut position = 0u64;
            for ((o, p), h) in offset.iter().zip(&parent).zip(&s.chunk_shape) {
                position = position * (p / h) + o % p / h;
            }
            positions.push(position as usize);
            parent = s.chunk_shape.clone();
        }
        ChunkLocation {
            key: self.meta.chunk_key_encoding.key(&shard),
            inner: positions.first().copied(),
            nested: positions.split_off(1),
        }
    }

    /// For a sharded array, the shard holding read unit `coords` (C-order coordinates in the
    /// chunk grid), its stored shape and the unit's offset in it (elements).
    fn shard_of(&self, coords: &[u64]) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let outer = &self.meta.chunk_grid;
        let mut shard = Vec::with_capacity(coords.len());
        let mut offset = Vec::with_capacity(coords.len());
        for (d, &c) in coords.iter().enumerate() {
            let first = self.grid.elements(d, c..c + 1).start;
            let s = outer.chunks_in(d, &(first..first + 1)).start;
            shard.push(s);
            offset.push(first - outer.elements(d, s..s + 1).start);
        }
        let stored = outer
            .stored_shape(&shard)
            .unwrap_or_else(|_| self.meta.chunk_shape.clone());
        (shard, stored, offset)
    }

    /// The most bytes a stored chunk of this array can take: twice what its elements decode to
    /// at most under `opts`' limits ([`crate::decode::decoded_bound`]) and 1 MiB (no codec
    /// zarrow reads expands data by more; checksums, headers and incompressible blocks add
    /// little), for variable-length elements never over the per-chunk cap of `opts`. A larger
    /// object is refused before it is read (or, sent without its length, once that much
    /// arrived).
    fn max_stored_bytes(&self, opts: &ZarrReadOptions) -> u64 {
        let n: u64 = self.meta.read_chunk_shape().iter().product();
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let decoded =
            crate::decode::decoded_bound(self.meta.read_chain(), &self.meta.data_type, n, opts);
        let stored = (decoded as u64).saturating_mul(2).saturating_add(1 << 20);
        match self.meta.data_type.fixed_size() {
            Some(_) => stored,
            None => stored.min(opts.limits.max_chunk_bytes as u64),
        }
    }

    fn chunk_error(&self, loc: &ChunkLocation, source: ChunkError) -> Error {
        Error::chunk(self.path.clone(), loc.to_string(), source)
    }

    /// The bytes of the sharded read unit at `loc` in its shard's object, through every level
    /// of sharding: the shard's index, then each inner shard's index by a ranged GET of the
    /// index alone (indexes are cached). `None`: not stored at some level (the fill value).
    async fn shard_range(
        &self,
        coords: &[u64],
        loc: &ChunkLocation,
        metrics: &ScanMetrics,
    ) -> Result<Option<std::ops::Range<u64>>> {
        let (_, shard_shape, _) = self.shard_of(coords);
        let mut outer: &[u64] = &shard_shape;
        let mut within = None;
        let positions = loc.inner.iter().chain(&loc.nested);
        for (sharding, &position) in self.meta.shard_levels().into_iter().zip(positions) {
            let per_shard: u64 = sharding.chunks_per_shard(outer).iter().product();
            let index = self
                .shards
                .get(&self.store, &loc.key, within, sharding, per_shard, metrics)
                .await
                .map_err(|e| match e {
                    ShardReadError::Store(e) => e,
                    ShardReadError::Index(e) => self.chunk_error(loc, e),
                })?;
            let Some(range) = index.as_ref().as_ref().and_then(|i| i.range(position)) else {
                return Ok(None);
            };
            within = Some(range);
            outer = &sharding.chunk_shape;
        }
        Ok(within)
    }

    /// The stored bytes of a read unit; `None` if it is not stored (fill value). Held to the
    /// limits of the array's store (see [`Self::fetch_chunk_in`]).
    pub async fn fetch_chunk(&self, coords: &[u64]) -> Result<Option<Bytes>> {
        let opts = ZarrReadOptions::default().with_limits(*self.store.limits());
        self.fetch_chunk_in(coords, &ReadContext::new(opts)).await
    }

    /// [`Self::fetch_chunk`] in a read's context: a stored chunk larger than its elements can
    /// take under the context's limits is refused; requests, bytes and time count into its
    /// metrics.
    ///
    /// A local table replaced by another writer while this read ran is an error
    /// ([`Error::Replaced`]), checked after the read.
    pub async fn fetch_chunk_in(&self, coords: &[u64], ctx: &ReadContext) -> Result<Option<Bytes>> {
        let fetched = self.fetch_stored(coords, ctx).await?;
        self.store.check_root()?;
        Ok(fetched)
    }

    async fn fetch_stored(&self, coords: &[u64], ctx: &ReadContext) -> Result<Option<Bytes>> {
        let metrics = &ctx.metrics;
        let fetch = &ctx.options.fetch;
        let parallel = ctx.options.concurrency.max(1);
        let loc = self.chunk_location(coords);
        let limit = self.max_stored_bytes(&ctx.options);
        if loc.inner.is_some() {
            let Some(range) = self.shard_range(coords, &loc, metrics).await? else {
                return Ok(None);
            };
            self.check_inner(&loc, &range, limit)?;
            let started = Instant::now();
            let (bytes, requests) = self
                .store
                .get_range_split(&loc.key, range, fetch.range_split_bytes, parallel)
                .await?;
            metrics.add_fetches(requests, bytes.len(), started.elapsed());
            return Ok(Some(bytes));
        }
        let started = Instant::now();
        let fetched = self
            .store
            .get_split(&loc.key, limit, fetch.range_split_bytes, parallel, |size| {
                self.chunk_error(
                    &loc,
                    ChunkError::TooLarge(format!(
                        "the stored chunk is {size} bytes, more than its elements can take \
                         ({limit})"
                    )),
                )
            })
            .await?;
        Ok(fetched.map(|(bytes, requests)| {
            metrics.add_fetches(requests, bytes.len(), started.elapsed());
            bytes
        }))
    }

    /// An error unless the inner chunk at `loc`, at bytes `range` of its shard, is at most
    /// `limit` bytes.
    fn check_inner(
        &self,
        loc: &ChunkLocation,
        range: &std::ops::Range<u64>,
        limit: u64,
    ) -> Result<()> {
        let length = range.end.saturating_sub(range.start);
        if length > limit {
            return Err(self.chunk_error(
                loc,
                ChunkError::TooLarge(format!(
                    "the shard index gives the inner chunk {length} bytes, more than its \
                     elements can take ({limit})"
                )),
            ));
        }
        Ok(())
    }

    /// The stored bytes of several read units (as [`Self::fetch_chunk_in`] reads each), in
    /// the order given. Inner chunks of one shard are read together: ranges at most
    /// `coalesce_bytes` apart become one GET, sliced (see [`ZarrStore::get_ranges_coalesced`]).
    pub async fn fetch_chunks_in(
        &self,
        coords: &[Vec<u64>],
        ctx: &ReadContext,
    ) -> Result<Vec<Option<Bytes>>> {
        use futures::{StreamExt, TryStreamExt};
        let parallel = ctx.options.concurrency.max(1);
        if self.meta.shard_levels().is_empty() {
            let reads: Vec<_> = coords.iter().map(|c| self.fetch_chunk_in(c, ctx)).collect();
            return futures::stream::iter(reads)
                .buffered(parallel)
                .try_collect()
                .await;
        }
        let metrics = &ctx.metrics;
        let limit = self.max_stored_bytes(&ctx.options);
        // Each unit's shard and range (indexes read once per shard, cached).
        // (Futures made before they are streamed, as in `ZarrStore::get_split`.)
        let locate: Vec<_> = coords
            .iter()
            .map(|c| async move {
                let loc = self.chunk_location(c);
                let range = self.shard_range(c, &loc, metrics).await?;
                if let Some(r) = &range {
                    self.check_inner(&loc, r, limit)?;
                }
                Ok::<_, Error>((loc, range))
            })
            .collect();
        let located: Vec<(ChunkLocation, Option<std::ops::Range<u64>>)> =
            futures::stream::iter(locate)
                .buffered(parallel)
                .try_collect()
                .await?;
        // The stored units grouped by shard, in order of first appearance.
        let mut shards: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, (loc, range)) in located.iter().enumerate() {
            if range.is_none() {
                continue;
            }
            match shards.iter_mut().find(|(key, _)| *key == loc.key) {
                Some((_, members)) => members.push(i),
                None => shards.push((&loc.key, vec![i])),
            }
        }
        let fetch = &ctx.options.fetch;
        let reads: Vec<_> = shards
            .iter()
            .map(|(key, members)| {
                let ranges: Vec<std::ops::Range<u64>> = members
                    .iter()
                    .filter_map(|&i| located[i].1.clone())
                    .collect();
                async move {
                    let started = Instant::now();
                    let (bytes, requests) = self
                        .store
                        .get_ranges_coalesced(
                            key,
                            &ranges,
                            fetch.coalesce_bytes,
                            fetch.range_split_bytes,
                            parallel,
                        )
                        .await?;
                    let total = bytes.iter().map(Bytes::len).sum();
                    metrics.add_fetches(requests, total, started.elapsed());
                    Ok::<_, Error>(bytes)
                }
            })
            .collect();
        let read: Vec<Vec<Bytes>> = futures::stream::iter(reads)
            .buffered(parallel)
            .try_collect()
            .await?;
        let mut out: Vec<Option<Bytes>> = vec![None; coords.len()];
        for ((_, members), bytes) in shards.iter().zip(read) {
            for (&i, b) in members.iter().zip(bytes) {
                out[i] = Some(b);
            }
        }
        self.store.check_root()?;
        Ok(out)
    }

    /// Decode stored bytes of the read unit at `coords` (or the fill value for `None`) into
    /// its in-bounds elements in C order.
    pub fn decode_chunk(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
    ) -> Result<ArrayRef> {
        self.decode_chunk_counted(coords, stored, opts, &ScanMetrics::default())
    }

    /// [`Self::decode_chunk`], the time in bytes-to-bytes codecs counted into `metrics`.
    fn decode_chunk_counted(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
        metrics: &ScanMetrics,
    ) -> Result<ArrayRef> {
        let (selection, n) = self.selection(coords)?;
        self.unit_rows(&selection, n, stored, opts, metrics)
            .and_then(|mut rows| rows.next_rows(rows.remaining()))
            .map_err(|e| self.chunk_error(&self.chunk_location(coords), e))
    }

    /// Which elements of the read unit at `coords` are its rows (its in-bounds ones, C order),
    /// and how many elements it stores.
    fn selection(&self, coords: &[u64]) -> Result<(ChunkSelection, usize)> {
        let valid = self.chunk_valid_shape(coords)?;
        let stored = self
            .grid
            .stored_shape(coords)
            .map_err(|e| e.in_array(&self.path))?;
        let order = self.meta.read_chain().transpose_order(stored.len());
        let n = stored.iter().product::<u64>() as usize;
        Ok((ChunkSelection::new(&stored, &valid, order.as_deref()), n))
    }

    /// The rows `selection` picks of a read unit, from its stored bytes (`None`: the fill
    /// value), ready to be decoded run by run (see [`ChunkRows::new`]).
    fn unit_rows(
        &self,
        selection: &ChunkSelection,
        n: usize,
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
        metrics: &ScanMetrics,
    ) -> std::result::Result<ChunkRows, ChunkError> {
        let meta = &self.meta;
        match stored {
            None => Ok(ChunkRows::fill(
                &meta.data_type,
                &meta.fill_value,
                selection.len(),
                opts,
            )),
            Some(bytes) => ChunkRows::new(
                meta.read_chain(),
                &meta.data_type,
                n,
                selection,
                bytes,
                opts,
                metrics,
            ),
        }
    }

    /// Read the read unit at `coords`: its in-bounds elements in C order.
    pub async fn read_chunk(&self, coords: &[u64], opts: &ZarrReadOptions) -> Result<ArrayRef> {
        self.read_chunk_in(coords, &ReadContext::new(opts.clone()))
            .await
    }

    /// [`Self::decode_chunk`] of a unit's fetched bytes, on the blocking pool when large and
    /// inside a runtime (decoding is CPU work: it stays off the I/O threads).
    pub(crate) async fn decode_fetched(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        ctx: &ReadContext,
    ) -> Result<ArrayRef> {
        let big = stored.as_ref().is_some_and(|b| b.len() > 64 * 1024);
        let (this, coords) = (self.clone(), coords.to_vec());
        let (opts, metrics) = (ctx.options.clone(), ctx.metrics.clone());
        blocking(big, move || {
            this.decode_chunk_counted(&coords, stored, &opts, &metrics)
        })
        .await?
    }

    /// The in-bounds rows of the read unit at `coords`, from its stored bytes (from
    /// [`Self::fetch_chunk`]; `None`: the fill value), to be decoded a run of rows at a time by
    /// [`ChunkReader::next_rows`] — see the `decode::rows` module. A unit that has to be decoded
    /// whole is decoded here, on the blocking pool when large and inside a runtime.
    pub async fn chunk_reader(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        opts: &ZarrReadOptions,
    ) -> Result<ChunkReader> {
        self.chunk_reader_in(coords, stored, &ReadContext::new(opts.clone()))
            .await
    }

    /// [`Self::chunk_reader`] in a read's context: its options, decompression time (here and
    /// as runs are decoded) counted into its metrics.
    pub async fn chunk_reader_in(
        &self,
        coords: &[u64],
        stored: Option<Bytes>,
        ctx: &ReadContext,
    ) -> Result<ChunkReader> {
        let chunk = self.chunk_location(coords).to_string();
        let (selection, n) = self.selection(coords)?;
        let meta = &self.meta;
        let cheap = ChunkRows::starts_cheaply(meta.read_chain(), &meta.data_type, &selection);
        let big = stored.as_ref().is_some_and(|b| b.len() > 64 * 1024);
        let this = self.clone();
        let (opts, metrics) = (ctx.options.clone(), ctx.metrics.clone());
        let rows = blocking(!cheap && big, move || {
            this.unit_rows(&selection, n, stored, &opts, &metrics)
        })
        .await?;
        match rows {
            Ok(rows) => Ok(ChunkReader {
                rows,
                array: self.path.clone(),
                chunk,
            }),
            Err(e) => Err(Error::chunk(self.path.clone(), chunk, e)),
        }
    }

    /// Every read unit, as ranges over the grid.
    pub fn all_chunks(&self) -> ChunkRanges {
        ChunkRanges::all(&self.grid.grid_shape())
    }

    /// The stored bytes of each read unit of `chunks`, in their order, from one listing of
    /// the array's objects (at most `max_objects` of them; `None` past that, or where the
    /// store cannot list): 0 for a unit not stored; a shard's bytes shared evenly by the
    /// units of `chunks` in it. A hint to balance work by, not a limit to read under.
    pub async fn stored_sizes(&self, chunks: &ChunkRanges, max_objects: usize) -> Option<Vec<u64>> {
        let listed = self.store.object_sizes("", max_objects).await?;
        let keys: Vec<String> = chunks.iter().map(|c| self.chunk_location(&c).key).collect();
        let mut units: HashMap<&str, u64> = HashMap::new();
        for key in &keys {
            *units.entry(key).or_default() += 1;
        }
        let sizes = keys.iter().map(|key| {
            let size = listed.get(&self.store.key(key)).copied().unwrap_or(0);
            size / units[key.as_str()]
        });
        Some(sizes.collect())
    }
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
