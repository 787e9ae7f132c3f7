//! Write safety (DESIGN.md §12, docs/writing.md "Write safety"): the writer lock, and
//! publishing a new table in one step.
//!
//! - [`WriterLock`]: a lock object beside the target (`<target>.zarrow-lock`), created with
//!   create-only semantics (`PutMode::Create`: a hard link on local file systems, a
//!   conditional PUT on object stores), holding host, process, time and operation. A second
//!   writer fails at once with an error naming the holder. A stale lock (its process gone on
//!   this host, or older than [`LockPolicy::stale_after`]) is broken only when
//!   [`LockPolicy::break_stale`] says so.
//! - [`Publication`]: where [`super::TableWriter`] writes and how the result becomes visible.
//!   Local file systems: a staging directory beside the target, then one rename
//!   (`renameat2` with `RENAME_NOREPLACE` for a new table, `RENAME_EXCHANGE` to replace one;
//!   the old table, now in the staging directory, is deleted after, without following
//!   links). Object stores, new location: chunks and array metadata in place, then the root
//!   document with a create-only PUT. Object stores, replacing: a staging prefix beside the
//!   target, then the old table's root documents deleted, its objects deleted, and the staged
//!   objects copied over, root documents last.
//!
//! [`Steps`] counts the writes of one writer; tests stop a writer before any of them (a
//! failpoint: the writer stops as if killed, leaving everything as it is).

use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode};
use serde_json::{json, Value};

use super::commit::{CommitOptions, Transaction};
use super::ROOT_DOCUMENTS;
use crate::store::ZarrStore;
use crate::{Error, Result};

/// What the lock object's name adds to the target's.
pub const LOCK_SUFFIX: &str = ".zarrow-lock";
/// What a staging location's name has between the target's name and the writer's process.
const STAGING_TAG: &str = ".zarrow-staging-";

/// When a writer may break another writer's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockPolicy {
    /// Break a stale lock (default false: a stale lock is an error that says how to break it).
    pub break_stale: bool,
    /// A lock older than this is stale (default one hour), whatever host holds it.
    pub stale_after: Duration,
}

impl Default for LockPolicy {
    fn default() -> Self {
        Self {
            break_stale: false,
            stale_after: Duration::from_secs(3600),
        }
    }
}

/// The writes of one writer, counted; with a failpoint set (tests), the writer stops before
/// the failpoint's write as if it were killed there: an error, and no cleanup.
#[derive(Debug, Clone, Default)]
pub(crate) struct Steps(Option<Arc<StepsInner>>);

#[derive(Debug)]
struct StepsInner {
    count: AtomicUsize,
    fail_at: usize,
    crashed: AtomicBool,
}

impl Steps {
    /// Stop before write number `n` (from 0).
    #[cfg(test)]
    pub(crate) fn fail_at(n: usize) -> Self {
        Self(Some(Arc::new(StepsInner {
            count: AtomicUsize::new(0),
            fail_at: n,
            crashed: AtomicBool::new(false),
        })))
    }

    /// Before a write (`what` names it in the failpoint's error).
    pub(crate) fn hit(&self, what: &str) -> Result<()> {
        let Some(inner) = &self.0 else {
            return Ok(());
        };
        if inner.crashed.load(Ordering::SeqCst) {
            return Err(failpoint(what));
        }
        if inner.count.fetch_add(1, Ordering::SeqCst) == inner.fail_at {
            inner.crashed.store(true, Ordering::SeqCst);
            return Err(failpoint(what));
        }
        Ok(())
    }

    /// Whether the writer stopped at the failpoint (cleanup is then left undone, as after a
    /// kill).
    pub(crate) fn crashed(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|i| i.crashed.load(Ordering::SeqCst))
    }
}

fn failpoint(what: &str) -> Error {
    Error::Write {
        path: what.to_string(),
        message: "stopped at a failpoint (test)".into(),
    }
}

fn store_err(path: &Path, source: object_store::Error) -> Error {
    Error::Store {
        path: path.to_string(),
        source,
    }
}

fn io_err(path: &FsPath, what: &str, e: std::io::Error) -> Error {
    Error::Write {
        path: path.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

/// The key of `store`'s root with `suffix` added to its last segment (a sibling key).
fn sibling(store: &ZarrStore, suffix: &str) -> Path {
    let root = store.root().as_ref();
    Path::from(format!("{root}{suffix}"))
}

/// Put `bytes` at `key` unless something is there (`AlreadyExists`): a create-only PUT, or,
/// on a store without one (S3 with conditional puts disabled), a check then a PUT (best
/// effort).
pub(crate) async fn put_create(
    os: &dyn ObjectStore,
    key: &Path,
    bytes: Bytes,
) -> object_store::Result<()> {
    match os
        .put_opts(key, bytes.clone().into(), PutMode::Create.into())
        .await
    {
        Ok(_) => Ok(()),
        Err(object_store::Error::NotImplemented { .. })
        | Err(object_store::Error::NotSupported { .. }) => match os.head(key).await {
            Ok(_) => Err(object_store::Error::AlreadyExists {
                path: key.to_string(),
                source: "the object exists".into(),
            }),
            Err(object_store::Error::NotFound { .. }) => {
                os.put(key, bytes.into()).await.map(|_| ())
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// A local `store` at its canonical path (links resolved: of the location if it exists, else
/// of its parent); other stores as they are.
fn canonical(store: &ZarrStore) -> Result<ZarrStore> {
    let Some(path) = store.local_path() else {
        return Ok(store.clone());
    };
    let resolved = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(_) => match (path.parent().map(std::fs::canonicalize), path.file_name()) {
            (Some(Ok(parent)), Some(name)) => parent.join(name),
            _ => return Ok(store.clone()),
        },
    };
    if resolved == path {
        return Ok(store.clone());
    }
    ZarrStore::open(&resolved.to_string_lossy())
}

/// This host's name (for lock holders).
pub(crate) fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|f| std::fs::read_to_string(f).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether process `pid` of this host is gone (`None`: cannot tell here).
fn process_gone(pid: u64) -> Option<bool> {
    let proc = FsPath::new("/proc");
    proc.join("self")
        .exists()
        .then(|| !proc.join(pid.to_string()).exists())
}

/// The writer lock of one target; see the module documentation. Released by
/// [`Self::release`], or (best effort) when dropped.
#[derive(Debug)]
pub struct WriterLock {
    store: Arc<dyn ObjectStore>,
    key: Path,
    local: Option<PathBuf>,
    released: bool,
    steps: Steps,
}

impl WriterLock {
    /// Take the lock of the table at `store` for `operation` (named to a second writer).
    pub async fn acquire(store: &ZarrStore, operation: &str, policy: LockPolicy) -> Result<Self> {
        Self::acquire_counted(store, operation, policy, Steps::default()).await
    }

    pub(crate) async fn acquire_counted(
        store: &ZarrStore,
        operation: &str,
        policy: LockPolicy,
        steps: Steps,
    ) -> Result<Self> {
        Self::acquire_within(store, operation, policy, steps, None).await
    }

    /// [`Self::acquire_counted`], waiting up to `wait` while another writer holds the lock
    /// (a lock held for a short step: an Icechunk commit).
    pub(crate) async fn acquire_waiting(
        store: &ZarrStore,
        operation: &str,
        policy: LockPolicy,
        steps: Steps,
        wait: Duration,
    ) -> Result<Self> {
        Self::acquire_within(store, operation, policy, steps, Some(Instant::now() + wait)).await
    }

    async fn acquire_within(
        store: &ZarrStore,
        operation: &str,
        policy: LockPolicy,
        steps: Steps,
        until: Option<Instant>,
    ) -> Result<Self> {
        // One lock whatever links the location was named through.
        let store = &canonical(store)?;
        let os = store.object_store().clone();
        let key = sibling(store, LOCK_SUFFIX);
        let holder = json!({
            "host": host_name(),
            "pid": std::process::id(),
            "since": unix_now(),
            "operation": operation,
            "location": store.location(),
        });
        let payload = Bytes::from(serde_json::to_vec_pretty(&holder).unwrap_or_default());
        let mut broke = false;
        loop {
            steps.hit("the writer lock")?;
            match put_create(os.as_ref(), &key, payload.clone()).await {
                Ok(_) => break,
                Err(object_store::Error::AlreadyExists { .. }) if !broke => {
                    let held = os.get(&key).await;
                    let held: Value = match held {
                        Ok(r) => {
                            let bytes = r.bytes().await.map_err(|e| store_err(&key, e))?;
                            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
                        }
                        // Released meanwhile: try again.
                        Err(object_store::Error::NotFound { .. }) => continue,
                        Err(e) => return Err(store_err(&key, e)),
                    };
                    let stale = stale(&held, policy);
                    match stale {
                        Some(_) if policy.break_stale => {
                            log::warn!("breaking the stale writer lock {key}: {held}");
                            steps.hit("breaking a stale lock")?;
                            match os.delete(&key).await {
                                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                                Err(e) => return Err(store_err(&key, e)),
                            }
                            let here = held["host"].as_str() == Some(host_name().as_str());
                            match (store.local_path(), held["pid"].as_u64()) {
                                (Some(path), Some(pid)) if here => {
                                    remove_abandoned_staging(path, pid)
                                }
                                _ => {}
                            }
                            broke = true;
                        }
                        None if until.is_some_and(|t| Instant::now() < t) => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        _ => return Err(locked(store, &key, &held, stale)),
                    }
                }
                Err(object_store::Error::AlreadyExists { .. }) => {
                    return Err(Error::Write {
                        path: store.location().to_string(),
                        message: format!(
                            "another writer took the lock {key} as this one broke the stale one"
                        ),
                    })
                }
                Err(e) => return Err(crate::store::write_err(&key, payload.len(), e)),
            }
        }
        let local = store.local_path().map(|p| {
            let mut name = p.as_os_str().to_owned();
            name.push(LOCK_SUFFIX);
            PathBuf::from(name)
        });
        Ok(Self {
            store: os,
            key,
            local,
            released: false,
            steps,
        })
    }

    /// Give the lock back.
    pub async fn release(mut self) -> Result<()> {
        self.steps.hit("releasing the writer lock")?;
        self.released = true;
        match self.store.delete(&self.key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_err(&self.key, e)),
        }
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        if self.released || self.steps.crashed() {
            return;
        }
        if let Some(path) = &self.local {
            let _ = std::fs::remove_file(path);
        } else if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (store, key) = (self.store.clone(), self.key.clone());
            handle.spawn(async move {
                let _ = store.delete(&key).await;
            });
        }
    }
}

/// Delete the staging directories that process `pid` of this host left beside the local
/// `target` (a writer killed before publishing; its lock was stale and is broken).
fn remove_abandoned_staging(target: &FsPath, pid: u64) {
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return;
    };
    let prefix = format!(".{}{STAGING_TAG}{pid}-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && entry.file_name().to_string_lossy().starts_with(&prefix) {
            log::warn!(
                "deleting {}, left by a writer that was stopped",
                entry.path().display()
            );
            let _ = remove_tree(&entry.path());
        }
    }
}

/// Why the lock `held` is stale (`None`: it is not).
fn stale(held: &Value, policy: LockPolicy) -> Option<String> {
    let since = held["since"].as_u64()?;
    let age = unix_now().saturating_sub(since);
    if age > policy.stale_after.as_secs() {
        return Some(format!("older than {} s", policy.stale_after.as_secs()));
    }
    let same_host = held["host"].as_str() == Some(host_name().as_str());
    match held["pid"].as_u64() {
        Some(pid) if same_host && process_gone(pid) == Some(true) => {
            Some(format!("process {pid} is gone"))
        }
        _ => None,
    }
}

fn locked(store: &ZarrStore, key: &Path, held: &Value, stale: Option<String>) -> Error {
    let str_of = |k: &str| held[k].as_str().unwrap_or("?").to_string();
    let since = held["since"].as_u64().unwrap_or(0);
    let holder = format!(
        "{} (host {}, process {}, for {} s)",
        str_of("operation"),
        str_of("host"),
        held["pid"].as_u64().map_or("?".into(), |p| p.to_string()),
        unix_now().saturating_sub(since)
    );
    let message = match stale {
        None => format!(
            "another writer holds the lock {key}: {holder}; one writer at a time (try again \
             when it is done)"
        ),
        Some(why) => format!(
            "a stale writer lock {key} is there: {holder}, {why}; set break_stale_lock to \
             break it (or delete it once no writer is left)"
        ),
    };
    Error::Write {
        path: store.location().to_string(),
        message,
    }
}

/// How the written table becomes visible.
#[derive(Debug)]
enum Publish {
    /// Local: written to `staging`, renamed onto `target` (a new table) or exchanged with it
    /// (replacing a table; `staging` then holds the old one, deleted after).
    Rename {
        staging: PathBuf,
        target: PathBuf,
        replace: bool,
    },
    /// Object store, new location: written in place, the root document create-only.
    InPlace,
    /// Object store, replacing: written to `staging`, then copied over the old table.
    Copy { staging: ZarrStore },
    /// Icechunk: written in a session (the old node deleted in it first when replacing),
    /// committed at the end.
    Commit(Box<Transaction>),
}

/// Where a new table is written and how it is published; see the module documentation.
#[derive(Debug)]
pub(crate) struct Publication {
    publish: Publish,
    target: ZarrStore,
    /// Where the writer writes.
    store: ZarrStore,
    lock: Option<WriterLock>,
    steps: Steps,
    done: bool,
}

/// Whether a session's `store` holds a node at its root: anything but an empty group with no
/// attributes (the root group of a new repository).
async fn holds_a_node(store: &ZarrStore) -> Result<bool> {
    let os = store.object_store();
    let root = store.root();
    let doc_key = store.key("zarr.json");
    let prefix = (!root.as_ref().is_empty()).then_some(root);
    let keys: Vec<Path> = os
        .list(prefix)
        .map_ok(|m| m.location)
        .take(2)
        .try_collect()
        .await
        .map_err(|e| store_err(root, e))?;
    if keys.iter().any(|k| *k != doc_key) {
        return Ok(true);
    }
    let Some(doc) = store.get_opt("zarr.json").await? else {
        return Ok(false);
    };
    let doc: Value = serde_json::from_slice(&doc).unwrap_or(Value::Null);
    let empty_attributes = doc
        .get("attributes")
        .is_none_or(|a| a.as_object().is_some_and(|a| a.is_empty()));
    Ok(doc["node_type"] != "group" || !empty_attributes)
}

/// Whether `store` holds a zarr root document.
async fn holds_zarr_root(store: &ZarrStore) -> Result<bool> {
    for doc in ROOT_DOCUMENTS {
        if store.size_opt(doc).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The first names below `store`'s root (for errors).
async fn some_names(store: &ZarrStore) -> Result<Vec<String>> {
    let os = store.object_store();
    let root = store.root();
    let listing = os
        .list_with_delimiter(Some(root))
        .await
        .map_err(|e| store_err(root, e))?;
    let mut names: Vec<String> = (listing.objects.iter().map(|o| &o.location))
        .chain(&listing.common_prefixes)
        .filter_map(|p| p.filename().map(str::to_string))
        .collect();
    names.sort();
    names.truncate(5);
    Ok(names)
}

/// The zarr group `store`'s node is a member of, if its parent is one.
async fn parent_group(store: &ZarrStore) -> Result<Option<String>> {
    let mut parts: Vec<_> = store.root().parts().collect();
    if parts.pop().is_none() {
        return Ok(None);
    }
    let parent = ZarrStore::new(store.object_store().clone(), Path::from_iter(parts));
    if parent.size_opt(".zgroup").await?.is_some() {
        return Ok(Some(parent.root().to_string()));
    }
    if let Some(doc) = parent.get_opt("zarr.json").await? {
        let doc: Value = serde_json::from_slice(&doc).unwrap_or(Value::Null);
        if doc["node_type"] == "group" {
            return Ok(Some(parent.root().to_string()));
        }
    }
    Ok(None)
}

/// Refuse to write over a node of a zarr group (only whole stores are replaced; appending
/// to one array of a group would leave the group's other arrays and its consolidated
/// metadata behind).
pub(crate) async fn refuse_group_member(store: &ZarrStore, what: &str) -> Result<()> {
    if let Some(group) = parent_group(store).await? {
        return Err(Error::Write {
            path: store.location().to_string(),
            message: format!(
                "{what}: '{}' is a member of the zarr group '/{group}'; write the whole group's \
                 table instead",
                store.location()
            ),
        });
    }
    Ok(())
}

fn staging_name(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(".{name}{STAGING_TAG}{}-{nanos}", std::process::id())
}

impl Publication {
    /// Take the lock of `target` and check it: without `overwrite`, anything there is an
    /// error; with it, only a zarr store (not a member of a group) is replaced. Nothing is
    /// written but the lock.
    pub(crate) async fn prepare(
        target: &ZarrStore,
        operation: &str,
        overwrite: bool,
        policy: LockPolicy,
        steps: Steps,
        commit: &CommitOptions,
    ) -> Result<Self> {
        if let Some(transaction) = Transaction::begin(target, commit, policy, steps.clone()).await?
        {
            return Self::in_session(target, transaction, overwrite, steps).await;
        }
        let location = target.location().to_string();
        let refuse = |message: String| Error::Write {
            path: location.clone(),
            message,
        };
        // A local target through links is the directory they lead to.
        let target = canonical(target)?;
        let local = target.local_path().map(FsPath::to_path_buf);
        if let Some(p) = &local {
            if p.exists() && !p.is_dir() {
                return Err(refuse(
                    "the location is a file; a zarr table is a directory".into(),
                ));
            }
        }
        let lock = WriterLock::acquire_counted(&target, operation, policy, steps.clone()).await?;
        let os = target.object_store();
        let root = target.root();
        let prefix = (!root.as_ref().is_empty()).then_some(root);
        let first = os
            .list(prefix)
            .next()
            .await
            .transpose()
            .map_err(|e| store_err(root, e))?;
        let replace = first.is_some();
        if replace && !overwrite {
            return Err(refuse(
                "the location already exists; set overwrite to replace it".into(),
            ));
        }
        if replace {
            if !holds_zarr_root(&target).await? {
                let names = some_names(&target).await?;
                return Err(refuse(format!(
                    "overwrite replaces only a zarr store, and this location holds no zarr \
                     metadata at its root (zarr.json, .zgroup, .zarray, .zmetadata) but {}; \
                     nothing was written",
                    if names.is_empty() {
                        "other objects".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            refuse_group_member(&target, "cannot overwrite").await?;
        }
        let name = root.filename().unwrap_or("").to_string();
        let publish = match &local {
            Some(path) => {
                let parent = path.parent().ok_or_else(|| {
                    refuse("the root directory cannot be written as a table".into())
                })?;
                Publish::Rename {
                    staging: parent.join(staging_name(&name)),
                    target: path.clone(),
                    replace,
                }
            }
            None if !replace => Publish::InPlace,
            None if name.is_empty() => {
                return Err(refuse(
                    "cannot replace a table at the root of a bucket (there is no place beside \
                     it to stage the new one)"
                        .into(),
                ))
            }
            None => {
                let mut parts: Vec<_> = root.parts().collect();
                parts.pop();
                let parent = Path::from_iter(parts);
                Publish::Copy {
                    staging: ZarrStore::new(
                        os.clone(),
                        crate::key::join(&parent, &staging_name(&name)),
                    ),
                }
            }
        };
        let store = match &publish {
            Publish::Rename { staging, .. } => ZarrStore::open(&staging.to_string_lossy())?,
            Publish::InPlace => target.clone(),
            Publish::Copy { staging } => staging.clone(),
            Publish::Commit(transaction) => transaction.store().clone(),
        };
        Ok(Self {
            publish,
            target,
            store,
            lock: Some(lock),
            steps,
            done: false,
        })
    }

    /// Icechunk: check the node in the session (without `overwrite`, anything there is an
    /// error; with it, the node is deleted in the session), then write there.
    async fn in_session(
        target: &ZarrStore,
        transaction: Transaction,
        overwrite: bool,
        steps: Steps,
    ) -> Result<Self> {
        let store = transaction.store().clone();
        if holds_a_node(&store).await? {
            if !overwrite {
                return Err(Error::Write {
                    path: target.location().to_string(),
                    message: "the location already exists on this branch; set overwrite to \
                              replace it (in the same commit)"
                        .into(),
                });
            }
            steps.hit("deleting the old table")?;
            let key = store.key("zarr.json");
            store
                .object_store()
                .delete(&key)
                .await
                .map_err(|e| store_err(&key, e))?;
        }
        Ok(Self {
            publish: Publish::Commit(Box::new(transaction)),
            target: target.clone(),
            store,
            lock: None,
            steps,
            done: false,
        })
    }

    /// The Icechunk transaction the table is written in, if it is.
    pub(crate) fn transaction(&self) -> Option<&Transaction> {
        match &self.publish {
            Publish::Commit(transaction) => Some(transaction),
            _ => None,
        }
    }

    /// Where the table is written.
    pub(crate) fn store(&self) -> &ZarrStore {
        &self.store
    }

    /// Whether the root documents are put create-only (where they publish the table).
    pub(crate) fn root_create_only(&self) -> bool {
        matches!(self.publish, Publish::InPlace)
    }

    /// Make the written table visible at the target, then release the lock; an Icechunk
    /// write is committed, with a message saying `summary` unless one was given, and the new
    /// snapshot's id returned.
    pub(crate) async fn publish(mut self, summary: &str) -> Result<Option<String>> {
        match std::mem::replace(&mut self.publish, Publish::InPlace) {
            Publish::Commit(transaction) => {
                self.done = true;
                return transaction.commit(summary).await.map(Some);
            }
            other => self.publish = other,
        }
        match &self.publish {
            Publish::Rename {
                staging,
                target,
                replace,
            } => {
                self.steps.hit("publishing (rename)")?;
                if *replace {
                    exchange(staging, target)?;
                    self.done = true;
                    self.steps.hit("deleting the old table")?;
                    remove_tree(staging)?;
                } else {
                    rename_new(staging, target)?;
                    self.done = true;
                }
            }
            Publish::InPlace => self.done = true,
            Publish::Copy { staging } => {
                let staging = staging.clone();
                self.copy_over(&staging).await?;
                self.done = true;
                self.steps.hit("deleting the staged table")?;
                delete_prefix(&staging).await?;
            }
            Publish::Commit(_) => {}
        }
        if let Some(lock) = self.lock.take() {
            lock.release().await?;
        }
        Ok(None)
    }

    /// Object stores: delete the old table (root documents first), then copy the staged
    /// objects over, root documents last.
    async fn copy_over(&self, staging: &ZarrStore) -> Result<()> {
        let os = self.target.object_store();
        for doc in ROOT_DOCUMENTS {
            self.steps.hit("deleting an old root document")?;
            let key = self.target.key(doc);
            match os.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_err(&key, e)),
            }
        }
        self.steps.hit("deleting the old table")?;
        delete_prefix(&self.target).await?;
        let mut staged: Vec<Path> = os
            .list(Some(staging.root()))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| store_err(staging.root(), e))?;
        let from_root = staging.root().parts().count();
        let relative = |p: &Path| -> Vec<String> {
            p.parts()
                .skip(from_root)
                .map(|s| s.as_ref().to_string())
                .collect()
        };
        // Chunks, then the members' metadata, then the root's documents (`.zmetadata` last).
        let rank = |p: &Path| {
            let parts = relative(p);
            let name = parts.last().map_or("", String::as_str);
            let doc = ["zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"].contains(&name);
            match (doc, parts.len()) {
                (false, _) => 0,
                (true, n) if n > 1 => 1,
                _ if name == ".zmetadata" => 3,
                _ => 2,
            }
        };
        staged.sort_by_key(|p| (rank(p), p.to_string()));
        for from in &staged {
            let to = self.target.key(&relative(from).join("/"));
            self.steps.hit("copying a staged object")?;
            os.copy(from, &to)
                .await
                .map_err(|e| crate::store::write_err(&to, 0, e))?;
        }
        Ok(())
    }
}

impl Drop for Publication {
    fn drop(&mut self) {
        if self.done || self.steps.crashed() {
            return;
        }
        match &self.publish {
            Publish::Rename { staging, .. } => {
                let _ = remove_tree(staging);
            }
            // The session's chunk files stay unreferenced (icechunk's garbage collection
            // removes them); the branch is as it was.
            Publish::InPlace | Publish::Commit(_) => {}
            Publish::Copy { staging } => {
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    let staging = staging.clone();
                    handle.spawn(async move {
                        let _ = delete_prefix(&staging).await;
                    });
                }
            }
        }
    }
}

/// Put document `name` below the node at `path` of `store`; create-only (`create`) where it
/// publishes what was written (a new table or array on an object store): another writer's
/// document there is then an error.
pub(crate) async fn put_doc(
    store: &ZarrStore,
    path: &str,
    name: &str,
    bytes: Vec<u8>,
    create: bool,
) -> Result<()> {
    let key = store.child(path).key(name);
    let os = store.object_store();
    let put = match create {
        true => put_create(os.as_ref(), &key, bytes.into()).await,
        false => os.put(&key, bytes.into()).await.map(|_| ()),
    };
    match put {
        Ok(_) => Ok(()),
        Err(object_store::Error::AlreadyExists { .. }) if create => Err(Error::Write {
            path: store.location().to_string(),
            message: format!(
                "another writer published a table here while this one wrote ({key} exists); \
                 this one's metadata was not written"
            ),
        }),
        Err(source) => Err(Error::Store {
            path: key.to_string(),
            source,
        }),
    }
}

/// Delete every object below `store`'s root.
async fn delete_prefix(store: &ZarrStore) -> Result<()> {
    let os = store.object_store();
    let root = store.root();
    let prefix = (!root.as_ref().is_empty()).then_some(root);
    let objects = os.list(prefix).map_ok(|m| m.location).boxed();
    os.delete_stream(objects)
        .try_collect::<Vec<_>>()
        .await
        .map_err(|e| store_err(root, e))?;
    Ok(())
}

/// Delete a directory tree without following links (a link is removed, not what it points
/// to); a missing one is fine.
fn remove_tree(path: &FsPath) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(path, "deleting", e)),
    }
}

/// Rename `staging` to `target`, which must not exist (an empty directory there is removed
/// first); another writer's table there is an error.
fn rename_new(staging: &FsPath, target: &FsPath) -> Result<()> {
    let taken = |e: std::io::Error| Error::Write {
        path: target.display().to_string(),
        message: format!(
            "another writer created the location while this one wrote ({e}); nothing was \
             replaced"
        ),
    };
    match rename_noreplace(staging, target) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(code) if code == EEXIST || code == ENOTEMPTY) => {
            // Empty directories (made by hand, or left by a deleted store): not a table.
            if remove_empty_tree(target) {
                rename_noreplace(staging, target).map_err(taken)
            } else {
                Err(taken(e))
            }
        }
        Err(e) => Err(io_err(target, "publishing the staged table", e)),
    }
}

/// Remove `dir` if it holds nothing but directories (no files, no links); whether it did.
fn remove_empty_tree(dir: &FsPath) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir || !remove_empty_tree(&entry.path()) {
            return false;
        }
    }
    std::fs::remove_dir(dir).is_ok()
}

const EEXIST: i32 = 17;
const ENOTEMPTY: i32 = 39;

#[cfg(target_os = "linux")]
fn renameat2(from: &FsPath, to: &FsPath, flags: libc::c_uint) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &FsPath| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths, relative to nothing (absolute).
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether the file system refused `renameat2`'s flags (then the portable form is used).
#[cfg(target_os = "linux")]
fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS))
}

/// Rename, failing when `to` exists (atomically on Linux).
fn rename_noreplace(from: &FsPath, to: &FsPath) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    match renameat2(from, to, libc::RENAME_NOREPLACE) {
        Err(e) if unsupported(&e) => {}
        other => return other,
    }
    if to.symlink_metadata().is_ok() {
        return Err(std::io::Error::from_raw_os_error(EEXIST));
    }
    std::fs::rename(from, to)
}

/// Swap `staging` and `target` (atomically on Linux: readers of `target` see the old table
/// or the new one; elsewhere two renames, with a moment where `target` is missing).
fn exchange(staging: &FsPath, target: &FsPath) -> Result<()> {
    #[cfg(target_os = "linux")]
    match renameat2(staging, target, libc::RENAME_EXCHANGE) {
        Ok(()) => return Ok(()),
        Err(e) if unsupported(&e) => {}
        Err(e) => return Err(io_err(target, "publishing the staged table", e)),
    }
    let mut aside = staging.as_os_str().to_owned();
    aside.push(".old");
    let aside = PathBuf::from(aside);
    std::fs::rename(target, &aside).map_err(|e| io_err(target, "moving the old table", e))?;
    std::fs::rename(staging, target).map_err(|e| io_err(target, "publishing", e))?;
    std::fs::rename(&aside, staging).map_err(|e| io_err(staging, "moving the old table", e))
}
