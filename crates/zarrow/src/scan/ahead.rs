//! How many chunks a stream fetches ahead of the one it decodes: a window that starts small
//! where a read costs a copy and widens each time the decoder has to wait for bytes.
//!
//! A remote store's reads wait a round trip, and a stream hides it by keeping `concurrency`
//! array chunk reads in flight from the start. A local file's read is a copy out of the page
//! cache: fetching every chunk ahead gains nothing there, and each chunk held ahead is memory
//! the process touches for the first time (the kernel zeroes it) instead of the buffers the
//! chunks before it gave back. So over a local store a stream starts one chunk ahead, and the
//! window widens by one chunk, up to the remote one, each time a chunk's bytes were not there
//! when the decoder asked for them (a disk that is slow, a network file system; a stream that
//! decodes several chunks at once asks for the next ones together). It never narrows: the
//! worst case is the remote window.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};

/// The window of one stream's fetches (see the module docs).
#[derive(Debug)]
pub(super) struct ReadAhead {
    /// The widest window.
    max: usize,
    state: tokio::sync::watch::Sender<Window>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    /// Chunks, from the first, the decoder has taken.
    taken: usize,
    /// How many chunks after those may be fetched.
    width: usize,
}

impl ReadAhead {
    /// A window `start` chunks wide (at least 1) that widens up to `max`.
    pub(super) fn new(start: usize, max: usize) -> Arc<Self> {
        let max = max.max(1);
        let width = start.clamp(1, max);
        Arc::new(ReadAhead {
            max,
            state: tokio::sync::watch::Sender::new(Window { taken: 0, width }),
        })
    }

    /// Wait until chunk number `index` is inside the window.
    pub(super) async fn admit(&self, index: usize) {
        let mut state = self.state.subscribe();
        // The sender lives as long as `self`: `wait_for` fails only when it is gone.
        let _ = state
            .wait_for(|w| index < w.taken.saturating_add(w.width))
            .await;
    }

    /// The decoder took the next chunk; `waited`: its bytes were not there yet. The first
    /// chunk's wait does not count: nothing could have fetched it sooner.
    fn took(&self, waited: bool) {
        let max = self.max;
        self.state.send_modify(|w| {
            if waited && w.taken > 0 {
                w.width = w.width.saturating_add(1).min(max);
            }
            w.taken += 1;
        });
    }

    /// How many chunks the window holds now.
    #[cfg(test)]
    pub(super) fn width(&self) -> usize {
        self.state.borrow().width
    }

    /// `fetched` (the stream of fetched chunks, in order), telling this window each time one
    /// is taken whether the decoder waited for it.
    pub(super) fn watch<S: Stream + Unpin>(self: Arc<Self>, fetched: S) -> Watched<S> {
        Watched {
            inner: fetched,
            ahead: self,
            waited: false,
        }
    }
}

/// See [`ReadAhead::watch`].
pub(super) struct Watched<S> {
    inner: S,
    ahead: Arc<ReadAhead>,
    /// The decoder has asked for the next chunk and found it not fetched yet.
    waited: bool,
}

impl<S: Stream + Unpin> Stream for Watched<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        match this.inner.poll_next_unpin(cx) {
            Poll::Pending => {
                this.waited = true;
                Poll::Pending
            }
            Poll::Ready(item) => {
                if item.is_some() {
                    this.ahead.took(this.waited);
                }
                this.waited = false;
                Poll::Ready(item)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether `index` is admitted within a moment.
    async fn admitted(ahead: &ReadAhead, index: usize) -> bool {
        tokio::time::timeout(Duration::from_millis(50), ahead.admit(index))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn the_window_moves_with_the_decoder_and_widens_when_it_waits() {
        let ahead = ReadAhead::new(1, 4);
        // Nothing taken: chunk 0 only.
        assert!(admitted(&ahead, 0).await);
        assert!(!admitted(&ahead, 1).await);
        ahead.took(false);
        assert!(admitted(&ahead, 1).await);
        assert!(!admitted(&ahead, 2).await);
        assert_eq!(ahead.width(), 1);
        // A wait widens the window by one, up to its widest.
        ahead.took(true);
        assert_eq!(ahead.width(), 2);
        assert!(admitted(&ahead, 3).await);
        assert!(!admitted(&ahead, 4).await);
        ahead.took(true);
        ahead.took(true);
        ahead.took(true);
        assert_eq!(ahead.width(), 4);
        // and never narrows.
        ahead.took(false);
        assert_eq!(ahead.width(), 4);
        assert!(admitted(&ahead, 9).await);
        assert!(!admitted(&ahead, 10).await);
    }

    #[tokio::test]
    async fn a_waiting_fetch_is_admitted_when_the_decoder_takes_a_chunk() {
        let ahead = ReadAhead::new(1, 4);
        let waiting = tokio::spawn({
            let ahead = ahead.clone();
            async move { ahead.admit(1).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        ahead.took(false);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn the_stream_counts_a_wait_but_not_for_the_first_chunk() {
        // Each item is pending once before it is ready: every chunk is waited for.
        let pending_once = |n: usize| {
            futures::stream::iter(0..n).then(|i| async move {
                tokio::task::yield_now().await;
                i
            })
        };
        let ahead = ReadAhead::new(1, 64);
        let items: Vec<_> = ahead
            .clone()
            .watch(Box::pin(pending_once(4)))
            .collect()
            .await;
        assert_eq!(items, [0, 1, 2, 3]);
        // Chunks 1, 2 and 3 were waited for: 1 → 4.
        assert_eq!(ahead.width(), 4);
        // Items that are there when asked for leave it as it is.
        let ready = ReadAhead::new(2, 64);
        let _: Vec<_> = ready
            .clone()
            .watch(futures::stream::iter(0..4))
            .collect()
            .await;
        assert_eq!(ready.width(), 2);
        let taken = ready.state.borrow().taken;
        assert_eq!(taken, 4);
    }
}
