//! What opening a node costs in requests: each kind of store opened through a store that
//! records every request (documents read or found missing, listings), with the counts the
//! format allows.

use std::sync::Arc;
use std::time::Duration;

use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::ObjectStore;
use zarrow_testkit::RecordingStore;

use crate::store::ZarrStore;
use crate::table::{TableModel, TableOptions};
use crate::test_util::fixture;
use crate::Node;

const DELAY: Duration = Duration::from_millis(20);

/// What opening `what` in the directory `dir` took: requests, and round trips (the longest
/// chain of requests each made after the one before was answered).
struct Opened {
    requests: Vec<String>,
    round_trips: u32,
    metadata_requests: u64,
}

async fn open_in(dir: &std::path::Path, what: &str, table: bool) -> Opened {
    let local = Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap());
    let recording = RecordingStore::new(local as Arc<dyn ObjectStore>, DELAY);
    let store = ZarrStore::new(recording.clone(), Path::from(what));
    let metrics = store.metrics().clone();
    if table {
        TableModel::open_store(store, what, TableOptions::default())
            .await
            .unwrap();
    } else {
        match Node::open_store(store, what).await.unwrap() {
            Node::Group(g) => {
                g.walk().await.unwrap();
            }
            Node::Array(_) => {}
        }
    }
    let round_trips = recording.round_trips() as u32;
    Opened {
        requests: recording
            .requests()
            .iter()
            .map(|r| r.to_string().replace(&format!("{what}/"), ""))
            .collect(),
        round_trips,
        metadata_requests: metrics.counts().metadata_requests,
    }
}

async fn open_fixture(what: &str, table: bool) -> Opened {
    let dir = std::path::PathBuf::from(fixture(""));
    open_in(&dir, what, table).await
}

/// Each kind of store: requests to open it (before this audit → now) and round trips (the
/// requests one after another; each takes the store's delay).
#[tokio::test]
async fn opening_takes_the_requests_the_format_needs() {
    let v2_plain = tempfile::tempdir().unwrap();
    let source = std::path::PathBuf::from(fixture("xarray_v2.zarr"));
    zarrow_testkit::copy_dir(&source, &v2_plain.path().join("x.zarr"));
    std::fs::remove_file(v2_plain.path().join("x.zarr/.zmetadata")).unwrap();
    // (what, requests, round trips): before, v2 stores asked every child for `zarr.json`
    // (404) and then `.zarray`, `.zattrs` one after another (v2 unconsolidated 21 requests in
    // 9 round trips, AnnData v2 `obs` 69 in 43), v2 roots 5 in 5, AnnData v3 `obs` 19 in 13.
    let cases: Vec<(&str, Opened, usize, u32)> = vec![
        // a v3 group of 5 arrays in 4 groups, no consolidated metadata: a listing and a
        // zarr.json per group, the groups of one level at once, each opening its children at
        // once (before: group by group, 17 requests in 13 round trips).
        (
            "v3, not consolidated",
            open_fixture("v3_hierarchy_unconsolidated.zarr", false).await,
            17,
            9,
        ),
        (
            "v3, consolidated",
            open_fixture("v3_hierarchy.zarr", false).await,
            1,
            1,
        ),
        (
            "v2 xarray, .zmetadata",
            open_fixture("xarray_v2.zarr", true).await,
            5,
            2,
        ),
        // zarr.json (404), then the v2 root documents at once, a listing, and per array
        // `.zarray` with `.zattrs`, all arrays at once.
        (
            "v2 xarray, no .zmetadata",
            open_in(v2_plain.path(), "x.zarr", true).await,
            16,
            4,
        ),
        (
            "v3 xarray, consolidated",
            open_fixture("xarray_v3.zarr", true).await,
            1,
            1,
        ),
        // The dataframe's zarr.json, its 8 columns', then the 5 encoded columns' 10 arrays.
        (
            "AnnData v3 obs",
            open_fixture("anndata_v3.zarr/obs", true).await,
            19,
            3,
        ),
        // As v3 with 5 more for the root, `.zattrs` beside each `.zarray`, `.zgroup` after
        // `.zarray` (404) for the 5 encoded columns.
        (
            "AnnData v2 obs",
            open_fixture("anndata_v2.zarr/obs", true).await,
            46,
            5,
        ),
    ];
    for (what, opened, requests, round_trips) in &cases {
        let listed = opened.requests.join("\n  ");
        assert_eq!(opened.requests.len(), *requests, "{what}:\n  {listed}");
        assert_eq!(opened.metadata_requests as usize, *requests, "{what}");
        // Never below the chain of requests; above it only where a busy machine made one of
        // the requests made together after another was answered.
        assert!(
            opened.round_trips >= *round_trips && opened.round_trips <= round_trips + 1,
            "{what}: {} round trips, expected {round_trips}:\n  {listed}",
            opened.round_trips
        );
        // No child of a v2 group is asked for zarr.json, nor any child for .zmetadata.
        let probes = opened.requests.iter().filter(|r| {
            (r.contains("/zarr.json (404)") || r.contains("/.zmetadata"))
                && !r.starts_with("GET zarr.json")
        });
        assert_eq!(probes.count(), 0, "{what}:\n  {listed}");
    }
}

/// Sibling groups fetched at once still walk and print in order: the unconsolidated hierarchy
/// as its consolidated copy (one document, no concurrency) does, over a store that delays
/// every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_fetched_a_level_at_a_time_keeps_its_order() {
    let dir = std::path::PathBuf::from(fixture(""));
    let local = Arc::new(LocalFileSystem::new_with_prefix(&dir).unwrap());
    let recording = RecordingStore::new(local as Arc<dyn ObjectStore>, DELAY);
    let mut walks = Vec::new();
    let mut trees = Vec::new();
    for what in ["v3_hierarchy.zarr", "v3_hierarchy_unconsolidated.zarr"] {
        let store = ZarrStore::new(recording.clone(), Path::from(what));
        let Node::Group(g) = Node::open_store(store, what).await.unwrap() else {
            panic!("{what} is a group");
        };
        let paths: Vec<String> = g
            .walk()
            .await
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        walks.push(paths);
        let tree = crate::tree::render_node(what, Node::Group(g))
            .await
            .unwrap();
        // The root line names the store and whether it is consolidated (and its name's
        // length pads the columns).
        let lines: Vec<String> = tree
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        trees.push(lines);
    }
    assert_eq!(walks[0].len(), 10, "{:?}", walks[0]);
    assert_eq!(walks[0], walks[1]);
    assert_eq!(trees[0], trees[1]);
}
