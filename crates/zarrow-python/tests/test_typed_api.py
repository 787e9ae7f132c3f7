"""The public API as a typed caller uses it: ci.sh checks this file with `mypy --strict`
against the installed stubs (and pytest runs it), so a stub that drifts from the runtime
fails one or the other."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

import zarrow

XARRAY = str(Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "data" / "xarray_v3.zarr")


def test_scan_and_its_stream() -> None:
    stream: zarrow.ZarrStream = zarrow.scan(XARRAY, ["time", "station"], filter="time < 12",
                                            batch_size=4, limit=100, string_type="view")
    names: list[str] = stream.columns
    rows = 0
    for batch in stream:
        b: zarrow.ZarrBatch = batch
        rows += b.num_rows
    metrics: dict[str, float] = stream.metrics
    assert names == ["time", "station"] and rows == 10 and metrics["chunks_pruned"] == 4


def test_read_table_schema_and_tree() -> None:
    table: pa.Table = zarrow.read_table(XARRAY, ["flag"], prune="time < 12")
    schema: pa.Schema = zarrow.schema(XARRAY, decode_cf=True)
    text: str = zarrow.tree(XARRAY, storage_options={})
    assert table.num_rows == 20 and "flag" in schema.names and "temperature" in text


def test_zarr_table() -> None:
    table = zarrow.ZarrTable(XARRAY, fill_as_null=True, arrays=["temperature"])
    rows: int = table.num_rows
    left_out: list[tuple[str, str]] = table.left_out
    assert rows == 50 and table.columns[-1] == "temperature" and isinstance(left_out, list)
    assert table.location.endswith("xarray_v3.zarr")


def test_write_table_result(tmp_path: Path) -> None:
    result: zarrow.WriteResult = zarrow.write_table(str(tmp_path / "t.zarr"),
                                                    pa.table({"a": [1, 2, 3]}))
    rows: int = result
    snapshot: str | None = result.snapshot_id
    assert rows == 3 and snapshot is None


def test_scan_polars() -> None:
    seen: list[dict[str, object]] = []
    lf: pl.LazyFrame = zarrow.scan_polars(XARRAY, columns=["time", "temperature"],
                                          on_scan=seen.append, string_type="view")
    frame = lf.filter(pl.col("time") < 12).collect()
    assert frame.height == 10 and seen[-1]["prune"] == '("time" < 12)'


def test_exceptions() -> None:
    errors: list[type[zarrow.ZarrowError]] = [
        zarrow.NotFoundError, zarrow.ColumnNotFoundError, zarrow.OptionError,
        zarrow.NotATableError, zarrow.UnsupportedError, zarrow.MetadataError,
        zarrow.CorruptChunkError, zarrow.StoreError]
    assert all(issubclass(e, zarrow.ZarrowError) for e in errors)
    version: str = zarrow.__version__
    assert version


def test_every_public_function_and_class_has_a_docstring_with_an_example() -> None:
    for name in zarrow.__all__:
        item = getattr(zarrow, name)
        if isinstance(item, str) or (isinstance(item, type) and issubclass(item, Exception)):
            assert isinstance(item, str) or item.__doc__, name
            continue
        assert "Example" in (item.__doc__ or ""), f"zarrow.{name} has no example in its docstring"
