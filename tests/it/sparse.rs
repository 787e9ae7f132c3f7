//! AnnData sparse matrices read as the dense array's table without the zeros: every stored
//! element as scipy lists it (`tests/fixtures/data/expected_sparse.json`, written by
//! `tests/fixtures/generate_sparse.py`), the same cells as the dense array's nonzeros, and
//! hostile `indptr` / `indices` refused with the array named.

use std::collections::BTreeSet;

use arrow::array::AsArray;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use serde_json::Value;
use zarrow::{TableModel, TableOptions};

use crate::common::{copy_dir, data_dir, explain, location};

/// (dim_0, dim_1, value as f64) of every row of `sql`'s result.
async fn cells(sql: &str) -> Vec<(i64, i64, f64)> {
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let value = arrow::compute::cast(b.column(2), &DataType::Float64).unwrap();
        let (r, c) = (
            b.column(0).as_primitive::<Int64Type>(),
            b.column(1).as_primitive::<Int64Type>(),
        );
        let v = value.as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            out.push((r.value(i), c.value(i), v.value(i)));
        }
    }
    out
}

#[tokio::test]
async fn sparse_matrices_read_as_scipy_stores_them() {
    let expected: Value =
        serde_json::from_slice(&std::fs::read(data_dir().join("expected_sparse.json")).unwrap())
            .unwrap();
    let expected = expected.as_object().unwrap();
    assert!(expected.len() >= 9);
    for (node, want) in expected {
        let (store, path) = node.split_once('/').unwrap();
        let loc = location(store, path);
        let table = TableModel::open(&loc, TableOptions::default())
            .await
            .unwrap();
        let value = path.rsplit('/').next().unwrap();
        let names: Vec<String> = table
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["dim_0", "dim_1", value], "{node}");
        let coo = want["coo"].as_array().unwrap();
        assert_eq!(table.num_rows(), coo.len() as u64, "{node}");
        // Every stored element once, as scipy lists them (in any order: partitions run side
        // by side).
        let mut got = cells(&format!("SELECT dim_0, dim_1, \"{value}\" FROM '{loc}'")).await;
        let mut want: Vec<(i64, i64, f64)> = coo
            .iter()
            .map(|t| {
                let t = t.as_array().unwrap();
                (
                    t[0].as_i64().unwrap(),
                    t[1].as_i64().unwrap(),
                    t[2].as_f64().unwrap(),
                )
            })
            .collect();
        got.sort_by_key(|a| (a.0, a.1));
        want.sort_by_key(|a| (a.0, a.1));
        assert_eq!(got, want, "{node}");
    }
}

#[tokio::test]
async fn a_sparse_matrix_is_its_dense_array_without_the_zeros() {
    for fmt in [2, 3] {
        let store = format!("anndata_sparse_v{fmt}.zarr");
        let sparse = cells(&format!(
            "SELECT dim_0, dim_1, \"X\" FROM '{}'",
            location(&store, "X")
        ))
        .await;
        let dense = cells(&format!(
            "SELECT dim_0, dim_1, dense FROM '{}' WHERE dense <> 0",
            location(&store, "layers/dense")
        ))
        .await;
        let key = |v: &[(i64, i64, f64)]| -> BTreeSet<(i64, i64, u64)> {
            v.iter().map(|(r, c, x)| (*r, *c, x.to_bits())).collect()
        };
        assert!(!sparse.is_empty());
        assert_eq!(key(&sparse), key(&dense), "{store}");
        // The same aggregate either way: the question a user asks of X.
        let per_gene = |table: &str, value: &str| {
            format!(
                "SELECT dim_1, sum(\"{value}\") AS s FROM '{table}' GROUP BY dim_1 ORDER BY dim_1"
            )
        };
        let ctx = zarrow_datafusion::zarr_session_context(Default::default());
        let a = ctx
            .sql(&per_gene(&location(&store, "X"), "X"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let b = ctx
            .sql(&per_gene(&location(&store, "layers/dense"), "dense"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(
            arrow::util::pretty::pretty_format_batches(&a)
                .unwrap()
                .to_string(),
            arrow::util::pretty::pretty_format_batches(&b)
                .unwrap()
                .to_string()
        );
    }
}

/// Replace a 1-D array of the copy by `values` (int64, one uncompressed chunk).
fn rewrite(array: &std::path::Path, values: &[i64]) {
    let mut meta: Value =
        serde_json::from_slice(&std::fs::read(array.join(".zarray")).unwrap()).unwrap();
    meta["dtype"] = "<i8".into();
    meta["compressor"] = Value::Null;
    meta["filters"] = Value::Null;
    meta["shape"] = serde_json::json!([values.len()]);
    meta["chunks"] = serde_json::json!([values.len()]);
    std::fs::write(array.join(".zarray"), serde_json::to_vec(&meta).unwrap()).unwrap();
    for e in std::fs::read_dir(array).unwrap() {
        let p = e.unwrap().path();
        if !p.file_name().unwrap().to_string_lossy().starts_with('.') {
            std::fs::remove_file(p).unwrap();
        }
    }
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(array.join("0"), bytes).unwrap();
}

#[tokio::test]
async fn hostile_offsets_and_indices_are_errors_naming_the_array() {
    let src = data_dir().join("sparse_h5sparse_v2.zarr");
    let nnz = {
        let m: Value =
            serde_json::from_slice(&std::fs::read(src.join("X/data/.zarray")).unwrap()).unwrap();
        m["shape"][0].as_i64().unwrap()
    };
    let cases: Vec<(&str, Vec<i64>, &str)> = vec![
        // 31 offsets for 30 rows: decreasing at 3
        (
            "indptr",
            [vec![0, 4, 9, 2], vec![nnz; 27]].concat(),
            "decrease",
        ),
        // past the stored elements
        ("indptr", [vec![0; 30], vec![nnz + 1]].concat(), "past the"),
        // not starting at 0
        ("indptr", [vec![1], vec![nnz; 30]].concat(), "start at"),
        // an index outside the 12 columns
        (
            "indices",
            [vec![12], vec![0; nnz as usize - 1]].concat(),
            "outside",
        ),
        (
            "indices",
            [vec![-1], vec![0; nnz as usize - 1]].concat(),
            "outside",
        ),
    ];
    for (array, values, why) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let copy = tmp.path().join("m.zarr");
        copy_dir(&src, &copy);
        rewrite(&copy.join("X").join(array), &values);
        let loc = copy.join("X").to_string_lossy().into_owned();
        let ctx = zarrow_datafusion::zarr_session_context(Default::default());
        let result = match ctx.sql(&format!("SELECT * FROM '{loc}'")).await {
            Ok(df) => df.collect().await.map(|_| ()),
            Err(e) => Err(e),
        };
        let err = result
            .expect_err(&format!("{array} {values:?} was read"))
            .to_string();
        assert!(err.contains(why) && err.contains(array), "{array}: {err}");
    }
    // indptr of the wrong length is refused when the table is opened
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("m.zarr");
    copy_dir(&src, &copy);
    rewrite(&copy.join("X/indptr"), &[0, nnz]);
    let err = TableModel::open(&copy.join("X").to_string_lossy(), TableOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("indptr"), "{err}");
}

#[tokio::test]
async fn positions_alone_read_no_value_chunk() {
    // Every data chunk of the copy is garbage: reading one is an error naming it.
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("s.zarr");
    copy_dir(&data_dir().join("anndata_sparse_v3.zarr"), &copy);
    let chunks = copy.join("X/data/c");
    let mut n = 0;
    for e in std::fs::read_dir(&chunks).unwrap() {
        std::fs::write(e.unwrap().path(), b"not zstd").unwrap();
        n += 1;
    }
    assert!(n > 1);
    let loc = copy.join("X").to_string_lossy().into_owned();
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    let rows: usize = ctx
        .sql(&format!("SELECT dim_0, dim_1 FROM '{loc}' WHERE dim_1 = 3"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, 13);
    let err = ctx
        .sql(&format!("SELECT \"X\" FROM '{loc}'"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("data"), "{err}");
}

/// The question single-cell users ask first — a gene's expression per cell type — on scanpy's
/// real pbmc68k_reduced (sparse `raw/X`), joined as the dense matrix would be: `X.dim_0 =
/// obs.dim_0`, `X.dim_1 = var.dim_0`. Answers from scipy (`generate_structured.py`).
#[tokio::test]
async fn gene_expression_per_cell_type_on_real_sparse_data() {
    let v: Value = serde_json::from_slice(
        &std::fs::read(data_dir().join("expected_structured_v3.json")).unwrap(),
    )
    .unwrap();
    let genes = v["pbmc68k_reduced_obs"]["raw_expression"]
        .as_object()
        .unwrap();
    assert!(!genes.is_empty());
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    for fmt in [2, 3] {
        let store = format!("pbmc68k_reduced_v{fmt}.zarr");
        for (gene, want) in genes {
            let sql = format!(
                "SELECT CAST(o.bulk_labels AS VARCHAR), count(*), sum(x.\"X\"), min(v.dim_0) \
                 FROM '{x}' x JOIN '{obs}' o ON x.dim_0 = o.dim_0 \
                 JOIN '{var}' v ON x.dim_1 = v.dim_0 \
                 WHERE v.\"index\" = '{gene}' GROUP BY o.bulk_labels",
                x = location(&store, "raw/X"),
                obs = location(&store, "obs"),
                var = location(&store, "raw/var"),
            );
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            let mut seen = BTreeSet::new();
            for b in &batches {
                let labels = arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
                let labels = labels.as_string::<i32>();
                let n = b.column(1).as_primitive::<Int64Type>();
                let sum = arrow::compute::cast(b.column(2), &DataType::Float64).unwrap();
                let sum = sum.as_primitive::<Float64Type>();
                let position = b.column(3).as_primitive::<Int64Type>();
                for i in 0..b.num_rows() {
                    let label = labels.value(i);
                    let w = &want["by_label"][label];
                    assert_eq!(
                        Some(n.value(i)),
                        w["stored"].as_i64(),
                        "{store} {gene} {label}"
                    );
                    let ws = w["sum"].as_f64().unwrap();
                    assert!(
                        (sum.value(i) - ws).abs() <= 1e-4 * ws.abs().max(1.0),
                        "{store} {gene} {label}: {} vs scipy {ws}",
                        sum.value(i)
                    );
                    assert_eq!(Some(position.value(i)), want["position"].as_i64());
                    seen.insert(label.to_string());
                }
            }
            let want_labels: BTreeSet<String> = want["by_label"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            assert_eq!(seen, want_labels, "{store} {gene}");
        }
    }
}

/// A filter on the compressed dimension prunes by `indptr` alone, however many elements are
/// stored: 100M here (no data written; 10 rows of 10M elements each), past what pruning would
/// ever read as positions. `dim_0 = 3` keeps the 10 chunks of row 3 of 100.
#[tokio::test]
async fn pruning_by_indptr_needs_no_positions() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("big.zarr");
    let write = |path: &str, json: Value| {
        let dir = root.join(path);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("zarr.json"), json.to_string()).unwrap();
    };
    let array = |dtype: &str, len: u64, chunk: u64| {
        serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [len], "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
        })
    };
    write(
        "X",
        serde_json::json!({"zarr_format": 3, "node_type": "group", "attributes": {
            "encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": [10, 5]}}),
    );
    let nnz = 100_000_000u64;
    write("X/data", array("float32", nnz, 1_000_000));
    write("X/indices", array("int32", nnz, 1_000_000));
    write("X/indptr", array("int64", 11, 11));
    let indptr: Vec<u8> = (0..=10u64)
        .flat_map(|r| (r * 10_000_000).to_le_bytes())
        .collect();
    std::fs::create_dir_all(root.join("X/indptr/c")).unwrap();
    std::fs::write(root.join("X/indptr/c/0"), indptr).unwrap();

    let loc = root.join("X").to_string_lossy().into_owned();
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    let text = explain(
        &ctx,
        &format!("SELECT count(*) FROM '{loc}' WHERE dim_0 = 3"),
    )
    .await;
    assert!(text.contains("chunks=10/100 (90 pruned)"), "{text}");
    // and the rows kept are row 3's (positions come from indptr: no chunk of data is read)
    let batches = ctx
        .sql(&format!(
            "SELECT min(dim_0), max(dim_0), count(*) FROM '{loc}' WHERE dim_0 BETWEEN 3 AND 3"
        ))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let col = |i: usize| batches[0].column(i).as_primitive::<Int64Type>().value(0);
    assert_eq!((col(0), col(1), col(2)), (3, 3, 10_000_000));
}
