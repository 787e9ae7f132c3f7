//! What zarrow's tests share, in one place instead of a copy per test crate: where the fixture
//! stores are, the rule for tests whose tools may be missing (skip with a message locally,
//! fail under `CI=true`), the loopback servers `tests/remote/start.sh` starts, and the walk
//! over every fixture table (which fails listing every node that should open and does not),
//! a store that records requests, a scan's memory budget, hostile Icechunk repositories and
//! invalid AnnData stores.
//!
//! Tests that need the loopback servers are marked
//! `#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]`, so a plain
//! `cargo test` reports them as ignored, never as passed; `tests/run-all.sh` starts the servers
//! and runs them with `--include-ignored`, and then a missing server is a failure
//! ([`loopback`]).

use std::path::PathBuf;

pub mod budget;
pub mod hostile_icechunk;
pub mod invalid_anndata;
pub mod recording;

pub use budget::Budget;
pub use recording::{RecordingStore, Request};

use zarrow::{Node, TableModel, TableOptions};

/// The directory of the committed fixture stores (`tests/fixtures/data`), canonical.
pub fn fixtures_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/data");
    std::fs::canonicalize(&dir)
        .unwrap_or_else(|e| panic!("no fixture directory at {}: {e}", dir.display()))
}

/// The absolute location of a fixture store (or a node in one: `"v3_strings.zarr/string_2d"`).
pub fn fixture(name: &str) -> String {
    fixtures_dir().join(name).to_string_lossy().into_owned()
}

/// The Python of one of the repository's venvs (`.venv-zarr3`, `.venv-zarr2`), which
/// `tests/fixtures/setup_venvs.sh` makes: `None` when it is missing (the caller skips), except
/// under CI ([`skip_unless_ci`]).
pub fn venv_python(venv: &str) -> Option<PathBuf> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(venv)
        .join("bin/python");
    if python.exists() {
        return Some(python);
    }
    skip_unless_ci(
        &format!("no venv at {}", python.display()),
        "run tests/fixtures/setup_venvs.sh (tests/run-all.sh does)",
    );
    None
}

/// What the writer's own reader gives for the table at `store`: `tests/fixtures/read_table_back.py`
/// run with `venv`'s Python in `mode` (`zarr`, `xarray` or `anndata`), its JSON object of
/// columns. `None` when the venv is missing ([`venv_python`]); a failing script fails the test,
/// its stderr in the message.
pub fn python_reads(
    venv: &str,
    mode: &str,
    store: impl AsRef<std::ffi::OsStr>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let python = venv_python(venv)?;
    let script = fixtures_dir().join("../read_table_back.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(mode)
        .arg(store)
        .output()
        .unwrap_or_else(|e| panic!("{venv}: cannot run read_table_back.py: {e}"));
    assert!(
        out.status.success(),
        "{venv} {mode} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout) {
        Ok(serde_json::Value::Object(m)) => Some(m),
        other => panic!("read_table_back.py {mode}: not a JSON object: {other:?}"),
    }
}

/// Whether the tests run under CI (`CI=true`), where nothing they need may be missing.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The skip-unless-CI rule, for a test (or part of one) whose tool is missing: under CI a
/// failure naming `what` is missing and `how` to provide it; otherwise a note on stderr, and
/// the caller skips.
pub fn skip_unless_ci(what: &str, how: &str) {
    assert!(!in_ci(), "CI=true but {what}: {how}");
    eprintln!("skipping: {what} ({how})");
}

/// How the loopback servers are started.
const START: &str = "eval \"$(bash tests/remote/start.sh)\", as tests/run-all.sh does";

/// The address of a loopback server (`ZARROW_TEST_HTTP`, `ZARROW_TEST_S3`,
/// `ZARROW_TEST_FAULT_PROXY`, …), for a test marked ignored unless the servers run: it was
/// asked for, so a missing server is a failure saying how to start them.
pub fn loopback(var: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{var} is not set: start the loopback servers ({START})"),
    }
}

/// The address of a loopback server for the part of a test that needs one, the rest running
/// without it: `None` (said on stderr) when it is not set, except under CI ([`skip_unless_ci`]).
pub fn optional_loopback(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            skip_unless_ci(&format!("{var} is not set"), START);
            None
        }
    }
}

/// A name no other test run uses, for a store or repository a test creates on a shared
/// server: `stem-<process id>-<nanoseconds since the epoch>`.
pub fn unique_name(stem: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{stem}-{}-{nanos}", std::process::id())
}

/// Every node of every fixture store (`*.zarr` in [`fixtures_dir`]: the root and every node
/// below it) opened as a table with `options`, in path order. `not_tables` lists the nodes
/// that do not open as tables, each with the reason: paths relative to the fixture directory,
/// whose first component may end in `*` for every store whose name starts so
/// (`"anndata_*/uns"`, `"*/uns"`). Panics listing every node
/// that should open and does not, with its error, and every listed node that opens after all:
/// nothing is dropped silently.
pub async fn fixture_tables(
    options: &TableOptions,
    not_tables: &[(&str, &str)],
) -> Vec<(String, TableModel)> {
    let dir = fixtures_dir();
    let mut stores: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "zarr"))
        .collect();
    stores.sort();
    let mut tables = Vec::new();
    let mut failed = Vec::new();
    let mut opened_anyway = Vec::new();
    for store in stores {
        let root = store.to_string_lossy().into_owned();
        let mut locations = vec![root.clone()];
        match Node::open(&root).await {
            Ok(Node::Group(g)) => match g.walk().await {
                Ok(all) => locations.extend(all.into_iter().map(|(p, _)| format!("{root}/{p}"))),
                Err(e) => failed.push(format!("{root}: walking the hierarchy: {e}")),
            },
            Ok(Node::Array(_)) => {}
            Err(e) => failed.push(format!("{root}: {e}")),
        }
        for location in locations {
            let relative = location
                .strip_prefix(&format!("{}/", dir.display()))
                .unwrap_or(&location)
                .to_string();
            let expected_not = not_tables.iter().any(|(p, _)| names(p, &relative));
            match TableModel::open(&location, options.clone()).await {
                Ok(_) if expected_not => opened_anyway.push(relative),
                Ok(model) => tables.push((location, model)),
                Err(_) if expected_not => {}
                Err(e) => failed.push(format!("{relative}: {e}")),
            }
        }
    }
    assert!(
        failed.is_empty() && opened_anyway.is_empty(),
        "fixture tables that should open and do not:\n  {}\nlisted as not tables, yet open:\n  {}",
        failed.join("\n  "),
        opened_anyway.join("\n  ")
    );
    tables
}

/// Whether `pattern` names `path`: the same path, except that a first component ending in
/// `*` names every store whose name starts with what comes before it.
fn names(pattern: &str, path: &str) -> bool {
    let (store, rest) = pattern.split_once('/').unwrap_or((pattern, ""));
    let (path_store, path_rest) = path.split_once('/').unwrap_or((path, ""));
    let store_matches = match store.strip_suffix('*') {
        Some(prefix) => path_store.starts_with(prefix),
        None => store == path_store,
    };
    store_matches && rest == path_rest
}

/// A copy of the directory `from` at `to`.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
