#!/usr/bin/env python3
"""Two builds of zarrow against each other: wall time with runs alternating, and instruction
counts under callgrind.

A change worth a few percent is smaller than the run-to-run spread of a whole benchmark run on a
small VM; alternating the two builds' runs cancels most of that drift. The Parquet query (`q1p`)
runs the same code in both builds: how far it moves is the noise floor. Instruction counts
(`cg-q1` …) do not depend on the machine's load and repeat to a fraction of a percent.

    python3 benches/ab_builds.py BUILD_A BUILD_B [--data DIR] [--what rc,q1,q1p,cg-q1] [--runs N]
                                 [--partitions N] [--one-core] [--json FILE] [--publish]

BUILD_A / BUILD_B: directories holding a `zarrow` and a `read_column` binary each (copy
`target/release/{zarrow,read_column}` aside before and after a change; any build profile, e.g.
`--profile profiling`). `--data`: a data set of `scan_scaling.py` (`t.zarr`, `t.parquet`; the
default, `target/bench-data/scan_scaling/r5000000_c1048576`, made with `python3
benches/scan_scaling.py --rows 5000000 …`, standard library only) or of `sql_compare.py`
(`bench.zarr`, `bench.parquet`). What it measures:

- `rc`: `read_column <data>/<zarr>/label --repeat 8`, every round but the warm-up;
- `q1`…`q4`: the data set's harness's queries over the zarr group, each run its own process,
  one partition (`target_partitions = 1`; `--partitions N` sets another; `--one-core` pins
  each to one core with `taskset -c 0`);
- `q1p`: q1 over the Parquet file (the noise floor);
- `ex`: `zarrow export <data>/<zarr>/label` to an Arrow IPC stream on /dev/null;
- `cg-q1` … `cg-q4`, `cg-q1p`: the query's instruction count under `valgrind --tool=callgrind`
  (one run each; needs valgrind);
- `pf-q1` … `pf-q4`, `pf-q1p`: the query's page faults, memory it touched for the first time,
  which the kernel zeroes and callgrind does not see (`perf stat`; a quarter of `--runs`).

Prints the median and minimum of each build and the change of the median; `--json` writes the
runs stamped with commit, machine and date, and `--publish` copies that file to
`benches/results/ab_builds_results-<commit>.json` and renders docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_counts import counted, read_counts  # noqa: E402
from stamp import REPO, run_stamp  # noqa: E402

# sql_compare.py's queries (kept here: that module needs numpy, this one nothing)
SQL_COMPARE_QUERIES = {
    "q1": "SELECT label, count(*) FROM t GROUP BY label",
    "q2": "SELECT count(*) FROM t WHERE id LIKE '%zz%'",
    "q3": "SELECT max(label), max(length(id)), sum(n), max(score) FROM t",
    "q4": "SELECT max(length(id)) FROM t",
}
DEFAULT_DATA = REPO / "target/bench-data/scan_scaling/r5000000_c1048576"


def layout(data: Path) -> tuple[Path, Path, dict[str, str]]:
    """The zarr group, the Parquet file and the queries of a data set of either harness."""
    if (data / "t.zarr").is_dir():
        from scan_scaling import QUERIES
        return data / "t.zarr", data / "t.parquet", {q: sql for q, _, sql in QUERIES}
    if (data / "bench.zarr").is_dir():
        return data / "bench.zarr", data / "bench.parquet", SQL_COMPARE_QUERIES
    sys.exit(f"ab_builds.py: {data} holds no t.zarr (scan_scaling.py) or bench.zarr "
             "(sql_compare.py) data set")


def sql_command(build: Path, source: Path, sql: str, partitions: int,
                one_core: bool = False) -> list[str]:
    sql = sql.replace("FROM t", "FROM '" + str(source).replace("'", "''") + "'")
    pin = ["taskset", "-c", "0"] if one_core else []
    return pin + [str(build / "zarrow"), "sql", "--format", "csv",
                  f"SET datafusion.execution.target_partitions = {partitions}; " + sql]


def read_column(build: Path, zarr: Path) -> list[float]:
    cmd = [str(build / "read_column"), str(zarr / "label"), "--repeat", "8"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["seconds"][1:]


def timed(cmd: list[str]) -> list[float]:
    started = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    return [time.perf_counter() - started]


def instructions(cmd: list[str]) -> list[float]:
    """The instructions callgrind counts for the whole process (its `Collected` line)."""
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd,
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"ab_builds.py: {' '.join(cmd)} failed under callgrind:\n{run.stderr[-2000:]}")
    found = re.search(r"Collected\s*:\s*(\d+)", run.stderr)
    if not found:
        sys.exit("ab_builds.py: callgrind printed no instruction count")
    return [float(found.group(1))]


def page_faults(cmd: list[str]) -> list[float]:
    """The page faults `perf stat` counts for the whole process: memory it touched first."""
    out = REPO / "target/bench-data/ab_builds_perf_stat.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(counted(cmd, out, ("page-faults",)), capture_output=True, text=True)
    faults = read_counts(out).get("faults") if run.returncode == 0 else None
    if faults is None:
        sys.exit(f"ab_builds.py: no page-fault count for {' '.join(cmd)}:\n{run.stderr[-2000:]}")
    return [faults]


def measurement(name: str, args, zarr: Path, parquet: Path, queries: dict[str, str]):
    """(runs, a function of a build giving a list of values, unit) for a measurement name."""
    if name == "rc":
        return max(1, args.runs // 4), lambda b: read_column(b, zarr), "s"
    if name == "ex":
        return args.runs, lambda b: timed([str(b / "zarrow"), "export", str(zarr / "label"),
                                           "--format", "arrow-stream", "--output", "/dev/null"]), "s"
    how, _, query = name.rpartition("-")
    if query.removesuffix("p") not in queries or how not in ("", "cg", "pf"):
        sys.exit(f"ab_builds.py: unknown measurement {name!r}")
    source = parquet if query.endswith("p") else zarr
    command = lambda b, pin=args.one_core: sql_command(
        b, source, queries[query.removesuffix("p")], args.partitions, pin)
    if how == "cg":  # valgrind runs every thread on one core anyway, and cannot follow taskset
        return 1, lambda b: instructions(command(b, False)), "instructions"
    if how == "pf":
        return max(1, args.runs // 4), lambda b: page_faults(command(b)), "page faults"
    return args.runs, lambda b: timed(command(b)), "s"


def compare(args) -> dict:
    zarr, parquet, queries = layout(args.data)
    results = {}
    for name in args.what.split(","):
        runs, run, unit = measurement(name, args, zarr, parquet, queries)
        values: dict[str, list[float]] = {"a": [], "b": []}
        for i in range(runs):
            for side in ("a", "b") if i % 2 == 0 else ("b", "a"):
                values[side] += run(args.a if side == "a" else args.b)
        ma, mb = statistics.median(values["a"]), statistics.median(values["b"])
        show = (lambda v: f"{v:.4f}") if unit == "s" else (lambda v: f"{v:,.0f}")
        for side, build, m in (("a", args.a, ma), ("b", args.b, mb)):
            print(f"{name} {build}: median {show(m)} {unit}, min {show(min(values[side]))} {unit}, "
                  f"n={len(values[side])}")
        print(f"{name}: B/A {mb / ma:.3f}", flush=True)
        sql = queries.get(name.rpartition("-")[2].removesuffix("p"))
        results[name] = {"unit": unit, "a": values["a"], "b": values["b"], "sql": sql}
    return results


def build_facts(build: Path, label: str | None) -> dict:
    version = subprocess.run([str(build / "zarrow"), "--version"], capture_output=True,
                             text=True).stdout.strip()
    return {"path": str(build), "label": label or build.name, "version": version}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path, help="build A: a directory with zarrow and read_column")
    ap.add_argument("b", type=Path, help="build B")
    ap.add_argument("--label-a", help="what build A is (e.g. its commit), for the result file")
    ap.add_argument("--label-b", help="what build B is")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--what", default="rc,q1,q1p",
                    help="rc, q1 … q4, q1p, ex, cg-q1 … cg-q4, cg-q1p, pf-q1 … pf-q1p "
                         "(comma-separated)")
    ap.add_argument("--runs", type=int, default=20,
                    help="runs of each query per build (read_column: a quarter of it, 8 rounds each)")
    ap.add_argument("--partitions", type=int, default=1,
                    help="the queries' target_partitions (1: one partition, as by default)")
    ap.add_argument("--one-core", action="store_true",
                    help="run the queries pinned to one core (`taskset -c 0`): nothing decodes "
                         "ahead beside the query")
    ap.add_argument("--json", type=Path, help="write the runs, stamped, to this file")
    ap.add_argument("--note", help="a note stored in the stamp (e.g. the build profile)")
    ap.add_argument("--publish", action="store_true",
                    help="copy the result file to benches/results/ and run report.py "
                         "(docs/benchmarks-ab.md)")
    args = ap.parse_args()
    stamp = run_stamp()
    if args.note:
        stamp["note"] = args.note
    data = {"stamp": stamp, "data": str(args.data), "runs": args.runs,
            "partitions": args.partitions, "one_core": args.one_core,
            "builds": {"a": build_facts(args.a, args.label_a), "b": build_facts(args.b, args.label_b)},
            "results": compare(args)}
    out = args.json or (REPO / "target/bench-data/ab_builds_results.json" if args.publish else None)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {out}")
    if args.publish:
        shutil.copyfile(out, REPO / "benches/results" / f"ab_builds_results-{stamp['git']}.json")
        subprocess.run([sys.executable, str(REPO / "benches/report.py")], check=True)


if __name__ == "__main__":
    main()
