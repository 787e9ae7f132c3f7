//! The local file system steps of a write: names beside a target, the renames that publish a
//! staged table (`renameat2` on Linux), deleting without following links, `fsync` of what was
//! written, and the checks of a target that a rename cannot replace.

use std::path::{Path as FsPath, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::store::ZarrStore;
use crate::{Error, Result};

/// What a staging location's name has between the target's name and the writer's process.
pub(crate) const STAGING_TAG: &str = ".zarrow-staging-";

pub(crate) fn io_err(path: &FsPath, what: &str, e: std::io::Error) -> Error {
    Error::Write {
        path: path.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

/// A local `store` at its canonical path (links resolved: of the location if it exists, else
/// of its parent); other stores as they are.
pub(crate) fn canonical(store: &ZarrStore) -> Result<ZarrStore> {
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

pub(crate) fn staging_name(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(".{name}{STAGING_TAG}{}-{nanos}", std::process::id())
}

/// Delete a directory tree without following links (a link is removed, not what it points
/// to); a missing one is fine.
pub(crate) fn remove_tree(path: &FsPath) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(path, "deleting", e)),
    }
}

/// Rename `staging` to `target`, which must not exist (an empty directory there is removed
/// first); another writer's table there is an error.
pub(crate) fn rename_new(staging: &FsPath, target: &FsPath) -> Result<()> {
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
pub(crate) fn exchange(staging: &FsPath, target: &FsPath) -> Result<()> {
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

/// `fsync` the directory `dir` (its entries: names created, renamed or removed in it).
pub(crate) fn sync_dir(dir: &FsPath) -> Result<()> {
    let file = std::fs::File::open(dir).map_err(|e| io_err(dir, "opening to sync", e))?;
    file.sync_all()
        .map_err(|e| io_err(dir, "syncing (fsync)", e))?;
    note_synced(dir);
    Ok(())
}

/// The paths synced so far (tests: what a write synced).
#[cfg(test)]
static SYNCED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Note that `path` was synced (tests read the notes; elsewhere nothing).
pub(crate) fn note_synced(path: &FsPath) {
    #[cfg(test)]
    SYNCED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(path.to_path_buf());
    let _ = path;
}

/// The paths below `dir` synced so far.
#[cfg(test)]
pub(crate) fn synced_below(dir: &FsPath) -> Vec<String> {
    let synced = SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    (synced.iter().filter(|p| p.starts_with(dir)))
        .map(|p| p.display().to_string())
        .collect()
}

/// `fsync` every directory below `root` (itself included), without following links: the
/// names of what was written there are on disk before it is published (each file was synced
/// as it was written, see `durable.rs`).
pub(crate) fn sync_dirs(root: &FsPath) -> Result<()> {
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| io_err(&dir, "listing to sync", e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&dir, "listing to sync", e))?;
            let kind = entry
                .file_type()
                .map_err(|e| io_err(&entry.path(), "syncing", e))?;
            if kind.is_dir() {
                dirs.push(entry.path());
            }
        }
        sync_dir(&dir)?;
    }
    Ok(())
}

/// Whether `file` (open) is the file at `path` (not followed if a link).
pub(crate) fn same_file(file: &std::fs::File, path: &FsPath) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), path.symlink_metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Refuse, before anything is written, a local `target` that publishing by rename cannot
/// replace: a link that leads nowhere, or a mount point.
pub(crate) fn refuse_unrenamable(target: &FsPath) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |message: String| Error::Write {
        path: target.display().to_string(),
        message,
    };
    let Ok(own) = target.symlink_metadata() else {
        return Ok(());
    };
    if own.file_type().is_symlink() {
        let to = std::fs::read_link(target)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Err(refuse(format!(
            "the location is a symbolic link to '{to}', which does not exist; zarrow does not \
             write through a dangling link (create '{to}' or remove the link); nothing was \
             written"
        )));
    }
    let parent = target.parent().and_then(|p| p.metadata().ok());
    if own.is_dir() && parent.is_some_and(|p| p.dev() != own.dev() || p.ino() == own.ino()) {
        return Err(refuse(
            "the location is a mount point; a table is published by renaming its directory, \
             which a mount point cannot be: write to a directory inside it (for example \
             '<mount point>/table.zarr'); nothing was written"
                .into(),
        ));
    }
    Ok(())
}
