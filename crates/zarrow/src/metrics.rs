//! What a scan did, counted as it runs: first its metadata phase (the requests that opened
//! the table's nodes — documents, listings — and their bytes and time), then its chunks:
//! chunks and rows, requests and bytes fetched, and the time spent fetching, decompressing
//! and decoding.
//!
//! A [`ScanMetrics`] is a handle on shared atomic counters: clones count into the same
//! numbers, so every task of a scan (fetches run as tasks of their own) adds to one set.
//! zarrow-datafusion shows them in `EXPLAIN ANALYZE`; the CLI prints them with `--verbose`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counters of one scan (or one partition of it); see the module docs.
///
/// ```
/// use std::time::Duration;
///
/// use zarrow::ScanMetrics;
///
/// let metrics = ScanMetrics::new();
/// // Clones count into the same counters (a scan's partitions share them).
/// let partition = metrics.clone();
/// partition.add_chunk();
/// partition.add_rows(250);
/// partition.add_fetch(4096, Duration::from_millis(3));
/// assert_eq!(partition.time_decode(|| 2 + 2), 4);
///
/// let counts = metrics.counts();
/// assert_eq!((counts.chunks_read, counts.rows_out), (1, 250));
/// assert_eq!((counts.requests, counts.bytes_fetched), (1, 4096));
/// assert_eq!(counts.fetch_time, Duration::from_millis(3));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ScanMetrics {
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    metadata_requests: AtomicU64,
    metadata_bytes: AtomicU64,
    metadata_nanos: AtomicU64,
    chunks_read: AtomicU64,
    chunks_pruned_at_run_time: AtomicU64,
    rows_out: AtomicU64,
    requests: AtomicU64,
    bytes_fetched: AtomicU64,
    fetch_nanos: AtomicU64,
    decompress_nanos: AtomicU64,
    decode_nanos: AtomicU64,
}

/// A snapshot of [`ScanMetrics`].
///
/// ```
/// use zarrow::{ScanCounts, ScanMetrics};
///
/// let (a, b) = (ScanMetrics::new(), ScanMetrics::new());
/// a.add_rows(10);
/// b.add_rows(32);
/// // Snapshots add up: the partitions of a query into its total.
/// let mut total = ScanCounts::default();
/// total += a.counts();
/// total += b.counts();
/// assert_eq!(total.rows_out, 42);
/// assert!(total.to_string().contains("rows_out=42"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCounts {
    /// Requests made to open the table's nodes (metadata documents, listings, and the `HEAD`s
    /// that open a fresh remote store's connections: `warm_connections`).
    pub metadata_requests: u64,
    /// Bytes of metadata documents read.
    pub metadata_bytes: u64,
    /// Time spent waiting for metadata (summed over concurrent requests).
    pub metadata_time: Duration,
    /// Chunks of rows read.
    pub chunks_read: u64,
    /// Chunks of rows the scan skipped as it ran: a filter learnt while the query ran (see
    /// [`crate::ChunkFilter`]) ruled them out.
    pub chunks_pruned_at_run_time: u64,
    /// Rows handed out.
    pub rows_out: u64,
    /// Requests made to the store for chunk data (shard indexes included).
    pub requests: u64,
    /// Bytes of chunk data fetched.
    pub bytes_fetched: u64,
    /// Time spent waiting for chunk data (summed over concurrent fetches).
    pub fetch_time: Duration,
    /// Time spent in bytes-to-bytes codecs (decompression, checksums).
    pub decompress_time: Duration,
    /// Time spent turning chunk bytes into Arrow arrays, decompression included.
    pub decode_time: Duration,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ScanMetrics {
    /// Fresh counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// One chunk of rows read.
    pub fn add_chunk(&self) {
        self.counters.chunks_read.fetch_add(1, Ordering::Relaxed);
    }

    /// One chunk of rows skipped, ruled out by a filter at run time.
    pub fn add_pruned_at_run_time(&self) {
        let c = &self.counters;
        c.chunks_pruned_at_run_time.fetch_add(1, Ordering::Relaxed);
    }

    /// Rows handed out.
    pub fn add_rows(&self, rows: usize) {
        let rows = u64::try_from(rows).unwrap_or(u64::MAX);
        self.counters.rows_out.fetch_add(rows, Ordering::Relaxed);
    }

    /// One request for chunk data that returned `bytes` bytes after waiting `time`.
    pub fn add_fetch(&self, bytes: usize, time: Duration) {
        self.add_fetches(1, bytes, time);
    }

    /// `requests` requests for chunk data (the parts of one read) that returned `bytes` bytes
    /// in all after waiting `time`.
    pub fn add_fetches(&self, requests: usize, bytes: usize, time: Duration) {
        let c = &self.counters;
        let requests = u64::try_from(requests).unwrap_or(u64::MAX);
        c.requests.fetch_add(requests, Ordering::Relaxed);
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        c.bytes_fetched.fetch_add(bytes, Ordering::Relaxed);
        c.fetch_nanos.fetch_add(nanos(time), Ordering::Relaxed);
    }

    /// One metadata request (a document read, or found missing; a listing) that returned
    /// `bytes` bytes after waiting `time`.
    pub fn add_metadata(&self, bytes: usize, time: Duration) {
        let c = &self.counters;
        c.metadata_requests.fetch_add(1, Ordering::Relaxed);
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        c.metadata_bytes.fetch_add(bytes, Ordering::Relaxed);
        c.metadata_nanos.fetch_add(nanos(time), Ordering::Relaxed);
    }

    /// Add a metadata phase counted elsewhere (a table opened before its scan).
    pub fn add_metadata_counts(&self, counts: &ScanCounts) {
        let c = &self.counters;
        let add = |a: &AtomicU64, n: u64| a.fetch_add(n, Ordering::Relaxed);
        add(&c.metadata_requests, counts.metadata_requests);
        add(&c.metadata_bytes, counts.metadata_bytes);
        add(&c.metadata_nanos, nanos(counts.metadata_time));
    }

    /// Time spent decompressing.
    pub fn add_decompress(&self, time: Duration) {
        let c = &self.counters;
        c.decompress_nanos.fetch_add(nanos(time), Ordering::Relaxed);
    }

    /// Runs `f` (a bytes-to-bytes codec), adding its time to the decompression time.
    pub fn time_decompress<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add_decompress(start.elapsed());
        out
    }

    /// Time spent decoding (decompression included).
    pub fn add_decode(&self, time: Duration) {
        let c = &self.counters;
        c.decode_nanos.fetch_add(nanos(time), Ordering::Relaxed);
    }

    /// Runs `f`, adding its time to the decode time.
    pub fn time_decode<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add_decode(start.elapsed());
        out
    }

    /// The counts so far.
    pub fn counts(&self) -> ScanCounts {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ScanCounts {
            metadata_requests: get(&c.metadata_requests),
            metadata_bytes: get(&c.metadata_bytes),
            metadata_time: Duration::from_nanos(get(&c.metadata_nanos)),
            chunks_read: get(&c.chunks_read),
            chunks_pruned_at_run_time: get(&c.chunks_pruned_at_run_time),
            rows_out: get(&c.rows_out),
            requests: get(&c.requests),
            bytes_fetched: get(&c.bytes_fetched),
            fetch_time: Duration::from_nanos(get(&c.fetch_nanos)),
            decompress_time: Duration::from_nanos(get(&c.decompress_nanos)),
            decode_time: Duration::from_nanos(get(&c.decode_nanos)),
        }
    }
}

impl std::ops::AddAssign for ScanCounts {
    fn add_assign(&mut self, o: ScanCounts) {
        self.metadata_requests += o.metadata_requests;
        self.metadata_bytes += o.metadata_bytes;
        self.metadata_time += o.metadata_time;
        self.chunks_read += o.chunks_read;
        self.chunks_pruned_at_run_time += o.chunks_pruned_at_run_time;
        self.rows_out += o.rows_out;
        self.requests += o.requests;
        self.bytes_fetched += o.bytes_fetched;
        self.fetch_time += o.fetch_time;
        self.decompress_time += o.decompress_time;
        self.decode_time += o.decode_time;
    }
}

impl std::fmt::Display for ScanCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "metadata_requests={} metadata_bytes={} metadata_time={:.3?} \
             chunks_read={} rows_out={} requests={} bytes_fetched={} fetch_time={:.3?} \
             decompress_time={:.3?} decode_time={:.3?}",
            self.metadata_requests,
            self.metadata_bytes,
            self.metadata_time,
            self.chunks_read,
            self.rows_out,
            self.requests,
            self.bytes_fetched,
            self.fetch_time,
            self.decompress_time,
            self.decode_time
        )?;
        if self.chunks_pruned_at_run_time > 0 {
            write!(
                f,
                " chunks_pruned_at_run_time={}",
                self.chunks_pruned_at_run_time
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_count_into_one_set() {
        let m = ScanMetrics::new();
        let other = m.clone();
        m.add_fetch(10, Duration::from_millis(2));
        other.add_fetch(5, Duration::from_millis(1));
        other.add_rows(7);
        m.add_chunk();
        let c = m.counts();
        assert_eq!(
            (c.requests, c.bytes_fetched, c.rows_out, c.chunks_read),
            (2, 15, 7, 1)
        );
        assert_eq!(c.fetch_time, Duration::from_millis(3));
        m.add_fetches(3, 30, Duration::from_millis(1));
        other.add_metadata(100, Duration::from_millis(4));
        let c = m.counts();
        assert_eq!((c.requests, c.bytes_fetched), (5, 45));
        assert_eq!((c.metadata_requests, c.metadata_bytes), (1, 100));
        let fresh = ScanMetrics::new();
        fresh.add_metadata_counts(&c);
        assert_eq!(fresh.counts().metadata_requests, 1);
        assert_eq!(fresh.counts().requests, 0);
    }
}
