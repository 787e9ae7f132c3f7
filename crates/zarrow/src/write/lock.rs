//! The writer lock of one target (docs/writing.md, "Write safety"): one writer at a time,
//! a lock whose holder is alive is never broken, breaking a dead holder's lock is itself
//! atomic, and a writer checks that it still holds its lock before it publishes.
//!
//! The lock is an object beside the target (`<target>.zarrow-lock`) naming its holder: host,
//! process (with its start time and the host's boot, so that a reused process number is not
//! taken for the holder), time, operation and a token of its own.
//!
//! - **Local file systems.** The lock file is written and synced under a temporary name,
//!   `flock`ed, then linked to the lock's name (create-only): it is held (`flock`) from before
//!   it is visible until the writer ends; the kernel drops the `flock` of a killed process.
//!   A lock of this host is stale only when nobody holds its `flock` and its process is gone.
//!   Breaking it: the breaker takes the dead lock's `flock`, checks that the name still leads
//!   to that file, and renames its own lock over it; a second breaker finds that file held
//!   (and then replaced), so only one wins.
//! - **Object stores.** The lock is created with a create-only PUT. A lock of this host is
//!   stale when its process is gone, another host's when older than
//!   [`LockPolicy::stale_after`]. Breaking it replaces exactly the version that was judged
//!   stale (a conditional PUT on its ETag); a store without conditional PUTs falls back to
//!   delete, then create (best effort). Release and the check before publishing compare the
//!   lock's token with the writer's.
//!
//! Anything else at the lock's name (a directory, a link, a file that is not a zarrow lock) is
//! an error naming it; no loop or wait depends on what it holds.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, UpdateVersion};
use serde_json::{json, Value};

use super::fs::{canonical, io_err, remove_tree, same_file, sync_dir, STAGING_TAG};
use super::steps::Steps;
use crate::store::ZarrStore;
use crate::{Error, Result};

/// What the lock object's name adds to the target's.
pub const LOCK_SUFFIX: &str = ".zarrow-lock";
/// A lock holds a few hundred bytes; more is not a zarrow lock.
const MAX_LOCK_BYTES: u64 = 64 * 1024;
/// How often a writer looks again at a lock that went away as it looked (released meanwhile).
const MAX_TRIES: usize = 64;

/// When a writer may break another writer's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockPolicy {
    /// Break a stale lock (default false: a stale lock is an error that says how to break it).
    pub break_stale: bool,
    /// Another host's lock older than this is stale (default one hour). A lock of this host
    /// is stale only when its process is gone, whatever its age.
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

/// This boot of the host (Linux), so that a lock of a process from before a restart is seen
/// as gone.
fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

/// When process `pid` started, in clock ticks since boot (Linux; field 22 of its `stat`).
fn process_start(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
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

/// What a lock says of its holder.
fn this_holder(operation: &str, location: &str) -> (Value, String) {
    let pid = u64::from(std::process::id());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Unique per writer: this process, the time, and a count of the locks it took.
    static TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let token = format!("{pid}-{nanos:x}-{n}");
    let holder = json!({
        "host": host_name(),
        "pid": pid,
        "start": process_start(pid),
        "boot": boot_id(),
        "since": unix_now(),
        "operation": operation,
        "location": location,
        "token": token,
    });
    (holder, token)
}

/// Why the lock `held` is stale (`None`: its holder may be alive). `flock_free`: nobody holds
/// the local lock file's `flock` (`None`: not a local lock, or the file system cannot tell).
fn stale(held: &Value, policy: LockPolicy, flock_free: Option<bool>) -> Option<String> {
    if flock_free == Some(false) {
        return None;
    }
    if held["host"].as_str() != Some(host_name().as_str()) {
        let age = unix_now().saturating_sub(held["since"].as_u64()?);
        let limit = policy.stale_after.as_secs();
        return (age > limit).then(|| format!("another host's, older than {limit} s"));
    }
    let pid = held["pid"].as_u64()?;
    if let (Some(then), Some(now)) = (held["boot"].as_str(), boot_id()) {
        if then != now {
            return Some("the host restarted since".into());
        }
    }
    match process_gone(pid) {
        Some(true) => return Some(format!("process {pid} is gone")),
        Some(false) => {}
        // No process table to ask (off Linux): a local lock nobody holds is its holder's
        // no more.
        None => return (flock_free == Some(true)).then(|| "nobody holds it".to_string()),
    }
    match (held["start"].as_u64(), process_start(pid)) {
        (Some(then), Some(now)) if then != now => Some(format!(
            "process {pid} is gone (its number is another process's now)"
        )),
        _ => None,
    }
}

/// The error for a lock `held` by another writer (`stale`: why it is stale).
fn locked(location: &str, key: &str, held: &Value, stale: Option<String>) -> Error {
    let str_of = |k: &str| held[k].as_str().unwrap_or("?").to_string();
    let age = held["since"]
        .as_u64()
        .map_or("?".into(), |s| unix_now().saturating_sub(s).to_string());
    let holder = format!(
        "{} (host {}, process {}, for {age} s)",
        str_of("operation"),
        str_of("host"),
        held["pid"].as_u64().map_or("?".into(), |p| p.to_string()),
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
        path: location.to_string(),
        message,
    }
}

/// The error for something at the lock's name that is not a zarrow lock.
fn occupied(location: &str, key: &str, what: &str) -> Error {
    Error::Write {
        path: location.to_string(),
        message: format!(
            "the writer lock's name {key} is taken by {what}, not a zarrow lock; remove it \
             (no zarrow writer made it); nothing was written"
        ),
    }
}

/// The lock's holder as JSON, or the error for a lock's name holding something else.
fn parse_holder(location: &str, key: &str, bytes: &[u8]) -> Result<Value> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if v["pid"].is_u64() && v["host"].is_string() => Ok(v),
        _ if bytes.is_empty() => Err(occupied(location, key, "an empty file")),
        _ => Err(occupied(location, key, "a file that is not a zarrow lock")),
    }
}

/// The writer lock of one target; see the module documentation. Released by
/// [`Self::release`], or (best effort) when dropped.
#[derive(Debug)]
pub struct WriterLock {
    held: Held,
    location: String,
    released: bool,
    steps: Steps,
}

#[derive(Debug)]
enum Held {
    /// The lock file, open and `flock`ed for as long as the writer holds it.
    Local { path: PathBuf, file: std::fs::File },
    /// The lock object, with this writer's token in it.
    Object {
        store: Arc<dyn ObjectStore>,
        key: Path,
        token: String,
    },
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

fn store_err(path: &Path, source: object_store::Error) -> Error {
    Error::Store {
        path: path.to_string(),
        source,
    }
}

/// What a look at the lock found.
enum Found {
    /// Nothing there any more (released meanwhile).
    Gone,
    /// A lock whose holder may be alive.
    Live(Value),
    /// A stale lock; a local one with its file, whose `flock` this writer took (a breaker
    /// replaces that file).
    Stale {
        held: Value,
        why: String,
        file: Option<std::fs::File>,
    },
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
        let location = store.location().to_string();
        let (holder, token) = this_holder(operation, &location);
        let payload = serde_json::to_vec_pretty(&holder).unwrap_or_default();
        let mut tries = 0;
        loop {
            steps.hit("the writer lock")?;
            let attempt = match local_path(store) {
                Some(path) => local::try_take(path, &location, &payload, policy, &steps)?,
                None => object_try_take(store, &payload, &token, policy, &steps).await?,
            };
            let found = match attempt {
                Attempt::Taken(held) => {
                    return Ok(Self {
                        held,
                        location,
                        released: false,
                        steps,
                    })
                }
                Attempt::Found(found) => found,
            };
            let key = sibling(store, LOCK_SUFFIX).to_string();
            match found {
                Found::Gone if tries < MAX_TRIES => tries += 1,
                Found::Gone => {
                    return Err(Error::Write {
                        path: location,
                        message: format!(
                            "the writer lock {key} came and went {MAX_TRIES} times as this \
                             writer tried to take it; try again"
                        ),
                    })
                }
                Found::Live(_) if until.is_some_and(|t| Instant::now() < t) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Found::Live(held) => return Err(locked(&location, &key, &held, None)),
                Found::Stale { held, why, .. } => {
                    return Err(locked(&location, &key, &held, Some(why)))
                }
            }
        }
    }

    /// An error unless this writer still holds its lock (checked before publishing: a lock
    /// deleted by hand, or taken over, stops the write).
    pub(crate) async fn check_held(&self) -> Result<()> {
        if self.holds().await? {
            return Ok(());
        }
        Err(Error::Write {
            path: self.location.clone(),
            message: format!(
                "this writer's lock {} was removed or taken over by another writer while it \
                 wrote; nothing was published",
                self.key()
            ),
        })
    }

    fn key(&self) -> String {
        match &self.held {
            Held::Local { path, .. } => path.display().to_string(),
            Held::Object { key, .. } => key.to_string(),
        }
    }

    /// Whether the lock's name still leads to this writer's lock.
    async fn holds(&self) -> Result<bool> {
        match &self.held {
            Held::Local { path, file } => Ok(same_file(file, path)),
            Held::Object { store, key, token } => holds_token(store.as_ref(), key, token).await,
        }
    }

    /// Give the lock back (only if it is still this writer's: another writer's lock is never
    /// deleted).
    pub async fn release(mut self) -> Result<()> {
        self.steps.hit("releasing the writer lock")?;
        self.released = true;
        if !self.holds().await? {
            log::warn!(
                "the writer lock {} is not this writer's any more; left as it is",
                self.key()
            );
            return Ok(());
        }
        match &self.held {
            Held::Local { path, .. } => {
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_err(path, "releasing the writer lock", e)),
                }
                if let Some(parent) = path.parent() {
                    sync_dir(parent)?;
                }
                Ok(())
            }
            Held::Object { store, key, .. } => match store.delete(key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(store_err(key, e)),
            },
        }
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        if self.released || self.steps.crashed() {
            return;
        }
        match &self.held {
            Held::Local { path, file } => {
                if same_file(file, path) {
                    let _ = std::fs::remove_file(path);
                }
            }
            Held::Object { store, key, token } => {
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    let (store, key, token) = (store.clone(), key.clone(), token.clone());
                    handle.spawn(async move {
                        if let Ok(true) = holds_token(store.as_ref(), &key, &token).await {
                            let _ = store.delete(&key).await;
                        }
                    });
                }
            }
        }
    }
}

/// The local path of `store`'s target where the lock is a `flock`ed file (Unix); elsewhere
/// the lock is taken as on an object store.
fn local_path(store: &ZarrStore) -> Option<&FsPath> {
    if cfg!(unix) {
        store.local_path()
    } else {
        None
    }
}

/// Whether the lock object at `key` holds `token` (is the writer's own).
async fn holds_token(store: &dyn ObjectStore, key: &Path, token: &str) -> Result<bool> {
    let got = match store.get(key).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(store_err(key, e)),
    };
    let bytes = got.bytes().await.map_err(|e| store_err(key, e))?;
    let held: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(held["token"].as_str() == Some(token))
}

/// One try at the lock.
enum Attempt {
    Taken(Held),
    Found(Found),
}

/// A try at the lock of an object store: create it, or look at the one there and break it if
/// it is stale and `policy` says so.
async fn object_try_take(
    store: &ZarrStore,
    payload: &[u8],
    token: &str,
    policy: LockPolicy,
    steps: &Steps,
) -> Result<Attempt> {
    let os = store.object_store().clone();
    let key = sibling(store, LOCK_SUFFIX);
    let location = store.location();
    let taken = |os: Arc<dyn ObjectStore>| {
        Attempt::Taken(Held::Object {
            store: os,
            key: key.clone(),
            token: token.to_string(),
        })
    };
    let bytes = Bytes::copy_from_slice(payload);
    match put_create(os.as_ref(), &key, bytes.clone()).await {
        Ok(()) => return Ok(taken(os)),
        Err(object_store::Error::AlreadyExists { .. }) => {}
        Err(e) => return Err(crate::store::write_err(&key, payload.len(), e)),
    }
    let got = match os.get(&key).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(Attempt::Found(Found::Gone)),
        Err(e) => return Err(store_err(&key, e)),
    };
    if got.meta.size > MAX_LOCK_BYTES {
        return Err(occupied(location, key.as_ref(), "a large object"));
    }
    let version = UpdateVersion {
        e_tag: got.meta.e_tag.clone(),
        version: got.meta.version.clone(),
    };
    let read = got.bytes().await.map_err(|e| store_err(&key, e))?;
    let held = parse_holder(location, key.as_ref(), &read)?;
    let Some(why) = stale(&held, policy, None) else {
        return Ok(Attempt::Found(Found::Live(held)));
    };
    if !policy.break_stale {
        return Ok(Attempt::Found(Found::Stale {
            held,
            why,
            file: None,
        }));
    }
    steps.hit("breaking a stale lock")?;
    log::warn!("breaking the stale writer lock {key} ({why}): {held}");
    let replaced = os
        .put_opts(&key, bytes.into(), PutMode::Update(version).into())
        .await;
    match replaced {
        Ok(_) => Ok(taken(os)),
        // Another breaker (or the holder) changed it first: look again.
        Err(object_store::Error::Precondition { .. })
        | Err(object_store::Error::NotFound { .. }) => Ok(Attempt::Found(Found::Gone)),
        // No conditional PUT here: delete, then create (best effort).
        Err(object_store::Error::NotImplemented { .. })
        | Err(object_store::Error::NotSupported { .. }) => {
            match os.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_err(&key, e)),
            }
            Ok(Attempt::Found(Found::Gone))
        }
        Err(e) => Err(crate::store::write_err(&key, payload.len(), e)),
    }
}

/// Delete what process `pid` of this host left beside the local `target`: staging
/// directories and lock files not yet linked (a writer killed before publishing; its lock was
/// stale and is broken).
fn remove_abandoned(target: &FsPath, pid: u64) {
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let staging = format!(".{name}{STAGING_TAG}{pid}-");
    let temp_lock = format!(".{name}{LOCK_SUFFIX}.{pid}-");
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type();
        if kind.as_ref().is_ok_and(|t| t.is_dir()) && file_name.starts_with(&staging) {
            log::warn!(
                "deleting {}, left by a writer that was stopped",
                entry.path().display()
            );
            let _ = remove_tree(&entry.path());
        } else if kind.is_ok_and(|t| t.is_file()) && file_name.starts_with(&temp_lock) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(unix)]
mod local {
    //! The lock on a local file system (see the module documentation of `lock`).

    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    use std::path::{Path as FsPath, PathBuf};
    use std::time::{SystemTime, UNIX_EPOCH};

    use serde_json::Value;

    use super::{
        occupied, parse_holder, remove_abandoned, stale, Attempt, Found, Held, LockPolicy,
        LOCK_SUFFIX, MAX_LOCK_BYTES,
    };
    use crate::write::fs::{io_err, same_file, sync_dir};
    use crate::write::steps::Steps;
    use crate::{Error, Result};

    /// `flock` without waiting: whether it was taken (`None`: the file system has no `flock`).
    fn try_flock(file: &std::fs::File) -> Option<bool> {
        // SAFETY: a valid open descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Some(true);
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EWOULDBLOCK) => Some(false),
            _ => None,
        }
    }

    /// What is at the lock's name, when it is not a regular file.
    fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
        let kind = meta.file_type();
        if kind.is_file() {
            None
        } else if kind.is_dir() {
            Some("a directory")
        } else if kind.is_symlink() {
            Some("a symbolic link")
        } else {
            Some("a special file")
        }
    }

    /// This writer's lock file under a temporary name beside the lock: created, `flock`ed,
    /// written and synced, so that it is held and whole before it gets the lock's name.
    fn write_temp(lock: &FsPath, payload: &[u8]) -> Result<(PathBuf, std::fs::File)> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut name = lock.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{}-{nanos}", std::process::id()));
        let mut hidden = std::ffi::OsString::from(".");
        hidden.push(name);
        let temp = lock.with_file_name(hidden);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)
            .map_err(|e| io_err(&temp, "creating the writer lock", e))?;
        let written = try_flock(&file)
            .ok_or_else(|| std::io::Error::other("flock is not supported here"))
            .and_then(|_| file.write_all(payload))
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io_err(&temp, "writing the writer lock", e));
        }
        Ok((temp, file))
    }

    /// Look at the lock file at `path` (another writer's): gone, held by a live writer, or
    /// stale (its `flock` then taken by this writer, for breaking it).
    fn inspect(path: &FsPath, location: &str, policy: LockPolicy) -> Result<Found> {
        let key = path.display().to_string();
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path);
        let mut file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Gone),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(occupied(location, &key, "a symbolic link"))
            }
            Err(e) => return Err(io_err(path, "reading the writer lock", e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| io_err(path, "reading the writer lock", e))?;
        if let Some(what) = kind_of(&meta) {
            return Err(occupied(location, &key, what));
        }
        let free = try_flock(&file);
        let mut bytes = Vec::new();
        (&mut file)
            .take(MAX_LOCK_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| io_err(path, "reading the writer lock", e))?;
        let held: Value = parse_holder(location, &key, &bytes)?;
        match stale(&held, policy, free) {
            None => Ok(Found::Live(held)),
            Some(why) => Ok(Found::Stale {
                held,
                why,
                file: Some(file),
            }),
        }
    }

    /// A try at the local lock of `target`.
    pub(super) fn try_take(
        target: &FsPath,
        location: &str,
        payload: &[u8],
        policy: LockPolicy,
        steps: &Steps,
    ) -> Result<Attempt> {
        let mut name = target.as_os_str().to_owned();
        name.push(LOCK_SUFFIX);
        let path = PathBuf::from(name);
        let parent = path.parent().unwrap_or(FsPath::new("/"));
        std::fs::create_dir_all(parent).map_err(|e| io_err(parent, "creating", e))?;
        if let Some(what) = path.symlink_metadata().ok().as_ref().and_then(kind_of) {
            return Err(occupied(location, &path.display().to_string(), what));
        }
        let (temp, file) = write_temp(&path, payload)?;
        let linked = std::fs::hard_link(&temp, &path);
        let found = match linked {
            Ok(()) => None,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Some(inspect(&path, location, policy))
            }
            Err(e) => Some(Err(io_err(&path, "taking the writer lock", e))),
        };
        let found = match found {
            None => {
                let _ = std::fs::remove_file(&temp);
                sync_dir(parent)?;
                return Ok(Attempt::Taken(Held::Local { path, file }));
            }
            Some(Ok(Found::Stale {
                held,
                why,
                file: Some(theirs),
            })) if policy.break_stale => {
                return break_stale(&path, &temp, file, &theirs, (held, why), steps);
            }
            Some(found) => found,
        };
        let _ = std::fs::remove_file(&temp);
        found.map(Attempt::Found)
    }

    /// Replace the stale lock `theirs` (whose `flock` this writer holds) at `path` with this
    /// writer's lock file `temp`, if the name still leads to it.
    fn break_stale(
        path: &FsPath,
        temp: &FsPath,
        file: std::fs::File,
        theirs: &std::fs::File,
        (held, why): (Value, String),
        steps: &Steps,
    ) -> Result<Attempt> {
        let give_up = |found: Found| {
            let _ = std::fs::remove_file(temp);
            Ok(Attempt::Found(found))
        };
        if let Err(e) = steps.hit("breaking a stale lock") {
            let _ = std::fs::remove_file(temp);
            return Err(e);
        }
        // Another breaker replaced it first: look again.
        if !same_file(theirs, path) {
            return give_up(Found::Gone);
        }
        log::warn!(
            "breaking the stale writer lock {} ({why}): {held}",
            path.display()
        );
        if let Err(e) = std::fs::rename(temp, path) {
            let _ = std::fs::remove_file(temp);
            return Err(Error::Write {
                path: path.display().to_string(),
                message: format!("breaking the stale writer lock: {e}"),
            });
        }
        if let Some(parent) = path.parent() {
            sync_dir(parent)?;
        }
        let here = held["host"].as_str() == Some(super::host_name().as_str());
        if let (true, Some(pid), Some(target)) = (here, held["pid"].as_u64(), strip_suffix(path)) {
            remove_abandoned(&target, pid);
        }
        Ok(Attempt::Taken(Held::Local {
            path: path.to_path_buf(),
            file,
        }))
    }

    /// The target of the lock file `path` (its name less the lock's suffix).
    fn strip_suffix(path: &FsPath) -> Option<PathBuf> {
        let name = path.file_name()?.to_str()?;
        Some(path.with_file_name(name.strip_suffix(LOCK_SUFFIX)?))
    }
}
