//! Writes into Icechunk repositories (`commit.rs`): a table written or appended in one commit,
//! older snapshots keeping their table, a writer stopped before each of its writes, two
//! writers committing to one branch.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};

use super::append::TableAppender;
use super::safety_tests::{batch, read, schema};
use super::{LockPolicy, Steps, TableWriteOptions, TableWriter, Written};
use crate::{Error, TableModel, TableOptions, ZarrStore};

fn options(create_repository: bool, overwrite: bool) -> TableWriteOptions {
    TableWriteOptions {
        // 2: a provisional length of 2^53 rows was 2^52 chunks, more than Icechunk counts
        chunk_rows: 2,
        create_repository,
        overwrite,
        ..Default::default()
    }
}

/// A new directory and the location of a repository in it (not yet there).
fn repository() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = format!("icechunk+file://{}/r.icechunk", dir.path().display());
    (dir, root)
}

fn rows(r: Range<i64>) -> Option<Vec<i64>> {
    Some(r.collect())
}

fn joined(parts: &[Range<i64>]) -> Option<Vec<i64>> {
    Some(parts.iter().flat_map(|r| r.clone()).collect())
}

async fn write(
    location: &str,
    rows: Range<i64>,
    options: TableWriteOptions,
    steps: Steps,
) -> crate::Result<Written> {
    let store = ZarrStore::open(location)?;
    let mut writer = TableWriter::try_new_counted(store, schema(), options, steps).await?;
    let mid = rows.start + (rows.end - rows.start) / 2;
    writer.write(&batch(rows.start..mid)).await?;
    writer.write(&batch(mid..rows.end)).await?;
    writer.finish_written().await
}

/// An appender of `rows` to the table at `location`, its rows given (not yet finished).
async fn appender(location: &str, rows: Range<i64>, steps: Steps) -> crate::Result<TableAppender> {
    let table = TableModel::open(location, TableOptions::default())
        .await?
        .schema();
    let mut appender = TableAppender::try_new_counted(
        ZarrStore::open(location)?,
        table.clone(),
        Default::default(),
        LockPolicy::default(),
        steps,
    )
    .await?;
    // The table's schema with its index column (ignored when appending) NULL.
    let values = batch(rows.clone());
    let n = values.num_rows();
    let fields: Vec<Field> = (table.fields().iter())
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let columns: Vec<ArrayRef> = (table.fields().iter())
        .map(|f| match values.column_by_name(f.name()) {
            Some(c) => c.clone(),
            None => arrow_array::new_null_array(f.data_type(), n),
        })
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    appender.write(&batch).await?;
    Ok(appender)
}

async fn append(location: &str, rows: Range<i64>, steps: Steps) -> crate::Result<Written> {
    appender(location, rows, steps)
        .await?
        .finish_written()
        .await
}

#[tokio::test]
async fn a_table_is_written_in_one_commit_and_older_snapshots_keep_theirs() {
    let (dir, root) = repository();
    let main = format!("{root}@main/t");
    let none = Steps::default;
    // No repository: an error, unless it is asked for.
    let e = write(&main, 0..5, options(false, false), none())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("create_repository"), "{e}");
    assert!(!dir.path().join("r.icechunk").join("refs").exists());
    let first = write(&main, 0..5, options(true, false), none())
        .await
        .unwrap();
    let s1 = first.snapshot.unwrap();
    assert_eq!((first.rows, read(&main).await), (5, rows(0..5)));
    // Taken: refused without overwrite, replaced in one commit with it.
    let e = write(&main, 10..12, options(false, false), none())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("overwrite"), "{e}");
    let second = write(&main, 10..17, options(false, true), none())
        .await
        .unwrap();
    let s2 = second.snapshot.unwrap();
    assert_ne!(s1, s2);
    assert_eq!(read(&main).await, rows(10..17));
    assert_eq!(read(&format!("{root}@{s1}/t")).await, rows(0..5));
    assert_eq!(read(&format!("{root}@{s2}/t")).await, rows(10..17));
    // Refused before anything is written: zarr v2, a tag or a missing branch.
    let v2 = TableWriteOptions {
        zarr_format: 2,
        ..options(false, true)
    };
    let e = write(&main, 0..1, v2, none()).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidOption { key, .. } if key == "zarr_format"),
        "{e}"
    );
    let e = write(&format!("{root}@dev/t"), 0..1, options(false, true), none()).await;
    assert!(e.unwrap_err().to_string().contains("no branch 'dev'"));
    assert_eq!(read(&main).await, rows(10..17));
    // Commit options on a plain store: refused.
    let plain = dir.path().join("plain.zarr").display().to_string();
    let e = write(&plain, 0..1, options(true, false), none())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidOption { key, .. } if key == "create_repository"),
        "{e}"
    );
}

#[tokio::test]
async fn rows_are_appended_in_one_commit() {
    let (_dir, root) = repository();
    let main = format!("{root}@main/t");
    let s1 = write(&main, 0..5, options(true, false), Steps::default())
        .await
        .unwrap()
        .snapshot
        .unwrap();
    let appended = append(&main, 5..12, Steps::default()).await.unwrap();
    assert_eq!(appended.rows, 7);
    let s2 = appended.snapshot.unwrap();
    assert_eq!(read(&main).await, rows(0..12));
    assert_eq!(read(&format!("{root}@{s1}/t")).await, rows(0..5));
    assert_eq!(read(&format!("{root}@{s2}/t")).await, rows(0..12));
}

/// Run `write` stopping before each of its writes in turn until it completes; after each stop
/// the branch holds `old` (or, stopped after its commit, `new`). The lock a stopped commit
/// left is deleted, as a stale one is broken.
async fn stop_at_each_step<F, Fut>(
    root: &str,
    main: &str,
    old: Option<Vec<i64>>,
    new: Option<Vec<i64>>,
    write: F,
) where
    F: Fn(Steps) -> Fut,
    Fut: std::future::Future<Output = crate::Result<Written>>,
{
    let lock = format!(
        "{}{}",
        root.trim_start_matches("icechunk+file://"),
        super::LOCK_SUFFIX
    );
    let mut stops_before_commit = 0;
    for n in 0.. {
        assert!(n < 60, "the write never completed");
        match write(Steps::fail_at(n)).await {
            Ok(_) => break,
            Err(e) => {
                let got = read(main).await;
                assert!(
                    got == old || got == new,
                    "stopped at write {n} ({e}): {got:?}"
                );
                let _ = std::fs::remove_file(&lock);
                if got == new {
                    // Stopped after its commit: the write is done.
                    break;
                }
                stops_before_commit += 1;
            }
        }
    }
    assert!(stops_before_commit > 3, "{stops_before_commit}");
    assert_eq!(read(main).await, new);
}

#[tokio::test]
async fn a_writer_stopped_before_its_commit_leaves_the_branch_as_it_was() {
    let (_dir, root) = repository();
    let main = format!("{root}@main/t");
    write(&main, 0..5, options(true, false), Steps::default())
        .await
        .unwrap();
    let replace = |steps| write(&main, 10..17, options(false, true), steps);
    stop_at_each_step(&root, &main, rows(0..5), rows(10..17), replace).await;
    let add = |steps| append(&main, 17..21, steps);
    stop_at_each_step(&root, &main, rows(10..17), rows(10..21), add).await;
}

#[tokio::test]
async fn of_two_appends_begun_on_one_snapshot_the_second_conflicts() {
    let (_dir, root) = repository();
    let main = format!("{root}@main/t");
    let s1 = write(&main, 0..5, options(true, false), Steps::default())
        .await
        .unwrap()
        .snapshot
        .unwrap();
    let first = appender(&main, 100..104, Steps::default()).await.unwrap();
    let second = appender(&main, 200..203, Steps::default()).await.unwrap();
    first.finish_written().await.unwrap();
    match second.finish_written().await.unwrap_err() {
        Error::CommitConflict { branch, base, .. } => {
            assert_eq!((branch, base), ("main".into(), s1))
        }
        e => panic!("expected a conflict, got {e}"),
    }
    assert_eq!(read(&main).await, joined(&[0..5, 100..104]));
    // Racing: both row sets once, or one conflict.
    let (a, b) = tokio::join!(
        append(&main, 300..302, Steps::default()),
        append(&main, 400..401, Steps::default())
    );
    let got = read(&main).await;
    match (a, b) {
        (Ok(_), Ok(_)) => assert_eq!(got, joined(&[0..5, 100..104, 300..302, 400..401])),
        (Ok(_), Err(Error::CommitConflict { .. })) => {
            assert_eq!(got, joined(&[0..5, 100..104, 300..302]))
        }
        (Err(Error::CommitConflict { .. }), Ok(_)) => {
            assert_eq!(got, joined(&[0..5, 100..104, 400..401]))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn commits_to_other_tables_of_a_branch_are_rebased_over() {
    let (_dir, root) = repository();
    let (x, y) = (format!("{root}@main/x"), format!("{root}@main/y"));
    write(&x, 0..5, options(true, false), Steps::default())
        .await
        .unwrap();
    // Both sessions begin at the same snapshot; the second commit is rebased over the first.
    let begin = |location: String| async move {
        let store = ZarrStore::open(&location)?;
        let mut w = TableWriter::try_new(store, schema(), options(false, false)).await?;
        w.write(&batch(0..4)).await?;
        Ok::<_, Error>(w)
    };
    let (a, b) = (
        begin(format!("{root}@main/a")).await.unwrap(),
        begin(y.clone()).await.unwrap(),
    );
    a.finish_written().await.unwrap();
    b.finish_written().await.unwrap();
    assert_eq!(read(&y).await, rows(0..4));
    assert_eq!(read(&format!("{root}@main/a")).await, rows(0..4));
    assert_eq!(read(&x).await, rows(0..5));
}

/// The AnnData layout goes into a repository as the xarray one does: one commit, read back as
/// an AnnData dataframe (its generated `_index` a column) with the rows written, and the
/// snapshot before it (the empty repository) without the table.
#[tokio::test]
async fn an_anndata_table_is_written_in_one_commit() {
    let (_dir, root) = repository();
    let obs = format!("{root}@main/obs");
    let anndata = TableWriteOptions {
        layout: super::Layout::AnnData,
        ..options(true, false)
    };
    let written = write(&obs, 0..5, anndata, Steps::default()).await.unwrap();
    let snapshot = written.snapshot.expect("a commit");
    assert_eq!(written.rows, 5);
    assert_eq!(read(&obs).await, rows(0..5));
    assert_eq!(read(&format!("{root}@{snapshot}/obs")).await, rows(0..5));
    let model = TableModel::open(&obs, TableOptions::default())
        .await
        .unwrap();
    let names: Vec<String> = (model.schema().fields().iter())
        .map(|f| f.name().clone())
        .collect();
    assert!(names.iter().any(|n| n == "_index"), "{names:?}");
    assert_eq!(model.snapshot_id(), Some(snapshot.as_str()));
}

#[tokio::test]
async fn overwriting_one_array_of_a_table_on_a_branch_is_refused() {
    let (_dir, root) = repository();
    let main = format!("{root}@main/t");
    write(&main, 0..5, options(true, false), Steps::default())
        .await
        .unwrap();
    let e = write(
        &format!("{main}/a"),
        0..3,
        options(false, true),
        Steps::default(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("member of the zarr group"), "{e}");
    // Nothing was committed: the table opens as it was.
    assert_eq!(read(&main).await, rows(0..5));
}
