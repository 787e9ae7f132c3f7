//! Cancellation: a scan dropped mid-read stops its in-flight fetches. The store hangs every
//! chunk GET (metadata answers), so a scan that has started holds fetches in flight until it
//! is dropped; afterwards no fetch may still be pending and no task zarrow or DataFusion
//! spawned for the query may still be alive.

use crate::common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::{hung_query, CountingStore};
use datafusion::prelude::SessionConfig;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use zarrow::{Node, ScanContext, TableModel, TableOptions, ZarrScan, ZarrStore};
use zarrow_datafusion::{zarr_session_context, ZarrTable, ZarrTableOptions};

/// v3 chunk keys (`…/c/i/j`) hang; metadata documents answer.
fn chunks_hang(path: &Path) -> bool {
    path.as_ref().contains("/c/")
}

/// A store over the fixture `name` whose chunk GETs never answer.
fn hanging(name: &str) -> (ZarrStore, Arc<CountingStore>) {
    let root = zarrow_testkit::fixtures_dir().join(name);
    let mut store = CountingStore::new(Arc::new(LocalFileSystem::new()));
    store.hang = Some(chunks_hang);
    let store = Arc::new(store);
    let zarr = ZarrStore::new(store.clone(), Path::from_absolute_path(root).unwrap());
    (zarr, store)
}

fn alive() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Wait (up to 5 s) until nothing is in flight and no task beyond `baseline` is alive;
/// return what is left.
async fn settled(store: &CountingStore, baseline: usize) -> (usize, usize) {
    for _ in 0..100 {
        if store.in_flight.load(Ordering::SeqCst) == 0 && alive() <= baseline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (
        store.in_flight.load(Ordering::SeqCst),
        alive().saturating_sub(baseline),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_scan_stops_its_fetches() {
    let baseline = alive();
    let (zarr, store) = hanging("v3_strings.zarr");
    let node = Node::open_store(zarr, "string_2d").await.unwrap();
    let model = Arc::new(
        TableModel::from_node(node, TableOptions::default())
            .await
            .unwrap(),
    );
    let mut stream = ZarrScan::new(&model)
        .stream(model.clone(), ScanContext::default())
        .unwrap();
    // The first batch cannot come: its chunk hangs. Meanwhile fetches are in flight, each a
    // task of its own.
    let first = tokio::time::timeout(Duration::from_millis(500), stream.next()).await;
    assert!(first.is_err(), "a hung chunk produced a batch");
    let in_flight = store.in_flight.load(Ordering::SeqCst);
    assert!(
        in_flight >= 2,
        "expected fetches ahead in flight, found {in_flight}"
    );
    assert!(alive() > baseline, "the fetches run as tasks");
    drop(stream);
    assert_eq!(
        settled(&store, baseline).await,
        (0, 0),
        "(fetches, tasks) left after the drop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_query_stops_its_fetches() {
    let baseline = alive();
    let (zarr, store) = hanging("v3_strings.zarr/string_2d");
    let table = ZarrTable::try_new_with_store(zarr, ZarrTableOptions::default())
        .await
        .unwrap();
    // Several partitions, so DataFusion spawns tasks of its own (repartition, merge).
    let ctx = zarr_session_context(SessionConfig::new().with_target_partitions(4));
    ctx.register_table("t", Arc::new(table)).unwrap();
    let stream = hung_query(
        &ctx,
        "SELECT string_2d, count(*) FROM t GROUP BY string_2d",
        Duration::from_millis(500),
    )
    .await;
    assert!(store.in_flight.load(Ordering::SeqCst) >= 2);
    assert!(alive() > baseline);
    drop(stream);
    assert_eq!(
        settled(&store, baseline).await,
        (0, 0),
        "(fetches, tasks) left after the drop"
    );
}
