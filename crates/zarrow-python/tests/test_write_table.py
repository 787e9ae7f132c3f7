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
                # the table is staged beside `out` until it is complete (docs/writing.md)
                (staged,) = tmp_path.glob(".s.zarr.zarrow-staging-*")
                seen.append(len(os.listdir(staged / "v" / "c")))
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


def test_anndata_layout(tmp_path):
    """layout="anndata": an AnnData dataframe (zarr-python sees its encodings; anndata, where
    installed, reads the DataFrame), which zarrow reads back with the masks' NULLs."""
    table = pa.table(
        {
            "name": pa.array(["a", None, "c", "d"]),
            "n": pa.array([1, None, 3, 4], pa.int32()),
            "cat": pa.array(["x", "y", None, "x"]).dictionary_encode(),
            "score": pa.array([0.5, 1.5, 2.5, 3.5]),
        }
    )
    out = str(tmp_path / "a.zarr")
    assert zarrow.write_table(out, table, layout="anndata", chunk_rows=3) == 4
    group = zarr.open_group(out, mode="r")
    assert group.attrs["encoding-type"] == "dataframe"
    assert group.attrs["_index"] == "_index"
    assert list(group.attrs["column-order"]) == ["name", "n", "cat", "score"]
    assert group["_index"][:].tolist() == ["0", "1", "2", "3"]
    assert group["n"].attrs["encoding-type"] == "nullable-integer"
    assert group["n/mask"][:].tolist() == [False, True, False, False]
    assert group["cat"].attrs["encoding-type"] == "categorical"
    assert group["cat/codes"][:].tolist() == [0, 1, -1, 0]
    assert group["cat/categories"][:].tolist() == ["x", "y"]

    back = zarrow.read_table(out)
    assert back.column_names == ["_index", "dim_0", "name", "n", "cat", "score"]
    assert back["name"].to_pylist() == table["name"].to_pylist()
    assert back["n"].to_pylist() == table["n"].to_pylist()
    assert back["cat"].cast(pa.string()).to_pylist() == ["x", "y", None, "x"]

    anndata = pytest.importorskip("anndata")
    df = anndata.io.read_elem(zarr.open_group(out, mode="r"))
    assert list(df.columns) == ["name", "n", "cat", "score"]
    assert list(df.index) == ["0", "1", "2", "3"]
    assert str(df["n"].dtype) == "Int32" and df["n"].isna().tolist() == [False, True, False, False]
    assert str(df["cat"].dtype) == "category"


def test_icechunk_write_returns_the_snapshot_and_older_snapshots_keep_their_table(tmp_path):
    # A plain store: the row count, with no snapshot.
    plain = zarrow.write_table(str(tmp_path / "p.zarr"), pa.table({"a": [1, 2]}))
    assert plain == 2 and isinstance(plain, int) and plain.snapshot_id is None
    repo = f"icechunk+file://{tmp_path}/r.icechunk"
    with pytest.raises(zarrow.ZarrowError, match="create_repository"):
        zarrow.write_table(f"{repo}@main/t", pa.table({"a": [1]}))
    first = zarrow.write_table(f"{repo}@main/t", pa.table({"a": [1, 2, 3]}), create_repository=True)
    assert first == 3 and isinstance(first.snapshot_id, str)
    second = zarrow.write_table(
        f"{repo}@main/t", pa.table({"a": [7]}), overwrite=True, commit_message="replace t"
    )
    assert second.snapshot_id not in (None, first.snapshot_id)
    assert zarrow.read_table(f"{repo}@main/t")["a"].to_pylist() == [7]
    assert zarrow.read_table(f"{repo}@{first.snapshot_id}/t")["a"].to_pylist() == [1, 2, 3]
