//! Hostile icechunk inputs (issues 21 and 35): each test fails without its fix.
//!
//! - A snapshot naming a node type icechunk does not know (0, none; 7 or 9, unknown) makes
//!   icechunk-format panic, also in tasks icechunk spawns itself (its preloading of
//!   manifests), which no read awaits: zarrow checks the snapshot's nodes first, and every
//!   path that reads the repository (tables, nodes, the tree, the object store, DataFusion)
//!   is a [`RepositoryError`] naming the repository and the node, and nothing panics.
//! - A chunk never written (zarr-python writes none equal to the fill value) is the fill value
//!   (`unwritten.icechunk`, written by icechunk with zarr-python's answers beside it), and
//!   `NotFound` on every read path of the repository's object store.
//! - `virtual_chunks` authorizes containers on whole path segments, and a refused virtual
//!   chunk names that option.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use serde_json::Value;
use zarrow::{
    Node, RemoteOptions, StringType, TableModel, TableOptions, ZarrReadOptions, ZarrStore,
};
use zarrow::{RepositoryError, RepositoryErrorKind};
use zarrow_testkit::hostile_icechunk::with_node_type;

use crate::common::data_dir;
use crate::fixtures::check_entries;

/// The [`RepositoryError`] in `e`'s chain of sources.
fn repository_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a RepositoryError> {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(r) = err.downcast_ref::<RepositoryError>() {
            return Some(r);
        }
        source = err.source();
    }
    None
}

/// `e` and its sources, one per line (what the CLI shows).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut lines = vec![e.to_string()];
    let mut source = e.source();
    while let Some(err) = source {
        lines.push(err.to_string());
        source = err.source();
    }
    lines.join("\n")
}

/// The panics of this process whose message says icechunk met a node type it does not know:
/// a panic in a task icechunk spawns reaches no read, only the panic hook sees it.
static UNKNOWN_NODE_TYPE_PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_unknown_node_type_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            if message.contains("Invalid node data type") {
                UNKNOWN_NODE_TYPE_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info)
        }));
    });
}

#[tokio::test]
async fn a_snapshot_with_an_unknown_node_type_is_a_repository_error_on_every_path() {
    count_unknown_node_type_panics();
    let tmp = tempfile::tempdir().unwrap();
    // 0 is the union's NONE, 7 and 9 no type at all: icechunk-format panics on each
    for node_type in [0u8, 7, 9] {
        let copy = with_node_type(tmp.path(), "unwritten.icechunk", "/ints", node_type);
        let repo = format!("icechunk+file://{}", copy.display());
        let check = |what: &str, e: &(dyn std::error::Error + 'static)| {
            let r = repository_error(e)
                .unwrap_or_else(|| panic!("type {node_type}, {what}: no RepositoryError: {e}"));
            assert!(
                matches!(
                    &r.cause,
                    RepositoryErrorKind::UnknownNodeType { node, node_type: t, .. }
                        if node == "/ints" && *t == node_type
                ),
                "type {node_type}, {what}: {r}"
            );
            let text = chain(e);
            assert!(
                text.contains(&repo)
                    && text.contains("'/ints'")
                    && text.contains(&format!("node type {node_type}"))
                    && !text.contains(".rs:")
                    && !text.contains("icechunk-format")
                    && !text.contains("panicked"),
                "type {node_type}, {what}: {text}"
            );
        };

        // tables: the damaged array, one beside it, at a branch, a tag and without a version
        for location in [
            format!("{repo}@main/ints"),
            format!("{repo}@main/labels"),
            format!("{repo}@v1/grid"),
            format!("{repo}/scalar_written"),
        ] {
            let e = TableModel::open(&location, TableOptions::default())
                .await
                .unwrap_err();
            check(&location, &e);
        }
        // nodes and the hierarchy
        let e = Node::open(&format!("{repo}@main")).await.unwrap_err();
        check("Node::open", &e);
        let e = zarrow::tree::render(&format!("{repo}@main"))
            .await
            .unwrap_err();
        check("tree", &e);
        // the repository's object store, on every call into icechunk (listing too); a store
        // that has failed once answers again, with the same error
        let store = ZarrStore::open(&format!("{repo}@main")).unwrap();
        let objects = store.object_store();
        for _ in 0..2 {
            let e = objects.get(&"ints/zarr.json".into()).await.unwrap_err();
            check("get", &e);
            let e = objects.head(&"labels/c/0".into()).await.unwrap_err();
            check("head", &e);
            let e = objects
                .get_range(&"ints/c/2".into(), 0..4)
                .await
                .unwrap_err();
            check("get_range", &e);
            let e = objects.list_with_delimiter(None).await.unwrap_err();
            check("list_with_delimiter", &e);
            let e = objects
                .list_with_delimiter(Some(&"labels".into()))
                .await
                .unwrap_err();
            check("list_with_delimiter labels", &e);
        }
        // DataFusion: registering the table, and a query of a location
        let ctx = zarrow_datafusion::zarr_session_context(Default::default());
        for sql in [
            format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{repo}@main/labels'"),
            format!("SELECT count(*) FROM '{repo}@v1/ints'"),
        ] {
            let result = match ctx.sql(&sql).await {
                Ok(df) => df.collect().await.map(|_| ()),
                Err(e) => Err(e),
            };
            let e = result.expect_err(&sql);
            let text = chain(&e);
            assert!(
                text.contains(&repo)
                    && text.contains("'/ints'")
                    && text.contains(&format!("node type {node_type}"))
                    && !text.contains(".rs:"),
                "type {node_type}, {sql}: {text}"
            );
        }
    }
    // icechunk's own tasks (its manifest preloading) had time to run: none met the node
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(UNKNOWN_NODE_TYPE_PANICS.load(Ordering::SeqCst), 0);
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
