//! Read-ahead, bounded by bytes: each partition keeps `concurrency` chunk reads in flight when
//! the session's memory pool is unbounded, and under a memory limit as many as the budget
//! grants, each request sent only once its reservation is made. The store hangs chunk GETs (or
//! logs them with how far the consumer had got), so what is in flight once the scans have
//! started is exactly the read-ahead.

use crate::common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::Int32Array;
use common::{hung_query, CountingStore};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use zarrow::ZarrStore;
use zarrow::ZarrWriteOptions;
use zarrow_datafusion::{zarr_session_context_with_runtime, ZarrTable, ZarrTableOptions};
use zarrow_testkit::Budget;

/// 64 chunks of 4 int32 values, over a store whose chunk GETs that `hang` picks never answer.
async fn hanging_array(hang: fn(&Path) -> bool) -> (ZarrStore, Arc<CountingStore>) {
    let mem = Arc::new(InMemory::new());
    let plain = ZarrStore::new(mem.clone(), Path::from("s"));
    let values = Int32Array::from_iter_values(0..256);
    let options = ZarrWriteOptions {
        chunk_shape: Some(vec![4]),
        write_empty_chunks: true,
        ..Default::default()
    };
    zarrow::write_array(&plain, "v", &values, &[256], &options)
        .await
        .unwrap();
    let mut store = CountingStore::new(mem);
    store.hang = Some(hang);
    let store = Arc::new(store);
    (
        ZarrStore::new(store.clone(), Path::from("s")).child("v"),
        store,
    )
}

/// How many chunk GETs are in flight once they stop growing (at most 3 s).
async fn steady_in_flight(store: &CountingStore) -> usize {
    let mut last = usize::MAX;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = store.in_flight.load(Ordering::SeqCst);
        if now == last && now > 0 {
            return now;
        }
        last = now;
    }
    last
}

/// Every chunk GET hangs.
fn every_chunk(p: &Path) -> bool {
    p.as_ref().contains("/c/")
}

/// Every chunk GET but the first of each of 2 partitions (64 chunks: 0 and 32) hangs.
fn all_but_the_first_chunks(p: &Path) -> bool {
    every_chunk(p) && !p.as_ref().ends_with("/c/0") && !p.as_ref().ends_with("/c/32")
}

async fn in_flight_for(memory_limit: Option<usize>, hang: fn(&Path) -> bool) -> usize {
    let (zarr, store) = hanging_array(hang).await;
    let table = ZarrTable::try_new_with_store(zarr, ZarrTableOptions::default())
        .await
        .unwrap();
    let mut runtime = RuntimeEnvBuilder::new();
    if let Some(limit) = memory_limit {
        runtime = runtime.with_memory_limit(limit, 1.0);
    }
    let config = SessionConfig::new().with_target_partitions(2);
    let ctx = zarr_session_context_with_runtime(config, runtime.build_arc().unwrap());
    ctx.sql("SET zarrow.concurrency = 8").await.unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let stream = hung_query(&ctx, "SELECT max(v) FROM t", Duration::from_millis(200)).await;
    let n = steady_in_flight(&store).await;
    drop(stream);
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbounded_pool_keeps_concurrency_reads_in_flight_per_partition() {
    // 2 partitions × concurrency 8 (one array per chunk of rows)
    assert_eq!(in_flight_for(None, every_chunk).await, 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_sends_no_request_before_its_reservation() {
    // 2 partitions × the first chunk: a chunk ahead reserves what the first took before its
    // request, and the first never arrives.
    assert_eq!(in_flight_for(Some(64 << 20), every_chunk).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_with_room_keeps_concurrency_reads_in_flight_per_partition() {
    // The first chunk of each partition arrives; then 2 partitions × concurrency 8 chunks
    // ahead reserve their 16 bytes in a pool of 64 MiB and are requested (2 a partition
    // before this change: one chunk of rows ahead whatever the pool).
    assert_eq!(
        in_flight_for(Some(64 << 20), all_but_the_first_chunks).await,
        16
    );
}

/// Rows in a chunk of [`big_chunks`], and its stored bytes (int64, no compression).
const CHUNK_ROWS: usize = 100_000;
const CHUNK_BYTES: usize = 800_000;

/// 8 chunks of 100,000 int64 (800 kB stored each), as a table over a store that hangs the
/// chunk GETs `hang` picks.
async fn big_chunks(
    hang: Option<fn(&Path) -> bool>,
) -> (Arc<zarrow::TableModel>, Arc<CountingStore>) {
    let mem = Arc::new(InMemory::new());
    let plain = ZarrStore::new(mem.clone(), Path::from("s"));
    let values = arrow::array::Int64Array::from_iter_values(0..8 * CHUNK_ROWS as i64);
    let options = ZarrWriteOptions {
        chunk_shape: Some(vec![CHUNK_ROWS as u64]),
        write_empty_chunks: true,
        ..Default::default()
    };
    zarrow::write_array(&plain, "v", &values, &[8 * CHUNK_ROWS as u64], &options)
        .await
        .unwrap();
    let mut store = CountingStore::new(mem);
    store.hang = hang;
    let store = Arc::new(store);
    let zarr = ZarrStore::new(store.clone(), Path::from("s")).child("v");
    let node = zarrow::Node::open_store(zarr, "v").await.unwrap();
    let model = zarrow::TableModel::from_node(node, zarrow::TableOptions::default())
        .await
        .unwrap();
    (Arc::new(model), store)
}

/// A scan of `model` (concurrency 16) reserving from `memory`.
fn stream_in(
    model: &Arc<zarrow::TableModel>,
    memory: Arc<Budget>,
) -> zarrow::ZarrRecordBatchStream {
    let ctx = zarrow::ScanContext {
        memory: Some(memory),
        ..Default::default()
    };
    zarrow::ZarrScan::new(model)
        .stream(model.clone(), ctx)
        .unwrap()
}

/// Chunk GETs in flight while the first chunk (which arrives) is being handed out and every
/// other chunk's GET hangs, under `memory`: once `expected` are (at most 10 s), and again a
/// moment later (more would be read-ahead the budget did not allow).
async fn in_flight_while_the_first_is_handed_out(memory: Arc<Budget>, expected: usize) -> usize {
    let (model, store) = big_chunks(Some(|p: &Path| {
        p.as_ref().contains("/c/") && !p.as_ref().ends_with("/c/0")
    }))
    .await;
    let mut stream = stream_in(&model, memory.clone());
    let first = stream.next().await.unwrap().unwrap();
    assert!(
        first.num_rows() < CHUNK_ROWS,
        "the first chunk is still being handed out"
    );
    for _ in 0..100 {
        if store.in_flight.load(Ordering::SeqCst) >= expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = store.in_flight.load(Ordering::SeqCst);
    assert!(memory.peak.load(Ordering::SeqCst) <= memory.limit);
    drop(stream);
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_ahead_is_what_the_budget_grants() {
    // The first chunk held (800 kB), each chunk ahead holds 800 kB before its request: a
    // budget of 4.5 chunks leaves 3 requests in flight; with room for 20, all 7 other chunks
    // (concurrency 16: 2 before this change, one chunk of rows ahead whatever the budget).
    let tight = Budget::new(4 * CHUNK_BYTES + CHUNK_BYTES / 2);
    assert_eq!(in_flight_while_the_first_is_handed_out(tight, 3).await, 3);
    let roomy = Budget::new(20 * CHUNK_BYTES);
    assert_eq!(in_flight_while_the_first_is_handed_out(roomy, 7).await, 7);
    // The read-ahead limit (DataFusion's pools: a partition's share of half the pool) stops
    // it short of the budget: 2.5 chunks, the first held, one ahead.
    let shared = Budget::with_read_ahead(20 * CHUNK_BYTES, Some(2 * CHUNK_BYTES + CHUNK_BYTES / 2));
    assert_eq!(in_flight_while_the_first_is_handed_out(shared, 1).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chunk_ahead_is_not_requested_until_the_budget_has_room_for_it() {
    // 8 chunks of 800 kB under budgets of 1.5 and 3.5 chunks (1 and 3 held at once): chunk k
    // is requested only once the consumer has received every row of chunk k - 1 (resp.
    // k - 3), as logged with each GET,
    // the budget is never exceeded, and the scan is whole. (Before, a chunk two ahead could
    // take the room of the one whose turn had come, which then failed: 3 runs in 30.)
    for (budget, held) in [(3 * CHUNK_BYTES / 2, 1), (7 * CHUNK_BYTES / 2, 3)] {
        let (model, store) = big_chunks(None).await;
        let limit = Budget::new(budget);
        let before = store.gets.load(Ordering::SeqCst);
        let mut stream = stream_in(&model, limit.clone());
        let mut rows = 0;
        while let Some(batch) = stream.next().await {
            rows += batch.unwrap().num_rows();
            store.mark.store(rows, Ordering::SeqCst);
        }
        assert_eq!(rows, 8 * CHUNK_ROWS);
        assert!(limit.peak.load(Ordering::SeqCst) <= budget);
        let log = store.log.lock().unwrap().clone();
        assert_eq!(log.len() - before, 8, "{log:?}");
        for (path, received) in &log[before..] {
            let k: usize = path.rsplit('/').next().unwrap().parse().unwrap();
            assert!(
                *received >= (k + 1).saturating_sub(held) * CHUNK_ROWS,
                "budget {budget}: chunk {k} was requested after {received} rows: {log:?}"
            );
        }
    }
}
