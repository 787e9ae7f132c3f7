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
//! Read-ahead is bounded by bytes, not by a count. A stream keeps up to `concurrency` array
//! chunk reads in flight whatever its budget; under a bounded one a chunk ahead first holds as
//! much as the largest chunk so far took ([`Held::reserve_ahead`]), the chunks in order, and
//! its request waits while the budget refuses or while the stream would hold more than its
//! read-ahead limit ([`ScanMemory::read_ahead_limit`], what leaves room to the query's other
//! operators), trying again each time a chunk before it is handed out. The chunk whose turn it
//! is (every chunk before it handed out) is held to the budget alone, and only if that refuses
//! is the budget full: an error. So read-ahead shrinks to what the budget grants, never holds
//! bytes the budget did not grant, and never deadlocks on memory only a later chunk could free
//! (the chunks behind it reserve after it). The first chunk goes without (nothing is known
//! yet); a chunk larger than the estimate holds the rest when it arrives, or when its turn
//! comes.

use std::sync::{Arc, Mutex};

use crate::error::{MemoryError, MemoryExhausted};
use crate::{Error, Result};

/// A memory budget a scan reserves from (e.g. a DataFusion memory pool's reservation).
pub trait ScanMemory: Send + Sync + std::fmt::Debug {
    /// Reserve `bytes` more, or say why not ([`MemoryError::Refused`]).
    fn try_grow(&self, bytes: usize) -> std::result::Result<(), MemoryError>;
    /// Give `bytes` back.
    fn shrink(&self, bytes: usize);
    /// Whether the budget has a limit. Without one (DataFusion's unbounded pool) a scan reads
    /// `concurrency` chunks ahead without reserving first, as it does with no budget at all;
    /// with one, each chunk ahead reserves before its request (see the module docs).
    fn is_bounded(&self) -> bool {
        true
    }
    /// The most a stream holds (the chunk it hands out, the chunks ahead, columns read whole)
    /// and still reads ahead: past it, the next chunk is fetched only when its turn comes.
    /// `None`: as far as the budget grants.
    fn read_ahead_limit(&self) -> Option<usize> {
        None
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

/// How far a stream has got: the estimate a chunk's fetch reserves before its request, how
/// many chunks have reserved it and how many have been handed out.
#[derive(Debug, Default, Clone)]
struct Progress {
    /// The most stored bytes of a chunk fetched so far (`None` until the first arrives).
    largest: Option<usize>,
    /// Chunks, from the first, that have made their reservation before the request.
    reserved: usize,
    /// Chunks, from the first, handed out (or failed): their [`Held`] dropped.
    handed_out: usize,
    /// Chunks after those whose [`Held`] was dropped first: a later chunk that failed while
    /// an earlier one was still on its way. They count once the chunks before them do, so a
    /// failure behind a chunk never tells it that its turn has come.
    done_early: std::collections::BTreeSet<usize>,
}

impl Progress {
    /// Chunk `index` has been handed out (or failed).
    fn done(&mut self, index: usize) {
        if index != self.handed_out {
            self.done_early.insert(index);
            return;
        }
        self.handed_out += 1;
        while self.done_early.remove(&self.handed_out) {
            self.handed_out += 1;
        }
    }
}

impl Budget {
    pub(crate) fn new(memory: Arc<dyn ScanMemory>) -> Arc<Self> {
        Arc::new(Budget {
            memory,
            state: Mutex::new((0, 0)),
            progress: tokio::sync::watch::Sender::new(Progress::default()),
        })
    }

    fn grow(&self, bytes: usize) -> std::result::Result<(), MemoryError> {
        let mut state = self.state.lock().map_err(|_| MemoryError::Poisoned)?;
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

    /// Whether the stream may hold `bytes` more for a chunk ahead: within its read-ahead
    /// limit (the budget itself is asked by [`Self::grow`]).
    fn room_ahead(&self, bytes: usize) -> bool {
        let Some(limit) = self.memory.read_ahead_limit() else {
            return true;
        };
        self.state
            .lock()
            .is_ok_and(|state| state.0.saturating_add(bytes) <= limit)
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

/// Bytes of a stream's [`Budget`] in use, released on drop; for a chunk, the drop counts it
/// as handed out.
#[derive(Debug, Default)]
pub(crate) struct Held {
    budget: Option<Arc<Budget>>,
    bytes: usize,
    /// The chunk's number in the stream, if this holds a chunk's bytes.
    chunk: Option<usize>,
}

impl Held {
    /// Nothing held yet, of `budget` (no budget: every reservation succeeds), for what is not
    /// one chunk (what the table holds whole).
    pub(crate) fn new(budget: Option<Arc<Budget>>) -> Self {
        Held {
            budget,
            bytes: 0,
            chunk: None,
        }
    }

    /// Nothing held yet for chunk number `index` of the stream.
    pub(crate) fn for_chunk(budget: Option<Arc<Budget>>, index: usize) -> Self {
        Held {
            budget,
            bytes: 0,
            chunk: Some(index),
        }
    }

    /// Before the request for the stored bytes of this chunk (see [`Self::for_chunk`]), under a
    /// bounded budget: hold as much as the largest chunk fetched so far took, after the chunks
    /// before this one have held theirs, when the budget grants it and the stream stays within
    /// its read-ahead limit — else again each time a chunk is handed out, and when this
    /// chunk's turn has come, from the budget alone or it is an error (see the module docs).
    /// The first chunk holds nothing (nothing is known yet). Returns what was held.
    pub(crate) async fn reserve_ahead(
        &mut self,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<usize> {
        let (Some(budget), Some(index)) = (self.budget.clone(), self.chunk) else {
            return Ok(0);
        };
        // A budget without a limit only counts.
        if !budget.memory.is_bounded() {
            return Ok(0);
        }
        let held = match index {
            0 => Ok(0),
            _ => self.reserve_in_turn(&budget, index, what).await,
        };
        // The chunk behind may try now (after an error too: it is this chunk that failed).
        self.pass_turn();
        held
    }

    /// Let the chunks behind this one reserve: it has made its reservation, or never will (it
    /// failed, or was dropped, before).
    fn pass_turn(&self) {
        if let (Some(budget), Some(index)) = (&self.budget, self.chunk) {
            budget
                .progress
                .send_modify(|p| p.reserved = p.reserved.max(index + 1));
        }
    }

    /// [`Self::reserve_ahead`] of chunk `index` > 0.
    async fn reserve_in_turn(
        &mut self,
        budget: &Budget,
        index: usize,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<usize> {
        let mut progress = budget.progress.subscribe();
        let estimate = match progress
            .wait_for(|p| p.reserved >= index && p.largest.is_some())
            .await
        {
            Ok(p) => p.largest.unwrap_or(0),
            Err(_) => 0,
        };
        loop {
            // Seen before trying, so a chunk handed out meanwhile wakes `changed` below.
            let turn = progress.borrow_and_update().handed_out >= index;
            if turn || budget.room_ahead(estimate) {
                match self.grow(estimate, what) {
                    Ok(()) => return Ok(estimate),
                    Err(e) if turn => return Err(e),
                    Err(_) => {}
                }
            }
            if progress.changed().await.is_err() {
                // The stream is gone (the sender lives in the budget this chunk holds).
                return self.grow(estimate, what).map(|()| estimate);
            }
        }
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
        budget.grow(bytes).map_err(|source| {
            Error::MemoryExhausted(Box::new(MemoryExhausted {
                reading: what(),
                source,
            }))
        })?;
        self.bytes += bytes;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.release(self.bytes);
            if let Some(index) = self.chunk {
                // a chunk that fails before it reserves lets the ones behind it go on
                self.pass_turn();
                budget.progress.send_modify(|p| p.done(index));
            }
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
        fn try_grow(&self, bytes: usize) -> std::result::Result<(), MemoryError> {
            let now = self.1.load(Ordering::SeqCst);
            if now + bytes > self.0 {
                return Err(MemoryError::Refused {
                    bytes,
                    source: format!("{bytes} more than the {} left", self.0 - now).into(),
                });
            }
            self.1.fetch_add(bytes, Ordering::SeqCst);
            Ok(())
        }
        fn shrink(&self, bytes: usize) {
            self.1.fetch_sub(bytes, Ordering::SeqCst);
        }
    }

    /// A chunk that fails behind one still on its way (its fetch refused by the store, say)
    /// does not make it the earlier chunk's turn: that one waits for the chunks before it, and
    /// is not refused by the budget in the failed chunk's name.
    #[tokio::test]
    async fn a_failure_behind_a_chunk_does_not_give_it_its_turn() {
        let limit = Arc::new(Limit(100, AtomicUsize::new(0)));
        let budget = Budget::new(limit.clone());
        let what = || "chunk".to_string();
        // chunk 0 arrives with 60 bytes and is being handed out
        let mut first = Held::for_chunk(Some(budget.clone()), 0);
        assert_eq!(first.reserve_ahead(&what).await.unwrap(), 0);
        assert_eq!(first.settle(0, 60), 0);
        // chunk 2 fails before chunk 1 has reserved
        drop(Held::for_chunk(Some(budget.clone()), 2));
        assert_eq!(budget.progress.borrow().handed_out, 0);
        // chunk 1 cannot have its 60 bytes beside chunk 0's: it waits for its turn, no error
        let mut second = Held::for_chunk(Some(budget.clone()), 1);
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            second.reserve_ahead(&what),
        )
        .await;
        assert!(waiting.is_err(), "{waiting:?}");
        // chunk 0 handed out: chunk 1's turn, then the failed chunk 2 counts too
        drop(first);
        assert_eq!(second.reserve_ahead(&what).await.unwrap(), 60);
        drop(second);
        assert_eq!(budget.progress.borrow().handed_out, 3);
    }

    #[test]
    fn reservation_stays_at_the_high_water_mark_and_goes_with_the_stream() {
        let limit = Arc::new(Limit(100, AtomicUsize::new(0)));
        let budget = Budget::new(limit.clone());
        let what = || "chunk [0]".to_string();
        let mut a = Held::new(Some(budget.clone()));
        a.grow(60, &what).unwrap();
        let mut b = Held::new(Some(budget.clone()));
        let err = b.grow(50, &what).unwrap_err();
        assert!(
            matches!(&err, Error::MemoryExhausted(e) if e.reading == "chunk [0]"
                && matches!(e.source, MemoryError::Refused { bytes: 50, .. })),
            "{err:?}"
        );
        let err = err.to_string();
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
