//! The module's one Tokio runtime, and running work on it with the GIL released.

use std::future::Future;
use std::sync::OnceLock;

use pyo3::prelude::*;

use crate::errors::ZarrowError;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// The runtime (I/O and timers), started on first use: a worker per core this process may
/// use, as Tokio sizes it (`TOKIO_WORKER_THREADS` sets another number). A whole-table read
/// decodes on every worker at once; with two, a 16-core machine read on two.
pub(crate) fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("zarrow")
        .enable_all()
        .build()
        .map_err(|e| ZarrowError::new_err(format!("cannot start the async runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Runs `fut` to completion on the runtime with the GIL released.
pub(crate) fn block_on<F>(py: Python<'_>, fut: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    Ok(py.detach(|| rt.block_on(fut)))
}
