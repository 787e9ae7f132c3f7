"""`scan(filter=...)` / `read_table(filter=...)`: a SQL predicate prunes chunks as the SQL
path does (visible in `ZarrStream.metrics`) and the rows handed out are the SQL path's."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import zarrow
from conftest import DATA, first_column_predicate, fixture_tables, ipc_bytes, sorted_by_all, sql_answer

XARRAY = str(DATA / "xarray_v3.zarr")  # time: 10 (chunks of 4), station: 5 (chunks of 3)


def streamed(stream: zarrow.ZarrStream) -> pa.Table:
    return pa.Table.from_batches([pa.record_batch(b) for b in stream], schema=pa.schema(stream))


def equal_rows(a: pa.Table, b: pa.Table) -> bool:
    """The same rows (SQL promises no order: sorted by the integer columns; NaN equal)."""
    return a.schema == b.schema and ipc_bytes(sorted_by_all(a)) == ipc_bytes(sorted_by_all(b))


@pytest.mark.parametrize("location", fixture_tables(), ids=lambda p: os.path.relpath(p, DATA))
def test_filter_answers_equal_the_sql_path(location):
    try:
        whole = zarrow.read_table(location)
    except zarrow.ZarrowError as e:
        pytest.skip(f"not a table: {e}")
    where = first_column_predicate(whole)
    if where is None:
        pytest.skip(f"no ordered first column in {whole.schema}")
    expected = sql_answer(location, where)
    assert 0 < expected.num_rows <= whole.num_rows
    assert equal_rows(zarrow.read_table(location, filter=where), expected)
    stream = zarrow.scan(location, filter=where, batch_size=7)
    assert equal_rows(streamed(stream), expected)
    assert stream.metrics["rows_out"] == expected.num_rows


def test_a_filter_on_a_coordinate_prunes_chunks():
    # time is 0, 6, 12, …: time < 12 lies in the first time chunk (2 of 6 chunks of rows).
    stream = zarrow.scan(XARRAY, filter="time < 12")
    got = streamed(stream)
    assert equal_rows(got, sql_answer(XARRAY, "time < 12"))
    assert sorted(got.column("time").to_pylist()) == [0] * 5 + [6] * 5
    m = stream.metrics
    assert (m["chunks_total"], m["chunks_kept"], m["chunks_pruned"]) == (6, 2, 4)
    assert m["chunks_read"] == 2
    assert (m["rows_read"], m["rows_out"]) == (20, 10)
    # Without the filter every chunk is read.
    everything = zarrow.scan(XARRAY)
    streamed(everything)
    assert everything.metrics["chunks_read"] == 6


def test_a_filter_on_a_data_column_prunes_nothing_and_filters_exactly():
    where = "temperature > 15 AND station <> 'bravo-ü'"
    stream = zarrow.scan(XARRAY, ["station", "temperature"], filter=where)
    got = streamed(stream)
    assert equal_rows(got, sql_answer(XARRAY, where, columns=["station", "temperature"]))
    assert stream.metrics["chunks_pruned"] == 0
    assert stream.metrics["chunks_read"] == 6


def test_filter_columns_need_not_be_projected():
    got = zarrow.read_table(XARRAY, ["temperature"], filter="time >= 24 AND station = 'CHARLIE'")
    assert got.column_names == ["temperature"]
    assert equal_rows(got, sql_answer(XARRAY, "time >= 24 AND station = 'CHARLIE'", columns=["temperature"]))


def test_a_limit_counts_filtered_rows_and_stops_early():
    for read in (lambda **kw: zarrow.read_table(XARRAY, **kw),
                 lambda **kw: streamed(zarrow.scan(XARRAY, batch_size=2, **kw))):
        got = read(filter="station = 'CHARLIE'", limit=3)
        assert equal_rows(got, sql_answer(XARRAY, "station = 'CHARLIE'", limit=3))
        assert got.num_rows == 3
    stream = zarrow.scan(XARRAY, filter="time >= 0", limit=5)
    streamed(stream)
    # The first chunk of rows (4 times x 3 stations) holds 12 matching rows: one chunk read.
    assert stream.metrics["chunks_read"] == 1


def test_prune_skips_chunks_without_filtering_rows():
    stream = zarrow.scan(XARRAY, prune="time < 12")
    got = streamed(stream)
    # The kept chunks whole: time 0, 6, 12, 18 of every station.
    assert sorted(set(got.column("time").to_pylist())) == [0, 6, 12, 18]
    assert stream.metrics["chunks_read"] == 2
    both = zarrow.read_table(XARRAY, filter="station = 'ALPHA'", prune="time < 12")
    assert both.column("time").to_pylist() == [0, 6, 12, 18]


def test_sql_in_and_between_and_or_prune():
    for where in ("time BETWEEN 20 AND 30", "time IN (24, 30)", "time = 0 OR time = 54"):
        stream = zarrow.scan(XARRAY, filter=where)
        assert equal_rows(streamed(stream), sql_answer(XARRAY, where)), where
        assert stream.metrics["chunks_pruned"] > 0, where


@pytest.mark.parametrize("where, message", [
    ("time +", "time +"),
    ("time + 1", "not a boolean"),
])
def test_a_bad_filter_is_one_clear_error(where, message):
    with pytest.raises(zarrow.ZarrowError, match=message) as info:
        zarrow.scan(XARRAY, filter=where)
    assert "filter" in str(info.value) and "xarray_v3.zarr" in str(info.value)


def test_a_misspelled_column_in_a_filter_is_column_not_found():
    # As a misspelled `columns` entry (test_errors.py): the close name, the columns.
    with pytest.raises(zarrow.ColumnNotFoundError, match="Did you mean 'time'") as info:
        zarrow.scan(XARRAY, filter="tme < 3")
    assert "xarray_v3.zarr" in str(info.value)
