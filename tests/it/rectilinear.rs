//! Rectilinear chunk grids written by zarr-python 3.4 (`rectilinear_v3.zarr`, see
//! `tests/fixtures/generate_rectilinear.py`): whole arrays as zarr-python reads them, region
//! reads across irregular chunks and shards, and `dim_0` predicates that prune exactly the
//! chunks overlapping the range — for arrays and for a group table whose columns have
//! different grids along dimension 0.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use serde_json::Value;
use zarrow::{StringType, ZarrArray, ZarrReadOptions};

use crate::common::{data_dir, explain, json_value, location, values_equal};
use crate::fixtures::check_entries;

const STORE: &str = "rectilinear_v3.zarr";

fn entries() -> Vec<Value> {
    let path = data_dir().join("expected_rectilinear.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The expected values of the array at `path`.
fn expected(path: &str) -> Vec<Value> {
    let e = entries().into_iter().find(|e| e["path"] == path).unwrap();
    e["values"].as_array().unwrap().clone()
}

async fn collect(ctx: &datafusion::prelude::SessionContext, sql: &str) -> Vec<RecordBatch> {
    ctx.sql(sql).await.unwrap().collect().await.unwrap()
}

#[test]
fn every_rectilinear_array_reads_as_zarr_python_reads_it() {
    let entries = entries();
    assert_eq!(entries.len(), 9);
    assert!(entries.iter().all(|e| e["writer"]
        .as_str()
        .is_some_and(|w| w.starts_with("zarr-python 3.4"))));
    check_entries(&entries, StringType::Utf8, location);
}

#[tokio::test]
async fn regions_cross_irregular_chunks_and_shards() {
    let opts = ZarrReadOptions::default();
    for (path, start, shape) in [
        ("float64_2d", [3u64, 2u64], [10u64, 4u64]),
        ("float64_2d", [5, 3], [10, 4]), // exactly chunk (2, 1)
        ("sharded_2d", [8, 1], [9, 5]),  // shards 0, 1 (never written) and 2
    ] {
        let array = ZarrArray::open(&location(STORE, path)).await.unwrap();
        let got = array.read_region(&start, &shape, &opts).await.unwrap();
        let want = expected(path);
        let mut k = 0;
        for r in start[0]..start[0] + shape[0] {
            for c in start[1]..start[1] + shape[1] {
                let v = json_value(got.as_ref(), k, "float64");
                assert!(
                    values_equal(&want[(r * 7 + c) as usize], &v),
                    "{path} ({r}, {c})"
                );
                k += 1;
            }
        }
        assert_eq!(k, got.len());
    }
    let strings = ZarrArray::open(&location(STORE, "sharded_strings"))
        .await
        .unwrap();
    let got = strings.read_region(&[3], &[11], &opts).await.unwrap();
    let want = expected("sharded_strings");
    for i in 0..11 {
        assert_eq!(json_value(got.as_ref(), i, "utf8"), want[i + 3]);
    }
}

#[tokio::test]
async fn a_dim_0_range_prunes_exactly_the_overlapping_chunks() {
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    // Chunks 3 3 3 5 6 start at 0 3 6 9 14: rows 7..=10 lie in chunks 2 and 3.
    let loc = location(STORE, "int32_1d");
    let sql = format!("SELECT dim_0, int32_1d FROM '{loc}' WHERE dim_0 BETWEEN 7 AND 10");
    let plan = explain(&ctx, &sql).await;
    assert!(plan.contains("chunks=2/5 (3 pruned)"), "{plan}");
    let batches = collect(&ctx, &format!("{sql} ORDER BY dim_0")).await;
    let want = expected("int32_1d");
    let got: Vec<(i64, Value)> = batches
        .iter()
        .flat_map(|b| {
            let dims = b.column(0).as_primitive::<Int64Type>().clone();
            let values = b.column(1).clone();
            (0..b.num_rows()).map(move |i| (dims.value(i), json_value(values.as_ref(), i, "int32")))
        })
        .collect();
    let rows: Vec<(i64, Value)> = (7..=10).map(|i| (i, want[i as usize].clone())).collect();
    assert_eq!(got, rows);

    // A LIMIT counts rows chunk by chunk: 7 rows end inside chunk 2 (rows 6..9).
    let limited = collect(&ctx, &format!("SELECT dim_0 FROM '{loc}' LIMIT 7")).await;
    assert_eq!(limited.iter().map(RecordBatch::num_rows).sum::<usize>(), 7);
    let sql = format!("SELECT dim_0 FROM '{loc}' WHERE dim_0 >= 14");
    assert!(explain(&ctx, &sql).await.contains("chunks=1/5 (4 pruned)"));

    // 2-D: rows 5..15 are chunk 2 of 1 4 10 5; column 3 is chunk 1 of 3 4.
    let loc = location(STORE, "float64_2d");
    let sql = format!(
        "SELECT sum(float64_2d), count(*) FROM '{loc}' \
         WHERE dim_0 >= 5 AND dim_0 < 15 AND dim_1 = 3"
    );
    assert!(explain(&ctx, &sql).await.contains("chunks=1/8 (7 pruned)"));
    let batches = collect(&ctx, &sql).await;
    let want = expected("float64_2d");
    // Row 5 holds inf (fixture encoding: the string "inf"): the sum over rows 5..15 is inf,
    // the one over rows 6..15 (the same chunk) is the finite values' sum.
    assert_eq!(want[5 * 7 + 3], "inf");
    let sum: f64 = (6..15).map(|r| want[r * 7 + 3].as_f64().unwrap()).sum();
    let finite = collect(&ctx, &sql.replace("dim_0 >= 5", "dim_0 >= 6")).await;
    assert_eq!(
        finite[0].column(0).as_primitive::<Float64Type>().value(0),
        sum
    );
    assert_eq!(
        batches[0].column(0).as_primitive::<Float64Type>().value(0),
        f64::INFINITY
    );
    assert_eq!(
        batches[0].column(1).as_primitive::<Int64Type>().value(0),
        10
    );
}

#[tokio::test]
async fn a_table_of_columns_with_different_grids_reads_and_prunes() {
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    let loc = location(STORE, "table");
    let all = collect(&ctx, &format!("SELECT * FROM '{loc}' ORDER BY dim_0")).await;
    let all = arrow::compute::concat_batches(&all[0].schema(), &all).unwrap();
    let schema = all.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["dim_0", "a_rect", "b_regular", "c_strings"]);
    assert_eq!(all.num_rows(), 30);
    for (c, (path, kind)) in [("table/a_rect", "int64"), ("table/b_regular", "float32")]
        .into_iter()
        .chain([("table/c_strings", "utf8")])
        .enumerate()
    {
        let want = expected(path);
        for (i, w) in want.iter().enumerate() {
            let got = json_value(all.column(c + 1).as_ref(), i, kind);
            assert!(values_equal(w, &got), "{path}[{i}]: {got} != {w}");
        }
    }
    // The driver (a_rect, chunks 5 10 15) decides the chunks: rows 12..17 are in chunks 1, 2.
    let sql = format!("SELECT c_strings, b_regular FROM '{loc}' WHERE dim_0 >= 12 AND dim_0 < 17");
    assert!(explain(&ctx, &sql).await.contains("chunks=2/3 (1 pruned)"));
    let batches = collect(&ctx, &format!("{sql} ORDER BY b_regular")).await;
    let got: Vec<Value> = batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(|i| json_value(b.column(0).as_ref(), i, "utf8")))
        .collect();
    let want: Vec<Value> = (12..17).map(|i| Value::from(format!("row {i}"))).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn rectilinear_arrays_in_icechunk_read_as_zarr_python_reads_them() {
    let path = data_dir().join("expected_rectilinear_icechunk.json");
    let want: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(want["icechunk"], "2.3.0");
    let entries: Vec<Value> = want["arrays"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, a)| {
            assert_eq!(a["chunk_grid"]["name"], "rectilinear");
            let mut e = a.clone();
            e["store"] = Value::from("main");
            e["path"] = Value::from(path.clone());
            e
        })
        .collect();
    assert_eq!(entries.len(), 3);
    let repo = data_dir().join("rectilinear.icechunk");
    check_entries(&entries, StringType::Utf8, |version, path| {
        format!("icechunk+file://{}@{version}/{path}", repo.display())
    });
    // Pruning over the repository: rows 2..=6 of chunks 2 5 3 are chunk 1 alone.
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    let loc = format!("icechunk+file://{}/rect_2d", repo.display());
    let sql = format!("SELECT count(*) FROM '{loc}' WHERE dim_0 BETWEEN 2 AND 6");
    assert!(explain(&ctx, &sql).await.contains("chunks=2/6 (4 pruned)"));
    let batches = collect(&ctx, &sql).await;
    assert_eq!(
        batches[0].column(0).as_primitive::<Int64Type>().value(0),
        40
    );
}
