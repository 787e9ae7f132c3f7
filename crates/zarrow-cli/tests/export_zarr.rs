//! `zarrow export --format zarr`: a query's result as a zarr table that `zarrow sql` reads
//! back with the same rows and xarray opens; write options through `--option`; an existing
//! output without `overwrite=true` is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OBS: &str = "data/pbmc_sample.zarr/obs";
const QUERY: &str = "SELECT barcode, cell_type, batch, n_genes, pct_mito FROM t \
                     WHERE batch = 'donor_B' ORDER BY barcode";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn export(output: &str, extra: &[&str]) -> Output {
    let mut args = vec!["export", OBS, "--output", output, "--query", QUERY];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn export_zarr_reads_back_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let expected = ok(&[
        "sql",
        "--format",
        "ndjson",
        &QUERY.replace("FROM t", &format!("FROM '{OBS}'")),
    ]);
    assert_eq!(expected.lines().count(), 1000);
    // The xarray layout has no mask for strings: a NULL category is written as "" (its fill
    // value; docs/writing.md).
    assert!(expected.contains("\"cell_type\":null"));
    let expected = expected.replace("\"cell_type\":null", "\"cell_type\":\"\"");
    for (name, options) in [
        (
            "v3.zarr",
            vec![
                "--option",
                "chunk_rows=128",
                "--option",
                "compression=zstd(3)",
            ],
        ),
        (
            "v2.zarr",
            vec!["--option", "zarr_format=2", "--option", "compression=gzip"],
        ),
        (
            "plain",
            vec!["--format", "zarr", "--option", "dimension=obs"],
        ),
    ] {
        let output = dir.path().join(name);
        let output = output.to_str().unwrap();
        let out = export(output, &options);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // decode_cf: the integer column's NULLs (written as its _FillValue) come back as NULL.
        let back = ok(&[
            "sql",
            "--option",
            "decode_cf=true",
            "--format",
            "ndjson",
            &QUERY.replace("FROM t", &format!("FROM '{output}'")),
        ]);
        assert_eq!(back, expected, "{name}");
    }
}

#[test]
fn export_zarr_refuses_an_existing_output_and_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("o.zarr");
    let output = output.to_str().unwrap();
    assert!(export(output, &[]).status.success());
    let before = std::fs::read(dir.path().join("o.zarr/zarr.json")).unwrap();

    let out = export(output, &["--option", "chunk_rows=7"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already exists") && err.contains("overwrite"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("o.zarr/zarr.json")).unwrap(),
        before
    );

    let out = export(
        output,
        &["--option", "overwrite=true", "--option", "chunk_rows=7"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("o.zarr/barcode/zarr.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        meta["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([7])
    );

    let out = export(
        output,
        &["--option", "overwrite=true", "--option", "compression=lz9"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("compression"),
        "{err}"
    );

    let csv = dir.path().join("o.csv");
    let out = export(csv.to_str().unwrap(), &["--option", "chunk_rows=7"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--format zarr"),
        "{err}"
    );
}
