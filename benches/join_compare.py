#!/usr/bin/env python3
"""Joins, semi-joins and top-k over an AnnData-shaped store, with pruning at run time on and off.

A synthetic AnnData (`--cells` × `--genes`, written by anndata 0.12 / zarr-python 3 as zarr v3)
in two variants: a dense `X` chunked along both axes (`--chunk-cells` × `--chunk-genes`) and a
CSR `X` (`--density` of the cells × genes stored). `var.gene_symbol` names one gene `NKG7`;
`obs.cell_type` is one of 12 types. Run from the repository root with the zarr-python 3 venv:

    cargo build --release -p zarrow-cli -p zarrow-benches --bin zarrow --bin delay_proxy
    .venv-zarr3/bin/python benches/join_compare.py                  # release build if present
    .venv-zarr3/bin/python benches/join_compare.py --smoke          # tiny, seconds (CI)

Queries (`X`, `obs`, `var` are the store's tables):
- `join`: the README's mean NKG7 expression per cell type (X joined to obs and to var);
- `semi`: `WHERE dim_1 IN (SELECT dim_0 FROM var WHERE gene_symbol LIKE 'NKG%')`;
- `topk`: `ORDER BY dim_0 DESC LIMIT 3`.

Each runs with `SET zarrow.runtime_pruning` true and false, on the local store and over
loopback HTTP behind the delay proxy of `remote_compare.py` (`--rtt` ms), each as its own
`zarrow sql` process: the chunks of `X` it read and skipped (from `EXPLAIN ANALYZE`), and the
median wall time of `--repeat` runs after a warm-up, on and off interleaved. Answers with
pruning on and off must be equal. Writes `<data-dir>/join_compare_results.json` (copy it into
benches/results/ to publish; benches/report.py renders it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import remote_compare as rc  # noqa: E402  (the HTTP server and the delay proxy)
import sql_compare as sc  # noqa: E402  (the process timer, the stamp)

REPO = sc.REPO
SEED = 20261127
GENERATOR_VERSION = 2
CELL_TYPES = 12
NKG7 = "NKG7"

QUERIES = {
    "join": "SELECT o.cell_type, avg(x.\"X\") AS mean_nkg7 FROM {X} x "
            "JOIN {obs} o ON x.dim_0 = o.dim_0 JOIN {var} v ON x.dim_1 = v.dim_0 "
            f"WHERE v.gene_symbol = '{NKG7}' GROUP BY o.cell_type ORDER BY mean_nkg7 DESC",
    "semi": "SELECT count(*), sum(\"X\") FROM {X} "
            "WHERE dim_1 IN (SELECT dim_0 FROM {var} WHERE gene_symbol LIKE 'NKG%')",
    "topk": "SELECT dim_0, dim_1, \"X\" FROM {X} ORDER BY dim_0 DESC, dim_1 DESC LIMIT 3",
}


def nkg7_index(genes: int) -> int:
    return genes // 2 + 7


def write_store(path: Path, args, sparse: bool) -> None:
    """The AnnData: X (dense, or CSR at `--density`), obs.cell_type, var.gene_symbol."""
    import anndata as ad
    import pandas as pd
    import scipy.sparse as sp

    rng = np.random.default_rng(SEED)
    cells, genes = args.cells, args.genes
    symbols = np.array([f"G{i:05d}" for i in range(genes)], dtype=object)
    symbols[nkg7_index(genes)] = NKG7
    types = pd.Categorical([f"type_{i % CELL_TYPES:02d}" for i in rng.permutation(cells)])
    obs = pd.DataFrame({"cell_type": types}, index=[f"cell_{i}" for i in range(cells)])
    var = pd.DataFrame({"gene_symbol": symbols}, index=[f"gene_{i}" for i in range(genes)])
    if sparse:
        x = sp.random(cells, genes, density=args.density, format="csr", dtype=np.float32,
                      random_state=rng, data_rvs=lambda n: rng.poisson(3, n).astype(np.float32) + 1)
    else:
        x = np.zeros((cells, genes), dtype=np.float32)
        for start in range(0, cells, args.chunk_cells):  # row blocks: bounded memory
            block = rng.poisson(0.3, (min(args.chunk_cells, cells - start), genes))
            x[start:start + block.shape[0]] = block
    ad.settings.zarr_write_format = 3
    adata = ad.AnnData(X=x, obs=obs, var=var)
    adata.write_zarr(path, chunks=None if sparse else (args.chunk_cells, args.chunk_genes))
    if sparse:
        # CSR's data and indices in as many chunks as the dense X has along the cells (anndata
        # writes a sparse matrix's arrays in one chunk by default).
        import zarr
        parts = -(-cells // args.chunk_cells)
        chunk = max(1, -(-x.nnz // parts))
        group = zarr.open_group(path, mode="r+", use_consolidated=False)
        ad.io.write_elem(group, "X", x, dataset_kwargs={"chunks": (chunk,)})
        zarr.consolidate_metadata(path)


def ensure_data(args) -> dict[str, Path]:
    """The dense and sparse stores under `--data-dir`, rewritten when their stamp differs."""
    want = {"generator": GENERATOR_VERSION, "cells": args.cells, "genes": args.genes,
            "chunk_cells": args.chunk_cells, "chunk_genes": args.chunk_genes,
            "density": args.density}
    root = args.data_dir / (f"adata_{args.cells}x{args.genes}_c{args.chunk_cells}x{args.chunk_genes}"
                            f"_d{args.density:g}")
    stores = {"dense": root / "dense.zarr", "sparse": root / "sparse.zarr"}
    stamp = root / "stamp.json"
    if not (stamp.is_file() and json.loads(stamp.read_text()) == want):
        sc.log(f"writing {root}")
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for kind, path in stores.items():
            write_store(path, args, sparse=kind == "sparse")
        stamp.write_text(json.dumps(want))
    return stores


def sql(args, query: str, base: str, pruning: bool, explain: bool = False) -> list[str]:
    text = QUERIES[query].format(**{t: f"'{base}/{t}'" for t in ("X", "obs", "var")})
    text = f"SET zarrow.runtime_pruning = {str(pruning).lower()}; " + \
        ("EXPLAIN ANALYZE " if explain else "") + text
    return [str(args.zarrow), "sql", "--format", "csv", text]


def x_scan_metrics(plan: str) -> dict[str, int]:
    """The chunk metrics of the scan of X in an `EXPLAIN ANALYZE` (its line names `…/X`)."""
    for line in plan.splitlines():
        if "DataSourceExec" in line and re.search(r"location=\S*/X[,\s]", line):
            names = ("chunks_read", "chunks_pruned", "chunks_pruned_at_run_time")
            found = {n: re.search(rf"\b{n}=(\d+)", line) for n in names}
            if all(found.values()):
                total = re.search(r"chunks=\d+/(\d+)", line)
                return {**{n: int(m.group(1)) for n, m in found.items()},
                        "chunks_total": int(total.group(1)) if total else None}
    sys.exit(f"no scan of X with chunk metrics in the plan:\n{plan[-3000:]}")


def bench_query(args, query: str, base: str) -> dict:
    """One query on one location, pruning on and off: chunks, times, and equal answers."""
    out = {}
    for pruning in (True, False):
        _, _, plan = sc.timed(sql(args, query, base, pruning, explain=True))
        out["on" if pruning else "off"] = {**x_scan_metrics(plan), "seconds": []}
    answers = {}
    cmds = {key: sql(args, query, base, key == "on") for key in ("on", "off")}
    for key, cmd in cmds.items():  # warm-up
        answers[key] = sc.canonical(sc.timed(cmd)[2])
    for _ in range(args.repeat):
        for key, cmd in cmds.items():
            seconds, _, got = sc.timed(cmd)
            if sc.canonical(got) != answers[key]:
                sys.exit(f"{cmd}: the runs disagree")
            out[key]["seconds"].append(seconds)
    if answers["on"] != answers["off"]:
        sys.exit(f"{query} over {base}: pruning at run time changed the answer:\n"
                 f"{answers['on'][:5]}\n{answers['off'][:5]}")
    return out


def checks(args, results: dict, partitions: int) -> list[dict]:
    """The targets, on chunk counts (not times): on the dense X, the join and the semi-join read
    only the chunks that hold the gene (one column of the chunk grid), the top-k at most one
    chunk per partition; with pruning off, every chunk."""
    holding = -(-args.cells // args.chunk_cells)
    out = []
    for where, by_query in results.get("dense", {}).items():
        for query, r in by_query.items():
            limit = partitions if query == "topk" else holding
            what = "one chunk per partition" if query == "topk" else "the chunks that hold the gene"
            got = r["on"]["chunks_read"]
            out.append({"target": f"dense X, {query}, {where}: reads at most {what} ({limit})",
                        "value": f"{got} of {r['off']['chunks_read']}", "ok": got <= limit})
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    release = REPO / "target/release/zarrow"
    ap.add_argument("--cells", type=int, default=20_000)
    ap.add_argument("--genes", type=int, default=2_000)
    ap.add_argument("--chunk-cells", type=int, default=2_000)
    ap.add_argument("--chunk-genes", type=int, default=100)
    ap.add_argument("--density", type=float, default=0.05, help="of the sparse variant")
    ap.add_argument("--rtt", type=float, default=20, help="round trip of the HTTP runs, ms")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--zarrow", type=Path,
                    default=release if release.is_file() else REPO / "target/debug/zarrow")
    ap.add_argument("--proxy", type=Path, default=None,
                    help="delay_proxy (default: next to --zarrow)")
    ap.add_argument("--data-dir", type=Path, default=REPO / "target/bench-data")
    ap.add_argument("--json", type=Path, default=None, help="results file (default in --data-dir)")
    ap.add_argument("--no-http", action="store_true", help="the local store only")
    ap.add_argument("--note", default=None, help="a remark on the run, printed with its stamp")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, local only, nothing timed: the harness runs and the answers "
                         "with pruning on and off agree")
    args = ap.parse_args()
    if args.smoke:  # answers compared (the warm-up runs), nothing timed
        args.cells, args.genes, args.chunk_cells, args.chunk_genes = 600, 60, 100, 10
        args.repeat, args.no_http = 0, True
    args.proxy = args.proxy or args.zarrow.parent / "delay_proxy"
    for binary in (args.zarrow,) + (() if args.no_http else (args.proxy,)):
        if not binary.is_file():
            sys.exit(f"{binary} not found: cargo build [--release] -p zarrow-cli -p zarrow-benches "
                     "--bin zarrow --bin delay_proxy")
    sc.warn_if_stale(args.zarrow)
    stores = ensure_data(args)
    state = Path(tempfile.mkdtemp(prefix="join_compare-"))
    server = None if args.no_http else rc.Server(args.data_dir.resolve(), state, force_python=False)
    proxy = server and rc.Proxy(args.proxy, server.port, args.rtt, state)
    results: dict = {}
    try:
        for kind, path in stores.items():
            rel = path.resolve().relative_to(args.data_dir.resolve())
            bases = {"local": str(path.resolve())}
            if proxy:
                bases[f"http {args.rtt:g} ms"] = f"http://127.0.0.1:{proxy.port}/{rel}"
            for where, base in bases.items():
                for query in QUERIES:
                    sc.log(f"{kind} X, {query}, {where}")
                    results.setdefault(kind, {}).setdefault(where, {})[query] = \
                        bench_query(args, query, base)
    finally:
        for running in (proxy, server):
            if running:
                running.stop()
        shutil.rmtree(state, ignore_errors=True)
    partitions = sc.run_stamp()["nproc"]  # DataFusion's default target_partitions: the cores
    found = checks(args, results, partitions)
    data = {
        "stamp": {**sc.run_stamp(), "zarrow": sc.run_checked([str(args.zarrow), "--version"]).strip(),
                  **({"note": args.note} if args.note else {})},
        "build": "release" if "release" in args.zarrow.parts else "debug",
        "shape": {"cells": args.cells, "genes": args.genes, "chunk_cells": args.chunk_cells,
                  "chunk_genes": args.chunk_genes, "density": args.density},
        "server": server.kind if server else None, "rtt_ms": None if args.no_http else args.rtt, "repeat": args.repeat,
        "target_partitions": partitions, "queries": QUERIES, "results": results,
        "checks": found,
    }
    path = args.json or args.data_dir / "join_compare_results.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    for kind, by_where in results.items():
        for where, by_query in by_where.items():
            for query, r in by_query.items():
                on, off = r["on"], r["off"]
                print(f"{kind:6} {where:12} {query:5} chunks {on['chunks_read']:>5}/{off['chunks_read']:<5}"
                      f" time {med(on['seconds']):7.3f}/{med(off['seconds']):7.3f} s"
                      " (pruning on/off)")
    for c in found:
        print(f"{'met   ' if c['ok'] else 'MISSED'} {c['target']}: {c['value']}")
    print(f"\nresults: {path}")
    if args.smoke and not all(c["ok"] for c in found):
        sys.exit("join_compare.py --smoke: a target on chunk counts is missed")


if __name__ == "__main__":
    main()
