//! Failpoints: the writes of one writer, counted, so that tests can stop a writer before any
//! of them as if it were killed there.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::{Error, Result};

/// The writes of one writer, counted; with a failpoint set (tests), the writer stops before
/// the failpoint's write as if it were killed there (an error, and no cleanup), or fails
/// there as if the write had failed (an error, and the writer's cleanup runs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Steps(Option<Arc<StepsInner>>);

#[derive(Debug)]
struct StepsInner {
    count: AtomicUsize,
    fail_at: usize,
    /// A kill (no cleanup), or a failed write.
    kill: bool,
    crashed: AtomicBool,
}

impl Steps {
    /// Stop before write number `n` (from 0).
    #[cfg(test)]
    pub(crate) fn fail_at(n: usize) -> Self {
        Self::failing(n, true)
    }

    /// Fail write number `n` (from 0) with an error, as a full disk would: the writer's
    /// cleanup runs.
    #[cfg(test)]
    pub(crate) fn error_at(n: usize) -> Self {
        Self::failing(n, false)
    }

    #[cfg(test)]
    fn failing(n: usize, kill: bool) -> Self {
        Self(Some(Arc::new(StepsInner {
            count: AtomicUsize::new(0),
            fail_at: n,
            kill,
            crashed: AtomicBool::new(false),
        })))
    }

    /// Before a write (`what` names it in the failpoint's error).
    pub(crate) fn hit(&self, what: &str) -> Result<()> {
        let Some(inner) = &self.0 else {
            return Ok(());
        };
        if inner.crashed.load(Ordering::SeqCst) {
            return Err(failpoint(what));
        }
        if inner.count.fetch_add(1, Ordering::SeqCst) == inner.fail_at {
            inner.crashed.store(inner.kill, Ordering::SeqCst);
            return Err(failpoint(what));
        }
        Ok(())
    }

    /// Whether the failpoint was reached (killed or failed there).
    #[cfg(test)]
    pub(crate) fn reached(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|i| i.count.load(Ordering::SeqCst) > i.fail_at)
    }

    /// Whether the writer stopped at the failpoint (cleanup is then left undone, as after a
    /// kill).
    pub(crate) fn crashed(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|i| i.crashed.load(Ordering::SeqCst))
    }
}

fn failpoint(what: &str) -> Error {
    Error::Write {
        path: what.to_string(),
        message: "stopped at a failpoint (test)".into(),
    }
}
