"""Chunk pruning through datafusion-python: a `ZarrTable` registered in a datafusion-python
session reads only the chunks a query's filters can match, as in Rust (the scan's metrics in
`EXPLAIN ANALYZE` cross the FFI and show it)."""

from __future__ import annotations

import re

import pytest

import zarrow
from conftest import DATA

datafusion = pytest.importorskip("datafusion")

XARRAY = str(DATA / "xarray_v3.zarr")  # time: 10 (chunks of 4), station: 5 (chunks of 3): 6 chunks
STRINGS_2D = str(DATA / "v3_strings.zarr" / "string_2d")  # dim_0 and dim_1 indexes: 9 chunks


def session(**tables: str):
    ctx = datafusion.SessionContext()
    for name, location in tables.items():
        ctx.register_table(name, zarrow.ZarrTable(location))
    return ctx


def scan_metrics(ctx, sql: str) -> list[dict[str, int]]:
    """The chunk metrics of every zarrow scan in `EXPLAIN ANALYZE sql`, in plan order."""
    plan = "\n".join(ctx.sql(f"EXPLAIN ANALYZE {sql}").to_arrow_table().column("plan").to_pylist())
    scans = [line for line in plan.splitlines() if "FFI_ExecutionPlan: DataSourceExec" in line]
    assert scans, plan
    names = ("chunks_pruned", "chunks_pruned_at_run_time", "chunks_read")
    return [{n: int(re.search(rf"\b{n}=(\d+)", line).group(1)) for n in names} for line in scans]


def count(ctx, sql: str) -> int:
    return ctx.sql(sql).to_arrow_table().column(0)[0].as_py()


def test_a_filter_on_a_coordinate_prunes_chunks_through_the_ffi():
    ctx = session(t=XARRAY)
    # time is 0, 6, 12, …: time < 12 lies in the first time chunk (2 of 6 chunks).
    [m] = scan_metrics(ctx, "SELECT count(*) FROM t WHERE time < 12")
    assert (m["chunks_read"], m["chunks_pruned"]) == (2, 4)
    assert count(ctx, "SELECT count(*) FROM t WHERE time < 12") == 10
    [m] = scan_metrics(ctx, "SELECT count(*) FROM t WHERE time IN (0, 54)")
    assert (m["chunks_read"], m["chunks_pruned"]) == (4, 2)


def test_a_filter_on_an_index_column_prunes_chunks_through_the_ffi():
    ctx = session(t=STRINGS_2D)
    [m] = scan_metrics(ctx, "SELECT count(string_2d) FROM t WHERE dim_0 >= 6")
    assert (m["chunks_read"], m["chunks_pruned"]) == (3, 6)
    assert count(ctx, "SELECT count(*) FROM t WHERE dim_0 >= 6") == 5


def test_a_filter_on_a_data_column_prunes_nothing_through_the_ffi():
    ctx = session(t=XARRAY)
    [m] = scan_metrics(ctx, "SELECT count(*) FROM t WHERE station_name = 'Alpha Hill'")
    assert (m["chunks_read"], m["chunks_pruned"]) == (6, 0)
    assert count(ctx, "SELECT count(*) FROM t WHERE station_name = 'Alpha Hill'") == 10


def test_dynamic_filters_do_not_cross_the_ffi():
    # datafusion-ffi 55's execution plan takes no filters: a join's build side and a TopK's
    # threshold stay above the scan, which reads every chunk (the answers are right). When this
    # fails, the FFI carries dynamic filters: say so in docs/python.md.
    ctx = session(t=XARRAY, u=XARRAY)
    semi = "SELECT count(*) FROM t WHERE time IN (SELECT time FROM u WHERE time < 6)"
    build, probe = scan_metrics(ctx, semi)
    assert (build["chunks_read"], build["chunks_pruned"]) == (2, 4)
    assert (probe["chunks_read"], probe["chunks_pruned_at_run_time"]) == (6, 0)
    assert count(ctx, semi) == 5
    [m] = scan_metrics(ctx, "SELECT time FROM t ORDER BY time DESC LIMIT 1")
    assert (m["chunks_read"], m["chunks_pruned_at_run_time"]) == (6, 0)
