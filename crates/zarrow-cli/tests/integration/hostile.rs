//! The `zarrow` binary over hostile and invalid inputs (issue 35):
//!
//! - Icechunk repositories whose snapshot gives a node a type icechunk does not know (0, 7):
//!   every command is an error naming the repository and the node, never an internal error
//!   with a path into icechunk's sources.
//! - AnnData dataframes written by anndata and then made invalid (a column `column-order`
//!   names is not there, a `column-order` of 200,000 names, no `_index`): `tree` lists the
//!   hierarchy and marks the dataframe invalid with the reason; `schema` and queries refuse it
//!   with that reason and a hint to run `tree`.

use std::process::{Command, Output};

use zarrow_testkit::hostile_icechunk::with_node_type;
use zarrow_testkit::invalid_anndata::{cases, STORES};

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

#[test]
fn tree_shows_an_invalid_dataframe_and_queries_refuse_it() {
    let tmp = tempfile::tempdir().unwrap();
    for case in cases() {
        for name in STORES {
            let store = case.apply(tmp.path(), name);
            let store = store.to_str().unwrap().to_string();
            let obs = format!("{store}/obs");
            let what = format!("{}, {name}", case.name);
            let marked = format!("invalid ({}): {}", case.attribute, case.reason);

            // the store's tree (its children from consolidated metadata) and the dataframe's
            // own (declared by its attributes): the dataframe marked, what it holds below it
            let tree = ok(&["tree", &store]);
            let line = tree
                .lines()
                .find(|l| l.contains("── obs/"))
                .unwrap_or_else(|| panic!("{what}: no obs in\n{tree}"));
            assert!(
                line.contains("dataframe") && line.contains(&marked),
                "{what}: {line}"
            );
            assert!(
                tree.contains("── cell_type/") && tree.contains("── var/"),
                "{what}:\n{tree}"
            );
            let tree = ok(&["tree", &obs]);
            let first = tree.lines().next().unwrap();
            assert!(
                first.contains("dataframe") && first.contains(&marked),
                "{what}: {first}"
            );
            for member in ["── barcode", "── cell_type/", "── n_genes"] {
                assert!(tree.contains(member), "{what}: {member} not in\n{tree}");
            }
            assert_eq!(
                tree.contains("── _index"),
                case.name != "no_index_array",
                "{what}:\n{tree}"
            );
            assert!(tree.len() < 10_000, "{what}: {} bytes", tree.len());

            // schema and queries refuse it, with the reason and a hint to run tree
            let query = format!("SELECT count(*) FROM '{obs}'");
            for args in [vec!["schema", obs.as_str()], vec!["sql", query.as_str()]] {
                let stderr = fails(&args);
                assert!(
                    stderr.contains(case.attribute)
                        && stderr.contains(case.reason)
                        && stderr.contains("hint: ")
                        && stderr.contains("zarrow tree"),
                    "{what}, zarrow {args:?}:\n{stderr}"
                );
                assert!(stderr.len() < 4_000, "{what}: {} bytes", stderr.len());
            }
        }
    }
}
