#!/usr/bin/env python3
"""zarrow from Python, in one process, on `sql_compare.py`'s data.

- `label` read whole: `zarrow.read_table` into pyarrow vs zarr-python's `open_array(...)[:]`
  into numpy (target: zarr-python ≥ 20× slower);
- the four queries of `sql_compare.py` through datafusion-python: on the zarr group (a
  `zarrow.ZarrTable` over the FFI) vs on the Parquet twin (`register_parquet`), their ratio next
  to the one the Rust CLI gets (`--cli-ratios`, from `sql_compare.py`'s results JSON; target:
  within 10 %: the FFI must cost nothing measurable).

    python benches/python_compare.py [--data DIR] [--repeat N] [--cli-ratios FILE] [--markdown]
        [--json FILE]

`--json FILE` writes every timing, the versions and the run's stamp (commit, machine, date) for
`benches/report.py`.

Run it in a venv with the release wheel (`maturin build --release`), datafusion 55, pyarrow
and zarr installed, after `sql_compare.py` made the data (default: the 10M-row set).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import datafusion
import pyarrow as pa
import zarr

import zarrow

REPO = Path(__file__).resolve().parent.parent
QUERIES = {
    "q1": "SELECT label, count(*) FROM t GROUP BY label",
    "q2": "SELECT count(*) FROM t WHERE id LIKE '%zz%'",
    "q3": "SELECT max(label), max(length(id)), sum(n), max(score) FROM t",
    "q4": "SELECT max(length(id)) FROM t",
}


def timed(f, repeat: int) -> list[float]:
    f()  # warm-up
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        f()
        out.append(time.perf_counter() - started)
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO / "target/bench-data/r10000000_c1000000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cli-ratios", type=Path, default=None,
                    help="sql_compare.py's results JSON, for the CLI's zarr/Parquet ratios")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", type=Path, default=None,
                    help="also write every timing and the run's stamp to this file")
    args = ap.parse_args()
    group, parquet = args.data / "bench.zarr", args.data / "bench.parquet"
    label = group / "label"

    rows = zarrow.read_table(str(label), ["label"]).num_rows
    zp = timed(lambda: zarr.open_array(store=str(label), mode="r")[:], args.repeat)
    zr = timed(lambda: zarrow.read_table(str(label), ["label"]), args.repeat)

    zctx = datafusion.SessionContext()
    zctx.register_table("t", zarrow.ZarrTable(str(group)))
    pctx = datafusion.SessionContext()
    pctx.register_parquet("t", str(parquet))
    results = {}
    timings = {}
    for name, sql in QUERIES.items():
        z = zctx.sql(sql).to_arrow_table()
        p = pctx.sql(sql).to_arrow_table()
        if sorted(map(str, z.to_pylist())) != sorted(map(str, p.to_pylist())):
            raise SystemExit(f"{name}: zarr and Parquet answers differ")
        zt = timed(lambda: zctx.sql(sql).to_arrow_table(), args.repeat)
        pt = timed(lambda: pctx.sql(sql).to_arrow_table(), args.repeat)
        results[name] = (med(zt), min(zt), med(pt), min(pt))
        timings[name] = {"zarr": zt, "parquet": pt}

    cli = {}
    if args.cli_ratios and args.cli_ratios.is_file():
        saved = json.loads(args.cli_ratios.read_text())
        for name, r in saved.get("results", {}).items():
            if name in QUERIES and r.get("zarr", {}).get("seconds"):
                cli[name] = med(r["zarr"]["seconds"]) / med(r["parquet"]["seconds"])

    sep = " | " if args.markdown else "  "
    print(f"data: {args.data} ({rows:,} rows); zarrow {zarrow.__version__}, "
          f"datafusion-python {datafusion.__version__}, pyarrow {pa.__version__}, "
          f"zarr-python {zarr.__version__}; median of {args.repeat} after a warm-up")
    print(f"label read whole: zarr-python {med(zp):.3f} s (min {min(zp):.3f}), "
          f"zarrow.read_table {med(zr):.3f} s (min {min(zr):.3f}): "
          f"zarr-python is {med(zp) / med(zr):.1f}x slower (target >= 20x)")
    head = ["query", "zarr via zarrow s", "Parquet s", "zarr/Parquet", "CLI zarr/Parquet", "vs CLI"]
    print(sep.join(head))
    if args.markdown:
        print(sep.join("---" for _ in head))
    for name, (zm, zmin, pm, pmin) in results.items():
        ratio = zm / pm
        c = cli.get(name)
        print(sep.join([
            name, f"{zm:.3f} (min {zmin:.3f})", f"{pm:.3f} (min {pmin:.3f})", f"{ratio:.2f}",
            f"{c:.2f}" if c else "-", f"{ratio / c:.2f}" if c else "-",
        ]))

    if args.json:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import sql_compare  # its run stamp (it needs numpy and zarr, as this script does)

        args.json.write_text(json.dumps({
            "stamp": {**sql_compare.run_stamp(), "zarrow": zarrow.__version__,
                      "datafusion_python": datafusion.__version__, "pyarrow": pa.__version__,
                      "zarr_python": zarr.__version__},
            "data": str(args.data), "rows": rows, "repeat": args.repeat,
            "queries": QUERIES,
            "label_read": {"zarr_python": zp, "zarrow": zr},
            "results": timings,
            "cli_ratios": cli,
        }, indent=2) + "\n")
        print(f"results: {args.json}")


if __name__ == "__main__":
    main()
