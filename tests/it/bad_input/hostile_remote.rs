//! Hostile remote inputs (issue 21): each test fails without its fix.
//!
//! Remote bodies (items 7, 11) are served by a loopback HTTP server of this file ([`serve`]):
//! chunked responses are read up to what the chunk may hold, a `Content-Length` over it is
//! refused before the body is read, and one under it is not allocated before its bytes
//! arrive. Sparse matrices (items 12, 14): `indptr` is reserved from the scan's memory budget
//! before it is read, and `indptr` and `indices` are checked whatever the query projects.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Float32Array, Int32Array};
use futures::TryStreamExt;
use serde_json::json;
use zarrow::ScanMemory;
use zarrow::{
    ChunkError, Error, Node, RemoteOptions, ScanContext, TableModel, TableOptions, ZarrArray,
    ZarrReadOptions, ZarrScan, ZarrStore,
};
use zarrow_testkit::Budget;

/// How the loopback server answers a path.
#[derive(Clone)]
enum Answer {
    /// With its `Content-Length`.
    Plain(Vec<u8>),
    /// `Transfer-Encoding: chunked`, no `Content-Length` (small bodies in frames of 7 bytes).
    Chunked(Vec<u8>),
    /// `Content-Length: declared`, then `body` in two writes 100 ms apart, then the
    /// connection closed.
    Claiming { declared: u64, body: Vec<u8> },
    /// To any GET, `206 Partial Content`: the last `tail.len()` bytes of an object of `total`.
    Tail { total: u64, tail: Vec<u8> },
}

/// A loopback HTTP server answering `answers` (path → answer; 404 elsewhere), on threads of
/// its own for the life of the process; its base URL.
fn serve(answers: HashMap<String, Answer>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answers = Arc::new(answers);
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(socket) = socket else { return };
            let answers = answers.clone();
            std::thread::spawn(move || answer(socket, &answers));
        }
    });
    url
}

fn answer(mut socket: TcpStream, answers: &HashMap<String, Answer>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut line = text.split_whitespace();
    let (method, path) = (line.next().unwrap_or(""), line.next().unwrap_or(""));
    // Errors writing are the client hanging up (what a refused body does): not ours.
    let _ = match (method, answers.get(path)) {
        ("GET", Some(Answer::Plain(body))) => socket
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )
            .and_then(|()| socket.write_all(body)),
        ("GET", Some(Answer::Chunked(body))) => {
            let mut out =
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                    .to_vec();
            let frame = if body.len() < 1000 { 7 } else { 64 << 10 };
            for piece in body.chunks(frame) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            socket.write_all(&out)
        }
        ("GET", Some(Answer::Tail { total, tail })) => {
            let first = total - tail.len() as u64;
            socket
                .write_all(
                    format!(
                        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {first}-{}/{total}\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n",
                        total - 1,
                        tail.len()
                    )
                    .as_bytes(),
                )
                .and_then(|()| socket.write_all(tail))
        }
        ("GET", Some(Answer::Claiming { declared, body })) => {
            let (a, b) = body.split_at(body.len() / 2);
            socket
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {declared}\r\nConnection: close\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .and_then(|()| socket.write_all(a))
                .and_then(|()| socket.flush())
                .map(|()| std::thread::sleep(Duration::from_millis(100)))
                .and_then(|()| socket.write_all(b))
        }
        _ => socket
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
    let _ = socket.shutdown(std::net::Shutdown::Both);
}

/// Fail fast: one try, short timeouts.
fn quick() -> RemoteOptions {
    RemoteOptions {
        connect_timeout: Some(Duration::from_secs(2)),
        timeout: Some(Duration::from_secs(5)),
        max_retries: Some(0),
        retry_timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    }
}

/// A v3 array's `zarr.json`: 1-D, uncompressed.
fn array_json(data_type: &str, shape: u64, chunk: u64, fill: serde_json::Value) -> Vec<u8> {
    let codec = if data_type == "string" {
        json!({"name": "vlen-utf8"})
    } else {
        json!({"name": "bytes", "configuration": {"endian": "little"}})
    };
    serde_json::to_vec(&json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": [shape],
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [codec],
    }))
    .unwrap()
}

async fn open_remote(base: &str, path: &str) -> zarrow::Result<ZarrArray> {
    let store = ZarrStore::open_configured(&format!("{base}/{path}"), &[], &quick())?;
    match Node::open_store(store, path).await? {
        Node::Array(a) => Ok(a),
        Node::Group(_) => panic!("a group"),
    }
}

/// The chunk error of `err`, checking it names `array` and `chunk`.
fn chunk_error(err: Error, array: &str, chunk: &str) -> ChunkError {
    let msg = err.to_string();
    match err {
        Error::Chunk {
            array: a,
            chunk: c,
            source,
        } => {
            assert!(a.ends_with(array), "{msg}");
            assert_eq!(c, chunk, "{msg}");
            source
        }
        other => panic!("expected a chunk error of {array} {chunk}, got {other}"),
    }
}

fn int32_chunk(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Item 7: a server that streams (no `Content-Length`) is read — metadata and chunks.
#[tokio::test]
async fn a_chunked_response_is_read() {
    let base = serve(HashMap::from([
        (
            "/a/zarr.json".to_string(),
            Answer::Chunked(array_json("int32", 8, 4, json!(0))),
        ),
        (
            "/a/c/0".to_string(),
            Answer::Chunked(int32_chunk(&[1, 2, 3, 4])),
        ),
        (
            "/a/c/1".to_string(),
            Answer::Chunked(int32_chunk(&[5, 6, 7, 8])),
        ),
    ]));
    let array = open_remote(&base, "a").await.unwrap();
    let opts = ZarrReadOptions::default();
    for (chunk, want) in [(0u64, [1, 2, 3, 4]), (1, [5, 6, 7, 8])] {
        let got = array.read_chunk(&[chunk], &opts).await.unwrap();
        let got = got.as_any().downcast_ref::<Int32Array>().unwrap();
        assert_eq!(got.values().to_vec(), want);
    }
}

/// Item 7/11: a chunked response is read no further than what its chunk may hold (4 int32:
/// twice 16 bytes and 1 MiB), and refused as too large, naming the array and the chunk.
#[tokio::test]
async fn a_chunked_response_longer_than_its_chunk_may_hold_is_refused() {
    let base = serve(HashMap::from([
        (
            "/a/zarr.json".to_string(),
            Answer::Plain(array_json("int32", 4, 4, json!(0))),
        ),
        ("/a/c/0".to_string(), Answer::Chunked(vec![7u8; 3 << 20])),
    ]));
    let array = open_remote(&base, "a").await.unwrap();
    let err = array
        .read_chunk(&[0], &ZarrReadOptions::default())
        .await
        .unwrap_err();
    match chunk_error(err, "a", "c/0") {
        ChunkError::TooLarge(m) => assert!(m.contains(&(32 + (1 << 20)).to_string()), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Item 11: a string chunk of 4 elements may hold about 4 × (4 + the item limit) bytes, far below
/// the per-chunk cap: a `Content-Length` of 2 GiB − 1000 is refused before its body is read.
#[tokio::test]
async fn a_string_chunk_announcing_more_than_its_elements_may_hold_is_refused() {
    let declared = (2u64 << 30) - 1000;
    let base = serve(HashMap::from([
        (
            "/s/zarr.json".to_string(),
            Answer::Plain(array_json("string", 4, 4, json!(""))),
        ),
        (
            "/s/c/0".to_string(),
            Answer::Claiming {
                declared,
                body: vec![0; 64],
            },
        ),
    ]));
    let array = open_remote(&base, "s").await.unwrap();
    let err = array
        .read_chunk(&[0], &ZarrReadOptions::default())
        .await
        .unwrap_err();
    match chunk_error(err, "s", "c/0") {
        ChunkError::TooLarge(m) => assert!(m.contains(&declared.to_string()), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Item 11: a `Content-Length` of 2 GiB − 1000 under a string chunk's cap (1000 elements may
/// hold 2 GiB) is not allocated before its bytes arrive: the scan runs in a process of its own
/// (`run_scan`) with 1 GiB of address space, and fails with the body cut short — not aborted
/// allocating 2 GiB.
#[tokio::test]
async fn a_body_is_not_allocated_at_its_announced_length() {
    let Ok(prlimit) = which("prlimit") else {
        assert!(
            std::env::var("CI").is_err(),
            "CI needs prlimit (util-linux) for this test"
        );
        eprintln!("skipping: no prlimit");
        return;
    };
    let declared = (2u64 << 30) - 1000;
    let base = serve(HashMap::from([
        (
            "/s/zarr.json".to_string(),
            Answer::Plain(array_json("string", 1000, 1000, json!(""))),
        ),
        (
            "/s/c/0".to_string(),
            Answer::Claiming {
                declared,
                body: vec![0; 64 << 10],
            },
        ),
    ]));
    let options = TableOptions {
        remote: quick(),
        ..Default::default()
    };
    let model = TableModel::open(&format!("{base}/s"), options)
        .await
        .unwrap();
    let json = ZarrScan::new(&model).to_json().unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(prlimit);
        command
            .arg(format!("--as={}", 1u64 << 30))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_run_scan"))
            .env("MALLOC_ARENA_MAX", "2");
        crate::common::run_scan_with(command, &json)
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{:?}: {stderr}", out.status);
    assert!(
        stderr.contains("c/0") && !stderr.contains("memory allocation"),
        "{stderr}"
    );
}

/// Item 11: a shard whose index gives an inner chunk of 4 int32 3 GiB (inside a shard the
/// server says is 3 GiB and 16 bytes) is refused before the inner chunk is asked for.
#[tokio::test]
async fn an_inner_chunk_over_what_it_may_hold_is_refused_before_it_is_read() {
    let mut meta: serde_json::Value =
        serde_json::from_slice(&array_json("int32", 4, 4, json!(0))).unwrap();
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    meta["codecs"] = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [4], "codecs": [bytes], "index_codecs": [bytes], "index_location": "end",
    }}]);
    let inner = 3u64 << 30;
    let index: Vec<u8> = [0u64, inner].iter().flat_map(|v| v.to_le_bytes()).collect();
    let base = serve(HashMap::from([
        (
            "/h/zarr.json".to_string(),
            Answer::Plain(serde_json::to_vec(&meta).unwrap()),
        ),
        (
            "/h/c/0".to_string(),
            Answer::Tail {
                total: inner + 16,
                tail: index,
            },
        ),
    ]));
    let array = open_remote(&base, "h").await.unwrap();
    let err = array
        .read_chunk(&[0], &ZarrReadOptions::default())
        .await
        .unwrap_err();
    match chunk_error(err, "h", "c/0 (inner chunk 0)") {
        ChunkError::TooLarge(m) => assert!(m.contains(&inner.to_string()), "{m}"),
        other => panic!("{other:?}"),
    }
}

fn which(tool: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
        .ok_or(())
}

/// A CSR matrix of `shape` at `memory://{prefix}/X`: `indptr` as int64 in chunks of
/// `ptr_chunk` offsets, `indices` as int32 and `data` as float32 in chunks of `chunk`.
async fn sparse(
    prefix: &str,
    shape: [u64; 2],
    (indptr, ptr_chunk): (&[i64], u64),
    indices: &[i32],
    chunk: u64,
) {
    let mem = ZarrStore::open("memory:///").unwrap();
    let put = |key: String, bytes: Vec<u8>| {
        let mem = mem.clone();
        async move {
            mem.put(&format!("{prefix}/X/{key}"), bytes.into())
                .await
                .unwrap();
        }
    };
    let group = json!({
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": shape},
    });
    put("zarr.json".into(), serde_json::to_vec(&group).unwrap()).await;
    let nnz = indices.len() as u64;
    let data: Vec<f32> = (0..nnz).map(|k| k as f32 + 0.5).collect();
    /// An array's name, type, items (little-endian), length and chunk length.
    type Stored<'a> = (&'a str, &'a str, Vec<Vec<u8>>, u64, u64);
    let arrays: [Stored; 3] = [
        (
            "indptr",
            "int64",
            indptr.iter().map(|v| v.to_le_bytes().to_vec()).collect(),
            indptr.len() as u64,
            ptr_chunk,
        ),
        (
            "indices",
            "int32",
            indices.iter().map(|v| v.to_le_bytes().to_vec()).collect(),
            nnz,
            chunk,
        ),
        (
            "data",
            "float32",
            data.iter().map(|v| v.to_le_bytes().to_vec()).collect(),
            nnz,
            chunk,
        ),
    ];
    for (name, dtype, items, len, chunk) in arrays {
        let fill = if dtype == "float32" {
            json!(0.0)
        } else {
            json!(0)
        };
        put(
            format!("{name}/zarr.json"),
            array_json(dtype, len, chunk, fill),
        )
        .await;
        for (c, part) in items.chunks(chunk as usize).enumerate() {
            let mut bytes = part.concat();
            // The last chunk is stored whole.
            bytes.resize(chunk as usize * part[0].len(), 0);
            put(format!("{name}/c/{c}"), bytes).await;
        }
    }
}

/// Scan `columns` of the matrix at `memory://{prefix}/X` with `memory` as budget.
async fn scan_sparse(
    prefix: &str,
    columns: &[&str],
    memory: Option<Arc<dyn ScanMemory>>,
) -> zarrow::Result<Vec<arrow::array::RecordBatch>> {
    let model = TableModel::open(&format!("memory://{prefix}/X"), TableOptions::default()).await?;
    let mut scan = ZarrScan::new(&model);
    scan.columns = columns.iter().map(|c| c.to_string()).collect();
    let ctx = ScanContext {
        memory,
        ..Default::default()
    };
    scan.stream(Arc::new(model), ctx)?.try_collect().await
}

/// Item 14: a bad `indptr` or `indices` is an error naming the array and its chunk whatever
/// the query projects — never stored elements handed out of a matrix that is not one.
#[tokio::test]
async fn a_sparse_matrix_is_checked_whatever_is_projected() {
    let (good_ptr, good_idx) = ([0i64, 2, 2, 5, 6], [0i32, 1, 2, 0, 1, 2]);
    sparse("hostile_sparse_ok", [4, 3], (&good_ptr, 2), &good_idx, 2).await;
    for columns in [&["X"][..], &["dim_1", "X"], &["dim_0", "dim_1", "X"]] {
        let batches = scan_sparse("hostile_sparse_ok", columns, None)
            .await
            .unwrap();
        let x = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        let x = x.column_by_name("X").unwrap();
        let x = x.as_any().downcast_ref::<Float32Array>().unwrap();
        assert_eq!(x.values().to_vec(), [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
    }
    // The indptr decreases at its element 2 (chunk c/1 of 2 offsets each).
    sparse(
        "hostile_sparse_ptr",
        [4, 3],
        (&[0, 3, 2, 5, 6], 2),
        &good_idx,
        2,
    )
    .await;
    // One ending short of the 6 stored elements leaves elements out (element 4: c/2).
    sparse(
        "hostile_sparse_end",
        [4, 3],
        (&[0, 2, 2, 5, 5], 2),
        &good_idx,
        2,
    )
    .await;
    // An index past the 3 columns at stored element 2 (c/1).
    sparse(
        "hostile_sparse_idx",
        [4, 3],
        (&good_ptr, 2),
        &[0, 1, 3, 0, 1, 2],
        2,
    )
    .await;
    let cases = [
        ("hostile_sparse_ptr", "indptr", "c/1"),
        ("hostile_sparse_end", "indptr", "c/2"),
        ("hostile_sparse_idx", "indices", "c/1"),
    ];
    for (prefix, array, chunk) in cases {
        for columns in [&["X"][..], &["dim_1", "X"], &["dim_0", "X"], &["dim_0"]] {
            let err = scan_sparse(prefix, columns, None)
                .await
                .expect_err(&format!("{prefix} {columns:?} was read"));
            match chunk_error(err, array, chunk) {
                ChunkError::Offsets(_) if array == "indptr" => {}
                ChunkError::Invalid(m) if array == "indices" => {
                    assert!(m.contains("index 3") && m.contains("3 positions"), "{m}")
                }
                other => panic!("{prefix} {columns:?}: {other:?}"),
            }
        }
    }
}

/// Item 12: `indptr`, read whole whatever is projected, is reserved from the scan's budget
/// before it is read: 200 001 int64 offsets (3.2 MB with their conversion) do not fit 1 MiB.
#[tokio::test]
async fn a_sparse_matrix_indptr_is_reserved_from_the_budget() {
    let rows = 200_000usize;
    let mut indptr = vec![0i64, 2, 2, 5];
    indptr.resize(rows + 1, 6);
    let indices = [0i32, 1, 2, 0, 1, 2];
    sparse(
        "hostile_sparse_big",
        [rows as u64, 3],
        (&indptr, 1 << 18),
        &indices,
        6,
    )
    .await;
    let held = (rows as u64 + 1) * 16;
    for columns in [&["X"][..], &["dim_0", "X"]] {
        let small = Budget::new(1 << 20);
        let err = scan_sparse("hostile_sparse_big", columns, Some(small.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::MemoryExhausted(e) if e.reading.contains(&held.to_string())),
            "{err}"
        );
        assert_eq!(small.used.load(Ordering::SeqCst), 0);
        let enough = Budget::new(8 << 20);
        let batches = scan_sparse("hostile_sparse_big", columns, Some(enough.clone()))
            .await
            .unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 6);
        assert!(enough.peak.load(Ordering::SeqCst) as u64 >= held);
        assert_eq!(enough.used.load(Ordering::SeqCst), 0);
    }
}
