//! Running an async step from a synchronous codec callback (DataFusion's plan decoders are
//! synchronous; reopening a zarr table reads its metadata).
//!
//! On a multi-threaded tokio runtime — Ballista's scheduler and executors, and the clients this
//! crate builds — the step runs on the current runtime with `block_in_place`, so the object
//! stores it opens keep working there. Anywhere else (no runtime, or a current-thread one that
//! this very thread drives) it runs on a short-lived runtime of its own, on a helper thread.

use std::future::Future;

use datafusion::common::{DataFusionError, Result};
use tokio::runtime::{Handle, RuntimeFlavor};

/// The output of `future`, waited for from synchronous code.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    if let Ok(handle) = Handle::try_current() {
        if handle.runtime_flavor() == RuntimeFlavor::MultiThread {
            return Ok(tokio::task::block_in_place(|| handle.block_on(future)));
        }
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|rt| rt.block_on(future))
                    .map_err(|e| DataFusionError::External(Box::new(e)))
            })
            .join()
            .map_err(|_| DataFusionError::Internal("the metadata reader thread panicked".into()))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_runtime() {
        assert_eq!(block_on(async { 7 }).unwrap(), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_current_thread_runtime() {
        assert_eq!(block_on(async { 7 }).unwrap(), 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_multi_thread_runtime() {
        let v = block_on(async {
            tokio::task::yield_now().await;
            7
        })
        .unwrap();
        assert_eq!(v, 7);
    }
}
