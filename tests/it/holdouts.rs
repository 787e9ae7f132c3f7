//! Field hold-outs, round 3 (issue 35), on stores zarr-python 2 and 3 and xarray wrote
//! (`tests/fixtures/generate_holdouts.py`, answers in `expected_holdouts_v{2,3}.json`):
//!
//! - node names in several scripts, with spaces and ASCII punctuation are store keys as they
//!   are: they read as their writers read them (they read as zeros, or not at all in v2), from
//!   a local directory, `memory://`, HTTP and S3, and zarrow writes them so that zarr-python,
//!   xarray and anndata read them back;
//! - a v2 `"fill_value": null` names no fill value: `fill_as_null` makes nothing NULL;
//! - a struct whose datetime field holds NaT reads (the field nullable) instead of failing.

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int32Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Float64Type, Int32Type, Int64Type, Schema};
use serde_json::Value;
use zarrow::{TableOptions, ZarrStore};
use zarrow_datafusion::SessionContextZarrExt;
use zarrow_testkit::loopback;

use crate::common::{copy_dir, data_dir, location, read_table};

fn expected(which: &str) -> Value {
    let file = data_dir().join(format!("expected_holdouts_{which}.json"));
    serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
}

fn ints(values: &Value) -> Vec<i32> {
    let values = values.as_array().unwrap();
    values.iter().map(|v| v.as_i64().unwrap() as i32).collect()
}

/// Every name of `names` (`{name: [values]}`) in the group at `store`, as one table of just
/// those arrays and as each array on its own path.
async fn check_names(store: &str, names: &serde_json::Map<String, Value>) {
    let options = TableOptions {
        arrays: Some(names.keys().cloned().collect()),
        ..Default::default()
    };
    let table = read_table(store, options).await;
    for (name, values) in names {
        let column = table
            .column_by_name(name)
            .unwrap_or_else(|| panic!("{store}: no column '{name}' in {:?}", table.schema()));
        let got: Vec<i32> = column.as_primitive::<Int32Type>().values().to_vec();
        assert_eq!(got, ints(values), "{store}: column '{name}'");
        let path = format!("{store}/{}", in_location(store, name));
        let alone = read_table(&path, TableOptions::default()).await;
        let got: Vec<i32> = alone
            .column(1)
            .as_primitive::<Int32Type>()
            .values()
            .to_vec();
        assert_eq!(got, ints(values), "{store}/{name}");
    }
}

/// `name` as a location's last part: in a URL (`memory://`, `s3://`, `http://`) percent-encoded
/// as any URL path is (`#` and `?` would end the path), in a local path as it is.
fn in_location(store: &str, name: &str) -> String {
    if !store.contains("://") {
        return name.to_string();
    }
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn names_read_as_their_writers_read_them() {
    for which in ["v2", "v3"] {
        let expected = expected(which);
        for (store, names) in expected["names"].as_object().unwrap() {
            check_names(&location(store, ""), names.as_object().unwrap()).await;
        }
    }
}

/// The same from a directory whose own name is not ASCII, and from `memory://`.
#[tokio::test]
async fn names_read_from_any_directory_and_from_memory() {
    let expected = expected("v3");
    let names = expected["names"]["holdouts_v3_unconsolidated.zarr"]
        .as_object()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("données #1 %41.zarr");
    copy_dir(&data_dir().join("holdouts_v3_unconsolidated.zarr"), &copy);
    check_names(copy.to_str().unwrap(), names).await;

    let memory = ZarrStore::open("memory:///holdouts/t%C3%A9.zarr").unwrap();
    put_tree(&memory, &copy, "").await;
    check_names("memory:///holdouts/t%C3%A9.zarr", names).await;
}

/// Every file below `dir` into `store`, under its path relative to `dir`.
async fn put_tree(store: &ZarrStore, dir: &std::path::Path, prefix: &str) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let key = format!("{prefix}{name}");
        if entry.file_type().unwrap().is_dir() {
            Box::pin(put_tree(store, &entry.path(), &format!("{key}/"))).await;
        } else {
            let bytes = std::fs::read(entry.path()).unwrap();
            store.put(&key, bytes.into()).await.unwrap();
        }
    }
}

#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn names_read_over_http_and_s3() {
    for var in ["ZARROW_TEST_HTTP", "ZARROW_TEST_S3"] {
        let base = loopback(var);
        for which in ["v2", "v3"] {
            let expected = expected(which);
            for (store, names) in expected["names"].as_object().unwrap() {
                if var == "ZARROW_TEST_HTTP" && store.contains("unconsolidated") {
                    continue; // HTTP cannot list a group's children
                }
                check_names(&format!("{base}/{store}"), names.as_object().unwrap()).await;
            }
        }
    }
}

/// zarrow writes each name as the key it is: the directories are the names, zarrow reads them
/// back, and so do zarr-python, xarray and anndata.
#[tokio::test]
async fn zarrow_writes_names_that_other_readers_read() {
    let expected = expected("v3");
    let names = expected["names"]["holdouts_v3.zarr"].as_object().unwrap();
    let fields: Vec<Field> = names
        .keys()
        .map(|n| Field::new(n, DataType::Int32, false))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let columns = names
        .values()
        .map(|v| Arc::new(Int32Array::from(ints(v))) as Arc<dyn Array>)
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (layout, name) in [("xarray", "names.zarr"), ("anndata", "obs.zarr")] {
        let path = dir.path().join(name);
        let options = zarrow::TableWriteOptions::from_pairs([("layout", layout)]).unwrap();
        let store = ZarrStore::open(path.to_str().unwrap()).unwrap();
        let stream = futures::stream::iter([Ok(batch.clone())]);
        zarrow::write_table(store, schema.clone(), stream, options)
            .await
            .unwrap();
        for name in names.keys() {
            assert!(
                path.join(name).join("zarr.json").is_file(),
                "{layout}: '{name}'"
            );
        }
        check_names(path.to_str().unwrap(), names).await;
    }
    let Some(python) = zarrow_testkit::venv_python(".venv-zarr3") else {
        return;
    };
    let script = r#"
import json, sys
import anndata, xarray as xr, zarr
names = json.loads(sys.argv[3])
root = zarr.open_group(sys.argv[1], mode="r")
ds = xr.open_zarr(sys.argv[1])
obs = anndata.io.read_elem(zarr.open_group(sys.argv[2], mode="r"))
print(json.dumps({
    "zarr": {n: root[n][...].tolist() for n in names},
    "xarray": {n: ds[n].values.tolist() for n in names},
    "anndata": {n: obs[n].tolist() for n in names},
}))
"#;
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(dir.path().join("names.zarr"))
        .arg(dir.path().join("obs.zarr"))
        .arg(serde_json::to_string(&names.keys().collect::<Vec<_>>()).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    for reader in ["zarr", "xarray", "anndata"] {
        for (name, values) in names {
            assert_eq!(&read[reader][name], values, "{reader} read '{name}'");
        }
    }
}

/// zarr-python 2's `"fill_value": null`: no stored value means missing, so `fill_as_null`
/// leaves the real `0`, `''` and `false` as they are (they were NULL).
#[tokio::test]
async fn a_v2_null_fill_value_makes_nothing_null() {
    let expected = expected("v2");
    let cases = expected["fill_null"].as_object().unwrap();
    let options = TableOptions {
        fill_as_null: true,
        arrays: Some(cases.keys().cloned().collect()),
        ..Default::default()
    };
    let table = read_table(&location("holdouts_v2.zarr", ""), options).await;
    for (path, case) in cases {
        let column = table.column_by_name(path).unwrap();
        assert_eq!(column.null_count(), 0, "{path}: {column:?}");
        let want = case["values"].as_array().unwrap();
        for (i, want) in want.iter().enumerate() {
            let got = match column.data_type() {
                DataType::Utf8 => Value::from(column.as_string::<i32>().value(i)),
                DataType::Int32 => Value::from(column.as_primitive::<Int32Type>().value(i)),
                DataType::Boolean => Value::from(column.as_boolean().value(i)),
                other => panic!("{path}: {other}"),
            };
            assert_eq!(&got, want, "{path}[{i}]");
        }
    }
}

/// A struct with a `datetime64[ns]` field holding NaT (zarr-python 2 and 3): the field is
/// nullable and NaT is NULL, as zarr-python reads it; through SQL too.
#[tokio::test]
async fn nat_in_a_struct_field_is_null() {
    for which in ["v2", "v3"] {
        let expected = expected(which);
        for (key, want) in expected["struct_nat"].as_object().unwrap() {
            let (store, path) = key.split_once('/').unwrap();
            let table = read_table(&location(store, path), TableOptions::default()).await;
            let column = table.column(1).as_struct();
            let (id, when) = (column.column(0), column.column(1));
            assert!(column.fields()[1].is_nullable(), "{key}");
            let want = want.as_array().unwrap();
            for (i, want) in want.iter().enumerate() {
                assert_eq!(
                    id.as_primitive::<Int32Type>().value(i) as i64,
                    want["id"].as_i64().unwrap(),
                    "{key}[{i}].id"
                );
                let got = cast_ns(when, i);
                assert_eq!(got, want["when"].as_i64(), "{key}[{i}].when");
            }
            let ctx = datafusion::prelude::SessionContext::new();
            ctx.register_zarr("s", &location(store, path), Default::default())
                .await
                .unwrap();
            let sql = "SELECT count(*) AS n FROM s WHERE struct_nat['when'] IS NULL";
            let sql = sql.replace("struct_nat", path);
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            let n = batches[0].column(0).as_primitive::<Int64Type>().value(0);
            let nats = want.iter().filter(|w| w["when"].is_null()).count();
            assert_eq!(n as usize, nats, "{key}: {sql}");
        }
    }
}

/// Element `i` of a timestamp column as int64 nanoseconds; `None` for NULL.
fn cast_ns(column: &dyn Array, i: usize) -> Option<i64> {
    if column.is_null(i) {
        return None;
    }
    let ns = arrow::compute::cast(
        &column.slice(i, 1),
        &DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, None),
    )
    .unwrap();
    let ints = arrow::compute::cast(&ns, &DataType::Int64).unwrap();
    Some(ints.as_primitive::<Int64Type>().value(0))
}

/// xarray over non-ASCII variable and dimension names: the dataset table as `xr.open_zarr`.
#[tokio::test]
async fn an_xarray_dataset_with_non_ascii_names_reads_as_xarray_reads_it() {
    let expected = expected("v3");
    let table = read_table(
        &location("holdouts_xarray.zarr", ""),
        TableOptions::default(),
    )
    .await;
    for (name, values) in expected["xarray"].as_object().unwrap() {
        let column = table
            .column_by_name(name)
            .unwrap_or_else(|| panic!("no column '{name}' in {:?}", table.schema()));
        let got: Vec<Value> = (0..column.len())
            .map(|i| match column.data_type() {
                DataType::Float64 => Value::from(column.as_primitive::<Float64Type>().value(i)),
                DataType::Int64 => Value::from(column.as_primitive::<Int64Type>().value(i)),
                DataType::Int32 => Value::from(column.as_primitive::<Int32Type>().value(i)),
                other => panic!("{name}: {other}"),
            })
            .collect();
        assert_eq!(&got, values.as_array().unwrap(), "{name}");
    }
}
