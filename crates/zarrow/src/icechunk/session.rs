//! Writing to an Icechunk repository: a writable session on a branch ([`WritableSession`]),
//! an `object_store` over it ([`SessionObjectStore`], what zarrow's writer puts its chunks and
//! documents through, the same keys it writes to any store), and one commit at the end.
//!
//! Nothing written through the session is visible at the branch until [`WritableSession::
//! commit`]; a writer that stops before it leaves the branch where it was. The commit is
//! optimistic: when another commit reached the branch since the session's base snapshot,
//! icechunk's conflict detector rebases this one on top of it if the two touched different
//! arrays and chunks, and otherwise the commit fails with [`crate::Error::CommitConflict`]
//! naming the branch and the base snapshot.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use icechunk::conflicts::detector::ConflictDetector;
use icechunk::format::{ByteRange, SnapshotId};
use icechunk::session::{Session, SessionError, SessionErrorKind};
use icechunk::store::StoreErrorKind;
use icechunk::{Repository, Store};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use tokio::sync::RwLock;

use super::{
    check_length, check_snapshot_nodes, icechunk_failed, list_dir, meta, names, requested,
    store_error, Backend, RepositoryError, RepositoryErrorKind, RepositoryObjectStore,
};
use crate::{Error, Result};

/// How often a commit that found the branch moved is rebased and tried again.
const REBASE_ATTEMPTS: u16 = 5;

/// A writable session on one branch of a repository, and the node written below it.
pub struct WritableSession {
    session: Arc<RwLock<Session>>,
    store: Store,
    branch: String,
    base: SnapshotId,
    node: String,
    display: String,
    /// The repository's directory, for a local one (writers there serialize their commits
    /// with zarrow's writer lock: icechunk's local storage has no atomic branch update).
    local_root: Option<PathBuf>,
}

impl std::fmt::Debug for WritableSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WritableSession")
            .field("location", &self.display)
            .field("branch", &self.branch)
            .field("base", &self.base.to_string())
            .finish_non_exhaustive()
    }
}

fn repository_error(display: &str, cause: RepositoryErrorKind) -> Error {
    Error::Write {
        path: display.to_string(),
        message: RepositoryError {
            repository: display.to_string(),
            cause,
        }
        .to_string(),
    }
}

impl RepositoryObjectStore {
    /// Open a writable session at the location's branch (`@BRANCH`, the option `ref`, else
    /// `main`). A missing repository is an error unless `create` (then it is created, with
    /// its branch `main`); a tag or snapshot id is not a branch, and is an error.
    pub async fn begin_write(&self, create: bool) -> Result<WritableSession> {
        let fail = |cause| repository_error(&self.display, cause);
        let mut found = None;
        for (backend, node) in self.location.candidates() {
            let storage = self.storage(&backend).await.map_err(fail)?;
            let exists = Repository::exists(Arc::clone(&storage), None)
                .await
                .map_err(|e| fail(icechunk_failed("looking for the repository", e.kind())))?;
            if exists || (create && self.location.node.is_some()) {
                found = Some((backend, storage, node, exists));
                break;
            }
        }
        let Some((root, storage, node, exists)) = found else {
            let path = self.display.split('@').next().unwrap_or(&self.display);
            return Err(repository_error(
                &self.display,
                RepositoryErrorKind::NotFound {
                    path: format!(
                        "{path} (to create one, name its root with @BRANCH and set the option \
                         create_repository)"
                    ),
                },
            ));
        };
        let repo = match exists {
            true => Repository::open(Arc::clone(&storage)).execute().await,
            false => Repository::create(Arc::clone(&storage)).execute().await,
        }
        .map_err(|e| fail(icechunk_failed("opening the repository", e.kind())))?;
        let branch = (self.location.reference.clone())
            .or_else(|| self.options.reference.clone())
            .unwrap_or_else(|| "main".to_string());
        let branches = repo.list_branches().await.unwrap_or_default();
        if !branches.contains(&branch) {
            let branches: Vec<String> = branches.into_iter().collect();
            return Err(Error::Write {
                path: self.display.clone(),
                message: format!(
                    "writes go to a branch, and the repository has no branch '{branch}' \
                     (branches: {})",
                    names(&branches)
                ),
            });
        }
        let session = repo.writable_session(&branch).await.map_err(|e| {
            fail(icechunk_failed(
                format!("opening branch '{branch}'"),
                e.kind(),
            ))
        })?;
        let base = session.snapshot_id().clone();
        check_snapshot_nodes(&repo, &base).await.map_err(fail)?;
        let session = Arc::new(RwLock::new(session));
        Ok(WritableSession {
            store: Store::from_session(Arc::clone(&session)).await,
            session,
            branch,
            base,
            node: node.trim_matches('/').to_string(),
            display: self.display.clone(),
            local_root: match root {
                Backend::File(path) => Some(path),
                Backend::Cloud { .. } => None,
            },
        })
    }
}

impl WritableSession {
    /// The node written, as a key prefix in the repository (`""`: the root).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The repository's local directory (`None` in a cloud store).
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.local_root.as_deref()
    }

    /// An object store over the session, keyed from the repository's root (zarr keys).
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(SessionObjectStore {
            store: self.store.clone(),
            display: self.display.clone(),
        })
    }

    /// Commit what was written as one snapshot on the branch, with `message`; returns the new
    /// snapshot's id. A concurrent commit that touched other arrays is rebased over; one that
    /// touched the same is [`Error::CommitConflict`].
    pub async fn commit(self, message: &str) -> Result<String> {
        let mut session = self.session.write().await;
        let committed = session
            .commit(message)
            .rebase(&ConflictDetector, REBASE_ATTEMPTS)
            .execute()
            .await;
        match committed {
            Ok(id) => Ok(id.to_string()),
            Err(e) => Err(self.commit_error(&e)),
        }
    }

    fn commit_error(&self, e: &SessionError) -> Error {
        let conflict = |conflicts: String| Error::CommitConflict {
            location: self.display.clone(),
            branch: self.branch.clone(),
            base: self.base.to_string(),
            conflicts,
        };
        match e.kind() {
            SessionErrorKind::Conflict { actual_parent, .. } => conflict(format!(
                "the branch is at {} now",
                actual_parent
                    .as_ref()
                    .map_or("an unknown snapshot".to_string(), |s| s.to_string())
            )),
            SessionErrorKind::RebaseFailed { conflicts, .. } => {
                let mut shown: Vec<String> = conflicts.iter().map(|c| format!("{c:?}")).collect();
                shown.truncate(3);
                conflict(shown.join("; "))
            }
            kind => Error::Write {
                path: self.display.clone(),
                message: format!("committing to branch '{}': {kind}", self.branch),
            },
        }
    }
}

/// An `ObjectStore` over a writable session: puts set zarr keys in the session, deletes of a
/// node's `zarr.json` delete the node (and what is below it).
#[derive(Debug)]
pub struct SessionObjectStore {
    store: Store,
    display: String,
}

impl std::fmt::Display for SessionObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IcechunkSession({})", self.display)
    }
}

fn not_supported(what: &str) -> object_store::Error {
    object_store::Error::NotSupported {
        source: format!("{what} in an Icechunk session").into(),
    }
}

#[async_trait]
impl ObjectStore for SessionObjectStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let key = location.as_ref();
        if matches!(opts.mode, PutMode::Create) {
            let exists = self
                .store
                .exists(key)
                .await
                .map_err(|e| store_error(location, key, e))?;
            if exists {
                return Err(object_store::Error::AlreadyExists {
                    path: key.to_string(),
                    source: "the key is set in the session".into(),
                });
            }
        }
        self.store
            .set(key, Bytes::from(payload))
            .await
            .map_err(|e| store_error(location, key, e))?;
        Ok(PutResult {
            e_tag: None,
            version: None,
        })
    }

    async fn put_multipart_opts(
        &self,
        _location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(not_supported("multipart uploads"))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let key = location.as_ref();
        let err = |e| store_error(location, key, e);
        let size = self.store.getsize(key).await.map_err(err)?;
        let range = requested(options.range.as_ref(), size);
        let bytes = if options.head || range.is_empty() {
            Bytes::new()
        } else {
            let bytes = self
                .store
                .get(key, &ByteRange::Bounded(range.clone()))
                .await
                .map_err(err)?;
            check_length(key, &bytes, &range)?;
            bytes
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async { Ok(bytes) }).boxed()),
            meta: meta(location.clone(), size),
            range,
            attributes: Default::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let store = self.store.clone();
        locations
            .then(move |location| {
                let store = store.clone();
                async move {
                    let location = location?;
                    let key = location.as_ref();
                    // Deleting a node's document deletes the node and its members.
                    let done = match key.strip_suffix("zarr.json") {
                        Some(node) => store.delete_dir(node.trim_end_matches('/')).await,
                        None => store.delete(key).await,
                    };
                    done.map_err(|e| store_error(&location, key, e))?;
                    Ok(location)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let store = self.store.clone();
        let prefix = prefix.cloned().unwrap_or_default();
        futures::stream::once(async move {
            let key = prefix.as_ref().to_string();
            // A prefix that is no node (nor inside one) lists nothing.
            let keys: Vec<_> = match store.list_prefix(&key).await {
                Ok(keys) => keys.collect().await,
                Err(e) if no_node(&e) => Vec::new(),
                Err(e) => return Err(store_error(&prefix, &key, e)),
            };
            let metas: Vec<object_store::Result<ObjectMeta>> = keys
                .into_iter()
                .filter(|k| !k.as_ref().is_err_and(no_node))
                .map(|k| match k {
                    Ok(k) => Ok(meta(Path::from(k), 0)),
                    Err(e) => Err(store_error(&prefix, &key, e)),
                })
                .collect();
            Ok::<_, object_store::Error>(futures::stream::iter(metas))
        })
        .map(|listed| match listed {
            Ok(stream) => stream.boxed(),
            Err(e) => futures::stream::once(async { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let base = prefix.cloned().unwrap_or_default();
        let key = base.as_ref().to_string();
        list_dir(&self.store, &base, &key).await
    }

    async fn copy_opts(
        &self,
        _from: &Path,
        _to: &Path,
        _options: CopyOptions,
    ) -> object_store::Result<()> {
        Err(not_supported("copying keys"))
    }
}

/// Whether icechunk refused to list a prefix because no node is there.
fn no_node(e: &icechunk::store::StoreError) -> bool {
    matches!(e.kind(), StoreErrorKind::BadKeyPrefix { .. })
}
