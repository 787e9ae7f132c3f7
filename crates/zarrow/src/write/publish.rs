//! Publishing a new table in one step (DESIGN.md §12, docs/writing.md "Write safety"):
//! [`Publication`] says where [`super::TableWriter`] writes and how the result becomes visible,
//! under the target's writer lock (`lock.rs`).
//!
//! - Local file systems: a staging directory beside the target, every file of it synced as it
//!   is written and every directory before publishing, then one rename (`renameat2` with
//!   `RENAME_NOREPLACE` for a new table, `RENAME_EXCHANGE` to replace one; see `fs.rs`) and
//!   the parent directory synced; the old table, now in the staging directory, is deleted
//!   after, without following links.
//! - Object stores, new location: chunks and array metadata in place, then the root document
//!   with a create-only PUT.
//! - Object stores, replacing: a staging prefix beside the target, then the old table's root
//!   documents deleted, its objects deleted, and the staged objects copied over, root
//!   documents last.
//! - Icechunk: written in a session and committed.
//!
//! Before publishing, the writer checks that it still holds its lock.

use std::path::{Path as FsPath, PathBuf};

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::Value;

use super::commit::{CommitOptions, Transaction};
use super::durable::LocalWrites;
use super::fs::{
    canonical, exchange, refuse_unrenamable, remove_tree, rename_new, staging_name, sync_dir,
    sync_dirs,
};
use super::lock::{put_create, LockPolicy, WriterLock};
use super::steps::Steps;
use super::ROOT_DOCUMENTS;
use crate::store::ZarrStore;
use crate::{Error, Result};

/// The directory inside a staging directory that its files are first written to (see
/// `durable.rs`), deleted before the staged table is published.
const TEMP_DIR: &str = ".zarrow-tmp";

fn store_err(path: &Path, source: object_store::Error) -> Error {
    Error::Store {
        path: path.to_string(),
        source,
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
    /// A local staging directory's writes (through a temporary directory beside the target).
    writes: Option<std::sync::Arc<LocalWrites>>,
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
            refuse_unrenamable(p)?;
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
        let mut writes = None;
        let store = match &publish {
            Publish::Rename { staging, .. } => {
                let staged = ZarrStore::open(&staging.to_string_lossy())?;
                let (store, local) = LocalWrites::wrap_with(&staged, staging.join(TEMP_DIR))
                    .ok_or_else(|| refuse("the staging directory is not local".into()))?;
                writes = Some(local);
                store
            }
            Publish::InPlace => target.clone(),
            Publish::Copy { staging } => staging.clone(),
            Publish::Commit(transaction) => transaction.store().clone(),
        };
        Ok(Self {
            publish,
            target,
            store,
            writes,
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
            refuse_group_member(&store, "cannot overwrite").await?;
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
            writes: None,
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
        if let Some(lock) = &self.lock {
            lock.check_held().await?;
        }
        match &self.publish {
            Publish::Rename {
                staging,
                target,
                replace,
            } => {
                if let Some(writes) = &self.writes {
                    writes.finish();
                }
                sync_dirs(staging)?;
                self.steps.hit("publishing (rename)")?;
                let parent = target.parent().unwrap_or(FsPath::new("/"));
                if *replace {
                    exchange(staging, target)?;
                    self.done = true;
                    synced_or_warn(parent);
                    let removed = (self.steps.hit("deleting the old table"))
                        .and_then(|()| remove_tree(staging));
                    let left = format!("the old one, at {}", staging.display());
                    self.leftover(removed, &left)?;
                } else {
                    rename_new(staging, target)?;
                    self.done = true;
                    synced_or_warn(parent);
                }
            }
            Publish::InPlace => self.done = true,
            Publish::Copy { staging } => {
                let staging = staging.clone();
                self.copy_over(&staging).await?;
                self.done = true;
                let deleted = match self.steps.hit("deleting the staged table") {
                    Ok(()) => delete_prefix(&staging).await,
                    Err(e) => Err(e),
                };
                self.leftover(
                    deleted,
                    &format!("its staged copy, at {}", staging.location()),
                )?;
            }
            Publish::Commit(_) => {}
        }
        // Published: a lock that cannot be deleted is left for the next writer to find stale.
        if let Some(lock) = self.lock.take() {
            match lock.release().await {
                Err(e) if !self.steps.crashed() => log::warn!(
                    "the new table is published at {}, but its writer lock could not be \
                     released: {e}",
                    self.target.location()
                ),
                other => other?,
            }
        }
        Ok(None)
    }

    /// After the new table is published, a failure to delete what is left (`what`) is a
    /// warning, not the write's error (a failpoint's kill stays one).
    fn leftover(&self, deleted: Result<()>, what: &str) -> Result<()> {
        match deleted {
            Err(e) if self.steps.crashed() => Err(e),
            Err(e) => {
                log::warn!(
                    "the new table is published at {}, but {what} could not be deleted and is \
                     left there: {e}",
                    self.target.location()
                );
                Ok(())
            }
            Ok(()) => Ok(()),
        }
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
                // The chunk writes still running first (a cancelled write's), so that none
                // lands after the staging directory is deleted.
                if let Some(writes) = &self.writes {
                    writes.close();
                }
                let _ = remove_tree(staging);
                if let Some(writes) = &self.writes {
                    writes.finish();
                }
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
        Err(source) => Err(crate::store::write_err(&key, 0, source)),
    }
}

/// Sync the directory a table was just published in; a failure is a warning (the table is
/// published).
fn synced_or_warn(dir: &FsPath) {
    if let Err(e) = sync_dir(dir) {
        log::warn!("the table is published, but its directory could not be synced: {e}");
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
