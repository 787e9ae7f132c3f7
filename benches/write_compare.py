#!/usr/bin/env python3
"""Writing zarr: the benchmark table from its Parquet twin to a zarr v3 store (zstd level 3,
vlen-utf8 strings), each writer in a process of its own, wall time and peak RSS:

- zarrow: `zarrow sql "COPY (SELECT * FROM 'bench.parquet') TO 'out.zarr' STORED AS ZARR …"`
- DataFusion's `COPY … STORED AS PARQUET` of the same query (zstd(3)): the 1.5× target
- pandas + xarray: `pd.read_parquet` → `xr.Dataset.from_dataframe` → `to_zarr` (zarr v3, zstd 3):
  the 5× target
- zarr-python: `pq.read_table` → one `zarr.create_array` per column, written whole

Run from the repository root with the zarr-python 3 venv (xarray, pandas, pyarrow) and a
release build (`cargo build --release -p zarrow-cli`):

    .venv-zarr3/bin/python benches/write_compare.py                  # 10M rows
    .venv-zarr3/bin/python benches/write_compare.py --rows 300000 --chunk 100000 --repeat 1 \
        --zarrow target/debug/zarrow --data-dir target/bench-data-smoke   # smoke (run-all.sh)

The data is `sql_compare.py`'s (same generator, seed and Parquet twin, reused from
`--data-dir`). zarrow's output must read back with the Parquet file's row count and
per-column checksums (through `zarrow sql`), else the script stops. Results go to
`<data-dir>/write_compare_results.json` with a stamp; `--strict` exits 2 on a missed target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sql_compare as sc  # noqa: E402  (the data generator, process timing and stamps)

REPO = sc.REPO

# Both Python writers load the Parquet twin with pyarrow when the interpreter has it, else the
# zarr twin with zarr-python (the same rows; the result file records which).
LOAD = """
import sys, zarr
src, out, chunk, zsrc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
try:
    import pyarrow.parquet as pq
    columns = {n: c.to_numpy(zero_copy_only=False) for n, c in zip(pq.read_table(src).column_names, pq.read_table(src).columns)}
except ImportError:
    g = zarr.open_group(zsrc, mode="r")
    columns = {n: a[:] for n, a in g.arrays()}
"""

PANDAS_XARRAY = LOAD + """
import pandas as pd, xarray as xr
from zarr.codecs import ZstdCodec
ds = xr.Dataset.from_dataframe(pd.DataFrame(columns))
enc = {v: {"compressors": [ZstdCodec(level=3)], "chunks": (chunk,)} for v in ds.data_vars}
ds.to_zarr(out, mode="w", zarr_format=3, encoding=enc, consolidated=True)
"""

ZARR_PYTHON = LOAD + """
from zarr.codecs import ZstdCodec
group = zarr.open_group(out, mode="w", zarr_format=3)
for name, values in columns.items():
    is_str = values.dtype == object or values.dtype.kind == "T"
    if is_str:
        values = values.astype(object)
    arr = group.create_array(name, shape=values.shape, dtype=str if is_str else values.dtype,
                             chunks=(chunk,), compressors=[ZstdCodec(level=3)], dimension_names=["dim_0"])
    arr[:] = values
zarr.consolidate_metadata(out)
"""

CHECK = ("SELECT count(*) AS n, count(DISTINCT label) AS labels, sum(n) AS sn, "
         "sum(length(id)) AS ids, round(sum(score), 3) AS score FROM {src}")


def commands(args, parquet: Path, out: Path) -> dict[str, list[str]]:
    z = str(args.zarrow)
    zarr_twin = parquet.with_name("bench.zarr")
    src = sc.lit(parquet)
    return {
        "zarrow COPY → zarr": [z, "sql", f"COPY (SELECT * FROM {src}) TO {sc.lit(out / 'copy.zarr')} "
                               f"STORED AS ZARR OPTIONS (chunk_rows {args.chunk}, "
                               f"compression 'zstd(3)', overwrite true)"],
        "DataFusion COPY → Parquet": [z, "sql", f"COPY (SELECT * FROM {src}) TO "
                                      f"{sc.lit(out / 'copy.parquet')} STORED AS PARQUET "
                                      f"OPTIONS (compression 'zstd(3)')"],
        "pandas + xarray to_zarr": [sys.executable, "-c", PANDAS_XARRAY, str(parquet),
                                    str(out / "xarray.zarr"), str(args.chunk), str(zarr_twin)],
        "zarr-python": [sys.executable, "-c", ZARR_PYTHON, str(parquet),
                        str(out / "zarr_python.zarr"), str(args.chunk), str(zarr_twin)],
    }


def checks(table: dict) -> list[dict]:
    """The write targets on a run's medians, as the result file keeps them (and report.py
    shows them): each with the figure it was judged on."""
    zarr_s = table["zarrow COPY → zarr"]["median_s"]
    parquet_s = table["DataFusion COPY → Parquet"]["median_s"]
    xarray_s = table["pandas + xarray to_zarr"]["median_s"]
    return [
        {"target": "within 1.5x of DataFusion's Parquet COPY", "value": f"{zarr_s / parquet_s:.2f}×",
         "ok": zarr_s <= 1.5 * parquet_s},
        {"target": "5x faster than pandas + xarray to_zarr", "value": f"{xarray_s / zarr_s:.1f}× faster",
         "ok": 5 * zarr_s <= xarray_s},
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--chunk", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--zarrow", type=Path, default=REPO / "target/release/zarrow")
    ap.add_argument("--data-dir", type=Path, default=REPO / "target/bench-data")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--note", default=None,
                    help="a remark for the result file's stamp (which build, what else ran)")
    args = ap.parse_args()
    args.control = False
    stamp = sc.ensure_data(args, args.rows, parquet=True)
    root = Path(stamp["root"])
    parquet = root / "bench.parquet"
    out = root / "write_out"
    out.mkdir(exist_ok=True)
    cmds = commands(args, parquet, out)
    runs: dict[str, list[tuple[float, int]]] = {k: [] for k in cmds}
    for round_ in range(args.repeat + 1):  # round 0 warms the page cache
        for name, cmd in cmds.items():
            if name == "DataFusion COPY → Parquet":
                sc.remove(out / "copy.parquet")
            seconds, rss, _ = sc.timed(cmd)
            if round_ > 0:
                runs[name].append((seconds, rss))
    want = sc.run_checked([str(args.zarrow), "sql", "--format", "csv", CHECK.format(src=sc.lit(parquet))])
    got = sc.run_checked([str(args.zarrow), "sql", "--format", "csv",
                          CHECK.format(src=sc.lit(out / "copy.zarr"))])
    if want != got:
        sys.exit(f"zarrow's zarr output differs from the Parquet source:\n{want}\n{got}")
    table = {name: {"median_s": statistics.median(s for s, _ in r),
                    "peak_rss_mib": max(m for _, m in r) / 2**20} for name, r in runs.items()}
    targets = checks(table)
    for name, row in table.items():
        print(f"{name:28} {row['median_s']:8.2f} s  {row['peak_rss_mib']:8.0f} MiB peak RSS")
    for c in targets:
        print(f"target {c['target']}: {c['value']} {'met' if c['ok'] else 'MISSED'}")
    try:
        import pyarrow  # noqa: F401
        python_source = "parquet (pyarrow)"
    except ImportError:
        python_source = "the zarr twin (zarr-python; no pyarrow in this interpreter)"
    print(f"the Python writers loaded {python_source}")
    stamp = {**sc.machine_facts(args), **({"note": args.note} if args.note else {})}
    result = {"stamp": stamp, "rows": args.rows, "chunk": args.chunk,
              "python_writers_source": python_source,
              "repeat": args.repeat, "results": table, "checks": targets}
    (args.data_dir / "write_compare_results.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.strict and not all(c["ok"] for c in targets):
        sys.exit(2)


if __name__ == "__main__":
    main()
