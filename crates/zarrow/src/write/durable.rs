//! Local writes (an `INSERT` into a live table, a `COPY` into its staging directory): every
//! object is written under a temporary name in a directory of the writer's own beside the
//! target (never inside the table), synced, then renamed to its key. The writer syncs the directories it wrote into before it publishes
//! ([`LocalWrites::sync`]); a writer that fails undoes its writes ([`LocalWrites::roll_back`]:
//! the files it replaced are kept as links until it finishes). A writer killed leaves its
//! temporary directory, which the next writer deletes when it breaks the dead writer's lock.

use std::collections::BTreeSet;
use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::fs::{note_synced, remove_tree, staging_name, sync_dir};
use crate::store::ZarrStore;
use crate::Result;

/// A local file system whose writes go through a temporary directory outside the table; see
/// the module documentation. Reads, listings and deletes are the local file system's.
#[derive(Debug)]
pub(crate) struct LocalWrites {
    inner: LocalFileSystem,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct Written {
    dirs: BTreeSet<PathBuf>,
    created: Vec<PathBuf>,
    replaced: Vec<(PathBuf, PathBuf)>,
}

#[derive(Debug)]
struct State {
    temp: PathBuf,
    count: AtomicU64,
    /// Set when the writer gives up: writes held it (read) while they run, so once it is set
    /// (write) none is running and none starts.
    closed: std::sync::RwLock<bool>,
    /// What was written: the directories written into, the files created (not there before),
    /// and the files replaced with where their old version is kept (a hard link in `temp`).
    written: Mutex<Written>,
}

impl fmt::Display for LocalWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalWrites({})", self.state.temp.display())
    }
}

fn os_err(path: &std::path::Path, source: std::io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: format!("{}: {source}", path.display()).into(),
    }
}

impl LocalWrites {
    /// `store` (local) written through a temporary directory beside its root, and the writes;
    /// `None` for other stores.
    pub(crate) fn wrap(store: &ZarrStore) -> Option<(ZarrStore, Arc<LocalWrites>)> {
        let target = store.local_path()?;
        let name = target.file_name()?.to_string_lossy();
        let temp = target.parent()?.join(staging_name(&name));
        Self::wrap_with(store, temp)
    }

    /// `store` (local) written through the temporary directory `temp` (for a staged table: a
    /// directory inside the staging directory, deleted before it is published).
    pub(crate) fn wrap_with(
        store: &ZarrStore,
        temp: std::path::PathBuf,
    ) -> Option<(ZarrStore, Arc<LocalWrites>)> {
        store.local_path()?;
        let writes = Arc::new(LocalWrites {
            inner: LocalFileSystem::new(),
            state: Arc::new(State {
                temp,
                count: AtomicU64::new(0),
                closed: std::sync::RwLock::new(false),
                written: Mutex::new(Written::default()),
            }),
        });
        let os: Arc<dyn ObjectStore> = writes.clone();
        Some((store.clone().with_object_store(os), writes))
    }

    /// Sync the directories written into (the files were synced as they were written).
    pub(crate) fn sync(&self) -> Result<()> {
        let dirs = self.state.lock().dirs.clone();
        for dir in dirs {
            sync_dir(&dir)?;
        }
        Ok(())
    }

    /// Undo every write (a failed write): the files replaced get their old versions back
    /// (renames, no new space needed), the files created are deleted. Whether all of it was.
    pub(crate) fn roll_back(&self) -> bool {
        self.close();
        let mut written = self.state.lock();
        let mut whole = true;
        for (file, kept) in std::mem::take(&mut written.replaced).into_iter().rev() {
            whole &= std::fs::rename(&kept, &file).is_ok();
        }
        for file in std::mem::take(&mut written.created) {
            whole &= std::fs::remove_file(&file).is_ok();
        }
        for dir in &written.dirs {
            whole &= sync_dir(dir).is_ok();
        }
        whole
    }

    /// Give up: wait for the writes running (on the blocking pool: a cancelled task's write
    /// still runs there), and refuse any later one, so that nothing lands after the writer
    /// cleaned up.
    pub(crate) fn close(&self) {
        *self.state.closed.write().unwrap_or_else(|p| p.into_inner()) = true;
    }

    /// Delete the temporary directory.
    pub(crate) fn finish(&self) {
        let _ = remove_tree(&self.state.temp);
    }
}

impl State {
    fn lock(&self) -> std::sync::MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Write `bytes` to `dest`: a temporary file, synced, renamed over `dest`.
    fn put_file(
        &self,
        dest: &std::path::Path,
        payload: &PutPayload,
        create: bool,
    ) -> std::io::Result<()> {
        let closed = self.closed.read().unwrap_or_else(|p| p.into_inner());
        if *closed {
            return Err(std::io::Error::other("the write was given up"));
        }
        std::fs::create_dir_all(&self.temp)?;
        let n = self.count.fetch_add(1, Ordering::Relaxed);
        let temp = self.temp.join(n.to_string());
        let written = std::fs::File::create(&temp).and_then(|mut file| {
            for part in payload.iter() {
                file.write_all(part)?;
            }
            file.sync_data()
        });
        let parent = dest.parent().unwrap_or(std::path::Path::new("/"));
        let placed = written
            .and_then(|()| std::fs::create_dir_all(parent))
            .and_then(|()| {
                let existed = dest.symlink_metadata().is_ok();
                if create && existed {
                    return Err(std::io::ErrorKind::AlreadyExists.into());
                }
                // The old version kept (a link: no new space), for a rollback.
                let kept = self.temp.join(format!("{n}.old"));
                if existed {
                    std::fs::hard_link(dest, &kept)?;
                }
                std::fs::rename(&temp, dest)?;
                note_synced(dest);
                let mut written = self.lock();
                written.dirs.insert(parent.to_path_buf());
                match existed {
                    true => written.replaced.push((dest.to_path_buf(), kept)),
                    false => written.created.push(dest.to_path_buf()),
                }
                Ok(())
            });
        if placed.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        placed
    }
}

#[async_trait]
impl ObjectStore for LocalWrites {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let create = match opts.mode {
            PutMode::Overwrite => false,
            PutMode::Create => true,
            PutMode::Update(_) => return self.inner.put_opts(location, payload, opts).await,
        };
        let dest = self.inner.path_to_filesystem(location)?;
        let state = self.state.clone();
        let target = dest.clone();
        let put = tokio::task::spawn_blocking(move || state.put_file(&target, &payload, create))
            .await
            .map_err(|e| os_err(&dest, std::io::Error::other(e)))?;
        match put {
            Ok(()) => Ok(PutResult {
                e_tag: None,
                version: None,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(object_store::Error::AlreadyExists {
                    path: location.to_string(),
                    source: Box::new(e),
                })
            }
            Err(e) => Err(os_err(&dest, e)),
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
