//! What zarrow writes, zarr-python reads back with the same values.
//!
//! Needs the zarr-python 3 venv that `tests/fixtures/setup_venvs.sh` makes (`.ci/run` runs it).
//! Without it the test says so and passes locally, but fails under CI (`CI=true`), where the
//! venv must exist.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Float64Array, Int32Array, LargeStringArray,
    StringArray, StringViewArray, TimestampNanosecondArray,
};
use serde_json::{json, Value};
use zarrow::ZarrStore;
use zarrow::{BytesToBytes, VlenEncoding, ZarrWriteOptions};

use crate::common::{json_value, values_equal};

fn python() -> Option<PathBuf> {
    zarrow_testkit::venv_python(".venv-zarr3")
}

struct Case {
    path: &'static str,
    shape: Vec<u64>,
    values: ArrayRef,
    opts: ZarrWriteOptions,
    kind: &'static str,
}

fn cases() -> Vec<Case> {
    let labels: Vec<String> = (0..23)
        .map(|i| {
            if (10..20).contains(&i) {
                String::new()
            } else {
                format!("lbl-{i}-ñ🦀")
            }
        })
        .collect();
    let chunked = |c: u64| ZarrWriteOptions {
        chunk_shape: Some(vec![c]),
        ..Default::default()
    };
    vec![
        Case {
            path: "strings_zstd",
            shape: vec![23],
            values: Arc::new(StringArray::from_iter_values(labels.iter())),
            opts: ZarrWriteOptions {
                compression: Some(BytesToBytes::Zstd {
                    level: 3,
                    checksum: false,
                }),
                dimension_names: Some(vec!["obs".into()]),
                ..chunked(10)
            },
            kind: "utf8",
        },
        Case {
            path: "strings_large_nulls_fill",
            shape: vec![5],
            values: Arc::new(LargeStringArray::from(vec![
                Some("a"),
                None,
                Some("c"),
                None,
                Some(""),
            ])),
            opts: ZarrWriteOptions {
                fill_value: Some(json!("missing")),
                ..chunked(2)
            },
            kind: "utf8",
        },
        Case {
            path: "strings_view_2d_gzip",
            shape: vec![3, 4],
            values: Arc::new(StringViewArray::from_iter_values(
                (0..12).map(|i| format!("cell {i} with a longer tail")),
            )),
            opts: ZarrWriteOptions {
                chunk_shape: Some(vec![2, 3]),
                compression: Some(BytesToBytes::Gzip { level: 5 }),
                ..Default::default()
            },
            kind: "utf8",
        },
        Case {
            path: "bytes",
            shape: vec![4],
            values: Arc::new(BinaryArray::from(vec![
                &b"\x00\x01"[..],
                b"",
                b"\xff\xfe\xfd",
                b"plain",
            ])),
            opts: chunked(3),
            kind: "binary",
        },
        Case {
            path: "int32",
            shape: vec![7],
            values: Arc::new(Int32Array::from(vec![1, -2, 3, i32::MAX, i32::MIN, 0, 42])),
            opts: ZarrWriteOptions {
                compression: Some(BytesToBytes::Zstd {
                    level: 1,
                    checksum: false,
                }),
                ..chunked(3)
            },
            kind: "int32",
        },
        Case {
            path: "float64",
            shape: vec![4],
            values: Arc::new(Float64Array::from(vec![
                1.5,
                f64::NAN,
                f64::INFINITY,
                -0.25,
            ])),
            opts: chunked(4),
            kind: "float64",
        },
        Case {
            path: "bool",
            shape: vec![3],
            values: Arc::new(BooleanArray::from(vec![true, false, true])),
            opts: chunked(2),
            kind: "bool",
        },
        Case {
            path: "datetime_ns",
            shape: vec![3],
            values: Arc::new(TimestampNanosecondArray::from(vec![
                Some(1_600_000_000_000_000_000),
                None,
                Some(0),
            ])),
            opts: chunked(2),
            kind: "datetime64[ns]",
        },
    ]
}

#[tokio::test]
async fn zarr_python_reads_what_zarrow_writes() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("written.zarr");
    let store = ZarrStore::open(root.to_str().unwrap()).unwrap();
    zarrow::write_group(&store, "", &Default::default())
        .await
        .unwrap();
    let cases = cases();
    for c in &cases {
        zarrow::write_array(&store, c.path, c.values.as_ref(), &c.shape, &c.opts)
            .await
            .unwrap();
    }
    // The arrow_vlen layout is zarrow's own; zarr-python does not know it, so only check that
    // zarrow reads it back (below) and leave it out of the zarr-python comparison.
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("read_back.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script).arg(&root);
    for c in &cases {
        cmd.arg(c.path);
    }
    let out = cmd.output().expect("run read_back.py");
    assert!(
        out.status.success(),
        "read_back.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries: Vec<Value> =
        serde_json::from_slice(&out.stdout).expect("read_back.py prints JSON");
    for c in &cases {
        let e = entries
            .iter()
            .find(|e| e["path"].as_str() == Some(c.path))
            .unwrap_or_else(|| panic!("{} missing from read_back output", c.path));
        let got = e["values"].as_array().unwrap();
        assert_eq!(got.len(), c.values.len(), "{}", c.path);
        let fill = c.opts.fill_value.clone();
        for (i, py) in got.iter().enumerate() {
            let mut want = json_value(c.values.as_ref(), i, c.kind);
            if want.is_null() && c.kind == "utf8" {
                // Nulls are written as the fill value.
                want = fill.clone().unwrap_or(json!(""));
            }
            assert!(
                values_equal(py, &want),
                "{}[{i}]: zarr-python read {py}, zarrow wrote {want}",
                c.path
            );
        }
    }
}

/// zarrow reads back every encoding it writes, including its own arrow_vlen (through the
/// synchronous reader, so this test is not async).
#[test]
fn zarrow_reads_what_it_writes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = ZarrStore::open(dir.path().to_str().unwrap()).unwrap();
    for (i, enc) in [
        VlenEncoding::Numcodecs,
        VlenEncoding::ArrowVlen { large: false },
        VlenEncoding::ArrowVlen { large: true },
    ]
    .into_iter()
    .enumerate()
    {
        for c in cases() {
            let path = format!("{i}_{}", c.path);
            let opts = ZarrWriteOptions {
                string_encoding: enc,
                ..c.opts.clone()
            };
            rt.block_on(zarrow::write_array(
                &store,
                &path,
                c.values.as_ref(),
                &c.shape,
                &opts,
            ))
            .unwrap();
            let loc = dir.path().join(&path);
            let (_, got) =
                crate::common::read_c_order(loc.to_str().unwrap(), zarrow::StringType::Utf8)
                    .unwrap();
            for j in 0..c.values.len() {
                let mut want = json_value(c.values.as_ref(), j, c.kind);
                if want.is_null() && c.kind == "utf8" {
                    want = c.opts.fill_value.clone().unwrap_or(json!(""));
                }
                let have = json_value(got.as_ref(), j, c.kind);
                assert!(values_equal(&want, &have), "{path}[{j}]: {have} vs {want}");
            }
        }
    }
}
