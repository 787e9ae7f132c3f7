//! Where zarrow's work runs: fetches as tasks of their own, decoding on the blocking pool,
//! and the runtime the synchronous reader drives its stream with.
//!
//! Inside a Tokio runtime a fetch runs as its own task (so it makes progress while the caller
//! decodes), as does a chunk a lone stream decodes ahead (on the worker threads, whose
//! allocator caches its buffers are reused from), and a large decode of a whole array on the
//! blocking pool (off the I/O threads). Outside one, all run in place. The synchronous reader owns a small runtime; called from inside another
//! runtime (where blocking on a runtime panics) it drives its stream on a thread of its own.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::{Error, Result};

/// `fut`, run as its own tokio task when there is a runtime (aborted when the returned future
/// is dropped), else in place; `task` names it in the error of a task that panicked.
pub(crate) fn in_background<T: Send + 'static>(
    task: &'static str,
    fut: impl Future<Output = Result<T>> + Send + 'static,
) -> BoxFuture<'static, Result<T>> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return Box::pin(fut);
    };
    struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);
    impl<T> Drop for AbortOnDrop<T> {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let mut handle = AbortOnDrop(runtime.spawn(fut));
    Box::pin(async move {
        (&mut handle.0)
            .await
            .map_err(|source| Error::Task { task, source })?
    })
}

/// The most chunks a stream decodes ahead, however many cores are idle: each is held decoded
/// whole until its turn (see `ScanContext::for_partitions`).
pub(crate) const MAX_DECODE_AHEAD: usize = 8;

/// The threads zarrow's tasks run on (see `ScanContext::workers`).
pub(crate) fn workers() -> usize {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime.metrics().num_workers().max(1),
        Err(_) => cores(),
    }
}

/// The cores this process may use (its CPU affinity and quota), at least 1.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `f` on the blocking pool when `heavy` and inside a runtime, else in place.
pub(crate) async fn blocking<T: Send + 'static>(
    heavy: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    if heavy && tokio::runtime::Handle::try_current().is_ok() {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|source| Error::Task {
                task: "decode",
                source,
            })
    } else {
        Ok(f())
    }
}

/// The runtime of the synchronous reader: a worker per core, at most as many as a lone stream
/// decodes ahead on ([`MAX_DECODE_AHEAD`]), I/O and timers enabled. It can be dropped
/// anywhere: inside another runtime (where dropping a runtime panics) it is shut down in the
/// background.
#[derive(Debug, Clone)]
pub(crate) struct SyncRuntime(Option<Arc<tokio::runtime::Runtime>>);

impl SyncRuntime {
    pub(crate) fn new() -> Result<Self> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cores().min(MAX_DECODE_AHEAD))
            .enable_all()
            .build()
            .map(|rt| SyncRuntime(Some(Arc::new(rt))))
            .map_err(|e| Error::Runtime(format!("cannot start a Tokio runtime: {e}")))
    }
}

impl std::ops::Deref for SyncRuntime {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &tokio::runtime::Runtime {
        // Only `drop` takes the runtime out.
        self.0
            .as_deref()
            .unwrap_or_else(|| unreachable!("runtime taken before drop"))
    }
}

impl Drop for SyncRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                if let Ok(rt) = Arc::try_unwrap(rt) {
                    rt.shutdown_background();
                }
            }
        }
    }
}

/// Runs `fut` to completion on `runtime`, also when called from inside another runtime
/// (where `block_on` would panic): then on a scoped thread of its own.
pub(crate) fn block_on<F>(runtime: &tokio::runtime::Runtime, fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return runtime.block_on(fut);
    }
    std::thread::scope(|s| {
        s.spawn(|| runtime.block_on(fut))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
