//! A real cluster on loopback: `zarrow-scheduler` and two `zarrow-executor` processes, queried
//! from this process as `zarrow sql --cluster` does. Answers equal a single-process session's,
//! over a local store and over the loopback S3 (moto) store that `tests/remote/start.sh` starts;
//! both executors read chunks; an executor that cannot read a chunk is named in the error; an
//! executor killed mid-query never makes a wrong answer.
//!
//! The S3 and fault-proxy parts need the loopback servers (`eval "$(bash
//! tests/remote/start.sh)"`): the fault tests are ignored unless asked for (tests/run-all.sh
//! runs them with `--include-ignored`); the S3 queries of the cluster test are skipped without
//! the server, except under CI (`CI=true`), where that fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use datafusion::prelude::{SessionConfig, SessionContext};
use zarrow_ballista::cluster_session_context;
use zarrow_datafusion::zarr_session_context;

use crate::common;
use common::{data, try_run as run};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process, killed when dropped; its output goes to `log`.
struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn start(name: &str, program: &str, args: &[String], dir: &Path) -> Process {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(program)
            .args(args)
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        Process {
            name: name.into(),
            child,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the log has a line containing `text`.
    fn wait_for(&mut self, text: &str, timeout: Duration) {
        let start = Instant::now();
        while !self.log().contains(text) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited ({status}):\n{}", self.name, self.log());
            }
            assert!(
                start.elapsed() < timeout,
                "{} did not log '{text}' in {timeout:?}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A scheduler and `n` executors on loopback.
struct Cluster {
    url: String,
    scheduler: Process,
    executors: Vec<Process>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(n: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut scheduler = Process::start(
            "scheduler",
            env!("CARGO_BIN_EXE_zarrow-scheduler"),
            &[
                "--bind-host=127.0.0.1".into(),
                format!("--bind-port={port}"),
                "--external-host=127.0.0.1".into(),
                // Spread tasks over executors, and notice a dead one within seconds.
                "--task-distribution=round-robin".into(),
                "--executor-timeout-seconds=6".into(),
                "--expire-dead-executor-interval-seconds=1".into(),
            ],
            dir.path(),
        );
        scheduler.wait_for("listening", Duration::from_secs(60));
        let mut executors = Vec::new();
        for i in 0..n {
            let work = dir.path().join(format!("work{i}"));
            std::fs::create_dir_all(&work).unwrap();
            let mut executor = Process::start(
                &format!("executor{i}"),
                env!("CARGO_BIN_EXE_zarrow-executor"),
                &[
                    "--bind-host=127.0.0.1".into(),
                    "--external-host=127.0.0.1".into(),
                    format!("--bind-port={}", free_port()),
                    format!("--bind-grpc-port={}", free_port()),
                    format!("--bind-health-port={}", free_port()),
                    "--scheduler-host=127.0.0.1".into(),
                    format!("--scheduler-port={port}"),
                    format!("--work-dir={}", work.display()),
                    "--concurrent-tasks=2".into(),
                    "--executor-heartbeat-interval-seconds=1".into(),
                ],
                dir.path(),
            );
            executor.wait_for("Executor registration succeed", Duration::from_secs(60));
            executors.push(executor);
        }
        Cluster {
            url: format!("df://127.0.0.1:{port}"),
            scheduler,
            executors,
            _dir: dir,
        }
    }

    async fn client(&self) -> SessionContext {
        cluster_session_context(&self.url, config()).await.unwrap()
    }

    /// What every executor logged of its zarr tasks: `(executor, bytes fetched)` per task.
    fn tasks(&self) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        for (i, e) in self.executors.iter().enumerate() {
            for line in e.log().lines().filter(|l| l.contains(" done: rows=")) {
                let bytes = line
                    .rsplit("bytes_fetched=")
                    .next()
                    .and_then(|b| b.trim().parse().ok())
                    .unwrap_or(0);
                out.push((i, bytes));
            }
        }
        out
    }
}

fn config() -> SessionConfig {
    SessionConfig::new().with_target_partitions(4)
}

async fn same_answers(local: &SessionContext, cluster: &SessionContext, queries: &[String]) {
    for sql in queries {
        let want = run(local, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let got = tokio::time::timeout(Duration::from_secs(120), run(cluster, sql))
            .await
            .unwrap_or_else(|_| panic!("{sql}: no answer from the cluster in 120 s"))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert!(want.len() > 1, "{sql}: no rows to compare");
        assert_eq!(got, want, "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scheduler_and_two_executors_answer_as_one_process() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;
    let local = zarr_session_context(config());

    let pbmc = data("pbmc68k_reduced_v3.zarr");
    let anndata = data("anndata_v3.zarr");
    let mut queries = vec![
        format!(
            "SELECT o.bulk_labels, count(*), round(sum(x.\"X\"), 3) FROM '{pbmc}/raw/X' x \
             JOIN '{pbmc}/obs' o ON x.dim_0 = o.dim_0 GROUP BY o.bulk_labels"
        ),
        format!("SELECT dim_1, round(sum(\"X_pca\"), 3) FROM '{pbmc}/obsm/X_pca' WHERE dim_0 < 300 GROUP BY dim_1"),
        format!("SELECT cell_type, count(*) FROM '{anndata}/obs' GROUP BY cell_type"),
        format!("SELECT * FROM '{}/string_sharded_2d'", data("v3_strings.zarr")),
    ];
    if let Some(s3) = zarrow_testkit::optional_loopback("ZARROW_TEST_S3") {
        queries.push(format!(
            "SELECT o.bulk_labels, count(*), round(sum(x.\"X\"), 3) FROM '{s3}/pbmc68k_reduced_v3.zarr/raw/X' x \
             JOIN '{s3}/pbmc68k_reduced_v3.zarr/obs' o ON x.dim_0 = o.dim_0 GROUP BY o.bulk_labels"
        ));
        queries.push(format!("SELECT * FROM '{s3}/anndata_v3.zarr/obs'"));
        queries.push(format!(
            "SELECT * FROM '{s3}/v3_strings.zarr/string_2d' WHERE dim_0 >= 3"
        ));
    }
    same_answers(&local, &client, &queries).await;

    // Both executors read chunks, and only executors did: the client and scheduler logs name
    // no zarr task.
    let tasks = cluster.tasks();
    for i in 0..2 {
        assert!(
            tasks.iter().any(|&(e, bytes)| e == i && bytes > 0),
            "executor {i} read nothing: {tasks:?}"
        );
    }
    assert!(!cluster.scheduler.log().contains(" done: rows="));

    // The CLI: `zarrow sql --cluster` and `zarrow export --cluster` print and write what they
    // do in one process, relative paths included.
    if let Some(zarrow) = zarrow_cli() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cli = |args: &[&str]| {
            let out = Command::new(&zarrow)
                .args(args)
                .current_dir(&root)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "zarrow {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let sql = "SELECT cell_type, count(*) AS cells FROM 'data/pbmc_sample.zarr/obs' \
                   GROUP BY cell_type ORDER BY cells DESC, cell_type";
        let local_text = cli(&["sql", sql]);
        assert!(local_text.contains("CD4 T"), "{local_text}");
        assert_eq!(cli(&["sql", "--cluster", &cluster.url, sql]), local_text);

        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            dir.path().join("local.parquet"),
            dir.path().join("cluster.parquet"),
        );
        let query = "SELECT * FROM t WHERE n_genes > 40";
        for (file, cluster_args) in [(&a, vec![]), (&b, vec!["--cluster", cluster.url.as_str()])] {
            let mut args = vec![
                "export",
                "data/pbmc_sample.zarr/obs",
                "--query",
                query,
                "--output",
            ];
            let file = file.to_str().unwrap();
            args.push(file);
            args.extend(cluster_args);
            cli(&args);
        }
        let read = |f: &Path| format!("SELECT * FROM '{}' ORDER BY barcode", f.display());
        let want = run(&local, &read(&a)).await.unwrap();
        assert!(want.len() > 100, "{}", want.len());
        assert_eq!(run(&local, &read(&b)).await.unwrap(), want);
    }
}

/// The `zarrow` binary beside this test's (built by `cargo test --workspace`); under CI it
/// must be there.
fn zarrow_cli() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("zarrow");
    if path.is_file() {
        return Some(path);
    }
    zarrow_testkit::skip_unless_ci(
        &format!("{} was not built", path.display()),
        "cargo build -p zarrow-cli; cargo test --workspace builds it",
    );
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn an_executor_that_cannot_read_a_chunk_is_named() {
    let proxy = zarrow_testkit::loopback("ZARROW_TEST_FAULT_PROXY");
    let cluster = Cluster::start(1);
    let client = cluster.client().await;
    // Metadata reads pass (the client and the scheduler plan); every chunk read fails.
    let sql = format!(
        "SELECT max(string_2d) FROM '{proxy}/fault/status=403,on=chunks,id=ballista/v3_strings.zarr/string_2d'"
    );
    let err = tokio::time::timeout(Duration::from_secs(120), run(&client, &sql))
        .await
        .expect("an answer in 120 s")
        .expect_err("the chunks cannot be read");
    let text = err.to_string();
    let executor_id = cluster.executors[0]
        .log()
        .lines()
        .find_map(|l| {
            l.split("Executor id: ")
                .nth(1)
                .map(|s| s.trim().to_string())
        })
        .expect("the executor logs its id");
    assert!(
        text.contains(&format!("executor {executor_id} at 127.0.0.1")),
        "{text}"
    );
    assert!(text.contains("string_2d"), "{text}");
    assert!(text.contains("chunk"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the loopback servers: tests/run-all.sh runs them"]
async fn an_executor_killed_mid_query_never_gives_a_wrong_answer() {
    let proxy = zarrow_testkit::loopback("ZARROW_TEST_FAULT_PROXY");
    let mut cluster = Cluster::start(2);
    let client = cluster.client().await;
    let local = zarr_session_context(config());
    let pbmc = data("pbmc68k_reduced_v3.zarr");
    let want_sql = format!(
        "SELECT dim_1 % 7 AS k, count(*), round(sum(\"X\"), 3) AS s FROM '{pbmc}/raw/X' GROUP BY k"
    );
    let want = run(&local, &want_sql).await.unwrap();
    // The same array over HTTP, each chunk read held back, so tasks are running when an
    // executor dies.
    let sql = format!(
        "SELECT dim_1 % 7 AS k, count(*), round(sum(\"X\"), 3) AS s FROM \
         '{proxy}/fault/delay=2,on=chunks,id=kill/pbmc68k_reduced_v3.zarr/raw/X' GROUP BY k"
    );
    let query = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_secs(240), run(&client, &sql)).await
    });
    // Kill executor 0 as soon as it has started a zarr task.
    cluster.executors[0].wait_for("zarr scan of", Duration::from_secs(120));
    cluster.executors[0].kill();
    match query.await.unwrap() {
        Err(_) => panic!("no answer nor error within 240 s of killing an executor"),
        // Ballista ran the lost tasks again on the other executor: the whole answer.
        Ok(Ok(got)) => {
            eprintln!("the query survived the executor's death: its tasks ran again");
            assert_eq!(got, want);
        }
        // Or the query failed, saying why.
        Ok(Err(e)) => {
            let text = e.to_string();
            eprintln!("the query failed after the executor's death: {text}");
            assert!(
                text.to_lowercase().contains("executor") || text.contains("lost"),
                "unclear error: {text}"
            );
        }
    }
}
