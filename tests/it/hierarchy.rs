//! Whole hierarchies stay readable around a node zarrow cannot read: `tree` lists it with its
//! reason, a group table leaves it out (and says why) unless it is asked for by name. The
//! stores and the unreadable nodes come from `tests/fixtures/generate_structured.py`
//! (`expected_structured_v{2,3}.json`, key `unreadable`). An AnnData dataframe whose
//! attributes do not match what it holds is marked invalid in the tree and refused as a table
//! (stores written by anndata, then edited: `zarrow_testkit::invalid_anndata`).

use std::path::Path;

use serde_json::Value;
use zarrow::{Error, TableModel, TableOptions};

use crate::common::{copy_dir, data_dir, location};

/// (store, unreadable array path) pairs the fixture scripts recorded.
fn unreadable() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in ["expected_structured_v2.json", "expected_structured_v3.json"] {
        let v: Value = serde_json::from_slice(&std::fs::read(data_dir().join(f)).unwrap()).unwrap();
        for (store, paths) in v["unreadable"].as_object().unwrap() {
            for p in paths.as_array().unwrap() {
                out.push((store.clone(), p.as_str().unwrap().to_string()));
            }
        }
    }
    assert!(out.len() >= 2, "fixtures missing unreadable nodes: {out:?}");
    out
}

/// The store as written, and a copy without consolidated metadata (children found by listing).
fn variants(store: &str, tmp: &Path) -> Vec<String> {
    let copy = tmp.join(store);
    copy_dir(&data_dir().join(store), &copy);
    let _ = std::fs::remove_file(copy.join(".zmetadata"));
    let root = copy.join("zarr.json");
    if root.exists() {
        let mut doc: Value = serde_json::from_slice(&std::fs::read(&root).unwrap()).unwrap();
        doc.as_object_mut().unwrap().remove("consolidated_metadata");
        std::fs::write(&root, serde_json::to_vec(&doc).unwrap()).unwrap();
    }
    vec![location(store, ""), copy.to_string_lossy().into_owned()]
}

#[tokio::test]
async fn tree_lists_an_unreadable_node_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    for (store, path) in unreadable() {
        for loc in variants(&store, tmp.path()) {
            let text = zarrow::tree::render(&loc)
                .await
                .unwrap_or_else(|e| panic!("tree of {loc} failed: {e}"));
            let line = text
                .lines()
                .find(|l| l.contains(&format!(" {path} ")) || l.ends_with(&format!(" {path}")))
                .unwrap_or_else(|| panic!("{path} not listed in the tree of {loc}:\n{text}"));
            assert!(line.contains("unreadable: "), "{loc}: {line}");
            // the reason names the array and what is wrong with it
            assert!(line.contains(&path), "{line}");
            assert!(
                line.contains("sub-array") || line.contains("'Y'") || line.contains("[[\"a\""),
                "{loc}: reason not given: {line}"
            );
            // the readable siblings are listed as arrays
            assert!(text.contains("records"), "{loc}:\n{text}");
            assert!(text.contains("struct{"), "{loc}:\n{text}");
        }
    }
}

#[tokio::test]
async fn a_group_table_leaves_an_unreadable_array_out_unless_named() {
    let tmp = tempfile::tempdir().unwrap();
    for (store, path) in unreadable() {
        for loc in variants(&store, tmp.path()) {
            let table = TableModel::open(&loc, TableOptions::default())
                .await
                .unwrap_or_else(|e| panic!("group table of {loc}: {e}"));
            let why = table
                .left_out()
                .iter()
                .find(|(n, _)| *n == path)
                .map(|(_, why)| why.clone())
                .unwrap_or_else(|| panic!("{loc}: {path} not left out: {:?}", table.left_out()));
            assert!(why.starts_with("unreadable: "), "{why}");
            assert!(table.schema().field_with_name("records").is_ok());

            let named = TableOptions {
                arrays: Some(vec![path.clone()]),
                ..Default::default()
            };
            match TableModel::open(&loc, named).await {
                Err(e @ (Error::UnsupportedDataType { .. } | Error::Metadata { .. })) => {
                    assert!(e.to_string().contains(&path), "{e}")
                }
                Err(e) => panic!("{loc}: {path} named: unexpected error {e}"),
                Ok(_) => panic!("{loc}: {path} named in `arrays` but the table opened"),
            }
        }
    }
}

#[tokio::test]
async fn anndata_stores_with_record_arrays_walk_whole() {
    for fmt in [2, 3] {
        let loc = location(&format!("anndata_uns_v{fmt}.zarr"), "");
        let text = zarrow::tree::render(&loc).await.unwrap();
        assert!(!text.contains("unreadable"), "{text}");
        assert!(text.contains("struct{B: fixed_length_utf32[20]"), "{text}");
        // anndata's other encoded groups are listed with their encoding
        let line = |name: &str| {
            text.lines()
                .find(|l| l.contains(name))
                .unwrap_or_else(|| panic!("no {name} in\n{text}"))
                .to_string()
        };
        assert!(line("neighbors/").contains("awkward-array"), "{text}");
        assert!(line("params/").contains("dict"), "{text}");
        TableModel::open(
            &location(&format!("anndata_uns_v{fmt}.zarr"), "obs"),
            TableOptions::default(),
        )
        .await
        .unwrap();
        // an awkward array is no table: the error says what it is
        let err = TableModel::open(
            &location(&format!("anndata_uns_v{fmt}.zarr"), "obsm/neighbors"),
            TableOptions::default(),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("awkward-array"), "{err}");
    }
}

/// scanpy's real pbmc68k_reduced, converted by anndata: the whole store walks (sparse
/// matrices, record arrays, nested `uns` dicts), and `obs` counts as pandas counts it.
#[tokio::test]
async fn a_real_anndata_store_walks_whole_and_counts_as_pandas() {
    let v: Value = serde_json::from_slice(
        &std::fs::read(data_dir().join("expected_structured_v3.json")).unwrap(),
    )
    .unwrap();
    let want = &v["pbmc68k_reduced_obs"];
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    for fmt in [2, 3] {
        let store = format!("pbmc68k_reduced_v{fmt}.zarr");
        let text = zarrow::tree::render(&location(&store, "")).await.unwrap();
        assert!(!text.contains("unreadable"), "{text}");
        for part in [
            "raw/",
            "obsp/",
            "distances/",
            "csr_matrix",
            "rank_genes_groups/",
            "struct{",
        ] {
            assert!(text.contains(part), "{store}: no {part} in\n{text}");
        }
        let sql = format!(
            "SELECT CAST(bulk_labels AS VARCHAR) AS label, count(*) AS n, avg(n_counts) AS mean \
             FROM '{}' GROUP BY bulk_labels",
            location(&store, "obs")
        );
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let (mut total, mut sum) = (0, 0.0);
        for b in &batches {
            let mean =
                arrow::array::AsArray::as_primitive::<arrow::datatypes::Float64Type>(b.column(2));
            let labels =
                arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
            let labels = arrow::array::AsArray::as_string::<i32>(&labels);
            let n = arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(b.column(1));
            for i in 0..b.num_rows() {
                let label = labels.value(i);
                assert_eq!(
                    want["bulk_labels"][label].as_i64(),
                    Some(n.value(i)),
                    "{store}: {label}"
                );
                total += n.value(i);
                sum += mean.value(i) * n.value(i) as f64;
            }
        }
        assert_eq!(Some(total), want["n_obs"].as_i64());
        let want_mean = want["mean_n_counts"].as_f64().unwrap();
        assert!(
            (sum / total as f64 - want_mean).abs() < 1e-6 * want_mean,
            "{store}: mean n_counts {} vs pandas {want_mean}",
            sum / total as f64
        );
    }
}

#[tokio::test]
async fn a_codec_zarrow_does_not_run_is_named_never_executed() {
    let v: Value = serde_json::from_slice(
        &std::fs::read(data_dir().join("expected_numcodecs_v2.json")).unwrap(),
    )
    .unwrap();
    let unsupported = v["unsupported"].as_object().unwrap();
    assert!(!unsupported.is_empty());
    for (node, codec) in unsupported {
        let (store, path) = node.split_once('/').unwrap();
        let codec = codec.as_str().unwrap();
        match zarrow::ZarrArray::open(&location(store, path)).await {
            Err(Error::UnsupportedCodec {
                codec: named,
                array,
                ..
            }) => {
                assert_eq!(named, codec);
                assert!(array.contains(path), "{array}");
            }
            other => panic!("{node}: expected an unsupported-codec error, got {other:?}"),
        }
        // the rest of the store stays readable
        let text = zarrow::tree::render(&location(store, "")).await.unwrap();
        let line = text.lines().find(|l| l.contains(path)).unwrap();
        assert!(
            line.contains("unreadable") && line.contains(codec),
            "{line}"
        );
    }
}

/// AnnData obs as anndata reads it back: an index with its own name, an ordered categorical
/// (pandas' `ordered` kept as the Arrow dictionary's), nullable strings written as a categorical.
#[tokio::test]
async fn anndata_obs_keeps_index_name_order_and_missing_values() {
    let v: Value = serde_json::from_slice(
        &std::fs::read(data_dir().join("expected_structured_v3.json")).unwrap(),
    )
    .unwrap();
    let want = &v["anndata_uns_obs"];
    let index = want["index"].as_str().unwrap();
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    for fmt in [2, 3] {
        let loc = location(&format!("anndata_uns_v{fmt}.zarr"), "obs");
        let table = TableModel::open(&loc, TableOptions::default())
            .await
            .unwrap();
        let schema = table.schema();
        for (column, ordered) in want["ordered"].as_object().unwrap() {
            let field = schema.field_with_name(column).unwrap();
            assert_eq!(
                field.dict_is_ordered(),
                ordered.as_bool(),
                "{loc}: {column}"
            );
        }
        let sql =
            format!("SELECT {index}, CAST(stage AS VARCHAR), CAST(tissue AS VARCHAR) FROM '{loc}'");
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let mut rows = 0;
        for b in &batches {
            let col = |i: usize| {
                arrow::compute::cast(b.column(i), &arrow::datatypes::DataType::Utf8).unwrap()
            };
            let (ids, stage, tissue) = (col(0), col(1), col(2));
            let text = |a: &arrow::array::ArrayRef, i: usize| {
                let a = arrow::array::AsArray::as_string::<i32>(a);
                if arrow::array::Array::is_null(a, i) {
                    Value::Null
                } else {
                    Value::String(a.value(i).to_string())
                }
            };
            for i in 0..b.num_rows() {
                let id = text(&ids, i);
                let row = &want["rows"][id.as_str().unwrap()];
                assert_eq!(text(&stage, i), row["stage"], "{loc}: {id}");
                assert_eq!(text(&tissue, i), row["tissue"], "{loc}: {id}");
                rows += 1;
            }
        }
        assert_eq!(rows, want["rows"].as_object().unwrap().len());
    }
}

/// AnnData dataframes made invalid after anndata wrote them (issue 35): the table is refused
/// (a typed metadata error naming the attribute), whether the dataframe is opened itself (its
/// children declared by its attributes) or reached from the consolidated root; the walk goes
/// on around it, and the tree lists the hierarchy with the dataframe marked invalid.
#[tokio::test]
async fn an_invalid_anndata_dataframe_is_marked_in_the_tree_and_refused_as_a_table() {
    use zarrow::Node;
    use zarrow_testkit::invalid_anndata::{cases, STORES};
    let tmp = tempfile::tempdir().unwrap();
    for case in cases() {
        for name in STORES {
            let store = case.apply(tmp.path(), name);
            let root = store.to_str().unwrap();
            let what = format!("{}, {name}", case.name);
            let refused = |how: &str, e: Error| {
                assert!(
                    matches!(&e, Error::Metadata { key, message, .. }
                        if key == case.attribute && message.starts_with(case.reason)),
                    "{what}, {how}: {e}"
                );
            };
            let obs = format!("{root}/obs");
            let e = TableModel::open(&obs, TableOptions::default())
                .await
                .unwrap_err();
            refused("opened itself", e);
            let Node::Group(g) = Node::open(root).await.unwrap() else {
                panic!("{what}: a group")
            };
            let Node::Group(obs_group) = g.child("obs").await.unwrap() else {
                panic!("{what}: obs is a group")
            };
            assert!(obs_group.metadata().consolidated.is_some(), "{what}");
            refused("children", obs_group.children().await.unwrap_err());
            let e = TableModel::from_node(Node::Group(obs_group), TableOptions::default())
                .await
                .unwrap_err();
            refused("from the consolidated root", e);

            let walked: Vec<String> = g
                .walk()
                .await
                .unwrap()
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            for path in ["obs/cell_type/codes", "obs/barcode", "var/gene_symbol"] {
                assert!(
                    walked.iter().any(|p| p == path),
                    "{what}: {path} not in {walked:?}"
                );
            }

            let marked = format!("invalid ({}): {}", case.attribute, case.reason);
            let tree = zarrow::tree::render(root).await.unwrap();
            let line = tree.lines().find(|l| l.contains("── obs/")).unwrap();
            assert!(
                line.contains("dataframe, ") && line.contains(&marked),
                "{what}: {line}"
            );
            let tree = zarrow::tree::render(&obs).await.unwrap();
            let first = tree.lines().next().unwrap();
            assert!(first.contains(&marked), "{what}: {first}");
            assert!(tree.contains("── cell_type/"), "{what}:\n{tree}");
        }
    }
}
