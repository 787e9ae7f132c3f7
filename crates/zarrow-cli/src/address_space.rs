//! Running under an address-space limit (`ulimit -v`, `RLIMIT_AS`).
//!
//! Such a limit counts what is reserved, not what is used, and a process of this command
//! reserves a lot it never touches: mimalloc (the allocator of every Rust allocation) reserves
//! its first 1 GiB arena at start, each thread a 2 MiB stack, and glibc's malloc — which serves
//! only the C codecs and thread bookkeeping here, such as the registration of a thread-local's
//! destructor — an arena of 64 MiB (128 MiB while it aligns it) for each thread that calls it,
//! up to eight per core. Near the limit, whichever thread next asks for an arena or a stack
//! fails, at a moment that depends on the machine's load and cores: glibc aborts ("failed to
//! register TLS destructor: out of memory"), an allocation aborts, or a thread cannot start —
//! during the query or after its rows were printed, as threads still start and end then. A
//! runtime whose worker threads cannot all start does not even fail: tokio's `build` hangs.
//!
//! So, under a limit, [`fit`] holds glibc to two arenas before any thread starts (they serve
//! little), and [`runtime`] starts no more threads than the room left allows. Without a limit
//! nothing changes.

use std::time::Duration;

/// What one thread may take of the room left under the limit: its stack, its signal stack,
/// and a share of the buffers it works on.
const PER_THREAD: u64 = 16 << 20;

/// glibc's arenas under a limit.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: i32 = 2;

/// The address-space limit in bytes, if there is one.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through the pointer, which is valid for the call.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    (got == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit() -> Option<u64> {
    None
}

/// The address space this process has reserved so far, in bytes (`VmSize`).
fn reserved() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Under an address-space limit: hold glibc's malloc to [`ARENAS`] arenas, and say how much
/// room is left (bytes) for what the process reserves from here on. `None`: no limit. Call it
/// first thing, before any thread starts (glibc reads the setting as threads ask for arenas).
pub(crate) fn fit() -> Option<u64> {
    let limit = limit()?;
    hold_arenas();
    Some(limit.saturating_sub(reserved().unwrap_or(0)))
}

/// glibc's malloc held to [`ARENAS`] arenas.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn hold_arenas() {
    // SAFETY: mallopt sets one of malloc's parameters; no thread is running yet to race it.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn hold_arenas() {}

/// How many threads the runtime would start by default: `TOKIO_WORKER_THREADS`, as tokio reads
/// it, else one a core.
fn default_workers() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The runtime's builder: tokio's defaults, or, with `room` left under an address-space limit,
/// as many threads as fit in it (at least one worker and one blocking thread) — half of them
/// workers, at most as many as there would be by default.
pub(crate) fn runtime(room: Option<u64>) -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(room) = room {
        let threads = usize::try_from(room / PER_THREAD).unwrap_or(usize::MAX);
        let workers = (threads / 2).clamp(1, default_workers());
        builder
            .worker_threads(workers)
            .max_blocking_threads(threads.saturating_sub(workers).max(1))
            // A blocking thread, once started, stays until the runtime ends: tokio panics when
            // it cannot start a thread for a pool that has none left, and under the limit
            // starting one may fail.
            .thread_keep_alive(Duration::from_secs(3600));
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserved_address_space_is_read() {
        assert!(reserved().is_some_and(|r| r > 1 << 20));
    }
}
