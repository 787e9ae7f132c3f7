//! Shared helpers: fixture paths, reading whole arrays, Arrow values as fixture JSON.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, TimeUnit};
use base64::Engine;
use serde_json::Value;
use zarrow::{StringType, ZarrReadOptions, ZarrRecordBatchReaderBuilder};

pub use zarrow_testkit::fixtures_dir as data_dir;

/// Every entry of every `expected_*.json` (those listing arrays).
pub fn expected_entries() -> Vec<Value> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(data_dir())
        .expect("fixture dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("expected_") && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    for f in files {
        let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        // A list of entries, or an object holding them under "entries".
        let v = match v {
            Value::Object(mut o) => o.remove("entries").unwrap_or(Value::Null),
            other => other,
        };
        if let Value::Array(entries) = v {
            out.extend(
                entries
                    .into_iter()
                    .filter(|e| e.get("values").is_some() && e.get("store").is_some()),
            );
        }
    }
    out
}

/// Copy a directory tree (a fixture store to a temporary directory, to damage or change it).
pub use zarrow_testkit::copy_dir;

/// The location of an array of a fixture store.
pub fn location(store: &str, path: &str) -> String {
    let mut p = data_dir().join(store);
    if !path.is_empty() {
        p = p.join(path);
    }
    p.to_string_lossy().into_owned()
}

/// Read a whole array through the record batch reader and return its values in C order.
pub fn read_c_order(
    location: &str,
    string_type: StringType,
) -> zarrow::Result<(Vec<u64>, ArrayRef)> {
    let builder = ZarrRecordBatchReaderBuilder::try_new(location)?
        .with_options(ZarrReadOptions::default().with_string_type(string_type))
        .with_batch_size(7); // small batches exercise splitting
    let shape = builder.model().shape();
    let ndim = shape.len();
    let reader = builder.build()?;
    let mut positions: Vec<u32> = Vec::new();
    let mut parts: Vec<ArrayRef> = Vec::new();
    for batch in reader {
        let batch = batch?;
        for row in 0..batch.num_rows() {
            let mut flat = 0u64;
            for (d, extent) in shape.iter().enumerate() {
                let idx = batch
                    .column(d)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .value(row) as u64;
                flat = flat * extent + idx;
            }
            positions.push(flat as u32);
        }
        parts.push(batch.column(ndim).clone());
    }
    let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
    let all = arrow::compute::concat(&refs)?;
    // Scatter back to C order: `order[flat] = row`.
    let total: u64 = shape.iter().product();
    assert_eq!(
        positions.len() as u64,
        total,
        "{location}: every element exactly once"
    );
    let mut order = vec![u32::MAX; total as usize];
    for (row, flat) in positions.iter().enumerate() {
        assert_eq!(
            order[*flat as usize],
            u32::MAX,
            "{location}: element {flat} twice"
        );
        order[*flat as usize] = row as u32;
    }
    let idx = arrow::array::UInt32Array::from(order);
    Ok((shape, arrow::compute::take(&all, &idx, None)?))
}

fn float_json(f: f64) -> Value {
    if f.is_nan() {
        Value::String("NaN".into())
    } else if f.is_infinite() {
        Value::String(if f > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        serde_json::Number::from_f64(f).map(Value::Number).unwrap()
    }
}

fn b64(b: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
}

/// Element `i` of `array` in the fixture encoding of `kind`.
pub fn json_value(array: &dyn Array, i: usize, kind: &str) -> Value {
    if array.is_null(i) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(i).into()),
        DataType::LargeUtf8 => Value::String(array.as_string::<i64>().value(i).into()),
        DataType::Utf8View => Value::String(array.as_string_view().value(i).into()),
        DataType::Binary => b64(array.as_binary::<i32>().value(i)),
        DataType::LargeBinary => b64(array.as_binary::<i64>().value(i)),
        DataType::BinaryView => b64(array.as_binary_view().value(i)),
        DataType::FixedSizeBinary(_) => b64(array.as_fixed_size_binary().value(i)),
        DataType::Boolean => Value::Bool(array.as_boolean().value(i)),
        DataType::Int8 => array
            .as_primitive::<arrow::datatypes::Int8Type>()
            .value(i)
            .into(),
        DataType::Int16 => array
            .as_primitive::<arrow::datatypes::Int16Type>()
            .value(i)
            .into(),
        DataType::Int32 => array
            .as_primitive::<arrow::datatypes::Int32Type>()
            .value(i)
            .into(),
        DataType::Int64 => array
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(i)
            .into(),
        DataType::UInt8 => array
            .as_primitive::<arrow::datatypes::UInt8Type>()
            .value(i)
            .into(),
        DataType::UInt16 => array
            .as_primitive::<arrow::datatypes::UInt16Type>()
            .value(i)
            .into(),
        DataType::UInt32 => array
            .as_primitive::<arrow::datatypes::UInt32Type>()
            .value(i)
            .into(),
        DataType::UInt64 => array
            .as_primitive::<arrow::datatypes::UInt64Type>()
            .value(i)
            .into(),
        DataType::Float16 => float_json(
            array
                .as_primitive::<arrow::datatypes::Float16Type>()
                .value(i)
                .to_f64(),
        ),
        DataType::Float32 => float_json(
            array
                .as_primitive::<arrow::datatypes::Float32Type>()
                .value(i) as f64,
        ),
        DataType::Float64 => float_json(
            array
                .as_primitive::<arrow::datatypes::Float64Type>()
                .value(i),
        ),
        DataType::Struct(fields) if kind == "struct" => {
            let s = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), json_value(c.as_ref(), i, kind)))
                    .collect(),
            )
        }
        DataType::Struct(_) => {
            let s = array.as_struct();
            Value::Array(vec![
                json_value(s.column(0).as_ref(), i, kind),
                json_value(s.column(1).as_ref(), i, kind),
            ])
        }
        DataType::Timestamp(unit, _) | DataType::Duration(unit) => {
            let raw = match (array.data_type(), unit) {
                (DataType::Timestamp(..), TimeUnit::Second) => array
                    .as_primitive::<arrow::datatypes::TimestampSecondType>()
                    .value(i),
                (DataType::Timestamp(..), TimeUnit::Millisecond) => array
                    .as_primitive::<arrow::datatypes::TimestampMillisecondType>()
                    .value(i),
                (DataType::Timestamp(..), TimeUnit::Microsecond) => array
                    .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                    .value(i),
                (DataType::Timestamp(..), TimeUnit::Nanosecond) => array
                    .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                    .value(i),
                (_, TimeUnit::Second) => array
                    .as_primitive::<arrow::datatypes::DurationSecondType>()
                    .value(i),
                (_, TimeUnit::Millisecond) => array
                    .as_primitive::<arrow::datatypes::DurationMillisecondType>()
                    .value(i),
                (_, TimeUnit::Microsecond) => array
                    .as_primitive::<arrow::datatypes::DurationMicrosecondType>()
                    .value(i),
                (_, TimeUnit::Nanosecond) => array
                    .as_primitive::<arrow::datatypes::DurationNanosecondType>()
                    .value(i),
            };
            // The fixture counts in the numpy unit; zarrow scales D/h/m/W to seconds.
            let np_unit = kind
                .split('[')
                .nth(1)
                .map(|u| u.trim_end_matches(']'))
                .unwrap_or("s");
            let factor = match np_unit {
                "W" => 7 * 86_400,
                "D" => 86_400,
                "h" => 3_600,
                "m" => 60,
                _ => 1,
            };
            (raw / factor).into()
        }
        other => panic!("unexpected Arrow type {other}"),
    }
}

/// Compare expected JSON values (fixture encoding) with what zarrow read.
pub fn values_equal(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Number(a), Value::Number(b)) => {
            match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => a.as_f64() == b.as_f64(),
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_equal(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, x)| b.get(k).is_some_and(|y| values_equal(x, y)))
        }
        (Value::String(a), Value::String(b)) if a == "nan" || a == "NaN" => b == "NaN",
        _ => expected == actual,
    }
}

/// The text of `EXPLAIN <sql>` in `ctx`.
pub async fn explain(ctx: &datafusion::prelude::SessionContext, sql: &str) -> String {
    let plan = ctx
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    arrow::util::pretty::pretty_format_batches(&plan)
        .unwrap()
        .to_string()
}

/// Run `command` (the `run_scan` binary, or a wrapper that starts it) with the serialized scan
/// `json` on its standard input; its output.
pub fn run_scan_with(mut command: std::process::Command, json: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The whole table at `location` (`SELECT *`) with `options`, as one batch.
pub async fn read_table(
    location: &str,
    options: zarrow::TableOptions,
) -> arrow::array::RecordBatch {
    use futures::TryStreamExt;

    let model = std::sync::Arc::new(zarrow::TableModel::open(location, options).await.unwrap());
    let schema = model.schema();
    let batches: Vec<arrow::array::RecordBatch> = zarrow::ZarrScan::new(&model)
        .stream(model, zarrow::ScanContext::default())
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    arrow::compute::concat_batches(&schema, &batches).unwrap()
}
