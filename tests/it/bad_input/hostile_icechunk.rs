//! Hostile icechunk inputs (issue 21): each test fails without its fix.
//!
//! - A snapshot naming a node type icechunk does not know makes icechunk-format panic: zarrow
//!   turns the panic into an error naming the repository and the key it was reading.
//! - A chunk never written (zarr-python writes none equal to the fill value) is the fill value
//!   (`unwritten.icechunk`, written by icechunk with zarr-python's answers beside it), and
//!   `NotFound` on every read path of the repository's object store.
//! - `virtual_chunks` authorizes containers on whole path segments, and a refused virtual
//!   chunk names that option.

use std::path::Path;

use bytes::Bytes;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use serde_json::Value;
use zarrow::BytesToBytes;
use zarrow::RepositoryPanic;
use zarrow::{
    Node, RemoteOptions, StringType, TableModel, TableOptions, ZarrReadOptions, ZarrStore,
};

use crate::common::{copy_dir, data_dir};
use crate::fixtures::check_entries;

/// The binary header of an Icechunk metadata file (magic, writer, spec version, file type,
/// compression); the zstd frame of a flatbuffer follows.
const HEADER_LEN: usize = 39;

const ZSTD: BytesToBytes = BytesToBytes::Zstd {
    level: 3,
    checksum: false,
};

/// The flatbuffer inside a snapshot or manifest file, and the file's header.
fn body_of(file: &[u8]) -> (&[u8], Bytes) {
    let body = ZSTD
        .decode(Bytes::copy_from_slice(&file[HEADER_LEN..]), 64 << 20)
        .unwrap();
    (&file[..HEADER_LEN], body)
}

/// A metadata file holding `body` behind `header` (as icechunk writes them).
fn file_of(header: &[u8], body: &[u8]) -> Vec<u8> {
    [header, &ZSTD.encode(body).unwrap()].concat()
}

/// The positions of the `node_data_type` byte (the type of the `NodeData` union: 1 array,
/// 2 group) of every node in a snapshot's flatbuffer (icechunk's `snapshot.fbs`: field 2 of
/// `Snapshot` is `nodes`, field 3 of `NodeSnapshot` is `node_data_type`).
fn node_type_positions(buf: &[u8]) -> Vec<usize> {
    let u32_at = |p: usize| u32::from_le_bytes(buf[p..p + 4].try_into().unwrap()) as usize;
    let u16_at = |p: usize| u16::from_le_bytes(buf[p..p + 2].try_into().unwrap()) as usize;
    // where a table's field is: the vtable (at the table minus the i32 the table starts with)
    // gives the field's offset in the table, 0 if absent
    let field = |table: usize, vt_offset: usize| {
        let back = i32::from_le_bytes(buf[table..table + 4].try_into().unwrap());
        let vtable = (table as i64 - back as i64) as usize;
        let off = if vt_offset < u16_at(vtable) {
            u16_at(vtable + vt_offset)
        } else {
            0
        };
        (off != 0).then_some(table + off)
    };
    let root = u32_at(0);
    let nodes_field = field(root, 8).expect("Snapshot.nodes");
    let nodes = nodes_field + u32_at(nodes_field);
    (0..u32_at(nodes))
        .map(|i| {
            let slot = nodes + 4 + 4 * i;
            let node = slot + u32_at(slot);
            field(node, 10).expect("NodeSnapshot.node_data_type")
        })
        .collect()
}

/// A copy of the fixture repository `name` in a temporary directory.
fn copy_of(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join(name);
    copy_dir(&data_dir().join(name), &copy);
    (tmp, copy)
}

/// Whether `e`'s chain of sources holds a [`RepositoryPanic`]; its text if so.
fn repository_panic(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(p) = err.downcast_ref::<RepositoryPanic>() {
            return Some(p.to_string());
        }
        source = err.source();
    }
    None
}

#[tokio::test]
async fn a_snapshot_with_an_unknown_node_type_is_an_error_not_a_panic() {
    let (_tmp, copy) = copy_of("unwritten.icechunk");
    // every node of every snapshot gets the union type 9, which no icechunk knows
    let mut damaged = 0;
    for entry in std::fs::read_dir(copy.join("snapshots")).unwrap() {
        let path = entry.unwrap().path();
        let file = std::fs::read(&path).unwrap();
        let (header, body) = body_of(&file);
        let mut body = body.to_vec();
        for at in node_type_positions(&body) {
            assert!(matches!(body[at], 1 | 2), "a node type byte: {}", body[at]);
            body[at] = 9;
            damaged += 1;
        }
        std::fs::write(&path, file_of(header, &body)).unwrap();
    }
    assert!(damaged >= 8, "{damaged}");
    let repo = format!("icechunk+file://{}", copy.display());

    // opening an array: the read of its metadata is the error, naming repository and key
    let err = TableModel::open(&format!("{repo}@main/ints"), TableOptions::default())
        .await
        .unwrap_err();
    let panic = repository_panic(&err).unwrap_or_else(|| panic!("not a RepositoryPanic: {err}"));
    assert!(panic.contains(&repo), "{panic}");
    assert!(panic.contains("reading 'ints/zarr.json'"), "{panic}");
    assert!(panic.contains("Invalid node data type"), "{panic}");
    let msg = err.to_string();
    assert!(
        msg.contains("ints") && msg.contains("Invalid node data type"),
        "{msg}"
    );

    // the same for the repository's object store on every call into icechunk, listing too;
    // a store that has panicked once answers again (with the same error)
    let store = ZarrStore::open(&format!("{repo}@main")).unwrap();
    let objects = store.object_store();
    for _ in 0..2 {
        let e = objects.get(&"ints/zarr.json".into()).await.unwrap_err();
        assert!(repository_panic(&e).is_some(), "{e}");
        let e = objects.head(&"ints/c/2".into()).await.unwrap_err();
        assert!(
            repository_panic(&e).is_some_and(|p| p.contains("'ints/c/2'")),
            "{e}"
        );
    }
    let e = objects.list_with_delimiter(None).await.unwrap_err();
    assert!(
        repository_panic(&e).is_some_and(|p| p.contains("listing")),
        "{e}"
    );
    assert!(zarrow::tree::render(&format!("{repo}@main")).await.is_err());
}

fn expected_unwritten() -> Value {
    serde_json::from_slice(
        &std::fs::read(data_dir().join("expected_unwritten_icechunk.json")).unwrap(),
    )
    .unwrap()
}

fn unwritten_repo() -> String {
    format!(
        "icechunk+file://{}",
        data_dir().join("unwritten.icechunk").display()
    )
}

#[test]
fn unwritten_chunks_read_as_the_fill_value() {
    let want = expected_unwritten();
    let mut entries = Vec::new();
    for (version, arrays) in want["versions"].as_object().unwrap() {
        for (path, a) in arrays.as_object().unwrap() {
            // zero-dimensional arrays are no table; their chunk is checked below
            if a["shape"].as_array().unwrap().is_empty() {
                continue;
            }
            let mut e = a.clone();
            e["store"] = Value::String(version.clone());
            e["path"] = Value::String(path.clone());
            entries.push(e);
        }
    }
    assert!(entries.len() >= 10, "{}", entries.len());
    let base = unwritten_repo();
    check_entries(&entries, StringType::Utf8, |version, path| {
        format!("{base}@{version}/{path}")
    });
}

/// Every way of reading an object answers `NotFound` for a chunk the manifest does not list,
/// and reads a chunk it lists.
#[tokio::test]
async fn unwritten_chunks_are_not_found_on_every_read_path() {
    let want = expected_unwritten();
    let mut absent_keys = 0;
    for (version, arrays) in want["versions"].as_object().unwrap() {
        let store = ZarrStore::open(&format!("{}@{version}", unwritten_repo())).unwrap();
        let objects = store.object_store();
        for (path, a) in arrays.as_object().unwrap() {
            let absent: Vec<&str> = a["absent_chunks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap())
                .collect();
            for key in &absent {
                absent_keys += 1;
                let location = object_store::path::Path::from(*key);
                let not_found = |what: &str, r: object_store::Result<()>| match r {
                    Err(object_store::Error::NotFound { .. }) => {}
                    other => panic!("{version} {key} {what}: {other:?}"),
                };
                not_found("get", objects.get(&location).await.map(|_| ()));
                not_found("head", objects.head(&location).await.map(|_| ()));
                not_found(
                    "get_range",
                    objects.get_range(&location, 0..1).await.map(|_| ()),
                );
                not_found(
                    "get_ranges",
                    objects
                        .get_ranges(&location, &[0..1, 2..3])
                        .await
                        .map(|_| ()),
                );
                for range in [
                    GetRange::Bounded(0..4),
                    GetRange::Offset(0),
                    GetRange::Suffix(4),
                ] {
                    let options = GetOptions {
                        range: Some(range.clone()),
                        ..Default::default()
                    };
                    not_found(
                        &format!("get_opts {range:?}"),
                        objects.get_opts(&location, options).await.map(|_| ()),
                    );
                }
            }
            // a chunk that was written reads
            if path == "ints" || path == "scalar_written" {
                let key = match (version.as_str(), path.as_str()) {
                    (_, "scalar_written") => "scalar_written/c",
                    ("main", _) => "ints/c/2",
                    _ => "ints/c/1",
                };
                assert!(!absent.contains(&key), "{key}");
                let location = object_store::path::Path::from(key);
                let meta = objects.head(&location).await.unwrap();
                assert!(meta.size > 0, "{version} {key}");
                let bytes = objects.get(&location).await.unwrap().bytes().await.unwrap();
                assert_eq!(bytes.len() as u64, meta.size);
            }
        }
    }
    assert!(absent_keys >= 20, "{absent_keys}");
}

/// `virtual_chunks=file:///tmp/zarrow-icechunk-virt` must not authorize the repository's
/// container `file:///tmp/zarrow-icechunk-virtual/` (as `file:///data/x` must not authorize
/// `file:///data/x_evil/`); refused, the error names zarrow's option, not icechunk's Python
/// documentation.
#[tokio::test]
async fn virtual_chunk_containers_are_authorized_on_whole_path_segments() {
    let expected: Value =
        serde_json::from_slice(&std::fs::read(data_dir().join("expected_icechunk.json")).unwrap())
            .unwrap();
    let prefix = expected["virtual"]["prefix"].as_str().unwrap();
    assert_eq!(prefix, "file:///tmp/zarrow-icechunk-virtual/");
    // the chunk's source in place (written aside and renamed: another test copies it there
    // too), so that a container wrongly authorized would be read
    let dir = prefix.strip_prefix("file://").unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let aside = Path::new(dir).join(format!("source.bin.{}", std::process::id()));
    std::fs::copy(
        data_dir().join(expected["virtual"]["source"].as_str().unwrap()),
        &aside,
    )
    .unwrap();
    std::fs::rename(&aside, Path::new(dir).join("source.bin")).unwrap();
    let loc = format!(
        "icechunk+file://{}/ints",
        data_dir().join("virtual.icechunk").display()
    );
    let read = |virtual_chunks: Option<&str>| {
        let remote = RemoteOptions {
            virtual_chunks: virtual_chunks.map(String::from),
            ..Default::default()
        };
        let store = ZarrStore::open_configured(&loc, &[], &remote);
        async move {
            match Node::open_store(store?, "ints").await? {
                Node::Array(a) => a.read_chunk(&[0], &ZarrReadOptions::default()).await,
                Node::Group(_) => panic!("a group"),
            }
            .map(|_| ())
        }
    };
    for refused in [
        None,
        Some("file:///tmp/zarrow-icechunk-virt"),
        Some("file:///tmp/zarrow-icechunk-virtual/sub"),
        Some(""),
        Some(" , "),
    ] {
        let err = read(refused).await.unwrap_err().to_string();
        assert!(
            err.contains("ints/c/0")
                && err.contains("virtual_chunks")
                && err.contains(prefix)
                && !err.contains("icechunk.io"),
            "{refused:?}: {err}"
        );
    }
}
