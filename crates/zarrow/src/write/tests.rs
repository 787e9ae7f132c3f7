//! The table writer's checks and values (issue 36: bounds, NULL markers, time zones, round
//! trips, validation before the first byte).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampMillisecondType};
use arrow_array::{
    Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StructArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use futures::TryStreamExt;
use serde_json::Value;

use super::*;
use crate::{TableOptions, ZarrRecordBatchStreamBuilder};

fn opts(pairs: &[(&str, &str)]) -> TableWriteOptions {
    TableWriteOptions::from_pairs(pairs.iter().copied()).unwrap()
}

async fn write(location: &str, batch: &RecordBatch, options: TableWriteOptions) -> Result<u64> {
    let store = ZarrStore::open(location)?;
    let batches = futures::stream::iter([Ok(batch.clone())]);
    write_table(store, batch.schema(), batches, options).await
}

async fn read(location: &str, options: TableOptions) -> Vec<RecordBatch> {
    ZarrRecordBatchStreamBuilder::try_new_with_options(location, options)
        .await
        .unwrap()
        .build()
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

fn one_column(name: &str, values: ArrayRef) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new(
        name,
        values.data_type().clone(),
        true,
    )]));
    RecordBatch::try_new(schema, vec![values]).unwrap()
}

async fn json(location: &str, key: &str) -> Value {
    let bytes = ZarrStore::open(location)
        .unwrap()
        .get_opt(key)
        .await
        .unwrap();
    serde_json::from_slice(&bytes.expect(key)).unwrap()
}

/// A local location in a fresh directory, and whether anything exists there.
fn local() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("t.zarr").to_string_lossy().into_owned();
    (dir, location)
}

#[tokio::test]
async fn refused_before_the_first_byte() {
    let ints = || Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
    // A struct with a field named twice, a 300-character name, no columns, a chunk larger
    // than the memory budget: refused, and the location is not created.
    let fields = Fields::from(vec![
        Field::new("a", DataType::Int64, false),
        Field::new("a", DataType::Int64, false),
    ]);
    let twice = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "s",
            DataType::Struct(fields.clone()),
            true,
        )])),
        vec![Arc::new(StructArray::new(
            fields,
            vec![ints(), ints()],
            None,
        ))],
    )
    .unwrap();
    let long = one_column(&"x".repeat(300), ints());
    let short = one_column("n", ints());
    let none = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(2)),
    )
    .unwrap();
    let budget = TableWriteOptions {
        chunk_rows: 1 << 20,
        memory_budget: Some(1 << 20),
        ..Default::default()
    };
    for (batch, options, says) in [
        (&twice, TableWriteOptions::default(), "two fields named 'a'"),
        (&long, TableWriteOptions::default(), "300 bytes long"),
        (&none, TableWriteOptions::default(), "no columns"),
        (&short, budget, "memory limit"),
    ] {
        let (dir, location) = local();
        let e = write(&location, batch, options)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{e}");
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "{says}: something was written"
        );
    }
    // Within the budget: written.
    let (_dir, location) = local();
    let within = TableWriteOptions {
        chunk_rows: 1 << 10,
        memory_budget: Some(1 << 20),
        ..Default::default()
    };
    assert_eq!(
        write(&location, &one_column("n", ints()), within)
            .await
            .unwrap(),
        2
    );
}

#[test]
fn chunk_and_shard_sizes_are_bounded() {
    for (key, value) in [
        ("chunk_rows", "1099511627776"),
        ("chunk_rows", "18446744073709551615"),
        ("shard_rows", "4294967296"),
    ] {
        let e = TableWriteOptions::from_pairs([(key, value)]).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidOption { key: k, .. } if k == key)
                && e.to_string().contains("2^31"),
            "{key}={value}: {e}"
        );
    }
    assert!(TableWriteOptions::from_pairs([("chunk_rows", "2147483648")]).is_ok());
    // Duplicate keys, also through the `format.` prefix.
    for pairs in [
        [("chunk_rows", "10"), ("chunk_rows", "20")],
        [("chunk_rows", "10"), ("format.CHUNK_ROWS", "20")],
    ] {
        let e = TableWriteOptions::from_pairs(pairs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("twice"), "{e}");
    }
}

#[tokio::test]
async fn integer_nulls_agree_with_the_fill_value() {
    let values: ArrayRef = Arc::new(Int64Array::from(vec![Some(0), None, Some(7)]));
    for format in ["3", "2"] {
        let location = format!("memory:///ints{format}.zarr");
        write(
            &location,
            &one_column("n", values.clone()),
            opts(&[("zarr_format", format)]),
        )
        .await
        .unwrap();
        let (fill, declared) = match format {
            "3" => {
                let meta = json(&location, "n/zarr.json").await;
                (
                    meta["fill_value"].clone(),
                    meta["attributes"]["_FillValue"].clone(),
                )
            }
            _ => {
                let meta = json(&location, "n/.zarray").await;
                (meta["fill_value"].clone(), meta["fill_value"].clone())
            }
        };
        assert_eq!(fill, serde_json::json!(i64::MIN), "v{format}");
        assert_eq!(declared, fill, "v{format}");
        // fill_as_null: the real 0 stays, the NULL is NULL.
        let batches = read(
            &location,
            TableOptions {
                fill_as_null: true,
                ..Default::default()
            },
        )
        .await;
        let n = batches[0].column_by_name("n").unwrap();
        let n = n.as_primitive::<Int64Type>();
        assert_eq!(
            n.iter().collect::<Vec<_>>(),
            [Some(0), None, Some(7)],
            "v{format}"
        );
    }
    // Without NULLs, the fill value is 0 and nothing is declared.
    let location = "memory:///no_nulls.zarr";
    write(
        location,
        &one_column("n", Arc::new(Int64Array::from(vec![0, 1]))),
        TableWriteOptions::default(),
    )
    .await
    .unwrap();
    let meta = json(location, "n/zarr.json").await;
    assert_eq!(meta["fill_value"], 0);
    assert!(meta["attributes"].get("_FillValue").is_none());
}

#[tokio::test]
async fn nulls_and_their_marker_are_refused_at_the_batch() {
    let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
    let (dir, location) = local();
    let mut writer = TableWriter::try_new(
        ZarrStore::open(&location).unwrap(),
        schema.clone(),
        opts(&[("chunk_rows", "1")]),
    )
    .await
    .unwrap();
    let batch = |v: Vec<Option<i64>>| {
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(v))]).unwrap()
    };
    writer.write(&batch(vec![None])).await.unwrap();
    // The write that brings the marker fails, not the finish.
    let e = writer
        .write(&batch(vec![Some(i64::MIN)]))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds NULLs and the value"), "{e}");
    drop(writer);
    drop(dir);
}

#[tokio::test]
async fn time_zones_are_kept() {
    let tz = "Europe/Berlin";
    let values =
        TimestampMillisecondArray::from(vec![Some(1_700_000_000_000), None]).with_timezone(tz);
    for format in ["3", "2"] {
        let location = format!("memory:///tz{format}.zarr");
        write(
            &location,
            &one_column("t", Arc::new(values.clone())),
            opts(&[("zarr_format", format)]),
        )
        .await
        .unwrap();
        let batches = read(&location, TableOptions::default()).await;
        let t = batches[0].column_by_name("t").unwrap();
        assert_eq!(
            t.data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, Some(tz.into())),
            "v{format}"
        );
        let t = t.as_primitive::<TimestampMillisecondType>();
        assert_eq!(t.value(0), 1_700_000_000_000);
        assert!(t.is_null(1));
    }
}

#[tokio::test]
async fn what_zarrow_reads_it_writes_back_the_same() {
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/pbmc_sample.zarr/obs"
    );
    let source = read(sample, TableOptions::default()).await;
    let schema = source[0].schema();
    let location = "memory:///obs_back.zarr";
    let store = ZarrStore::open(location).unwrap();
    let batches = futures::stream::iter(source.clone().into_iter().map(Ok));
    write_table(
        store,
        schema.clone(),
        batches,
        opts(&[("layout", "anndata")]),
    )
    .await
    .unwrap();
    let group = json(location, "zarr.json").await;
    let original = json(sample, "zarr.json").await;
    assert_eq!(group["attributes"]["_index"], "barcode");
    assert_eq!(
        group["attributes"]["column-order"],
        original["attributes"]["column-order"]
    );
    // The plain string column stays a plain array; the categorical keeps its categories.
    let batch = json(location, "batch/zarr.json").await;
    assert_eq!(batch["attributes"]["encoding-type"], "string-array");
    // The same table read back: the same columns, metadata and values (the categorical's
    // codes are stored as int32, so its dictionary keys are wider).
    let back = read(location, TableOptions::default()).await;
    let all = |b: &[RecordBatch]| arrow_select::concat::concat_batches(&b[0].schema(), b).unwrap();
    let (back, source) = (all(&back), all(&source));
    assert_eq!(back.num_rows(), source.num_rows());
    for (b, s) in back.schema().fields().iter().zip(schema.fields()) {
        assert_eq!(
            (b.name(), b.metadata(), b.is_nullable()),
            (s.name(), s.metadata(), s.is_nullable())
        );
    }
    assert_eq!(back.num_columns(), source.num_columns());
    for c in 0..back.num_columns() {
        let (b, s) = (
            column::unpack(back.column(c)).unwrap(),
            column::unpack(source.column(c)).unwrap(),
        );
        assert_eq!(&b, &s, "{}", schema.field(c).name());
    }

    // The xarray layout leaves out the row position, and keeps its dimension's name.
    let location = "memory:///obs_xarray.zarr";
    let store = ZarrStore::open(location).unwrap();
    let batches = futures::stream::iter([Ok(source)]);
    write_table(store, schema, batches, TableWriteOptions::default())
        .await
        .unwrap();
    let group = json(location, "zarr.json").await;
    let members = group["consolidated_metadata"]["metadata"]
        .as_object()
        .unwrap();
    assert!(!members.contains_key("dim_0"), "{:?}", members.keys());
    assert_eq!(members["barcode"]["dimension_names"][0], "dim_0");
}

#[tokio::test]
async fn only_position_columns_are_refused() {
    let field = Field::new("dim_0", DataType::Int64, false)
        .with_metadata([(crate::table::ROLE_KEY.to_string(), "position".to_string())].into());
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![field])),
        vec![Arc::new(Int64Array::from(vec![0, 1]))],
    )
    .unwrap();
    let e = write(
        "memory:///positions.zarr",
        &batch,
        TableWriteOptions::default(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("row position"), "{e}");
}

#[tokio::test]
async fn a_partial_last_chunk_is_padded_as_it_is_compressed() {
    // One row in a chunk of 2^20: the stored chunk decodes to the full chunk (what every
    // reader expects), its padding the NULL value; zarrow reads the one row back.
    for compression in ["zstd", "gzip(1)", "none"] {
        let location = format!("memory:///padded_{compression}.zarr");
        let values: ArrayRef = Arc::new(Int64Array::from(vec![Some(42), None]));
        write(
            &location,
            &one_column("n", values),
            opts(&[("chunk_rows", "1048576"), ("compression", compression)]),
        )
        .await
        .unwrap();
        let batches = read(&location, TableOptions::default()).await;
        let n = batches[0].column_by_name("n").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n.as_primitive::<Int64Type>().value(0), 42);
        let stored = ZarrStore::open(&location)
            .unwrap()
            .get_opt("n/c/0")
            .await
            .unwrap()
            .unwrap();
        let raw = match compression {
            "none" => stored.to_vec(),
            c => {
                let codec = opts(&[("compression", c)]).compression.unwrap();
                codec
                    .decode(stored.clone(), usize::MAX)
                    .unwrap_or_else(|e| panic!("{c}: {e}"))
                    .to_vec()
            }
        };
        assert_eq!(raw.len(), 8 << 20, "{compression}");
        assert_eq!(&raw[..8], &42i64.to_le_bytes());
        assert!(raw[8..]
            .chunks_exact(8)
            .all(|e| e == i64::MIN.to_le_bytes()));
    }
}

/// A NULL integer reads back as NULL by default (zarrow honours the
/// `zarrow.nulls` declaration it writes next to `_FillValue`); a real value stays a value, and
/// an array without the declaration reads its fill value as a value, as before.
#[tokio::test]
async fn integer_nulls_read_back_as_null_by_default() {
    let values: ArrayRef = Arc::new(Int64Array::from(vec![Some(0), None, Some(7)]));
    for format in ["3", "2"] {
        let location = format!("memory:///default_nulls{format}.zarr");
        write(
            &location,
            &one_column("n", values.clone()),
            opts(&[("zarr_format", format)]),
        )
        .await
        .unwrap();
        let attrs = match format {
            "3" => json(&location, "n/zarr.json").await["attributes"].clone(),
            _ => json(&location, "n/.zattrs").await,
        };
        assert_eq!(attrs["zarrow.nulls"], "fill_value", "v{format}");
        let batches = read(&location, TableOptions::default()).await;
        let n = batches[0].column_by_name("n").unwrap();
        let n: Vec<_> = n.as_primitive::<Int64Type>().iter().collect();
        assert_eq!(n, [Some(0), None, Some(7)], "v{format}");
    }
    // Without NULLs nothing is declared, and a 0 (the fill value) is a 0.
    let location = "memory:///default_no_nulls.zarr";
    write(
        location,
        &one_column("n", Arc::new(Int64Array::from(vec![0, 1]))),
        TableWriteOptions::default(),
    )
    .await
    .unwrap();
    assert!(json(location, "n/zarr.json").await["attributes"]
        .get("zarrow.nulls")
        .is_none());
    let batches = read(location, TableOptions::default()).await;
    assert_eq!(batches[0].column_by_name("n").unwrap().null_count(), 0);
}

/// Float NULLs read back as NULL; a float column holding NaN as well is written (NaN for
/// both) and declares no NULLs, so both read back as NaN, as other readers see them.
#[tokio::test]
async fn float_nulls_read_back_as_null_unless_the_column_holds_nan_too() {
    type Floats = Vec<Option<f64>>;
    let cases: [(&str, Floats, Floats); 2] = [
        ("nulls", vec![Some(1.5), None], vec![Some(1.5), None]),
        (
            "nan_too",
            vec![Some(f64::NAN), None, Some(2.0)],
            vec![Some(f64::NAN), Some(f64::NAN), Some(2.0)],
        ),
    ];
    for (name, values, want) in cases {
        let location = format!("memory:///float_{name}.zarr");
        let column: ArrayRef = Arc::new(Float64Array::from(values));
        write(
            &location,
            &one_column("f", column),
            TableWriteOptions::default(),
        )
        .await
        .unwrap();
        let batches = read(&location, TableOptions::default()).await;
        let f = batches[0].column_by_name("f").unwrap();
        let got: Vec<Option<f64>> = f.as_primitive::<Float64Type>().iter().collect();
        let same = got.len() == want.len()
            && got.iter().zip(&want).all(|(g, w)| match (g, w) {
                (Some(g), Some(w)) => g == w || (g.is_nan() && w.is_nan()),
                (g, w) => g.is_none() && w.is_none(),
            });
        assert!(same, "{name}: {got:?}");
    }
}

/// A timestamp or duration equal to NaT (i64::MIN), which every reader
/// takes for a missing value, is refused at its batch naming the column, NULLs or not.
#[tokio::test]
async fn a_nat_value_is_refused_at_its_batch() {
    use arrow_array::DurationSecondArray;
    let nat = i64::MIN;
    let columns: [(&str, ArrayRef); 3] = [
        (
            "t",
            Arc::new(TimestampMillisecondArray::from(vec![Some(0), Some(nat)])),
        ),
        (
            "tz",
            Arc::new(TimestampMillisecondArray::from(vec![Some(nat)]).with_timezone("UTC")),
        ),
        (
            "d",
            Arc::new(DurationSecondArray::from(vec![Some(1), Some(nat)])),
        ),
    ];
    for (name, values) in columns {
        let (dir, location) = local();
        let batch = one_column(name, values.clone());
        let mut writer = TableWriter::try_new(
            ZarrStore::open(&location).unwrap(),
            batch.schema(),
            TableWriteOptions::default(),
        )
        .await
        .unwrap();
        let e = writer.write(&batch).await.unwrap_err();
        assert!(matches!(e, Error::Write { .. }), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains(&format!("column '{name}'")) && e.contains("NaT"),
            "{e}"
        );
        drop(writer);
        drop(dir);
        // NULLs are NaT as before.
        let (dir, location) = local();
        let nulls = one_column(name, arrow_array::new_null_array(values.data_type(), 2));
        write(&location, &nulls, TableWriteOptions::default())
            .await
            .unwrap();
        let back = read(&location, TableOptions::default()).await;
        assert_eq!(back[0].column_by_name(name).unwrap().null_count(), 2);
        drop(dir);
    }
}
