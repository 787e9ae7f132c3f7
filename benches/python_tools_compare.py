#!/usr/bin/env python3
"""Python tools side by side on `sql_compare.py`'s data (the zarr group `bench.zarr` and its
Parquet twin), each task of each tool in a Python process of its own: wall time (median of
`--repeat` after a warm-up, timed inside the process), the process's peak RSS (its VmHWM), and
whether its answer agrees with the others'.

Tasks: `read_label` (the `label` column read whole: the sum of its values' lengths, which no
tool answers from metadata), `group_by_label` (`GROUP BY label`),
`like_id` (`count(*) WHERE id LIKE '%zz%'`), `one_chunk` (the rows of one chunk, chosen by a
filter on the dimension `row`: `sum(n)` over them).

Tools: zarrow through `scan_polars` (also with `label` read as a dictionary, polars
`Categorical`: `zarrow_polars_dictionary`, group-by only; and over `label_categorical.zarr`,
`label` stored as AnnData stores a pandas categorical — int16 codes and the categories — which
the driver writes beside the data with zarr-python: `zarrow_polars_categorical`, group-by
only), datafusion-python over `ZarrTable`,
DuckDB over `zarrow.scan` / `zarrow.dataset`; rainbear + polars; xarray-sql over `xr.open_zarr`;
zarr-python (plain, and with the `zarrs` codec pipeline); polars and DuckDB on the Parquet
twin. A tool whose package is missing or fails is reported as skipped with the reason.

    python benches/python_tools_compare.py [--data DIR] [--repeat N] [--tools a,b]
        [--bench-venv DIR] [--json FILE]
    python benches/python_tools_compare.py --smoke     (a 20k-row store in a temp dir, 1 run)

Targets (checked on the figures, printed): `scan_polars` group-by within 1.2x of polars on the
Parquet twin (with and without `dictionary`); the one-chunk filter <= 0.2x zarrow's full read
of the same columns; zarrow >= 5x faster than rainbear on the `label` read.

`--bench-venv DIR`: run the other tools' processes (rainbear, xarray-sql, zarrs) with that
venv's python; `--setup-bench-venv` creates it with pip (`--bench-python`, e.g. python3.12:
rainbear needs Python >= 3.12) and installs rainbear, xarray-sql, zarrs, xarray, zarr, polars,
pyarrow one by one (one that fails is reported and its tool skipped). zarrow is not installed
there: the zarrow tools run with this interpreter.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TASKS = ["read_label", "group_by_label", "like_id", "one_chunk"]
TOOLS = ["zarrow_polars", "zarrow_polars_dictionary", "zarrow_polars_categorical",
         "zarrow_datafusion", "zarrow_duckdb", "rainbear", "xarray_sql",
         "zarr_python", "zarr_python_zarrs", "polars_parquet", "duckdb_parquet"]
# Tools that are not zarrow's: they run in --bench-venv's python when given.
OTHER_VENV = {"rainbear", "xarray_sql", "zarr_python_zarrs"}
BENCH_PACKAGES = ["rainbear", "xarray-sql", "zarrs", "xarray", "zarr", "polars", "pyarrow"]


# `label` again as AnnData stores a pandas categorical (`sql_compare.write_label_categorical`).
CATEGORICAL = "label_categorical.zarr"


class Skip(Exception):
    """The tool cannot run this task (missing package, an API it lacks): reported, not fatal."""


# ---------------------------------------------------------------------------------------
# Workers: one task of one tool, in this process. Each returns a function that runs the task
# and returns its answer (small and JSON-able, so answers of tools compare).


def answer_counts(pairs) -> list:
    return sorted([str(k), int(v)] for k, v in pairs)


def worker(tool: str, task: str, data: Path, chunk: int) -> tuple:
    group, parquet = str(data / "bench.zarr"), str(data / "bench.parquet")
    lo, hi = chunk, 2 * chunk  # the second chunk's rows
    if tool == "zarrow_polars":
        import zarrow

        return polars_task(lambda: zarrow.scan_polars(group), task, lo, hi), None
    if tool == "zarrow_polars_dictionary":
        import zarrow

        if task != "group_by_label":
            raise Skip("`dictionary` is for grouping a low-cardinality column: group_by_label only")
        return polars_task(lambda: zarrow.scan_polars(group, dictionary=["label"]), task, lo,
                           hi), None
    if tool == "zarrow_polars_categorical":
        import zarrow

        if task != "group_by_label":
            raise Skip("the categorical twin holds `label` only: group_by_label only")
        twin = data / CATEGORICAL
        if not twin.is_dir():
            raise Skip(f"no {twin} (the driver writes it: it needs zarr-python)")
        return polars_task(lambda: zarrow.scan_polars(str(twin)), task, lo, hi), None
    if tool == "zarrow_datafusion":
        import datafusion
        import zarrow

        ctx = datafusion.SessionContext()
        ctx.register_table("t", zarrow.ZarrTable(group))
        return sql_task(lambda q: ctx.sql(q).to_arrow_table().to_pylist(), task, lo, hi)
    if tool == "zarrow_duckdb":
        import duckdb
        import zarrow

        con = duckdb.connect()
        if task == "read_label":
            def read_label() -> int:
                # The C stream of scan() (read once: a new one each run).
                con.register("s", zarrow.scan(group, ["label"]))
                return int(con.sql("SELECT sum(length(label)) FROM s").fetchall()[0][0])

            return read_label, None
        # A dataset: DuckDB pushes the projection and the filters into the zarr scan.
        con.register("t", zarrow.dataset(group))
        return sql_task(lambda q: [dict(zip(["k", "v"], r)) for r in con.sql(q).fetchall()],
                        task, lo, hi, duckdb_rows=True)
    if tool in ("polars_parquet", "duckdb_parquet"):
        if tool == "polars_parquet":
            import polars as pl

            # The twin has no `row` column: the file's row index stands for the dimension.
            return polars_task(lambda: pl.scan_parquet(parquet, row_index_name="row"), task, lo,
                               hi), None
        import duckdb

        con = duckdb.connect()
        con.sql(f"CREATE VIEW t AS SELECT *, file_row_number AS row "
                f"FROM read_parquet('{parquet}', file_row_number = true)")
        return sql_task(lambda q: [dict(zip(["k", "v"], r)) for r in con.sql(q).fetchall()],
                        task, lo, hi, duckdb_rows=True)
    if tool in ("zarr_python", "zarr_python_zarrs"):
        import numpy as np
        import zarr

        if tool == "zarr_python_zarrs":
            try:
                import zarrs  # noqa: F401
            except ImportError as e:
                raise Skip(f"zarrs not installed: {e}") from None
            zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})
        g = zarr.open_group(group, mode="r")

        def like() -> int:
            ids = g["id"][:]
            return int((np.strings.find(ids, "zz") >= 0).sum())

        def counts():
            values, n = np.unique(g["label"][:], return_counts=True)
            return answer_counts(zip(values, n))

        return {
            "read_label": lambda: int(np.strings.str_len(g["label"][:]).sum()),
            "group_by_label": counts,
            "like_id": like,
            # The dimension has no coordinate array: row i is position i.
            "one_chunk": lambda: int(g["n"][lo:hi].sum()),
        }[task], None
    if tool == "rainbear":
        try:
            import rainbear
        except ImportError as e:
            raise Skip(f"rainbear not installed: {e}") from None
        scan = getattr(rainbear, "scan_zarr", None)
        if scan is None:
            raise Skip(f"rainbear {getattr(rainbear, '__version__', '?')} has no scan_zarr")
        return polars_task(lambda: scan(group), task, lo, hi), None
    if tool == "xarray_sql":
        try:
            import xarray as xr
            import xarray_sql
        except ImportError as e:
            raise Skip(f"xarray-sql not installed: {e}") from None
        ds = xr.open_zarr(group, consolidated=True)
        ctx = xarray_sql.XarrayContext()
        ctx.from_dataset("t", ds, chunks={"row": chunk})
        return sql_task(lambda q: ctx.sql(q).to_arrow_table().to_pylist(), task, lo, hi)
    raise SystemExit(f"unknown tool {tool}")


def polars_task(scan, task: str, lo: int, hi: int):
    """A task over the polars LazyFrame `scan()` makes. Each run makes a new one: rainbear keeps
    the chunks it has read inside its LazyFrame, so collecting the same one again is a cache hit
    (measured: 1.7 s, then 0.12-0.19 s), not a read."""
    import polars as pl

    return {
        "read_label": lambda: scan().select(pl.col("label").str.len_bytes().sum()).collect().item(),
        "group_by_label": lambda: answer_counts(scan().group_by("label").len().collect().iter_rows()),
        "like_id": lambda: scan().filter(pl.col("id").str.contains("zz", literal=True))
        .select(pl.len()).collect().item(),
        "one_chunk": lambda: scan().filter((pl.col("row") >= lo) & (pl.col("row") < hi))
        .select(pl.col("n").sum()).collect().item(),
    }[task]


def sql_task(run, task: str, lo: int, hi: int, duckdb_rows: bool = False):
    """A task as SQL over a table `t`."""
    queries = {
        "read_label": "SELECT sum(length(label)) AS v FROM t",
        "group_by_label": "SELECT label AS k, count(*) AS v FROM t GROUP BY label",
        "like_id": "SELECT count(*) AS v FROM t WHERE id LIKE '%zz%'",
        "one_chunk": f"SELECT sum(n) AS v FROM t WHERE \"row\" >= {lo} AND \"row\" < {hi}",
    }
    q = queries[task]

    def go():
        rows = run(q)
        if task == "group_by_label":
            return answer_counts((r["k"], r["v"]) for r in rows)
        first = rows[0]
        return int(first["k"] if duckdb_rows else first["v"])

    return go, None


def peak_rss_mib() -> float | None:
    """This process's peak resident memory (VmHWM: since its exec, unlike a child's
    ru_maxrss, which counts the parent's pages copied at fork)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def compact_answer(answer):
    """The answer as the result file keeps it: itself when short, else its length and a
    SHA-256 of its JSON (a GROUP BY's 1,000 pairs per tool would make the file 36k lines)."""
    text = json.dumps(answer, sort_keys=True)
    if len(text) <= 200:
        return answer
    import hashlib

    return {"items": len(answer), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def run_worker(args) -> None:
    """`--worker TOOL TASK`: time the task, print one JSON line."""
    try:
        f, _ = worker(args.worker[0], args.worker[1], args.data, args.chunk)
        answer = compact_answer(f())  # warm-up (and the answer)
        seconds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            f()
            seconds.append(time.perf_counter() - started)
        print(json.dumps({"answer": answer, "seconds": seconds, "peak_rss_mib": peak_rss_mib()}))
    except Skip as e:
        print(json.dumps({"skip": str(e)}))
    except Exception as e:  # a tool that fails is reported, the others go on
        print(json.dumps({"skip": f"failed: {type(e).__name__}: {e}"[:400]}))


# ---------------------------------------------------------------------------------------
# The driver.


def spawn(python: str, tool: str, task: str, args) -> dict:
    cmd = [python, str(Path(__file__).resolve()), "--worker", tool, task, "--data",
           str(args.data), "--chunk", str(args.chunk), "--repeat", str(args.repeat)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"skip": f"exit {proc.returncode}: {err.strip().splitlines()[-1:]}"}
    result = json.loads(lines[-1])
    result["process_seconds"] = round(time.perf_counter() - started, 3)
    return result


def make_smoke_data(root: Path, rows: int, chunk: int) -> Path:
    """A small `sql_compare.py`-shaped group (its generator) and its Parquet twin."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyarrow.parquet as pq
    import sql_compare
    import zarrow

    sql_compare.write_zarr(root / "bench.zarr", rows, chunk)
    sql_compare.write_label_categorical(root / CATEGORICAL, rows, chunk)
    # Like sql_compare.py's twin: the data columns only (the file's row index is `row`).
    table = zarrow.read_table(str(root / "bench.zarr"))
    pq.write_table(table.drop_columns(["row"]), root / "bench.parquet")
    return root


def ensure_categorical(data: Path, chunk: int) -> None:
    """Writes the categorical twin of `data` unless it is there (with zarr-python, through
    sql_compare's generator; without zarr-python its tool is skipped)."""
    rows = rows_of(data)
    if (data / CATEGORICAL).is_dir() or rows is None:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import sql_compare
    except ImportError as e:
        print(f"no categorical twin ({e}): zarrow_polars_categorical is skipped")
        return
    print(f"writing {data / CATEGORICAL} (label as an AnnData categorical)")
    sql_compare.write_label_categorical(data / CATEGORICAL, rows, chunk)


def setup_bench_venv(venv: Path, python: str) -> None:
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    for package in BENCH_PACKAGES:  # one by one: a package that fails to install is skipped
        r = subprocess.run([str(venv / "bin/pip"), "install", "--quiet",
                            "--disable-pip-version-check", package])
        if r.returncode != 0:
            print(f"bench venv: {package} did not install; its tool will be skipped")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO / "target/bench-data/r10000000_c1000000")
    ap.add_argument("--chunk", type=int, default=None, help="rows per chunk (default: from --data's name)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--bench-venv", type=Path, default=None)
    ap.add_argument("--setup-bench-venv", action="store_true")
    ap.add_argument("--bench-python", default=sys.executable,
                    help="the interpreter --setup-bench-venv makes the venv with (rainbear "
                         "needs Python >= 3.12)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--note", default=None,
                    help="a remark for the result file's stamp (which build, what else ran)")
    ap.add_argument("--smoke", action="store_true", help="20k rows in a temp dir, one run")
    ap.add_argument("--worker", nargs=2, metavar=("TOOL", "TASK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.chunk is None:
        name = args.data.name
        args.chunk = int(name.split("_c")[1]) if "_c" in name else 1_000_000
    if args.worker:
        run_worker(args)
        return

    tmp = None
    if args.smoke:
        tmp = tempfile.TemporaryDirectory(prefix="zarrow-python-tools-")
        args.chunk, args.repeat = 2_000, 1
        args.data = make_smoke_data(Path(tmp.name), 20_000, args.chunk)
    if args.setup_bench_venv and args.bench_venv:
        setup_bench_venv(args.bench_venv, args.bench_python)
    other_python = str(args.bench_venv / "bin/python") if args.bench_venv else sys.executable

    if "zarrow_polars_categorical" in args.tools.split(","):
        ensure_categorical(args.data, args.chunk)
    results: dict = {}
    for task in args.tasks.split(","):
        for tool in args.tools.split(","):
            python = other_python if tool in OTHER_VENV else sys.executable
            results.setdefault(task, {})[tool] = spawn(python, tool, task, args)

    failures, checks = report(results, args)
    if args.json:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from sql_compare import run_stamp  # the stamp every harness writes

        versions = package_versions(sys.executable)
        if other_python != sys.executable:
            versions["other tools' venv"] = package_versions(other_python)
        stamp = {**run_stamp(), **({"note": args.note} if args.note else {})}
        args.json.write_text(json.dumps({"stamp": stamp, "data": str(args.data),
                                         "rows": rows_of(args.data), "chunk": args.chunk,
                                         "repeat": args.repeat, "versions": versions,
                                         "results": results, "checks": checks,
                                         "answers_agree": {t: answers_agree(t, r)
                                                           for t, r in results.items()},
                                         "not_compared": {t: sorted(v) for t, v
                                                          in ORDER_DEPENDENT.items()}},
                                        indent=2) + "\n")
    if tmp is not None:
        tmp.cleanup()
    if failures:
        raise SystemExit("answers disagree: " + "; ".join(failures))


def package_versions(python: str) -> dict:
    """The versions of the packages the tools run on, as `python` has them installed."""
    code = ("import importlib.metadata as m, json, platform\n"
            "v = {'python': platform.python_version()}\n"
            f"for p in {sorted(set(BENCH_PACKAGES) | {'zarrow', 'duckdb', 'datafusion'})!r}:\n"
            "    try: v[p] = m.version(p)\n"
            "    except m.PackageNotFoundError: pass\n"
            "print(json.dumps(v))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr.strip()[-200:]}


def rows_of(data: Path) -> int | None:
    """The rows of `data`'s store, from the stamp `sql_compare.py` leaves beside it."""
    try:
        return int(json.loads((data / "stamp.json").read_text())["zarr"]["params"]["rows"])
    except (OSError, ValueError, KeyError):
        return None


# The Parquet twin holds the store's rows in another order (DataFusion's parallel COPY wrote it),
# so the rows at a range of its row index are not the store's: those answers are not compared.
ORDER_DEPENDENT = {"one_chunk": {"polars_parquet", "duckdb_parquet"}}


def answers_agree(task: str, by_tool: dict) -> bool:
    """Whether every tool that answered `task` gave the same answer."""
    skip = ORDER_DEPENDENT.get(task, set())
    answers = {json.dumps(r["answer"], sort_keys=True) for t, r in by_tool.items()
               if "answer" in r and t not in skip}
    return len(answers) <= 1


def report(results: dict, args) -> tuple[list[str], list[dict]]:
    """Print the tables and the targets; the tasks whose answers disagree, and the targets
    checked (as the result file records them)."""
    failures = []
    print(f"data: {args.data} (chunks of {args.chunk:,} rows); median of {args.repeat}")
    for task, by_tool in results.items():
        agree = answers_agree(task, by_tool)
        if not agree:
            failures.append(task)
        print(f"\n{task} (answers {'agree' if agree else 'DISAGREE'})")
        for tool, r in by_tool.items():
            if "skip" in r:
                print(f"  {tool:26} skipped: {r['skip']}")
                continue
            print(f"  {tool:26} {statistics.median(r['seconds']):8.3f} s  "
                  f"peak RSS {r['peak_rss_mib'] or 0:8.1f} MiB")
    med = lambda task, tool: (statistics.median(results[task][tool]["seconds"])  # noqa: E731
                              if "seconds" in results.get(task, {}).get(tool, {}) else None)
    print("\ntargets:")
    pairs = [
        ("scan_polars group-by / polars on Parquet <= 1.2",
         med("group_by_label", "zarrow_polars"), med("group_by_label", "polars_parquet"), 1.2),
        ("scan_polars group-by, `label` as a dictionary / polars on Parquet <= 1.2",
         med("group_by_label", "zarrow_polars_dictionary"), med("group_by_label", "polars_parquet"),
         1.2),
        ("scan_polars group-by, `label` stored as a categorical / polars on Parquet <= 1.2",
         med("group_by_label", "zarrow_polars_categorical"),
         med("group_by_label", "polars_parquet"), 1.2),
        ("one-chunk filter / full label read (scan_polars) <= 0.2",
         med("one_chunk", "zarrow_polars"), med("read_label", "zarrow_polars"), 0.2),
        ("scan_polars label read / rainbear <= 0.2 (>= 5x)",
         med("read_label", "zarrow_polars"), med("read_label", "rainbear"), 0.2),
    ]
    checks = []
    for name, a, b, limit in pairs:
        if a is None or b is None:
            print(f"  {name}: not measured")
        else:
            ratio = a / b
            print(f"  {name}: {ratio:.2f} {'met' if ratio <= limit else 'NOT met'}")
            checks.append({"target": name, "value": f"{ratio:.2f}", "ok": ratio <= limit})
    return failures, checks


if __name__ == "__main__":
    main()
