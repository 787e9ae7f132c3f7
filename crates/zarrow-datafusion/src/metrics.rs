//! The scan's metrics: every name the zarr scan reports in DataFusion's metrics set (shown by
//! `EXPLAIN ANALYZE`), where they are created, and how they are read back into
//! [`ScanCounts`].

use std::time::Duration;

use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricValue, MetricsSet, Time,
};
use zarrow::ScanCounts;

/// Requests made to open the table (its metadata documents).
pub const METADATA_REQUESTS: &str = "metadata_requests";
/// Bytes of metadata documents read.
pub const METADATA_BYTES: &str = "metadata_bytes";
/// Time spent reading metadata.
pub const METADATA_TIME: &str = "metadata_time";
/// Chunks pruned by the filters when the scan was planned.
pub const CHUNKS_PRUNED: &str = "chunks_pruned";
/// Time spent pruning when the scan was planned.
pub const PRUNING_TIME: &str = "pruning_time";
/// Chunks read.
pub const CHUNKS_READ: &str = "chunks_read";
/// Chunks skipped while running (dynamic filters, such as a join's or a top-k's).
pub const CHUNKS_PRUNED_AT_RUN_TIME: &str = "chunks_pruned_at_run_time";
/// Requests made for chunk data.
pub const REQUESTS: &str = "requests";
/// Bytes of chunk data fetched.
pub const BYTES_FETCHED: &str = "bytes_fetched";
/// Time spent fetching chunk data.
pub const FETCH_TIME: &str = "fetch_time";
/// Time spent decompressing.
pub const DECOMPRESS_TIME: &str = "decompress_time";
/// Time spent decoding into Arrow.
pub const DECODE_TIME: &str = "decode_time";
/// Rows the scan produced (DataFusion's own baseline metric).
pub const OUTPUT_ROWS: &str = "output_rows";

fn count_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn add_time(set: &ExecutionPlanMetricsSet, name: &'static str, spent: Duration) {
    let time = Time::new();
    time.add_duration(spent);
    MetricBuilder::new(set).build(MetricValue::Time {
        name: name.into(),
        time,
    });
}

/// Records the planning phase: `pruned` chunks pruned in `pruning_time`.
pub(crate) fn record_pruning(set: &ExecutionPlanMetricsSet, pruned: u64, pruning_time: Duration) {
    MetricBuilder::new(set)
        .global_counter(CHUNKS_PRUNED)
        .add(count_of(pruned));
    add_time(set, PRUNING_TIME, pruning_time);
}

/// Records the requests that opened the table (unlabelled: not any partition's).
pub(crate) fn record_opening(set: &ExecutionPlanMetricsSet, opened: &ScanCounts) {
    MetricBuilder::new(set)
        .global_counter(METADATA_REQUESTS)
        .add(count_of(opened.metadata_requests));
    MetricBuilder::new(set)
        .global_counter(METADATA_BYTES)
        .add(count_of(opened.metadata_bytes));
    add_time(set, METADATA_TIME, opened.metadata_time);
}

/// Adds up the scan's metrics in `metrics` (all partitions and the planning phase).
pub(crate) fn scan_counts(metrics: &MetricsSet) -> ScanCounts {
    let mut c = ScanCounts::default();
    for m in metrics.iter() {
        let n = m.value().as_usize() as u64;
        let d = Duration::from_nanos(n);
        match m.value().name() {
            OUTPUT_ROWS => c.rows_out += n,
            METADATA_REQUESTS => c.metadata_requests += n,
            METADATA_BYTES => c.metadata_bytes += n,
            METADATA_TIME => c.metadata_time += d,
            CHUNKS_READ => c.chunks_read += n,
            CHUNKS_PRUNED_AT_RUN_TIME => c.chunks_pruned_at_run_time += n,
            REQUESTS => c.requests += n,
            BYTES_FETCHED => c.bytes_fetched += n,
            FETCH_TIME => c.fetch_time += d,
            DECOMPRESS_TIME => c.decompress_time += d,
            DECODE_TIME => c.decode_time += d,
            _ => {}
        }
    }
    c
}

/// One partition's scan counters in the source's metrics set.
#[derive(Debug, Clone)]
pub(crate) struct PartitionMetrics {
    metadata_requests: Count,
    metadata_bytes: Count,
    metadata_time: Time,
    chunks_read: Count,
    chunks_pruned_at_run_time: Count,
    requests: Count,
    bytes_fetched: Count,
    fetch_time: Time,
    decompress_time: Time,
    decode_time: Time,
}

impl PartitionMetrics {
    /// The counters of `partition`, registered in `set`.
    pub(crate) fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count = |name: &'static str| MetricBuilder::new(set).counter(name, partition);
        let time = |name: &'static str| MetricBuilder::new(set).subset_time(name, partition);
        PartitionMetrics {
            metadata_requests: count(METADATA_REQUESTS),
            metadata_bytes: count(METADATA_BYTES),
            metadata_time: time(METADATA_TIME),
            chunks_read: count(CHUNKS_READ),
            chunks_pruned_at_run_time: count(CHUNKS_PRUNED_AT_RUN_TIME),
            requests: count(REQUESTS),
            bytes_fetched: count(BYTES_FETCHED),
            fetch_time: time(FETCH_TIME),
            decompress_time: time(DECOMPRESS_TIME),
            decode_time: time(DECODE_TIME),
        }
    }

    /// Adds what `now` counts beyond `seen` (what was added before).
    pub(crate) fn add_since(&self, now: &ScanCounts, seen: &ScanCounts) {
        let add = |c: &Count, n: u64, s: u64| c.add(count_of(n.saturating_sub(s)));
        let add_time = |t: &Time, n: Duration, s: Duration| t.add_duration(n.saturating_sub(s));
        add(
            &self.metadata_requests,
            now.metadata_requests,
            seen.metadata_requests,
        );
        add(
            &self.metadata_bytes,
            now.metadata_bytes,
            seen.metadata_bytes,
        );
        add_time(&self.metadata_time, now.metadata_time, seen.metadata_time);
        add(&self.chunks_read, now.chunks_read, seen.chunks_read);
        add(
            &self.chunks_pruned_at_run_time,
            now.chunks_pruned_at_run_time,
            seen.chunks_pruned_at_run_time,
        );
        add(&self.requests, now.requests, seen.requests);
        add(&self.bytes_fetched, now.bytes_fetched, seen.bytes_fetched);
        add_time(&self.fetch_time, now.fetch_time, seen.fetch_time);
        add_time(
            &self.decompress_time,
            now.decompress_time,
            seen.decompress_time,
        );
        add_time(&self.decode_time, now.decode_time, seen.decode_time);
    }
}
