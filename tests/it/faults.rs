//! Remote faults: the fixtures read through `tests/remote/fault_proxy.py` (started by
//! `tests/remote/start.sh` in front of the loopback HTTP server). Transient faults — 5xx, 429,
//! resets, bodies cut short, slow answers — are retried and the answers are exact; persistent
//! ones fail naming the array, the chunk and the status; a server that never answers, or a
//! closed port, fails within the configured timeouts instead of holding the read. The tests
//! that need the proxy are ignored unless asked for (`--include-ignored`, as tests/run-all.sh
//! does after starting it).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use futures::TryStreamExt;
use zarrow::{RemoteOptions, StringType, TableModel, TableOptions, ZarrScan};

use zarrow_testkit::loopback;

use crate::common::expected_entries;
use crate::fixtures::check_entries;

/// The proxy's base URL for a fault spec, unique to this call (the proxy counts per spec).
fn faulty(proxy: &str, spec: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{proxy}/fault/{spec},id={}-{id}", std::process::id())
}

/// Read a whole table with these remote settings, through a serialized scan (as an executor
/// would: the settings travel with it).
async fn read(location: &str, remote: RemoteOptions) -> zarrow::Result<Vec<RecordBatch>> {
    let options = TableOptions {
        remote,
        ..Default::default()
    };
    let model = TableModel::open(location, options).await?;
    let scan = ZarrScan::from_json(&ZarrScan::new(&model).to_json()?)?;
    scan.open().await?.try_collect().await
}

fn quick() -> RemoteOptions {
    RemoteOptions {
        connect_timeout: Some(Duration::from_secs(2)),
        timeout: Some(Duration::from_secs(2)),
        max_retries: Some(1),
        retry_timeout: Some(Duration::from_secs(3)),
        ..Default::default()
    }
}

/// Fixtures whose arrays are plain (zarr-python's v3 and v2 strings) and sharded (ranged reads).
fn entries() -> Vec<serde_json::Value> {
    let stores = ["v3_strings.zarr", "v2_from_zarr3.zarr", "zarrs_vlen.zarr"];
    expected_entries()
        .into_iter()
        .filter(|e| stores.contains(&e["store"].as_str().unwrap_or("")))
        .collect()
}

#[test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
fn transient_faults_are_retried_and_the_answers_exact() {
    let proxy = loopback("ZARROW_TEST_FAULT_PROXY");
    let entries = entries();
    assert!(entries.len() >= 15, "{} fixtures", entries.len());
    // Each fault hits the first request(s) of every key: metadata, chunks, shard indexes.
    for spec in [
        "status=503,n=2",
        "status=500,n=1",
        "status=429,n=1",
        "reset,n=1",
        "short,n=1",
        "delay=0.2,n=1",
    ] {
        let base = faulty(&proxy, spec);
        eprintln!("fault: {spec}");
        check_entries(&entries, StringType::Utf8, |store, path| {
            format!("{base}/{store}/{path}")
        });
    }
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn persistent_faults_fail_naming_the_array_chunk_and_status() {
    let proxy = loopback("ZARROW_TEST_FAULT_PROXY");
    for (spec, want) in [
        ("status=500,on=chunks", "500"),
        ("status=503,on=chunks", "503"),
        ("reset,on=chunks", "string_gzip/c/"),
        ("short,on=chunks", "string_gzip/c/"),
    ] {
        let location = format!("{}/v3_strings.zarr/string_gzip", faulty(&proxy, spec));
        let e = read(&location, quick()).await.unwrap_err().to_string();
        assert!(
            e.contains("string_gzip/c/") && e.contains(want),
            "{spec}: {e}"
        );
    }
    // Metadata that cannot be fetched names the document.
    let location = format!(
        "{}/v3_strings.zarr/string_gzip",
        faulty(&proxy, "status=500,on=zarr.json")
    );
    let e = read(&location, quick()).await.unwrap_err().to_string();
    assert!(e.contains("zarr.json") && e.contains("500"), "{e}");
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn a_wrong_body_is_an_error_never_a_wrong_answer() {
    let proxy = loopback("ZARROW_TEST_FAULT_PROXY");
    // Well-formed responses whose bodies lack their last bytes: every chunk kind must notice.
    for path in [
        "v3_strings.zarr/string_no_compression",
        "v3_strings.zarr/string_gzip",
        "v3_strings.zarr/string_sharded",
        "zarrs_vlen.zarr/strings_vlen_utf8",
        "v2_from_zarr3.zarr/strings_no_compressor",
        "v2_from_zarr3.zarr/int64_le",
    ] {
        assert!(
            crate::common::data_dir().join(path).is_dir(),
            "fixture {path} missing"
        );
        for trim in [1, 3] {
            let location = format!(
                "{}/{path}",
                faulty(&proxy, &format!("trim={trim},on=chunks"))
            );
            match read(&location, quick()).await {
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains(path.split('/').nth(1).unwrap()), "{path}: {e}");
                }
                Ok(batches) => panic!(
                    "{path}: chunks short by {trim} bytes read as {} rows",
                    batches.iter().map(RecordBatch::num_rows).sum::<usize>()
                ),
            }
        }
    }
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn a_metadata_document_claiming_100_gib_is_refused_before_it_is_read() {
    let proxy = loopback("ZARROW_TEST_FAULT_PROXY");
    let location = format!(
        "{}/v3_strings.zarr/string_gzip",
        faulty(&proxy, "claim=107374182400,on=zarr.json")
    );
    let e = read(&location, quick()).await.unwrap_err().to_string();
    assert!(
        e.contains("zarr.json") && e.contains("107374182400") && e.contains("limit"),
        "{e}"
    );
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn a_server_that_never_answers_fails_within_the_timeouts() {
    let proxy = loopback("ZARROW_TEST_FAULT_PROXY");
    let location = format!(
        "{}/v3_strings.zarr/string_gzip",
        faulty(&proxy, "hang,on=chunks")
    );
    let remote = RemoteOptions {
        timeout: Some(Duration::from_millis(500)),
        max_retries: Some(1),
        retry_timeout: Some(Duration::from_secs(2)),
        ..Default::default()
    };
    let started = Instant::now();
    let e = read(&location, remote).await.unwrap_err().to_string();
    let took = started.elapsed();
    assert!(e.contains("string_gzip/c/"), "{e}");
    // A hang detector, not a timing test: two 0.5 s attempts and a backoff, with slack.
    assert!(took < Duration::from_secs(20), "took {took:?}: {e}");

    // The same settings as store options (what Python's storage_options carry).
    let store = zarrow::ZarrStore::open_with_options(
        &location,
        &[
            ("timeout".to_string(), "500ms".to_string()),
            ("max_retries".to_string(), "0".to_string()),
        ],
    )
    .unwrap();
    let node = zarrow::Node::open_store(store, "string_gzip")
        .await
        .unwrap();
    let model = TableModel::from_node(node, TableOptions::default())
        .await
        .unwrap();
    let started = Instant::now();
    let e = ZarrScan::new(&model)
        .stream(std::sync::Arc::new(model), Default::default())
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("string_gzip/c/"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(20), "{e}");
}

#[tokio::test]
async fn a_closed_port_fails_at_once() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }; // closed again: nothing listens there now
    let started = Instant::now();
    let e = read(
        &format!("http://127.0.0.1:{port}/x.zarr"),
        RemoteOptions::default(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains(&port.to_string()) || e.contains("x.zarr"), "{e}");
    // Default retries of a refused connection: well under the old 7 s.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}: {e}",
        started.elapsed()
    );
}

#[test]
fn bad_remote_settings_are_errors() {
    let e = zarrow::ZarrStore::open_with_options(
        "http://127.0.0.1:9/x.zarr",
        &[("timeout".to_string(), "soon".to_string())],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("timeout") && e.contains("soon"), "{e}");
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn a_chunk_claiming_100_gib_is_refused_before_it_is_read() {
    let proxy = loopback("ZARROW_TEST_FAULT_PROXY");
    // int64 chunks: a stored chunk can take at most twice its decoded size and 1 MiB.
    let location = format!(
        "{}/v3_numeric.zarr/int64",
        faulty(&proxy, "claim=107374182400,on=chunks")
    );
    let e = read(&location, quick()).await.unwrap_err().to_string();
    assert!(
        e.contains("int64") && e.contains("chunk 'c/0'") && e.contains("107374182400 bytes"),
        "{e}"
    );
}

/// Read `array` of the S3 fixture bucket with the S3 endpoint `endpoint`.
async fn read_s3(array: &str, endpoint: &str) -> zarrow::Result<Vec<RecordBatch>> {
    let store = zarrow::ZarrStore::open_configured(
        &format!("s3://zarrow-fixtures/{array}"),
        &[
            ("aws_endpoint".to_string(), endpoint.to_string()),
            ("aws_allow_http".to_string(), "true".to_string()),
        ],
        &quick(),
    )?;
    let node = zarrow::Node::open_store(store, array).await?;
    let model = std::sync::Arc::new(TableModel::from_node(node, TableOptions::default()).await?);
    ZarrScan::new(&model)
        .stream(model.clone(), Default::default())?
        .try_collect()
        .await
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn s3_faults_are_retried_or_named() {
    let proxy = loopback("ZARROW_TEST_S3_FAULT_PROXY");
    let arrays = [
        "v3_strings.zarr/string_gzip",
        "v3_strings.zarr/string_sharded",
        "v3_strings.zarr/string_2d",
        "zarrs_vlen.zarr/strings_zstd_index_start",
    ];
    let data = zarrow_testkit::fixtures_dir();
    // Transient: once per key, every kind the proxy knows; the answers are those of the
    // local files.
    for spec in [
        "status=503,n=1",
        "status=429,n=1",
        "reset,n=1",
        "short,n=1,on=chunks",
    ] {
        let endpoint = faulty(&proxy, spec);
        for array in arrays {
            let local =
                TableModel::open(&data.join(array).to_string_lossy(), TableOptions::default())
                    .await
                    .unwrap();
            let local = std::sync::Arc::new(local);
            let expected: Vec<RecordBatch> = ZarrScan::new(&local)
                .stream(local.clone(), Default::default())
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let got = read_s3(array, &endpoint)
                .await
                .unwrap_or_else(|e| panic!("{spec}: {array}: {e}"));
            assert_eq!(got, expected, "{spec}: {array}");
        }
    }
    // Persistent: the error names the array, the chunk key and the status.
    let endpoint = faulty(&proxy, "status=500,on=chunks");
    let e = read_s3("v3_strings.zarr/string_gzip", &endpoint)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("string_gzip/c/") && e.contains("500"), "{e}");
}
