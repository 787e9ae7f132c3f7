"""DuckDB and pyarrow over zarrow: `scan()` through the Arrow C stream, and `zarrow.dataset()`
(a `pyarrow.dataset.Dataset`) with DuckDB's projection and filter pushdown reaching the zarr
scan; answers equal to the SQL path's."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import zarrow
from conftest import DATA, SAMPLE, first_column_predicate, fixture_tables, ipc_bytes, sorted_by_all, sql_answer

duckdb = pytest.importorskip("duckdb")

XARRAY = str(DATA / "xarray_v3.zarr")  # time: 10 (chunks of 4), station: 5 (chunks of 3)
OBS = str(SAMPLE / "obs")


def rows(result) -> list[tuple]:
    return sorted(result, key=repr)


def test_duckdb_queries_a_scan_stream():
    stream = zarrow.scan(OBS, ["cell_type", "n_genes"], filter="dim_0 < 500")
    got = duckdb.sql("SELECT cell_type::VARCHAR, count(*), sum(n_genes) FROM stream "
                     "GROUP BY ALL").fetchall()
    datafusion = pytest.importorskip("datafusion")
    ctx = datafusion.SessionContext()
    ctx.register_table("obs", zarrow.ZarrTable(OBS))
    expected = ctx.sql("SELECT arrow_cast(cell_type, 'Utf8'), count(*), sum(n_genes) FROM obs "
                       "WHERE dim_0 < 500 GROUP BY 1").to_arrow_table().to_pylist()
    assert rows(got) == rows([tuple(r.values()) for r in expected])
    # One chunk of 2000 rows: nothing to prune, the filter keeps 500 of them.
    assert (stream.metrics["rows_read"], stream.metrics["rows_out"]) == (2000, 500)


def test_duckdb_pushes_projection_and_filters_into_a_dataset():
    seen: list[dict] = []
    d = zarrow.dataset(XARRAY, on_scan=seen.append)
    got = duckdb.sql("SELECT station, count(*) FROM d WHERE time BETWEEN 20 AND 30 "
                     "AND temperature > 5 GROUP BY ALL").fetchall()
    expected = sql_answer(XARRAY, "time BETWEEN 20 AND 30 AND temperature > 5",
                          columns=["station"]).column("station").value_counts().to_pylist()
    assert rows(got) == rows([(e["values"], e["counts"]) for e in expected])
    scan = seen[-1]
    assert "flag" not in scan["columns"] and "station_name" not in scan["columns"]
    assert '"time" >= 20' in scan["prune"] and '"time" <= 30' in scan["prune"]
    assert (scan["chunks_read"], scan["chunks_pruned"]) == (2, 4)


def test_a_dataset_prunes_a_string_equality_and_keeps_what_it_cannot_translate():
    seen: list[dict] = []
    d = zarrow.dataset(XARRAY, on_scan=seen.append)
    got = duckdb.sql("SELECT time FROM d WHERE station = 'ALPHA' AND (time < 12 OR time > 48)"
                     ).fetchall()
    assert sorted(t for (t,) in got) == [0, 6, 54]
    assert any(s["chunks_pruned"] > 0 for s in seen), seen  # station = 'ALPHA' lies in the first station chunk


@pytest.mark.parametrize("location", fixture_tables(), ids=lambda p: os.path.relpath(p, DATA))
def test_dataset_answers_equal_the_sql_path(location):
    try:
        d = zarrow.dataset(location)
    except zarrow.ZarrowError as e:
        pytest.skip(f"not a table: {e}")
    whole = d.to_table()
    assert ipc_bytes(sorted_by_all(whole)) == ipc_bytes(sorted_by_all(sql_answer(location)))
    where = first_column_predicate(whole)
    if where is None or not pa.types.is_integer(whole.schema.field(0).type):
        return
    pivot = int(where.rsplit(" ", 1)[1])
    name = whole.column_names[0]
    got = d.to_table(filter=pc.field(name) >= pivot)
    assert ipc_bytes(sorted_by_all(got)) == ipc_bytes(sorted_by_all(sql_answer(location, where)))


def test_dataset_methods_that_need_a_cpp_dataset_raise():
    d = zarrow.dataset(XARRAY)
    assert isinstance(d, pa.dataset.Dataset)
    assert d.count_rows() == 50 and d.head(3).num_rows == 3
    assert d.schema == zarrow.schema(XARRAY)
    for call in (lambda: d.get_fragments(), lambda: d.filter(pc.field("time") > 0),
                 lambda: d.replace_schema(d.schema)):
        with pytest.raises(zarrow.ZarrowError, match="read it with to_table"):
            call()


@pytest.mark.parametrize("printed, sql", [
    ("(time < 12)", '"time" < 12'),
    ("((time >= 20) and (time <= 30))", '"time" >= 20 AND "time" <= 30'),
    ('((time < 12) and (station == "A\'B"))', '"time" < 12 AND "station" = \'A\'\'B\''),
    ('((station == "x and y") and (flag > 1))', '"station" = \'x and y\' AND "flag" > 1'),
    ("((time < 12) or (flag > 3))", None),
    ("((time < 12) or (flag > 3)) and (flag == 3)", '"flag" = 3'),
    ("is_in(time, {value_set=int64:[0, 54]})", None),
    ("(nosuch > 1)", None),
])
def test_pyarrow_filters_become_pruning_sql_only_where_exact(printed, sql):
    from zarrow import _dataset

    assert _dataset._prune_sql(printed, ["time", "station", "flag"]) == sql
