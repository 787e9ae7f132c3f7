//! Fuzz Icechunk repositories: the input replaces one snapshot or one manifest of a copy of
//! the fixture repository `tests/fixtures/data/unwritten.icechunk` (written by icechunk 2.3:
//! two commits on `main`, the tag `v1`, inline chunks, chunks never written, a sharded and a
//! zero-dimensional array); zarrow opens the repository at `main` and at `v1`, walks it as
//! `tree` does and reads every array. Icechunk decodes those files itself, zarrow reads
//! through it: the result must be values or an error, never a panic (icechunk-format's own
//! panics included — zarrow catches them at its boundary), a hang or an allocation sized by a
//! number in the input.
//!
//! Input: `[selector: u8][rest]`. Selector bit 0: a snapshot (0) or a manifest (1); bits 1–6:
//! which one (modulo their number, in file-name order); bit 7 clear: `rest` is the flatbuffer,
//! written behind the original file's header in a zstd frame the target makes; bit 7 set: the
//! first 39 bytes of `rest` are the header (magic, writer, spec version, file type,
//! compression) and the remainder is the flatbuffer. Raw zstd frames are not taken: icechunk
//! allocates the size a frame declares (up to 16 GiB) before decoding it. A manifest is read
//! by the size the snapshot records: a longer replacement is cut there (a shorter one reads
//! whole). `fuzz/seeds.py` writes every snapshot and manifest of the fixture in both forms.
#![no_main]

#[path = "shared/read_table.rs"]
mod shared;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use zarrow::BytesToBytes;
use zarrow::{Node, ZarrStore};

/// The binary header of an Icechunk metadata file.
const HEADER_LEN: usize = 39;

/// The repository copy and its original snapshots and manifests (path, bytes).
struct Repository {
    dir: PathBuf,
    snapshots: Vec<(PathBuf, Vec<u8>)>,
    manifests: Vec<(PathBuf, Vec<u8>)>,
    /// The file the last input replaced, to be restored.
    replaced: Option<(PathBuf, Vec<u8>)>,
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // icechunk decodes on the blocking pool and sleeps between retries
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime")
    })
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a temporary directory");
    for e in std::fs::read_dir(from).expect("the fixture repository") {
        let e = e.expect("a directory entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("a file type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).expect("a copied file");
        }
    }
}

fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("a repository directory")
        .map(|e| {
            let path = e.expect("a directory entry").path();
            let bytes = std::fs::read(&path).expect("a repository file");
            (path, bytes)
        })
        .collect();
    out.sort();
    out
}

fn repository() -> &'static Mutex<Repository> {
    static REPO: OnceLock<Mutex<Repository>> = OnceLock::new();
    REPO.get_or_init(|| {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/data/unwritten.icechunk");
        let dir = std::env::temp_dir()
            .join(format!("zarrow-fuzz-icechunk-{}", std::process::id()))
            .join("repo.icechunk");
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&fixture, &dir);
        Mutex::new(Repository {
            snapshots: files(&dir.join("snapshots")),
            manifests: files(&dir.join("manifests")),
            dir,
            replaced: None,
        })
    })
}

/// The file `input` asks for: its path and new bytes; `None` if the input is too short.
fn replacement(repo: &Repository, input: &[u8]) -> Option<(PathBuf, Vec<u8>)> {
    let (&selector, rest) = input.split_first()?;
    let kind = if selector & 1 == 0 {
        &repo.snapshots
    } else {
        &repo.manifests
    };
    if kind.is_empty() {
        return None;
    }
    let (path, original) = &kind[usize::from((selector >> 1) & 0x3f) % kind.len()];
    let (header, body) = if selector & 0x80 != 0 {
        if rest.len() < HEADER_LEN {
            return None;
        }
        rest.split_at(HEADER_LEN)
    } else {
        (&original[..HEADER_LEN.min(original.len())], rest)
    };
    let zstd = BytesToBytes::Zstd {
        level: 1,
        checksum: false,
    };
    let mut file = header.to_vec();
    file.extend_from_slice(&zstd.encode(body).ok()?);
    Some((path.clone(), file))
}

/// Open the repository at `version`, walk it and read the root's children as tables.
async fn read_version(dir: &Path, version: &str) {
    let location = format!("icechunk+file://{}@{version}", dir.display());
    let Ok(store) = ZarrStore::open(&location) else {
        return;
    };
    let Ok(root) = Node::open_store(store, "").await else {
        return;
    };
    let _ = zarrow::tree::render_node("fuzz", root.clone()).await;
    let children = match &root {
        Node::Group(group) => group.children().await.unwrap_or_default(),
        Node::Array(_) => Vec::new(),
    };
    for (_, child) in children.into_iter().take(16) {
        if let Ok(child) = child {
            shared::read_table(child, false).await;
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let mut repo = repository().lock().unwrap_or_else(|e| e.into_inner());
    if let Some((path, bytes)) = repo.replaced.take() {
        std::fs::write(path, bytes).expect("a restored file");
    }
    let Some((path, bytes)) = replacement(&repo, input) else {
        return;
    };
    let original = repo
        .snapshots
        .iter()
        .chain(&repo.manifests)
        .find(|(p, _)| *p == path)
        .map(|(_, b)| b.clone())
        .expect("an original file");
    std::fs::write(&path, bytes).expect("a replaced file");
    repo.replaced = Some((path, original));
    let dir = repo.dir.clone();
    runtime().block_on(async {
        for version in ["main", "v1"] {
            read_version(&dir, version).await;
        }
    });
});
