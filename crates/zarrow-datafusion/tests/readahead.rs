//! Read-ahead in SQL scans: each partition keeps `concurrency` chunk reads in flight when the
//! session's memory pool is unbounded, and under a memory limit one chunk of rows ahead, whose
//! request waits until the budget grants what a chunk takes. The store hangs every chunk GET
//! (or counts them), so what is in flight once the scans have started is exactly the
//! read-ahead.

mod common;

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

/// 64 chunks of 4 int32 values, over a store whose chunk GETs never answer.
async fn hanging_array() -> (ZarrStore, Arc<CountingStore>) {
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
    store.hang = Some(|p: &Path| p.as_ref().contains("/c/"));
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

async fn in_flight_for(memory_limit: Option<usize>) -> usize {
    let (zarr, store) = hanging_array().await;
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
    assert_eq!(in_flight_for(None).await, 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_sends_no_request_before_its_reservation() {
    // 2 partitions × the first chunk: the chunk ahead reserves what the first took before its
    // request, and the first never arrives.
    assert_eq!(in_flight_for(Some(64 << 20)).await, 2);
}

/// A budget of `limit` bytes.
#[derive(Debug)]
struct Limit(usize, std::sync::atomic::AtomicUsize);

impl zarrow::ScanMemory for Limit {
    fn try_grow(&self, bytes: usize) -> Result<(), String> {
        let now = self.1.load(Ordering::SeqCst);
        if now + bytes > self.0 {
            return Err(format!("{bytes} bytes more than the {} left", self.0 - now));
        }
        self.1.fetch_add(bytes, Ordering::SeqCst);
        Ok(())
    }
    fn shrink(&self, bytes: usize) {
        self.1.fetch_sub(bytes, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chunk_ahead_is_not_requested_until_the_budget_has_room_for_it() {
    // 4 chunks of 100,000 int64 (800 kB stored each) under a budget of 1.5 chunks: while the
    // first chunk is being handed out, the second must not be fetched (it would be held
    // outside the budget); once the first is handed out it is, and the scan is whole.
    let mem = Arc::new(InMemory::new());
    let plain = ZarrStore::new(mem.clone(), Path::from("s"));
    let values = arrow::array::Int64Array::from_iter_values(0..400_000);
    let options = ZarrWriteOptions {
        chunk_shape: Some(vec![100_000]),
        write_empty_chunks: true,
        ..Default::default()
    };
    zarrow::write_array(&plain, "v", &values, &[400_000], &options)
        .await
        .unwrap();
    let store = Arc::new(CountingStore::new(mem));
    let zarr = ZarrStore::new(store.clone(), Path::from("s")).child("v");
    let node = zarrow::Node::open_store(zarr, "v").await.unwrap();
    let model = Arc::new(
        zarrow::TableModel::from_node(node, zarrow::TableOptions::default())
            .await
            .unwrap(),
    );
    let limit = Arc::new(Limit(1_200_000, 0.into()));
    let ctx = zarrow::ScanContext {
        memory: Some(limit.clone()),
        ..Default::default()
    };
    let before = store.gets.load(Ordering::SeqCst);
    let mut stream = zarrow::ZarrScan::new(&model)
        .stream(model.clone(), ctx)
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        store.gets.load(Ordering::SeqCst) - before,
        1,
        "the chunk ahead was requested while the budget had no room for it"
    );
    assert!(limit.1.load(Ordering::SeqCst) <= 1_200_000);
    let mut rows = first.num_rows();
    while let Some(batch) = stream.next().await {
        rows += batch.unwrap().num_rows();
        assert!(limit.1.load(Ordering::SeqCst) <= 1_200_000);
    }
    assert_eq!(rows, 400_000);
    assert_eq!(store.gets.load(Ordering::SeqCst) - before, 4);
}
