//! End-to-end tests of the `zarrow` binary over the fixtures in `tests/fixtures/data/` and the
//! sample store `data/pbmc_sample.zarr`. Every command, every output format (parsed back), and
//! errors (exit status 1, `error:` on stderr, never a panic or a backtrace).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::ipc::reader::{FileReader, StreamReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

const OBS: &str = "data/pbmc_sample.zarr/obs";
const FIXTURES: &str = "tests/fixtures/data";

/// The workspace root: every command runs there, with relative locations.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args(args)
        .current_dir(root())
        // a backtrace must not show up even when asked for
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("run zarrow")
}

/// Run, expect success, return stdout.
fn ok(args: &[&str]) -> String {
    let out = run(args);
    let stdout = String::from_utf8(out.stdout).expect("utf-8 stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "zarrow {args:?} failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    stdout
}

/// Run, expect failure with status 1 and a clean `error:` message; return stderr.
fn fails(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8(out.stderr).expect("utf-8 stderr");
    assert_eq!(
        out.status.code(),
        Some(1),
        "zarrow {args:?}: status {}, stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.starts_with("error: "),
        "zarrow {args:?}: stderr:\n{stderr}"
    );
    for bad in [
        "panicked",
        "backtrace",
        "Backtrace",
        "RUST_BACKTRACE",
        "internal error",
    ] {
        assert!(
            !stderr.contains(bad),
            "zarrow {args:?}: '{bad}' in stderr:\n{stderr}"
        );
    }
    stderr
}

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

/// Batches as NDJSON text (the format `zarrow sql --format ndjson` prints).
fn to_ndjson(batches: &[RecordBatch]) -> String {
    let mut buf = Vec::new();
    {
        let mut w = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow::json::writer::LineDelimited>(&mut buf);
        for b in batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }
    String::from_utf8(buf).unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad NDJSON line {l:?}: {e}")))
        .collect()
}

// ------------------------------------------------------------------------------------- tree

#[test]
fn tree_sample_store() {
    let out = ok(&["tree", "data/pbmc_sample.zarr"]);
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("pbmc_sample.zarr/"), "{out}");
    assert!(first.contains("group, zarr v3, consolidated"), "{out}");
    let line = |name: &str| {
        out.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no line with {name:?} in\n{out}"))
            .to_string()
    };
    let x = line("── X ");
    for part in [
        "float32",
        "[2000, 200]",
        "chunks [250, 200]",
        "bytes → zstd",
        "fill 0.0",
    ] {
        assert!(x.contains(part), "{part:?} not in {x:?}");
    }
    assert!(line("── obs/").contains("dataframe"));
    assert!(line("cell_type/").contains("categorical"));
    let cats = line("── categories");
    assert!(
        cats.starts_with("│   │   ├── categories") || cats.starts_with("│   │   └── categories"),
        "{cats:?}"
    );
    for part in ["string", "[8]", "vlen-utf8 → zstd", "fill \"\""] {
        assert!(cats.contains(part), "{part:?} not in {cats:?}");
    }
    assert!(line("── n_genes/").contains("nullable-integer"));
    let scalar = line("── description");
    assert!(
        scalar.contains("string") && scalar.contains(" [] ") && scalar.contains("chunks []"),
        "0-d array: {scalar}"
    );
    assert!(
        out.lines().last().unwrap().starts_with("└── varp/"),
        "{out}"
    );
}

#[test]
fn tree_sharded_and_v2_and_root_array() {
    let out = ok(&["tree", &fixture("anndata_v3_sharded.zarr/obs")]);
    let barcode = out.lines().find(|l| l.contains("barcode")).unwrap();
    assert!(barcode.contains("chunks [20] inner [20]"), "{barcode}");
    assert!(
        barcode.contains("sharding_indexed[vlen-utf8 → zstd]"),
        "{barcode}"
    );

    let out = ok(&["tree", &fixture("v3_strings.zarr")]);
    let line = out
        .lines()
        .find(|l| l.contains("string_sharded_2d"))
        .unwrap();
    assert!(
        line.contains("[10, 9]") && line.contains("chunks [6, 6] inner [3, 3]"),
        "{line}"
    );
    let line = out
        .lines()
        .find(|l| l.contains("string_transpose"))
        .unwrap();
    assert!(line.contains("transpose → vlen-utf8 → zstd"), "{line}");
    let line = out
        .lines()
        .find(|l| l.contains("string_fill_missing"))
        .unwrap();
    assert!(line.contains("fill \"missing\""), "{line}");

    let out = ok(&["tree", &fixture("xarray_v3.zarr")]);
    let t = out.lines().find(|l| l.contains("temperature")).unwrap();
    assert!(
        t.contains("float32") && t.contains("dims (time, station)") && t.contains("fill \"NaN\""),
        "{t}"
    );

    let out = ok(&["tree", &fixture("anndata_v2.zarr")]);
    assert!(out.lines().next().unwrap().contains("zarr v2"), "{out}");
    assert!(out.contains("categorical"), "{out}");

    let out = ok(&["tree", &fixture("v2_root_array.zarr")]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("v2_root_array.zarr  string  [9]  chunks [3]"),
        "{out}"
    );

    let out = ok(&["tree", &fixture("zarrs_vlen.zarr")]);
    assert!(out.contains("zarrs.vlen"), "{out}");
}

// ----------------------------------------------------------------------------------- schema

#[test]
fn schema_of_anndata_obs() {
    let out = ok(&["schema", OBS]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["column", "type", "nullable"]);
    let rows: Vec<Vec<String>> = out
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let mut parts: Vec<String> = l
                .split("  ")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            parts.truncate(3);
            parts
        })
        .collect();
    let col = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("no column {name} in\n{out}"))
            .clone()
    };
    assert_eq!(col("barcode")[1], "Utf8");
    assert_eq!(col("batch")[1], "Utf8");
    assert!(
        col("cell_type")[1].starts_with("Dictionary(Int8, Utf8)"),
        "{out}"
    );
    assert_eq!(col("cell_type")[2], "yes");
    assert_eq!(col("n_genes")[1], "Int64");
    assert_eq!(col("n_genes")[2], "yes");
    assert_eq!(col("pct_mito")[1], "Float64");
    assert_eq!(col("total_counts")[1], "Float32");

    let view = ok(&["schema", OBS, "--string-type", "view"]);
    assert!(
        view.lines()
            .any(|l| l.starts_with("batch") && l.contains("Utf8View")),
        "{view}"
    );
    let large = ok(&["schema", OBS, "--string-type", "large_utf8"]);
    assert!(
        large
            .lines()
            .any(|l| l.starts_with("batch") && l.contains("LargeUtf8")),
        "{large}"
    );
    let large = ok(&["schema", OBS, "--option", "string_type=large_utf8"]);
    assert!(
        large
            .lines()
            .any(|l| l.starts_with("batch") && l.contains("LargeUtf8")),
        "{large}"
    );
}

#[test]
fn schema_lists_left_out_arrays() {
    // The root of an AnnData store: X is the table; groups and arrays of other shapes are not.
    let out = ok(&["schema", "data/pbmc_sample.zarr"]);
    let (_, left) = out
        .split_once("\nleft out:\n")
        .unwrap_or_else(|| panic!("no left-out section:\n{out}"));
    assert!(!left.trim().is_empty(), "{out}");
    for line in left.lines() {
        assert!(line.starts_with("  "), "{line:?}");
        assert!(
            line.trim().split_once("  ").is_some(),
            "no reason in {line:?}"
        );
    }
}

#[test]
fn schema_of_arrays_and_xarray() {
    let out = ok(&["schema", &fixture("v3_strings.zarr/string_dimension_names")]);
    let names: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["row", "col", "string_dimension_names"], "{out}");

    let out = ok(&["schema", &fixture("xarray_v3.zarr")]);
    for c in ["time", "station", "temperature"] {
        assert!(out.lines().any(|l| l.starts_with(c)), "{c} missing:\n{out}");
    }
    let time = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("time "))
            .unwrap()
            .to_string()
    };
    assert!(time(&out).contains("Int64"), "{out}");
    let out = ok(&[
        "schema",
        &fixture("xarray_v3.zarr"),
        "--option",
        "decode_cf=true",
    ]);
    assert!(time(&out).contains("Timestamp"), "{out}");
}

// -------------------------------------------------------------------------------------- sql

const BY_TYPE: &str = "SELECT cell_type, count(*) AS cells FROM 'data/pbmc_sample.zarr/obs' \
                       GROUP BY cell_type ORDER BY cells DESC, cell_type";

#[test]
fn sql_table_format() {
    let out = ok(&["sql", BY_TYPE]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("+-"), "{out}");
    assert!(
        lines[1].contains("cell_type") && lines[1].contains("cells"),
        "{out}"
    );
    // 8 types and the unannotated cells, the header and 3 rules
    assert_eq!(lines.len(), 9 + 1 + 3, "{out}");
    assert!(
        lines[3].contains("| CD4 T ") && lines[3].contains("596"),
        "{out}"
    );
    assert!(out.contains("Megakaryocyte"), "{out}");
}

/// A result of several batches whose columns are checked cell by cell (structs, timestamps)
/// prints in the table and Markdown formats: each batch's cells are looked up in that batch.
#[test]
fn struct_results_of_several_batches_print() {
    // three chunks of 4 records: a batch each
    let query = format!(
        "SELECT records FROM '{}'",
        fixture("struct_v3.zarr/records")
    );
    for format in ["table", "markdown"] {
        let out = ok(&["sql", "--format", format, &query]);
        let rows = out.lines().filter(|l| l.contains("id: ")).count();
        assert_eq!(rows, 11, "{format}:\n{out}");
        assert!(out.contains("when: "), "{format}:\n{out}");
    }
}

#[test]
fn sql_csv_format() {
    let out = ok(&["sql", "--format", "csv", BY_TYPE]);
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows[0], "cell_type,cells");
    assert_eq!(rows[1], "CD4 T,596");
    assert_eq!(rows.len(), 10, "{out}");
    let total: u64 = rows[1..]
        .iter()
        .map(|r| r.rsplit(',').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 2000);
    assert!(
        rows.contains(&",23"),
        "unannotated cells are an empty field:\n{out}"
    );
}

#[test]
fn sql_json_format() {
    let out = ok(&["sql", "--format", "json", BY_TYPE]);
    let v: Value = serde_json::from_str(&out).expect("one JSON document");
    let rows = v.as_array().expect("a JSON array");
    assert_eq!(rows.len(), 9);
    assert_eq!(
        rows[0],
        serde_json::json!({"cell_type": "CD4 T", "cells": 596})
    );
    assert!(
        rows.contains(&serde_json::json!({"cell_type": null, "cells": 23})),
        "{out}"
    );

    // an empty result is an empty array
    let out = ok(&[
        "sql",
        "--format",
        "json",
        "SELECT * FROM 'data/pbmc_sample.zarr/obs' WHERE false",
    ]);
    assert_eq!(out.trim(), "[]");
}

#[test]
fn sql_ndjson_format() {
    let out = ok(&[
        "sql",
        "--format",
        "ndjson",
        "SELECT barcode, batch, n_genes FROM 'data/pbmc_sample.zarr/obs' WHERE n_genes IS NULL ORDER BY barcode",
    ]);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 17, "{out}");
    for r in &rows {
        assert!(r["n_genes"].is_null());
        assert!(
            r["barcode"].as_str().unwrap().ends_with("-1")
                || r["barcode"].as_str().unwrap().ends_with("-2")
        );
        assert!(matches!(r["batch"].as_str(), Some("donor_A" | "donor_B")));
    }
}

#[test]
fn sql_several_statements() {
    let sql = format!(
        "CREATE EXTERNAL TABLE obs STORED AS ZARR LOCATION '{OBS}'; \
         CREATE EXTERNAL TABLE var STORED AS ZARR LOCATION 'data/pbmc_sample.zarr/var'; \
         SELECT count(*) AS n FROM obs; \
         SELECT gene_symbol FROM var WHERE mito ORDER BY gene_symbol LIMIT 3;"
    );
    let out = ok(&["sql", "--format", "json", &sql]);
    let docs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        docs.len(),
        2,
        "one array per query, nothing for CREATE:\n{out}"
    );
    assert_eq!(docs[0], serde_json::json!([{"n": 2000}]));
    assert_eq!(
        docs[1],
        serde_json::json!([{"gene_symbol": "MT-ATP6"}, {"gene_symbol": "MT-CO1"}, {"gene_symbol": "MT-CO2"}])
    );

    let out = ok(&["sql", &sql]);
    assert_eq!(out.matches("+-").count(), 6, "two tables:\n{out}");

    let out = ok(&["sql", "--format", "csv", &sql]);
    assert_eq!(out, "n\n2000\n\ngene_symbol\nMT-ATP6\nMT-CO1\nMT-CO2\n");
}

#[test]
fn sql_settings_and_options() {
    let out = ok(&[
        "sql",
        "--format",
        "csv",
        "SET zarrow.string_type = 'view'; SELECT arrow_typeof(batch) AS t FROM 'data/pbmc_sample.zarr/obs' LIMIT 1",
    ]);
    assert_eq!(out, "t\nUtf8View\n");
    let out = ok(&[
        "sql",
        "--format",
        "csv",
        "--string-type",
        "large_utf8",
        "SELECT arrow_typeof(batch) AS t FROM 'data/pbmc_sample.zarr/obs' LIMIT 1",
    ]);
    assert_eq!(out, "t\nLargeUtf8\n");
}

#[test]
fn sql_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("types.csv");
    let out = ok(&[
        "sql",
        "--format",
        "csv",
        "--output",
        path.to_str().unwrap(),
        BY_TYPE,
    ]);
    assert!(out.is_empty(), "nothing on stdout: {out}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("cell_type,cells\nCD4 T,596\n"), "{text}");
}

#[test]
fn sql_over_fixtures() {
    // zarrs.vlen strings, every string encoding of zarr-python, an xarray group, an AnnData store
    let out = ok(&[
        "sql",
        "--format",
        "csv",
        &format!(
            "SELECT count(*) AS n FROM '{}'",
            fixture("v3_strings.zarr/string_2d")
        ),
    ]);
    assert_eq!(out, "n\n35\n");
    let out = ok(&[
        "sql",
        "--format",
        "ndjson",
        &format!(
            "SELECT * FROM '{}' ORDER BY time, station",
            fixture("xarray_v3.zarr")
        ),
    ]);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 50, "{out}");
    assert!(rows[0].get("temperature").is_some(), "{out}");
    let out = ok(&[
        "sql",
        "--format",
        "json",
        &format!("SELECT cell_type, count(*) AS n FROM '{}' GROUP BY cell_type ORDER BY cell_type NULLS LAST", fixture("anndata_v3.zarr/obs")),
    ]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        serde_json::json!([
            {"cell_type": "B", "n": 4}, {"cell_type": "NK", "n": 4}, {"cell_type": "T", "n": 8}, {"cell_type": null, "n": 4}
        ])
    );
    let zarrs = ok(&["tree", &fixture("zarrs_vlen.zarr")]);
    let first_array = zarrs
        .lines()
        .skip(1)
        .find(|l| l.contains("string"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_string();
    let out = ok(&[
        "sql",
        "--format",
        "csv",
        &format!(
            "SELECT count(*) AS n FROM '{}/{first_array}'",
            fixture("zarrs_vlen.zarr")
        ),
    ]);
    assert!(out.starts_with("n\n"), "{out}");
}

// ----------------------------------------------------------------------------------- export

const QUERY: &str = "SELECT barcode, cell_type, batch, n_genes, pct_mito FROM t \
                     WHERE batch = 'donor_B' ORDER BY barcode";
/// The same query over the location, for `zarrow sql`.
fn same_query() -> String {
    QUERY.replace("FROM t", &format!("FROM '{OBS}'"))
}

fn export(dir: &Path, file: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(file);
    let mut args = vec![
        "export",
        OBS,
        "--output",
        path.to_str().unwrap(),
        "--query",
        QUERY,
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // nothing on stdout; no progress on stderr when it is not a terminal
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    path
}

#[test]
fn export_ipc_file_and_stream() {
    let dir = tempfile::tempdir().unwrap();
    let expected = ok(&["sql", "--format", "ndjson", &same_query()]);
    assert_eq!(expected.lines().count(), 1000);

    let path = export(dir.path(), "b.arrow", &[]);
    let reader = FileReader::try_new(File::open(&path).unwrap(), None).unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(to_ndjson(&batches), expected);
    let schema = batches[0].schema();
    assert!(matches!(
        schema.field_with_name("cell_type").unwrap().data_type(),
        arrow::datatypes::DataType::Dictionary(..)
    ));

    let path = export(dir.path(), "b.arrows", &[]);
    let reader = StreamReader::try_new(File::open(&path).unwrap(), None).unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(to_ndjson(&batches), expected);

    // explicit format wins over the extension
    let path = export(dir.path(), "b.bin", &["--format", "arrow-stream"]);
    let reader = StreamReader::try_new(File::open(&path).unwrap(), None).unwrap();
    assert_eq!(reader.map(|b| b.unwrap().num_rows()).sum::<usize>(), 1000);
}

#[test]
fn export_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let expected = ok(&["sql", "--format", "ndjson", &same_query()]);
    let path = export(dir.path(), "b.parquet", &[]);
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(to_ndjson(&batches), expected);
    // and DataFusion reads it back through the same session
    let out = ok(&[
        "sql",
        "--format",
        "csv",
        &format!(
            "SELECT count(*) AS n, count(n_genes) AS g FROM '{}'",
            path.display()
        ),
    ]);
    let g = json_lines(&expected)
        .iter()
        .filter(|r| !r["n_genes"].is_null())
        .count();
    assert_eq!(out, format!("n,g\n1000,{g}\n"));
}

#[test]
fn export_csv_and_ndjson() {
    let dir = tempfile::tempdir().unwrap();
    let path = export(dir.path(), "b.csv", &[]);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        ok(&["sql", "--format", "csv", &same_query()])
    );
    let path = export(dir.path(), "b.ndjson", &[]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, ok(&["sql", "--format", "ndjson", &same_query()]));
    assert_eq!(json_lines(&text).len(), 1000);
    let path = export(dir.path(), "b.jsonl", &[]);
    assert_eq!(
        json_lines(&std::fs::read_to_string(&path).unwrap()).len(),
        1000
    );
}

#[test]
fn export_whole_table_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("obs.arrow");
    ok(&["export", OBS, "--output", path.to_str().unwrap()]);
    let reader = FileReader::try_new(File::open(&path).unwrap(), None).unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(
        batches.iter().map(RecordBatch::num_rows).sum::<usize>(),
        2000
    );
    // without a query the rows keep the store's order
    let barcodes: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let a = b
                .column_by_name("barcode")
                .unwrap()
                .as_string::<i32>()
                .clone();
            (0..a.len()).map(move |i| a.value(i).to_string())
        })
        .collect();
    let expected = ok(&[
        "sql",
        "--format",
        "csv",
        "SELECT barcode FROM 'data/pbmc_sample.zarr/obs/barcode' ORDER BY dim_0",
    ]);
    assert_eq!(
        barcodes.join("\n"),
        expected.trim_start_matches("barcode\n").trim_end()
    );

    // a 2-D array, with table options
    let path = dir.path().join("x.parquet");
    ok(&[
        "export",
        "data/pbmc_sample.zarr/X",
        "--output",
        path.to_str().unwrap(),
    ]);
    let meta = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
    assert_eq!(meta.metadata().file_metadata().num_rows(), 2000 * 200);

    let path = dir.path().join("strings.arrow");
    ok(&[
        "export",
        &fixture("v3_strings.zarr/string_zstd"),
        "--output",
        path.to_str().unwrap(),
        "--string-type",
        "view",
    ]);
    let reader = FileReader::try_new(File::open(&path).unwrap(), None).unwrap();
    assert_eq!(
        reader.schema().field(1).data_type(),
        &arrow::datatypes::DataType::Utf8View
    );
}

#[test]
fn export_to_stdout() {
    let out = Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args([
            "export",
            "data/pbmc_sample.zarr/var",
            "--output",
            "-",
            "--format",
            "arrow-stream",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reader = StreamReader::try_new(std::io::Cursor::new(out.stdout), None).unwrap();
    assert_eq!(reader.map(|b| b.unwrap().num_rows()).sum::<usize>(), 200);
}

#[test]
fn closed_stdout_is_not_an_error() {
    use std::io::Read;
    use std::process::Stdio;
    // 400,000 rows of CSV; the reader goes away after the first bytes (as `| head` does)
    let mut child = Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args([
            "sql",
            "--format",
            "csv",
            "SELECT * FROM 'data/pbmc_sample.zarr/X'",
        ])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    stdout.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"dim_0,dim_1,X\n"));
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ----------------------------------------------------------------------------------- errors

#[test]
fn errors_are_clean() {
    let err = fails(&["tree", "no/such/store.zarr"]);
    assert!(err.contains("no/such/store.zarr"), "{err}");
    let err = fails(&["schema", "no/such/store.zarr"]);
    assert!(err.contains("no/such/store.zarr"), "{err}");
    fails(&["sql", "SELECT * FROM 'no/such/store.zarr'"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.arrow");
    fails(&[
        "export",
        "no/such/store.zarr",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(!out.exists(), "no file left behind");

    let err = fails(&["sql", "SELEC cell_type FROM t"]);
    assert!(err.to_lowercase().contains("sql"), "{err}");
    let err = fails(&["sql", "SELECT nope FROM 'data/pbmc_sample.zarr/obs'"]);
    assert!(err.contains("nope"), "{err}");
    let err = fails(&["sql", "SELECT 1; SELECT * FROM missing_table"]);
    assert!(err.contains("statement 2 of 2"), "{err}");

    let err = fails(&["sql", "--format", "xml", "SELECT 1"]);
    assert!(err.contains("xml"), "{err}");
    let err = fails(&[
        "export",
        OBS,
        "--output",
        out.to_str().unwrap(),
        "--format",
        "xml",
    ]);
    assert!(err.contains("xml"), "{err}");
    let bad = dir.path().join("x.xlsx");
    let err = fails(&["export", OBS, "--output", bad.to_str().unwrap()]);
    assert!(err.contains(".xlsx") && err.contains("--format"), "{err}");
    assert!(!bad.exists());
    let err = fails(&["schema", OBS, "--option", "bogus=1"]);
    assert!(err.contains("bogus"), "{err}");
    let err = fails(&["schema", OBS, "--option", "novalue"]);
    assert!(err.contains("KEY=VALUE"), "{err}");
    let err = fails(&["schema", OBS, "--string-type", "utf16"]);
    assert!(err.contains("utf16"), "{err}");
    let err = fails(&[
        "export",
        OBS,
        "--output",
        out.to_str().unwrap(),
        "--query",
        "SELECT * FROM nope",
    ]);
    assert!(err.contains("nope"), "{err}");
    assert!(!out.exists(), "no file left behind");
    fails(&["export", OBS, "--output", "/no/such/dir/x.arrow"]);

    // A value that cannot be shown (a timestamp past chrono's range) fails the command in
    // every text format, naming the column, instead of printing "ERROR: …" into the cell.
    let huge = "SELECT arrow_cast(9223372036854775807, 'Timestamp(Second, None)') AS t";
    for format in ["table", "csv", "json", "ndjson", "markdown"] {
        let err = fails(&["sql", "--format", format, huge]);
        assert!(err.contains("9223372036854775807"), "{format}: {err}");
    }
    let err = fails(&["sql", huge]);
    assert!(err.contains("column 't' at row 0"), "{err}");
}

#[test]
fn help_and_version() {
    let out = ok(&["--help"]);
    for cmd in ["sql", "schema", "tree", "export"] {
        assert!(out.contains(cmd), "{out}");
    }
    assert!(ok(&["--version"]).starts_with("zarrow "));
    assert!(ok(&["export", "--help"]).contains("arrow-stream"));
}

/// The same queries over a remote base and over the local fixtures give the same CSV.
fn same_over(base: &str) {
    let queries = [
        // AnnData without consolidated metadata at the node: children from its attributes.
        "SELECT cell_type, count(*) AS n FROM '{}/anndata_v3_sharded.zarr/obs' \
         GROUP BY cell_type ORDER BY n DESC, cell_type",
        "SELECT * FROM '{}/anndata_v2.zarr/var' ORDER BY 1",
        // xarray group table: coordinates, broadcasting, strings.
        "SELECT station, station_name, avg(temperature) AS t FROM '{}/xarray_v3.zarr' \
         GROUP BY station, station_name ORDER BY station",
        // sharded strings, pruned by a filter on the dimension
        "SELECT * FROM '{}/v3_strings.zarr/string_sharded' WHERE dim_0 BETWEEN 3 AND 30 ORDER BY dim_0",
    ];
    let local = format!("{}/{FIXTURES}", root().display());
    for q in queries {
        let remote_out = ok(&["sql", "--format", "csv", &q.replace("{}", base)]);
        let local_out = ok(&["sql", "--format", "csv", &q.replace("{}", &local)]);
        assert!(remote_out.lines().count() > 1, "{q}: no rows");
        assert_eq!(remote_out, local_out, "{q} over {base}");
    }
    // the schema command over the remote store too
    let schema = ok(&["schema", &format!("{base}/xarray_v3.zarr")]);
    assert!(schema.contains("station_name"), "{schema}");
}

/// Parquet, CSV, JSON and Arrow files by location over a remote base, as datafusion-cli reads
/// them: `FROM '<url>'` and `CREATE EXTERNAL TABLE … LOCATION '<url>'` give what the local files
/// give.
fn same_files_over(base: &str) {
    let local = format!("{}/{FIXTURES}", root().display());
    for (file, format) in [
        ("obs.parquet", "PARQUET"),
        ("obs.csv", "CSV"),
        ("obs.json", "JSON"),
        ("obs.arrow", "ARROW"),
    ] {
        let by_location = "SELECT cell_type, count(*) AS n, sum(n_genes) AS g \
             FROM '{}/files/FILE' GROUP BY cell_type ORDER BY cell_type"
            .replace("FILE", file);
        let remote_out = ok(&["sql", "--format", "csv", &by_location.replace("{}", base)]);
        let local_out = ok(&["sql", "--format", "csv", &by_location.replace("{}", &local)]);
        assert_eq!(remote_out.lines().count(), 6, "{file}: {remote_out}");
        assert_eq!(remote_out, local_out, "{file} over {base}");
        let external = format!(
            "CREATE EXTERNAL TABLE t STORED AS {format} LOCATION '{base}/files/{file}'; \
             SELECT count(*) AS n, max(barcode) AS b FROM t"
        );
        let out = ok(&["sql", "--format", "csv", &external]);
        assert_eq!(out, "n,b\n1000,cell-00999\n", "{file} over {base}");
    }
}

#[test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
fn sql_over_http() {
    let base = zarrow_testkit::loopback("ZARROW_TEST_HTTP");
    same_over(&base);
    same_files_over(&base);
}

#[test]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
fn sql_over_s3() {
    let base = zarrow_testkit::loopback("ZARROW_TEST_S3");
    same_over(&base);
    same_files_over(&base);
}

#[test]
fn sql_verbose_prints_what_the_scan_did() {
    let out = run(&[
        "sql",
        "--verbose",
        "SELECT count(*) FROM 'tests/fixtures/data/v3_strings.zarr/string_2d' WHERE dim_0 >= 6 AND string_2d <> ''",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("scan of "))
        .unwrap_or_default();
    for metric in [
        "chunks_pruned=6",
        "chunks_read=3",
        "rows_out=5",
        "requests=",
        "bytes_fetched=",
        "fetch_time=",
        "decompress_time=",
        "decode_time=",
    ] {
        assert!(line.contains(metric), "{metric} missing: {err}");
    }
    // then how long the statement took
    let elapsed = err
        .lines()
        .skip_while(|l| !l.starts_with("scan of "))
        .find_map(|l| l.strip_prefix("elapsed ")?.strip_suffix(" s"))
        .and_then(|s| s.parse::<f64>().ok());
    assert!(elapsed.is_some_and(|s| s > 0.0), "no elapsed line: {err}");
}

/// `--verbose` names the snapshot a write to an Icechunk repository committed (the one its
/// result's `snapshot_id` gives) and the snapshot a scan of a repository read.
#[test]
fn sql_verbose_prints_the_snapshots_written_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let t = format!("icechunk+file://{}/r.icechunk@main/t", dir.path().display());
    let copy =
        format!("COPY (SELECT 1 AS id) TO '{t}' STORED AS ZARR OPTIONS (create_repository true)");
    let out = run(&["sql", "--verbose", "--format", "csv", &copy]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = stdout
        .lines()
        .nth(1)
        .and_then(|row| row.strip_prefix("1,"))
        .unwrap_or_else(|| panic!("no count,snapshot_id row: {stdout}"));
    assert!(stdout.starts_with("count,snapshot_id"), "{stdout}");
    assert!(
        err.contains(&format!("committed snapshot {id} to {t}")),
        "{err}"
    );
    let sum = format!("SELECT sum(id) FROM '{t}'");
    let out = run(&["sql", "--verbose", &sum]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("scan of ") && l.contains(&format!(" at snapshot {id}: "))),
        "{err}"
    );
}

/// A v2 int64 array of `chunks` uncompressed chunks of `chunk` pseudo-random values, written
/// by hand (the layout is numpy's `<i8` in C order, no compressor), and the values' sum.
fn big_int64_store(dir: &Path, chunks: usize, chunk: usize) -> (PathBuf, i128) {
    let store = dir.join("big.zarr");
    std::fs::create_dir_all(&store).unwrap();
    let zarray = serde_json::json!({
        "zarr_format": 2, "shape": [chunks * chunk], "chunks": [chunk], "dtype": "<i8",
        "compressor": null, "filters": null, "fill_value": 0, "order": "C",
    });
    std::fs::write(store.join(".zarray"), zarray.to_string()).unwrap();
    let (mut state, mut sum) = (0x9e37_79b9_7f4a_7c15u64, 0i128);
    for c in 0..chunks {
        let mut bytes = Vec::with_capacity(chunk * 8);
        for _ in 0..chunk {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let v = (state >> 24) as i64 % 1_000_000_007;
            sum += v as i128;
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(store.join(c.to_string()), bytes).unwrap();
    }
    (store, sum)
}

#[test]
fn memory_limit_bounds_scans_and_sorts_spill() {
    let dir = tempfile::tempdir().unwrap();
    // 8 chunks of 4 MiB.
    let (store, sum) = big_int64_store(dir.path(), 8, 512 * 1024);
    let store = store.to_str().unwrap();
    // Under a limit smaller than one chunk the scan cannot hold its chunk: a clean error that
    // names the chunk and the table, never an allocation past the limit.
    let sql = format!("SELECT count(*), min(value), max(value) FROM '{store}'");
    let err = fails(&["sql", "--memory-limit", "2M", &sql]);
    assert!(err.contains("Resources exhausted"), "{err}");
    assert!(
        err.contains("reading chunk [0]") || err.contains("reading chunk ["),
        "{err}"
    );
    assert!(err.contains("ZarrScan["), "{err}");
    assert!(err.contains("big.zarr"), "{err}");
    // With room for it, the same query answers.
    let out = ok(&["sql", "--memory-limit", "64M", "--format", "csv", &sql]);
    assert!(out.lines().nth(1).unwrap().starts_with("4194304,"), "{out}");
    // A sort bigger than the limit (32 MiB of values under 40 MiB, sorting needing about twice
    // the data) spills — fair pool: the scan's reservation, 8 MiB for a chunk and one read
    // ahead, comes first, the sort gets the rest — and its result is complete and ordered.
    // One partition, so DataFusion's merge (which cannot spill) gets its default 10 MiB.
    let sorted = dir.path().join("sorted.csv");
    let sort_sql = format!("SELECT value FROM '{store}' ORDER BY value");
    let one_partition = "SET datafusion.execution.target_partitions = 1";
    ok(&[
        "sql",
        "--memory-limit",
        "40M",
        "--mem-pool-type",
        "fair",
        "--format",
        "csv",
        "--output",
        sorted.to_str().unwrap(),
        &format!("{one_partition}; {sort_sql}"),
    ]);
    let text = std::fs::read_to_string(&sorted).unwrap();
    let values: Vec<i64> = text.lines().skip(1).map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), 8 * 512 * 1024);
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "not sorted");
    assert_eq!(values.iter().map(|&v| v as i128).sum::<i128>(), sum);
    let plan = ok(&[
        "sql",
        "--memory-limit",
        "40M",
        "--mem-pool-type",
        "fair",
        &format!("{one_partition}; EXPLAIN ANALYZE {sort_sql}"),
    ]);
    let spills = plan
        .split("spill_count=")
        .skip(1)
        .filter_map(|s| {
            s.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum::<u64>();
    assert!(spills > 0, "the sort did not spill:\n{plan}");
    // A size that is no size is a usage error.
    let err = fails(&["sql", "--memory-limit", "lots", "SELECT 1"]);
    assert!(
        err.contains("invalid value 'lots' for '--memory-limit"),
        "{err}"
    );
}

#[test]
fn chunk_size_limit_is_an_option() {
    // The per-chunk cap on decoded strings (2 GiB) can be lowered (or raised) from the
    // environment; past it a chunk is an error naming it, not an allocation.
    let sql = format!("SELECT count(barcode) FROM '{OBS}'");
    let out = Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args(["sql", &sql])
        .current_dir(root())
        .env("ZARROW_MAX_CHUNK_BYTES", "100")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("barcode") && stderr.contains("chunk") && stderr.contains("100"),
        "{stderr}"
    );
    ok(&["sql", &sql]);
    // The same limit as a table option (which wins over the environment).
    let err = fails(&["sql", "--option", "max_chunk_bytes=100", &sql]);
    assert!(err.contains("barcode") && err.contains("100"), "{err}");
    let raised = Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args(["sql", "--option", "max_chunk_bytes=1000000", &sql])
        .current_dir(root())
        .env("ZARROW_MAX_CHUNK_BYTES", "100")
        .output()
        .unwrap();
    assert!(
        raised.status.success(),
        "{}",
        String::from_utf8_lossy(&raised.stderr)
    );
    // The metadata limit holds for `tree` too; a variable that does not parse is named.
    for (var, value, args, says) in [
        (
            "ZARROW_MAX_METADATA_BYTES",
            "10",
            ["tree", OBS],
            "max_metadata_bytes",
        ),
        (
            "ZARROW_MAX_ITEM_BYTES",
            "lots",
            ["tree", OBS],
            "ZARROW_MAX_ITEM_BYTES",
        ),
        ("ZARROW_TIMEOUT", "lots", ["tree", OBS], "ZARROW_TIMEOUT"),
        (
            "ZARROW_TIMEOUT",
            "lots",
            ["sql", "SELECT 1"],
            "ZARROW_TIMEOUT",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_zarrow"))
            .args(args)
            .current_dir(root())
            .env(var, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{var}={value}: {stderr}");
        assert!(stderr.contains(says), "{var}={value}: {stderr}");
    }
}

#[test]
fn a_cluster_that_cannot_be_reached_is_named() {
    // Port 1 on loopback: nothing listens there. (A running cluster is tested in
    // crates/zarrow-ballista/tests/integration/cluster.rs.)
    let err = fails(&["sql", "--cluster", "df://127.0.0.1:1", "SELECT 1"]);
    assert!(err.contains("on the cluster at df://127.0.0.1:1"), "{err}");
    assert!(err.to_lowercase().contains("connect"), "{err}");
    let err = fails(&["sql", "--cluster", "not a url", "SELECT 1"]);
    assert!(err.contains("not a url"), "{err}");
}

/// The files of a directory tree with their contents: what a failed command must not change.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path, bytes));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_failing_command_leaves_its_output_path_alone() {
    let dir = tempfile::tempdir().unwrap();
    // An existing file that a failing query, a failing export and an export whose query fails
    // half way must leave as it was (and no temporary file behind).
    let kept = dir.path().join("kept.csv");
    std::fs::write(&kept, "precious\n").unwrap();
    let kept_s = kept.to_str().unwrap();
    fails(&["sql", "--output", kept_s, "SELECT * FROM no_such_table"]);
    fails(&[
        "sql",
        "--format",
        "csv",
        "--output",
        kept_s,
        &format!("{BY_TYPE}; SELECT * FROM no_such_table"),
    ]);
    fails(&["export", "no/such.zarr", "--output", kept_s]);
    // fails while rows are being written: a cast error in the middle of the stream
    fails(&[
        "export",
        OBS,
        "--output",
        kept_s,
        "--query",
        "SELECT barcode, CAST(cell_type AS INT) AS n FROM t",
    ]);
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "precious\n");
    let new = dir.path().join("new.parquet");
    fails(&["export", "no/such.zarr", "--output", new.to_str().unwrap()]);
    assert!(!new.exists());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["kept.csv"], "a temporary file was left behind");

    // Success replaces the file, keeping its permissions.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
    ok(&["sql", "--format", "csv", "--output", kept_s, BY_TYPE]);
    let text = std::fs::read_to_string(&kept).unwrap();
    assert!(text.starts_with("cell_type,cells\n"), "{text}");
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn outputs_that_are_not_files_are_refused_or_written_in_place() {
    // /dev/null: a character device, written without truncating or removing it, even when the
    // query fails.
    ok(&["sql", "--output", "/dev/null", BY_TYPE]);
    fails(&[
        "sql",
        "--output",
        "/dev/null",
        "SELECT * FROM no_such_table",
    ]);
    fails(&[
        "export",
        "no/such.zarr",
        "--output",
        "/dev/null",
        "--format",
        "csv",
    ]);
    let meta = std::fs::metadata("/dev/null").expect("/dev/null still exists");
    use std::os::unix::fs::FileTypeExt;
    assert!(meta.file_type().is_char_device());
    // A directory and a FIFO are refused with what they are.
    let dir = tempfile::tempdir().unwrap();
    let err = fails(&["sql", "--output", dir.path().to_str().unwrap(), BY_TYPE]);
    assert!(err.contains("is a directory"), "{err}");
    let fifo = dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let err = fails(&["sql", "--output", fifo.to_str().unwrap(), BY_TYPE]);
    assert!(err.contains("is a FIFO"), "{err}");
}

#[test]
fn an_output_inside_the_store_being_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("copy.zarr");
    Command::new("cp")
        .args(["-r", "data/pbmc_sample.zarr"])
        .arg(&store)
        .current_dir(root())
        .status()
        .unwrap();
    let before = snapshot(&store);
    let obs = store.join("obs");
    let obs_s = obs.to_str().unwrap();
    // a chunk file of the store itself, a new file in a sibling array, the store's root
    let chunk = obs.join("pct_mito/c/0");
    assert!(chunk.is_file(), "{}", chunk.display());
    for output in [
        chunk.clone(),
        store.join("X").join("new.csv"),
        store.join("out.parquet"),
    ] {
        let out_s = output.to_str().unwrap();
        let err = fails(&["export", obs_s, "--output", out_s, "--format", "csv"]);
        assert!(err.contains("inside the store"), "{err}");
        let sql = format!("SELECT * FROM '{obs_s}'");
        let err = fails(&["sql", "--output", out_s, &sql]);
        assert!(err.contains("inside the store"), "{err}");
    }
    assert_eq!(snapshot(&store), before, "the store changed");
    // Beside the store is fine.
    ok(&[
        "export",
        obs_s,
        "--output",
        dir.path().join("obs.csv").to_str().unwrap(),
    ]);
}

#[test]
fn names_longer_than_the_formatter_allows_are_shortened() {
    // A dimension name (so a column of the table) and a struct field name 70,000 characters
    // long (a file system refuses such child keys; object stores do not, and those go through
    // the same line): tree and schema print them cut, and do not panic in the formatter's
    // width.
    let dir = tempfile::tempdir().unwrap();
    let long = "n".repeat(70_000);
    let store = dir.path().join("long.zarr");
    std::fs::create_dir_all(store.join("a")).unwrap();
    std::fs::write(
        store.join("zarr.json"),
        r#"{"zarr_format":3,"node_type":"group","attributes":{}}"#,
    )
    .unwrap();
    let array = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [2],
        "data_type": {"name": "struct", "configuration": {"fields": [
            {"name": long.clone(), "data_type": "int32"}
        ]}},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": "AAAAAA==",
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "dimension_names": [long.clone()]
    });
    std::fs::write(
        store.join("a").join("zarr.json"),
        serde_json::to_vec(&array).unwrap(),
    )
    .unwrap();
    let location = store.join("a");
    for args in [
        ["tree", store.to_str().unwrap()],
        ["tree", location.to_str().unwrap()],
        ["schema", location.to_str().unwrap()],
    ] {
        let out = ok(&args);
        assert!(out.contains("nnn…"), "{args:?}: {out}");
        assert!(
            out.lines().all(|l| l.chars().count() < 1000),
            "{args:?}: {out}"
        );
    }
}

// ------------------------------------------------------------- files, stdin and the shell

/// Run with `stdin` piped in.
fn run_with_stdin(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zarrow");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn sql_files_and_stdin_name_the_failing_line() {
    let dir = tempfile::tempdir().unwrap();
    let setup = dir.path().join("setup.sql");
    std::fs::write(
        &setup,
        format!(
            "-- the obs table\nCREATE EXTERNAL TABLE obs\n  STORED AS ZARR LOCATION '{OBS}';\n"
        ),
    )
    .unwrap();
    let query = dir.path().join("query.sql");
    std::fs::write(
        &query,
        "SELECT count(*) AS n FROM obs;\n\n/* a ; in a comment */\nSELECT 'a;b' AS s;\n",
    )
    .unwrap();
    // -f is --file, repeatable, one session: the table made by the first file is in the second
    let out = ok(&[
        "sql",
        "--format",
        "csv",
        "-f",
        setup.to_str().unwrap(),
        "--file",
        query.to_str().unwrap(),
    ]);
    assert_eq!(out, "n\n2000\n\ns\na;b\n");

    // the first failing statement stops the command; the error names its line and file
    let bad = dir.path().join("bad.sql");
    std::fs::write(
        &bad,
        "SELECT 1 AS one;\n\nSELECT nope\n  FROM obs;\nSELECT 2 AS two;\n",
    )
    .unwrap();
    let out = run(&[
        "sql",
        "--format",
        "csv",
        "-f",
        setup.to_str().unwrap(),
        "-f",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "one\n1\n", "statements before the failure ran");
    assert!(
        stderr.starts_with("error: statement 2 of 3, at line 3 of '") && stderr.contains("bad.sql"),
        "{stderr}"
    );
    assert!(stderr.contains("nope"), "{stderr}");

    // SQL piped on stdin runs and prints; a failure names its line of standard input
    let out = run_with_stdin(
        &["sql", "--format", "csv"],
        "SELECT 1 AS a;\nSELECT 2 AS b,\n  3 AS c;\n",
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a\n1\n\nb,c\n2,3\n");
    let out = run_with_stdin(&["sql"], "SELECT 1;\n\n\nSELECT * FROM missing_table;\n");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: statement 2 of 2, at line 4 of standard input, failed"),
        "{stderr}"
    );
    // `-f -` is standard input too
    let out = run_with_stdin(&["sql", "--format", "csv", "-f", "-"], "SELECT 7 AS x");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "x\n7\n");
    // nothing to run is an error
    let out = run_with_stdin(&["sql"], "-- nothing\n");
    assert_eq!(out.status.code(), Some(1));
    // a query and a file together are refused
    fails(&["sql", "-f", setup.to_str().unwrap(), "SELECT 1"]);
}

#[test]
fn sql_backslash_commands() {
    let sql = format!(
        "CREATE EXTERNAL TABLE obs STORED AS ZARR LOCATION '{OBS}'; \\d; \\d obs\n\\q\nSELECT 1"
    );
    let out = ok(&["sql", "--format", "csv", &sql]);
    let (tables, columns) = out.split_once("\n\n").unwrap();
    assert_eq!(
        tables,
        "table_schema,table_name,table_type\npublic,obs,Base"
    );
    assert!(
        columns
            .starts_with("column_name,data_type,is_nullable\nbarcode,Utf8,YES\ndim_0,Int64,NO\n"),
        "{columns}"
    );
    assert!(columns.contains("cell_type,"), "{columns}");
    // \q stopped before the last statement
    assert!(!out.contains("Int64(1)"), "{out}");
    let err = fails(&["sql", "\\d nosuch"]);
    assert!(err.contains("nosuch") && err.contains("\\d"), "{err}");
    let err = fails(&["sql", "\\x"]);
    assert!(err.contains("unknown command"), "{err}");
}

#[test]
fn sql_markdown_format() {
    let out = ok(&[
        "sql",
        "--format",
        "markdown",
        "SELECT 'a|b' AS \"x|y\", CAST(NULL AS INT) AS n, 3 AS z; SELECT 1 AS one WHERE false",
    ]);
    assert_eq!(
        out,
        "| x\\|y | n | z |\n|---|---|---|\n| a\\|b |  | 3 |\n\n| one |\n|---|\n"
    );
    let out = ok(&["sql", "--format", "markdown", BY_TYPE]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "| cell_type | cells |");
    assert_eq!(lines[2], "| CD4 T | 596 |");
    assert_eq!(lines.len(), 2 + 9, "{out}");
}

#[test]
fn version_and_completions() {
    let out = ok(&["--version"]);
    assert!(
        out.starts_with("zarrow ") && out.contains("DataFusion 5") && out.contains("Arrow 5"),
        "{out}"
    );
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef zarrow"),
        ("fish", "complete -c zarrow"),
    ] {
        let out = ok(&["completions", shell]);
        assert!(out.contains(marker), "{shell}: {out}");
        assert!(out.contains("--memory-limit"), "{shell}");
    }
    fails(&["completions", "cmd.exe"]);
}

#[test]
fn errors_give_hints_for_common_mistakes() {
    let err = fails(&[
        "sql",
        "SELECT \"Cell_Type\" FROM 'data/pbmc_sample.zarr/obs'",
    ]);
    assert_eq!(err.lines().count(), 2, "one line and a hint: {err}");
    assert!(
        err.lines()
            .nth(1)
            .unwrap()
            .contains("hint: the column is cell_type"),
        "{err}"
    );
    let uns = fixture("anndata_uns_v3.zarr/uns");
    let err = fails(&["sql", &format!("SELECT * FROM '{uns}'")]);
    assert!(
        err.contains(&format!(
            "hint: '{uns}' is a group of groups (rank_genes_groups)"
        )) && err.contains(&format!("SELECT * FROM '{uns}/rank_genes_groups'")),
        "{err}"
    );
    let err = fails(&["sql", &format!("CREATE EXTERNAL TABLE t LOCATION '{OBS}'")]);
    assert!(
        err.contains("hint: ") && err.contains("STORED AS ZARR"),
        "{err}"
    );
    let err = fails(&[
        "sql",
        &format!("CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '{OBS}'; SELECT * FROM t"),
    ]);
    assert!(
        err.contains("hint: for a zarr location use STORED AS ZARR"),
        "{err}"
    );
    let err = fails(&["sql", "SELECT * FROM pbmc_sample.zarr"]);
    assert!(
        err.contains(
            "hint: 'pbmc_sample.zarr' looks like a zarr location: SELECT … FROM 'pbmc_sample.zarr'"
        ),
        "{err}"
    );
    let err = fails(&["sql", "SELECT * FROM data/pbmc_sample.zarr/obs"]);
    assert!(
        err.contains("hint: a location goes in single quotes"),
        "{err}"
    );
}

/// The shell, driven in a pseudo-terminal: multi-line statements, `\d`, tab completion of a
/// keyword and a table, an error that does not end the shell, the progress of a long scan,
/// Ctrl-C cancelling a running query (the shell stays), history saved under `$XDG_DATA_HOME`,
/// `\q`.
#[test]
fn shell_in_a_pseudo_terminal() {
    use expectrl::{ControlCode, Eof, Expect, Regex, Session};
    let data = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zarrow"));
    cmd.arg("sql")
        .current_dir(root())
        .env("XDG_DATA_HOME", data.path())
        .env("TERM", "xterm");
    let mut shell = match Session::spawn(cmd) {
        Ok(s) => s,
        Err(e) => {
            zarrow_testkit::skip_unless_ci(
                &format!("cannot open a pseudo-terminal: {e}"),
                "the shell test needs one",
            );
            return;
        }
    };
    shell.set_expect_timeout(Some(std::time::Duration::from_secs(60)));
    let prompt = "zarrow> ";
    shell.expect(prompt).unwrap();
    // a statement over two lines
    shell
        .send_line("CREATE EXTERNAL TABLE pbmc_obs STORED AS ZARR")
        .unwrap();
    // Each line is sent at a fresh prompt, after the output of what came before: a prompt
    // also shows when the editor redraws the statement it accepts, and before each prompt
    // rustyline asks the terminal where the cursor is and reads the answer from the input for
    // 100 ms (a character typed ahead then is taken for it and lost).
    shell
        .send_line(format!("  LOCATION '{OBS}'; SELECT 'ready' AS created;"))
        .unwrap();
    shell.expect("| ready").unwrap();
    shell.expect(prompt).unwrap();
    // tab completes `sele` to `select` and `pbmc` to `pbmc_obs`
    shell.send("sele\t count(*) AS n FROM pbmc\t;\r").unwrap();
    shell.expect(Regex(r"\| 2000 +\|")).unwrap();
    shell.expect(prompt).unwrap();
    shell.send_line("\\d").unwrap();
    shell
        .expect(Regex(r"\| public +\| pbmc_obs +\| Base"))
        .unwrap();
    shell.expect(prompt).unwrap();
    shell.send_line("\\d pbmc_obs").unwrap();
    shell.expect(Regex(r"\| cell_type +\| Dictionary")).unwrap();
    shell.expect(prompt).unwrap();
    // an error is printed, the shell goes on
    shell.send_line("SELECT nope FROM pbmc_obs;").unwrap();
    shell.expect("error: ").unwrap();
    shell.expect(prompt).unwrap();
    // A query that would run for hours: after a second its zarr scan's rows show on stderr (a
    // terminal); Ctrl-C cancels it, not the shell, and the progress line is erased.
    shell
        .send_line("SELECT sum(r.value) FROM pbmc_obs CROSS JOIN range(100000000000) AS r;")
        .unwrap();
    shell.expect("scanned 2000 rows, 1/1 chunks").unwrap();
    shell.send(ControlCode::EndOfText).unwrap();
    shell.expect("\r\x1b[Kerror: cancelled").unwrap();
    shell.expect(prompt).unwrap();
    shell.send_line("SELECT 41 + 1 AS answer;").unwrap();
    shell.expect(Regex(r"\| 42 +\|")).unwrap();
    shell.expect(prompt).unwrap();
    shell.send_line("\\q").unwrap();
    shell.expect(Eof).unwrap();
    let status = shell.get_process().wait().unwrap();
    assert!(
        matches!(status, expectrl::process::unix::WaitStatus::Exited(_, 0)),
        "{status:?}"
    );
    let history = std::fs::read_to_string(data.path().join("zarrow/history")).unwrap();
    assert!(history.contains("SELECT 41 + 1 AS answer;"), "{history}");
}

/// Run `zarrow sql --format csv <sql>` under `ulimit -v <kib>` with `workers` runtime threads
/// asked for (`TOKIO_WORKER_THREADS`, as a machine with that many cores would start): its
/// output, or a failure if it has not ended after two minutes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn run_limited(kib: u64, workers: usize, sql: &str, dir: &Path) -> Output {
    use std::time::{Duration, Instant};
    let mut child = Command::new("sh")
        .args([
            "-c",
            r#"ulimit -v "$1" && exec "$2" sql --format csv "$3""#,
            "sh",
            &kib.to_string(),
            env!("CARGO_BIN_EXE_zarrow"),
            sql,
        ])
        .current_dir(dir)
        .env("TOKIO_WORKER_THREADS", workers.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run zarrow");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "zarrow under ulimit -v {kib} with {workers} workers hung:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn a_query_under_an_address_space_limit_exits_zero() {
    // Issue 35, item 8: under `ulimit -v 2000000`, a query printed its rows and exited
    // non-zero, now and then. The limit counts reserved address space, and each thread that
    // called glibc's malloc reserved a 64 MiB arena (up to eight a core) beside mimalloc's
    // 1 GiB: with many threads the next one to start or ask for an arena failed — glibc
    // aborted, or the runtime could not start its workers (and tokio hung). 64 workers stand
    // in for a machine of 64 cores; each run must print the rows and exit 0.
    let dir = tempfile::tempdir().unwrap();
    let array = dir.path().join("huge.zarr");
    std::fs::create_dir(&array).unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [1u64 << 40],
        "data_type": "int8", "chunk_grid": {"name": "regular",
        "configuration": {"chunk_shape": [1]}}, "chunk_key_encoding": {"name": "default"},
        "fill_value": 7, "codecs": [{"name": "bytes"}]
    });
    std::fs::write(array.join("zarr.json"), meta.to_string()).unwrap();
    let sql = "SELECT * FROM 'huge.zarr' WHERE dim_0 > 1099511627000 LIMIT 3";
    for (kib, workers, runs) in [(2_000_000, 64, 4), (2_000_000, 2, 2), (1_300_000, 64, 2)] {
        for run in 0..runs {
            let out = run_limited(kib, workers, sql, dir.path());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "run {run} under ulimit -v {kib} with {workers} workers: {}\n{stderr}",
                out.status
            );
            // Any three rows of the filter (LIMIT without ORDER BY, over several partitions).
            let stdout = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(lines.len(), 4, "{stdout}{stderr}");
            assert_eq!(lines[0], "dim_0,value");
            for line in &lines[1..] {
                let (dim, value) = line.split_once(',').unwrap();
                assert!(dim.parse::<u64>().unwrap() > 1_099_511_627_000, "{stdout}");
                assert_eq!(value, "7", "{stdout}");
            }
            assert!(stderr.is_empty(), "{stderr}");
        }
    }
}

/// As in datafusion-cli: `SHOW <setting>`, `SHOW ALL` and `information_schema.df_settings`
/// list the `zarrow.*` settings with their values.
#[test]
fn show_and_df_settings_list_the_zarrow_settings() {
    let shown = ok(&[
        "sql",
        "--format",
        "csv",
        "SET zarrow.string_type = 'view'; SHOW zarrow.string_type",
    ]);
    assert!(shown.contains("zarrow.string_type,view"), "{shown}");
    let all = ok(&["sql", "--format", "csv", "SHOW ALL"]);
    assert!(all.contains("zarrow.fill_as_null,"), "{all}");
    let settings = ok(&[
        "sql",
        "--format",
        "csv",
        "SELECT name FROM information_schema.df_settings WHERE name LIKE 'zarrow.%' \
         ORDER BY name",
    ]);
    assert!(
        settings.contains("zarrow.decode_cf") && settings.contains("zarrow.string_type"),
        "{settings}"
    );
}
