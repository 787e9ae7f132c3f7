//! `INSERT INTO t SELECT …` on a zarr table appends rows along its dimension: v3, v2 and
//! sharded groups, with and without a partial last chunk, read back by zarrow (the same
//! registered table, and the location opened afresh) and by zarr-python; what cannot be
//! appended to is refused by name and leaves the table as it was.

use serde_json::{json, Value};

use crate::common;

use common::written::{count, ctx, run, text, SOURCE};

const MORE: &str = "SELECT * FROM (VALUES \
    (6, 'six', 6.5, false, 60), \
    (7, 'seven', NULL, true, CAST(NULL AS BIGINT)), \
    (8, 'eight', 8.5, true, 80)) AS t(id, name, score, flag, n)";

#[tokio::test]
async fn insert_into_appends_to_v3_v2_and_sharded_groups() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    let expected = text(
        &ctx,
        &format!("SELECT * FROM ({SOURCE} UNION ALL {MORE}) ORDER BY id"),
    )
    .await;
    for (name, options) in [
        // 5 rows in chunks of 2: the last chunk holds one row, rewritten with two new ones
        ("v3", "chunk_rows 2, compression 'zstd(1)'"),
        ("v2", "zarr_format 2, chunk_rows 3, compression gzip"),
        // the last shard (2 chunks of 1) holds one row
        ("sharded", "chunk_rows 1, shard_rows 2"),
        // no partial chunk: the new rows start a chunk
        ("aligned", "chunk_rows 5, string_encoding 'arrow_vlen'"),
    ] {
        let loc = dir.path().join(format!("{name}.zarr"));
        let loc = loc.to_str().unwrap();
        run(
            &ctx,
            &format!("COPY ({SOURCE}) TO '{loc}' STORED AS ZARR OPTIONS ({options})"),
        )
        .await
        .unwrap();
        run(
            &ctx,
            &format!("CREATE EXTERNAL TABLE t_{name} STORED AS ZARR LOCATION '{loc}'"),
        )
        .await
        .unwrap();
        let out = run(
            &ctx,
            &format!("INSERT INTO t_{name} (id, name, score, flag, n) {MORE}"),
        )
        .await
        .unwrap();
        assert_eq!(count(&out), 3, "{name}");
        // The registered table sees the new rows (scan and statistics).
        let rows = text(
            &ctx,
            &format!("SELECT count(*) AS c, max(dim_0) AS m, sum(id) AS s FROM t_{name}"),
        )
        .await;
        assert!(rows.contains("| 8 | 7 | 36 |"), "{name}: {rows}");
        // Opened afresh, with NULLs decoded: the same rows as the two queries.
        let fresh = ctx.clone();
        let fresh = {
            run(&fresh, "SET zarrow.decode_cf = true").await.unwrap();
            text(
                &fresh,
                &format!("SELECT id, name, score, flag, n FROM '{loc}' ORDER BY id"),
            )
            .await
        };
        run(&ctx, "SET zarrow.decode_cf = false").await.unwrap();
        assert_eq!(fresh, expected, "{name}");
        // (arrow_vlen is zarrow's own encoding: zarr-python does not read it)
        let python = (name != "aligned")
            .then(|| zarrow_testkit::python_reads(".venv-zarr3", "zarr", loc))
            .flatten();
        if let Some(got) = python {
            assert_eq!(got["id"], json!([1, 2, 3, 4, 5, 6, 7, 8]), "{name}");
            assert_eq!(
                got["name"],
                json!(["one", "two", "три 🦀", "", "five", "six", "seven", "eight"]),
                "{name}"
            );
            assert_eq!(
                got["score"],
                json!([1.5, null, 3.5, 4.5, 5.5, 6.5, null, 8.5]),
                "{name}"
            );
            assert_eq!(
                got["flag"],
                json!([true, false, true, false, true, false, true, true]),
                "{name}"
            );
            assert_eq!(
                got["n"],
                json!([null, 20, 30, 40, 50, 60, null, 80]),
                "{name}"
            );
        }
        // A second append continues where the first ended.
        run(
            &ctx,
            &format!("INSERT INTO t_{name} (id, name, score, flag, n) VALUES (9, 'nine', 9.5, false, 90)"),
        )
        .await
        .unwrap();
        run(&ctx, "SET zarrow.decode_cf = true").await.unwrap();
        let rows = text(
            &ctx,
            &format!("SELECT count(*) AS c, sum(n) AS s FROM '{loc}' WHERE id > 5"),
        )
        .await;
        run(&ctx, "SET zarrow.decode_cf = false").await.unwrap();
        assert!(rows.contains("| 4 | 230 |"), "{name}: {rows}");
    }
}

#[tokio::test]
async fn what_cannot_be_appended_to_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();

    // Only appending.
    let plain = path("plain.zarr");
    run(
        &ctx,
        &format!("COPY ({SOURCE}) TO '{plain}' STORED AS ZARR"),
    )
    .await
    .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE plain STORED AS ZARR LOCATION '{plain}'"),
    )
    .await
    .unwrap();
    let e = run(
        &ctx,
        &format!("INSERT OVERWRITE plain (id, name, score, flag, n) {SOURCE}"),
    )
    .await
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(e.contains("only INSERT INTO"), "{e}");

    // An AnnData dataframe: its nullable and categorical columns are encoded groups.
    let ann = path("ann.zarr");
    run(
        &ctx,
        &format!("COPY ({SOURCE}) TO '{ann}' STORED AS ZARR OPTIONS (layout anndata)"),
    )
    .await
    .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE ann STORED AS ZARR LOCATION '{ann}'"),
    )
    .await
    .unwrap();
    let e = run(
        &ctx,
        &format!("INSERT INTO ann (id, name, score, flag, n) {MORE}"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cannot append") && e.contains("encoded group"),
        "{e}"
    );

    // A 2-D array.
    let grid = path("grid.zarr");
    let store = zarrow::ZarrStore::open(&grid).unwrap();
    let values = datafusion::arrow::array::Int32Array::from((0..6).collect::<Vec<i32>>());
    zarrow::write_array(&store, "", &values, &[2, 3], &Default::default())
        .await
        .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE grid STORED AS ZARR LOCATION '{grid}'"),
    )
    .await
    .unwrap();
    let e = run(&ctx, "INSERT INTO grid SELECT 0 AS a, 0 AS b, 7 AS c")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot append") && e.contains("2 dimensions"),
        "{e}"
    );

    // NULLs into an integer column whose array declares no _FillValue: refused at the end,
    // nothing appended (the table reads as before).
    let ints = path("ints.zarr");
    run(
        &ctx,
        &format!("COPY (SELECT id, n FROM ({SOURCE}) WHERE n IS NOT NULL) TO '{ints}' STORED AS ZARR OPTIONS (chunk_rows 3)"),
    )
    .await
    .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE ints STORED AS ZARR LOCATION '{ints}'"),
    )
    .await
    .unwrap();
    let before = text(&ctx, &format!("SELECT * FROM '{ints}' ORDER BY dim_0")).await;
    let e = run(
        &ctx,
        "INSERT INTO ints (id, n) VALUES (6, 60), (7, CAST(NULL AS BIGINT))",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("column 'n'") && e.contains("_FillValue"), "{e}");
    assert_eq!(
        text(&ctx, &format!("SELECT * FROM '{ints}' ORDER BY dim_0")).await,
        before
    );

    // The table changed under the registered one: the columns are named.
    run(
        &ctx,
        &format!("COPY (SELECT 1.5 AS other) TO '{plain}' STORED AS ZARR OPTIONS (overwrite true)"),
    )
    .await
    .unwrap();
    let e = run(
        &ctx,
        &format!("INSERT INTO plain (id, name, score, flag, n) {MORE}"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cannot append") && e.contains("columns changed"),
        "{e}"
    );
}

/// Armed by the test below: PUTs of the `score` array's metadata fail.
static FAIL_SCORE_METADATA: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// An `INSERT` that fails while writing the metadata (after every chunk, the rewritten partial
/// one included, and some arrays' metadata) leaves the table reading as before: the root's
/// consolidated metadata, which readers use, still has the old shape.
#[tokio::test]
async fn an_interrupted_insert_leaves_the_old_table_readable() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use object_store::{memory::InMemory, path::Path};
    let inner = Arc::new(InMemory::new());
    let mut store = common::CountingStore::new(inner.clone());
    store.fail_put = Some(|p: &Path| {
        FAIL_SCORE_METADATA.load(Ordering::SeqCst) && p.as_ref() == "t.zarr/score/zarr.json"
    });
    let ctx = ctx();
    ctx.runtime_env().register_object_store(
        &url::Url::parse("failing://bucket").unwrap(),
        Arc::new(store),
    );
    let loc = "failing://bucket/t.zarr";
    run(
        &ctx,
        &format!("COPY ({SOURCE}) TO '{loc}' STORED AS ZARR OPTIONS (chunk_rows 2)"),
    )
    .await
    .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}'"),
    )
    .await
    .unwrap();
    run(&ctx, "SET zarrow.decode_cf = true").await.unwrap();
    let query = format!("SELECT id, name, score, flag, n FROM '{loc}' ORDER BY id");
    let before = text(&ctx, &query).await;
    FAIL_SCORE_METADATA.store(true, Ordering::SeqCst);
    let e = run(
        &ctx,
        &format!("INSERT INTO t (id, name, score, flag, n) {MORE}"),
    )
    .await
    .unwrap_err()
    .to_string();
    FAIL_SCORE_METADATA.store(false, Ordering::SeqCst);
    assert!(
        e.contains("score/zarr.json") && e.contains("injected"),
        "{e}"
    );
    // The failure came late: the id array's own metadata already says 8 rows.
    let id_meta =
        object_store::ObjectStoreExt::get(inner.as_ref(), &Path::from("t.zarr/id/zarr.json"))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
    let id_meta: Value = serde_json::from_slice(&id_meta).unwrap();
    assert_eq!(id_meta["shape"], json!([8]));
    // Read afresh: the old five rows, the rewritten partial chunk's row included.
    assert_eq!(text(&ctx, &query).await, before);
    assert!(before.contains("| 5  | five"), "{before}");
    // Appending again works (the stray chunks are overwritten).
    run(
        &ctx,
        &format!("INSERT INTO t (id, name, score, flag, n) {MORE}"),
    )
    .await
    .unwrap();
    let rows = text(
        &ctx,
        &format!("SELECT count(*) AS c, sum(id) AS s FROM '{loc}'"),
    )
    .await;
    assert!(rows.contains("| 8 | 36 |"), "{rows}");
}

#[tokio::test]
async fn a_value_equal_to_the_null_marker_is_refused_as_copy_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    let loc = dir.path().join("marked.zarr");
    let loc = loc.to_str().unwrap();
    // `n` has NULLs, so its arrays declare i64::MIN as their NULL marker.
    run(
        &ctx,
        &format!("COPY ({SOURCE}) TO '{loc}' STORED AS ZARR OPTIONS (chunk_rows 2)"),
    )
    .await
    .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE marked STORED AS ZARR LOCATION '{loc}'"),
    )
    .await
    .unwrap();
    let before = text(&ctx, "SELECT * FROM marked ORDER BY id").await;
    let e = run(
        &ctx,
        "INSERT INTO marked (id, name, score, flag, n) \
         VALUES (6, 'six', 6.5, true, -9223372036854775808)",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("marks its NULLs") && e.contains("'n'"), "{e}");
    assert_eq!(text(&ctx, "SELECT * FROM marked ORDER BY id").await, before);
    // Other values are appended.
    run(
        &ctx,
        "INSERT INTO marked (id, name, score, flag, n) VALUES (6, 'six', 6.5, true, 0)",
    )
    .await
    .unwrap();
    assert!(text(&ctx, "SELECT n FROM marked WHERE id = 6")
        .await
        .contains("| 0 |"));
}

#[tokio::test]
async fn a_table_whose_chunks_exceed_the_memory_limit_is_refused_before_writing() {
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::prelude::SessionConfig;
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("big_chunks.zarr");
    let loc = loc.to_str().unwrap();
    // One BIGINT column in chunks of 2^22 rows: 32 MB a chunk.
    run(
        &ctx(),
        &format!("COPY (SELECT 1 AS x) TO '{loc}' STORED AS ZARR OPTIONS (chunk_rows 4194304)"),
    )
    .await
    .unwrap();
    let files = |dir: &std::path::Path| walk(dir);
    let before = files(dir.path());
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(16 << 20, 1.0)
        .build_arc()
        .unwrap();
    let limited =
        zarrow_datafusion::zarr_session_context_with_runtime(SessionConfig::new(), runtime);
    run(
        &limited,
        &format!("CREATE EXTERNAL TABLE big STORED AS ZARR LOCATION '{loc}'"),
    )
    .await
    .unwrap();
    let e = run(&limited, "INSERT INTO big (x) VALUES (2)")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("memory limit"), "{e}");
    assert_eq!(files(dir.path()), before);
}

/// Every file below `dir`, with its size.
fn walk(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            out.extend(walk(&entry.path()));
        } else {
            out.push((entry.path(), meta.len()));
        }
    }
    out.sort();
    out
}

/// Appends `n` rows to the arrays `a` (int64: their positions) and `s` (strings `p<pos>`) of
/// the group at `store` with zarr-python's `Array.append`, which updates each array's
/// `zarr.json` and not the group's consolidated metadata.
const ZARR_PYTHON_APPEND: &str = r#"
import sys, warnings
import numpy as np, zarr
warnings.simplefilter("ignore")
store, n = sys.argv[1], int(sys.argv[2])
g = zarr.open_group(store, mode="r+", use_consolidated=False)
start = g["a"].shape[0]
g["a"].append(np.arange(start, start + n, dtype="int64"))
g["s"].append(np.array([f"p{i}" for i in range(start, start + n)], dtype=object))
if len(sys.argv) > 3:
    zarr.consolidate_metadata(store)
"#;

/// zarr-python appended 500 rows to every array of a table zarrow wrote,
/// leaving the consolidated metadata at 1,000 rows. An `INSERT` is refused naming the array
/// and both shapes, and writes nothing (it used to append after row 1,000, over zarr-python's
/// rows, and publish 1,000 + its own); once the group is consolidated, the `INSERT` appends
/// after all 1,500 and zarr-python reads every row.
#[tokio::test]
async fn an_insert_after_zarr_python_appended_loses_no_rows() {
    let Some(python) = zarrow_testkit::venv_python(".venv-zarr3") else {
        return;
    };
    let append = |store: &str, n: u32, consolidate: bool| {
        let mut cmd = std::process::Command::new(&python);
        cmd.args(["-c", ZARR_PYTHON_APPEND, store, &n.to_string()]);
        if consolidate {
            cmd.arg("consolidate");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "zarr-python append: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    for format in [3, 2] {
        let loc = dir.path().join(format!("appended{format}.zarr"));
        let loc = loc.to_str().unwrap();
        run(
            &ctx,
            &format!(
                "COPY (SELECT CAST(value AS BIGINT) AS a, concat('v', CAST(value AS VARCHAR)) \
                 AS s FROM generate_series(0, 999)) TO '{loc}' STORED AS ZARR \
                 OPTIONS (chunk_rows 300, zarr_format {format})"
            ),
        )
        .await
        .unwrap();
        append(loc, 500, false);
        let table = format!("appended{format}");
        run(
            &ctx,
            &format!("CREATE EXTERNAL TABLE {table} STORED AS ZARR LOCATION '{loc}'"),
        )
        .await
        .unwrap();
        let insert = format!("INSERT INTO {table} (a, s) VALUES (-1, 'zarrow'), (-2, 'zarrow')");
        let e = run(&ctx, &insert).await.unwrap_err().to_string();
        assert!(
            e.contains("cannot append")
                && e.contains("column 'a'")
                && e.contains("[1000]")
                && e.contains("[1500]")
                && e.contains("consolidate"),
            "v{format}: {e}"
        );
        // Nothing was written: the arrays' own metadata still says 1,500 rows.
        let own = if format == 3 {
            "a/zarr.json"
        } else {
            "a/.zarray"
        };
        let own: Value =
            serde_json::from_slice(&std::fs::read(format!("{loc}/{own}")).unwrap()).unwrap();
        assert_eq!(own["shape"], json!([1500]), "v{format}");
        // Consolidated, the table has 1,500 rows and the INSERT goes after them.
        append(loc, 0, true);
        let table = format!("consolidated{format}");
        run(
            &ctx,
            &format!("CREATE EXTERNAL TABLE {table} STORED AS ZARR LOCATION '{loc}'"),
        )
        .await
        .unwrap();
        let insert = format!("INSERT INTO {table} (a, s) VALUES (-1, 'zarrow'), (-2, 'zarrow')");
        assert_eq!(count(&run(&ctx, &insert).await.unwrap()), 2);
        let rows = text(
            &ctx,
            &format!("SELECT count(*) AS c, sum(a) AS t FROM '{loc}' WHERE s LIKE 'p%'"),
        )
        .await;
        assert!(rows.contains("| 500 | 624750 |"), "v{format}: {rows}");
        let got = zarrow_testkit::python_reads(".venv-zarr3", "zarr", loc).unwrap();
        let s = got["s"].as_array().unwrap();
        assert_eq!(s.len(), 1502, "v{format}");
        assert_eq!(
            (&s[999], &s[1000], &s[1501]),
            (&json!("v999"), &json!("p1000"), &json!("zarrow"))
        );
    }
}

/// A timestamp equal to NaT (i64::MIN) is refused by `INSERT` at its batch,
/// naming the column, as `COPY` refuses it; the table reads as before.
#[tokio::test]
async fn a_nat_value_is_refused_by_insert() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    let loc = dir.path().join("times.zarr");
    let loc = loc.to_str().unwrap();
    run(
        &ctx,
        &format!(
            "COPY (SELECT 1 AS id, arrow_cast(0, 'Timestamp(Nanosecond, None)') AS t, \
             arrow_cast(5, 'Duration(Second)') AS d) TO '{loc}' STORED AS ZARR"
        ),
    )
    .await
    .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE times STORED AS ZARR LOCATION '{loc}'"),
    )
    .await
    .unwrap();
    let before = text(&ctx, "SELECT * FROM times").await;
    for (column, values) in [
        (
            "t",
            "(2, arrow_cast(-9223372036854775808, 'Timestamp(Nanosecond, None)'), arrow_cast(1, 'Duration(Second)'))",
        ),
        (
            "d",
            "(2, arrow_cast(1, 'Timestamp(Nanosecond, None)'), arrow_cast(-9223372036854775808, 'Duration(Second)'))",
        ),
    ] {
        let e = run(&ctx, &format!("INSERT INTO times (id, t, d) VALUES {values}"))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("column '{column}'")) && e.contains("NaT"), "{e}");
        assert_eq!(text(&ctx, "SELECT * FROM times").await, before);
    }
    // NULLs are appended (as NaT) and read back as NULL.
    run(
        &ctx,
        "INSERT INTO times (id, t, d) VALUES (3, CAST(NULL AS TIMESTAMP), NULL)",
    )
    .await
    .unwrap();
    let rows = text(
        &ctx,
        "SELECT count(t) AS t, count(d) AS d, count(*) AS n FROM times",
    )
    .await;
    assert!(rows.contains("| 1 | 1 | 2 |"), "{rows}");
}

/// `INSERT INTO t SELECT a, s` into a table COPY wrote with `(a, s)` (read
/// as `dim_0, a, s`): planned by `plan_statement` (what the CLI runs), the row position is
/// filled in; a query of another width is an error that names the columns and says to name
/// them. (DataFusion's own planner, `SessionContext::sql`, counts `dim_0` too.)
#[tokio::test]
async fn an_insert_without_a_column_list_may_leave_out_the_row_position() {
    use datafusion::sql::parser::DFParser;

    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    let loc = dir.path().join("two.zarr");
    let loc = loc.to_str().unwrap();
    run(
        &ctx,
        &format!("COPY (SELECT 1 AS a, 'x' AS s) TO '{loc}' STORED AS ZARR"),
    )
    .await
    .unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE \"Two\" STORED AS ZARR LOCATION '{loc}'"),
    )
    .await
    .unwrap();
    let plan = |sql: &str| {
        let ctx = ctx.clone();
        let statement = DFParser::parse_sql(sql).unwrap().pop_front().unwrap();
        async move {
            let plan = zarrow_datafusion::plan_statement(&ctx.state(), statement).await?;
            ctx.execute_logical_plan(plan).await?.collect().await
        }
    };
    let out = plan("INSERT INTO \"Two\" SELECT 2, 'y'").await.unwrap();
    assert_eq!(count(&out), 1);
    let out = plan("INSERT INTO \"Two\" SELECT * FROM (VALUES (3, 'z'), (4, 'w'))")
        .await
        .unwrap();
    assert_eq!(count(&out), 2);
    // Every column, the row position included (ignored), as before.
    plan("INSERT INTO \"Two\" SELECT 99, 5, 'v'").await.unwrap();
    let rows = text(&ctx, "SELECT * FROM \"Two\" ORDER BY dim_0").await;
    let rows: Vec<&str> = rows.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(
        rows,
        [
            "| dim_0 | a | s |",
            "| 0     | 1 | x |",
            "| 1     | 2 | y |",
            "| 2     | 3 | z |",
            "| 3     | 4 | w |",
            "| 4     | 5 | v |",
        ]
    );
    let e = plan("INSERT INTO \"Two\" SELECT 6")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dim_0, a, s") && e.contains("INSERT INTO \"Two\" (a, s)"),
        "{e}"
    );
}
