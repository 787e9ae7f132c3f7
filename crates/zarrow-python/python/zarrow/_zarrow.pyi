"""Type stubs of zarrow's native module."""

from typing import Any

__version__: str

class ZarrowError(Exception):
    """Every error zarrow raises."""

class NotFoundError(ZarrowError):
    """No zarr array or group at a location."""

class UnsupportedError(ZarrowError):
    """A data type, codec or extension zarrow does not read."""

class MetadataError(ZarrowError):
    """Metadata that is not valid zarr metadata."""

class CorruptChunkError(ZarrowError):
    """A chunk whose bytes could not be decoded (the message names the array and chunk)."""

class StoreError(ZarrowError):
    """The object store failed (the message names the path)."""

class ZarrTable:
    """A zarr array or group as a table for datafusion-python."""

    def __init__(
        self,
        location: str,
        *,
        string_type: str | None = None,
        fill_as_null: bool | None = None,
        decode_cf: bool | None = None,
        arrays: list[str] | None = None,
        storage_options: dict[str, str] | None = None,
        ref: str | None = None,
    ) -> None: ...
    @property
    def location(self) -> str: ...
    @property
    def columns(self) -> list[str]: ...
    @property
    def left_out(self) -> list[tuple[str, str]]: ...
    @property
    def num_rows(self) -> int: ...
    def __arrow_c_schema__(self) -> object: ...
    def __datafusion_table_provider__(self, session: Any) -> object: ...

class ZarrTableFactory:
    """``STORED AS ZARR`` for ``SessionContext.register_table_factory("ZARR", …)``."""

    def __init__(self, *, storage_options: dict[str, str] | None = None) -> None: ...
    def __datafusion_table_provider_factory__(self, codec: Any) -> object: ...

class ZarrBatch:
    """One record batch (``pyarrow.record_batch(batch)``)."""

    @property
    def num_rows(self) -> int: ...
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]: ...

class ZarrStream:
    """A table being read, batch by batch (the Arrow PyCapsule stream interface; read once).

    Iterating it yields :class:`ZarrBatch` es and raises zarrow's exceptions; a consumer of
    ``__arrow_c_stream__`` sees errors as its own.
    """

    def __iter__(self) -> ZarrStream: ...
    def __next__(self) -> ZarrBatch: ...

    @property
    def columns(self) -> list[str]: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...
    def read_all(self) -> list[ZarrBatch]:
        """Every batch at once (a stream nothing was read from): chunks read in parallel."""

def scan(
    location: str,
    columns: list[str] | None = None,
    *,
    batch_size: int | None = None,
    limit: int | None = None,
    string_type: str | None = None,
    fill_as_null: bool | None = None,
    decode_cf: bool | None = None,
    arrays: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    ref: str | None = None,
) -> ZarrStream:
    """Read the table at ``location`` as a stream of Arrow record batches."""

def tree(location: str, *, storage_options: dict[str, str] | None = None) -> str:
    """The hierarchy at ``location`` as text."""

def write_array(
    location: str,
    array: Any,
    *,
    shape: list[int] | None = None,
    chunks: list[int] | None = None,
    encoding: str = "vlen-utf8",
    compression: str | None = None,
    dimension_names: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
) -> None:
    """Write an Arrow array as a zarr v3 array."""

def write_table(
    location: str,
    data: Any,
    *,
    storage_options: dict[str, str] | None = None,
    **options: str | int | bool,
) -> int:
    """Write Arrow data (``__arrow_c_stream__``) as a zarr table, streamed; the row count.

    Options: chunk_rows, shard_rows, compression ('zstd', 'zstd(5)', 'gzip', 'none'),
    string_encoding ('vlen-utf8', 'arrow_vlen'), zarr_format (2 or 3), layout, dimension,
    overwrite.
    """
