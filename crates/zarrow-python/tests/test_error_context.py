"""Exceptions say where: `.array`, `.chunk` and `.location` (None when the error names none)."""

import pyarrow as pa
import pytest

import zarrow


def test_exceptions_name_the_array_chunk_and_location(tmp_path):
    location = tmp_path / "s.zarr"
    zarrow.write_array(str(location), pa.array(["abc"] * 20), chunks=[10], compression="zstd")
    (location / "c" / "1").write_bytes(b"not zstd at all")
    with pytest.raises(zarrow.CorruptChunkError) as corrupt:
        zarrow.read_table(str(location))
    assert corrupt.value.chunk == "c/1"
    assert corrupt.value.array.endswith("s.zarr"), corrupt.value.array
    assert corrupt.value.location is None

    with pytest.raises(zarrow.NotFoundError) as missing:
        zarrow.read_table(str(tmp_path / "missing.zarr"))
    assert missing.value.array.endswith("missing.zarr")
    assert missing.value.chunk is None

    (location / "zarr.json").write_text("{not json")
    with pytest.raises(zarrow.MetadataError) as bad:
        zarrow.read_table(str(location))
    assert bad.value.location == "zarr.json"
    assert bad.value.array.endswith("s.zarr")
    assert bad.value.chunk is None


def test_an_error_that_names_no_place_says_none(tmp_path):
    location = tmp_path / "s.zarr"
    zarrow.write_array(str(location), pa.array(["abc"] * 20), chunks=[10])
    with pytest.raises(zarrow.ZarrowError) as e:
        zarrow.read_table(str(location), string_type="no such type")
    assert (e.value.array, e.value.chunk, e.value.location) == (None, None, None)
