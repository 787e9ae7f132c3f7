//! Write safety with real processes (docs/writing.md, "Write safety"): reading and overwriting
//! one store in one statement, what `overwrite` refuses, two writers at once (INSERT + INSERT,
//! COPY + COPY, COPY + INSERT) and writers killed with SIGKILL at moments spread over their
//! run, each read back by zarrow (and zarr-python where its venv is there).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zarrow"));
    c.args(args).current_dir(root());
    c
}

fn run(args: &[&str]) -> Output {
    command(args).output().unwrap()
}

fn sql(statement: &str) -> Output {
    run(&["sql", "--format", "csv", statement])
}

fn ok_sql(statement: &str) -> String {
    let out = sql(statement);
    assert!(
        out.status.success(),
        "{statement}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn spawn_sql(statement: &str) -> Child {
    command(&["sql", "--format", "csv", statement])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A table of `rows` rows at `loc`: `a` 0…, `b` = a / 2, `s` = 'r<a>', `w` = `writer`.
fn copy(loc: &str, rows: u64, writer: u32, options: &str) -> String {
    format!(
        "COPY (SELECT value AS a, value / 2.0 AS b, concat('r', CAST(value AS VARCHAR)) AS s, \
         {writer} AS w FROM generate_series(0, {}) ) TO '{loc}' STORED AS ZARR \
         OPTIONS (chunk_rows 1000{options})",
        rows - 1
    )
}

/// `count, sum(a), min(w), max(w), rows whose s is not 'r<a>'` of the table at `loc`, or the
/// error reading it.
fn summary(loc: &str) -> Result<(u64, i64, i64, i64, u64), String> {
    let out = sql(&format!(
        "SELECT count(*), coalesce(sum(a), 0), coalesce(min(w), -1), coalesce(max(w), -1), \
         count(*) FILTER (WHERE s <> concat('r', CAST(a AS VARCHAR))) FROM '{loc}'"
    ));
    if !out.status.success() {
        return Err(stderr(&out));
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().nth(1).ok_or(text.clone())?;
    let f: Vec<i64> = line.split(',').map(|v| v.trim().parse().unwrap()).collect();
    Ok((f[0] as u64, f[1], f[2], f[3], f[4] as u64))
}

/// The rows of a table of `n` rows written by `copy`, as `summary` gives them.
fn whole(n: u64, writer: i64) -> (u64, i64, i64, i64, u64) {
    (n, (n * (n - 1) / 2) as i64, writer, writer, 0)
}

/// zarr-python 3 reads the table at `loc` whole (every array as long as the others).
fn python_reads(loc: &str) -> Option<usize> {
    let python = zarrow_testkit::venv_python(".venv-zarr3")?;
    let script = "import sys, zarr\n\
                  g = zarr.open_group(sys.argv[1], mode='r')\n\
                  n = {len(g[k][:]) for k in ('a', 'b', 's', 'w')}\n\
                  assert len(n) == 1, n\n\
                  print(n.pop())\n";
    let out = Command::new(python)
        .args(["-c", script, loc])
        .output()
        .unwrap();
    assert!(out.status.success(), "zarr-python: {}", stderr(&out));
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap(),
    )
}

#[test]
fn reading_and_overwriting_one_store_keeps_the_selected_rows() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("t.zarr");
    let loc = loc.to_str().unwrap();
    ok_sql(&copy(loc, 5000, 1, ""));
    // Before: the store was deleted before it was read, leaving a table of fill values.
    ok_sql(&format!(
        "COPY (SELECT a, b, s, w FROM '{loc}' WHERE a % 2 = 0) TO '{loc}' STORED AS ZARR \
         OPTIONS ('overwrite' 'true', 'chunk_rows' '700')"
    ));
    let evens: i64 = (0..5000).filter(|a| a % 2 == 0).sum();
    assert_eq!(summary(loc), Ok((2500, evens, 1, 1, 0)));
    // `zarrow export` of a table onto itself.
    let out = run(&[
        "export",
        loc,
        "--format",
        "zarr",
        "--output",
        loc,
        "--query",
        "SELECT a, b, s, w FROM t WHERE a < 1000",
        "--option",
        "overwrite=true",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let below: i64 = (0..1000).filter(|a| a % 2 == 0).sum();
    assert_eq!(summary(loc), Ok((500, below, 1, 1, 0)));
    assert_eq!(python_reads(loc).unwrap_or(500), 500);
    // One array of the group: refused, the table as it was.
    let out = sql(&format!(
        "COPY (SELECT a FROM '{loc}') TO '{loc}/a' STORED AS ZARR OPTIONS ('overwrite' 'true')"
    ));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("member of the zarr group"),
        "{}",
        stderr(&out)
    );
    assert_eq!(summary(loc), Ok((500, below, 1, 1, 0)));
    // Nothing left beside it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["t.zarr"]);
}

#[test]
fn overwrite_refuses_a_directory_that_is_not_a_zarr_store() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "keep").unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/x.csv"), "1").unwrap();
    let out = command(&[
        "sql",
        "COPY (SELECT 1 AS a) TO '.' STORED AS ZARR OPTIONS ('overwrite' 'true')",
    ])
    .current_dir(dir.path())
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("only a zarr store") && err.contains("notes.txt"),
        "{err}"
    );
    assert!(dir.path().join("notes.txt").exists() && dir.path().join("data/x.csv").exists());
}

/// Wait for `children`, returning their outputs.
fn outputs(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
fn two_copies_to_one_new_path_leave_one_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let loc = dir.path().join(format!("c{round}.zarr"));
        let loc = loc.to_str().unwrap();
        let children = vec![
            spawn_sql(&copy(loc, 20_000, 1, "")),
            spawn_sql(&copy(loc, 20_000, 2, "")),
        ];
        let outs = outputs(children);
        let won: Vec<i64> = (1..=2)
            .filter(|w| outs[*w as usize - 1].status.success())
            .collect();
        assert!(
            !won.is_empty(),
            "{:?}",
            outs.iter().map(stderr).collect::<Vec<_>>()
        );
        for out in outs.iter().filter(|o| !o.status.success()) {
            let err = stderr(out);
            assert!(
                err.contains("another writer") || err.contains("already exists"),
                "{err}"
            );
        }
        // Both may succeed only one after the other: the second then found the first's table.
        assert_eq!(won.len(), 1, "two COPYs to one new path both succeeded");
        assert_eq!(summary(loc), Ok(whole(20_000, won[0])));
    }
}

#[test]
fn two_inserts_at_once_add_both_or_refuse_one() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let loc = dir.path().join(format!("i{round}.zarr"));
        let loc = loc.to_str().unwrap();
        ok_sql(&copy(loc, 1000, 0, ""));
        let insert = |w: u32| {
            format!(
                "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}'; \
                 INSERT INTO t (a, b, s, w) SELECT value AS a, value / 2.0 AS b, \
                 concat('r', CAST(value AS VARCHAR)) AS s, {w} AS w \
                 FROM generate_series(1000, 30999)"
            )
        };
        let outs = outputs(vec![spawn_sql(&insert(1)), spawn_sql(&insert(2))]);
        let won = outs.iter().filter(|o| o.status.success()).count();
        for out in outs.iter().filter(|o| !o.status.success()) {
            let err = stderr(out);
            assert!(err.contains("another writer holds the lock"), "{err}");
        }
        let (n, sum, _, _, bad) = summary(loc).unwrap();
        assert_eq!(bad, 0);
        let new: i64 = (1000..31000).sum();
        let old: i64 = (0..1000).sum();
        assert_eq!(
            (n, sum),
            (1000 + 30_000 * won as u64, old + new * won as i64),
            "{won} INSERTs succeeded"
        );
    }
}

#[test]
fn a_copy_overwriting_and_an_insert_at_once_leave_one_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("ci.zarr");
    let loc = loc.to_str().unwrap();
    ok_sql(&copy(loc, 1000, 0, ""));
    let insert = format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}'; \
         INSERT INTO t (a, b, s, w) SELECT value AS a, value / 2.0 AS b, \
         concat('r', CAST(value AS VARCHAR)) AS s, 0 AS w FROM generate_series(1000, 20999)"
    );
    let outs = outputs(vec![
        spawn_sql(&insert),
        spawn_sql(&copy(loc, 5000, 2, ", overwrite true")),
    ]);
    for out in outs.iter().filter(|o| !o.status.success()) {
        let err = stderr(out);
        assert!(
            err.contains("another writer holds the lock") || err.contains("changed while"),
            "{err}"
        );
    }
    let got = summary(loc).unwrap();
    let inserted = (21_000, (0..21_000i64).sum(), 0, 0, 0);
    let copied = whole(5000, 2);
    // Whichever came last; an INSERT after the COPY appends to the new table.
    let both = (
        25_000,
        (0..5000i64).sum::<i64>() + (1000..21_000i64).sum::<i64>(),
        0,
        2,
        0,
    );
    assert!(
        [whole(1000, 0), inserted, copied, both].contains(&got),
        "{got:?}: {:?}",
        outs.iter().map(stderr).collect::<Vec<_>>()
    );
}

/// Kill `child` once `delay` has passed (if it is still running); whether it was killed.
fn kill_after(mut child: Child, delay: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < delay {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let killed = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    killed
}

/// An overwriting COPY and an INSERT killed at moments spread over their run: the table reads
/// as the old one or the new one, by zarrow and by zarr-python; the next writer finds the
/// killed one's lock stale and breaks it only when asked.
#[test]
fn writers_killed_at_any_moment_leave_the_old_table_or_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("k.zarr");
    let loc = loc.to_str().unwrap();
    ok_sql(&copy(loc, 1000, 0, ""));
    // How long an overwrite takes here, to spread the kills over it.
    let start = Instant::now();
    ok_sql(&copy(loc, 200_000, 1, ", overwrite true"));
    let span = start.elapsed();
    let started = Instant::now();
    let mut killed = 0;
    let mut current = whole(200_000, 1);
    for i in 0..6u32 {
        let w = 2 + i;
        let delay = span.mul_f64(f64::from(i + 1) / 7.0);
        let child = spawn_sql(&copy(
            loc,
            200_000,
            w,
            ", overwrite true, break_stale_lock true",
        ));
        killed += u32::from(kill_after(child, delay));
        let got = summary(loc).unwrap();
        assert!(
            got == current || got == whole(200_000, i64::from(w)),
            "kill {i} after {delay:?}: {got:?}"
        );
        current = got;
        if let Some(n) = python_reads(loc) {
            assert_eq!(n as u64, got.0);
        }
        // The killed writer's lock: a stale one, refused without the option.
        let lock = format!("{loc}.zarrow-lock");
        if Path::new(&lock).exists() && i == 0 {
            let out = sql(&copy(loc, 10, 9, ", overwrite true"));
            assert!(stderr(&out).contains("stale"), "{}", stderr(&out));
        }
    }
    // INSERTs killed: the table has the old rows or the old and all the new; the killed
    // writer's stale lock is broken by the next (a table option).
    for i in 0..4u32 {
        let before = summary(loc).unwrap();
        let insert = format!(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}' \
             OPTIONS ('break_stale_lock' 'true'); \
             INSERT INTO t (a, b, s, w) SELECT value + 1000000 AS a, value / 2.0 AS b, \
             concat('r', CAST(value + 1000000 AS VARCHAR)) AS s, 50 AS w \
             FROM generate_series(0, 99999)"
        );
        let delay = span.mul_f64(f64::from(i + 1) / 5.0);
        killed += u32::from(kill_after(spawn_sql(&insert), delay));
        let got = summary(loc).unwrap();
        assert_eq!(got.4, 0);
        assert!(
            got.0 == before.0 || got.0 == before.0 + 100_000,
            "insert kill {i}: {before:?} -> {got:?}"
        );
        assert_no_temporary_files(Path::new(loc));
        if let Some(n) = python_reads(loc) {
            assert_eq!(n as u64, got.0);
        }
        if Path::new(&format!("{loc}.zarrow-lock")).exists() {
            let out = sql(&insert.replace("OPTIONS ('break_stale_lock' 'true')", ""));
            assert!(stderr(&out).contains("stale"), "{}", stderr(&out));
            assert_eq!(summary(loc).unwrap(), got);
        }
    }
    assert!(killed > 0, "no writer was killed while running");
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn insert_through_one_array_of_a_group_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("two.zarr");
    let loc = loc.to_str().unwrap();
    ok_sql(&copy(loc, 10, 0, ""));
    // Before: the array grew alone, the group's other arrays and metadata stayed.
    let out = sql(&format!(
        "CREATE EXTERNAL TABLE a STORED AS ZARR LOCATION '{loc}/a'; \
         INSERT INTO a (a) VALUES (10), (11)"
    ));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("cannot append") && err.contains("member of the zarr group"),
        "{err}"
    );
    assert_eq!(summary(loc), Ok(whole(10, 0)));
}

/// Two processes inserting into one branch of an `icechunk+file:` repository at once: both
/// row sets land exactly once, or one statement fails with a conflict naming the branch and
/// the snapshot it began from; the table is never torn, and the snapshot before both keeps
/// the first table.
#[test]
fn two_processes_inserting_into_one_icechunk_branch_add_both_or_one_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let repo = format!("icechunk+file://{}/r{round}.icechunk", dir.path().display());
        let loc = format!("{repo}@main/t");
        ok_sql(&copy(&loc, 1000, 0, ", create_repository true"));
        let insert = |w: u32| {
            format!(
                "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}'; \
                 INSERT INTO t (a, b, s, w) SELECT value AS a, value / 2.0 AS b, \
                 concat('r', CAST(value AS VARCHAR)) AS s, {w} AS w \
                 FROM generate_series(1000, 30999)"
            )
        };
        let outs = outputs(vec![spawn_sql(&insert(1)), spawn_sql(&insert(2))]);
        let won = outs.iter().filter(|o| o.status.success()).count();
        assert!(won >= 1, "{}", stderr(&outs[0]));
        for out in outs.iter().filter(|o| !o.status.success()) {
            let err = stderr(out);
            assert!(
                err.contains("another commit reached branch 'main'"),
                "{err}"
            );
        }
        let (n, sum, _, _, bad) = summary(&loc).unwrap();
        assert_eq!(bad, 0);
        let new: i64 = (1000..31000).sum();
        let old: i64 = (0..1000).sum();
        assert_eq!(
            (n, sum),
            (1000 + 30_000 * won as u64, old + new * won as i64),
            "{won} INSERTs succeeded"
        );
    }
}

/// No temporary or partial file inside the table at `loc` (a writer writes those outside it).
fn assert_no_temporary_files(loc: &Path) {
    let mut dirs = vec![loc.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(
                !name.contains('#') && !name.contains("zarrow"),
                "a temporary file inside the table: {}",
                entry.path().display()
            );
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            }
        }
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Wait (up to a minute) until `path` exists or `child` ended; whether it exists.
fn wait_for(path: &Path, child: &mut Child) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if path.exists() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A writer that stalls holding its lock (stopped with SIGSTOP) keeps it: a second writer
/// asked to break stale locks older than a second is refused, and the first then publishes
/// its whole table.
#[test]
fn a_live_writers_lock_is_never_broken() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("l.zarr");
    let loc = loc.to_str().unwrap();
    ok_sql(&copy(loc, 1000, 0, ""));
    let mut first = spawn_sql(&copy(loc, 100_000, 1, ", overwrite true"));
    let lock = PathBuf::from(format!("{loc}.zarrow-lock"));
    assert!(wait_for(&lock, &mut first), "the first writer took no lock");
    signal(&first, "STOP");
    std::thread::sleep(Duration::from_millis(2100));
    let breaking = ", overwrite true, break_stale_lock true, stale_lock_seconds 1";
    let second = sql(&copy(loc, 1000, 2, breaking));
    signal(&first, "CONT");
    let first = first.wait_with_output().unwrap();
    assert!(
        !second.status.success(),
        "the live writer's lock was broken"
    );
    assert!(
        stderr(&second).contains("another writer holds the lock"),
        "{}",
        stderr(&second)
    );
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(summary(loc), Ok(whole(100_000, 1)));
    assert!(!lock.exists());
}

/// This host's name, as a lock names it.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Two INSERTs that both find one stale lock and both break it: one gets in at a time, and
/// every INSERT that exited 0 has all its rows in the table, every other none.
#[test]
fn two_inserts_breaking_one_stale_lock_add_their_rows_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let loc = dir.path().join(format!("b{round}.zarr"));
        let loc = loc.to_str().unwrap();
        ok_sql(&copy(loc, 1000, 0, ""));
        let holder = format!(
            r#"{{"host": "{}", "pid": {}, "since": 0, "operation": "INSERT"}}"#,
            host(),
            u32::MAX - 1
        );
        std::fs::write(format!("{loc}.zarrow-lock"), holder).unwrap();
        let insert = |w: u32| {
            format!(
                "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}' \
                 OPTIONS ('break_stale_lock' 'true'); \
                 INSERT INTO t (a, b, s, w) SELECT value AS a, value / 2.0 AS b, \
                 concat('r', CAST(value AS VARCHAR)) AS s, {w} AS w \
                 FROM generate_series({}, {})",
                1000 + 20_000 * w,
                1000 + 20_000 * w + 19_999
            )
        };
        let outs = outputs(vec![spawn_sql(&insert(0)), spawn_sql(&insert(1))]);
        let mut expected: i64 = (0..1000).sum();
        let mut rows = 1000;
        for (w, out) in outs.iter().enumerate() {
            let first = 1000 + 20_000 * w as i64;
            if out.status.success() {
                expected += (first..first + 20_000).sum::<i64>();
                rows += 20_000;
            } else {
                assert!(
                    stderr(out).contains("another writer holds the lock"),
                    "{}",
                    stderr(out)
                );
            }
        }
        let (n, sum, _, _, bad) = summary(loc).unwrap();
        assert_eq!((n, sum, bad), (rows, expected, 0), "round {round}");
    }
}

/// Reads run while a COPY overwrites their table: each reads the old table whole, the new
/// one whole, or fails naming the replacement — never rows of both.
#[test]
fn a_read_racing_an_overwrite_sees_one_table_or_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let loc = dir.path().join("r.zarr");
    let loc = loc.to_str().unwrap();
    let rows = |round: u32| 100_000 + u64::from(round);
    ok_sql(&copy(loc, rows(0), 0, ""));
    let (mut whole_reads, mut refused) = (0, 0);
    for round in 1..=2u32 {
        let mut writer = spawn_sql(&copy(loc, rows(round), round, ", overwrite true"));
        let (old, new) = (
            whole(rows(round - 1), i64::from(round) - 1),
            whole(rows(round), i64::from(round)),
        );
        // One reader at a time, as long as the writer runs (at most 12).
        for _ in 0..12 {
            if writer.try_wait().unwrap().is_some() {
                break;
            }
            match summary(loc) {
                Ok(got) => {
                    assert!(
                        got == old || got == new,
                        "round {round}: mixed rows {got:?}"
                    );
                    whole_reads += 1;
                }
                Err(err) => {
                    assert!(err.contains("replaced by another writer"), "{err}");
                    refused += 1;
                }
            }
        }
        assert!(writer.wait().unwrap().success());
    }
    assert!(whole_reads + refused > 0, "no read ran during an overwrite");
}

/// SIGTERM or SIGINT stops a non-interactive COPY or INSERT: it exits with 128 + the signal,
/// leaving no lock, no staged table and the table as it was.
#[test]
fn a_writer_stopped_by_a_signal_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut stopped = 0;
    for (sig, status) in [("TERM", 143), ("INT", 130)] {
        let base = dir.path().join(sig);
        std::fs::create_dir(&base).unwrap();
        let loc = base.join("s.zarr");
        let loc = loc.to_str().unwrap();
        ok_sql(&copy(loc, 1000, 0, ""));
        let before = summary(loc).unwrap();
        let lock = PathBuf::from(format!("{loc}.zarrow-lock"));
        let insert = format!(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{loc}'; \
             INSERT INTO t (a, b, s, w) SELECT value AS a, value / 2.0 AS b, \
             concat('r', CAST(value AS VARCHAR)) AS s, 5 AS w \
             FROM generate_series(1000, 400999)"
        );
        for statement in [copy(loc, 400_000, 1, ", overwrite true"), insert] {
            let mut child = spawn_sql(&statement);
            if !wait_for(&lock, &mut child) {
                continue;
            }
            std::thread::sleep(Duration::from_millis(100));
            signal(&child, sig);
            let out = child.wait_with_output().unwrap();
            if out.status.success() {
                continue; // done before the signal came
            }
            assert_eq!(
                out.status.code(),
                Some(status),
                "{statement}: {}",
                stderr(&out)
            );
            assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
            assert_eq!(names(&base), ["s.zarr"], "{statement}");
            assert_eq!(summary(loc), Ok(before), "{statement}");
            assert_no_temporary_files(Path::new(loc));
            stopped += 1;
        }
    }
    assert!(stopped > 0, "every writer finished before its signal");
}
