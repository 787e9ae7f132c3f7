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

/// `--option layout=anndata`: an AnnData dataframe (index `barcode`), which keeps the NULL
/// categories the xarray layout cannot (a categorical's code −1), and reads back the same.
#[test]
fn export_zarr_anndata_layout_reads_back_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let expected = ok(&[
        "sql",
        "--format",
        "ndjson",
        &QUERY.replace("FROM t", &format!("FROM '{OBS}'")),
    ]);
    assert!(expected.contains("\"cell_type\":null"));
    for (name, options) in [
        (
            "a3.zarr",
            vec!["--option", "layout=anndata", "--option", "index=barcode"],
        ),
        (
            "a2.zarr",
            vec![
                "--option",
                "layout=anndata",
                "--option",
                "index=barcode",
                "--option",
                "zarr_format=2",
            ],
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
        let back = ok(&[
            "sql",
            "--format",
            "ndjson",
            &QUERY.replace("FROM t", &format!("FROM '{output}'")),
        ]);
        assert_eq!(back, expected, "{name}");
        let attrs = if name == "a3.zarr" {
            let doc: serde_json::Value =
                serde_json::from_slice(&std::fs::read(format!("{output}/zarr.json")).unwrap())
                    .unwrap();
            doc["attributes"].clone()
        } else {
            serde_json::from_slice(&std::fs::read(format!("{output}/.zattrs")).unwrap()).unwrap()
        };
        assert_eq!(attrs["_index"], "barcode", "{name}");
        assert_eq!(
            attrs["column-order"],
            serde_json::json!(["cell_type", "batch", "n_genes", "pct_mito"]),
            "{name}"
        );
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

/// Whether any chunk object exists below `store` (`<array>/c/<i>`).
fn has_chunks(store: &Path) -> bool {
    std::fs::read_dir(store).is_ok_and(|arrays| {
        arrays
            .flatten()
            .any(|a| std::fs::read_dir(a.path().join("c")).is_ok_and(|mut c| c.next().is_some()))
    })
}

/// The staging directories beside `store` (`.<name>.zarrow-staging-…`).
fn staging_beside(store: &Path) -> Vec<PathBuf> {
    let name = store.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(store.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            (p.file_name().unwrap().to_string_lossy())
                .starts_with(&format!(".{name}.zarrow-staging-"))
        })
        .collect()
}

/// `zarrow export` killed (SIGKILL) once chunks are landing: they land in a staging directory
/// beside the output, so a fresh output does not exist and one being overwritten is the old
/// table, whole (docs/writing.md, "Write safety").
#[test]
fn a_killed_export_leaves_the_old_table_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.zarr");
    let loc = out.to_str().unwrap();
    assert!(export(loc, &[]).status.success());
    let count = |loc: &str| run(&["sql", &format!("SELECT count(*) FROM '{loc}'")]);
    let old = String::from_utf8(count(loc).stdout).unwrap();
    assert!(old.contains("1000"), "{old}");
    for options in [&["--option", "overwrite=true"][..], &[][..]] {
        if options.is_empty() {
            std::fs::remove_dir_all(&out).unwrap();
        }
        for staged in staging_beside(&out) {
            std::fs::remove_dir_all(staged).unwrap();
        }
        let _ = std::fs::remove_file(dir.path().join("k.zarr.zarrow-lock"));
        let mut args = vec![
            "export",
            OBS,
            "--output",
            loc,
            "--query",
            "SELECT t.barcode, t.n_genes, g.value FROM t CROSS JOIN generate_series(1, 4000) g",
            "--option",
            "chunk_rows=5000",
        ];
        args.extend_from_slice(options);
        let mut child = Command::new(env!("CARGO_BIN_EXE_zarrow"))
            .args(&args)
            .current_dir(root())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while !staging_beside(&out).iter().any(|s| has_chunks(s)) {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the export ended before it was killed"
            );
            assert!(start.elapsed().as_secs() < 120, "no chunk written in 120 s");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let read = count(loc);
        if options.is_empty() {
            assert!(!out.exists());
            assert!(!read.status.success(), "the killed output opened");
        } else {
            assert_eq!(String::from_utf8(read.stdout).unwrap(), old);
        }
    }
}

/// `COPY … STORED AS ZARR` through the CLI under `--memory-limit`: 3M rows (about 60 MB of
/// Arrow data) through a 32 MB pool, read back whole. (The 10M-row benchmark table under 200M
/// is `benches/write_compare.py`'s job on a release build; this is the debug-build check.)
#[test]
fn copy_to_zarr_under_a_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.zarr");
    let loc = out.to_str().unwrap();
    ok(&[
        "sql",
        "--memory-limit",
        "32M",
        &format!(
            "COPY (SELECT value AS id, concat('label-', CAST(value % 1000 AS VARCHAR)) AS label \
             FROM generate_series(0, 2999999)) TO '{loc}' STORED AS ZARR \
             OPTIONS (chunk_rows 100000)"
        ),
    ]);
    let back = ok(&[
        "sql",
        "--format",
        "csv",
        &format!("SELECT count(*) AS c, sum(id) AS s, max(label) AS m FROM '{loc}'"),
    ]);
    assert!(back.contains("3000000,4499998500000,label-999"), "{back}");
}

/// The figure: `COPY` of the 10M-row benchmark table (`benches/sql_compare.py` makes
/// `target/bench-data/r10000000_c1000000/bench.parquet`) under `--memory-limit 200M`, with the
/// release CLI (`cargo build --release -p zarrow-cli`), its peak RSS from `/usr/bin/time -v`.
/// Run: `cargo test -p zarrow-cli --test integration -- --ignored copy_10m`.
#[test]
#[ignore = "needs the release CLI and the 10M-row benchmark Parquet (see docs/writing.md)"]
fn copy_10m_rows_under_a_200m_memory_limit_release() {
    let cli = root().join("target/release/zarrow");
    let parquet = root().join("target/bench-data/r10000000_c1000000/bench.parquet");
    let time = Path::new("/usr/bin/time");
    for (what, path) in [("release CLI", &cli), ("benchmark Parquet", &parquet)] {
        assert!(path.exists(), "no {what} at {}", path.display());
    }
    assert!(time.exists(), "no /usr/bin/time");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench.zarr");
    let started = std::time::Instant::now();
    let run = Command::new(time)
        .arg("-v")
        .arg(&cli)
        .args(["sql", "--memory-limit", "200M"])
        .arg(format!(
            "COPY (SELECT * FROM '{}') TO '{}' STORED AS ZARR",
            parquet.display(),
            out.display()
        ))
        .output()
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let peak_kb: u64 = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS in: {stderr}"));
    eprintln!(
        "COPY of 10M rows under --memory-limit 200M: {seconds:.1} s, peak RSS {} MB",
        peak_kb / 1024
    );
    let back = Command::new(&cli)
        .args(["sql", "--format", "csv"])
        .arg(format!("SELECT count(*) AS c FROM '{}'", out.display()))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&back.stdout).contains("10000000"));
    // The pool bounds what DataFusion and the sink hold; the rest (Parquet decoding, the
    // runtime, the binary) stays well under this.
    assert!(peak_kb < 512 * 1024, "peak RSS {} MB", peak_kb / 1024);
}
