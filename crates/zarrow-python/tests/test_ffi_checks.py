"""What crosses the FFI boundary is checked before zarrow reads it: capsules by name, released
Arrow structs, and the datafusion-python version of a session (a mismatch with another major
version is tested in a venv of its own by `ci/datafusion_mismatch.py`)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import zarrow
from conftest import SAMPLE


class Pair:
    """An object with `__arrow_c_array__` returning whatever it was given."""

    def __init__(self, pair):
        self.pair = pair

    def __arrow_c_array__(self, requested_schema=None):
        return self.pair


def test_a_capsule_pair_used_twice_is_refused_not_read(tmp_path):
    twice = Pair(pa.array(["a", "bb", None]).__arrow_c_array__())
    zarrow.write_array(str(tmp_path / "first.zarr"), twice)
    with pytest.raises(zarrow.ZarrowError, match="already released"):
        zarrow.write_array(str(tmp_path / "second.zarr"), twice)
    assert not (tmp_path / "second.zarr").exists()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda s, a: (a, s), "not named 'arrow_schema'"),
        (lambda s, a: (s,), "a tuple of 1 items"),
        (lambda s, a: [s, a], "not a tuple"),
        (lambda s, a: (s, "array"), "not a capsule"),
    ],
)
def test_wrong_capsules_are_errors(tmp_path, make, message):
    schema, array = pa.array([1, 2, 3]).__arrow_c_array__()
    with pytest.raises(zarrow.ZarrowError, match=message):
        zarrow.write_array(str(tmp_path / "x.zarr"), Pair(make(schema, array)))


def test_a_session_of_the_right_datafusion_is_accepted():
    from datafusion import SessionContext

    ctx = SessionContext()
    ctx.register_table("t", zarrow.ZarrTable(str(SAMPLE / "obs")))
    assert ctx.sql("SELECT count(*) AS n FROM t").to_pydict()["n"][0] > 0


def test_something_that_is_no_session_is_an_error():
    table = zarrow.ZarrTable(str(SAMPLE / "obs"))
    with pytest.raises(zarrow.ZarrowError, match="SessionContext"):
        table.__datafusion_table_provider__(object())
