//! Read-ahead over a real HTTP connection: a loopback server of the test's own serves a zarr
//! array from a temporary directory and holds every chunk response for a while, counting the
//! chunk requests in flight. A SQL scan over `http://` with `concurrency = 8` and 2 partitions
//! must keep 16 requests in flight at once (the latency is hidden by overlap, not paid per
//! chunk), and dropping the query must close every one of them. An inner chunk larger than
//! `range_split_bytes` is read as ranged GETs in flight at once, which dropping the query
//! closes too. A fresh store opens `warm_connections` connections while its metadata is on the
//! way, and the first wave of chunk reads opens none of its own.

use crate::common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Int64Array};
use datafusion::prelude::SessionConfig;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use zarrow::ZarrStore;
use zarrow::ZarrWriteOptions;
use zarrow_datafusion::{zarr_session_context, ZarrTable, ZarrTableOptions};

/// What the server saw of chunk requests (any path with `/c/` in it).
#[derive(Default)]
struct Seen {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    requests: AtomicUsize,
    /// Requests whose client closed the connection before the answer was due.
    abandoned: AtomicUsize,
    /// `HEAD` requests (of any path).
    heads: AtomicUsize,
    /// Connections whose first request was for a chunk: opened by the chunk reads, not
    /// found open. (Counted per connection, not by when `accept` returned: a connection the
    /// chunk reads open can be accepted before the first chunk request is read.)
    late_connections: AtomicUsize,
}

/// An HTTP/1.1 server on 127.0.0.1 serving `root`, GET and HEAD with `Range`, keep-alive, each
/// chunk response held for `delay` (the client closing the connection meanwhile ends it).
async fn serve(root: PathBuf, delay: Duration) -> (String, Arc<Seen>) {
    serve_with(root, delay, Duration::ZERO).await
}

/// [`serve`], with each `GET` of a `zarr.json` also held, for `metadata_delay`, and each
/// `HEAD` for a sixth of it.
async fn serve_with(
    root: PathBuf,
    delay: Duration,
    metadata_delay: Duration,
) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let counters = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(connection(
                socket,
                root.clone(),
                (delay, metadata_delay),
                counters.clone(),
            ));
        }
    });
    (url, seen)
}

async fn connection(
    socket: TcpStream,
    root: PathBuf,
    (delay, metadata_delay): (Duration, Duration),
    seen: Arc<Seen>,
) {
    let mut socket = BufReader::new(socket);
    let mut first_request = true;
    loop {
        // The request head, up to the blank line (8 KiB at most).
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
            request.next().unwrap_or("/"),
        );
        let headers: HashMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        if method == "HEAD" {
            seen.heads.fetch_add(1, Ordering::SeqCst);
            // A round trip, as on a network: the HEADs are in flight together, each on a
            // connection of its own (answered at once, one could finish before the next is
            // sent and lend it its connection).
            tokio::time::sleep(metadata_delay / 6).await;
        } else if target.ends_with("/zarr.json") {
            tokio::time::sleep(metadata_delay).await;
        }
        let chunk = target.contains("/c/");
        if chunk && first_request {
            seen.late_connections.fetch_add(1, Ordering::SeqCst);
        }
        first_request = false;
        if chunk {
            seen.requests.fetch_add(1, Ordering::SeqCst);
            let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            seen.max_in_flight.fetch_max(now, Ordering::SeqCst);
            // Hold the answer; a client that goes away meanwhile (EOF) ends the connection.
            let mut probe = [0u8; 1];
            let closed = tokio::select! {
                _ = tokio::time::sleep(delay) => false,
                n = socket.read(&mut probe) => matches!(n, Ok(0) | Err(_)),
            };
            seen.in_flight.fetch_sub(1, Ordering::SeqCst);
            if closed {
                seen.abandoned.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
        let path = root.join(target.trim_start_matches('/'));
        let response = match std::fs::read(&path) {
            Ok(body) => {
                let (status, body, range) =
                    match headers.get("range").and_then(|r| range(r, body.len())) {
                        Some((start, end)) => (
                            "206 Partial Content",
                            body[start..end].to_vec(),
                            format!(
                                "Content-Range: bytes {start}-{}/{}\r\n",
                                end - 1,
                                body.len()
                            ),
                        ),
                        None => ("200 OK", body, String::new()),
                    };
                let mut out = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{range}\
                     Last-Modified: Thu, 26 Nov 2026 00:00:00 GMT\r\nETag: \"{}\"\r\n\r\n",
                    body.len(),
                    body.len()
                )
                .into_bytes();
                if method != "HEAD" {
                    out.extend_from_slice(&body);
                }
                out
            }
            Err(_) => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
        };
        if socket.get_mut().write_all(&response).await.is_err() {
            return;
        }
    }
}

/// `bytes=a-b` / `bytes=a-` / `bytes=-n` against a body of `len` bytes: the half-open range
/// (a last byte past the end means the end, RFC 9110 §14.1.2, as S3 and nginx answer).
fn range(header: &str, len: usize) -> Option<(usize, usize)> {
    let (a, b) = header.strip_prefix("bytes=")?.split_once('-')?;
    let (start, end) = match (a.parse::<usize>().ok(), b.parse::<usize>().ok()) {
        (Some(a), Some(b)) => (a, b.saturating_add(1).min(len)),
        (Some(a), None) => (a, len),
        (None, Some(n)) => (len.saturating_sub(n), len),
        (None, None) => return None,
    };
    (start < end && end <= len).then_some((start, end))
}

/// 64 chunks of 16 int64 values in `dir/s/v`, served with `delay` per chunk response.
async fn delayed_array(dir: &tempfile::TempDir, delay: Duration) -> (String, Arc<Seen>) {
    delayed_metadata_array(dir, delay, Duration::ZERO).await
}

/// [`delayed_array`], each `GET` of its metadata also held, for `metadata_delay`.
async fn delayed_metadata_array(
    dir: &tempfile::TempDir,
    delay: Duration,
    metadata_delay: Duration,
) -> (String, Arc<Seen>) {
    let local = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let values = Int64Array::from_iter_values(0..1024);
    let options = ZarrWriteOptions {
        chunk_shape: Some(vec![16]),
        write_empty_chunks: true,
        ..Default::default()
    };
    zarrow::write_array(
        &ZarrStore::new(local, Path::from("s")),
        "v",
        &values,
        &[1024],
        &options,
    )
    .await
    .unwrap();
    let (url, seen) = serve_with(dir.path().to_path_buf(), delay, metadata_delay).await;
    (format!("{url}/s/v"), seen)
}

/// The first column of `sql`'s first batch, as int64.
async fn first_column(ctx: &datafusion::prelude::SessionContext, sql: &str) -> Int64Array {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .clone()
}

async fn context(location: &str) -> datafusion::prelude::SessionContext {
    let ctx = zarr_session_context(SessionConfig::new().with_target_partitions(2));
    ctx.sql("SET zarrow.concurrency = 8").await.unwrap();
    let table = ZarrTable::try_new(location, ZarrTableOptions::default())
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    ctx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_requests_are_in_flight_with_concurrency_8_and_2_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let (location, seen) = delayed_array(&dir, Duration::from_millis(400)).await;
    let ctx = context(&location).await;
    let max = first_column(&ctx, "SELECT max(v), count(*) FROM t").await;
    assert_eq!((max.len(), max.value(0)), (1, 1023));
    assert_eq!(
        seen.requests.load(Ordering::SeqCst),
        64,
        "one GET per chunk"
    );
    assert_eq!(
        seen.max_in_flight.load(Ordering::SeqCst),
        16,
        "2 partitions × concurrency 8 chunk requests at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_query_closes_every_request_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let (location, seen) = delayed_array(&dir, Duration::from_secs(60)).await;
    let ctx = context(&location).await;
    let stream = common::hung_query(&ctx, "SELECT max(v) FROM t", Duration::from_millis(300)).await;
    // Wait (at most 5 s) for the 16 requests, then drop the query.
    for _ in 0..50 {
        if seen.in_flight.load(Ordering::SeqCst) == 16 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.in_flight.load(Ordering::SeqCst), 16);
    drop(stream);
    for _ in 0..50 {
        if seen.in_flight.load(Ordering::SeqCst) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen.in_flight.load(Ordering::SeqCst),
        0,
        "requests left open"
    );
    assert_eq!(seen.abandoned.load(Ordering::SeqCst), 16);
}

/// A fresh table over `location` read with one partition, 8 reads in flight and
/// `warm_connections = warm`: what the server saw.
async fn first_read(warm: usize) -> Arc<Seen> {
    let dir = tempfile::tempdir().unwrap();
    // The metadata answers after 300 ms, the warm-up's HEADs after 50: they are done by then,
    // as on a real network, where they travel beside the metadata's GET.
    let (location, seen) =
        delayed_metadata_array(&dir, Duration::from_millis(50), Duration::from_millis(300)).await;
    let ctx = zarr_session_context(SessionConfig::new().with_target_partitions(1));
    ctx.sql("SET zarrow.concurrency = 8").await.unwrap();
    let options: HashMap<String, String> =
        [("warm_connections".to_string(), warm.to_string())].into();
    let table = ZarrTable::try_new(&location, ZarrTableOptions::from_options(&options).unwrap())
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let max = first_column(&ctx, "SELECT max(v) FROM t").await;
    assert_eq!(max.value(0), 1023);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 64);
    assert_eq!(seen.max_in_flight.load(Ordering::SeqCst), 8);
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_store_opens_its_connections_while_the_metadata_is_on_the_way() {
    let seen = first_read(8).await;
    assert_eq!(
        seen.heads.load(Ordering::SeqCst),
        8,
        "one HEAD a connection"
    );
    assert_eq!(
        seen.late_connections.load(Ordering::SeqCst),
        0,
        "the chunk reads found their connections open"
    );
    // Without the warm-up, the first wave of chunk reads opens its own connections.
    let cold = first_read(0).await;
    assert_eq!(cold.heads.load(Ordering::SeqCst), 0);
    assert!(
        cold.late_connections.load(Ordering::SeqCst) >= 7,
        "{} connections opened after the metadata",
        cold.late_connections.load(Ordering::SeqCst)
    );
}

/// One shard of one 8 KiB inner chunk (1024 int64, uncompressed, index at the end) in
/// `dir/sh/v`, served with `delay` per chunk response.
async fn delayed_shard(dir: &tempfile::TempDir, delay: Duration) -> (String, Arc<Seen>) {
    let root = dir.path().join("sh/v");
    std::fs::create_dir_all(root.join("c")).unwrap();
    let bytes = serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}});
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [1024], "data_type": "int64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1024]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "dimension_names": ["i"],
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [1024], "codecs": [bytes], "index_codecs": [bytes],
            "index_location": "end"}}]
    });
    std::fs::write(root.join("zarr.json"), meta.to_string()).unwrap();
    let mut shard: Vec<u8> = (0..1024i64).flat_map(i64::to_le_bytes).collect();
    shard.extend(0u64.to_le_bytes());
    shard.extend(8192u64.to_le_bytes());
    std::fs::write(root.join("c/0"), shard).unwrap();
    let (url, seen) = serve(dir.path().to_path_buf(), delay).await;
    (format!("{url}/sh/v"), seen)
}

/// A session reading `location` as `t`, one partition, 2 reads in flight, inner chunks of
/// more than 4 KiB split.
async fn split_context(location: &str) -> datafusion::prelude::SessionContext {
    let ctx = zarr_session_context(SessionConfig::new().with_target_partitions(1));
    ctx.sql("SET zarrow.concurrency = 2").await.unwrap();
    let options: HashMap<String, String> =
        [("range_split_bytes".to_string(), "4096".to_string())].into();
    let table = ZarrTable::try_new(location, ZarrTableOptions::from_options(&options).unwrap())
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    ctx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_inner_chunk_is_two_ranged_gets_in_flight_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (location, seen) = delayed_shard(&dir, Duration::from_millis(400)).await;
    let ctx = split_context(&location).await;
    let sum = first_column(&ctx, "SELECT sum(v), count(*) FROM t").await;
    assert_eq!(sum.value(0), 1023 * 1024 / 2);
    assert_eq!(
        seen.requests.load(Ordering::SeqCst),
        3,
        "the shard index, then the inner chunk in two halves"
    );
    assert_eq!(
        seen.max_in_flight.load(Ordering::SeqCst),
        2,
        "both halves at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_query_closes_the_ranges_of_a_split_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (location, seen) = delayed_shard(&dir, Duration::from_millis(1500)).await;
    let ctx = split_context(&location).await;
    // The index answers after 1.5 s; then both halves are held.
    let stream = common::hung_query(&ctx, "SELECT max(v) FROM t", Duration::from_millis(300)).await;
    for _ in 0..50 {
        if seen.requests.load(Ordering::SeqCst) == 3 && seen.in_flight.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.in_flight.load(Ordering::SeqCst), 2);
    drop(stream);
    for _ in 0..50 {
        if seen.in_flight.load(Ordering::SeqCst) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.in_flight.load(Ordering::SeqCst), 0, "ranges left open");
    assert_eq!(seen.abandoned.load(Ordering::SeqCst), 2);
}
