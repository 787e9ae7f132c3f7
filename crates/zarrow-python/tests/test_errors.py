"""A mistake in a call is one clear message, raised as the matching zarrow exception."""

from __future__ import annotations

import importlib.metadata

import pytest

import zarrow
from conftest import DATA

XARRAY = str(DATA / "xarray_v3.zarr")


def test_version_is_the_installed_package_version():
    assert zarrow.__version__ == importlib.metadata.version("zarrow")


def test_a_bad_path():
    with pytest.raises(zarrow.NotFoundError, match="no zarr array or group at"):
        zarrow.scan(str(DATA / "no-such.zarr"))


def test_a_directory_that_is_not_zarr(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    with pytest.raises(zarrow.NotFoundError) as info:
        zarrow.ZarrTable(str(tmp_path))
    message = str(info.value)
    assert "is a directory but not a zarr array or group" in message
    assert "It holds: notes.txt, sub/" in message


@pytest.mark.parametrize("read", [
    lambda: zarrow.scan(XARRAY, ["temprature"]),
    lambda: zarrow.read_table(XARRAY, columns=["time", "temprature"]),
    lambda: zarrow.scan_polars(XARRAY, columns=["temprature"]),
    lambda: zarrow.scan(XARRAY, filter="temprature > 10"),
    lambda: zarrow.read_table(XARRAY, filter="time > 0 AND temprature > 10"),
    lambda: zarrow.scan(XARRAY, prune="temprature > 10"),
])
def test_a_misspelled_column_suggests_the_close_name(read):
    with pytest.raises(zarrow.ColumnNotFoundError) as info:
        read()
    message = str(info.value)
    assert "has no column 'temprature'. Did you mean 'temperature'?" in message
    assert "Its columns: time, station, flag, station_name, temperature" in message
    assert isinstance(info.value, KeyError)  # `except KeyError` keeps working


@pytest.mark.parametrize("read, function", [
    (lambda: zarrow.scan(XARRAY, strng_type="view"), "scan"),
    (lambda: zarrow.ZarrTable(XARRAY, strng_type="view"), "ZarrTable"),
    (lambda: zarrow.read_table(XARRAY, strng_type="view"), "scan"),
    (lambda: zarrow.scan_polars(XARRAY, strng_type="view"), "scan"),
])
def test_an_unknown_option_lists_the_valid_ones(read, function):
    with pytest.raises(zarrow.OptionError) as info:
        read()
    message = str(info.value)
    assert f"{function}() has no option 'strng_type'. Did you mean 'string_type'?" in message
    assert "storage_options" in message and "decode_cf" in message


@pytest.mark.parametrize("read", [
    lambda **kw: zarrow.scan(XARRAY, **kw),
    lambda **kw: zarrow.ZarrTable(XARRAY, **kw),
])
def test_read_keywords_are_parsed_as_the_table_options(read):
    # One parser for SQL's OPTIONS and Python's keywords: its errors name the option.
    with pytest.raises(zarrow.ZarrowError, match="string_type"):
        read(string_type="latin1")
    with pytest.raises(zarrow.ZarrowError, match="`arrays` names no array"):
        read(arrays=[])
    with pytest.raises(zarrow.ZarrowError, match="'a,b' is not an array name"):
        read(arrays=["a,b"])
    # As the SQL table option: only Icechunk repositories have versions.
    with pytest.raises(zarrow.ZarrowError, match="only Icechunk repositories"):
        read(ref="v1")
    read(string_type="large_utf8", fill_as_null=True, arrays=["temperature"],
         range_split_bytes=0, coalesce_bytes=0)


def test_an_unknown_storage_options_key_lists_the_valid_ones():
    with pytest.raises(zarrow.OptionError) as info:
        zarrow.scan("s3://bucket/x.zarr", storage_options={"aws_acess_key_id": "x"})
    message = str(info.value)
    assert "storage_options key 'aws_acess_key_id'" in message
    assert "Did you mean 'aws_access_key_id'?" in message
    assert "Valid keys for s3://:" in message and "aws_secret_access_key" in message
    assert isinstance(info.value, ValueError)
    # Known spellings pass: object_store's, their aliases, fsspec's, zarrow's timeouts.
    for key in ("aws_access_key_id", "access_key_id", "AWS_REGION", "key", "endpoint_url",
                "timeout", "max_retries", "allow_http"):
        zarrow.scan(XARRAY, storage_options={key: "1"})


def test_a_group_of_groups_lists_its_children():
    group = DATA / "anndata_sparse_v3.zarr" / "obsp"
    for open_it in (zarrow.scan, zarrow.ZarrTable, zarrow.scan_polars):
        with pytest.raises(zarrow.NotATableError) as info:
            open_it(str(group))
        message = str(info.value)
        assert "is a group of groups, not a table" in message
        assert "(distances/)" in message and f"'{group}/distances'" in message
