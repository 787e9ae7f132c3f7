//! Icechunk repositories made hostile, for the tests of every path that reads one (the core
//! tests in `tests/it/bad_input/hostile_icechunk.rs`, the CLI's): a copy of a fixture
//! repository whose snapshots give a node a type icechunk does not know. icechunk-format
//! panics reading such a node ("Invalid node data type in flatbuffers file <UNKNOWN 7>");
//! zarrow must answer every read of the repository with an error naming it and the node.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use zarrow::BytesToBytes;

/// The binary header of an Icechunk metadata file (magic, writer, spec version, file type,
/// compression); the zstd frame of a flatbuffer follows.
pub const HEADER_LEN: usize = 39;

const ZSTD: BytesToBytes = BytesToBytes::Zstd {
    level: 3,
    checksum: false,
};

/// The flatbuffer inside a snapshot or manifest file, and the file's header.
pub fn body_of(file: &[u8]) -> (&[u8], Bytes) {
    let body = ZSTD
        .decode(Bytes::copy_from_slice(&file[HEADER_LEN..]), 64 << 20)
        .unwrap();
    (&file[..HEADER_LEN], body)
}

/// A metadata file holding `body` behind `header` (as icechunk writes them).
pub fn file_of(header: &[u8], body: &[u8]) -> Vec<u8> {
    [header, &ZSTD.encode(body).unwrap()].concat()
}

/// Every node of a snapshot's flatbuffer: its path and the position of its `node_data_type`
/// byte (the type of the `NodeData` union: 0 none, 1 array, 2 group; icechunk's
/// `snapshot.fbs`: field 2 of `Snapshot` is `nodes`, fields 1 and 3 of `NodeSnapshot` are
/// `path` and `node_data_type`).
pub fn nodes_of(buf: &[u8]) -> Vec<(String, usize)> {
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
            let path_field = field(node, 6).expect("NodeSnapshot.path");
            let path = path_field + u32_at(path_field);
            let path = std::str::from_utf8(&buf[path + 4..path + 4 + u32_at(path)]).unwrap();
            let at = field(node, 10).expect("NodeSnapshot.node_data_type");
            (path.to_string(), at)
        })
        .collect()
}

/// Give the node `node` (`/ints`; every node if `None`) the type `node_type` in every
/// snapshot of the repository at `repo` that has it; how many nodes were changed.
pub fn set_node_type(repo: &Path, node: Option<&str>, node_type: u8) -> usize {
    let mut changed = 0;
    for entry in std::fs::read_dir(repo.join("snapshots")).unwrap() {
        let path = entry.unwrap().path();
        let file = std::fs::read(&path).unwrap();
        let (header, body) = body_of(&file);
        let mut body = body.to_vec();
        for (at_path, at) in nodes_of(&body) {
            if node.is_none_or(|n| n == at_path) {
                assert!(matches!(body[at], 1 | 2), "a node type byte: {}", body[at]);
                body[at] = node_type;
                changed += 1;
            }
        }
        std::fs::write(&path, file_of(header, &body)).unwrap();
    }
    changed
}

/// A copy of the fixture repository `name` (in `tests/fixtures/data`) under `dir` whose node
/// `node` has the type `node_type` in every snapshot that has it: its path.
pub fn with_node_type(dir: &Path, name: &str, node: &str, node_type: u8) -> PathBuf {
    let copy = dir.join(format!("type{node_type}_{name}"));
    crate::copy_dir(&crate::fixtures_dir().join(name), &copy);
    let changed = set_node_type(&copy, Some(node), node_type);
    assert!(changed > 0, "no node {node} in {name}");
    copy
}
