#!/usr/bin/env python3
"""Two builds of zarrow against each other, runs alternating, on `sql_compare.py`'s data.

A change worth a few percent is smaller than the run-to-run spread of a whole `sql_compare.py`
run on a small VM; alternating the two builds' runs cancels most of that drift. The Parquet
query (`q1p`) runs the same code in both builds: how far it moves is the noise floor.

    python3 benches/ab_builds.py BUILD_A BUILD_B [--data DIR] [--what rc,q1,q1p,ex] [--runs N]

BUILD_A / BUILD_B: directories holding a `zarrow` and a `read_column` binary each (copy
`target/release/{zarrow,read_column}` aside before and after a change). `--data`: a data set of
`sql_compare.py` (default `target/bench-data/r10000000_c1000000`). What it times:

- `rc`: `read_column <data>/bench.zarr/label --repeat 8`, every round but the warm-up;
- `q1`…`q4`: `sql_compare.py`'s queries (GROUP BY label, id LIKE, the full scan, the `id`
  projection) over the zarr group, each run its own process;
- `q1p`: q1 over the Parquet file;
- `ex`: `zarrow export <data>/bench.zarr/label` to an Arrow IPC stream on /dev/null, one
  partition in the table's order (where decoding ahead works).

Prints the median and minimum of each build, and the change of the median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# sql_compare.py's queries, `t` the table (kept here: that module needs numpy, this one nothing)
QUERIES = {
    "q1": "SELECT label, count(*) FROM t GROUP BY label",
    "q2": "SELECT count(*) FROM t WHERE id LIKE '%zz%'",
    "q3": "SELECT max(label), max(length(id)), sum(n), max(score) FROM t",
    "q4": "SELECT max(length(id)) FROM t",
}


def read_column(build: Path, data: Path) -> list[float]:
    cmd = [str(build / "read_column"), str(data / "bench.zarr" / "label"), "--repeat", "8"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["seconds"][1:]


def query(build: Path, source: Path, sql: str) -> list[float]:
    sql = sql.replace("FROM t", "FROM '" + str(source).replace("'", "''") + "'")
    started = time.perf_counter()
    subprocess.run([str(build / "zarrow"), "sql", "--format", "csv", sql], capture_output=True,
                   check=True)
    return [time.perf_counter() - started]


def export(build: Path, data: Path) -> list[float]:
    started = time.perf_counter()
    subprocess.run([str(build / "zarrow"), "export", str(data / "bench.zarr" / "label"), "--format",
                    "arrow-stream", "--output", "/dev/null"], capture_output=True, check=True)
    return [time.perf_counter() - started]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path, help="build A: a directory with zarrow and read_column")
    ap.add_argument("b", type=Path, help="build B")
    ap.add_argument("--data", type=Path, default=REPO / "target/bench-data/r10000000_c1000000")
    ap.add_argument("--what", default="rc,q1,q1p", help="rc, q1 … q4, q1p, ex (comma-separated)")
    ap.add_argument("--runs", type=int, default=20,
                    help="runs of each query per build (read_column: a quarter of it, 8 rounds each)")
    args = ap.parse_args()
    for name in args.what.split(","):
        if name == "rc":
            runs, timed = max(1, args.runs // 4), lambda b: read_column(b, args.data)
        elif name == "ex":
            runs, timed = args.runs, lambda b: export(b, args.data)
        elif name in QUERIES or name == "q1p":
            source = args.data / ("bench.parquet" if name == "q1p" else "bench.zarr")
            sql = QUERIES[name.removesuffix("p")]
            runs, timed = args.runs, lambda b, s=source, q=sql: query(b, s, q)
        else:
            ap.error(f"unknown measurement {name!r}")
        seconds: dict[Path, list[float]] = {args.a: [], args.b: []}
        for i in range(runs):
            for build in (args.a, args.b) if i % 2 == 0 else (args.b, args.a):
                seconds[build] += timed(build)
        ma, mb = (statistics.median(seconds[b]) for b in (args.a, args.b))
        for build, m in ((args.a, ma), (args.b, mb)):
            print(f"{name} {build}: median {m:.4f} s, min {min(seconds[build]):.4f} s, "
                  f"n={len(seconds[build])}")
        print(f"{name}: B/A {mb / ma:.3f}")


if __name__ == "__main__":
    main()
