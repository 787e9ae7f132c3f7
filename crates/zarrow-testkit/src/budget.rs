//! A scan's memory budget for tests (`zarrow::ScanMemory`): a limit, optionally a
//! read-ahead limit, and counts of what is reserved now and the most ever reserved.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use zarrow::MemoryError;
use zarrow::ScanMemory;

/// A budget of `limit` bytes (see the module docs).
#[derive(Debug, Default)]
pub struct Budget {
    /// The most it grants.
    pub limit: usize,
    /// Its [`ScanMemory::read_ahead_limit`].
    pub read_ahead: Option<usize>,
    /// Bytes reserved now.
    pub used: AtomicUsize,
    /// The most bytes ever reserved at once.
    pub peak: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes, reading ahead as far as it grants.
    pub fn new(limit: usize) -> Arc<Self> {
        Self::with_read_ahead(limit, None)
    }

    /// A budget of `limit` bytes whose streams read ahead while they hold at most
    /// `read_ahead`.
    pub fn with_read_ahead(limit: usize, read_ahead: Option<usize>) -> Arc<Self> {
        Arc::new(Budget {
            limit,
            read_ahead,
            ..Default::default()
        })
    }
}

impl ScanMemory for Budget {
    fn try_grow(&self, bytes: usize) -> Result<(), MemoryError> {
        let now = self.used.load(Ordering::SeqCst);
        if now + bytes > self.limit {
            return Err(MemoryError::Refused {
                bytes,
                source: format!("{bytes} bytes more than the {} left", self.limit - now).into(),
            });
        }
        let now = self.used.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::SeqCst);
        Ok(())
    }

    fn shrink(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::SeqCst);
    }

    fn read_ahead_limit(&self) -> Option<usize> {
        self.read_ahead
    }
}
