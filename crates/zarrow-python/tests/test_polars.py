"""`zarrow.scan_polars`: a polars LazyFrame whose projection, predicate and limit reach the
zarr scan (seen in the scan's metrics), with the SQL path's answers on every fixture table."""

from __future__ import annotations

import json
import os

import pytest

pl = pytest.importorskip("polars")
from polars.testing import assert_frame_equal  # noqa: E402

import pyarrow as pa  # noqa: E402
import zarrow  # noqa: E402
from conftest import DATA, first_column_predicate, fixture_tables, sql_answer  # noqa: E402

XARRAY = str(DATA / "xarray_v3.zarr")  # time: 10 (chunks of 4), station: 5 (chunks of 3)


def same_rows(got, expected) -> None:
    """Equal frames up to row order (SQL promises none)."""
    expected = pl.from_arrow(expected)
    assert got.schema == expected.schema
    try:
        assert_frame_equal(got, expected, check_row_order=False)
    except pl.exceptions.InvalidOperationError:  # a column type polars cannot sort by
        assert_frame_equal(got, expected)


def scans(location: str, **options):
    """A LazyFrame and the list its scans report into."""
    seen: list[dict] = []
    return zarrow.scan_polars(location, on_scan=seen.append, **options), seen


@pytest.mark.parametrize("location", fixture_tables(), ids=lambda p: os.path.relpath(p, DATA))
def test_answers_equal_the_sql_path(location):
    try:
        lf = zarrow.scan_polars(location)
    except zarrow.ZarrowError as e:
        pytest.skip(f"not a table: {e}")
    whole = lf.collect()
    same_rows(whole, sql_answer(location))
    where = first_column_predicate(whole.to_arrow())
    if where is None:
        return
    name = whole.columns[0]
    value = whole.get_column(name).drop_nulls().drop_nans().sort() if whole.schema[name].is_float() \
        else whole.get_column(name).drop_nulls().sort()
    pivot = value[len(value) // 2]
    lf, seen = scans(location)
    got = lf.filter(pl.col(name) >= pivot).collect()
    same_rows(got, sql_answer(location, where))
    assert seen[-1]["prune"] is not None
    streamed = lf.filter(pl.col(name) >= pivot).collect(engine="streaming")
    same_rows(streamed, sql_answer(location, where))


def test_the_schema_is_known_before_anything_is_read():
    lf, seen = scans(XARRAY)
    assert lf.collect_schema() == pl.Schema({
        "time": pl.Int64, "station": pl.String, "flag": pl.Int8, "station_name": pl.String,
        "temperature": pl.Float32})
    assert seen == []
    lf, _ = scans(XARRAY, columns=["temperature", "time"])
    assert lf.collect_schema().names() == ["temperature", "time"]


def test_a_predicate_on_a_coordinate_prunes_chunks():
    lf, seen = scans(XARRAY)
    got = lf.filter(pl.col("time") < 12).select("station", "temperature").collect()
    same_rows(got, sql_answer(XARRAY, "time < 12", columns=["station", "temperature"]))
    m = seen[-1]
    assert m["prune"] == '("time" < 12)'
    assert m["columns"] == ["time", "station", "temperature"]
    assert (m["chunks_total"], m["chunks_read"], m["chunks_pruned"]) == (6, 2, 4)


@pytest.mark.parametrize("predicate, sql", [
    (pl.col("time").is_between(20, 30), "time BETWEEN 20 AND 30"),
    (pl.col("time").is_in([0, 54]), "time IN (0, 54)"),
    ((pl.col("time") == 0) | (pl.col("time") >= 48), "time = 0 OR time >= 48"),
    (~(pl.col("time") >= 12), "NOT (time >= 12)"),
    ((pl.col("time") < 12) & pl.col("station").str.contains("A"), "time < 12 AND station LIKE '%A%'"),
    ((pl.col("time") < 12) & (pl.col("station") >= "a"), "time < 12 AND station >= 'a'"),
])
def test_translated_predicates_prune_and_polars_filters(predicate, sql):
    lf, seen = scans(XARRAY)
    same_rows(lf.filter(predicate).collect(), sql_answer(XARRAY, sql))
    assert seen[-1]["chunks_pruned"] > 0, seen[-1]


@pytest.mark.parametrize("predicate, sql", [
    (pl.col("station").str.contains("A"), "station LIKE '%A%'"),
    ((pl.col("time") + 1) > 40, "time + 1 > 40"),
    ((pl.col("time") < 12) | pl.col("station").str.contains("A"), "time < 12 OR station LIKE '%A%'"),
    (~((pl.col("time") < 12) & pl.col("station").str.contains("A")),
     "NOT (time < 12 AND station LIKE '%A%')"),
])
def test_what_cannot_be_translated_is_left_to_polars(predicate, sql):
    lf, seen = scans(XARRAY)
    same_rows(lf.filter(predicate).collect(), sql_answer(XARRAY, sql))
    assert seen[-1]["prune"] is None
    assert seen[-1]["chunks_read"] == 6


def test_sql_zarrow_refuses_leaves_the_predicate_to_polars():
    # A translation DataFusion cannot plan (here: not SQL at all) costs the pruning, never
    # the query.
    from zarrow import _prune

    stream = _prune.scan_pruned(XARRAY, ["time"], "time +", None, None, {})
    assert stream.prune is None
    assert sum(b.num_rows for b in stream) == 50


def test_head_stops_the_scan():
    lf, seen = scans(XARRAY)
    got = lf.head(3).collect()
    assert got.height == 3 and seen[-1]["n_rows"] == 3
    assert seen[-1]["chunks_read"] == 1
    got = lf.filter(pl.col("station") == "CHARLIE").head(3).collect()
    assert got.get_column("station").to_list() == ["CHARLIE"] * 3


def test_projection_fetches_only_the_chosen_arrays():
    lf, seen = scans(XARRAY)
    lf.collect()
    everything = seen[-1]["bytes_fetched"]
    lf.select("flag").collect()
    assert seen[-1]["columns"] == ["flag"]
    assert 0 < seen[-1]["bytes_fetched"] < everything / 2


def test_batch_size_is_honoured():
    lf, seen = scans(XARRAY, batch_size=4)
    frames = list(lf.collect_batches(chunk_size=None)) if hasattr(lf, "collect_batches") else []
    assert seen[-1]["batch_size"] == 4
    assert all(f.height <= 4 for f in frames)
    same_rows(pl.concat(frames) if frames else lf.collect(), sql_answer(XARRAY))


def test_options_reach_the_scan():
    expected = json.loads((DATA / "expected_icechunk.json").read_text())["versions"]
    repo = f"icechunk+file://{DATA / 'atlas.icechunk'}"
    got = zarrow.scan_polars(f"{repo}/labels", ref="v1").collect()
    assert got.get_column("labels").to_list() == expected["v1"]["labels"]["values"]
    utf8 = zarrow.scan_polars(XARRAY, string_type="utf8", columns=["station"]).collect()
    assert utf8.schema["station"] == pl.String
    filtered = zarrow.scan_polars(XARRAY, filter="flag > 0").collect()
    same_rows(filtered, sql_answer(XARRAY, "flag > 0"))


def test_dictionary_columns_are_categorical_and_group_alike():
    plain = zarrow.scan_polars(XARRAY, batch_size=4)
    lf, seen = scans(XARRAY, batch_size=4, dictionary=["station_name", "station"])
    schema = lf.collect_schema()
    assert schema["station_name"] == pl.Categorical and schema["station"] == pl.Categorical
    assert schema["temperature"] == pl.Float32
    got = lf.group_by("station_name").agg(pl.col("temperature").sum()).collect()
    want = plain.group_by("station_name").agg(pl.col("temperature").sum()).collect()
    assert_frame_equal(got.with_columns(pl.col("station_name").cast(pl.String)), want,
                       check_row_order=False)
    assert seen[-1]["chunks_read"] > 0
    whole = lf.collect().with_columns(pl.col("station_name", "station").cast(pl.String))
    assert_frame_equal(whole, plain.collect())
    stream = zarrow.scan(XARRAY, ["station_name"], dictionary=["station_name"], batch_size=4)
    batches = [pa.record_batch(b) for b in stream]
    assert len(batches) > 1
    assert all(pa.types.is_dictionary(b.schema.field(0).type) for b in batches)
    with pytest.raises(zarrow.ZarrowError, match="only string and binary columns"):
        zarrow.scan_polars(XARRAY, dictionary=["temperature"])


def test_anndata_and_sparse_tables():
    obs = str(DATA / "anndata_v3.zarr" / "obs")
    lf = zarrow.scan_polars(obs)
    first = lf.collect_schema().names()[0]
    same_rows(lf.filter(pl.col(first) >= "c").collect(), sql_answer(obs, f"\"{first}\" >= 'c'"))
    x = str(DATA / "anndata_sparse_v3.zarr" / "X")
    lf, seen = scans(x)
    names = lf.collect_schema().names()
    got = lf.filter(pl.col(names[0]) == 1).collect()
    same_rows(got, sql_answer(x, f'"{names[0]}" = 1'))
