//! Shard indexes (`sharding_indexed`): where each inner chunk lies inside its shard.
//!
//! A shard's index is `n` pairs of little-endian `u64` (offset, nbytes), one per inner chunk in
//! C order, encoded by the index codecs (`bytes` then usually `crc32c`) and stored at the start
//! or the end of the shard. `(2^64−1, 2^64−1)` marks an inner chunk that is not stored (fill).
//! Indexes are read with one ranged GET and kept per shard by [`ShardIndexes`].
//!
//! Shards may hold shards (nested `sharding_indexed`, as tensorstore writes): an inner shard is
//! a byte range of its outer shard's object, with its own index at that range's start or end,
//! read by a ranged GET of its own; its entries are offsets within the range.
//!
//! ```text
//! object c/0/0: [ inner shard 0 │ inner shard 1 │ … │ index ]   outer index → inner shard's range
//!                 └─ [ chunk 0 │ chunk 1 │ … │ index ]           inner index → chunk's range
//! ```

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use object_store::GetRange;

use crate::codec::{CodecChain, IndexLocation, Sharding};
use crate::decode::decode_bytes;
use crate::error::ChunkError;
use crate::metrics::ScanMetrics;
use crate::store::ZarrStore;
use crate::{Error, Result};

/// A decoded shard index: per inner chunk `(offset, nbytes)`, `None` when absent; offsets are
/// from the shard's first byte, at `base` in the stored object.
#[derive(Debug)]
pub(crate) struct ShardIndex {
    base: u64,
    entries: Vec<Option<(u64, u64)>>,
}

impl ShardIndex {
    /// The byte range in the stored object of inner chunk `inner`; `None` when it is not
    /// stored. (`parse` checked that every entry lies inside the shard.)
    pub(crate) fn range(&self, inner: usize) -> Option<Range<u64>> {
        let (offset, nbytes) = self.entries.get(inner).copied().flatten()?;
        Some(self.base + offset..self.base + offset + nbytes)
    }
}

/// The indexes of the shards of one array read so far (`None`: the shard is not stored).
#[derive(Debug, Default, Clone)]
pub(crate) struct ShardIndexes {
    read: Arc<Mutex<HashMap<String, Arc<Option<ShardIndex>>>>>,
}

impl ShardIndexes {
    /// The index of the shard at `key`, read on first use: the whole object, or the inner
    /// shard at `within` (bytes of the object, from its outer shard's index). `per_shard`:
    /// inner chunks per shard (checked against the metadata when the array was opened).
    pub(crate) async fn get(
        &self,
        store: &ZarrStore,
        key: &str,
        within: Option<Range<u64>>,
        sharding: &Sharding,
        per_shard: u64,
        metrics: &ScanMetrics,
    ) -> Result<Arc<Option<ShardIndex>>, ShardReadError> {
        let cache_key = match &within {
            None => key.to_string(),
            Some(r) => format!("{key}\0{}..{}", r.start, r.end),
        };
        if let Some(hit) = self
            .read
            .lock()
            .ok()
            .and_then(|m| m.get(&cache_key).cloned())
        {
            return Ok(hit);
        }
        let index = match within {
            None => read_index(store, key, sharding, per_shard, metrics).await?,
            Some(r) => Some(read_inner_index(store, key, r, sharding, per_shard, metrics).await?),
        };
        let index = Arc::new(index);
        if let Ok(mut m) = self.read.lock() {
            m.insert(cache_key, index.clone());
        }
        Ok(index)
    }
}

/// Why a shard index could not be had: the store failed, or the index is bad.
#[derive(Debug)]
pub(crate) enum ShardReadError {
    /// The store failed.
    Store(Error),
    /// The index bytes are malformed.
    Index(ChunkError),
}

/// The encoded size of an index of `n` entries, and `n` as a `usize`.
fn index_size(sharding: &Sharding, n: u64) -> Result<(u64, usize), ShardReadError> {
    let checksum = sharding.index_codecs.bytes_to_bytes.len() as u64 * 4;
    let too_large = || {
        ShardReadError::Index(ChunkError::TooLarge(format!(
            "a shard index of {n} entries does not fit in memory"
        )))
    };
    let index_size = n
        .checked_mul(16)
        .and_then(|s| s.checked_add(checksum))
        .ok_or_else(too_large)?;
    let entries = usize::try_from(n).map_err(|_| too_large())?;
    Ok((index_size, entries))
}

/// The index of the inner shard at bytes `within` of the object at `key`: one ranged GET of
/// the index alone.
async fn read_inner_index(
    store: &ZarrStore,
    key: &str,
    within: Range<u64>,
    sharding: &Sharding,
    n: u64,
    metrics: &ScanMetrics,
) -> Result<ShardIndex, ShardReadError> {
    let (index_size, entries) = index_size(sharding, n)?;
    let size = within.end - within.start;
    if size < index_size {
        return Err(ShardReadError::Index(ChunkError::ShardIndex(format!(
            "inner shard at bytes {}..{} is {size} bytes, shorter than its {index_size}-byte index",
            within.start, within.end
        ))));
    }
    let range = match sharding.index_location {
        IndexLocation::Start => within.start..within.start + index_size,
        IndexLocation::End => within.end - index_size..within.end,
    };
    let started = Instant::now();
    let bytes = store
        .get_range(key, range)
        .await
        .map_err(ShardReadError::Store)?;
    metrics.add_fetch(bytes.len(), started.elapsed());
    let mut index = parse(
        &sharding.index_codecs,
        bytes,
        entries,
        index_size,
        size,
        sharding.index_location,
        metrics,
    )
    .map_err(ShardReadError::Index)?;
    index.base = within.start;
    Ok(index)
}

async fn read_index(
    store: &ZarrStore,
    key: &str,
    sharding: &Sharding,
    n: u64,
    metrics: &ScanMetrics,
) -> Result<Option<ShardIndex>, ShardReadError> {
    let (index_size, entries) = index_size(sharding, n)?;
    let range = match sharding.index_location {
        IndexLocation::Start => GetRange::Bounded(0..index_size),
        IndexLocation::End => GetRange::Suffix(index_size),
    };
    let started = Instant::now();
    let fetched = match store.get_range_opt(key, range).await {
        Ok(f) => f,
        // A shard shorter than an index at its start fails some stores' ranged GET: say so
        // when its size shows it, else pass the store's error on.
        Err(e) => {
            return match store.size_opt(key).await {
                Ok(Some(size)) if size < index_size => {
                    Err(ShardReadError::Index(ChunkError::ShardIndex(format!(
                        "shard is {size} bytes, shorter than its {index_size}-byte index"
                    ))))
                }
                _ => Err(ShardReadError::Store(e)),
            }
        }
    };
    let Some((bytes, size)) = fetched else {
        return Ok(None);
    };
    metrics.add_fetch(bytes.len(), started.elapsed());
    parse(
        &sharding.index_codecs,
        bytes,
        entries,
        index_size,
        size,
        sharding.index_location,
        metrics,
    )
    .map(Some)
    .map_err(ShardReadError::Index)
}

fn parse(
    chain: &CodecChain,
    bytes: Bytes,
    n: usize,
    index_size: u64,
    shard_size: u64,
    location: IndexLocation,
    metrics: &ScanMetrics,
) -> Result<ShardIndex, ChunkError> {
    if (bytes.len() as u64) != index_size {
        return Err(ChunkError::ShardIndex(format!(
            "index is {} bytes, expected {index_size}",
            bytes.len()
        )));
    }
    let raw = decode_bytes(chain, bytes, n * 16, metrics)?;
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
        let word = |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w)
        };
        let (offset, nbytes) = (word(&e[..8]), word(&e[8..]));
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
    Ok(ShardIndex { base: 0, entries })
}
