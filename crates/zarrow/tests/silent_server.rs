//! A server that answers the metadata and then goes silent: every read must end with a timeout
//! error within the configured `timeout`, whatever `max_retries` and `retry_timeout` say — the
//! ranged first GET of a chunk (and the whole GET it used to fall back to), the ranged parts of
//! a large read, a HEAD, a listing-free scan end to end — and the warm-up's HEADs must give up
//! as soon, leaving no connection open on the silent server.
//!
//! The server is the test's own, on 127.0.0.1: it answers GETs of metadata documents (a 404 for
//! the ones it does not have) and ranged GETs from byte 0 of `first`; every other request is
//! read and never answered, its connection held until the client closes it. The bounds are
//! hang detectors with slack for a loaded machine (the timeout is 1 s; before reads honoured
//! it, one took 20 to 41 s here).
#![cfg(feature = "cloud")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use object_store::GetRange;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use zarrow::{RemoteOptions, TableModel, TableOptions, ZarrScan, ZarrStore};

/// The configured timeout of one read.
const TIMEOUT: Duration = Duration::from_secs(1);

/// The longest a read given [`TIMEOUT`] may take here: the timeout and slack for a loaded
/// machine — far below the 20 s `retry_timeout` the settings also give.
const BOUND: Duration = Duration::from_secs(6);

/// The settings of the issue: a short `timeout`, and retries that, were they independent of
/// it, would go on for 20 s (and the whole GET after them for 20 s more).
fn remote() -> RemoteOptions {
    RemoteOptions {
        connect_timeout: Some(TIMEOUT),
        timeout: Some(TIMEOUT),
        max_retries: Some(10),
        retry_timeout: Some(Duration::from_secs(20)),
        warm_connections: Some(4),
        ..Default::default()
    }
}

/// The array's metadata: 64 int64 in chunks of 16, uncompressed.
fn array_document() -> String {
    serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [64], "data_type": "int64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "dimension_names": ["i"],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    })
    .to_string()
}

/// The object `first` of [`serve`]: 64 bytes, of which ranges from 0 are answered.
const FIRST: usize = 64;

/// What the server saw.
#[derive(Default)]
struct Seen {
    /// Requests read and never answered whose connection the client has not closed.
    held: AtomicUsize,
    /// Requests never answered, in all.
    unanswered: AtomicUsize,
}

/// The silent server (see the module docs); its base URL and what it saw.
async fn serve() -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let counters = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(connection(socket, counters.clone()));
        }
    });
    (url, seen)
}

async fn connection(socket: TcpStream, seen: Arc<Seen>) {
    let mut socket = BufReader::new(socket);
    loop {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            match socket.read(&mut byte).await {
                Ok(1) if head.len() < 8192 => head.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let mut lines = head.split("\r\n");
        let mut request = lines.next().unwrap_or_default().split(' ');
        let (method, target) = (
            request.next().unwrap_or_default(),
            request.next().unwrap_or("/").to_string(),
        );
        let headers: HashMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let document = ["zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"]
            .iter()
            .any(|d| target.ends_with(&format!("/{d}")));
        let from_zero = headers
            .get("range")
            .and_then(|r| r.strip_prefix("bytes=0-"))
            .and_then(|end| end.parse::<usize>().ok());
        let response = if method == "GET" && target == "/s/v/zarr.json" {
            let body = array_document();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        } else if method == "GET" && document {
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string()
        } else if let (true, Some(end)) = (method == "GET" && target == "/s/first", from_zero) {
            let end = end.min(FIRST - 1);
            format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\n\
                 Content-Range: bytes 0-{end}/{FIRST}\r\n\r\n{}",
                end + 1,
                "x".repeat(end + 1)
            )
        } else {
            // Silent: hold the request until the client goes away.
            seen.unanswered.fetch_add(1, Ordering::SeqCst);
            seen.held.fetch_add(1, Ordering::SeqCst);
            let mut rest = [0u8; 512];
            while matches!(socket.read(&mut rest).await, Ok(n) if n > 0) {}
            seen.held.fetch_sub(1, Ordering::SeqCst);
            return;
        };
        if socket
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// `read`'s error and how long it took, the read itself given up (a failure) after a minute.
async fn failure<T: std::fmt::Debug>(
    what: &str,
    read: impl std::future::Future<Output = zarrow::Result<T>>,
) -> (String, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .unwrap_or_else(|_| panic!("{what}: no end after 60 s"));
    let took = started.elapsed();
    let e = result.expect_err(what).to_string();
    assert!(
        e.contains("timed out") || e.contains("timeout"),
        "{what}: not a timeout: {e}"
    );
    assert!(
        took < BOUND,
        "{what}: took {took:?} with a timeout of {TIMEOUT:?}: {e}"
    );
    (e, took)
}

/// Wait (up to [`BOUND`]) until the client has closed every connection the server holds.
async fn all_closed(seen: &Seen, what: &str) {
    let started = Instant::now();
    while seen.held.load(Ordering::SeqCst) > 0 && started.elapsed() < BOUND {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        seen.held.load(Ordering::SeqCst),
        0,
        "{what}: requests still open on the silent server after {BOUND:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_of_a_silent_server_ends_within_the_timeout() {
    let (url, seen) = serve().await;
    let store = ZarrStore::open_configured(&format!("{url}/s"), &[], &remote()).unwrap();
    let too_large = |n| zarrow::Error::InvalidArgument(format!("{n} bytes"));

    // The first metadata document arrives; the warm-up's HEADs beside it are never answered.
    let document = store.get_document("v/zarr.json", "v").await.unwrap();
    assert!(document.is_some());
    let started = Instant::now();
    while seen.unanswered.load(Ordering::SeqCst) < 4 && started.elapsed() < BOUND {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // They give up within the timeout, as a read would, and are not tried again (a retry is
    // a request more, on a connection of its own).
    all_closed(&seen, "the warm-up's HEADs").await;
    tokio::time::sleep(TIMEOUT * 2).await;
    assert_eq!(seen.held.load(Ordering::SeqCst), 0, "a HEAD tried again");
    assert_eq!(
        seen.unanswered.load(Ordering::SeqCst),
        4,
        "four HEADs, once each"
    );

    // A chunk: its ranged first GET, never answered (and no whole GET after it).
    failure(
        "a ranged first GET",
        store.get_split("v/c/0", 1 << 20, 64, 4, too_large),
    )
    .await;
    // The same read unsplit, and a byte range.
    failure(
        "a whole GET",
        store.get_split("v/c/1", 1 << 20, 0, 4, too_large),
    )
    .await;
    failure(
        "a ranged GET",
        store.get_range_opt("v/c/2", GetRange::Bounded(0..8)),
    )
    .await;
    // A large read whose first part arrives and whose other parts do not.
    failure(
        "the parts of a read",
        store.get_split("first", 1 << 20, 16, 4, too_large),
    )
    .await;
    failure(
        "the parts of a range",
        store.get_range_split("v/c/3", 0..64, 16, 4),
    )
    .await;
    // A HEAD (a shard's size).
    failure("a HEAD", store.size_opt("v/c/4")).await;
    all_closed(&seen, "the reads").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_of_a_silent_server_fails_within_the_timeout() {
    let (url, seen) = serve().await;
    let options = TableOptions {
        remote: remote(),
        ..Default::default()
    };
    let location = format!("{url}/s/v");
    let scan = async {
        let model = TableModel::open(&location, options).await?;
        let scan = ZarrScan::from_json(&ZarrScan::new(&model).to_json()?)?;
        scan.open().await?.try_collect::<Vec<_>>().await
    };
    let (e, _) = failure("a scan", scan).await;
    assert!(e.contains("s/v/c/"), "the error names the chunk: {e}");
    all_closed(&seen, "the scan").await;
}
