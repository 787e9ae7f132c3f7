//! xarray's NaT sentinel (issue 21, item 5): datetime64 and timedelta64 variables that xarray
//! wrote with NaT and no `_FillValue` store int64 min. With `decode_cf` the whole dataset reads
//! as `xr.open_zarr` reads it (NaT → NULL, every other time exact to the nanosecond); without
//! it the stored counts come back as zarr-python reads them.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type, TimeUnit};
use serde_json::Value;
use zarrow::TableOptions;

use crate::common::{data_dir, location, read_table};

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(data_dir().join("expected_xarray_nat.json")).unwrap())
        .unwrap()
}

/// The whole group as one table (`SELECT *`).
async fn read_all(store: &str, decode_cf: bool) -> RecordBatch {
    let options = TableOptions {
        decode_cf,
        ..Default::default()
    };
    read_table(&location(store, ""), options).await
}

/// A column as int64 nanoseconds (times and durations) or int64 counts, NULL → `None`.
fn as_i64(column: &ArrayRef) -> Vec<Option<i64>> {
    let ns = match column.data_type() {
        DataType::Timestamp(_, _) => cast(column, &DataType::Timestamp(TimeUnit::Nanosecond, None)),
        DataType::Duration(_) => cast(column, &DataType::Duration(TimeUnit::Nanosecond)),
        _ => Ok(column.clone()),
    }
    .unwrap();
    let ints = cast(&ns, &DataType::Int64).unwrap();
    ints.as_primitive::<Int64Type>().iter().collect()
}

fn want(values: &Value) -> Vec<Option<i64>> {
    values
        .as_array()
        .unwrap()
        .iter()
        .map(Value::as_i64)
        .collect()
}

#[tokio::test]
async fn nat_reads_as_null_like_xarray() {
    let expected = expected();
    for store in ["xarray_nat_v2.zarr", "xarray_nat_v3.zarr"] {
        let decoded = read_all(store, true).await;
        for (name, kind) in [
            ("when", "datetime64[ns]"),
            ("day", "datetime64[ns]"),
            ("dur", "timedelta64[ns]"),
        ] {
            let exp = &expected[store][name];
            assert_eq!(exp["kind"], kind, "{store}/{name}");
            let column = decoded.column_by_name(name).unwrap();
            let is_time = matches!(column.data_type(), DataType::Timestamp(_, _));
            assert_eq!(is_time, kind.starts_with("datetime"), "{store}/{name}");
            assert_eq!(
                as_i64(column),
                want(&exp["values"]),
                "{store}/{name} decoded"
            );
            assert!(column.null_count() >= 2, "{store}/{name}");
        }
        let raw = read_all(store, false).await;
        for name in ["when", "day", "dur", "x"] {
            let column = raw.column_by_name(name).unwrap();
            assert_eq!(
                as_i64(column),
                want(&expected[store][name]["raw"]),
                "{store}/{name} raw"
            );
        }
    }
}
