//! The `zarrow` binary over hostile inputs (issue 35):
//!
//! - Icechunk repositories whose snapshot gives a node a type icechunk does not know (0, 7):
//!   every command is an error naming the repository and the node, never an internal error
//!   with a path into icechunk's sources.

use std::process::{Command, Output};

use zarrow_testkit::hostile_icechunk::with_node_type;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zarrow"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run zarrow")
}

/// Run, expect success; stdout.
fn ok(args: &[&str]) -> String {
    let out = run(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "zarrow {args:?} ({}):\n{stderr}\n{stdout}",
        out.status
    );
    stdout
}

/// Run, expect status 1 and a clean error (no panic, no internal error, no source path);
/// stderr.
fn fails(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "zarrow {args:?}:\n{stderr}");
    assert!(stderr.starts_with("error: "), "zarrow {args:?}:\n{stderr}");
    for bad in [
        "panicked",
        "internal error",
        ".rs:",
        "icechunk-format",
        "ackTrace",
    ] {
        assert!(
            !stderr.contains(bad),
            "zarrow {args:?}: {bad:?} in\n{stderr}"
        );
    }
    stderr
}

#[test]
fn a_snapshot_with_an_unknown_node_type_is_a_clean_error_in_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    for node_type in [0u8, 7] {
        let copy = with_node_type(tmp.path(), "unwritten.icechunk", "/ints", node_type);
        let repo = format!("icechunk+file://{}", copy.display());
        let out = tmp.path().join(format!("out{node_type}.csv"));
        let labels = format!("{repo}@main/labels");
        let ints = format!("{repo}/ints");
        let query = format!("SELECT count(*) FROM '{repo}@v1/ints'");
        let register =
            format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{labels}'; SELECT * FROM t");
        let commands: Vec<Vec<&str>> = vec![
            vec!["tree", &repo],
            vec!["tree", &labels],
            vec!["schema", &ints],
            vec!["schema", &labels],
            vec!["sql", &query],
            vec!["sql", &register],
            vec!["export", &labels, "--output", out.to_str().unwrap()],
        ];
        for args in commands {
            let stderr = fails(&args);
            assert!(
                stderr.contains(&repo)
                    && stderr.contains("'/ints'")
                    && stderr.contains(&format!("node type {node_type}")),
                "type {node_type}, zarrow {args:?}:\n{stderr}"
            );
        }
    }
}
