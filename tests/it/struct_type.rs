//! The v3 `struct` data type as zarr-python 3.4 writes it (`struct_v3.zarr`, see
//! `tests/fixtures/generate_struct.py`; answers in `expected_struct.json`, also checked by the
//! fixture walk): nested structs, per-field fill values, byte-string, fixed UTF-32, complex,
//! raw-bytes and datetime fields, big-endian and sharded. NaT reads as NULL and only fields
//! that can hold NaT are nullable.

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type};
use serde_json::Value;
use zarrow::StringType;
use zarrow_datafusion::SessionContextZarrExt;

use crate::common::{data_dir, location, read_c_order};
use crate::fixtures::check_entries;

fn entries() -> Vec<Value> {
    let text = std::fs::read(data_dir().join("expected_struct.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// The values of field `name` of every element of `entry`.
fn field<'a>(entry: &'a Value, name: &str) -> Vec<&'a Value> {
    let values = entry["values"].as_array().unwrap();
    values.iter().map(|v| &v[name]).collect()
}

#[test]
fn struct_arrays_read_as_zarr_python_reads_them() {
    let entries = entries();
    assert_eq!(entries.len(), 3);
    for e in &entries {
        assert!(
            e["writer"].as_str().unwrap().starts_with("zarr-python 3.4"),
            "{e}"
        );
        let nats = field(e, "when")
            .into_iter()
            .chain(field(e, "at"))
            .filter(|v| v.is_null())
            .count();
        assert!(nats > 0, "{}: no NaT to read", e["path"]);
    }
    for strings in [StringType::Utf8, StringType::View] {
        check_entries(&entries, strings, location);
    }
}

#[test]
fn only_fields_that_hold_nat_are_nullable() {
    let (_, array) =
        read_c_order(&location("struct_v3.zarr", "records"), StringType::Utf8).unwrap();
    let DataType::Struct(fields) = array.data_type() else {
        panic!("{}", array.data_type())
    };
    let nullable: Vec<&str> = fields
        .iter()
        .filter(|f| f.is_nullable())
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(nullable, ["when", "took"]);
    let types: Vec<String> = fields.iter().map(|f| f.data_type().to_string()).collect();
    assert_eq!(
        types[1],
        r#"Struct("x": non-null Float32, "y": non-null Float64)"#
    );
    assert_eq!(
        types[2..].join(", "),
        "Binary, Timestamp(ns), Duration(s), Utf8, Boolean, \
         Struct(\"real\": non-null Float32, \"imag\": non-null Float32), FixedSizeBinary(3)"
    );
    // NaT is a NULL of the field, never of the record
    assert_eq!(array.null_count(), 0);
    let when = array.as_struct().column_by_name("when").unwrap();
    let nats = field(&entries()[0], "when")
        .into_iter()
        .filter(|v| v.is_null())
        .count();
    assert_eq!(when.null_count(), nats);
}

/// Through SQL: NaT fields are NULL, nested fields are reachable by name.
#[tokio::test]
async fn struct_fields_in_sql() {
    let entries = entries();
    let ctx = datafusion::prelude::SessionContext::new();
    let loc = location("struct_v3.zarr", "records");
    ctx.register_zarr("r", &loc, Default::default())
        .await
        .unwrap();
    let sql = "SELECT count(*) FILTER (WHERE records['when'] IS NULL), \
               count(*) FILTER (WHERE records['pos']['x'] < 0) FROM r";
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let got = |c: usize| batches[0].column(c).as_primitive::<Int64Type>().value(0) as usize;
    let nats = field(&entries[0], "when")
        .iter()
        .filter(|v| v.is_null())
        .count();
    let negative = field(&entries[0], "pos")
        .iter()
        .filter(|p| p["x"].as_f64().is_some_and(|x| x < 0.0))
        .count();
    assert_eq!((got(0), got(1)), (nats, negative), "{sql}");
}
