//! The writer lock (`lock.rs`): a live holder's lock is never broken, one breaker of a stale
//! lock wins, a lock's name taken by something else is an error at once, and a writer
//! releases or publishes only under its own lock.

use std::path::Path as FsPath;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use object_store::ObjectStoreExt;

use super::lock::host_name;
use super::{LockPolicy, WriterLock, LOCK_SUFFIX};
use crate::ZarrStore;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn breaking(stale_after: u64) -> LockPolicy {
    LockPolicy {
        break_stale: true,
        stale_after: Duration::from_secs(stale_after),
    }
}

/// A lock of this host whose process is gone, written by hand at `lock`.
fn dead_lock(lock: &FsPath) {
    let holder = serde_json::json!({
        "host": host_name(),
        "pid": u32::MAX - 1,
        "since": 0,
        "operation": "COPY",
    });
    std::fs::write(lock, holder.to_string()).unwrap();
}

#[tokio::test]
async fn a_live_writers_lock_is_never_broken_whatever_its_age() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
    let store = ZarrStore::open(&loc).unwrap();
    let held = WriterLock::acquire(&store, "COPY", LockPolicy::default())
        .await
        .unwrap();
    // Older than any age limit.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let err = WriterLock::acquire(&store, "COPY", breaking(0))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("another writer holds the lock"), "{err}");
    held.check_held().await.unwrap();
    // A holder of this host alive by its process (no flock: a lock written by hand), as old
    // as can be: not stale either.
    held.release().await.unwrap();
    let lock = format!("{loc}{LOCK_SUFFIX}");
    let holder = serde_json::json!({
        "host": host_name(),
        "pid": std::process::id(),
        "since": 0,
        "operation": "INSERT",
    });
    std::fs::write(&lock, holder.to_string()).unwrap();
    let err = WriterLock::acquire(&store, "COPY", breaking(0))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("another writer holds the lock"), "{err}");
    // The same process number after a restart of the host, or a reused one: gone.
    for (key, value) in [("boot", "an-earlier-boot".into()), ("start", 1.into())] {
        let mut holder = holder.clone();
        holder[key] = value;
        std::fs::write(&lock, holder.to_string()).unwrap();
        let taken = WriterLock::acquire(&store, "COPY", breaking(3600)).await;
        taken.unwrap().release().await.unwrap();
    }
}

/// Many writers break one stale lock at once (threads, each with its runtime): one wins,
/// the others find its live lock.
#[test]
fn of_two_breakers_of_one_stale_lock_one_wins() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
        let lock = format!("{loc}{LOCK_SUFFIX}");
        dead_lock(FsPath::new(&lock));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
        let breakers: Vec<_> = (0..6)
            .map(|_| {
                let (loc, barrier) = (loc.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async move {
                        let store = ZarrStore::open(&loc).unwrap();
                        barrier.wait();
                        let lock = WriterLock::acquire(&store, "INSERT", breaking(3600)).await;
                        // Held a moment, then checked, so that losers overlap the winner.
                        let lock = lock.map_err(|e| e.to_string())?;
                        std::thread::sleep(Duration::from_millis(50));
                        lock.check_held().await.map_err(|e| e.to_string())?;
                        Ok::<_, String>(lock)
                    })
                })
            })
            .collect();
        let results: Vec<_> = breakers.into_iter().map(|t| t.join().unwrap()).collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "round {round}: {results:?}");
        for r in &results {
            if let Err(e) = r {
                assert!(e.contains("another writer holds the lock"), "{e}");
            }
        }
    }
}

/// The same on an object store (`memory://`): the stale version is replaced conditionally.
#[test]
fn of_breakers_of_one_stale_object_store_lock_one_wins() {
    for round in 0..10 {
        let loc = format!("memory:///locks/race-{round}/t.zarr");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let results = runtime.block_on(async {
            let store = ZarrStore::open(&loc).unwrap();
            let key = object_store::path::Path::from(format!("{}{LOCK_SUFFIX}", store.root()));
            let holder = serde_json::json!({
                "host": "elsewhere", "pid": 7, "since": 0, "operation": "COPY",
            });
            store
                .object_store()
                .put(&key, holder.to_string().into_bytes().into())
                .await
                .unwrap();
            let tries = (0..6).map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    WriterLock::acquire(&store, "INSERT", breaking(60))
                        .await
                        .map_err(|e| e.to_string())
                })
            });
            let mut out = Vec::new();
            for t in tries.collect::<Vec<_>>() {
                out.push(t.await.unwrap());
            }
            out
        });
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "round {round}: {results:?}");
    }
}

#[tokio::test]
async fn a_lock_name_taken_by_something_else_is_an_error_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
    let lock = FsPath::new(&format!("{loc}{LOCK_SUFFIX}")).to_path_buf();
    let store = ZarrStore::open(&loc).unwrap();
    let cases: [(&str, &dyn Fn()); 5] = [
        ("a directory", &|| std::fs::create_dir(&lock).unwrap()),
        ("a symbolic link", &|| {
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &lock).unwrap()
        }),
        ("a symbolic link", &|| {
            std::os::unix::fs::symlink(dir.path(), &lock).unwrap()
        }),
        ("an empty file", &|| std::fs::write(&lock, "").unwrap()),
        ("a file that is not a zarrow lock", &|| {
            std::fs::write(&lock, "{\"since\": 1796165539}").unwrap()
        }),
    ];
    for (what, make) in cases {
        make();
        for policy in [LockPolicy::default(), breaking(0)] {
            let started = Instant::now();
            let err = WriterLock::acquire(&store, "COPY", policy)
                .await
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("is taken by {what}")),
                "{what}: {err}"
            );
            assert!(started.elapsed() < Duration::from_secs(5));
        }
        if lock.is_dir() && !lock.is_symlink() {
            std::fs::remove_dir(&lock).unwrap();
        } else {
            std::fs::remove_file(&lock).unwrap();
        }
    }
}

#[tokio::test]
async fn a_writer_releases_and_publishes_only_under_its_own_lock() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
    let lock_file = format!("{loc}{LOCK_SUFFIX}");
    let store = ZarrStore::open(&loc).unwrap();
    let first = WriterLock::acquire(&store, "COPY", LockPolicy::default())
        .await
        .unwrap();
    // Deleted by hand, then taken by a second writer.
    std::fs::remove_file(&lock_file).unwrap();
    let err = first.check_held().await.unwrap_err().to_string();
    assert!(err.contains("removed or taken over"), "{err}");
    let second = WriterLock::acquire(&store, "INSERT", LockPolicy::default())
        .await
        .unwrap();
    // The first writer's release leaves the second's lock.
    first.release().await.unwrap();
    assert!(FsPath::new(&lock_file).exists());
    second.check_held().await.unwrap();
    drop(second);
    assert!(!FsPath::new(&lock_file).exists());
    // A table writer whose lock was removed as it wrote publishes nothing.
    let mut writer = super::TableWriter::try_new(
        store.clone(),
        super::safety_tests::schema(),
        Default::default(),
    )
    .await
    .unwrap();
    writer
        .write(&super::safety_tests::batch(0..10))
        .await
        .unwrap();
    std::fs::remove_file(&lock_file).unwrap();
    let err = writer.finish().await.unwrap_err().to_string();
    assert!(err.contains("removed or taken over"), "{err}");
    assert!(!FsPath::new(&loc).exists());
    // The lock's holder says when it started, and on which boot, and the lock is whole.
    let held = WriterLock::acquire(&store, "COPY", LockPolicy::default())
        .await
        .unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&lock_file).unwrap()).unwrap();
    assert!(doc["token"].is_string() && doc["since"].as_u64() >= Some(now() - 60));
    if FsPath::new("/proc/self/stat").exists() {
        assert!(doc["start"].is_u64() && doc["boot"].is_string(), "{doc}");
    }
    held.release().await.unwrap();
}
