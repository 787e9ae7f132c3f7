//! Reading over real servers on loopback: an HTTP server with Range support and moto's
//! S3-compatible server, both started by `tests/remote/start.sh` (which `.ci/run` runs).
//! The tests are ignored unless asked for (`--include-ignored`, as tests/run-all.sh does after
//! starting the servers): a plain `cargo test` reports them ignored, never passed.

use zarrow::{Node, StringType};
use zarrow_testkit::loopback;

use crate::common::expected_entries;
use crate::fixtures::check_entries;

/// Fixture arrays covering v3 (sharded, consolidated), v2 and zarrs.vlen.
fn remote_entries() -> Vec<serde_json::Value> {
    let stores = [
        "zarrs_vlen.zarr",
        "v3_strings.zarr",
        "v2_from_zarr3.zarr",
        "v3_bytes.zarr",
    ];
    let entries: Vec<_> = expected_entries()
        .into_iter()
        .filter(|e| stores.contains(&e["store"].as_str().unwrap_or("")))
        .collect();
    assert!(
        entries.len() >= 20,
        "expected fixtures for the remote tests, found {}",
        entries.len()
    );
    entries
}

#[test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
fn read_fixtures_over_http() {
    let base = loopback("ZARROW_TEST_HTTP");
    check_entries(&remote_entries(), StringType::Utf8, |store, path| {
        format!("{base}/{store}/{path}")
    });
}

#[test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
fn read_fixtures_over_s3() {
    let bucket = loopback("ZARROW_TEST_S3");
    check_entries(&remote_entries(), StringType::View, |store, path| {
        format!("{bucket}/{store}/{path}")
    });
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn walk_consolidated_hierarchy_over_http_and_s3() {
    for var in ["ZARROW_TEST_HTTP", "ZARROW_TEST_S3"] {
        let base = loopback(var);
        let node = Node::open(&format!("{base}/v3_hierarchy.zarr"))
            .await
            .unwrap();
        let Node::Group(g) = node else {
            panic!("v3_hierarchy.zarr is a group")
        };
        assert!(
            g.metadata().consolidated.is_some(),
            "{var}: consolidated metadata"
        );
        let all = g.walk().await.unwrap();
        assert!(all.len() >= 3, "{var}: {} nodes", all.len());
        // Missing keys are the fill value over the network too, and a missing node is typed.
        let e = Node::open(&format!("{base}/no-such-store.zarr"))
            .await
            .unwrap_err();
        assert!(
            matches!(e, zarrow::Error::NodeNotFound { .. }),
            "{var}: {e}"
        );
    }
}
