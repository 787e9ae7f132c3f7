//! What a scan holds in memory, counted against a budget its caller gives it.
//!
//! zarrow knows nothing of DataFusion: a caller with a memory pool implements [`ScanMemory`]
//! (zarrow-datafusion does, one `MemoryReservation` per partition) and puts it in the
//! [`super::ScanContext`]. Per chunk of rows the scan reserves the stored bytes it fetched and
//! the columns it decoded whole before it holds them for the consumer ([`Held`], given back
//! when the chunk has been handed out).
//!
//! A stream keeps its reservation at its high-water mark ([`Budget`]): chunks are alike, so
//! after the first ones the next chunk fits in what the last one gave back, and the pool sees a
//! steady consumer — not one that lets go between chunks and finds, when it asks again, that a
//! spilling operator took the room meanwhile. The reservation goes when the stream does.
//!
//! Under a bounded budget the scan reads one chunk of rows ahead (not `concurrency` of them), so
//! it holds at most two chunks a stream; under an unbounded one (only counted) it reads ahead as
//! far as `concurrency` allows. A chunk ahead holds, before its request is sent, as much as the
//! largest chunk so far took ([`Held::reserve_ahead`]); if the budget has no room the request
//! waits until the chunks before it have been handed out and tries again, and only then is a
//! full budget an error (the read-ahead never deadlocks on memory that only a later chunk could
//! free). A chunk larger than the estimate holds the rest when it arrives, or when its turn
//! comes.

use std::sync::{Arc, Mutex};

use crate::{Error, Result};

/// A memory budget a scan reserves from (e.g. a DataFusion memory pool's reservation).
pub trait ScanMemory: Send + Sync + std::fmt::Debug {
    /// Reserve `bytes` more, or say why not (the message goes into
    /// [`Error::ResourcesExhausted`]).
    fn try_grow(&self, bytes: usize) -> std::result::Result<(), String>;
    /// Give `bytes` back.
    fn shrink(&self, bytes: usize);
    /// Whether the budget has a limit. Without one (DataFusion's unbounded pool) a scan reads
    /// `concurrency` chunks ahead as it does with no budget at all; with one, one chunk of rows
    /// ahead (see the module docs).
    fn is_bounded(&self) -> bool {
        true
    }
}

/// One stream's use of a [`ScanMemory`]: bytes in use and bytes reserved (the most ever in use).
#[derive(Debug)]
pub(crate) struct Budget {
    memory: Arc<dyn ScanMemory>,
    /// (in use, reserved)
    state: Mutex<(usize, usize)>,
    /// What a chunk's fetch waits on before its request (see [`Held::reserve_ahead`]).
    progress: tokio::sync::watch::Sender<Progress>,
}

/// How far a stream has got: the estimate a chunk's fetch reserves before its request, and how
/// many chunks have been handed out.
#[derive(Debug, Default, Clone, Copy)]
struct Progress {
    /// The most stored bytes of a chunk fetched so far (`None` until the first arrives).
    largest: Option<usize>,
    /// Chunks handed out (their [`Held`] dropped).
    handed_out: usize,
}

impl Budget {
    pub(crate) fn new(memory: Arc<dyn ScanMemory>) -> Arc<Self> {
        Arc::new(Budget {
            memory,
            state: Mutex::new((0, 0)),
            progress: tokio::sync::watch::Sender::new(Progress::default()),
        })
    }

    fn grow(&self, bytes: usize) -> std::result::Result<(), String> {
        let mut state = self.state.lock().map_err(|e| e.to_string())?;
        let (in_use, reserved) = *state;
        let wanted = in_use.saturating_add(bytes);
        if wanted > reserved {
            self.memory.try_grow(wanted - reserved)?;
            state.1 = wanted;
        }
        state.0 = wanted;
        Ok(())
    }

    fn release(&self, bytes: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.0 = state.0.saturating_sub(bytes);
        }
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            if state.1 > 0 {
                self.memory.shrink(state.1);
            }
        }
    }
}

/// Bytes of a stream's [`Budget`] in use for one chunk, released on drop (which counts the
/// chunk as handed out).
#[derive(Debug, Default)]
pub(crate) struct Held {
    budget: Option<Arc<Budget>>,
    bytes: usize,
}

impl Held {
    /// Nothing held yet, of `budget` (no budget: every reservation succeeds).
    pub(crate) fn new(budget: Option<Arc<Budget>>) -> Self {
        Held { budget, bytes: 0 }
    }

    /// Before the request for the stored bytes of chunk number `index` of the stream, under a
    /// bounded budget: hold as much as the largest chunk fetched so far took. The first chunk goes without (nothing is
    /// known yet), the others wait for its size. If the budget has no room, the request waits
    /// until every chunk before this one has been handed out and tries once more; only then is
    /// a full budget an error. So read-ahead never holds bytes the budget did not grant, and
    /// never deadlocks on memory only a later chunk could free. Returns what was held.
    pub(crate) async fn reserve_ahead(
        &mut self,
        index: usize,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<usize> {
        let Some(budget) = self.budget.clone() else {
            return Ok(0);
        };
        // The first chunk has no estimate; a budget without a limit only counts.
        if index == 0 || !budget.memory.is_bounded() {
            return Ok(0);
        }
        let mut progress = budget.progress.subscribe();
        let estimate = match progress.wait_for(|p| p.largest.is_some()).await {
            Ok(p) => p.largest.unwrap_or(0),
            Err(_) => 0,
        };
        if self.grow(estimate, what).is_err() {
            let _ = progress.wait_for(|p| p.handed_out >= index).await;
            self.grow(estimate, what)?;
        }
        Ok(estimate)
    }

    /// After the fetch: `stored` bytes arrived where `reserved` were held. Gives back what
    /// was held over, or holds the rest; `Ok(n)`: `n` bytes could not be held now (the
    /// caller holds them when the chunk's turn comes).
    pub(crate) fn settle(&mut self, reserved: usize, stored: usize) -> usize {
        let unreserved = if stored <= reserved {
            let over = reserved - stored;
            if let Some(budget) = &self.budget {
                budget.release(over);
            }
            self.bytes -= over.min(self.bytes);
            0
        } else {
            let rest = stored - reserved;
            match self.grow(rest, &String::new) {
                Ok(()) => 0,
                Err(_) => rest,
            }
        };
        // Only now does the estimate go out: a chunk ahead waiting for it must not take the
        // room this chunk's own bytes were about to take.
        if let Some(budget) = &self.budget {
            budget.progress.send_modify(|p| {
                p.largest = Some(p.largest.unwrap_or(0).max(stored));
            });
        }
        unreserved
    }

    /// Hold `bytes` more for `what` (named in the error).
    pub(crate) fn grow(&mut self, bytes: usize, what: &dyn Fn() -> String) -> Result<()> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        budget.grow(bytes).map_err(|e| {
            Error::ResourcesExhausted(format!(
                "{}: {e} (a scan holds the stored bytes of the chunk it hands out and of one \
                 read ahead, and the columns it reads whole; raise the memory limit)",
                what()
            ))
        })?;
        self.bytes += bytes;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.release(self.bytes);
            budget.progress.send_modify(|p| p.handed_out += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A budget of `limit` bytes that counts what is reserved.
    #[derive(Debug)]
    struct Limit(usize, AtomicUsize);

    impl ScanMemory for Limit {
        fn try_grow(&self, bytes: usize) -> std::result::Result<(), String> {
            let now = self.1.load(Ordering::SeqCst);
            if now + bytes > self.0 {
                return Err(format!("{bytes} more than the {} left", self.0 - now));
            }
            self.1.fetch_add(bytes, Ordering::SeqCst);
            Ok(())
        }
        fn shrink(&self, bytes: usize) {
            self.1.fetch_sub(bytes, Ordering::SeqCst);
        }
    }

    #[test]
    fn reservation_stays_at_the_high_water_mark_and_goes_with_the_stream() {
        let limit = Arc::new(Limit(100, AtomicUsize::new(0)));
        let budget = Budget::new(limit.clone());
        let what = || "chunk [0]".to_string();
        let mut a = Held::new(Some(budget.clone()));
        a.grow(60, &what).unwrap();
        let mut b = Held::new(Some(budget.clone()));
        let err = b.grow(50, &what).unwrap_err().to_string();
        assert!(
            err.contains("resources exhausted: chunk [0]: 50 more"),
            "{err}"
        );
        drop(a);
        // Released, still reserved: the next chunk fits without asking the pool.
        assert_eq!(limit.1.load(Ordering::SeqCst), 60);
        b.grow(50, &what).unwrap();
        assert_eq!(limit.1.load(Ordering::SeqCst), 60);
        b.grow(30, &what).unwrap();
        assert_eq!(limit.1.load(Ordering::SeqCst), 80);
        drop(b);
        drop(budget);
        assert_eq!(limit.1.load(Ordering::SeqCst), 0);
    }
}
