//! Read-ahead in SQL scans: each partition keeps `concurrency` chunk reads in flight when the
//! session's memory pool is unbounded, and one chunk of rows ahead under a memory limit. The
//! store hangs every chunk GET, so what is in flight once the scans have started is exactly
//! the read-ahead.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::Int32Array;
use common::CountingStore;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use zarrow::writer::ZarrWriteOptions;
use zarrow::ZarrStore;
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
    let plan = ctx
        .sql("SELECT max(v) FROM t")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let mut stream = execute_stream(plan, ctx.task_ctx()).unwrap();
    let first = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(first.is_err(), "a hung chunk produced a batch");
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
async fn a_memory_limit_keeps_one_chunk_of_rows_ahead() {
    // 2 partitions × (the chunk being handed out + one ahead)
    assert_eq!(in_flight_for(Some(64 << 20)).await, 4);
}
