"""zarrow.write_table: pyarrow tables and readers, polars frames → zarr tables that zarr-python
reads with the same values and zarrow reads back; the stream is consumed as it is written."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
import zarr

import zarrow


def sample() -> pa.Table:
    n = 1000
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "label": pa.array([f"cell-{i % 37}-ñ" for i in range(n)]),
            "score": pa.array([None if i % 11 == 0 else i * 0.25 for i in range(n)]),
            "flag": pa.array([i % 3 == 0 for i in range(n)]),
            "cat": pa.array([["a", "b", "c"][i % 3] for i in range(n)]).dictionary_encode(),
        }
    )


def test_pyarrow_table_round_trip(tmp_path):
    table = sample()
    out = str(tmp_path / "t.zarr")
    rows = zarrow.write_table(out, table, chunk_rows=128, compression="zstd(5)")
    assert rows == table.num_rows

    group = zarr.open_group(out, mode="r")
    assert sorted(name for name, _ in group.arrays()) == ["cat", "flag", "id", "label", "score"]
    assert group["label"][:].tolist() == table["label"].to_pylist()
    assert group["cat"][:].tolist() == table["cat"].cast(pa.string()).to_pylist()
    assert group["id"][:].tolist() == list(range(table.num_rows))
    score = group["score"][:]
    expected = table["score"].to_numpy(zero_copy_only=False)
    assert np.array_equal(np.isnan(score), np.isnan(expected))
    assert np.allclose(score[~np.isnan(score)], expected[~np.isnan(expected)])
    assert group["label"].metadata.dimension_names == ("dim_0",)

    back = zarrow.read_table(out, decode_cf=True)
    for name in ["id", "label", "flag"]:
        assert back[name].to_pylist() == table[name].to_pylist(), name
    assert back["score"].to_pylist() == table["score"].to_pylist()


def test_polars_and_v2_options(tmp_path):
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"name": ["x", "yy", "zzz"], "n": [1, 2, 3]})
    out = str(tmp_path / "p.zarr")
    assert zarrow.write_table(out, frame, zarr_format=2, dimension="obs", compression="gzip") == 3
    group = zarr.open_group(out, mode="r", zarr_format=2)
    assert group["name"][:].tolist() == ["x", "yy", "zzz"]
    assert group["n"].attrs["_ARRAY_DIMENSIONS"] == ["obs"]


def test_reader_is_streamed_not_collected(tmp_path):
    """Chunks are stored while the producer is still yielding: after 40 batches of one chunk
    each, most of them must already be in the store (a bounded number may be in flight)."""
    out = tmp_path / "s.zarr"
    schema = pa.schema([("v", pa.int64())])
    seen = []

    def batches():
        for i in range(60):
            if i == 40:
                seen.append(len(os.listdir(out / "v" / "c")))
            yield pa.record_batch([pa.array(range(i * 100, i * 100 + 100), pa.int64())], schema=schema)

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    assert zarrow.write_table(str(out), reader, chunk_rows=100) == 6000
    assert seen and seen[0] >= 20, seen
    assert zarr.open_group(str(out), mode="r")["v"][:].tolist() == list(range(6000))


def test_errors_write_nothing(tmp_path):
    out = tmp_path / "e.zarr"
    with pytest.raises(zarrow.ZarrowError, match="unknown zarr write option 'chunk_size'"):
        zarrow.write_table(str(out), sample(), chunk_size=10)
    nested = pa.table({"items": pa.array([[1, 2], [3]])})
    with pytest.raises(zarrow.ZarrowError, match="column 'items'.*List"):
        zarrow.write_table(str(out), nested)
    assert not out.exists()
    with pytest.raises(zarrow.ZarrowError, match="__arrow_c_stream__"):
        zarrow.write_table(str(out), [1, 2, 3])
    zarrow.write_table(str(out), sample())
    with pytest.raises(zarrow.ZarrowError, match="already exists"):
        zarrow.write_table(str(out), sample())
    assert zarrow.write_table(str(out), sample().slice(0, 5), overwrite=True) == 5
    assert zarr.open_group(str(out), mode="r")["id"].shape == (5,)
