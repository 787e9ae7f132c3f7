//! A bounded cache of decoded read units, shared by the reads of one scan, and the arrays the
//! scan holds whole for its life.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, ArrayRef};

use crate::Result;

/// A bounded cache of decoded read units, shared by the reads of one scan so that arrays
/// broadcast over many row chunks (coordinates, `station_name(station)` over
/// `(time, station)`) are fetched once, also when several partitions want the same unit at
/// the same time (the later ones wait for the first read). Entries are evicted first in,
/// first out once their total size passes the budget.
///
/// Besides, what a scan holds whole for its life (a sparse matrix's offsets, a categorical's
/// categories: see `table/read/`), read once for all its partitions and never evicted: the
/// scan reserves it from its memory budget instead.
///
/// ```
/// use std::sync::Arc;
///
/// use zarrow::{ChunkCache, ReadContext, ScanContext, ZarrReadOptions};
///
/// // One budget for all the partitions of a scan: clones of its context share the cache.
/// let cache = Arc::new(ChunkCache::new(32 << 20));
/// let ctx = ScanContext {
///     cache: cache.clone(),
///     ..Default::default()
/// };
/// let partition = ctx.clone();
/// assert!(Arc::ptr_eq(&ctx.cache, &partition.cache));
/// // Reads of single arrays may share one too.
/// let mut read = ReadContext::new(ZarrReadOptions::default());
/// read.cache = Some(cache);
/// assert_eq!(Arc::strong_count(&ctx.cache), 3);
/// ```
#[derive(Debug)]
pub struct ChunkCache {
    budget: usize,
    inner: Mutex<CacheInner>,
    whole: Mutex<HashMap<String, CacheCell>>,
}

type CacheKey = (String, Vec<u64>);
type CacheCell = Arc<tokio::sync::OnceCell<ArrayRef>>;

#[derive(Debug, Default)]
struct CacheInner {
    map: HashMap<CacheKey, CacheCell>,
    order: VecDeque<(CacheKey, usize)>,
    bytes: usize,
}

impl ChunkCache {
    /// A cache holding at most about `budget_bytes` of decoded arrays.
    pub fn new(budget_bytes: usize) -> Self {
        ChunkCache {
            budget: budget_bytes,
            inner: Mutex::default(),
            whole: Mutex::default(),
        }
    }

    /// The array held whole under `key`, or the result of `read` (held when it succeeds, for
    /// the cache's life; concurrent callers wait for the first read).
    pub(crate) async fn get_or_hold<F, Fut>(&self, key: &str, read: F) -> Result<ArrayRef>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ArrayRef>>,
    {
        let cell = (self.whole.lock().ok())
            .map(|mut whole| whole.entry(key.to_string()).or_default().clone());
        match cell {
            Some(cell) => cell.get_or_try_init(read).await.cloned(),
            None => read().await,
        }
    }

    /// Whether `key` is held (or being read).
    pub(crate) fn contains(&self, key: &CacheKey) -> bool {
        self.inner
            .lock()
            .is_ok_and(|inner| inner.map.contains_key(key))
    }

    /// The cached unit for `key`, or the result of `read` (stored when it succeeds).
    pub(crate) async fn get_or_read<F, Fut>(&self, key: CacheKey, read: F) -> Result<ArrayRef>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ArrayRef>>,
    {
        let (cell, fresh) = {
            let Ok(mut inner) = self.inner.lock() else {
                return read().await;
            };
            match inner.map.get(&key) {
                Some(cell) => (cell.clone(), false),
                None => {
                    let cell = CacheCell::default();
                    inner.map.insert(key.clone(), cell.clone());
                    (cell, true)
                }
            }
        };
        let result = cell.get_or_try_init(read).await.cloned();
        if let Ok(mut inner) = self.inner.lock() {
            match &result {
                Err(_) => {
                    if fresh {
                        inner.map.remove(&key);
                    }
                }
                Ok(array) if fresh => {
                    let size = array.get_array_memory_size();
                    inner.bytes += size;
                    inner.order.push_back((key, size));
                    while inner.bytes > self.budget {
                        let Some((old, size)) = inner.order.pop_front() else {
                            break;
                        };
                        inner.map.remove(&old);
                        inner.bytes = inner.bytes.saturating_sub(size);
                    }
                }
                Ok(_) => {}
            }
        }
        result
    }
}
