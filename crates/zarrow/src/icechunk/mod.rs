//! Icechunk repositories as zarrow locations (cargo feature `icechunk`).
//!
//! ```text
//!  icechunk+file:///data/atlas.icechunk@v1/obs      icechunk+s3://bucket/atlas.icechunk/obs
//!        │ repository root   │ REF │ node                 │ root found by probing ancestors
//!        ▼                                                 ▼
//!  Repository (read-only) ─▶ Session at REF ─▶ icechunk::Store (zarr keys: "obs/zarr.json", "obs/c/0")
//!        ▲
//!  RepositoryObjectStore: an object_store::ObjectStore over that Store, rooted at the node
//! ```
//!
//! A repository lives in a local directory or in a bucket of S3 (`icechunk+s3:`), Google Cloud
//! Storage (`icechunk+gs:`) or Azure Blob Storage (`icechunk+az:`); `backend.rs` opens its
//! storage there.
//!
//! Writes (`session.rs`) go through a writable session on a branch, served as an object store
//! the same way, and one commit; `write/commit.rs` drives them.
//!
//! The repository is opened lazily, on the first read, so a location opens as synchronously
//! as a plain store's and everything above [`crate::store::ZarrStore`] reads a repository as
//! it reads any store: tables, pruning, `tree`, export. `REF` (or the option `ref`) is a branch
//! (default `main`), else a tag, else a snapshot id; without `@REF`, the repository's root is
//! the nearest ancestor of the path (the path itself first) that holds a repository. Each
//! chunk is looked up in the session's manifest: an inline one is sliced from it, one in the
//! repository's chunk files is read through zarrow's own object store at the repository's
//! root (icechunk's `get` streams it in small pieces), a virtual one through icechunk, from
//! authorized containers only (`virtual_chunks`, matched on whole path segments). A chunk the
//! manifest does not list is `NotFound` (the fill value), on every read path.
//!
//! A process opens a repository once (by root and options) and keeps it for later locations
//! in it, so the streams of one scan share its caches: each manifest is downloaded once.
//!
//! Repositories are untrusted input, and icechunk can panic on some corrupt ones. A snapshot
//! naming a node type icechunk does not know (icechunk-format panics reading that node, also
//! in tasks icechunk spawns itself, which no read awaits) is found before icechunk reads it:
//! every read of the repository at that version is a [`RepositoryError`] naming the
//! repository and the node. Every call into icechunk runs under `catch_unwind` too, and a
//! panic comes out as a [`RepositoryPanic`] naming the repository and the key being read
//! ([`panic_is_guarded`] tells a panic hook that it will).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use futures::FutureExt;
use icechunk::format::manifest::{ChunkPayload, VirtualReferenceErrorKind};
use icechunk::format::{ByteRange, ChunkIndices, Path as NodePath, SnapshotId};
use icechunk::repository::VersionInfo;
use icechunk::session::{SessionError, SessionErrorKind};
use icechunk::store::{ListDirItem, StoreErrorKind};
use icechunk::{Repository, Storage, Store};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload,
    PutResult,
};
use tokio::sync::{OnceCell, RwLock};

use crate::ICECHUNK_PREFIX as PREFIX;

mod backend;
mod session;

use backend::{Backend, Cloud};
pub use session::WritableSession;

/// A parsed repository location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryLocation {
    backend: Backend,
    /// `Some`: the root is known (`@REF` marked it) and this is the node below it.
    node: Option<String>,
    /// The version asked for in the location (`@REF`).
    reference: Option<String>,
}

impl RepositoryLocation {
    /// Parse `icechunk+file:///abs/path[@REF]/node`, `icechunk+file:relative/path…`,
    /// `icechunk+s3://bucket/prefix[@REF]/node`, `icechunk+gs://bucket/prefix[@REF]/node` or
    /// `icechunk+az://container/prefix[@REF]/node`; anything else is an
    /// [`crate::Error::Location`].
    pub fn parse(location: &str) -> crate::Result<Self> {
        let err = |message: String| crate::Error::bad_location(location, message);
        let rest = location
            .strip_prefix(PREFIX)
            .ok_or_else(|| err(format!("not an Icechunk location (expected {PREFIX}…)")))?;
        let (scheme, path) = rest
            .split_once(':')
            .ok_or_else(|| err(format!("expected one of {}", backend::SCHEMES)))?;
        let path = path.trim_end_matches('/');
        // `@REF` ends the component that is the repository's root.
        let (root, reference, node) = match path.split_once('@') {
            Some((root, after)) => {
                let (reference, node) = after.split_once('/').unwrap_or((after, ""));
                if reference.is_empty() {
                    return Err(err("an empty version after '@'".into()));
                }
                (root, Some(reference.to_string()), Some(node.to_string()))
            }
            None => (path, None, None),
        };
        let backend = match scheme {
            "file" => {
                let local = root.strip_prefix("//").unwrap_or(root);
                if local.is_empty() {
                    return Err(err("no repository path".into()));
                }
                Backend::File(PathBuf::from(local))
            }
            other => {
                let cloud = Cloud::from_scheme(other).ok_or_else(|| {
                    err(format!(
                        "icechunk+{other}: repositories are read from {}",
                        backend::SCHEMES
                    ))
                })?;
                let bucketed = root
                    .strip_prefix("//")
                    .ok_or_else(|| err(format!("expected icechunk+{other}://bucket/prefix")))?;
                let (bucket, prefix) = bucketed.split_once('/').unwrap_or((bucketed, ""));
                if bucket.is_empty() {
                    return Err(err("no bucket".into()));
                }
                Backend::Cloud {
                    cloud,
                    bucket: bucket.to_string(),
                    prefix: prefix.to_string(),
                }
            }
        };
        Ok(RepositoryLocation {
            backend,
            node,
            reference,
        })
    }

    /// The candidate (root, node) splits, nearest first: the one `@REF` gave, or the path
    /// itself and then each ancestor.
    fn candidates(&self) -> Vec<(Backend, String)> {
        if let Some(node) = &self.node {
            return vec![(self.backend.clone(), node.clone())];
        }
        let full = match &self.backend {
            Backend::File(p) => p.to_string_lossy().into_owned(),
            Backend::Cloud { prefix, .. } => prefix.clone(),
        };
        let parts: Vec<&str> = full.split('/').collect();
        (0..=parts.len())
            .rev()
            .filter(|&n| n > 0 || matches!(self.backend, Backend::Cloud { .. }))
            .map(|n| {
                let root = parts[..n].join("/");
                let node = parts[n..].join("/");
                let backend = match &self.backend {
                    Backend::File(_) => Backend::File(PathBuf::from(if root.is_empty() {
                        "/".to_string()
                    } else {
                        root
                    })),
                    Backend::Cloud { cloud, bucket, .. } => Backend::Cloud {
                        cloud: *cloud,
                        bucket: bucket.clone(),
                        prefix: root,
                    },
                };
                (backend, node)
            })
            .collect()
    }
}

/// The store options a repository in a cloud store is opened with (as `object_store` names
/// them for S3, GCS or Azure), and the version option `ref`.
#[derive(Debug, Clone, Default)]
pub struct RepositoryOptions {
    /// `ref`: the branch, tag or snapshot id (a `@REF` in the location wins).
    pub reference: Option<String>,
    /// `aws_*`, `google_*`, `azure_*` and client options (`allow_http`, …); the environment
    /// (`AWS_*`, `GOOGLE_*`, `AZURE_*`) fills in the rest.
    pub store: Vec<(String, String)>,
    /// `virtual_chunks`: the container URL prefixes virtual chunks may be read from
    /// (comma-separated, `*` for every container the repository declares); none if unset.
    pub virtual_chunks: Option<String>,
}

/// An `ObjectStore` serving one node of a repository at one version, opened on first use.
pub struct RepositoryObjectStore {
    location: RepositoryLocation,
    options: RepositoryOptions,
    display: String,
    opened: OnceCell<Opened>,
}

/// The open repository: its zarr store, the node the object store is rooted at, and the
/// repository's own root as a zarrow object store (its chunk files are read from there).
struct Opened {
    store: Store,
    /// The id of the snapshot the session reads (its branch or tag resolved when opened).
    snapshot: String,
    node: String,
    files: Option<(Arc<dyn ObjectStore>, Path)>,
}

/// A chunk key's node path and chunk coordinates (`obs/x/c/0/1` → `/obs/x`, [0, 1]; `x/c`,
/// the one chunk of a zero-dimensional array → `/x`, []); `None` for a metadata key.
fn chunk_of(key: &str) -> Option<(NodePath, ChunkIndices)> {
    let (node, coords) = if key == "c" {
        ("", None)
    } else if let Some(node) = key.strip_suffix("/c") {
        (node, None)
    } else if let Some(coords) = key.strip_prefix("c/") {
        ("", Some(coords))
    } else {
        let (node, coords) = key.rsplit_once("/c/")?;
        (node, Some(coords))
    };
    let coords: Vec<u32> = match coords {
        None => Vec::new(),
        Some(coords) => coords
            .split('/')
            .map(|c| c.parse().ok())
            .collect::<Option<_>>()?,
    };
    let path = NodePath::try_from(format!("/{node}").as_str()).ok()?;
    Some((path, ChunkIndices(coords)))
}

impl Opened {
    /// How a chunk is stored; `None`: the manifest lists no such chunk (it was never written).
    async fn payload(
        &self,
        path: &NodePath,
        coords: &ChunkIndices,
    ) -> Result<Option<ChunkPayload>, SessionError> {
        let session = self.store.session();
        let session = session.read().await;
        session.get_chunk_ref(path, coords).await
    }
}

/// A panic inside icechunk while reading a repository (icechunk-format panics on some corrupt
/// repositories, e.g. a snapshot naming a node type it does not know), as the error of that
/// read: the source of the `object_store` error zarrow reports for the key.
#[cfg_attr(docsrs, doc(cfg(feature = "icechunk")))]
#[derive(Debug, thiserror::Error)]
#[error("Icechunk repository {repository}: icechunk panicked {reading}: {message}")]
pub struct RepositoryPanic {
    /// The repository's location, as given.
    pub repository: String,
    /// What was being read (`reading 'labels/zarr.json'`, `listing 'obs'`).
    pub reading: String,
    /// The panic's message.
    pub message: String,
}

/// Why a repository could not be opened, as the error of the read that needed it: the source
/// of the `object_store` error zarrow reports for the key.
#[cfg_attr(docsrs, doc(cfg(feature = "icechunk")))]
#[derive(Debug, thiserror::Error)]
#[error("Icechunk repository {repository}: {cause}")]
pub struct RepositoryError {
    /// The repository's location, as given.
    pub repository: String,
    /// What went wrong.
    pub cause: RepositoryErrorKind,
}

/// What went wrong opening a repository (see [`RepositoryError`]).
#[cfg_attr(docsrs, doc(cfg(feature = "icechunk")))]
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RepositoryErrorKind {
    /// No repository at the path (or, for a location without `@REF`, at any path above it).
    #[error("no Icechunk repository at {path}")]
    NotFound {
        /// The path looked at.
        path: String,
    },
    /// icechunk failed.
    #[error("{doing}: {kind}")]
    Icechunk {
        /// What was being done (`opening the storage`, `opening version 'v1'`).
        doing: String,
        /// icechunk's error kind, as it says it.
        kind: String,
    },
    /// A node of the snapshot read has a type icechunk does not know (icechunk-format panics
    /// reading it): found before icechunk reads the snapshot, so that every read of the
    /// repository at that version is this error.
    #[error(
        "snapshot {snapshot}: the node '{node}' has node type {node_type}, which icechunk does \
         not know (1 is an array, 2 a group): the snapshot is corrupt or from a newer Icechunk"
    )]
    UnknownNodeType {
        /// The snapshot's id.
        snapshot: String,
        /// The node's path in the repository (`/obs/x`).
        node: String,
        /// The type it has.
        node_type: u8,
    },
    /// No branch, tag or snapshot of that name.
    #[error("no branch, tag or snapshot '{reference}' (branches: {}; tags: {})", names(.branches), names(.tags))]
    NoSuchVersion {
        /// The version asked for.
        reference: String,
        /// The repository's branches.
        branches: Vec<String>,
        /// The repository's tags.
        tags: Vec<String>,
    },
}

/// `a, b`, or `none`.
fn names(list: &[String]) -> String {
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}

/// A [`RepositoryErrorKind::Icechunk`] about `doing`.
fn icechunk_failed(doing: impl Into<String>, kind: impl fmt::Display) -> RepositoryErrorKind {
    RepositoryErrorKind::Icechunk {
        doing: doing.into(),
        kind: kind.to_string(),
    }
}

thread_local! {
    /// How many guarded reads ([`RepositoryObjectStore::guarded`]) this thread is polling.
    static GUARDED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether a panic on this thread now happens inside a read of an Icechunk repository, where
/// zarrow catches it and makes it the read's error (a [`RepositoryPanic`]): a panic hook
/// (the `zarrow` command's, which reports a panic as an internal error) can stay silent.
#[cfg_attr(docsrs, doc(cfg(feature = "icechunk")))]
pub fn panic_is_guarded() -> bool {
    GUARDED.with(|g| g.get() > 0)
}

/// A future whose polls count as guarded on the thread that runs them.
struct Guarded<F>(std::pin::Pin<Box<F>>);

impl<F: Future> Future for Guarded<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        /// Counts one guarded poll until dropped, also when the poll unwinds.
        struct Polling;
        impl Drop for Polling {
            fn drop(&mut self) {
                GUARDED.with(|g| g.set(g.get() - 1));
            }
        }
        GUARDED.with(|g| g.set(g.get() + 1));
        let _polling = Polling;
        self.0.as_mut().poll(cx)
    }
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

impl fmt::Debug for RepositoryObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RepositoryObjectStore")
            .field("location", &self.display)
            .finish()
    }
}

impl fmt::Display for RepositoryObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Icechunk({})", self.display)
    }
}

fn generic(message: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "icechunk",
        source: message.into(),
    }
}

impl RepositoryObjectStore {
    /// A store for `location` (parsed by [`RepositoryLocation::parse`]); nothing is read yet.
    pub fn new(location: RepositoryLocation, options: RepositoryOptions, display: &str) -> Self {
        RepositoryObjectStore {
            location,
            options,
            display: display.to_string(),
            opened: OnceCell::new(),
        }
    }

    async fn storage(
        &self,
        backend: &Backend,
    ) -> Result<Arc<dyn Storage + Send + Sync>, RepositoryErrorKind> {
        backend.storage(&self.options.store).await
    }

    /// Find the repository, resolve the version, open a read-only session.
    async fn open(&self) -> Result<Opened, RepositoryErrorKind> {
        let mut found = None;
        for (backend, node) in self.location.candidates() {
            let storage = self.storage(&backend).await?;
            let exists = Repository::exists(Arc::clone(&storage), None)
                .await
                .map_err(|e| icechunk_failed("looking for the repository", e.kind()))?;
            if exists {
                found = Some((backend, storage, node));
                break;
            }
            if self.location.node.is_some() {
                return Err(RepositoryErrorKind::NotFound {
                    path: self
                        .display
                        .split('@')
                        .next()
                        .unwrap_or(&self.display)
                        .to_string(),
                });
            }
        }
        let (root, storage, node) = found.ok_or_else(|| RepositoryErrorKind::NotFound {
            path: "this path or above it".to_string(),
        })?;
        let key = RepositoryKey {
            root: root.clone(),
            store: self.options.store.clone(),
            virtual_chunks: self.options.virtual_chunks.clone(),
        };
        let kept = match REPOSITORIES.get(&key) {
            Some(kept) => kept,
            None => REPOSITORIES.keep(key, self.open_repository(storage).await?),
        };
        let repo = &kept.repo;
        let reference = self
            .location
            .reference
            .clone()
            .or_else(|| self.options.reference.clone())
            .unwrap_or_else(|| "main".to_string());
        let snapshot = resolve(repo, &reference).await?;
        // The snapshot's nodes are checked before icechunk reads them (it panics on a type it
        // does not know, also in tasks of its own that no read awaits: its preloading of
        // manifests), and the session is opened at that very snapshot.
        kept.check_nodes(&snapshot).await?;
        let session = repo
            .readonly_session(&VersionInfo::SnapshotId(snapshot.clone()))
            .await
            .map_err(|e| icechunk_failed(format!("opening version '{reference}'"), e.kind()))?;
        let store = Store::from_session(Arc::new(RwLock::new(session))).await;
        Ok(Opened {
            store,
            snapshot: snapshot.to_string(),
            node: node.trim_matches('/').to_string(),
            files: self.files(&root),
        })
    }

    /// The repository in `storage`, read-only, with access to the virtual chunk containers
    /// the options authorize.
    async fn open_repository(
        &self,
        storage: Arc<dyn Storage + Send + Sync>,
    ) -> Result<Repository, RepositoryErrorKind> {
        let open = |authorized| {
            Repository::open(Arc::clone(&storage))
                .authorize_virtual_chunk_access(authorized)
                .execute()
        };
        let mut repo = open(HashMap::new())
            .await
            .map_err(|e| icechunk_failed("opening the repository", e.kind()))?;
        // Virtual chunks only from the containers the user named (credentials from the
        // environment), so that no repository's metadata alone reaches outside it.
        if let Some(wanted) = &self.options.virtual_chunks {
            let wanted: Vec<&str> = wanted.split(',').map(str::trim).collect();
            let authorized: HashMap<String, Option<_>> = repo
                .config()
                .virtual_chunk_containers()
                .map(|c| c.url_prefix().to_string())
                .filter(|prefix| wanted.iter().any(|w| authorizes(w, prefix)))
                .map(|prefix| (prefix, None))
                .collect();
            if !authorized.is_empty() {
                repo = open(authorized)
                    .await
                    .map_err(|e| icechunk_failed("opening the repository", e.kind()))?;
            }
        }
        Ok(repo)
    }

    /// The repository's root as zarrow reads any store, so its chunk files take zarrow's
    /// own read path (icechunk's buffers a chunk through a stream of small reads);
    /// `None` where that store cannot be had (a cloud one without the `cloud` feature).
    fn files(&self, root: &Backend) -> Option<(Arc<dyn ObjectStore>, Path)> {
        match root {
            Backend::File(path) => crate::store::local(&path.to_string_lossy()).ok(),
            Backend::Cloud { .. } => {
                let url = url::Url::parse(&root.cloud_url()?).ok()?;
                let remote = crate::RemoteOptions::default();
                crate::remote::open(url.as_str(), &url, &self.options.store, &remote)
                    .ok()
                    .map(|remote| (remote.store, remote.root))
            }
        }
    }

    /// The id of the snapshot this store reads, once it has been opened (its first read
    /// resolved the branch or tag); `None` before.
    pub fn snapshot_id(&self) -> Option<String> {
        self.opened.get().map(|o| o.snapshot.clone())
    }

    async fn opened(&self) -> object_store::Result<&Opened> {
        self.opened
            .get_or_try_init(|| self.open())
            .await
            .map_err(|cause| object_store::Error::Generic {
                store: "icechunk",
                source: Box::new(RepositoryError {
                    repository: self.display.clone(),
                    cause,
                }),
            })
    }
}

/// What a repository is opened with: its root and the options that change how (credentials,
/// endpoints, the virtual chunk containers authorized).
#[derive(Debug, Clone, PartialEq, Eq)]
struct RepositoryKey {
    root: Backend,
    store: Vec<(String, String)>,
    virtual_chunks: Option<String>,
}

/// The repositories this process has opened, the most recently opened last (at most
/// [`Self::KEPT`]). Sessions of one repository share its caches of snapshots and manifests
/// (immutable, by id), so the streams of a scan that each open the location (the partitions
/// of a serialized scan on an executor, in tasks of their own) download a manifest once; the
/// version is resolved again at each open, so a branch's new commits are seen.
struct Repositories(std::sync::Mutex<Vec<(RepositoryKey, Arc<Kept>)>>);

/// An open repository, and the snapshots whose nodes have been checked in it.
struct Kept {
    repo: Repository,
    checked: std::sync::Mutex<std::collections::HashSet<SnapshotId>>,
}

static REPOSITORIES: Repositories = Repositories(std::sync::Mutex::new(Vec::new()));

impl Repositories {
    /// How many repositories are kept open (each holds its caches).
    const KEPT: usize = 8;

    fn get(&self, key: &RepositoryKey) -> Option<Arc<Kept>> {
        let kept = self.0.lock().ok()?;
        kept.iter().find(|(k, _)| k == key).map(|(_, r)| r.clone())
    }

    /// Keep `repo` as the repository of `key` (one opened meanwhile by another stream wins,
    /// so all share its caches), dropping the oldest past [`Self::KEPT`].
    fn keep(&self, key: RepositoryKey, repo: Repository) -> Arc<Kept> {
        let repo = Arc::new(Kept {
            repo,
            checked: Default::default(),
        });
        let Ok(mut kept) = self.0.lock() else {
            return repo;
        };
        if let Some((_, first)) = kept.iter().find(|(k, _)| *k == key) {
            return first.clone();
        }
        if kept.len() >= Self::KEPT {
            kept.remove(0);
        }
        kept.push((key, repo.clone()));
        repo
    }
}

impl Kept {
    /// An error if a node of the snapshot has a type icechunk does not know (reading it,
    /// icechunk-format panics); each snapshot is checked once.
    async fn check_nodes(&self, id: &SnapshotId) -> Result<(), RepositoryErrorKind> {
        if self.checked.lock().is_ok_and(|c| c.contains(id)) {
            return Ok(());
        }
        check_snapshot_nodes(&self.repo, id).await?;
        if let Ok(mut checked) = self.checked.lock() {
            checked.insert(id.clone());
        }
        Ok(())
    }
}

/// An error if a node of snapshot `id` of `repo` has a type icechunk does not know.
async fn check_snapshot_nodes(
    repo: &Repository,
    id: &SnapshotId,
) -> Result<(), RepositoryErrorKind> {
    let snapshot = repo
        .asset_manager()
        .fetch_snapshot(id)
        .await
        .map_err(|e| icechunk_failed(format!("reading snapshot {id}"), e.kind()))?;
    let unknown = unknown_node(snapshot.bytes())
        .map_err(|e| icechunk_failed(format!("reading snapshot {id}"), e))?;
    match unknown {
        Some((node, node_type)) => Err(RepositoryErrorKind::UnknownNodeType {
            snapshot: id.to_string(),
            node,
            node_type,
        }),
        None => Ok(()),
    }
}

/// The first node of a snapshot (its flatbuffer) whose type icechunk does not know, with that
/// type: icechunk-format panics on a node whose type is neither array nor group.
fn unknown_node(buffer: &[u8]) -> Result<Option<(String, u8)>, flatbuffers::InvalidFlatbuffer> {
    use icechunk::format::flatbuffers::generated::{NodeData, Snapshot};
    // icechunk's limits (icechunk-format's `ROOT_OPTIONS`), which the buffer passed already
    let options = flatbuffers::VerifierOptions {
        max_depth: 64,
        max_tables: 50_000_000,
        max_apparent_size: usize::MAX,
        ignore_missing_null_terminator: true,
    };
    let snapshot = flatbuffers::root_with_opts::<Snapshot>(&options, buffer)?;
    Ok(snapshot.nodes().iter().find_map(|node| {
        let known = match node.node_data_type() {
            NodeData::Array => node.node_data_as_array().is_some(),
            NodeData::Group => node.node_data_as_group().is_some(),
            _ => false,
        };
        (!known).then(|| (node.path().to_string(), node.node_data_type().0))
    }))
}

/// Whether the entry `wanted` of the option `virtual_chunks` authorizes the container
/// `url_prefix`: `*`, or a URL prefix matched on whole path segments — `file:///data/x` is
/// `file:///data/x/…` and not `file:///data/x_evil/`; an entry ending in `/` matches as it
/// is; an empty entry matches nothing.
fn authorizes(wanted: &str, url_prefix: &str) -> bool {
    if wanted == "*" {
        return true;
    }
    if wanted.is_empty() {
        return false;
    }
    match url_prefix.strip_prefix(wanted) {
        None => false,
        Some(rest) => wanted.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
    }
}

/// A branch, else a tag, else a snapshot id: the snapshot it is at.
async fn resolve(repo: &Repository, reference: &str) -> Result<SnapshotId, RepositoryErrorKind> {
    if let Ok(id) = repo.lookup_branch(reference).await {
        return Ok(id);
    }
    if let Ok(id) = repo.lookup_tag(reference).await {
        return Ok(id);
    }
    if let Ok(id) = SnapshotId::try_from(reference) {
        if repo.lookup_snapshot(&id).await.is_ok() {
            return Ok(id);
        }
    }
    let branches = repo.list_branches().await.unwrap_or_default();
    let tags = repo.list_tags().await.unwrap_or_default();
    Err(RepositoryErrorKind::NoSuchVersion {
        reference: reference.to_string(),
        branches: branches.into_iter().collect(),
        tags: tags.into_iter().collect(),
    })
}

impl Opened {
    /// The repository key of an object path below the node.
    fn key(&self, location: &Path) -> String {
        let relative = location.as_ref().trim_matches('/');
        match (self.node.is_empty(), relative.is_empty()) {
            (true, _) => relative.to_string(),
            (false, true) => self.node.clone(),
            (false, false) => format!("{}/{relative}", self.node),
        }
    }
}

/// A repository error as object_store's: a missing key is `NotFound` (a missing chunk is the
/// fill value, as in any store); the rest name the key.
fn store_error(location: &Path, key: &str, e: icechunk::store::StoreError) -> object_store::Error {
    match e.kind() {
        StoreErrorKind::NotFound(_) => object_store::Error::NotFound {
            path: location.to_string(),
            source: e.kind().to_string().into(),
        },
        StoreErrorKind::SessionError(kind) => session_error_kind(key, kind),
        kind => generic(format!("Icechunk key '{key}': {kind}")),
    }
}

/// A session error as object_store's: a node that is not there is `NotFound`.
fn session_error(location: &Path, key: &str, e: SessionError) -> object_store::Error {
    match e.kind() {
        SessionErrorKind::NodeNotFound { .. } => object_store::Error::NotFound {
            path: location.to_string(),
            source: e.kind().to_string().into(),
        },
        kind => session_error_kind(key, kind),
    }
}

/// A session error naming the key; a virtual chunk refused says how zarrow authorizes it
/// (icechunk's own text points to its Python API).
fn session_error_kind(key: &str, kind: &SessionErrorKind) -> object_store::Error {
    match kind {
        SessionErrorKind::VirtualReferenceError(
            VirtualReferenceErrorKind::UnauthorizedVirtualChunkContainer { url_prefix, .. },
        ) => generic(format!(
            "Icechunk key '{key}': a virtual chunk in the container {url_prefix}, which the \
             option virtual_chunks does not authorize (virtual_chunks '{url_prefix}' reads \
             from it, '*' from every container the repository declares)"
        )),
        SessionErrorKind::VirtualReferenceError(
            VirtualReferenceErrorKind::NoContainerForUrl(url)
            | VirtualReferenceErrorKind::NoContainerForName(url),
        ) => generic(format!(
            "Icechunk key '{key}': a virtual chunk at {url}, in no container the repository \
             declares (zarrow reads virtual chunks only from declared containers that the \
             option virtual_chunks names)"
        )),
        kind => generic(format!("Icechunk key '{key}': {kind}")),
    }
}

fn read_only() -> object_store::Error {
    object_store::Error::NotSupported {
        source: "Icechunk repositories are read-only in zarrow".into(),
    }
}

#[async_trait]
impl ObjectStore for RepositoryObjectStore {
    async fn put_opts(
        &self,
        _location: &Path,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(read_only())
    }

    async fn put_multipart_opts(
        &self,
        _location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(read_only())
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.guarded(
            || format!("reading '{}'", self.key_of(location)),
            self.get_unguarded(location, options),
        )
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        locations.map(|_| Err(read_only())).boxed()
    }

    fn list(&self, _prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // zarrow lists one level at a time (`list_with_delimiter`).
        futures::stream::once(async { Err(read_only()) }).boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let listing = || {
            format!(
                "listing '{}'",
                self.key_of(&prefix.cloned().unwrap_or_default())
            )
        };
        self.guarded(listing, self.list_unguarded(prefix)).await
    }

    async fn copy_opts(
        &self,
        _from: &Path,
        _to: &Path,
        _options: CopyOptions,
    ) -> object_store::Result<()> {
        Err(read_only())
    }
}

impl RepositoryObjectStore {
    /// The repository key of an object path, once the repository is open (the path until then).
    fn key_of(&self, location: &Path) -> String {
        match self.opened.get() {
            Some(opened) => opened.key(location),
            None => location.to_string(),
        }
    }

    /// Run `read` (which opens the repository if need be and calls into icechunk), a panic in
    /// it becoming a [`RepositoryPanic`] about `reading`. The futures hold icechunk's session
    /// and caches, which are not `UnwindSafe`; after a panic they are only read again, and a
    /// read that panics again is caught again.
    async fn guarded<T>(
        &self,
        reading: impl FnOnce() -> String,
        read: impl Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        match AssertUnwindSafe(Guarded(Box::pin(read)))
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(payload) => Err(object_store::Error::Generic {
                store: "icechunk",
                source: Box::new(RepositoryPanic {
                    repository: self.display.clone(),
                    reading: reading(),
                    message: panic_message(payload.as_ref()),
                }),
            }),
        }
    }

    async fn get_unguarded(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let opened = self.opened().await?;
        let key = opened.key(location);
        let err = |e| store_error(location, &key, e);
        // A chunk the manifest does not list was never written (zarr-python writes no chunk
        // equal to the fill value): `NotFound`, as in any store — icechunk's `getsize` would
        // call it 0 bytes long.
        let payload = match chunk_of(&key) {
            Some((path, coords)) => Some(
                opened
                    .payload(&path, &coords)
                    .await
                    .map_err(|e| session_error(location, &key, e))?
                    .ok_or_else(|| object_store::Error::NotFound {
                        path: location.to_string(),
                        source: format!("Icechunk key '{key}': no such chunk in the manifest")
                            .into(),
                    })?,
            ),
            None => None,
        };
        let size = match &payload {
            Some(p) => p.length(),
            None => opened.store.getsize(&key).await.map_err(err)?,
        };
        let range = requested(options.range.as_ref(), size);
        let bytes = if options.head || range.is_empty() {
            Bytes::new()
        } else if let (Some(ChunkPayload::Inline(inline)), true) =
            (&payload, range.end <= inline_len(&payload))
        {
            inline.slice(range.start as usize..range.end as usize)
        } else if let (Some(ChunkPayload::Ref(chunk)), Some((files, root))) =
            (&payload, &opened.files)
        {
            // the chunk file's bytes, read as zarrow reads any object
            let file = root
                .clone()
                .join(icechunk::format::CHUNKS_FILE_PATH)
                .join(chunk.id.to_string());
            let within = chunk.offset + range.start..chunk.offset + range.end;
            let bytes = files.get_range(&file, within).await.map_err(|e| {
                generic(format!("Icechunk key '{key}': its chunk file {file}: {e}"))
            })?;
            if bytes.len() as u64 != range.end - range.start {
                return Err(generic(format!(
                    "Icechunk key '{key}': its chunk file {file} is shorter than the manifest says"
                )));
            }
            bytes
        } else {
            let wanted = if range == (0..size) {
                ByteRange::From(0)
            } else {
                ByteRange::Bounded(range.clone())
            };
            let bytes = opened.store.get(&key, &wanted).await.map_err(err)?;
            check_length(&key, &bytes, &range)?;
            bytes
        };
        let meta = meta(location.clone(), size);
        Ok(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async { Ok(bytes) }).boxed()),
            meta,
            range,
            attributes: Default::default(),
        })
    }

    async fn list_unguarded(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let opened = self.opened().await?;
        let base = prefix.cloned().unwrap_or_default();
        let key = opened.key(&base);
        list_dir(&opened.store, &base, &key).await
    }
}

/// The children of `key` in `store` (the object path `base`), as a delimited listing: groups
/// and arrays as prefixes, documents and chunks as objects (sizes unknown: 0).
async fn list_dir(store: &Store, base: &Path, key: &str) -> object_store::Result<ListResult> {
    let items: Vec<_> = store
        .list_dir_items(key)
        .await
        .map_err(|e| store_error(base, key, e))?
        .collect()
        .await;
    let mut result = ListResult {
        common_prefixes: Vec::new(),
        objects: Vec::new(),
    };
    for item in items {
        match item.map_err(|e| store_error(base, key, e))? {
            ListDirItem::Prefix(p) => result.common_prefixes.push(crate::key::join(base, &p)),
            ListDirItem::Key(k) => result.objects.push(meta(crate::key::join(base, &k), 0)),
        }
    }
    Ok(result)
}

/// The metadata of an object of the repository at `location`, `size` bytes long (the
/// repository keeps no modification time per key).
fn meta(location: Path, size: u64) -> ObjectMeta {
    ObjectMeta {
        location,
        last_modified: chrono_now(),
        size,
        e_tag: None,
        version: None,
    }
}

/// The bytes a request asks for of an object of `size` bytes, clamped to it.
fn requested(range: Option<&GetRange>, size: u64) -> Range<u64> {
    match range {
        None => 0..size,
        Some(GetRange::Bounded(r)) => r.start.min(size)..r.end.min(size),
        Some(GetRange::Offset(o)) => (*o).min(size)..size,
        Some(GetRange::Suffix(n)) => size.saturating_sub(*n)..size,
    }
}

/// An error unless icechunk answered `range` of `key` with as many bytes as it asked for.
fn check_length(key: &str, bytes: &Bytes, range: &Range<u64>) -> object_store::Result<()> {
    if bytes.len() as u64 != range.end - range.start {
        return Err(generic(format!(
            "Icechunk key '{key}': {} bytes where {} were asked for",
            bytes.len(),
            range.end - range.start
        )));
    }
    Ok(())
}

/// The length of an inline payload (0 for any other).
fn inline_len(payload: &Option<ChunkPayload>) -> u64 {
    match payload {
        Some(ChunkPayload::Inline(b)) => b.len() as u64,
        _ => 0,
    }
}

/// Repositories have no modification times per key; the epoch stands in.
fn chrono_now() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::<chrono::Utc>::UNIX_EPOCH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        let l = RepositoryLocation::parse("icechunk+file:///data/a.icechunk@v1/obs/x").unwrap();
        assert_eq!(l.backend, Backend::File("/data/a.icechunk".into()));
        assert_eq!(l.reference.as_deref(), Some("v1"));
        assert_eq!(l.node.as_deref(), Some("obs/x"));
        let l = RepositoryLocation::parse("icechunk+s3://bucket/p/a@main").unwrap();
        assert_eq!(
            l.backend,
            Backend::Cloud {
                cloud: Cloud::S3,
                bucket: "bucket".into(),
                prefix: "p/a".into()
            }
        );
        assert_eq!(l.node.as_deref(), Some(""));
        let l = RepositoryLocation::parse("icechunk+file:rel/a.icechunk/obs").unwrap();
        assert_eq!(l.node, None);
        let roots: Vec<String> = l
            .candidates()
            .into_iter()
            .map(|(b, n)| format!("{b:?} {n}"))
            .collect();
        assert_eq!(
            roots,
            [
                r#"File("rel/a.icechunk/obs") "#,
                r#"File("rel/a.icechunk") obs"#,
                r#"File("rel") a.icechunk/obs"#,
            ]
        );
        for (location, cloud) in [
            ("icechunk+gs://b/p/r.icechunk@v1/obs", Cloud::Gcs),
            ("icechunk+az://b/p/r.icechunk@v1/obs", Cloud::Azure),
            ("icechunk+azure://b/p/r.icechunk@v1/obs", Cloud::Azure),
        ] {
            let l = RepositoryLocation::parse(location).unwrap();
            let want = Backend::Cloud {
                cloud,
                bucket: "b".into(),
                prefix: "p/r.icechunk".into(),
            };
            assert_eq!(l.backend, want, "{location}");
            assert_eq!(l.node.as_deref(), Some("obs"));
        }
        // without @REF the root is looked for up to the bucket itself
        let l = RepositoryLocation::parse("icechunk+gs://b/r/obs").unwrap();
        let prefixes: Vec<String> = l
            .candidates()
            .into_iter()
            .map(|(b, n)| format!("{} {n}", b.cloud_url().unwrap()))
            .collect();
        assert_eq!(prefixes, ["gs://b/r/obs ", "gs://b/r obs", "gs://b/ r/obs"]);
        for bad in [
            "file:///x",
            "icechunk+gcs://b/x",
            "icechunk+abfs://c@account/x",
            "icechunk+gs:b/x",
            "icechunk+az:///x",
            "icechunk+file:///x@/y",
        ] {
            let e = RepositoryLocation::parse(bad).unwrap_err();
            assert_eq!(e.location(), Some(bad), "{e}");
        }
    }

    #[test]
    fn virtual_chunk_prefixes_match_whole_segments() {
        let container = "file:///data/x/";
        for wanted in [
            "*",
            "file:///data/x",
            "file:///data/x/",
            "file:///data",
            "file:///",
        ] {
            assert!(authorizes(wanted, container), "{wanted}");
        }
        for wanted in [
            "",
            "file:///data/x/y",
            "file:///data/x_",
            "file:///da",
            "s3://data/x",
        ] {
            assert!(!authorizes(wanted, container), "{wanted}");
        }
        assert!(!authorizes("file:///data/x", "file:///data/x_evil/"));
        assert!(!authorizes("file:///data/x_e", "file:///data/x_evil/"));
        assert!(authorizes("s3://bucket", "s3://bucket/prefix/"));
        assert!(!authorizes("s3://bucket", "s3://bucket-evil/"));
    }

    #[test]
    fn chunk_keys() {
        let key = |k: &str| chunk_of(k).map(|(p, c)| (p.to_string(), c.0));
        assert_eq!(key("obs/x/c/0/1"), Some(("/obs/x".into(), vec![0, 1])));
        assert_eq!(key("c/3"), Some(("/".into(), vec![3])));
        // the one chunk of a zero-dimensional array
        assert_eq!(key("c"), Some(("/".into(), vec![])));
        assert_eq!(key("a/b/c"), Some(("/a/b".into(), vec![])));
        assert_eq!(key("a/zarr.json"), None);
        assert_eq!(key("a/c/x"), None);
    }
}
