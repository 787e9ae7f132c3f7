#!/usr/bin/env python3
"""Render docs/benchmarks.md and docs/benchmarks-ab.md from the benchmark harnesses' result files.

    python3 benches/report.py                  # benches/results/*.json -> docs/benchmarks.md, docs/benchmarks-ab.md
    python3 benches/report.py --check          # exit 1 if either page is not what it renders
    python3 benches/report.py --results DIR --out FILE [--ab-out FILE]

docs/benchmarks.md holds the headline runs (every harness but `ab_builds.py`); the
build-against-build runs of `ab_builds.py` are on a page of their own, beside it
(`--ab-out`, default: the `--out` page's name with `-ab`).

Every figure on the page comes from a result file, and every table is stamped with the commit,
machine and date its file records; each target is checked against the figures of the run that
measured them. A result file is the JSON a harness writes (`sql_compare.py`,
`cluster_compare.py`, `icechunk_compare.py`, `join_compare.py`, `python_compare.py --json`,
`ab_builds.py --json`), copied into `benches/results/` under a name that starts with the
harness's (`sql_compare_results*.json`, …). With no result files the page says how to produce them and holds no figures. Standard library
only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GIB = 1 << 30

# Targets, as the harnesses state them (sql_compare.py, icechunk_compare.py, python_compare.py).
SQL_RATIO_MAX = 1.25          # zarr / Parquet, every query
LABEL_SPEEDUP_MIN = 20.0      # zarr-python / zarrow, full read of `label`
RSS_MAX = GIB                 # GROUP BY peak RSS
ICECHUNK_RATIO_MAX = 1.10     # repository / store
PYTHON_VS_CLI_MAX = 1.10      # zarr/Parquet through datafusion-python over the CLI's
SCALING_RATIO_MAX = {"q1": 1.5}  # scan_scaling.py: zarr / Parquet, q1 (dictionary pages help Parquet)
SCALING_RATIO_DEFAULT = 1.25     # … and every other query

HOW = """\
## How the figures are made

| harness | command (from the repository root; release builds) | result file |
| --- | --- | --- |
| SQL, zarr vs Parquet, and zarr-python | `.venv-zarr3/bin/python benches/sql_compare.py --markdown --rss-rows 20000000` | `target/bench-data/sql_compare_results.json` |
| one process against a Ballista cluster | `.venv-zarr3/bin/python benches/cluster_compare.py --markdown` | `target/bench-data/r<rows>_c<chunk>/cluster_compare_results.json` |
| Icechunk repository against the plain store | `.venv-icechunk/bin/python benches/icechunk_compare.py` | `target/bench-data/r<rows>_c<chunk>/icechunk_compare_results.json` |
| a remote store at 0, 20 and 80 ms RTT (nginx + `delay_proxy`) | `.venv-zarr3/bin/python benches/remote_compare.py` | `target/bench-data/remote_compare_results.json` |
| the sizes of the CLI and the Python extension | `.venv-zarr3/bin/python benches/sizes.py --datafusion-python target/venv-zarrow-wheel --json target/sizes_results.json` | the `--json` file |
| Python tools side by side (in a venv with the release wheel; the other tools' venv made by `--setup-bench-venv --bench-python python3.12`) | `python benches/python_tools_compare.py --bench-venv target/venv-bench-tools --json target/bench-data/python_tools_compare_results.json` | the `--json` file |
| joins, semi-joins and top-k on an AnnData store, pruning at run time on and off (local, and HTTP behind `delay_proxy`) | `.venv-zarr3/bin/python benches/join_compare.py` | `target/bench-data/join_compare_results.json` |
| one core and many partitions, zarr vs Parquet (standard library only; data made by SQL) | `python3 benches/scan_scaling.py` | `target/bench-data/scan_scaling_results.json` |
| two builds against each other: wall time alternating, and callgrind instruction counts (standard library only, plus valgrind) | `python3 benches/ab_builds.py BUILD_A BUILD_B --what rc,q1,q2,q1p,cg-q1,cg-q2,cg-q1p --json target/bench-data/ab_builds_results.json` | the `--json` file |
| writing zarr: `COPY … STORED AS ZARR` vs Parquet, xarray, zarr-python | `.venv-zarr3/bin/python benches/write_compare.py` | `target/bench-data/write_compare_results.json` |
| Python package (in a venv with the release wheel) | `python benches/python_compare.py --cli-ratios target/bench-data/sql_compare_results.json --json target/bench-data/python_compare_results.json` | the `--json` file |

Builds: `cargo build --release -p zarrow-cli -p zarrow-ballista -p zarrow-benches --bin zarrow
--bin read_column --bin delay_proxy --bin zarrow-scheduler --bin zarrow-executor`; the wheel with `maturin build
--release --manifest-path crates/zarrow-python/Cargo.toml`; the venvs with `bash
tests/fixtures/setup_venvs.sh` (with the argument `icechunk` for the Icechunk venv).
[benches/README.md](../benches/README.md) describes each harness, its data and its method.

To publish a run: copy its result file into `benches/results/` (keep the harness's name as the
start of the file name, e.g. `sql_compare_results-<commit>.json`), run `python3
benches/report.py`, and commit the result file with the pages (this one, and
[benchmarks-ab.md](benchmarks-ab.md) for `ab_builds.py` runs). `python3 benches/report.py
--check` (run by `.ci/run`) fails when either page differs from what the result files give.

Not on this page: the criterion chunk-decode benchmark (`cargo bench -p zarrow-benches --bench
decode`; criterion's files record no commit or machine).
"""


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |",
           "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(headers))) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


DIRTY = "-dirty"


def stamp_git(data: dict) -> str:
    s = data.get("stamp") or data.get("facts", {}).get("machine") or {}
    return str(s.get("git", "not recorded"))


def is_dirty(data: dict) -> bool:
    """Whether the run's stamp says its working tree had uncommitted changes (`git describe
    --dirty`)."""
    return stamp_git(data).endswith(DIRTY)


def stamp_line(data: dict, path: Path) -> str:
    s = data.get("stamp") or data.get("facts", {}).get("machine") or {}
    git = stamp_git(data)
    commit = (f"`{git[:-len(DIRTY)]}` **with uncommitted changes** (stamped `{git}`)"
              if git.endswith(DIRTY) else f"`{git}`")
    machine = ", ".join(str(x) for x in (s.get("cpu"), f"{s['nproc']} CPUs" if s.get("nproc") else None,
                                         s.get("mem"), s.get("os")) if x) or "machine not recorded"
    versions = ", ".join(str(s[k]) if str(s[k]).startswith(k) else f"{k.replace('_', '-')} {s[k]}"
                         for k in ("zarrow", "zarr_python", "datafusion_python", "pyarrow")
                         if s.get(k))
    return (f"*Run: commit {commit}, {machine}, "
            f"{s.get('date', 'date not recorded')}"
            + (f"; {versions}" if versions else "") + f". File: `{rel(path)}`.*")


def run_date(data: dict) -> str:
    return (data.get("stamp") or {}).get("date", "")


def rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def verdict(ok: bool) -> str:
    return "met" if ok else "**MISSED**"


def render_sql(data: dict) -> list[str]:
    args = data.get("args", {})
    queries = data.get("queries", {})
    results = data["results"]
    out = [f"{int(args.get('rows', 0)):,} rows, {int(args.get('chunk', 0)):,}-row chunks / row "
           f"groups; median of {args.get('repeat', '?')} runs after a warm-up, each query its own "
           "`zarrow sql` process.", ""]
    rows, checks = [], []
    for qid, r in results.items():
        z, p = r["zarr"], r["parquet"]
        ratio = med(z["seconds"]) / med(p["seconds"])
        rows.append([f"{qid} {queries.get(qid, {}).get('description', '')}".strip(),
                     f"{med(z['seconds']):.3f}", f"{med(p['seconds']):.3f}", f"{ratio:.2f}",
                     mib(max(z["rss"])), mib(max(p["rss"]))])
        checks.append((f"{qid} zarr/Parquet ≤ {SQL_RATIO_MAX}", f"{ratio:.2f}", ratio <= SQL_RATIO_MAX))
    out += md_table(["query", "zarr (zarrow) s", "Parquet (DataFusion) s", "zarr/Parquet",
                     "zarr peak RSS", "Parquet peak RSS"], rows)
    out.append("")
    control = data.get("q1_control")
    if control:
        cz, cp = med(control["zarr"]["seconds"]), med(control["parquet"]["seconds"])
        out.append(f"q1 with `label` stored uncompressed (the control): zarr {cz:.3f} s, Parquet "
                   f"{cp:.3f} s, ratio {cz / cp:.2f}.")
        out.append("")
    label = data.get("label_read")
    if label:
        zp, zr = med(label["zarr_python"]), med(label["zarrow_read"])
        line = (f"`label` read whole: zarr-python {zp:.3f} s, zarrow {zr:.3f} s "
                f"({zp / zr:.1f}×)")
        if label.get("zarrow_export"):
            line += f"; `zarrow export` of it as a whole process {med(label['zarrow_export']):.3f} s"
        out += [line + ".", ""]
        checks.append((f"zarr-python / zarrow on `label` ≥ {LABEL_SPEEDUP_MIN:.0f}×",
                       f"{zp / zr:.1f}×", zp / zr >= LABEL_SPEEDUP_MIN))
    if "q1" in results:
        gb = max(results["q1"]["zarr"]["rss"])
        checks.append((f"GROUP BY peak RSS < 1 GiB at {int(args.get('rows', 0)):,} rows", mib(gb),
                       gb < RSS_MAX))
    big = data.get("rss_rows")
    if big:
        b = max(big["rss"])
        checks.append((f"GROUP BY peak RSS < 1 GiB at {int(args.get('rss_rows') or 0):,} rows",
                       mib(b), b < RSS_MAX))
    return out + render_checks(checks)


def render_cluster(data: dict) -> list[str]:
    times, fetched = data["times"], data.get("fetched", {})
    setups = list(times)
    qids = list(next(iter(times.values()))) if times else []
    out = [f"{int(data.get('rows', 0)):,} rows, {int(data.get('chunk', 0)):,}-row chunks, "
           f"{data.get('partitions', '?')} tasks per scan, {data.get('tasks_per_executor', '?')} "
           "concurrent tasks per executor; every process on one machine (loopback), so the "
           "cluster columns measure its overhead, not scaling. Median seconds.", ""]
    rows = []
    for qid in qids:
        per = fetched.get("2 executors", {}).get(qid, [])
        rows.append([qid, *[f"{med(times[s][qid]):.3f}" for s in setups],
                     " / ".join(f"{mib(e['bytes'])} ({e['tasks']} tasks)" for e in per) or "—"])
    out += md_table(["query", *setups, "fetched per executor (2 executors)"], rows)
    return out + ["", "No target: this harness measures what a cluster costs.", ""]


def render_icechunk(data: dict) -> list[str]:
    times = data["times"]
    out = [f"{int(data.get('rows', 0)):,} rows, {int(data.get('chunk', 0)):,}-row chunks; the "
           "same chunks as a plain store and committed into a repository. Median seconds.", ""]
    rows, checks = [], []
    for qid, t in times.items():
        s, r = med(t["store"]), med(t["repository"])
        rows.append([qid, f"{s:.3f}", f"{r:.3f}", f"{r / s:.2f}"])
        checks.append((f"{qid} repository/store ≤ {ICECHUNK_RATIO_MAX}", f"{r / s:.2f}",
                       r / s <= ICECHUNK_RATIO_MAX))
    out += md_table(["query", "store", "repository", "repository/store"], rows)
    return out + [""] + render_checks(checks)


def render_python(data: dict) -> list[str]:
    cli = data.get("cli_ratios", {})
    out = [f"{int(data.get('rows', 0)):,} rows; median of {data.get('repeat', '?')} after a "
           "warm-up, in one Python process; zarr through `zarrow.ZarrTable` in datafusion-python "
           "against `register_parquet` on the same data.", ""]
    rows, checks = [], []
    for qid, r in data["results"].items():
        ratio = med(r["zarr"]) / med(r["parquet"])
        c = cli.get(qid)
        rows.append([qid, f"{med(r['zarr']):.3f}", f"{med(r['parquet']):.3f}", f"{ratio:.2f}",
                     f"{c:.2f}" if c else "—"])
        if c:
            checks.append((f"{qid} within 10 % of the CLI's zarr/Parquet", f"{ratio / c:.2f}",
                           ratio / c <= PYTHON_VS_CLI_MAX))
    out += md_table(["query", "zarr s", "Parquet s", "zarr/Parquet", "CLI zarr/Parquet"], rows)
    out.append("")
    label = data.get("label_read")
    if label:
        zp, zr = med(label["zarr_python"]), med(label["zarrow"])
        out += [f"`label` read whole: zarr-python {zp:.3f} s, `zarrow.read_table` {zr:.3f} s "
                f"({zp / zr:.1f}×).", ""]
        checks.append((f"zarr-python / zarrow.read_table ≥ {LABEL_SPEEDUP_MIN:.0f}×",
                       f"{zp / zr:.1f}×", zp / zr >= LABEL_SPEEDUP_MIN))
    return out + render_checks(checks)


def render_sweep(chunks: str, by_rtt: dict, key: str, option: str, tasks: tuple, name) -> list[str]:
    """One option swept at each RTT (`key` of the results): median seconds per task and value,
    and the requests each value cost."""
    sweep = {rtt: r[key] for rtt, r in by_rtt.items() if r.get(key)}
    if not sweep:
        return []
    first = next(iter(sweep.values()))
    values = list(first)
    rows = []
    for task in tasks:
        for rtt, sw in sweep.items():
            rows.append([task, f"{rtt} ms"] + [f"{med(sw[v][task]['seconds']):.3f}" for v in values])
        rows.append([task, "requests"] + [str(first[v][task].get("requests", "—")) for v in values])
    return ([f"{chunks} chunks per column, `{option}` swept (other settings at their defaults), "
             "median seconds:", ""]
            + md_table(["task", "RTT"] + [name(v) for v in values], rows) + [""])


def render_remote(data: dict) -> list[str]:
    tuned = data.get("tuned", {})
    out = [f"{int(data.get('rows', 0)):,} rows over loopback HTTP ({data.get('server', '?')}) behind a "
           f"delay proxy; median seconds of {data.get('repeat', '?')} runs after a warm-up, each its "
           "own process" + (", the RTTs interleaved (each round runs every RTT once)"
                            if data.get("interleaved") else "") + ". *tuned*: `concurrency` "
           f"{tuned.get('concurrency', '?')}, `target_partitions` {tuned.get('target_partitions', '?')}; "
           "Parquet: DataFusion at its best `target_partitions`; requests from the server's log.", ""]
    for chunks, by_rtt in data["results"].items():
        rows = []
        for rtt, r in by_rtt.items():
            for task in ("q1", "q2", "label"):
                z, t = r["zarrow"][task], r["zarrow_tuned"][task]
                p = r["parquet"].get(task)
                zp = r.get("zarr_python", {}) if task == "label" else {}
                cells = [f"{rtt} ms", task, f"{med(z['seconds']):.3f}", f"{med(t['seconds']):.3f}",
                         f"{med(p['seconds']):.3f} (tp {p['target_partitions']})" if p else "—"]
                cells += [f"{med(zp[h]['seconds']):.3f}" if "seconds" in zp.get(h, {}) else "—"
                          for h in ("fsspec", "obstore")]
                cells.append(str(z.get("requests")) if z.get("requests") is not None else "—")
                rows.append(cells)
        out += render_sweep(chunks, by_rtt, "sweep", "concurrency", ("q1", "label"),
                            lambda c: f"concurrency {c}")
        out += render_sweep(chunks, by_rtt, "split_sweep", "range_split_bytes", ("q2", "label"),
                            lambda b: "split off" if int(b) == 0 else f"split {int(b) >> 20} MiB")
        out += render_sweep(chunks, by_rtt, "warm_sweep", "warm_connections", ("q1", "label"),
                            lambda n: f"warm {n}")
        out += [f"{chunks} chunks per column "
                f"({int(data['layouts'][chunks]['chunk']):,} rows each):", ""]
        out += md_table(["RTT", "task", "zarrow", "zarrow tuned", "Parquet", "zarr-python fsspec",
                         "zarr-python obstore", "requests (zarrow)"], rows) + [""]
        session = [[f"{rtt} ms", task, f"{med(s['first']):.3f}", f"{med(s['seconds']):.3f}"]
                   for rtt, r in by_rtt.items()
                   for task, s in r.get("zarrow_session", {}).items()]
        if session:
            out += [f"{chunks} chunks per column, in a session (the table registered once, the "
                    "query run three times in one process; each statement's own median seconds, "
                    "zarrow's defaults):", ""]
            out += md_table(["RTT", "task", "first run", "third run (pooled connections)"],
                            session) + [""]
    checks = [(c["target"], c["value"], c["ok"]) for c in data.get("checks", [])]
    return out + render_checks(checks)


def render_python_tools(data: dict) -> list[str]:
    rows = data.get("rows")
    out = [f"{f'{rows:,} rows' if rows else data.get('data', '?')} in chunks of "
           f"{int(data.get('chunk', 0)):,} rows; median seconds of {data.get('repeat', '?')} runs "
           "after a warm-up, each task of each tool in a Python process of its own, and that "
           "process's peak RSS.", ""]
    tools = []
    for by_tool in data["results"].values():
        tools += [t for t in by_tool if t not in tools]
    rows_out, skipped = [], {}
    for tool in tools:
        cells = [f"`{tool}`"]
        for task, by_tool in data["results"].items():
            r = by_tool.get(tool, {})
            if "seconds" in r:
                cells.append(f"{med(r['seconds']):.3f} s / {r.get('peak_rss_mib') or 0:.0f} MiB")
            else:
                cells.append("—")
                if "skip" in r:
                    skipped.setdefault(tool, r["skip"])
        rows_out.append(cells)
    out += md_table(["tool"] + [f"{t} (time / peak RSS)" for t in data["results"]], rows_out)
    out.append("")
    agree = [f"{task}: {'agree' if ok else 'DISAGREE'}"
             for task, ok in data.get("answers_agree", {}).items()]
    out += ["Answers: " + "; ".join(agree) + ".", ""]
    for task, tools in data.get("not_compared", {}).items():
        out += [f"Not compared on {task}: {', '.join(f'`{t}`' for t in tools)} (the Parquet twin "
                "holds the rows in another order, so its row-index range is other rows).", ""]
    if skipped:
        out += ["Not measured:", ""] + [f"- `{t}`: {why}" for t, why in skipped.items()] + [""]
    versions = data.get("versions", {})
    if versions:
        flat = {k: v for k, v in versions.items() if isinstance(v, str)}
        out += ["Versions: " + ", ".join(f"{k} {v}" for k, v in flat.items())]
        for name, v in versions.items():
            if isinstance(v, dict):
                out[-1] += f"; {name}: " + ", ".join(f"{k} {x}" for k, x in v.items())
        out += [""]
    checks = [(c["target"], c["value"], c["ok"]) for c in data.get("checks", [])]
    return out + render_checks(checks)


def render_write(data: dict) -> list[str]:
    out = [f"{int(data.get('rows', 0)):,} rows from the Parquet twin to zarr v3 (zstd 3, "
           f"vlen-utf8, chunks of {int(data.get('chunk', 0)):,} rows); median of "
           f"{data.get('repeat', '?')} runs after a warm-up, each writer in a process of its "
           f"own; the Python writers loaded {data.get('python_writers_source', '?')}.", ""]
    rows = [[name, f"{r['median_s']:.2f}", f"{r['peak_rss_mib']:.0f}"]
            for name, r in data["results"].items()]
    out += md_table(["writer", "seconds", "peak RSS MiB"], rows) + [""]
    checks = [(c["target"], c["value"], c["ok"]) for c in data.get("checks", [])]
    return out + render_checks(checks)


def render_sizes(data: dict) -> list[str]:
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    dfp = data["datafusion_python"]
    profile = ", ".join(f"`{k} = {json.dumps(v)}`" for k, v in data.get("release_profile", {}).items()
                        if not isinstance(v, dict)) or "cargo's defaults"
    out = [f"Release profile: {profile}. Sizes as installed, and stripped of symbols.", ""]
    rows = []
    if "before_zarrow" in data:
        b = data["before_zarrow"]
        rows.append(["`zarrow` binary, the build before", mb(b["bytes"]), mb(b["stripped"])])
    rows.append(["`zarrow` binary", mb(data["zarrow"]["bytes"]), mb(data["zarrow"]["stripped"])])
    rows.append(["Python extension `_zarrow`", mb(data["extension"]["bytes"]), mb(data["extension"]["stripped"])])
    if "wheel" in data:
        w = data["wheel"]
        rows.append(["the wheel (compressed)", mb(w["bytes"]), "—"])
    rows.append([f"datafusion-python {dfp.get('version', '')} extension", mb(dfp["bytes"]), mb(dfp["stripped"])])
    out += md_table(["artifact", "size", "stripped"], rows) + [""]
    checks = [
        ("`zarrow` binary ≤ datafusion-python's extension", mb(data["zarrow"]["bytes"]),
         data["zarrow"]["bytes"] <= dfp["bytes"]),
        ("Python extension ≤ datafusion-python's extension", mb(data["extension"]["bytes"]),
         data["extension"]["bytes"] <= dfp["bytes"]),
    ]
    return out + render_checks(checks)


def render_join(data: dict) -> list[str]:
    shape = data.get("shape", {})
    rtt = data.get("rtt_ms")
    out = [f"A synthetic AnnData written by anndata: {int(shape.get('cells', 0)):,} cells × "
           f"{int(shape.get('genes', 0)):,} genes; dense `X` in chunks of "
           f"{int(shape.get('chunk_cells', 0)):,} × {int(shape.get('chunk_genes', 0)):,}, and a CSR "
           f"`X` ({shape.get('density', '?')} of the cells × genes stored, `data` in as many chunks "
           f"as the dense `X` has along the cells). `{data.get('build', '?')}` build of the CLI; "
           "each query its own process, `SET zarrow.runtime_pruning` true and false; chunks of "
           "`X` read from `EXPLAIN ANALYZE`; median seconds of "
           f"{data.get('repeat', '?')} runs after a warm-up, on and off interleaved"
           + (f"; *http*: loopback HTTP ({data.get('server', '?')}) behind the delay proxy at "
              f"{rtt:g} ms RTT" if rtt is not None else "") + ". The answers with pruning on and "
           "off are equal (checked). Queries: *join*, the README's mean NKG7 expression per cell "
           "type (`X` joined to `obs` and `var`); *semi*, `WHERE dim_1 IN (SELECT dim_0 FROM var "
           "WHERE gene_symbol LIKE 'NKG%')`; *topk*, `ORDER BY dim_0 DESC, dim_1 DESC LIMIT 3`.", ""]
    rows = []
    for kind, by_where in data["results"].items():
        for where, by_query in by_where.items():
            for query, r in by_query.items():
                on, off = r["on"], r["off"]
                times = [f"{med(x['seconds']):.3f}" if x["seconds"] else "—" for x in (on, off)]
                rows.append([f"{kind} `X`", where, query,
                             f"{on['chunks_read']} of {on.get('chunks_total') or '?'}",
                             str(on["chunks_pruned_at_run_time"]), str(off["chunks_read"])] + times)
    out += md_table(["`X`", "store", "query", "chunks read, pruning on", "pruned at run time",
                     "chunks read, off", "seconds, on", "seconds, off"], rows) + [""]
    checks = [(c["target"], c["value"], c["ok"]) for c in data.get("checks", [])]
    return out + render_checks(checks)


def render_scaling(data: dict) -> list[str]:
    parts = list(data["results"])
    pinned = not data.get("no_taskset") and "1" in parts
    out = [f"{int(data.get('rows', 0)):,} rows made by SQL, {int(data.get('chunk_rows', 0)):,}-row "
           f"zarr chunks; median of {data.get('repeat', '?')} runs after a warm-up, each query its "
           "own `zarrow sql` process; `target_partitions` as in the column head"
           + (", 1 partition pinned to one core (`taskset -c 0`)" if pinned else "")
           + (f", zarr strings read as `string_type '{data['string_type']}'`"
              if data.get("string_type") else "")
           + ". zarr / Parquet seconds:", ""]
    rows, checks = [], []
    for qid, q in data["queries"].items():
        cells = [f"{qid} {q['description']}"]
        for p in parts:
            r = data["results"][p][qid]
            z, pq = med(r["zarr"]), med(r["parquet"])
            cells.append(f"{z:.2f} / {pq:.2f} = {z / pq:.2f}×")
            limit = SCALING_RATIO_MAX.get(qid, SCALING_RATIO_DEFAULT)
            checks.append((f"{qid} at {p} partition{'s' if p != '1' else ''}: zarr/Parquet ≤ {limit}",
                           f"{z / pq:.2f}", z / pq <= limit))
        rows.append(cells)
    out += md_table(["query"] + [f"{p} partition{'s' if p != '1' else ''}"
                                 + (" (1 core)" if p == "1" and pinned else "") for p in parts], rows)
    return out + [""] + render_checks(checks) + render_counters(data)


def render_counters(data: dict) -> list[str]:
    """`scan_scaling.py --counters`: per query and partitions, medians of the processes' CPU
    time, context switches, futex calls and page faults (`perf stat`), zarr / Parquet."""
    if not data.get("counters"):
        return []
    out = ["", "Counted by `perf stat` in the same runs (`--counters`; medians, zarr / Parquet): "
           "CPU time on all threads, the cores kept busy (CPU / wall), context switches, futex "
           "calls (a lock or condition variable that waited or woke a thread) and page faults "
           "(memory touched for the first time).", ""]
    rows = []
    for qid in data["queries"]:
        for p, results in data["results"].items():
            c = results[qid]["counters"]

            def both(key: str, unit: str = "") -> str:
                z, q = (med([run.get(key, 0) for run in c[f]]) for f in ("zarr", "parquet"))
                return f"{z:,.0f}{unit} / {q:,.0f}{unit}"

            busy = {f: med([run.get("cpu_ms", 0) / 1000 / t
                            for run, t in zip(c[f], results[qid][f])]) for f in ("zarr", "parquet")}
            rows.append([qid, p, both("cpu_ms", " ms"),
                         f"{busy['zarr']:.2f} / {busy['parquet']:.2f}",
                         both("switches"), both("futex"), both("faults")])
    return out + md_table(["query", "partitions", "CPU time", "cores busy", "context switches",
                           "futex calls", "page faults"], rows) + [""]


def render_ab(data: dict) -> list[str]:
    a, b = data["builds"]["a"], data["builds"]["b"]
    parts = data.get("partitions", 1)
    parts = "one partition" if parts == 1 else f"{parts} partitions (`target_partitions`)"
    parts += ", pinned to one core (`--one-core`)" if data.get("one_core") else ""
    out = [f"Build A: {a['label']} (`{a['version']}`); build B: {b['label']} (`{b['version']}`); "
           f"data `{Path(data['data']).name}`; {parts}; {ab_measured(data)}. The Parquet controls "
           "(`q1p`, …) run the same code in both builds: their change is the noise floor.",
           ""]
    results = data["results"]
    floor: dict[str, float] = {}  # per unit, the most a Parquet control (`q1p`, `cg-q2p`, …) moved
    for name, r in results.items():
        if name.endswith("p"):
            moved = abs(med(r["b"]) / med(r["a"]) - 1)
            floor[r["unit"]] = max(floor.get(r["unit"], 0.0), moved)
    rows, checks = [], []
    for name, r in results.items():
        ma, mb = med(r["a"]), med(r["b"])
        fmt = {"instructions": lambda v: f"{v / 1e6:,.0f} M", "s": lambda v: f"{v:.3f} s"}.get(
            r["unit"], lambda v: f"{v:,.0f}")
        rows.append([f"`{name}`", fmt(ma), fmt(mb), f"{mb / ma:.3f}"])
        if not name.endswith("p"):
            least = {"instructions": 0.01, "s": 0.03}.get(r["unit"], 0.10)
            slack = max(floor.get(r["unit"], 0.0), least)
            checks.append((f"`{name}`: B/A ≤ {1 + slack:.3f} (no regression beyond the noise floor)",
                           f"{mb / ma:.3f}", mb / ma <= 1 + slack))
    out += md_table(["measurement", "A median", "B median", "B / A"], rows)
    return out + [""] + render_checks(checks)


def ab_measured(data: dict) -> str:
    """How an `ab_builds.py` run measured, naming only the kinds of measurement it holds."""
    units = {r["unit"] for r in data["results"].values()}
    how = {"s": f"wall times alternate A and B ({data['runs']} runs of each query)",
           "instructions": "instruction counts are callgrind's, one run each",
           "page faults": "page faults (`pf-`) are `perf stat`'s"}
    return ", ".join(text for unit, text in how.items() if unit in units)


def render_checks(checks: list[tuple[str, str, bool]]) -> list[str]:
    if not checks:
        return []
    rows = [[what, got, verdict(ok)] for what, got, ok in checks]
    return ["Targets, checked on this run's figures:", ""] + md_table(["target", "this run", "verdict"], rows) + [""]


HARNESSES = [
    ("sql_compare", "SQL: zarr vs Parquet, and zarr-python (`sql_compare.py`)", render_sql),
    ("python_compare", "Python package (`python_compare.py`)", render_python),
    ("icechunk_compare", "Icechunk repository vs plain store (`icechunk_compare.py`)", render_icechunk),
    ("cluster_compare", "One process vs a Ballista cluster (`cluster_compare.py`)", render_cluster),
    ("sizes", "Artifact sizes (`sizes.py`)", render_sizes),
    ("remote_compare", "Remote store with latency: zarr vs Parquet and zarr-python (`remote_compare.py`)",
     render_remote),
    ("python_tools_compare", "Python tools: polars, DuckDB, datafusion-python, rainbear, xarray-sql, "
     "zarr-python (`python_tools_compare.py`)", render_python_tools),
    ("join_compare", "Joins, semi-joins and top-k: pruning at run time (`join_compare.py`)",
     render_join),
    ("scan_scaling", "One core and many partitions: zarr vs Parquet (`scan_scaling.py`)",
     render_scaling),
    ("write_compare", "Writing zarr: COPY vs Parquet, xarray and zarr-python (`write_compare.py`)",
     render_write),
    ("ab_builds", "Build against build (`ab_builds.py`)", render_ab),
]


AB = "ab_builds"

GENERATED = ("<!-- Generated by benches/report.py from the result files in benches/results/. "
             "Do not edit: change the script or add a result file, then run "
             "`python3 benches/report.py`. -->")

DIRTY_MEANS = ("A run marked **with uncommitted changes** was made from a working tree that `git "
               "describe --dirty` found modified: its commit does not name exactly the code that "
               "ran (the harness, and any build made from that tree); its note says which builds "
               "were measured where the run recorded it.")


def dirty_list(runs: list[tuple[Path, dict]]) -> list[str]:
    """The page's runs stamped with a dirty working tree, listed by file, or a line saying none."""
    dirty = [path for path, data in runs if is_dirty(data)]
    if not runs:
        return []
    if not dirty:
        return [f"Every run on this page ({len(runs)}) was made from a clean working tree.", ""]
    were = ("The one run on this page was" if len(runs) == 1
            else f"{len(dirty)} of the {len(runs)} runs on this page were")
    out = [f"{were} made from a working tree with uncommitted changes. {DIRTY_MEANS}", ""]
    out += [f"- `{path.name}` (stamped `{stamp_git(data)}`)" for path, data in runs if is_dirty(data)]
    return out + [""]


def sections(runs: list[tuple[Path, dict]], heading) -> list[str]:
    out: list[str] = []
    for path, data in runs:
        out += [f"## {heading(path, data)}", "", stamp_line(data, path), ""]
        note = (data.get("stamp") or {}).get("note")
        out += [f"Note: {note}.", ""] if note else []
        out += HARNESS_OF[path]["render"](data)
    return out


HARNESS_OF: dict[Path, dict] = {}


def load(results_dir: Path) -> dict[str, list[tuple[Path, dict]]]:
    """Each harness's runs, newest first."""
    files = sorted(results_dir.glob("*.json")) if results_dir.is_dir() else []
    unknown = [f.name for f in files if not any(f.name.startswith(p) for p, _, _ in HARNESSES)]
    if unknown:
        raise SystemExit(f"report.py: result files of no known harness: {', '.join(unknown)}")
    by_harness = {}
    for prefix, title, fn in HARNESSES:
        runs = [(f, json.loads(f.read_text())) for f in files if f.name.startswith(prefix)]
        runs.sort(key=lambda r: (run_date(r[1]), r[0].name), reverse=True)  # newest first
        for f, _ in runs:
            HARNESS_OF[f] = {"title": title, "render": fn}
        by_harness[prefix] = runs
    return by_harness


def ab_heading(path: Path, data: dict) -> str:
    """A build-against-build run's heading: its two builds (the first word of each label)."""
    a, b = ((str(data["builds"][k].get("label") or "?").split() or ["?"])[0] for k in ("a", "b"))
    return f"Build `{a}` against build `{b}` (`{path.name}`)"


def render_pages(results_dir: Path, main_name: str, ab_name: str) -> tuple[str, str]:
    """The headline page and the build-against-build page; `main_name` and `ab_name`: the
    pages' file names, as each links to the other."""
    by_harness = load(results_dir)
    headline = [r for prefix, _, _ in HARNESSES if prefix != AB for r in by_harness[prefix]]
    ab = by_harness[AB]

    out = ["# Benchmarks", "", GENERATED, "",
           "Every figure here comes from a result file a harness wrote; each table names the "
           "commit, machine and date of its run, and each target is checked against the figures "
           "of the same run. Runs of one harness are newest first.", "",
           f"Runs that time two builds of zarrow against each other (`ab_builds.py`, "
           f"{len(ab)} of them) are on a page of their own: [{ab_name}]({ab_name}).", ""]
    out += dirty_list(headline)
    out += sections(headline, lambda path, data: HARNESS_OF[path]["title"])
    if not headline:
        out += [f"No result files are checked in (`{rel(results_dir)}/` holds none), so this page "
                "has no figures yet. The next section says how to produce them.", ""]
    out.append(HOW)
    main_page = "\n".join(out).rstrip("\n") + "\n"

    out = ["# Benchmarks: build against build", "", GENERATED, "",
           "Each run times two builds of zarrow against each other on the same data "
           "(`benches/ab_builds.py`): wall time with A and B alternating, callgrind's instruction "
           "counts, or both, with Parquet controls that run the same code in both builds as the "
           f"noise floor. The headline figures are in [{main_name}]({main_name}), and how every "
           f"run is made in its section [How the figures are made]({main_name}"
           "#how-the-figures-are-made). Newest first.", ""]
    out += dirty_list(ab)
    out += sections(ab, ab_heading)
    if not ab:
        out += [f"No build-against-build result files are checked in (`{rel(results_dir)}/` "
                "holds none).", ""]
    ab_page = "\n".join(out).rstrip("\n") + "\n"
    return main_page, ab_page


def ab_out_default(out: Path) -> Path:
    return out.with_name(f"{out.stem}-ab{out.suffix}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=REPO / "benches/results",
                    help="the directory of result files (default benches/results)")
    ap.add_argument("--out", type=Path, default=REPO / "docs/benchmarks.md",
                    help="the page to write (default docs/benchmarks.md)")
    ap.add_argument("--ab-out", type=Path, default=None,
                    help="the build-against-build page (default: beside --out, its name with -ab: "
                         "docs/benchmarks-ab.md)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if either page differs from what it would be")
    args = ap.parse_args()
    ab_out = args.ab_out or ab_out_default(args.out)
    if ab_out.parent.resolve() != args.out.parent.resolve():
        ap.error("--ab-out must be in the directory of --out (the pages link to each other)")
    pages = dict(zip((args.out, ab_out), render_pages(args.results, args.out.name, ab_out.name)))
    if args.check:
        stale = [out for out, page in pages.items()
                 if (out.read_text() if out.is_file() else "") != page]
        if stale:
            sys.exit(f"{', '.join(rel(out) for out in stale)}: not what benches/report.py renders "
                     f"from {rel(args.results)}: run python3 benches/report.py")
        print(f"{', '.join(rel(out) for out in pages)}: up to date")
        return
    for out, page in pages.items():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page)
        print(f"wrote {rel(out)}")


if __name__ == "__main__":
    main()
