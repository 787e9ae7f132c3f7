"""zarrow from Python: the same answers as the Rust side, SQL through datafusion-python with
pushdown, Arrow streams into pyarrow/polars/pandas without copies, remote stores through
storage_options, errors as exceptions, threads and asyncio."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import zarrow
from conftest import DATA, SAMPLE, fixture_tables, ipc_bytes, rust_table, server, sorted_by_all


@pytest.mark.parametrize("location", fixture_tables(), ids=lambda p: os.path.relpath(p, DATA))
def test_same_answers_as_rust(location, cli, tmp_path):
    try:
        ours = zarrow.read_table(location)
    except zarrow.ZarrowError as e:
        # Not a table (a group of groups, an unsupported node): the Rust side agrees.
        with pytest.raises(Exception):
            rust_table(cli, location, tmp_path)
        pytest.skip(f"not a table: {e}")
    theirs = rust_table(cli, location, tmp_path)
    assert ours.schema == theirs.schema
    assert ipc_bytes(sorted_by_all(ours)) == ipc_bytes(sorted_by_all(theirs))


def expected_entries(name: str) -> list[dict]:
    return [e for e in json.loads((DATA / name).read_text()) if "values" in e]


@pytest.mark.parametrize(
    "entry",
    [e for e in expected_entries("expected_v3.json") if e["kind"] in ("utf8", "binary", "fixed_binary")],
    ids=lambda e: f"{e['store']}/{e['path']}",
)
def test_strings_of_every_kind_match_zarr_python(entry):
    location = str(DATA / entry["store"] / entry["path"]) if entry["path"] else str(DATA / entry["store"])
    table = zarrow.read_table(location)
    ndim = len(entry["shape"])
    # C order: sort by the index columns.
    table = table.sort_by([(table.column_names[d], "ascending") for d in range(ndim)])
    values = table.column(ndim).to_pylist()
    if entry["kind"] == "utf8":
        assert values == entry["values"]
    else:
        assert [base64.b64encode(v).decode() for v in values] == entry["values"]


@pytest.mark.parametrize("store", ["anndata_v3.zarr", "anndata_v3_sharded.zarr", "anndata_v2.zarr"])
def test_anndata_dataframes_match_anndata(store):
    expected = json.loads((DATA / "expected_anndata.json").read_text())[store]
    for element in ("obs", "var"):
        if element not in expected:
            continue
        table = zarrow.read_table(str(DATA / store / element))
        for name, values in expected[element]["columns"].items():
            got = table.column(name).to_pylist()
            assert got == values, f"{store}/{element}.{name}"


def test_icechunk_repository_at_every_version():
    expected = json.loads((DATA / "expected_icechunk.json").read_text())["versions"]
    repo = f"icechunk+file://{DATA / 'atlas.icechunk'}"
    for version in ("v1", "main", "dev"):
        got = zarrow.read_table(f"{repo}@{version}/labels").column("labels").to_pylist()
        assert got == expected[version]["labels"]["values"], version
    # the version as a keyword; the default branch is main
    by_ref = zarrow.read_table(f"{repo}/labels", ref="v1").column("labels").to_pylist()
    assert by_ref == expected["v1"]["labels"]["values"]
    table = zarrow.ZarrTable(f"{repo}/labels")
    assert table.num_rows == len(expected["main"]["labels"]["values"])
    assert "labels" in zarrow.tree(f"{repo}@v1")
    with pytest.raises(zarrow.ZarrowError, match="no-such-tag"):
        zarrow.read_table(f"{repo}@no-such-tag/labels")


def test_icechunk_repository_over_s3(monkeypatch):
    s3 = server("ZARROW_TEST_S3")
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    expected = json.loads((DATA / "expected_icechunk.json").read_text())["versions"]
    bucket = s3.removeprefix("s3://")
    for var in [v for v in os.environ if v.startswith("AWS_")]:
        monkeypatch.delenv(var)
    options = {"key": "test", "secret": "test", "region": "us-east-1", "endpoint": endpoint,
               "allow_http": "true"}
    got = zarrow.read_table(f"icechunk+s3://{bucket}/atlas.icechunk/labels", ref="dev",
                            storage_options=options)
    assert got.column("labels").to_pylist() == expected["dev"]["labels"]["values"]


def test_string_types_and_projection_and_limit():
    location = str(DATA / "v3_strings.zarr" / "string_2d")
    view = zarrow.read_table(location, string_type="view")
    assert view.schema.field("string_2d").type == pa.string_view()
    large = zarrow.read_table(location, ["string_2d"], string_type="large_utf8", limit=4)
    assert large.column_names == ["string_2d"]
    assert large.schema.field(0).type == pa.large_string()
    assert large.num_rows == 4
    assert zarrow.schema(location).names == ["dim_0", "dim_1", "string_2d"]
    with pytest.raises(KeyError):
        zarrow.scan(location, ["nope"])


def test_tree_and_schema():
    text = zarrow.tree(str(SAMPLE))
    assert text.splitlines()[0].startswith("pbmc_sample.zarr/")
    assert "obs/" in text
    s = zarrow.schema(str(SAMPLE / "obs"))
    assert "cell_type" in s.names
    t = zarrow.ZarrTable(str(SAMPLE / "obs"))
    assert t.columns == s.names and t.num_rows == 2000


def test_sql_through_datafusion_with_pushdown():
    datafusion = pytest.importorskip("datafusion")
    ctx = datafusion.SessionContext()
    ctx.register_table("s", zarrow.ZarrTable(str(DATA / "v3_strings.zarr" / "string_2d")))
    plan = "\n".join(
        str(v) for v in ctx.sql("EXPLAIN SELECT dim_1, string_2d FROM s WHERE dim_0 >= 6")
        .to_arrow_table().column("plan").to_pylist()
    )
    # Projection and filter reach zarrow's provider across the FFI (the filter as an inexact
    # pushdown, which zarrow prunes chunks with), and the plan runs zarrow's scan (a
    # DataSourceExec; only its name crosses the FFI).
    assert "TableScan: s projection=[dim_0, dim_1, string_2d]" in plan, plan
    assert "partial_filters=[s.dim_0 >= Int64(6)]" in plan, plan
    assert "FFI_ExecutionPlan: DataSourceExec" in plan, plan
    rows = ctx.sql("SELECT dim_1, string_2d FROM s WHERE dim_0 >= 6 ORDER BY dim_1").to_pylist()
    assert [r["dim_1"] for r in rows] == [0, 1, 2, 3, 4]
    limited = ctx.sql("SELECT * FROM s LIMIT 3").to_arrow_table()
    assert limited.num_rows == 3
    explain_limit = "\n".join(
        str(v) for v in ctx.sql("EXPLAIN SELECT * FROM s LIMIT 3").to_arrow_table()
        .column("plan").to_pylist()
    )
    assert "fetch=3" in explain_limit, explain_limit


def test_stored_as_zarr_from_python():
    pytest.importorskip("datafusion")
    ctx = zarrow.session_context()
    obs = str(SAMPLE / "obs")
    ctx.sql(f"CREATE EXTERNAL TABLE obs STORED AS ZARR LOCATION '{obs}'").collect()
    rows = ctx.sql(
        "SELECT cell_type, count(*) AS n FROM obs GROUP BY cell_type ORDER BY n DESC LIMIT 1"
    ).to_pylist()
    assert rows == [{"cell_type": "CD4 T", "n": 596}]


def test_polars_and_pandas_take_the_stream():
    pl = pytest.importorskip("polars")
    df = pl.DataFrame(zarrow.scan(str(SAMPLE / "var")))
    assert df.height == 200 and "gene_symbol" in df.columns
    pdf = zarrow.read_table(str(SAMPLE / "obs"), ["cell_type"]).to_pandas()
    assert len(pdf) == 2000


def test_arrow_vlen_reaches_pyarrow_without_a_copy(tmp_path):
    strings = [f"cell-{i:05d}-{'x' * (i % 7)}" for i in range(1000)]
    location = str(tmp_path / "ids.zarr")
    zarrow.write_array(location, pa.array(strings), chunks=[1000], string_encoding="arrow_vlen")
    reader = pa.RecordBatchReader.from_stream(zarrow.scan(location, ["value"], batch_size=1000))
    (batch,) = list(reader)
    column = batch.column(0)
    assert column.to_pylist() == strings
    _, offsets, data = column.buffers()
    # The chunk is [1001 int32 offsets][zero padding to 64 bytes][data]: if the Arrow buffers
    # are the chunk's own bytes, the data buffer starts exactly where the chunk has it.
    padded = (1001 * 4 + 63) // 64 * 64
    assert data.address - offsets.address == padded
    chunk = (tmp_path / "ids.zarr" / "c" / "0").read_bytes()
    assert offsets.to_pybytes()[: 1001 * 4] == chunk[: 1001 * 4]
    assert data.to_pybytes()[: len(data)] == chunk[padded : padded + len(data)]


def test_zarr_python_reads_what_zarrow_writes(tmp_path):
    zarr = pytest.importorskip("zarr")
    location = tmp_path / "labels.zarr"
    values = ["a", "", "ünïcödé", "🌊"] * 10
    zarrow.write_array(str(location), pa.array(values), chunks=[7], compression="zstd")
    assert zarr.open_array(str(location), mode="r")[:].tolist() == values


def test_write_array_takes_the_table_writers_option_values(tmp_path):
    values = pa.array(["a", None, "ccc"] * 5)
    location = tmp_path / "a.zarr"
    zarrow.write_array(str(location), values, string_encoding="arrow_vlen_large",
                       compression="zstd(5)")
    codecs = json.loads((location / "zarr.json").read_text())["codecs"]
    assert codecs[0]["configuration"]["offset_type"] == "int64"
    assert codecs[1]["configuration"]["level"] == 5
    # The old keyword and value still work, and warn.
    with pytest.warns(DeprecationWarning, match="string_encoding"):
        zarrow.write_array(str(tmp_path / "b.zarr"), values, encoding="arrow_vlen")
    with pytest.warns(DeprecationWarning, match="arrow_vlen_large"):
        zarrow.write_array(str(tmp_path / "c.zarr"), values, string_encoding="large_arrow_vlen")
    # Written whole or refused: what is there is replaced only with overwrite.
    with pytest.raises(zarrow.ZarrowError, match="already exists"):
        zarrow.write_array(str(location), values)
    zarrow.write_array(str(location), values, overwrite=True)
    # NULLs are written as the fill value, "".
    want = ["" if v is None else v for v in values.to_pylist()]
    assert zarrow.read_table(str(location)).column("value").to_pylist() == want


def test_remote_stores_through_storage_options(monkeypatch):
    http = server("ZARROW_TEST_HTTP")
    s3 = server("ZARROW_TEST_S3")
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    want = zarrow.read_table(str(DATA / "v3_strings.zarr" / "string_2d"))
    assert zarrow.read_table(f"{http}/v3_strings.zarr/string_2d").equals(want)
    # Credentials and endpoint from storage_options alone, none in the environment.
    for var in [v for v in os.environ if v.startswith("AWS_")]:
        monkeypatch.delenv(var)
    options = {"key": "test", "secret": "test", "region": "us-east-1", "endpoint": endpoint}
    got = zarrow.read_table(f"{s3}/v3_strings.zarr/string_2d", storage_options=options)
    assert got.equals(want)
    # The endpoint came from the options: a bucket that is not there is an error from it.
    with pytest.raises(zarrow.NotFoundError):
        zarrow.read_table("s3://no-such-bucket/x.zarr", storage_options=options)


def test_remote_faults_and_timeouts_through_storage_options():
    proxy = server("ZARROW_TEST_FAULT_PROXY")
    want = zarrow.read_table(str(DATA / "v3_strings.zarr" / "string_gzip"))
    # Transient 503s are retried: the answer is exact.
    flaky = f"{proxy}/fault/status=503,n=1,id=py-{os.getpid()}/v3_strings.zarr/string_gzip"
    assert zarrow.read_table(flaky).equals(want)
    # A persistent 500 on the chunks is a StoreError naming the chunk and the status.
    broken = f"{proxy}/fault/status=500,on=chunks,id=py-{os.getpid()}/v3_strings.zarr/string_gzip"
    with pytest.raises(zarrow.StoreError, match=r"(?s)string_gzip/c/.*500"):
        zarrow.read_table(broken, storage_options={"max_retries": "1"})
    # A server that never answers: the timeout from storage_options ends the read.
    hang = f"{proxy}/fault/hang,on=chunks,id=py-{os.getpid()}/v3_strings.zarr/string_gzip"
    started = time.monotonic()
    with pytest.raises(zarrow.StoreError, match="string_gzip/c/"):
        zarrow.read_table(hang, storage_options={"timeout": "500ms", "max_retries": "0"})
    assert time.monotonic() - started < 20  # a hang detector, not a timing test


def test_errors_are_exceptions_of_the_hierarchy(tmp_path):
    with pytest.raises(zarrow.NotFoundError):
        zarrow.read_table(str(tmp_path / "missing.zarr"))
    location = tmp_path / "s.zarr"
    zarrow.write_array(str(location), pa.array(["abc"] * 20), chunks=[10], compression="zstd")
    (location / "c" / "1").write_bytes(b"not zstd at all")
    with pytest.raises(zarrow.CorruptChunkError, match=r"c/1"):
        zarrow.read_table(str(location))
    meta = json.loads((location / "zarr.json").read_text())
    meta["codecs"].append({"name": "no_such_codec"})
    (location / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(zarrow.UnsupportedError, match="no_such_codec"):
        zarrow.read_table(str(location))
    (location / "zarr.json").write_text("{not json")
    with pytest.raises(zarrow.MetadataError):
        zarrow.read_table(str(location))
    assert issubclass(zarrow.StoreError, zarrow.ZarrowError)


def test_threads_and_a_running_event_loop():
    location = str(SAMPLE / "obs")
    want = zarrow.read_table(location).num_rows
    results: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            results.append(zarrow.read_table(location).num_rows)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [want] * 6

    async def inside_a_loop() -> int:
        return zarrow.read_table(location).num_rows

    assert asyncio.run(inside_a_loop()) == want


def test_the_gil_is_released_while_reading(tmp_path):
    # A thread that notes the time while another reads: with the GIL released it runs
    # during the read, not only before and after it.
    location = str(tmp_path / "big.zarr")
    zarrow.write_array(location, pa.array([f"label-{i % 977}" for i in range(400_000)]),
                       chunks=[100_000], compression="zstd")
    import time

    ticks: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.01)
    try:
        started = time.perf_counter()
        stream = zarrow.scan(location, batch_size=400_000)
        reader = pa.RecordBatchReader.from_stream(stream)
        rows = sum(b.num_rows for b in reader)
        ended = time.perf_counter()
    finally:
        stop.set()
        t.join()
    assert rows == 400_000
    during = [x for x in ticks if started < x < ended]
    assert during, f"no tick in {ended - started:.3f} s of reading"


def _scan_with_requests(location: str, **options: object) -> tuple[pa.Table, float]:
    stream = zarrow.scan(location, **options)
    batches = [pa.record_batch(b) for b in stream.read_all()]
    return pa.Table.from_batches(batches, schema=pa.schema(stream)), stream.metrics["requests"]


def test_range_split_bytes_splits_each_chunk_read():
    """A chunk read over ``range_split_bytes`` goes as several ranged GETs: X's 8 chunks of
    about 20 kB each in parts of 4 kB, the same values."""
    location = str(SAMPLE / "X")
    plain, plain_requests = _scan_with_requests(location)
    split, split_requests = _scan_with_requests(location, range_split_bytes=4096)
    assert split.equals(plain)
    assert split_requests >= plain_requests + 8 * 4, (plain_requests, split_requests)
    never, never_requests = _scan_with_requests(location, range_split_bytes=0)
    assert never.equals(plain) and never_requests == plain_requests


def test_coalesce_bytes_is_a_read_option():
    """``coalesce_bytes`` is taken where the other table options are (scan, ZarrTable,
    read_table) and reads the same values; a negative size is refused."""
    location = str(DATA / "anndata_v3_sharded.zarr" / "obs")
    plain = zarrow.read_table(location)
    assert zarrow.read_table(location, coalesce_bytes=0).equals(plain)
    table = zarrow.ZarrTable(location, coalesce_bytes=1 << 22, range_split_bytes=1 << 10)
    assert table.num_rows == plain.num_rows
    with pytest.raises(OverflowError):
        zarrow.scan(location, coalesce_bytes=-1)


def test_read_table_gives_a_dictionary_column_one_dictionary():
    location = str(DATA / "xarray_v3.zarr")
    plain = zarrow.read_table(location, ["station_name", "temperature"], batch_size=4)
    table = zarrow.read_table(location, ["station_name", "temperature"], batch_size=4,
                              dictionary=["station_name"])
    column = table.column("station_name")
    assert pa.types.is_dictionary(column.type) and column.num_chunks > 1
    assert all(len(chunk.dictionary) == 5 for chunk in column.chunks)
    assert column.cast(pa.string()).equals(plain.column("station_name"))
    counts = table.group_by("station_name").aggregate([("temperature", "count")])
    assert sorted(counts.column("temperature_count").to_pylist()) == [10] * 5
