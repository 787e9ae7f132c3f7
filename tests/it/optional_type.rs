//! zarrs' `optional` data type and codec (`zarrs_optional.zarr`, written by the zarrs crate,
//! see `tests/fixtures/zarrs-writer`; answers in `expected_zarrs_optional.json`, also checked
//! by the fixture walk): missing elements read as NULL, in every chunk shape the writer made
//! (all valid, all missing and never written, mixed; packbits with and without a padding
//! byte, zstd on mask and data, big-endian data, strings).

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use serde_json::Value;
use zarrow::StringType;
use zarrow_datafusion::SessionContextZarrExt;

use crate::common::{data_dir, location};
use crate::fixtures::check_entries;

fn entries() -> Vec<Value> {
    let text = std::fs::read(data_dir().join("expected_zarrs_optional.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

#[test]
fn optional_arrays_read_as_zarrs_reads_them() {
    let entries = entries();
    assert_eq!(entries.len(), 4);
    for e in &entries {
        assert_eq!(e["writer"], "zarrs 0.23.14");
        let values = e["values"].as_array().unwrap();
        assert!(
            values.iter().any(Value::is_null),
            "{}: nothing missing",
            e["path"]
        );
    }
    for strings in [StringType::Utf8, StringType::LargeUtf8, StringType::View] {
        check_entries(&entries, strings, location);
    }
}

/// Through SQL, a missing element is NULL: `count(column)` leaves it out.
#[tokio::test]
async fn missing_elements_are_null_in_sql() {
    let ctx = datafusion::prelude::SessionContext::new();
    for e in entries() {
        let path = e["path"].as_str().unwrap();
        let loc = location("zarrs_optional.zarr", path);
        ctx.register_zarr(path, &loc, Default::default())
            .await
            .unwrap();
        let sql = format!("SELECT count(*) - count({path}) FROM {path}");
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let nulls = batches[0].column(0).as_primitive::<Int64Type>().value(0);
        let missing = e["values"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v.is_null());
        assert_eq!(nulls as usize, missing.count(), "{sql}");
    }
}
