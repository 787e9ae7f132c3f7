#!/usr/bin/env python3
"""One process against a Ballista cluster on the same data: the four queries of
`sql_compare.py` run by `zarrow sql` in one process, and by `zarrow sql --cluster` on a
`zarrow-scheduler` with 1 and with 2 `zarrow-executor`s, all on this machine (loopback).

Run from the repository root with the zarr-python 3 venv (`bash tests/fixtures/setup_venvs.sh`)
and release builds (`cargo build --release -p zarrow-cli -p zarrow-ballista`):

    .venv-zarr3/bin/python benches/cluster_compare.py                 # 50M rows, 1M-row chunks

1. Generates (or reuses) `sql_compare.py`'s data set at `--rows` rows (the same generator and
   seed) as a zarr v3 group in `--data-dir`.
2. For each setup — one process; a scheduler and 1 executor; a scheduler and 2 executors —
   times each query as its own `zarrow sql` process (`--repeat` rounds after a warm-up) and
   checks every setup gives the same rows. Cluster queries run with
   `datafusion.execution.target_partitions = --partitions`: the scan's chunks are split into
   that many runs, one task each.
3. Reads from each executor's log what its zarr tasks fetched (the `done: … bytes_fetched=`
   line each task logs), per query.

The executors share this machine's cores with each other and with the scheduler and the client,
so on a small machine the cluster measures its overhead, not its scaling (docs/scaling-out.md
says what limits a cluster).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sql_compare as sc  # noqa: E402  (its generator, queries and process timing)

DONE = re.compile(r"executor (\S+) at \S+: zarr scan of .* done: rows=(\d+) chunks_read=(\d+) "
                  r"requests=(\d+) bytes_fetched=(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    start = time.time()
    while text not in (log.read_text(errors="replace") if log.exists() else ""):
        if proc.poll() is not None:
            sys.exit(f"{proc.args[0]} exited:\n{log.read_text(errors='replace')}")
        if time.time() - start > timeout:
            sys.exit(f"{proc.args[0]} did not log '{text}' in {timeout} s")
        time.sleep(0.05)


class Cluster:
    """A scheduler and `n` executors on loopback, stopped by `stop()`."""

    def __init__(self, bindir: Path, n: int, tasks_per_executor: int, workdir: Path):
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        port = free_port()
        self.url = f"df://127.0.0.1:{port}"
        log = workdir / "scheduler.log"
        p = subprocess.Popen([str(bindir / "zarrow-scheduler"), "--bind-host=127.0.0.1",
                              f"--bind-port={port}", "--external-host=127.0.0.1",
                              "--task-distribution=round-robin"],
                             stdout=log.open("w"), stderr=subprocess.STDOUT)
        self.procs.append(p)
        wait_for(log, "listening", p)
        for i in range(n):
            log = workdir / f"executor{i}.log"
            work = workdir / f"work{i}"
            work.mkdir(exist_ok=True)
            p = subprocess.Popen([str(bindir / "zarrow-executor"), "--bind-host=127.0.0.1",
                                  "--external-host=127.0.0.1", f"--bind-port={free_port()}",
                                  f"--bind-grpc-port={free_port()}",
                                  f"--bind-health-port={free_port()}",
                                  "--scheduler-host=127.0.0.1", f"--scheduler-port={port}",
                                  f"--work-dir={work}", f"--concurrent-tasks={tasks_per_executor}"],
                                 stdout=log.open("w"), stderr=subprocess.STDOUT)
            self.procs.append(p)
            self.logs.append(log)
            wait_for(log, "Executor registration succeed", p)

    def log_sizes(self) -> list[int]:
        return [log.stat().st_size for log in self.logs]

    def fetched_since(self, sizes: list[int]) -> list[dict]:
        """Per executor: tasks, chunks and bytes its zarr tasks logged since `sizes`."""
        out = []
        for log, start in zip(self.logs, sizes):
            with log.open("rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
            tasks = [m for m in DONE.finditer(text)]
            out.append({"tasks": len(tasks),
                        "chunks": sum(int(m.group(3)) for m in tasks),
                        "bytes": sum(int(m.group(5)) for m in tasks)})
        return out

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def sql_cmd(args, sql: str, cluster: str | None) -> list[str]:
    cmd = [str(args.zarrow), "sql", "--format", "csv"]
    if cluster:
        cmd += ["--cluster", cluster]
        sql = f"SET datafusion.execution.target_partitions = {args.partitions}; {sql}"
    return cmd + [sql]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000_000, help="rows (default 50M)")
    ap.add_argument("--chunk", type=int, default=1_000_000, help="rows per chunk (default 1M)")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds after the warm-up (default 3)")
    ap.add_argument("--partitions", type=int, default=8,
                    help="target_partitions of cluster queries: tasks per scan (default 8)")
    ap.add_argument("--tasks-per-executor", type=int, default=os.cpu_count() or 2,
                    help="each executor's --concurrent-tasks (default: this machine's cores)")
    ap.add_argument("--zarrow", type=Path, default=sc.REPO / "target/release/zarrow")
    ap.add_argument("--bindir", type=Path, default=sc.REPO / "target/release",
                    help="where zarrow-scheduler and zarrow-executor are")
    ap.add_argument("--data-dir", type=Path, default=sc.REPO / "target/bench-data")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    args.data_dir = args.data_dir.resolve()
    args.control = False
    stamp = sc.ensure_data(args, args.rows, parquet=False)
    zarr_path = Path(stamp["root"]) / "bench.zarr"
    source = sc.lit(zarr_path)

    setups = [("one process", 0), ("1 executor", 1), ("2 executors", 2)]
    times: dict[str, dict[str, list[float]]] = {}
    fetched: dict[str, dict[str, list[dict]]] = {}
    answers: dict[str, list[str]] = {}
    for name, n in setups:
        workdir = Path(tempfile.mkdtemp(prefix="zarrow-cluster-bench-"))
        cluster = Cluster(args.bindir, n, args.tasks_per_executor, workdir) if n else None
        try:
            for qid, _desc, sql, _cols in sc.QUERIES:
                sql = sql.replace("FROM t", f"FROM {source}")
                cmd = sql_cmd(args, sql, cluster.url if cluster else None)
                runs = []
                for r in range(args.repeat + 1):
                    sizes = cluster.log_sizes() if cluster else []
                    seconds, _rss, out = sc.timed(cmd)
                    rows = sc.canonical(out)
                    if answers.setdefault(qid, rows) != rows:
                        sys.exit(f"{qid}: {name} gives other rows than one process")
                    if r == 0:
                        if cluster:
                            fetched.setdefault(name, {})[qid] = cluster.fetched_since(sizes)
                        continue
                    runs.append(seconds)
                times.setdefault(name, {})[qid] = runs
                sc.log(f"{name} {qid}: median {statistics.median(runs):.3f} s")
        finally:
            if cluster:
                cluster.stop()

    headers = ["query", *[name + " (s)" for name, _ in setups], "bytes fetched per executor (2 executors)"]
    rows = []
    for qid, desc, _sql, _cols in sc.QUERIES:
        per = fetched.get("2 executors", {}).get(qid, [])
        rows.append([f"{qid} {desc}",
                     *[f"{statistics.median(times[name][qid]):.3f}" for name, _ in setups],
                     " / ".join(f"{sc.mib(e['bytes'])} ({e['tasks']} tasks)" for e in per)])
    print(f"{args.rows:,} rows, {args.chunk:,}-row chunks, {args.partitions} tasks per scan, "
          f"{args.tasks_per_executor} concurrent tasks per executor, machine: {sc.cpu_model()}, "
          f"{os.cpu_count()} cores; median of {args.repeat}")
    print(sc.table(headers, rows, args.markdown))
    results = {"stamp": sc.machine_facts(args),
               "rows": args.rows, "chunk": args.chunk, "partitions": args.partitions,
               "tasks_per_executor": args.tasks_per_executor, "times": times, "fetched": fetched}
    out = Path(stamp["root"]) / "cluster_compare_results.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    sc.log(f"wrote {out}")


if __name__ == "__main__":
    main()
