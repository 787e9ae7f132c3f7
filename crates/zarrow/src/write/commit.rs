//! Writes into an Icechunk repository as one commit ([`Transaction`]): the writer puts the
//! same keys it puts into any store, through an object store over a writable session on the
//! location's branch (`crate::icechunk::WritableSession`), and the commit at the end makes
//! them visible at once. Until then readers of the branch, and of every older snapshot and
//! tag, see what was there; a writer stopped before the commit leaves the branch as it was.
//!
//! Icechunk records a chunk only for an array that already exists with a shape that holds
//! it, so an array is declared first with a provisional length ([`PROVISIONAL_CHUNKS`] of its
//! chunks) and given its real one with its last metadata write, before the commit.
//!
//! Commits are optimistic: one that finds the branch moved since the session's base snapshot
//! is rebased over the other commit when the two changed different arrays and chunks, and
//! fails with [`crate::Error::CommitConflict`] otherwise. A local repository's branch is
//! updated by icechunk without an atomic compare-and-swap, so there the commit runs under
//! zarrow's writer lock of the repository's directory ([`WriterLock`]): writers in other
//! processes commit one after the other, each checking the branch it finds.

use std::time::Duration;

#[cfg(feature = "icechunk")]
use object_store::path::Path;
use serde_json::Value;

use super::lock::{LockPolicy, WriterLock};
use super::steps::Steps;
use crate::store::ZarrStore;
use crate::{Error, Result};

#[cfg(feature = "icechunk")]
use crate::icechunk::WritableSession;

/// Stands in for the session type in a build without Icechunk: never made.
#[cfg(not(feature = "icechunk"))]
#[derive(Debug)]
enum WritableSession {}

#[cfg(not(feature = "icechunk"))]
impl WritableSession {
    fn node(&self) -> &str {
        match *self {}
    }
    fn local_root(&self) -> Option<&std::path::Path> {
        match *self {}
    }
    async fn commit(self, _message: &str) -> Result<String> {
        match self {}
    }
}

/// How many chunks an array is declared with in a session before its chunks are written:
/// more than any table written has (Icechunk counts an array's chunks in a `u32`), replaced by
/// the real length before the commit.
pub(crate) const PROVISIONAL_CHUNKS: u64 = 1 << 31;

/// How long a commit to a local repository waits for another process's commit to finish.
const COMMIT_LOCK_WAIT: Duration = Duration::from_secs(30);

/// What a write to an Icechunk location commits with (options `create_repository`,
/// `commit_message`); refused on any other location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommitOptions {
    /// Create the repository when there is none at the location.
    pub(crate) create_repository: bool,
    /// The commit's message (default: zarrow says what it wrote, e.g.
    /// `zarrow COPY: 10 rows to /obs`).
    pub(crate) message: Option<String>,
}

/// A write into an Icechunk repository, committed at the end; see the module documentation.
#[derive(Debug)]
pub(crate) struct Transaction {
    session: WritableSession,
    /// The session's object store, rooted at the node written.
    store: ZarrStore,
    message: Option<String>,
    policy: LockPolicy,
    steps: Steps,
}

impl Transaction {
    /// A writable session on `target`'s branch when `target` is an Icechunk location (`None`
    /// for any other store, where the commit options are refused). Nothing is written.
    pub(crate) async fn begin(
        target: &ZarrStore,
        commit: &CommitOptions,
        policy: LockPolicy,
        steps: Steps,
    ) -> Result<Option<Self>> {
        #[cfg(feature = "icechunk")]
        if let Some(repository) = target.repository() {
            let session = repository.begin_write(commit.create_repository).await?;
            let store = ZarrStore::new(session.object_store(), Path::from(session.node()))
                .with_location(target.location());
            return Ok(Some(Self {
                session,
                store,
                message: commit.message.clone(),
                policy,
                steps,
            }));
        }
        #[cfg(not(feature = "icechunk"))]
        let _ = (policy, steps);
        let refused = match commit {
            c if c.create_repository => Some("create_repository"),
            c if c.message.is_some() => Some("commit_message"),
            _ => None,
        };
        match refused {
            Some(key) => Err(Error::invalid_option(
                key,
                format!(
                    "applies to Icechunk repositories (icechunk+file://…@BRANCH/path), and \
                     '{}' is not one",
                    target.location()
                ),
            )),
            None => Ok(None),
        }
    }

    /// Where the writer writes: the session, at the node.
    pub(crate) fn store(&self) -> &ZarrStore {
        &self.store
    }

    /// Declare the array at `path` (below the node) with its metadata document `doc`, its
    /// length provisional, so that its chunks can be written.
    pub(crate) async fn declare_array(&self, path: &str, mut doc: Value) -> Result<()> {
        let chunk = doc["chunk_grid"]["configuration"]["chunk_shape"][0]
            .as_u64()
            .unwrap_or(1)
            .max(1);
        doc["shape"] = Value::from(vec![chunk.saturating_mul(PROVISIONAL_CHUNKS)]);
        let bytes = super::to_bytes(path, &doc)?;
        self.steps.hit("zarr.json")?;
        self.store
            .child(path)
            .put("zarr.json", bytes::Bytes::from(bytes))
            .await
    }

    /// Commit everything written, with the `commit_message` option or a message saying
    /// `summary` (`COPY: 10 rows`); returns the new snapshot's id.
    pub(crate) async fn commit(self, summary: &str) -> Result<String> {
        let message = self.message.clone().unwrap_or_else(|| {
            format!(
                "zarrow {summary} to /{}",
                self.session.node().trim_matches('/')
            )
        });
        self.steps.hit("the commit")?;
        let lock = match self.session.local_root() {
            Some(root) => {
                let root = ZarrStore::open(&root.to_string_lossy())?;
                let operation = format!("committing to {}", self.store.location());
                Some(
                    WriterLock::acquire_waiting(
                        &root,
                        &operation,
                        self.policy,
                        self.steps.clone(),
                        COMMIT_LOCK_WAIT,
                    )
                    .await?,
                )
            }
            None => None,
        };
        let committed = self.session.commit(&message).await;
        if let Some(lock) = lock {
            lock.release().await?;
        }
        if let Ok(id) = &committed {
            log::info!(
                "{}: committed snapshot {id} ({message})",
                self.store.location()
            );
        }
        committed
    }
}

/// Refuse zarr v2 for an Icechunk location before anything is written (Icechunk stores zarr
/// v3 metadata only).
pub(crate) fn check_format(target: &ZarrStore, zarr_format: u8) -> Result<()> {
    if zarr_format == 3 || !target.location().starts_with(crate::ICECHUNK_PREFIX) {
        return Ok(());
    }
    Err(Error::invalid_option(
        "zarr_format",
        format!(
            "Icechunk repositories hold zarr v3 only, so '{}' is written as zarr v3 \
             (leave zarr_format out, or set it to 3)",
            target.location()
        ),
    ))
}
