//! Write safety (docs/writing.md, "Write safety"): crash tests that stop the writer before
//! each of its writes (failpoints: [`Steps`]) and read what is left; the writer lock; what
//! `overwrite` refuses; links.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;

use super::append::TableAppender;
use super::{LockPolicy, Steps, TableWriteOptions, TableWriter, WriterLock};
use crate::table::TableModel;
use crate::{Error, TableOptions, ZarrRecordBatchStreamBuilder, ZarrStore};

pub(super) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, false),
        Field::new("b", DataType::Float64, false),
        Field::new("s", DataType::Utf8, false),
    ]))
}

pub(super) fn batch(rows: std::ops::Range<i64>) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.clone())),
        Arc::new(Float64Array::from_iter_values(
            rows.clone().map(|i| i as f64 * 0.5),
        )),
        Arc::new(StringArray::from_iter_values(rows.map(|i| format!("r{i}")))),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn options(zarr_format: u8, overwrite: bool) -> TableWriteOptions {
    TableWriteOptions {
        chunk_rows: 3,
        zarr_format,
        overwrite,
        ..Default::default()
    }
}

/// Write rows `rows` as a table at `location`, stopping before write `fail_at` if given.
async fn write(
    location: &str,
    rows: std::ops::Range<i64>,
    options: TableWriteOptions,
    steps: Steps,
) -> crate::Result<u64> {
    let store = ZarrStore::open(location)?;
    let mut writer = TableWriter::try_new_counted(store, schema(), options, steps).await?;
    // Two batches: more than one unit.
    let mid = rows.start + (rows.end - rows.start) / 2;
    writer.write(&batch(rows.start..mid)).await?;
    writer.write(&batch(mid..rows.end)).await?;
    writer.finish().await
}

/// The table at `location` as zarrow reads it: column `a`, after checking `b` and `s` agree
/// with it; `None` when no table opens there.
pub(super) async fn read(location: &str) -> Option<Vec<i64>> {
    let builder = ZarrRecordBatchStreamBuilder::try_new(location).await.ok()?;
    let batches: Vec<RecordBatch> = builder.build().ok()?.try_collect().await.ok()?;
    let mut out = Vec::new();
    for b in batches {
        let a = b.column_by_name("a").unwrap().as_primitive::<Int64Type>();
        let s = b.column_by_name("s").unwrap().as_string::<i32>();
        for (i, v) in a.values().iter().enumerate() {
            assert_eq!(s.value(i), format!("r{v}"), "{location}: a row mixed");
            out.push(*v);
        }
    }
    Some(out)
}

fn rows(r: std::ops::Range<i64>) -> Option<Vec<i64>> {
    Some(r.collect())
}

/// Stop a write before each of its writes in turn, into a fresh location or over an old
/// table, and read the location after each stop: the old table (or none, when new) or the
/// new one, never anything else. `location(n)` gives the n-th try's location.
async fn crash_writes(location: impl Fn(usize) -> String, zarr_format: u8, overwrite: bool) {
    let old = 0..7;
    let new = 100..111;
    let mut n = 0;
    loop {
        let loc = location(n);
        if overwrite {
            write(
                &loc,
                old.clone(),
                options(zarr_format, false),
                Steps::default(),
            )
            .await
            .unwrap();
        }
        let steps = Steps::fail_at(n);
        let result = write(
            &loc,
            new.clone(),
            options(zarr_format, overwrite),
            steps.clone(),
        )
        .await;
        let seen = read(&loc).await;
        let before = if overwrite { rows(old.clone()) } else { None };
        match result {
            Ok(_) => {
                assert!(!steps.crashed());
                assert_eq!(seen, rows(new.clone()), "{loc}: after the write");
                assert!(n > 5, "{loc}: only {n} writes");
                return;
            }
            Err(e) => {
                assert!(steps.crashed(), "{loc}: {e}");
                assert!(
                    seen == before || seen == rows(new.clone()),
                    "{loc}: stopped before write {n} ({e}), read {seen:?}"
                );
            }
        }
        n += 1;
        assert!(n < 500, "the write never finished");
    }
}

#[tokio::test]
async fn a_local_write_stopped_anywhere_leaves_the_old_table_or_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    for zarr_format in [2, 3] {
        for overwrite in [false, true] {
            let base = dir.path().join(format!("v{zarr_format}-{overwrite}"));
            crash_writes(
                |n| {
                    base.join(format!("{n}/t.zarr"))
                        .to_string_lossy()
                        .into_owned()
                },
                zarr_format,
                overwrite,
            )
            .await;
        }
    }
}

/// Object stores (`memory://`): a new table appears with its root document (create-only);
/// replacing one deletes the old before copying the staged one over, so a stop in between
/// leaves no table at the location — never a mixed one (docs/writing.md).
#[tokio::test]
async fn an_object_store_write_stopped_anywhere_is_never_mixed() {
    for zarr_format in [2, 3] {
        crash_writes(
            |n| format!("memory:///safety/new-v{zarr_format}/{n}/t.zarr"),
            zarr_format,
            false,
        )
        .await;
    }
    // Replacing: the old table, none (between the deletion and the copy), or the new one.
    let old = 0..7;
    let new = 100..111;
    let mut n = 0;
    loop {
        let loc = format!("memory:///safety/replace/{n}/t.zarr");
        write(&loc, old.clone(), options(3, false), Steps::default())
            .await
            .unwrap();
        let steps = Steps::fail_at(n);
        let result = write(&loc, new.clone(), options(3, true), steps).await;
        let seen = read(&loc).await;
        assert!(
            seen.is_none() || seen == rows(old.clone()) || seen == rows(new.clone()),
            "{loc}: {seen:?}"
        );
        if result.is_ok() {
            assert_eq!(seen, rows(new.clone()));
            // The staging prefix is gone.
            let parent = ZarrStore::open(&format!("memory:///safety/replace/{n}")).unwrap();
            assert_eq!(parent.list_children("").await.unwrap(), ["t.zarr"]);
            break;
        }
        n += 1;
        assert!(n < 500);
    }
}

#[tokio::test]
async fn overwrite_reads_the_old_table_to_the_end_before_replacing_it() {
    // What `COPY (SELECT … FROM 't.zarr' WHERE …) TO 't.zarr'` does: the old table is read
    // while the new one is written.
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
    write(&loc, 0..20, options(3, false), Steps::default())
        .await
        .unwrap();
    let reader = ZarrRecordBatchStreamBuilder::try_new(&loc)
        .await
        .unwrap()
        .with_batch_size(4)
        .build()
        .unwrap();
    let store = ZarrStore::open(&loc).unwrap();
    let mut writer = TableWriter::try_new(store, schema(), options(3, true))
        .await
        .unwrap();
    let mut reader = Box::pin(reader);
    while let Some(b) = reader.try_next().await.unwrap() {
        let a = b.column_by_name("a").unwrap().as_primitive::<Int64Type>();
        let keep: Vec<i64> = a.values().iter().copied().filter(|v| v % 2 == 0).collect();
        for v in keep {
            writer.write(&batch(v..v + 1)).await.unwrap();
        }
    }
    writer.finish().await.unwrap();
    let expected: Vec<i64> = (0..20).filter(|v| v % 2 == 0).collect();
    assert_eq!(read(&loc).await, Some(expected));
    // Nothing staged is left beside it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["t.zarr"]);
}

#[tokio::test]
async fn overwrite_refuses_what_is_not_a_zarr_store() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "keep me").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let loc = dir.path().to_string_lossy().into_owned();
    let err = write(&loc, 0..5, options(3, true), Steps::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("only a zarr store") && err.contains("notes.txt"),
        "{err}"
    );
    assert!(dir.path().join("notes.txt").exists());
    assert!(dir.path().join("sub").exists());
    // Nor a file.
    let file = dir.path().join("notes.txt").to_string_lossy().into_owned();
    let err = write(&file, 0..5, options(3, true), Steps::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a file"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    // Nor one array of a group.
    let table = dir.path().join("t.zarr").to_string_lossy().into_owned();
    write(&table, 0..5, options(3, false), Steps::default())
        .await
        .unwrap();
    let err = write(
        &format!("{table}/a"),
        0..5,
        options(3, true),
        Steps::default(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("member of the zarr group"), "{err}");
    assert_eq!(read(&table).await, rows(0..5));
}

#[cfg(unix)]
#[tokio::test]
async fn overwrite_never_follows_links_out_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("precious"), "data").unwrap();
    let loc = dir.path().join("t.zarr");
    let location = loc.to_string_lossy().into_owned();
    write(&location, 0..5, options(3, false), Steps::default())
        .await
        .unwrap();
    std::os::unix::fs::symlink(&outside, loc.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("precious"), loc.join("a/c/file-link")).unwrap();
    write(&location, 10..12, options(3, true), Steps::default())
        .await
        .unwrap();
    assert_eq!(read(&location).await, rows(10..12));
    assert_eq!(
        std::fs::read_to_string(outside.join("precious")).unwrap(),
        "data"
    );
    // A target that is itself a link: the table it points to is replaced, the link stays.
    let linked = dir.path().join("linked.zarr");
    std::os::unix::fs::symlink(&loc, &linked).unwrap();
    let linked_loc = linked.to_string_lossy().into_owned();
    write(&linked_loc, 20..23, options(3, true), Steps::default())
        .await
        .unwrap();
    assert!(linked.is_symlink());
    assert_eq!(read(&location).await, rows(20..23));
    // One lock, whichever name the table is written through.
    let lock = WriterLock::acquire(
        &ZarrStore::open(&linked_loc).unwrap(),
        "test",
        LockPolicy::default(),
    )
    .await
    .unwrap();
    let err = write(&location, 0..1, options(3, true), Steps::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("another writer holds the lock"), "{err}");
    lock.release().await.unwrap();
}

#[tokio::test]
async fn a_second_writer_fails_at_once_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
    let store = ZarrStore::open(&loc).unwrap();
    let lock = WriterLock::acquire(&store, "test", LockPolicy::default())
        .await
        .unwrap();
    let err = write(&loc, 0..5, options(3, false), Steps::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("another writer holds the lock")
            && err.contains(&format!("process {}", std::process::id())),
        "{err}"
    );
    assert!(read(&loc).await.is_none());
    lock.release().await.unwrap();
    write(&loc, 0..5, options(3, false), Steps::default())
        .await
        .unwrap();
    // Appending takes the same lock.
    let lock = WriterLock::acquire(&store, "test", LockPolicy::default())
        .await
        .unwrap();
    let model = TableModel::open(&loc, TableOptions::default())
        .await
        .unwrap();
    let err = TableAppender::try_new(store.clone(), model.schema(), Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("another writer holds the lock"), "{err}");
    drop(lock);
    // Dropped: released.
    TableAppender::try_new(store, model.schema(), Default::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_stale_lock_is_broken_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
    let lock_file = format!("{loc}{}", super::LOCK_SUFFIX);
    // A process of this host that is gone.
    let holder = serde_json::json!({
        "host": super::lock::host_name(),
        "pid": u32::MAX - 1,
        "since": 0,
        "operation": "INSERT",
    });
    for since in [std::time::SystemTime::now(), std::time::UNIX_EPOCH] {
        let mut holder = holder.clone();
        holder["since"] = since
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .into();
        if since == std::time::UNIX_EPOCH {
            // Another host's, but old.
            holder["host"] = "elsewhere".into();
        }
        std::fs::write(&lock_file, holder.to_string()).unwrap();
        // What the stopped writer staged.
        let staged = dir
            .path()
            .join(format!(".t.zarr.zarrow-staging-{}-7", u32::MAX - 1));
        std::fs::create_dir_all(staged.join("a/c")).unwrap();
        std::fs::write(staged.join("a/c/0"), "x").unwrap();
        let err = write(&loc, 0..5, options(3, false), Steps::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("stale") && err.contains("break_stale_lock"),
            "{err}"
        );
        let mut o = options(3, true);
        o.lock.break_stale = true;
        write(&loc, 0..5, o, Steps::default()).await.unwrap();
        assert_eq!(read(&loc).await, rows(0..5));
        assert!(!std::path::Path::new(&lock_file).exists());
        // A process of this host: what it staged goes too (another host's is left).
        assert_eq!(staged.exists(), since == std::time::UNIX_EPOCH);
        let _ = std::fs::remove_dir_all(&staged);
    }
    // A live holder on another host, recent: not stale, even when breaking is allowed.
    let mut live = holder.clone();
    live["host"] = "elsewhere".into();
    live["since"] = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .into();
    std::fs::write(&lock_file, live.to_string()).unwrap();
    let mut o = options(3, true);
    o.lock.break_stale = true;
    let err = write(&loc, 0..5, o, Steps::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("another writer holds the lock") && err.contains("elsewhere"),
        "{err}"
    );
}

/// Append rows `rows` to the table at `location`, stopping before write `fail_at` if given.
async fn append(location: &str, rows: std::ops::Range<i64>, steps: Steps) -> crate::Result<u64> {
    let store = ZarrStore::open(location)?;
    let model = TableModel::open(location, TableOptions::default()).await?;
    let schema = model.schema();
    let mut appender = TableAppender::try_new_counted(
        store,
        schema.clone(),
        Default::default(),
        LockPolicy::default(),
        steps,
    )
    .await?;
    let b = batch(rows.clone());
    let dim: ArrayRef = Arc::new(Int64Array::from_iter_values(rows));
    let mut columns = vec![dim];
    columns.extend(b.columns().iter().cloned());
    appender
        .write(&RecordBatch::try_new(schema, columns)?)
        .await?;
    appender.finish().await
}

/// An append stopped before each of its writes: zarrow (which reads the consolidated
/// metadata) sees the old rows or all of them; without the consolidated metadata, a group
/// whose arrays disagree in length is refused, naming them.
#[tokio::test]
async fn an_append_stopped_anywhere_leaves_the_old_rows_or_all_of_them() {
    let dir = tempfile::tempdir().unwrap();
    for zarr_format in [2, 3] {
        let mut n = 0;
        let mut refused = 0;
        loop {
            let loc = dir
                .path()
                .join(format!("v{zarr_format}-{n}.zarr"))
                .to_string_lossy()
                .into_owned();
            write(&loc, 0..7, options(zarr_format, false), Steps::default())
                .await
                .unwrap();
            let steps = Steps::fail_at(n);
            let result = append(&loc, 7..12, steps.clone()).await;
            let seen = read(&loc).await;
            assert!(
                seen == rows(0..7) || seen == rows(0..12),
                "{loc}: stopped before write {n}: {seen:?}"
            );
            // Without the consolidated metadata: the same rows, or an error naming arrays.
            unconsolidate(&loc, zarr_format);
            match TableModel::open(&loc, TableOptions::default()).await {
                Ok(t) => assert!([7, 12].contains(&t.num_rows()), "{loc}"),
                Err(e) => {
                    refused += 1;
                    let e = e.to_string();
                    assert!(
                        e.contains("disagree in length") && e.contains("has length 7"),
                        "{e}"
                    );
                }
            }
            if result.is_ok() {
                assert_eq!(seen, rows(0..12));
                // Stops between the arrays' documents: the group the reader refused (v2: two
                // per array after the first, its `.zattrs`, marked as appended, then `.zarray`).
                let between = if zarr_format == 2 { 4 } else { 2 };
                assert_eq!(refused, between, "v{zarr_format}");
                break;
            }
            assert!(steps.crashed());
            n += 1;
            assert!(n < 100);
        }
    }
}

/// Drop the consolidated metadata of the table at `loc` (a reader that skips it).
fn unconsolidate(loc: &str, zarr_format: u8) {
    let root = std::path::Path::new(loc);
    if zarr_format == 2 {
        let _ = std::fs::remove_file(root.join(".zmetadata"));
    } else {
        let path = root.join("zarr.json");
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        doc.as_object_mut().unwrap().remove("consolidated_metadata");
        std::fs::write(&path, doc.to_string()).unwrap();
    }
}

#[tokio::test]
async fn appending_to_one_array_of_a_group_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("two.zarr").to_string_lossy().into_owned();
    write(&loc, 0..5, options(3, false), Steps::default())
        .await
        .unwrap();
    let column = format!("{loc}/a");
    let model = TableModel::open(&column, TableOptions::default())
        .await
        .unwrap();
    let err = TableAppender::try_new(
        ZarrStore::open(&column).unwrap(),
        model.schema(),
        Default::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Write { .. }));
    let err = err.to_string();
    assert!(
        err.contains("cannot append") && err.contains("member of the zarr group"),
        "{err}"
    );
    assert_eq!(read(&loc).await, rows(0..5));
}

/// The root document is replaced only if it is the version read at the start (object stores
/// with conditional writes: `memory://`).
#[tokio::test]
async fn an_append_fails_when_the_table_changed_under_it() {
    let loc = "memory:///safety/conditional/t.zarr";
    write(loc, 0..5, options(3, false), Steps::default())
        .await
        .unwrap();
    let store = ZarrStore::open(loc).unwrap();
    let model = TableModel::open(loc, TableOptions::default())
        .await
        .unwrap();
    let schema = model.schema();
    let mut appender = TableAppender::try_new(store.clone(), schema.clone(), Default::default())
        .await
        .unwrap();
    let b = batch(5..8);
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(5..8))];
    columns.extend(b.columns().iter().cloned());
    appender
        .write(&RecordBatch::try_new(schema, columns).unwrap())
        .await
        .unwrap();
    // Someone rewrites the root document behind the lock's back.
    let doc = store.get_opt("zarr.json").await.unwrap().unwrap();
    store.put("zarr.json", doc).await.unwrap();
    let err = appender.finish().await.unwrap_err().to_string();
    assert!(err.contains("changed while rows were appended"), "{err}");
    assert_eq!(read(loc).await, rows(0..5));
}

/// Every file below `root`, with its bytes (links and directories named, not followed).
fn snapshot(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry
                .path()
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
                out.insert(format!("{name}/"), Vec::new());
            } else {
                out.insert(name, std::fs::read(entry.path()).unwrap_or_default());
            }
        }
    }
    out
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A write that fails at any of its writes (as a full disk fails it) leaves the old table
/// (or none) and nothing beside it; once the new table is published it succeeds, a leftover
/// old table only a warning.
#[tokio::test]
async fn a_write_that_fails_anywhere_leaves_the_old_table_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    for overwrite in [false, true] {
        for n in 0.. {
            let base = dir.path().join(format!("{overwrite}-{n}"));
            std::fs::create_dir(&base).unwrap();
            let loc = base.join("t.zarr").to_string_lossy().into_owned();
            if overwrite {
                write(&loc, 0..7, options(3, false), Steps::default())
                    .await
                    .unwrap();
            }
            let steps = Steps::error_at(n);
            let result = write(&loc, 100..111, options(3, overwrite), steps.clone()).await;
            let seen = read(&loc).await;
            let before = if overwrite { rows(0..7) } else { None };
            match result {
                Err(e) => {
                    assert_eq!(seen, before, "{loc}: failed at write {n} ({e})");
                    let left = if overwrite { vec!["t.zarr"] } else { vec![] };
                    assert_eq!(names(&base), left, "{loc}: failed at write {n} ({e})");
                }
                Ok(_) => {
                    assert_eq!(seen, rows(100..111), "{loc}");
                    if !steps.reached() {
                        break;
                    }
                }
            }
            assert!(n < 500);
        }
    }
}

/// An append that fails at any of its writes leaves every file of the table as it was, byte
/// for byte, and nothing beside it (chunks written are deleted, files replaced restored).
#[tokio::test]
async fn an_append_that_fails_anywhere_leaves_the_table_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    for zarr_format in [2, 3] {
        for n in 0.. {
            let base = dir.path().join(format!("v{zarr_format}-{n}"));
            std::fs::create_dir(&base).unwrap();
            let loc = base.join("t.zarr").to_string_lossy().into_owned();
            write(&loc, 0..7, options(zarr_format, false), Steps::default())
                .await
                .unwrap();
            let before = snapshot(std::path::Path::new(&loc));
            let steps = Steps::error_at(n);
            let result = append(&loc, 7..12, steps.clone()).await;
            match result {
                Err(e) => {
                    let after = snapshot(std::path::Path::new(&loc));
                    assert_eq!(after, before, "{loc}: failed at write {n} ({e})");
                    assert_eq!(names(&base), ["t.zarr"], "{loc}: failed at {n} ({e})");
                }
                Ok(_) => {
                    assert_eq!(read(&loc).await, rows(0..12), "{loc}");
                    assert_eq!(names(&base), ["t.zarr"], "{loc}");
                    if !steps.reached() {
                        break;
                    }
                }
            }
            assert!(n < 200);
        }
    }
}

/// A read racing an overwrite: chunks read after the new table was published are refused,
/// never mixed with the old table's.
#[tokio::test]
async fn a_read_across_an_overwrite_reads_one_table_or_fails() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr").to_string_lossy().into_owned();
    write(&loc, 0..30, options(3, false), Steps::default())
        .await
        .unwrap();
    let model = TableModel::open(&loc, TableOptions::default())
        .await
        .unwrap();
    let store = ZarrStore::open(&format!("{loc}/a")).unwrap();
    let node = crate::Node::open_store(store, "a").await.unwrap();
    let crate::Node::Array(array) = node else {
        panic!("an array")
    };
    assert!(array.fetch_chunk(&[0]).await.unwrap().is_some());
    assert!(!model.replaced());
    write(&loc, 100..130, options(3, true), Steps::default())
        .await
        .unwrap();
    let err = array.fetch_chunk(&[1]).await.unwrap_err();
    assert!(matches!(err, Error::Replaced { .. }), "{err}");
    assert!(
        err.to_string().contains("replaced by another writer"),
        "{err}"
    );
    assert!(model.replaced());
    // A stream begun on the old table: old rows only, then the error.
    write(&loc, 0..3000, options(3, true), Steps::default())
        .await
        .unwrap();
    let mut stream = Box::pin(
        ZarrRecordBatchStreamBuilder::try_new(&loc)
            .await
            .unwrap()
            .with_batch_size(3)
            .build()
            .unwrap(),
    );
    let first = stream.try_next().await.unwrap().unwrap();
    assert_eq!(first.num_rows(), 3);
    write(&loc, 5000..8000, options(3, true), Steps::default())
        .await
        .unwrap();
    let mut seen = 3;
    let outcome = loop {
        match stream.try_next().await {
            Ok(Some(b)) => {
                let a = b.column_by_name("a").unwrap().as_primitive::<Int64Type>();
                assert!(a.values().iter().all(|v| *v < 3000), "a new row");
                seen += b.num_rows();
            }
            Ok(None) => break Ok(seen),
            Err(e) => break Err(e),
        }
    };
    match outcome {
        Ok(n) => assert_eq!(n, 3000),
        Err(e) => assert!(e.to_string().contains("replaced by another writer"), "{e}"),
    }
}

#[tokio::test]
async fn a_mount_point_or_a_dangling_link_is_refused_before_anything_is_written() {
    if std::path::Path::new("/proc/self").exists() {
        let err = write("/proc", 0..3, options(3, false), Steps::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("mount point"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("t.zarr");
    std::os::unix::fs::symlink(dir.path().join("missing.zarr"), &link).unwrap();
    for overwrite in [false, true] {
        let err = write(
            &link.to_string_lossy(),
            0..3,
            options(3, overwrite),
            Steps::default(),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("dangling link"), "{err}");
        assert_eq!(names(dir.path()), ["t.zarr"]);
    }
}

/// Before a table is published, every file and directory of it is synced (fsync), and so is
/// what an append writes before its metadata.
#[tokio::test]
async fn what_a_write_publishes_is_synced_first() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr");
    let loc_str = loc.to_string_lossy().into_owned();
    write(&loc_str, 0..7, options(3, false), Steps::default())
        .await
        .unwrap();
    let synced = super::fs::synced_below(dir.path());
    for (name, _) in snapshot(&loc) {
        let name = name.trim_end_matches('/');
        assert!(
            synced
                .iter()
                .any(|s| s.ends_with(&format!("/{name}")) && s.contains(".t.zarr.zarrow-staging-")),
            "{name} was not synced: {synced:?}"
        );
    }
    append(&loc_str, 7..12, Steps::default()).await.unwrap();
    let synced = super::fs::synced_below(&loc);
    for chunk in ["a/c/2", "a/c/3", "s/c/3"] {
        let path = loc.join(chunk).to_string_lossy().into_owned();
        assert!(synced.contains(&path), "{path}: {synced:?}");
    }
}
