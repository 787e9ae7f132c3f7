//! `COPY (SELECT …) TO 'x.zarr' STORED AS ZARR OPTIONS (…)`: the result reads back as the same
//! rows (local paths, `memory://`, zarr v2 and v3); bad options, an existing location and a
//! failing store are errors that write no metadata.

use std::sync::Arc;

use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use zarrow_datafusion::zarr_session_context_with_runtime;

use crate::common;

use common::written::{count, ctx, run, text, SOURCE};

/// The source rows as the zarr table gives them back (decode_cf: integer NULLs come back).
async fn read_back(ctx: &SessionContext, location: &str) -> String {
    run(ctx, "SET zarrow.decode_cf = true").await.unwrap();
    text(
        ctx,
        &format!("SELECT id, name, score, flag, n FROM '{location}' ORDER BY id"),
    )
    .await
}

async fn expected(ctx: &SessionContext) -> String {
    text(ctx, &format!("SELECT * FROM ({SOURCE}) ORDER BY id")).await
}

#[tokio::test]
async fn copy_to_local_v3_and_v2_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    for (name, options) in [
        ("v3.zarr", "chunk_rows 2, compression 'zstd(1)'"),
        (
            "v3s.zarr",
            "chunk_rows 1, shard_rows 2, string_encoding 'arrow_vlen'",
        ),
        ("v2.zarr", "zarr_format 2, chunk_rows 3, compression gzip"),
    ] {
        let loc = dir.path().join(name);
        let loc = loc.to_str().unwrap();
        let sql = format!("COPY ({SOURCE}) TO '{loc}' STORED AS ZARR OPTIONS ({options})");
        let out = run(&ctx, &sql).await.unwrap();
        assert_eq!(count(&out), 5, "{name}");
        assert_eq!(read_back(&ctx, loc).await, expected(&ctx).await, "{name}");
    }
    // Without OPTIONS, and with the dimension named.
    let loc = dir.path().join("plain.zarr");
    let loc = loc.to_str().unwrap();
    run(&ctx, &format!("COPY ({SOURCE}) TO '{loc}' STORED AS ZARR"))
        .await
        .unwrap();
    assert_eq!(read_back(&ctx, loc).await, expected(&ctx).await);
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("plain.zarr/name/zarr.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["dimension_names"], serde_json::json!(["dim_0"]));
    assert_eq!(meta["codecs"][0]["name"], "vlen-utf8");
}

/// `SELECT *` of a written table gives the columns in the order the query wrote them (not
/// by name), after the dimension's position column; on v3 and v2.
#[tokio::test]
async fn select_star_keeps_the_written_column_order() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    for (name, options) in [("v3.zarr", "chunk_rows 2"), ("v2.zarr", "zarr_format 2")] {
        let loc = dir.path().join(name);
        let loc = loc.to_str().unwrap();
        let sql = format!(
            "COPY (SELECT name AS zeta, id AS alpha, score AS mid FROM ({SOURCE})) \
             TO '{loc}' STORED AS ZARR OPTIONS ({options})"
        );
        run(&ctx, &sql).await.unwrap();
        let batches = run(&ctx, &format!("SELECT * FROM '{loc}'")).await.unwrap();
        let names: Vec<String> = batches[0]
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["dim_0", "zeta", "alpha", "mid"], "{name}");
    }
}

/// `layout 'anndata'`: the result reads back through SQL (the generated `_index`, the
/// position, then the columns in order, NULLs from the masks) and through
/// `anndata.io.read_elem` as the DataFrame of the same rows; v3 and v2.
#[tokio::test]
async fn copy_to_anndata_layout() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    for (name, options) in [
        ("a3.zarr", "layout anndata, chunk_rows 2"),
        ("a2.zarr", "layout 'anndata', zarr_format 2, chunk_rows 3"),
    ] {
        let loc = dir.path().join(name);
        let loc = loc.to_str().unwrap();
        let sql = format!(
            "COPY (SELECT id, name, arrow_cast(name, 'Dictionary(Int32, Utf8)') AS cat, score, \
             flag, n FROM ({SOURCE}) ORDER BY id) TO '{loc}' STORED AS ZARR OPTIONS ({options})"
        );
        assert_eq!(count(&run(&ctx, &sql).await.unwrap()), 5, "{name}");
        let batches = run(&ctx, &format!("SELECT * FROM '{loc}' ORDER BY dim_0"))
            .await
            .unwrap();
        let names: Vec<String> = batches[0]
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            ["_index", "dim_0", "id", "name", "cat", "score", "flag", "n"],
            "{name}"
        );
        assert!(matches!(
            batches[0].schema().field(4).data_type(),
            datafusion::arrow::datatypes::DataType::Dictionary(..)
        ));
        // A float NULL is NaN in a dataframe (as pandas has it): no `_FillValue` says more.
        assert_eq!(
            text(
                &ctx,
                &format!(
                    "SELECT id, name, CASE WHEN isnan(score) THEN NULL ELSE score END AS score, \
                     flag, n FROM '{loc}' ORDER BY id"
                )
            )
            .await,
            expected(&ctx).await,
            "{name}"
        );
        let Some(got) = zarrow_testkit::python_reads(".venv-zarr3", "anndata", loc) else {
            continue;
        };
        let want = serde_json::json!({
            "__index__": ["0", "1", "2", "3", "4"],
            "__index_name__": null,
            "__columns__": ["id", "name", "cat", "score", "flag", "n"],
            "id": [1, 2, 3, 4, 5],
            "name": ["one", "two", "три 🦀", "", "five"],
            "cat": ["one", "two", "три 🦀", "", "five"],
            "score": [1.5, null, 3.5, 4.5, 5.5],
            "flag": [true, false, true, false, true],
            "n": [null, 20, 30, 40, 50],
        });
        for (key, value) in want.as_object().unwrap() {
            assert_eq!(&got[key], value, "anndata ({name}): {key}");
        }
        assert_eq!(got["__dtypes__"]["n"], "Int64", "{name}");
        assert_eq!(got["__dtypes__"]["cat"], "category", "{name}");
    }
}

#[tokio::test]
async fn copy_to_memory_location() {
    let ctx = ctx();
    let loc = "memory:///copy_to/mem.zarr";
    run(
        &ctx,
        &format!(
            "COPY ({SOURCE}) TO '{loc}' STORED AS ZARR OPTIONS (chunk_rows 4, dimension 'obs')"
        ),
    )
    .await
    .unwrap();
    assert_eq!(read_back(&ctx, loc).await, expected(&ctx).await);
    let dims = text(
        &ctx,
        &format!("SELECT count(*) AS c, max(obs) AS m FROM '{loc}'"),
    )
    .await;
    assert!(dims.contains("| 5 | 4 |"), "{dims}");
}

#[tokio::test]
async fn bad_options_and_existing_locations_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    let loc = dir.path().join("t.zarr");
    let loc = loc.to_str().unwrap();
    let copy =
        |options: &str| format!("COPY ({SOURCE}) TO '{loc}' STORED AS ZARR OPTIONS ({options})");
    let e = run(&ctx, &copy("chunk_size 10"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown zarr write option 'format.chunk_size'") && e.contains("chunk_rows"),
        "{e}"
    );
    for bad in [
        "chunk_rows 0",
        "compression 'lz9'",
        "zarr_format 4",
        "shard_rows 3, chunk_rows 2",
    ] {
        assert!(run(&ctx, &copy(bad)).await.is_err(), "{bad}");
    }
    assert!(
        !dir.path().join("t.zarr").exists(),
        "nothing written for bad options"
    );

    run(&ctx, &copy("chunk_rows 2")).await.unwrap();
    let e = run(&ctx, &copy("chunk_rows 2"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("already exists") && e.contains("overwrite"),
        "{e}"
    );
    // Overwrite replaces the old table (here by one with fewer rows and other columns).
    run(
        &ctx,
        &format!("COPY (SELECT 7 AS only) TO '{loc}' STORED AS ZARR OPTIONS (overwrite true)"),
    )
    .await
    .unwrap();
    let t = text(&ctx, &format!("SELECT * FROM '{loc}'")).await;
    assert!(
        t.contains("| dim_0 | only |") && t.contains("| 0     | 7    |"),
        "{t}"
    );
    assert!(
        !dir.path().join("t.zarr/name/zarr.json").exists(),
        "old arrays removed"
    );
}

#[tokio::test]
async fn unmappable_column_names_column_and_type() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    let loc = dir.path().join("list.zarr");
    let e = run(
        &ctx,
        &format!(
            "COPY (SELECT 1 AS id, make_array(1, 2) AS items) TO '{}' STORED AS ZARR",
            loc.display()
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("column 'items'") && e.contains("List"), "{e}");
    assert!(!loc.exists(), "nothing written");
}

#[tokio::test]
async fn copy_under_a_memory_limit() {
    // 2M rows (about 40 MB of Arrow data) through a 16 MB pool: the sink reserves what it
    // buffers (a unit per column and the units in flight), so a writer that held the input
    // would fail here.
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(16 << 20, 1.0)
        .build_arc()
        .unwrap();
    let ctx = zarr_session_context_with_runtime(SessionConfig::new(), runtime);
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("big.zarr");
    let loc = loc.to_str().unwrap();
    let out = run(
        &ctx,
        &format!(
            "COPY (SELECT value AS id, concat('label-', CAST(value % 1000 AS VARCHAR)) AS label \
             FROM generate_series(0, 1999999)) TO '{loc}' STORED AS ZARR OPTIONS (chunk_rows 100000)"
        ),
    )
    .await
    .unwrap();
    assert_eq!(count(&out), 2_000_000);
    let t = text(
        &ctx,
        &format!("SELECT count(*) AS c, sum(id) AS s, max(label) AS m FROM '{loc}'"),
    )
    .await;
    assert!(t.contains("| 2000000 | 1999999000000 | label-999 |"), "{t}");
}

#[tokio::test]
async fn a_failing_store_write_names_the_key_and_writes_no_metadata() {
    use object_store::{memory::InMemory, path::Path, ObjectStore, ObjectStoreExt};
    let inner = Arc::new(InMemory::new());
    let mut store = common::CountingStore::new(inner.clone());
    store.fail_put = Some(|p: &Path| p.as_ref() == "out.zarr/name/c/1");
    let ctx = ctx();
    ctx.runtime_env().register_object_store(
        &url::Url::parse("failing://bucket").unwrap(),
        Arc::new(store),
    );
    let e = run(
        &ctx,
        &format!(
            "COPY ({SOURCE}) TO 'failing://bucket/out.zarr' STORED AS ZARR OPTIONS (chunk_rows 2)"
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("out.zarr/name/c/1") && e.contains("injected"),
        "{e}"
    );
    // Chunks of other columns may have landed; no metadata document did.
    let keys: Vec<String> = inner
        .list(None)
        .map(|m| m.unwrap().location.to_string())
        .collect()
        .await;
    assert!(keys.iter().all(|k| !k.ends_with("zarr.json")), "{keys:?}");
    assert!(run(&ctx, "SELECT * FROM 'failing://bucket/out.zarr'")
        .await
        .is_err());
    let _ = inner
        .head(&Path::from("out.zarr/zarr.json"))
        .await
        .unwrap_err();
}

/// Whether anything exists at `path`.
fn exists(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[tokio::test]
async fn oversized_units_and_duplicate_options_are_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("one.zarr");
    let ctx = ctx();
    // One row with a chunk of 2^40 rows (padded in memory it was 8 TB) or 2^64 - 1.
    for rows in ["1099511627776", "18446744073709551615"] {
        let e = run(
            &ctx,
            &format!(
                "COPY (SELECT 1 AS x) TO '{}' STORED AS ZARR OPTIONS (chunk_rows {rows})",
                loc.display()
            ),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains("chunk_rows") && e.contains("2^31"), "{e}");
        assert!(!exists(&loc), "{rows}");
    }
    // Larger than the session's memory limit: refused, not waited for.
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(16 << 20, 1.0)
        .build_arc()
        .unwrap();
    let limited = zarr_session_context_with_runtime(SessionConfig::new(), runtime);
    let e = run(
        &limited,
        &format!(
            "COPY (SELECT 1 AS x) TO '{}' STORED AS ZARR OPTIONS (chunk_rows 16777216)",
            loc.display()
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("memory limit"), "{e}");
    assert!(!exists(&loc));
    // The same option twice, with and without DataFusion's `format.` prefix: DataFusion's
    // planner keeps one of them, so the statement is checked as parsed (the CLI does).
    for options in [
        "chunk_rows 10, 'format.chunk_rows' 20",
        "chunk_rows 10, CHUNK_ROWS 10",
    ] {
        let sql = format!(
            "COPY (SELECT 1 AS x) TO '{}' STORED AS ZARR OPTIONS ({options})",
            loc.display()
        );
        let statement = datafusion::sql::parser::DFParser::parse_sql(&sql)
            .unwrap()
            .pop_front()
            .unwrap();
        let e = zarrow_datafusion::check_statement(&statement)
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
    }
    let once = datafusion::sql::parser::DFParser::parse_sql(
        "COPY (SELECT 1 AS x) TO 'x.zarr' STORED AS ZARR OPTIONS (chunk_rows 10)",
    )
    .unwrap();
    zarrow_datafusion::check_statement(&once[0]).unwrap();
}

#[tokio::test]
async fn failed_checks_leave_the_location_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr");
    let ctx = ctx();
    let long = "x".repeat(300);
    for (query, says) in [
        // NULL and the value that marks NULLs, in one integer column.
        (
            "SELECT * FROM (VALUES (CAST(NULL AS BIGINT)), (-9223372036854775808)) AS t(n)"
                .to_string(),
            "holds NULLs and the value",
        ),
        (format!("SELECT 1 AS \"{long}\""), "300 bytes long"),
    ] {
        let e = run(
            &ctx,
            &format!(
                "COPY ({query}) TO '{}' STORED AS ZARR OPTIONS (chunk_rows 1)",
                loc.display()
            ),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains(says), "{e}");
        assert!(!exists(&loc), "{says}: the location was created");
    }
    // So a retry with valid rows is not told that the location exists.
    run(
        &ctx,
        &format!(
            "COPY (SELECT 1 AS n) TO '{}' STORED AS ZARR OPTIONS (chunk_rows 1)",
            loc.display()
        ),
    )
    .await
    .unwrap();
    // No columns at all: refused (DataFusion or the writer), nothing written.
    let empty = dir.path().join("empty.zarr");
    let e = run(
        &ctx,
        &format!(
            "COPY (SELECT * EXCLUDE (a) FROM (SELECT 1 AS a)) TO '{}' STORED AS ZARR",
            empty.display()
        ),
    )
    .await;
    assert!(e.is_err(), "{e:?}");
    assert!(!exists(&empty));
}

#[tokio::test]
async fn write_errors_say_writing_and_name_the_path() {
    let ctx = ctx();
    // A full disk: the error says so, with the path and the bytes (the first object written is
    // the writer lock, a JSON document of its holder).
    use object_store::memory::InMemory;
    let mut store = common::CountingStore::new(Arc::new(InMemory::new()));
    store.disk_full = true;
    ctx.runtime_env()
        .register_object_store(&url::Url::parse("full://bucket").unwrap(), Arc::new(store));
    let e = run(
        &ctx,
        "COPY (SELECT 1 AS n) TO 'full://bucket/out.zarr' STORED AS ZARR OPTIONS \
         (compression none)",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("store error writing 'out.zarr.zarrow-lock' (")
            && e.contains(" bytes): no space left (the disk is full)"),
        "{e}"
    );
}

#[tokio::test]
async fn time_zones_and_integer_nulls_read_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    for format in [3, 2] {
        let loc = dir.path().join(format!("v{format}.zarr"));
        run(
            &ctx,
            &format!(
                "COPY (SELECT arrow_cast(arrow_cast(t, 'Timestamp(Millisecond, None)'), \
                 'Timestamp(Millisecond, Some(\"Europe/Berlin\"))') AS t, n FROM (VALUES \
                 ('2024-03-31T00:30:00', 0), ('2024-07-01T12:00:00', CAST(NULL AS BIGINT)), \
                 ('2024-12-24T18:00:00', 7)) AS v(t, n)) TO '{}' STORED AS ZARR \
                 OPTIONS (zarr_format {format})",
                loc.display()
            ),
        )
        .await
        .unwrap();
        let t = text(
            &ctx,
            &format!(
                "SELECT arrow_typeof(t) AS ty, CAST(t AS VARCHAR) AS t FROM '{}' ORDER BY t",
                loc.display()
            ),
        )
        .await;
        assert!(
            t.contains("Timestamp(ms, \"Europe/Berlin\")")
                || t.contains("Timestamp(Millisecond, Some(\"Europe/Berlin\"))"),
            "v{format}: {t}"
        );
        assert!(t.contains("2024-03-31T00:30:00+01:00"), "v{format}: {t}");
        // fill_as_null: the real 0 is 0, the NULL is NULL.
        run(&ctx, "SET zarrow.fill_as_null = true").await.unwrap();
        let n = text(
            &ctx,
            &format!("SELECT n FROM '{}' ORDER BY dim_0", loc.display()),
        )
        .await;
        run(&ctx, "SET zarrow.fill_as_null = false").await.unwrap();
        assert_eq!(
            n.lines().filter(|l| l.starts_with('|')).collect::<Vec<_>>(),
            ["| n |", "| 0 |", "|   |", "| 7 |"],
            "v{format}: {n}"
        );
        // zarr-python (with the declared marker) and xarray see the same missing cell.
        for mode in ["zarr", "xarray"] {
            let Some(got) = zarrow_testkit::python_reads(".venv-zarr3", mode, &loc) else {
                continue;
            };
            // (xarray gives floats, NaN for the missing cell.)
            let n: Vec<Option<f64>> = got["n"]
                .as_array()
                .unwrap_or_else(|| panic!("{mode}: {:?}", got.get("n")))
                .iter()
                .map(serde_json::Value::as_f64)
                .collect();
            assert_eq!(n, [Some(0.0), None, Some(7.0)], "{mode}, v{format}");
        }
    }
}

#[tokio::test]
async fn an_anndata_dataframe_round_trips_through_copy() {
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/pbmc_sample.zarr/obs"
    );
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("obs.zarr");
    let loc = loc.to_str().unwrap();
    let ctx = ctx();
    run(
        &ctx,
        &format!(
            "COPY (SELECT * FROM '{sample}') TO '{loc}' STORED AS ZARR \
             OPTIONS ('layout' 'anndata')"
        ),
    )
    .await
    .unwrap();
    // zarrow reads the same table (the categorical's dictionary keys may be wider).
    let same = |from: &str| {
        format!(
            "SELECT barcode, dim_0, CAST(cell_type AS VARCHAR) AS cell_type, batch, n_genes, \
             total_counts, pct_mito FROM '{from}' ORDER BY dim_0"
        )
    };
    assert_eq!(
        text(&ctx, &same(loc)).await,
        text(&ctx, &same(sample)).await
    );
    // Rows with and without the reader's marks in one statement.
    let mixed = dir.path().join("mixed.zarr");
    let out = run(
        &ctx,
        &format!(
            "COPY (SELECT barcode, n_genes FROM '{sample}' UNION ALL \
             SELECT 'x' AS barcode, CAST(1 AS BIGINT) AS n_genes) TO '{}' STORED AS ZARR",
            mixed.display()
        ),
    )
    .await
    .unwrap();
    assert_eq!(count(&out), 2001);
    // anndata reads the same DataFrame: columns, dtypes, categories, index.
    let Some(got) = zarrow_testkit::python_reads(".venv-zarr3", "anndata", loc) else {
        return;
    };
    let want = zarrow_testkit::python_reads(".venv-zarr3", "anndata", sample).unwrap();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (key, value) in &want {
        assert_eq!(&got[key], value, "anndata: {key}");
    }
}

/// A registered table whose location another writer replaced (`COPY … overwrite`) reads the
/// new table, not the old metadata over the new chunks; one with other columns is an error
/// that says to register it again.
#[tokio::test]
async fn a_registered_table_follows_an_overwrite_of_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr");
    let loc = loc.to_str().unwrap();
    let ctx = ctx();
    let copy = |rows: u32, extra: &str| {
        format!(
            "COPY (SELECT value AS a{extra} FROM generate_series(1, {rows})) TO '{loc}' \
             STORED AS ZARR OPTIONS (chunk_rows 4, overwrite true)"
        )
    };
    run(&ctx, &copy(10, "")).await.unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}'"),
    )
    .await
    .unwrap();
    let sum = "SELECT concat(count(*), '/', sum(a)) AS s FROM t";
    assert!(text(&ctx, sum).await.contains("| 10/55 |"));
    // Replaced by a writer of another session.
    run(&common::written::ctx(), &copy(25, "")).await.unwrap();
    let got = text(&ctx, sum).await;
    assert!(got.contains("| 25/325 |"), "{got}");
    run(&common::written::ctx(), &copy(5, ", value AS b"))
        .await
        .unwrap();
    let err = run(&ctx, sum).await.unwrap_err().to_string();
    assert!(err.contains("register it again"), "{err}");
}

/// What `COPY` writes reads back the same by default, integer NULLs
/// included (they used to read as −9223372036854775808 without `fill_as_null`); zarr-python
/// (the declared `_FillValue`) and xarray see the same cells missing.
#[tokio::test]
async fn integer_nulls_read_back_as_null_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx();
    for (name, options) in [("v3", "zarr_format 3"), ("v2", "zarr_format 2")] {
        let loc = dir.path().join(format!("{name}.zarr"));
        let loc = loc.to_str().unwrap();
        run(
            &ctx,
            &format!("COPY ({SOURCE}) TO '{loc}' STORED AS ZARR OPTIONS ({options})"),
        )
        .await
        .unwrap();
        let got = text(
            &ctx,
            &format!("SELECT id, name, score, flag, n FROM '{loc}' ORDER BY id"),
        )
        .await;
        assert_eq!(got, expected(&ctx).await, "{name}");
        for mode in ["zarr", "xarray"] {
            let Some(got) = zarrow_testkit::python_reads(".venv-zarr3", mode, loc) else {
                return;
            };
            let floats = |column: &str| -> Vec<Option<f64>> {
                let values = got[column].as_array();
                let values = values.unwrap_or_else(|| panic!("{mode} {name}: {got:?}"));
                values.iter().map(serde_json::Value::as_f64).collect()
            };
            let n = [None, Some(20.0), Some(30.0), Some(40.0), Some(50.0)];
            assert_eq!(floats("n"), n, "{mode}, {name}");
            let score = [Some(1.5), None, Some(3.5), Some(4.5), Some(5.5)];
            assert_eq!(floats("score"), score, "{mode}, {name}");
        }
    }
}

/// Writes two AnnData dataframes with anndata: `ints.zarr` (an int64 index named `index`, as
/// `write_elem` keeps it) and `strings.zarr` (a string index named `index`).
const ANNDATA_INDEX_NAMED_INDEX: &str = r#"
import sys, warnings
import anndata as ad, numpy as np, pandas as pd, zarr
warnings.simplefilter("ignore")
for name, index in [("ints", [10, 20, 30]), ("strings", ["x", "y", "z"])]:
    df = pd.DataFrame(
        {"n": np.array([1, 2, 3], dtype="int64"), "c": pd.Categorical(["a", "b", "a"])},
        index=pd.Index(index, name="index"),
    )
    g = zarr.open_group(f"{sys.argv[1]}/{name}.zarr", mode="w")
    ad.io.write_elem(g, "obs", df)
"#;

/// An AnnData dataframe whose index is named `index` round-trips through
/// `COPY … layout 'anndata'`: anndata reads the same DataFrame (index values and name,
/// columns, dtypes) and zarrow the same table. A numeric index used to come back as an extra
/// `index` column beside a generated `_index` of 0, 1, 2 ….
#[tokio::test]
async fn an_anndata_index_named_index_round_trips() {
    let Some(python) = zarrow_testkit::venv_python(".venv-zarr3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(python)
        .args(["-c", ANNDATA_INDEX_NAMED_INDEX])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ctx = ctx();
    for name in ["ints", "strings"] {
        let source = dir.path().join(format!("{name}.zarr/obs"));
        let source = source.to_str().unwrap();
        let loc = dir.path().join(format!("{name}-copy.zarr"));
        let loc = loc.to_str().unwrap();
        run(
            &ctx,
            &format!(
                "COPY (SELECT * FROM '{source}') TO '{loc}' STORED AS ZARR \
                 OPTIONS ('layout' 'anndata')"
            ),
        )
        .await
        .unwrap();
        let all = |from: &str| format!("SELECT * FROM '{from}' ORDER BY dim_0");
        let back = text(&ctx, &all(loc)).await;
        assert_eq!(back, text(&ctx, &all(source)).await, "{name}");
        assert!(back.contains("| index | dim_0 | n | c |"), "{name}: {back}");
        let got = zarrow_testkit::python_reads(".venv-zarr3", "anndata", loc).unwrap();
        let want = zarrow_testkit::python_reads(".venv-zarr3", "anndata", source).unwrap();
        assert_eq!(got, want, "{name}");
        assert_eq!(got["__index_name__"], "index", "{name}");
    }
}
