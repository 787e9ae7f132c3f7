//! Read-ahead over a real HTTP connection: a loopback server of the test's own serves a zarr
//! array from a temporary directory and holds every chunk response for a while, counting the
//! chunk requests in flight. A SQL scan over `http://` with `concurrency = 8` and 2 partitions
//! must keep 16 requests in flight at once (the latency is hidden by overlap, not paid per
//! chunk), and dropping the query must close every one of them.

mod common;

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
use zarrow::writer::ZarrWriteOptions;
use zarrow::ZarrStore;
use zarrow_datafusion::{zarr_session_context, ZarrTable, ZarrTableOptions};

/// What the server saw of chunk requests (any path with `/c/` in it).
#[derive(Default)]
struct Seen {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    requests: AtomicUsize,
    /// Requests whose client closed the connection before the answer was due.
    abandoned: AtomicUsize,
}

/// An HTTP/1.1 server on 127.0.0.1 serving `root`, GET and HEAD with `Range`, keep-alive, each
/// chunk response held for `delay` (the client closing the connection meanwhile ends it).
async fn serve(root: PathBuf, delay: Duration) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let counters = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(connection(socket, root.clone(), delay, counters.clone()));
        }
    });
    (url, seen)
}

async fn connection(socket: TcpStream, root: PathBuf, delay: Duration, seen: Arc<Seen>) {
    let mut socket = BufReader::new(socket);
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
        let chunk = target.contains("/c/");
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

/// `bytes=a-b` / `bytes=a-` / `bytes=-n` against a body of `len` bytes: the half-open range.
fn range(header: &str, len: usize) -> Option<(usize, usize)> {
    let (a, b) = header.strip_prefix("bytes=")?.split_once('-')?;
    let (start, end) = match (a.parse::<usize>().ok(), b.parse::<usize>().ok()) {
        (Some(a), Some(b)) => (a, b + 1),
        (Some(a), None) => (a, len),
        (None, Some(n)) => (len.saturating_sub(n), len),
        (None, None) => return None,
    };
    (start < end && end <= len).then_some((start, end))
}

/// 64 chunks of 16 int64 values in `dir/s/v`, served with `delay` per chunk response.
async fn delayed_array(dir: &tempfile::TempDir, delay: Duration) -> (String, Arc<Seen>) {
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
    let (url, seen) = serve(dir.path().to_path_buf(), delay).await;
    (format!("{url}/s/v"), seen)
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
    let batches = ctx
        .sql("SELECT max(v), count(*) FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let max = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
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
