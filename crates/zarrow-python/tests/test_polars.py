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


@pytest.mark.parametrize("predicate, like", [
    (pl.col("station").str.contains("A"), """"station" LIKE '%A%'"""),
    (pl.col("station").str.contains("-ü", literal=True), """"station" LIKE '%-ü%'"""),
    (pl.col("station").str.starts_with("δ"), """"station" LIKE 'δ%'"""),
    (pl.col("station_name").str.ends_with("🌊"), """"station_name" LIKE '%🌊'"""),
    ((pl.col("time") < 12) | pl.col("station").str.contains("A"), """"station" LIKE '%A%'"""),
    (~((pl.col("time") < 12) & pl.col("station").str.contains("A")),
     """"station" LIKE '%A%'"""),
])
def test_translated_predicates_filter_rows_in_zarrow(predicate, like):
    # The SQL (polars may have rewritten the predicate before handing it over) drops rows
    # before polars gets them; polars' own filter over the whole table is the answer.
    lf, seen = scans(XARRAY)
    got = lf.filter(predicate).collect()
    m = seen[-1]
    same_rows(got, lf.collect().filter(predicate).to_arrow())
    assert m["filter"] == m["prune"] and like in m["filter"], m
    assert m["rows_out"] == got.height < m["rows_read"], m


@pytest.mark.parametrize("predicate, sql", [
    ((pl.col("time") + 1) > 40, "time + 1 > 40"),
    (pl.col("station").str.contains("^A"), "station LIKE 'A%'"),
    (pl.col("station").str.contains("A.P"), "station LIKE '%ALP%'"),
    (pl.col("station").str.starts_with(pl.col("station_name")), "station LIKE station_name || '%'"),
])
def test_what_cannot_be_translated_is_left_to_polars(predicate, sql):
    lf, seen = scans(XARRAY)
    same_rows(lf.filter(predicate).collect(), sql_answer(XARRAY, sql))
    assert (seen[-1]["prune"], seen[-1]["filter"]) == (None, None)
    assert seen[-1]["chunks_read"] == 6
    assert seen[-1]["rows_out"] == 50


@pytest.mark.parametrize("rows", [False, True])
def test_sql_zarrow_refuses_leaves_the_predicate_to_polars(rows):
    # A translation DataFusion cannot plan (here: not SQL at all) costs the pruning and the
    # row filter, never the query.
    from zarrow import _prune

    stream = _prune.scan_pruned(XARRAY, ["time"], "time +", None, None, {}, rows=rows)
    assert (stream.prune, stream.filtered) == (None, False)
    assert sum(b.num_rows for b in stream) == 50


def test_the_filter_option_and_the_predicate_both_hold():
    lf, seen = scans(XARRAY, filter="time < 30")
    predicate = pl.col("station").str.contains("A", literal=True)
    same_rows(lf.filter(predicate).collect(),
              sql_answer(XARRAY, "time < 30 AND station LIKE '%A%'"))
    assert seen[-1]["filter"] == """("station" LIKE '%A%')"""
    # An own filter that is not SQL is the caller's error (when the frame is made), never a
    # fall back to polars.
    with pytest.raises(zarrow.ZarrowError, match="filter `time <`"):
        scans(XARRAY, filter="time <")


EDGES = {
    "f": [0.0, -0.0, 1.5, -1.5, float("nan"), float("inf"), float("-inf"), None, 2.0],
    "i": [0, -1, 5, None, 2**62, -(2**62), 7, 3, 0],
    "s": ["", "a", "zz", "azzb", None, "é", "A\\b", "a%b", "a_b'"],
    "b": [True, False, None, True, False, True, None, False, True],
}


def edge_predicates():
    literals = {"f": [0.0, -0.0, 1.5, 2], "i": [0, 3, -1, 2.5], "s": ["", "a", "zz", "é"],
                "b": [True, False]}
    for c, values in literals.items():
        for v in values:
            for op in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
                yield getattr(pl.col(c), op)(v)
        yield pl.col(c).is_null()
        yield ~pl.col(c).is_not_null()
        yield pl.col(c).is_in([v for v in values if c == "f" or not isinstance(v, float)])
        yield ~(pl.col(c) == values[0])
    yield pl.col("f").is_between(-1.5, 1.5, closed="left")
    for text in ("zz", "a", "%", "_", "é", "", "\\", "'", "a_", "%b", "A\\"):
        yield pl.col("s").str.contains(text, literal=True)
        yield pl.col("s").str.starts_with(text)
        yield pl.col("s").str.ends_with(text)
    yield pl.col("s").str.contains("z") | (pl.col("i") > 4)
    yield ~pl.col("s").str.contains("a", literal=True)


@pytest.mark.parametrize("fill_as_null", [False, True])
def test_translated_sql_keeps_the_rows_polars_keeps(tmp_path, fill_as_null):
    # The row filter's premise: on NaN, ±0, ±inf, NULLs, LIKE's own metacharacters and
    # quotes, DataFusion evaluating the SQL keeps exactly the rows polars' predicate keeps.
    from zarrow._polars_predicate import to_sql

    table = pa.table({"f": pa.array(EDGES["f"], pa.float64()), "i": pa.array(EDGES["i"]),
                      "s": pa.array(EDGES["s"]), "b": pa.array(EDGES["b"])})
    location = str(tmp_path / "edges.zarr")
    zarrow.write_table(location, table)
    frame = pl.from_arrow(zarrow.read_table(location, fill_as_null=fill_as_null))
    checked = 0
    for predicate in edge_predicates():
        sql = to_sql(predicate)
        assert sql is not None, predicate
        stream = zarrow.scan(location, ["dim_0"], filter=sql, fill_as_null=fill_as_null)
        got = sorted(v for b in stream for v in pa.record_batch(b).column(0).to_pylist())
        assert got == sorted(frame.filter(predicate)["dim_0"]), (predicate, sql)
        checked += 1
    assert checked == 136


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


def test_a_filtered_scan_reads_large_batches_unless_told():
    # polars' filter costs per batch: with a predicate the scan asks for 2^20 rows a batch
    # when they fit in 64 MiB, more if polars hints more; a batch_size given is kept.
    from zarrow._polars import FILTERED_BATCH_ROWS, filtered_batch_rows

    schema = pa.schema([("a", pa.float64()), ("b", pa.string()), ("c", pa.int8())])
    assert filtered_batch_rows(schema, ["a", "c"], None) == FILTERED_BATCH_ROWS
    assert filtered_batch_rows(schema, ["a", "c"], 1 << 21) == 1 << 21
    assert filtered_batch_rows(schema, ["b"] * 4, 100_000) == (64 << 20) // 128
    assert filtered_batch_rows(schema, ["a"] * 100, 100_000) == 100_000
    predicate = pl.col("temperature") > 10
    # 8 + 32 + 1 + 32 + 4 bytes a row (time, station, flag, station_name, temperature)
    for options, expected in (({}, (64 << 20) // 77), ({"batch_size": 4}, 4)):
        lf, seen = scans(XARRAY, **options)
        same_rows(lf.filter(predicate).collect(), sql_answer(XARRAY, "temperature > 10"))
        assert seen[-1]["batch_size"] == expected
    lf, seen = scans(XARRAY)
    lf.collect()
    assert (seen[-1]["batch_size"] or 0) < FILTERED_BATCH_ROWS  # polars' hint, unfiltered


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
