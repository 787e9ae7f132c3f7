//! Tables written by `zarrow::write_table` read back the same: by zarrow (with CF decoding, so
//! NULLs come back), by zarr-python 3 and 2 (`zarr.open_group`), and by `xarray.open_zarr`
//! (a Dataset with one variable per column over the shared dimension).
//!
//! The Python readers need the venvs of `tests/fixtures/setup_venvs.sh`; without them the
//! Python half says so and passes locally, but fails under CI (`CI=true`).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, DictionaryArray, DurationSecondArray,
    FixedSizeBinaryArray, Float32Array, Float64Array, Int32Array, Int64Array, LargeStringArray,
    RecordBatch, StringArray, StringViewArray, StructArray, TimestampMillisecondArray,
    TimestampNanosecondArray, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use futures::StreamExt;
use serde_json::{Map, Value};
use zarrow::{TableOptions, TableWriteOptions, ZarrStore};
use zarrow_testkit::python_reads;

use crate::common::{json_value, values_equal};

/// The table every round trip writes: every mappable type, NULLs where the layout keeps them.
pub fn all_types(rows: usize) -> RecordBatch {
    let n = rows as i64;
    let opt = |i: i64, null_at: i64| (i % 7 != null_at).then_some(i);
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "i32n",
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| opt(i, 3).map(|v| v as i32 - 4)),
            )),
        ),
        (
            "i64",
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 1000 - 7))),
        ),
        (
            "u8",
            Arc::new(UInt8Array::from_iter_values(
                (0..n).map(|i| (i % 250) as u8),
            )),
        ),
        (
            "f64n",
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| opt(i, 2).map(|v| v as f64 * 0.5)),
            )),
        ),
        (
            "f32",
            Arc::new(Float32Array::from_iter_values(
                (0..n).map(|i| i as f32 - 0.25),
            )),
        ),
        (
            "flag",
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 3 == 0)))),
        ),
        (
            "s",
            Arc::new(StringArray::from_iter_values((0..n).map(|i| {
                if i % 5 == 4 {
                    String::new()
                } else {
                    format!("s{i}-ñ🦀")
                }
            }))),
        ),
        (
            "ls",
            Arc::new(LargeStringArray::from_iter_values(
                (0..n).map(|i| format!("L{i}")),
            )),
        ),
        (
            "sv",
            Arc::new(StringViewArray::from_iter_values((0..n).map(|i| {
                format!("a string view value long enough to be out of line {i}")
            }))),
        ),
        (
            "bin",
            Arc::new(BinaryArray::from_iter_values(
                (0..n).map(|i| vec![i as u8, 0, 255]),
            )),
        ),
        (
            "fsb",
            Arc::new(
                FixedSizeBinaryArray::try_from_iter((0..n).map(|i| vec![i as u8, (i + 1) as u8]))
                    .unwrap(),
            ),
        ),
        (
            "ts",
            Arc::new(TimestampNanosecondArray::from_iter((0..n).map(|i| {
                opt(i, 4).map(|v| 1_600_000_000_000_000_000 + v * 1_000_000_007)
            }))),
        ),
        (
            "tms",
            Arc::new(TimestampMillisecondArray::from_iter_values(
                (0..n).map(|i| 1_700_000_000_000 + i),
            )),
        ),
        (
            "dur",
            Arc::new(DurationSecondArray::from_iter_values(
                (0..n).map(|i| i * 60),
            )),
        ),
        (
            "cat",
            Arc::new(
                (0..n)
                    .map(|i| ["red", "green", "blue"][i as usize % 3])
                    .collect::<DictionaryArray<Int32Type>>(),
            ),
        ),
        (
            "rec",
            Arc::new(StructArray::from(vec![
                (
                    Arc::new(Field::new("a", DataType::Int32, false)),
                    Arc::new(Int32Array::from_iter_values((0..n).map(|i| i as i32))) as ArrayRef,
                ),
                (
                    Arc::new(Field::new("b", DataType::Float64, false)),
                    Arc::new(Float64Array::from_iter_values(
                        (0..n).map(|i| i as f64 * 1.5),
                    )) as ArrayRef,
                ),
            ])),
        ),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), a.null_count() > 0))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap()
}

/// `batch` split into batches of uneven sizes (so units straddle input batches).
pub fn split(batch: &RecordBatch) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let (mut at, mut step) = (0, 1);
    while at < batch.num_rows() {
        let len = step.min(batch.num_rows() - at);
        out.push(batch.slice(at, len));
        at += len;
        step = step % 5 + 2;
    }
    out
}

/// Write `batch` (in uneven pieces) at `location` with `options` (`key`, `value`).
pub async fn write(location: &str, batch: &RecordBatch, options: &[(&str, &str)]) -> u64 {
    let store = ZarrStore::open(location).unwrap();
    let opts = TableWriteOptions::from_pairs(options.iter().copied()).unwrap();
    let batches = futures::stream::iter(split(batch).into_iter().map(Ok));
    zarrow::write_table(store, batch.schema(), batches, opts)
        .await
        .unwrap()
}

/// The expected values of column `name`: the fixture encoding, a dictionary as its values.
fn expected(batch: &RecordBatch, name: &str) -> Vec<Value> {
    let mut column = batch.column_by_name(name).unwrap().clone();
    if let DataType::Dictionary(_, v) = column.data_type() {
        column = arrow::compute::cast(&column, v).unwrap();
    }
    (0..column.len())
        .map(|i| json_value(column.as_ref(), i, "struct"))
        .collect()
}

fn assert_column(reader: &str, name: &str, want: &[Value], got: &[Value]) {
    assert_eq!(got.len(), want.len(), "{reader}: {name} length");
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        assert!(
            values_equal(w, g),
            "{reader}: {name}[{i}] is {g}, wrote {w}"
        );
    }
}

/// zarrow reads the table back: same columns in the same order, same values.
async fn zarrow_reads_back(location: &str, batch: &RecordBatch, dimension: &str) {
    let options = TableOptions {
        decode_cf: true,
        ..Default::default()
    };
    let builder = zarrow::ZarrRecordBatchStreamBuilder::try_new_with_options(location, options)
        .await
        .unwrap();
    let schema = builder.schema();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect().await;
    let got = arrow::compute::concat_batches(&schema, &batches).unwrap();
    assert_eq!(schema.field(0).name(), dimension);
    assert_eq!(got.num_rows(), batch.num_rows());
    // The positional index of the dimension, then the columns in the written order (the
    // group's `column-order`; `all_types` is not in name order).
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let want_names: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    let mut sorted = want_names.clone();
    sorted.sort();
    assert_ne!(
        sorted, want_names,
        "the test table must not be in name order"
    );
    assert_eq!(names[1..], want_names, "zarrow: columns of {location}");
    for name in want_names {
        let column = got.column_by_name(name).unwrap();
        let have: Vec<Value> = (0..column.len())
            .map(|i| json_value(column.as_ref(), i, "struct"))
            .collect();
        assert_column("zarrow", name, &expected(batch, name), &have);
    }
}

fn check_python(reader: &str, got: &Map<String, Value>, batch: &RecordBatch, skip: &[&str]) {
    for field in batch.schema_ref().fields() {
        let name = field.name().as_str();
        if skip.contains(&name) {
            continue;
        }
        let column = got
            .get(name)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{reader}: column {name}: {:?}", got.get(name)));
        assert_column(reader, name, &expected(batch, name), column);
    }
}

const ROWS: usize = 23;

#[tokio::test]
async fn v3_round_trip_through_zarrow_zarr_python_and_xarray() {
    let dir = tempfile::tempdir().unwrap();
    let batch = all_types(ROWS);
    let store = dir.path().join("t.zarr");
    let loc = store.to_str().unwrap();
    let rows = write(
        loc,
        &batch,
        &[("chunk_rows", "4"), ("compression", "zstd(5)")],
    )
    .await;
    assert_eq!(rows, ROWS as u64);
    zarrow_reads_back(loc, &batch, "dim_0").await;
    if let Some(got) = python_reads(".venv-zarr3", "zarr", &store) {
        check_python("zarr-python 3", &got, &batch, &[]);
    }
    if let Some(got) = python_reads(".venv-zarr3", "xarray", &store) {
        assert_eq!(got["__dims__"], serde_json::json!({"dim_0": ROWS}));
        check_python("xarray", &got, &batch, &[]);
    }
}

#[tokio::test]
async fn v2_round_trip_through_zarrow_zarr_python_2_and_xarray() {
    let dir = tempfile::tempdir().unwrap();
    let batch = all_types(ROWS);
    let store = dir.path().join("t2.zarr");
    let loc = store.to_str().unwrap();
    write(
        loc,
        &batch,
        &[
            ("zarr_format", "2"),
            ("chunk_rows", "5"),
            ("compression", "gzip(4)"),
            ("dimension", "obs"),
        ],
    )
    .await;
    zarrow_reads_back(loc, &batch, "obs").await;
    // zarr-python 2 has no variable-length bytes without an object codec it can guess.
    if let Some(got) = python_reads(".venv-zarr2", "zarr", &store) {
        check_python("zarr-python 2", &got, &batch, &[]);
    }
    if let Some(got) = python_reads(".venv-zarr3", "zarr", &store) {
        check_python("zarr-python 3 (v2 store)", &got, &batch, &[]);
    }
    if let Some(got) = python_reads(".venv-zarr3", "xarray", &store) {
        assert_eq!(got["__dims__"], serde_json::json!({"obs": ROWS}));
        check_python("xarray (v2 store)", &got, &batch, &[]);
    }
}

#[tokio::test]
async fn sharded_arrow_vlen_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let batch = all_types(ROWS);
    let store = dir.path().join("s.zarr");
    let loc = store.to_str().unwrap();
    write(
        loc,
        &batch,
        &[
            ("chunk_rows", "3"),
            ("shard_rows", "9"),
            ("compression", "none"),
        ],
    )
    .await;
    zarrow_reads_back(loc, &batch, "dim_0").await;
    if let Some(got) = python_reads(".venv-zarr3", "zarr", &store) {
        // zarr-python 3.1's sharding codec hashes the fill value, which numpy void scalars
        // (raw bytes, structured) refuse: it cannot read those from any shard.
        check_python("zarr-python 3 (sharded)", &got, &batch, &["fsb", "rec"]);
    }
    let store = dir.path().join("a.zarr");
    let loc = store.to_str().unwrap();
    write(
        loc,
        &batch,
        &[("chunk_rows", "6"), ("string_encoding", "arrow_vlen")],
    )
    .await;
    zarrow_reads_back(loc, &batch, "dim_0").await;
}

/// `COPY … STORED AS ZARR` and `write_table` to S3 (moto on loopback, started by
/// tests/remote/start.sh), read back over S3 by zarrow and by the session.
#[tokio::test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn copy_and_write_table_to_s3() {
    let bucket = zarrow_testkit::loopback("ZARROW_TEST_S3");
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    for (name, options) in [
        ("v3", "chunk_rows 2"),
        ("v2", "chunk_rows 3, zarr_format 2"),
    ] {
        let loc = format!("{bucket}/written/copy_{}_{name}.zarr", std::process::id());
        let sql = format!(
            "COPY (SELECT * FROM (VALUES (1, 'a'), (2, 'bb'), (3, NULL)) AS t(id, s)) \
             TO '{loc}' STORED AS ZARR OPTIONS ({options}, overwrite true)"
        );
        ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let got = ctx
            .sql(&format!("SELECT id, s FROM '{loc}' ORDER BY id"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&got)
            .unwrap()
            .to_string();
        assert!(
            text.contains("| 2  | bb |") && text.contains("| 3  |    |"),
            "{name}: {text}"
        );
        let again = format!("COPY (SELECT 1 AS id) TO '{loc}' STORED AS ZARR");
        let e = ctx.sql(&again).await.unwrap().collect().await.unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
    }
    let batch = all_types(ROWS);
    let loc = format!("{bucket}/written/all_types_{}.zarr", std::process::id());
    write(&loc, &batch, &[("chunk_rows", "4"), ("overwrite", "true")]).await;
    zarrow_reads_back(&loc, &batch, "dim_0").await;
}

/// The AnnData test table: `all_types` but the struct (no dataframe column), plus nullable
/// strings and booleans and a categorical with NULLs.
fn anndata_types(rows: usize) -> RecordBatch {
    let base = all_types(rows);
    let n = rows as i64;
    let keep: Vec<usize> = (0..base.num_columns())
        .filter(|&i| base.schema().field(i).name() != "rec")
        .collect();
    let base = base.project(&keep).unwrap();
    let mut fields: Vec<Field> = base
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut columns = base.columns().to_vec();
    let extra: Vec<(&str, ArrayRef)> = vec![
        (
            "sn",
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| (i % 4 != 1).then(|| format!("v{i}"))),
            )),
        ),
        (
            "bn",
            Arc::new(BooleanArray::from_iter(
                (0..n).map(|i| (i % 5 != 2).then_some(i % 2 == 0)),
            )),
        ),
        (
            "catn",
            Arc::new(
                (0..n)
                    .map(|i| (i % 6 != 5).then_some(["x", "y"][i as usize % 2]))
                    .collect::<DictionaryArray<Int32Type>>(),
            ),
        ),
    ];
    for (name, a) in extra {
        fields.push(Field::new(name, a.data_type().clone(), true));
        columns.push(a);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// `batch` in uneven pieces, each dictionary column rebuilt per piece (so every piece has
/// its own dictionary, in its own order).
fn split_own_dictionaries(batch: &RecordBatch) -> Vec<RecordBatch> {
    split(batch)
        .into_iter()
        .map(|piece| {
            let columns = piece
                .columns()
                .iter()
                .map(|c| match c.data_type() {
                    DataType::Dictionary(..) => {
                        let s = arrow::compute::cast(c, &DataType::Utf8).unwrap();
                        let mut values: Vec<Option<&str>> = s
                            .as_any()
                            .downcast_ref::<StringArray>()
                            .unwrap()
                            .iter()
                            .collect();
                        values.reverse();
                        let dict: DictionaryArray<Int32Type> = values.into_iter().collect();
                        let rev: Vec<u32> = (0..dict.len() as u32).rev().collect();
                        arrow::compute::take(&dict, &arrow::array::UInt32Array::from(rev), None)
                            .unwrap()
                    }
                    _ => c.clone(),
                })
                .collect();
            RecordBatch::try_new(piece.schema(), columns).unwrap()
        })
        .collect()
}

async fn write_anndata(location: &str, batch: &RecordBatch, options: &[(&str, &str)]) {
    let store = ZarrStore::open(location).unwrap();
    let mut pairs = vec![("layout", "anndata")];
    pairs.extend_from_slice(options);
    let opts = TableWriteOptions::from_pairs(pairs).unwrap();
    let batches = futures::stream::iter(split_own_dictionaries(batch).into_iter().map(Ok));
    let rows = zarrow::write_table(store, batch.schema(), batches, opts)
        .await
        .unwrap();
    assert_eq!(rows, batch.num_rows() as u64);
}

/// zarrow reads an AnnData dataframe it wrote: the index, the position, then the columns in
/// order with their NULLs (masks, categorical −1) and dictionaries.
async fn zarrow_reads_anndata(location: &str, batch: &RecordBatch, index: &[Value]) {
    let builder = zarrow::ZarrRecordBatchStreamBuilder::try_new_with_options(
        location,
        TableOptions::default(),
    )
    .await
    .unwrap();
    let schema = builder.schema();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect().await;
    let got = arrow::compute::concat_batches(&schema, &batches).unwrap();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let want: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names[..2], ["_index", "dim_0"], "zarrow: {location}");
    assert_eq!(names[2..], want, "zarrow: columns of {location}");
    let idx: Vec<Value> = (0..got.num_rows())
        .map(|i| json_value(got.column(0).as_ref(), i, "struct"))
        .collect();
    assert_eq!(idx, index);
    for name in want {
        let mut column = got.column_by_name(name).unwrap().clone();
        if let DataType::Dictionary(_, v) = column.data_type() {
            assert!(
                matches!(
                    batch.column_by_name(name).unwrap().data_type(),
                    DataType::Dictionary(..)
                ),
                "{name} read back as a dictionary"
            );
            column = arrow::compute::cast(&column, v).unwrap();
        }
        // A float NULL is NaN in a dataframe, and zarrow reads NaN as NaN.
        let have: Vec<Value> = (0..column.len())
            .map(|i| match json_value(column.as_ref(), i, "struct") {
                Value::String(s) if s == "NaN" => Value::Null,
                v => v,
            })
            .collect();
        assert_column("zarrow (anndata)", name, &expected(batch, name), &have);
    }
}

#[tokio::test]
async fn anndata_layout_reads_back_through_anndata_and_zarrow() {
    let dir = tempfile::tempdir().unwrap();
    let all = anndata_types(ROWS);
    // zarr-python 3.1's sharding codec cannot read raw bytes from a shard (see above).
    let keep: Vec<usize> = (0..all.num_columns())
        .filter(|&i| all.schema().field(i).name() != "fsb")
        .collect();
    let no_raw_bytes = all.project(&keep).unwrap();
    let index: Vec<Value> = (0..ROWS).map(|i| Value::String(i.to_string())).collect();
    for (name, options) in [
        ("v3.zarr", vec![("chunk_rows", "4")]),
        ("v3s.zarr", vec![("chunk_rows", "2"), ("shard_rows", "6")]),
        (
            "v2.zarr",
            vec![
                ("zarr_format", "2"),
                ("chunk_rows", "5"),
                ("compression", "gzip"),
            ],
        ),
    ] {
        let store = dir.path().join(name);
        let loc = store.to_str().unwrap();
        let batch = if name == "v3s.zarr" {
            &no_raw_bytes
        } else {
            &all
        };
        write_anndata(loc, batch, &options).await;
        zarrow_reads_anndata(loc, batch, &index).await;
        if let Some(got) = python_reads(".venv-zarr3", "anndata", &store) {
            let reader = format!("anndata ({name})");
            let want: Vec<&str> = batch
                .schema_ref()
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            assert_eq!(got["__columns__"], serde_json::json!(want), "{reader}");
            assert_eq!(got["__index__"], Value::Array(index.clone()), "{reader}");
            assert_eq!(got["__index_name__"], Value::Null, "{reader}");
            let dtypes = &got["__dtypes__"];
            for (column, dtype) in [
                ("i32n", "Int32"),
                ("bn", "boolean"),
                ("sn", "string"),
                ("cat", "category"),
                ("catn", "category"),
                ("i64", "int64"),
                ("f64n", "float64"),
            ] {
                assert_eq!(dtypes[column], dtype, "{reader}: dtype of {column}");
            }
            check_python(&reader, &got, batch, &[]);
        }
    }
}

/// The `index` option: a string column becomes the DataFrame's index (named), not a column.
#[tokio::test]
async fn anndata_layout_with_an_index_column() {
    let dir = tempfile::tempdir().unwrap();
    let batch = anndata_types(ROWS);
    let store = dir.path().join("idx.zarr");
    let loc = store.to_str().unwrap();
    write_anndata(loc, &batch, &[("index", "ls")]).await;
    let attrs: Value =
        serde_json::from_slice(&std::fs::read(store.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(attrs["attributes"]["_index"], "ls");
    assert_eq!(attrs["attributes"]["encoding-type"], "dataframe");
    if let Some(got) = python_reads(".venv-zarr3", "anndata", &store) {
        assert_eq!(got["__index_name__"], "ls");
        assert_eq!(
            got["__index__"],
            Value::Array(expected(&batch, "ls")),
            "anndata index"
        );
        assert!(!got["__columns__"]
            .as_array()
            .unwrap()
            .contains(&Value::from("ls")));
        check_python("anndata (index ls)", &got, &batch, &["ls"]);
    }
    // Refused, naming the column: a struct, an index that is not strings, a reserved name.
    let bad = dir.path().join("bad.zarr");
    let bad = bad.to_str().unwrap();
    let all = all_types(3);
    let msg = refused(bad, vec![], all.clone()).await;
    assert!(msg.contains("'rec'") && msg.contains("structured"), "{msg}");
    let msg = refused(bad, vec![("index", "i64")], anndata_types(3)).await;
    assert!(msg.contains("'i64'") && msg.contains("strings"), "{msg}");
    let reserved = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "_index",
            DataType::Int64,
            false,
        )])),
        vec![Arc::new(Int64Array::from(vec![1]))],
    )
    .unwrap();
    let msg = refused(bad, vec![], reserved).await;
    assert!(
        msg.contains("'_index'") && msg.contains("reserves"),
        "{msg}"
    );
}

/// The error of writing `batch` in the AnnData layout with `options` at `location`.
async fn refused(location: &str, options: Vec<(&str, &str)>, batch: RecordBatch) -> String {
    let store = ZarrStore::open(location).unwrap();
    let mut pairs = vec![("layout", "anndata"), ("overwrite", "true")];
    pairs.extend(options);
    let opts = TableWriteOptions::from_pairs(pairs).unwrap();
    let batches = futures::stream::iter(vec![Ok(batch.clone())]);
    zarrow::write_table(store, batch.schema(), batches, opts)
        .await
        .unwrap_err()
        .to_string()
}

/// Batches of a view column that share their buffers (as a Parquet scan's `Utf8View` pages
/// are shared by many batches) are buffered compacted: what the writer holds, and reserves
/// under `COPY`'s memory pool, is its own rows, not the shared buffers once per batch (which
/// made the 10M-row benchmark COPY fail under `--memory-limit 200M`).
#[tokio::test]
async fn shared_view_buffers_are_not_held_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 200_000;
    let all = StringViewArray::from_iter_values(
        (0..rows).map(|i| format!("a value long enough to live in a data buffer {i:08}")),
    );
    let shared: usize = all.data_buffers().iter().map(|b| b.capacity()).sum();
    assert!(shared > 8 << 20, "{shared}");
    let schema = Arc::new(Schema::new(vec![Field::new(
        "s",
        DataType::Utf8View,
        false,
    )]));
    let store = ZarrStore::open(dir.path().join("v.zarr").to_str().unwrap()).unwrap();
    let opts = TableWriteOptions::from_pairs([("chunk_rows", "65536")]).unwrap();
    let mut writer = zarrow::TableWriter::try_new(store, schema.clone(), opts)
        .await
        .unwrap();
    let mut most = 0;
    for start in (0..rows).step_by(8192) {
        let len = 8192.min(rows - start);
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(all.slice(start, len))]).unwrap();
        writer.write(&batch).await.unwrap();
        writer.drain().await.unwrap();
        most = most.max(writer.buffered_bytes());
    }
    // at most a unit of 65536 rows of ~60 bytes (plus its views), not 8 × the shared buffers
    assert!(
        most < 8 << 20,
        "held {most} bytes (shared buffers: {shared})"
    );
    assert_eq!(writer.finish().await.unwrap(), rows as u64);
}
