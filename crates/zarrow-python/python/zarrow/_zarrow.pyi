"""Type stubs of zarrow's native module."""

from typing import Any, final

__version__: str

class ZarrowError(Exception):
    """Every error zarrow raises. ``array``, ``chunk`` and ``location`` say where it happened
    (the array or node, the chunk's store key, the object or document read); None where the
    error names none."""

    array: str | None
    chunk: str | None
    location: str | None

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

class ColumnNotFoundError(ZarrowError, KeyError):
    """A column the table does not have (the message suggests the close names)."""

class OptionError(ZarrowError, ValueError):
    """An option or storage_options key zarrow does not know (the message lists the valid ones)."""

class NotATableError(ZarrowError):
    """A group that cannot be read as one table (the message lists its children)."""

@final
class ZarrTable:
    """A zarr array or group as a table for datafusion-python, with projection, filter and
    limit pushdown across the FFI boundary.

    Example::

        >>> import datafusion, zarrow
        >>> ctx = datafusion.SessionContext()
        >>> ctx.register_table("obs", zarrow.ZarrTable("data/pbmc_sample.zarr/obs"))
        >>> ctx.sql("SELECT cell_type, count(*) FROM obs GROUP BY cell_type").show()
    """

    def __new__(
        cls,
        location: str,
        *,
        string_type: str | None = None,
        fill_as_null: bool | None = None,
        decode_cf: bool | None = None,
        arrays: list[str] | None = None,
        dictionary: list[str] | None = None,
        storage_options: dict[str, str] | None = None,
        ref: str | None = None,
        range_split_bytes: int | None = None,
        coalesce_bytes: int | None = None,
    ) -> ZarrTable: ...
    @property
    def location(self) -> str:
        """The location the table was opened from."""
    @property
    def columns(self) -> list[str]:
        """The column names."""
    @property
    def left_out(self) -> list[tuple[str, str]]:
        """Child arrays and groups that are not columns, with the reason."""
    @property
    def num_rows(self) -> int:
        """The number of rows."""
    def __arrow_c_schema__(self) -> object: ...
    def __datafusion_table_provider__(self, session: Any) -> object: ...

@final
class ZarrTableFactory:
    """``CREATE EXTERNAL TABLE … STORED AS ZARR`` for datafusion-python.

    Example::

        >>> ctx.register_table_factory("ZARR", zarrow.ZarrTableFactory())
        >>> ctx.sql("CREATE EXTERNAL TABLE obs STORED AS ZARR LOCATION 'data/pbmc_sample.zarr/obs'")
    """

    def __new__(cls, *, storage_options: dict[str, str] | None = None) -> ZarrTableFactory: ...
    def __datafusion_table_provider_factory__(self, codec: Any) -> object: ...

@final
class ZarrBatch:
    """One record batch, for ``pyarrow.record_batch(batch)`` (the Arrow PyCapsule interface).

    Example::

        >>> batch = next(iter(zarrow.scan("data/pbmc_sample.zarr/obs")))
        >>> pyarrow.record_batch(batch).num_rows
    """

    @property
    def num_rows(self) -> int:
        """The number of rows."""
    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]: ...

@final
class ZarrStream:
    """A table being read, batch by batch (the Arrow PyCapsule stream interface; read once).

    Iterating it yields :class:`ZarrBatch` es and raises zarrow's exceptions; a consumer of
    ``__arrow_c_stream__`` (pyarrow, polars, DuckDB) sees errors as its own.

    Example::

        >>> stream = zarrow.scan("data/pbmc_sample.zarr/obs", filter="dim_0 < 100")
        >>> table = pyarrow.RecordBatchReader.from_stream(stream).read_all()
        >>> stream.metrics["chunks_pruned"]
    """

    def __iter__(self) -> ZarrStream: ...
    def __next__(self) -> ZarrBatch: ...
    @property
    def columns(self) -> list[str]:
        """The column names."""
    @property
    def metrics(self) -> dict[str, float]:
        """What the scan has done so far: ``chunks_total``, ``chunks_kept``, ``chunks_pruned``,
        ``chunks_read``, ``rows_read``, ``rows_out``, ``requests``, ``bytes_fetched``,
        ``fetch_seconds``, ``decode_seconds``."""
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...
    def read_all(self) -> list[ZarrBatch]:
        """Every batch at once (a stream nothing was read from): chunks read in parallel."""

def scan(
    location: str,
    columns: list[str] | None = None,
    *,
    filter: str | None = None,
    prune: str | None = None,
    batch_size: int | None = None,
    limit: int | None = None,
    string_type: str | None = None,
    fill_as_null: bool | None = None,
    decode_cf: bool | None = None,
    arrays: list[str] | None = None,
    dictionary: list[str] | None = None,
    storage_options: dict[str, str] | None = None,
    ref: str | None = None,
    range_split_bytes: int | None = None,
    coalesce_bytes: int | None = None,
) -> ZarrStream:
    """Read the table at ``location`` as a stream of Arrow record batches.

    ``filter`` is a SQL predicate (DataFusion's SQL) the rows handed out satisfy; its parts on
    dimension, index and coordinate columns skip the chunks that cannot match, as a SQL query's
    ``WHERE`` does. ``prune`` only skips chunks (for a caller that filters itself).
    ``limit`` counts rows after the filter. ``range_split_bytes`` (default 8 MiB; 0: never)
    splits a larger chunk read into ranged GETs in flight at once, ``coalesce_bytes`` (default
    1 MiB) reads ranges of one object that close to each other (a shard's inner chunks) by one
    GET.

    Example::

        >>> import duckdb, zarrow
        >>> stream = zarrow.scan("data/pbmc_sample.zarr/obs", ["cell_type"], filter="dim_0 < 100")
        >>> duckdb.sql("SELECT cell_type, count(*) FROM stream GROUP BY ALL").fetchall()
    """

def tree(location: str, *, storage_options: dict[str, str] | None = None) -> str:
    """The hierarchy at ``location`` as text: groups, arrays, shapes, chunks, codecs.

    Example::

        >>> print(zarrow.tree("data/pbmc_sample.zarr"))
    """

def write_array(
    location: str,
    array: Any,
    *,
    shape: list[int] | None = None,
    chunks: list[int] | None = None,
    string_encoding: str | None = None,
    compression: str | None = None,
    dimension_names: list[str] | None = None,
    overwrite: bool = False,
    storage_options: dict[str, str] | None = None,
    encoding: str | None = None,
) -> None:
    """Write an Arrow array (anything with ``__arrow_c_array__``) as a zarr v3 array.

    ``string_encoding`` ('vlen-utf8', 'arrow_vlen', 'arrow_vlen_large') and ``compression``
    ('none', 'zstd', 'zstd(5)', 'gzip', 'gzip(9)') as ``write_table``'s options; ``encoding`` is
    the deprecated old name of ``string_encoding``. A location that holds anything is refused
    unless ``overwrite``.

    Example::

        >>> zarrow.write_array("labels.zarr", pyarrow.array(["a", "b"]), compression="zstd")
    """

def _write_table(
    location: str,
    data: Any,
    *,
    storage_options: dict[str, str] | None = None,
    **options: str | int | bool,
) -> tuple[int, str | None]:
    """``zarrow.write_table``'s work: the rows written and the Icechunk snapshot committed."""
