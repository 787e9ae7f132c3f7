//! Hostile metadata inputs (issues 21 and 35): each test fails without its fix.
//!
//! Metadata of a few MB must not take quadratic time: struct field names, the columns a
//! dataframe names and the groups of consolidated metadata are checked with sets, sorts and
//! binary searches. These tests use sizes where the quadratic code runs for minutes (they
//! assert results, never a time).

use std::sync::Arc;

use serde_json::json;
use zarrow::{Error, Node, TableModel, TableOptions};

use super::Fixture;

/// A v3 array of one int8 element per row.
fn int8_array(dims: Option<&str>) -> serde_json::Value {
    let mut m = json!({
        "zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "int8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}], "attributes": {}
    });
    if let Some(d) = dims {
        m["dimension_names"] = json!([d]);
    }
    m
}

fn group(attributes: serde_json::Value) -> serde_json::Value {
    json!({"zarr_format": 3, "node_type": "group", "attributes": attributes})
}

/// A v3 group whose consolidated metadata holds `entries`.
fn consolidated(entries: serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
    json!({
        "zarr_format": 3, "node_type": "group", "attributes": {},
        "consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": entries}
    })
}

#[tokio::test]
async fn struct_of_200k_fields_checks_names_in_one_pass() {
    let f = Fixture::new();
    let n = 200_000;
    let fields: Vec<serde_json::Value> = (0..n).map(|i| json!([format!("f{i}"), "|i1"])).collect();
    let zarray = |fields: &[serde_json::Value]| {
        json!({"zarr_format": 2, "shape": [1], "chunks": [1], "dtype": fields,
               "compressor": null, "fill_value": null, "order": "C", "filters": null})
    };
    f.put_json("wide/.zarray", zarray(&fields)).await;
    let array = f.open("wide").await.unwrap();
    match &array.metadata().data_type {
        zarrow::DataType::Struct(got) => assert_eq!(got.len(), n),
        other => panic!("not a struct: {other:?}"),
    }
    let text = zarrow::tree::render_node("wide", Node::Array(array))
        .await
        .unwrap();
    assert!(text.contains("(200000 fields)"), "{}", &text[..200]);

    // A name repeated at the very end is still found.
    let mut twice = fields.clone();
    twice.push(json!(["f0", "|i1"]));
    f.put_json("twice/.zarray", zarray(&twice)).await;
    let e = f.open("twice").await.unwrap_err();
    assert!(
        e.to_string().contains("a field named twice (field 'f0')"),
        "{e}"
    );
}

#[tokio::test]
async fn dataframe_naming_absent_columns_is_an_error_after_one_lookup() {
    let f = Fixture::new();
    let df = |columns: serde_json::Value| {
        group(
            json!({"encoding-type": "dataframe", "encoding-version": "0.2.0",
                     "_index": "_index", "column-order": columns}),
        )
    };
    let open_table = |path: &'static str| {
        let store = f.store.child(path);
        async move {
            let node = Node::open_store(store, path).await.unwrap();
            TableModel::from_node(node, TableOptions::default()).await
        }
    };
    // The members anndata reads: `_index` and `a`.
    for name in ["small", "large"] {
        f.put_json(&format!("{name}/_index/zarr.json"), int8_array(None))
            .await;
        f.put_json(&format!("{name}/a/zarr.json"), int8_array(None))
            .await;
    }
    f.put_json("small/zarr.json", df(json!(["a", "gone"])))
        .await;
    let e = open_table("small").await.unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, Error::Metadata { .. })
            && msg.contains("'gone'")
            && msg.contains("column-order"),
        "{msg}"
    );

    // 200,000 names, one a member: the names are deduplicated with a set, and the first that
    // is not there ends the reading (it used to be looked up in the store, three documents a
    // name, and then silently left out).
    let mut names: Vec<String> = (0..200_000).map(|i| format!("c{i:06}")).collect();
    names.push("a".into());
    names.extend((0..1000).map(|i| format!("c{i:06}"))); // repeats
    f.put_json("large/zarr.json", df(json!(names))).await;
    let e = open_table("large").await.unwrap_err();
    assert!(e.to_string().contains("'c000000'"), "{e}");
    let node = Node::open_store(f.store.child("large"), "large")
        .await
        .unwrap();
    // the tree shows the dataframe marked invalid, and what it holds (issue 35)
    let text = zarrow::tree::render_node("large", node).await.unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("dataframe, invalid (column-order): names the column 'c000000'"),
        "{first}"
    );
    assert!(
        text.contains("── _index ") && text.contains("── a "),
        "{text}"
    );

    // Columns all there: read in `column-order`'s order.
    f.put_json("small/zarr.json", df(json!(["a"]))).await;
    let model = open_table("small").await.unwrap();
    let names: Vec<&str> = model.columns().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["_index", "dim_0", "a"]);
}

#[tokio::test]
async fn consolidated_groups_are_listed_by_binary_search() {
    // 100,000 groups below the root of one consolidated document: each group's children used
    // to be found by scanning every entry (10^10 steps for the walk).
    let f = Fixture::new();
    let mut entries = serde_json::Map::new();
    for i in 0..100_000 {
        entries.insert(format!("g{i:06}"), group(json!({})));
    }
    entries.insert("g000007/inner".into(), int8_array(None));
    f.put_json("wide/zarr.json", consolidated(entries)).await;
    let Node::Group(root) = Node::open_store(f.store.child("wide"), "wide")
        .await
        .unwrap()
    else {
        panic!("not a group")
    };
    let all = root.walk().await.unwrap();
    assert_eq!(all.len(), 100_001);
    assert_eq!(all[8].0, "g000007/inner");
    let text = zarrow::tree::render_node("wide", Node::Group(root))
        .await
        .unwrap();
    assert_eq!(text.lines().count(), 100_002);
}

#[tokio::test]
async fn many_arrays_with_their_own_dimensions_are_grouped_in_one_pass() {
    // 30,000 1-D arrays, each over a dimension of its own: the table cannot choose, and says
    // so naming them; the arrays used to be matched against every set found so far.
    let f = Fixture::new();
    let mut entries = serde_json::Map::new();
    for i in 0..30_000 {
        entries.insert(format!("v{i:05}"), int8_array(Some(&format!("d{i}"))));
    }
    f.put_json("tie/zarr.json", consolidated(entries)).await;
    let node = Node::open_store(f.store.child("tie"), "tie").await.unwrap();
    let e = TableModel::from_node(node, TableOptions::default())
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("tie for the table's dimensions") && msg.contains("v29999 (d29999)"),
        "{}",
        &msg[..msg.len().min(300)]
    );
    // Choosing one of them reads it.
    let node = Node::open_store(f.store.child("tie"), "tie").await.unwrap();
    let options = TableOptions {
        arrays: Some(vec!["v12345".into()]),
        ..Default::default()
    };
    let model = Arc::new(TableModel::from_node(node, options).await.unwrap());
    assert!(model.columns().iter().any(|c| c.name == "v12345"));
}
