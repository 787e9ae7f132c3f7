"""zarrow: zarr arrays and groups as Apache Arrow data and Apache DataFusion tables.

- :class:`ZarrTable` — a table for datafusion-python (``ctx.register_table``), with
  projection, filter and limit pushdown across the FFI boundary.
- :class:`ZarrTableFactory` and :func:`session_context` — ``CREATE EXTERNAL TABLE … STORED
  AS ZARR LOCATION …``.
- :func:`scan` — a stream of Arrow record batches (the Arrow PyCapsule interface) for
  pyarrow, polars, DuckDB and pandas; :func:`read_table` — a ``pyarrow.Table``.
- :func:`dataset` — a ``pyarrow.dataset.Dataset`` DuckDB and pyarrow push projections and
  filters into.
- :func:`scan_polars` — a polars ``LazyFrame`` with projection, predicate and limit
  pushdown.
- :func:`schema`, :func:`tree` — what a location holds; :func:`write_array`,
  :func:`write_table` (any Arrow stream → a zarr table, streamed).

Locations are local paths, ``file://``, ``s3://``, ``gs://``, ``az://`` and ``http(s)://``
URLs; ``storage_options`` (a dict: ``aws_access_key_id``, ``endpoint_url``, ``region``,
``allow_http``, … or fsspec's ``key``/``secret``/``endpoint``) give credentials and endpoints,
over those of the environment, and the remote timeouts (``timeout``, ``connect_timeout``,
``retry_timeout`` as ``"500ms"``/``"5s"``; ``max_retries``). Every read releases the GIL. Errors are :class:`ZarrowError`
and its subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._zarrow import (
    ColumnNotFoundError,
    CorruptChunkError,
    MetadataError,
    NotATableError,
    NotFoundError,
    OptionError,
    StoreError,
    UnsupportedError,
    ZarrowError,
    ZarrBatch,
    ZarrStream,
    ZarrTable,
    ZarrTableFactory,
    __version__,
    _write_table,
    scan,
    tree,
    write_array,
)

from ._dataset import ZarrDataset, dataset
from ._polars import scan_polars

if TYPE_CHECKING:  # pragma: no cover
    import datafusion
    import pyarrow

__all__ = [
    "ColumnNotFoundError",
    "CorruptChunkError",
    "MetadataError",
    "NotATableError",
    "NotFoundError",
    "OptionError",
    "StoreError",
    "UnsupportedError",
    "ZarrBatch",
    "ZarrDataset",
    "ZarrStream",
    "ZarrTable",
    "ZarrTableFactory",
    "ZarrowError",
    "__version__",
    "dataset",
    "read_table",
    "scan",
    "scan_polars",
    "schema",
    "session_context",
    "tree",
    "WriteResult",
    "write_array",
    "write_table",
]


class WriteResult(int):
    """What :func:`write_table` returns: the number of rows written (an ``int``),
    with ``snapshot_id``, the id of the snapshot an Icechunk commit made (``None`` for any other
    store).

    Example::

        >>> result = zarrow.write_table("obs.zarr", pyarrow.table({"a": [1, 2]}))
        >>> result == 2, result.snapshot_id
        (True, None)
    """

    snapshot_id: str | None

    def __new__(cls, rows: int, snapshot_id: str | None = None) -> "WriteResult":
        result = super().__new__(cls, rows)
        result.snapshot_id = snapshot_id
        return result


def write_table(
    location: str,
    data: Any,
    *,
    storage_options: dict[str, str] | None = None,
    **options: str | int | bool,
) -> WriteResult:
    """Write Arrow data (``__arrow_c_stream__``) as a zarr table, streamed.

    Options: chunk_rows, shard_rows, compression ('zstd', 'zstd(5)', 'gzip', 'none'),
    string_encoding ('vlen-utf8', 'arrow_vlen'), zarr_format (2 or 3), layout ('xarray', or
    'anndata': an AnnData dataframe), index (layout 'anndata': the index column), dimension,
    overwrite; for Icechunk locations (``icechunk+file://repo@branch/path``: one commit)
    create_repository and commit_message. Returns the row count, a :class:`WriteResult`
    (an ``int``) whose ``snapshot_id`` is the new Icechunk snapshot's id, or ``None``.

    Example::

        >>> zarrow.write_table("obs.zarr", pyarrow.table({"a": [1, 2]}), chunk_rows=1_000_000)
        2
        >>> zarrow.write_table("icechunk+file:///data/r.icechunk@main/obs", table,
        ...                    create_repository=True).snapshot_id
        '5XN2Q2SH1E4M3ZJ0A6CG'
    """
    rows, snapshot_id = _write_table(location, data, storage_options=storage_options, **options)
    return WriteResult(rows, snapshot_id)


def read_table(location: str, columns: list[str] | None = None, **options: Any) -> "pyarrow.Table":
    """Read the table at ``location`` (an array or a group) into a ``pyarrow.Table``.

    ``columns`` picks columns by name; ``options`` are those of :func:`scan`. The chunks are
    read in parallel (a run of them per core, of nearly equal stored bytes, the GIL released),
    a batch per chunk unless ``batch_size`` says otherwise. The table's buffers are zarrow's:
    nothing is copied on the way to pyarrow (``dictionary`` columns are given one dictionary
    each: their keys are remapped). ``filter`` (a SQL predicate) keeps the matching
    rows, skipping the chunks that cannot hold any.

    Example::

        >>> table = zarrow.read_table("data/pbmc_sample.zarr/obs", ["cell_type"],
        ...                           filter="dim_0 < 100")
        >>> table.to_pandas().value_counts()
    """
    import pyarrow as pa

    stream = scan(location, columns, **options)
    batches = [pa.record_batch(b) for b in stream.read_all()]
    table = pa.Table.from_batches(batches, schema=pa.schema(stream))
    # Each batch of a `dictionary` column has its own dictionary; a table's columns get one
    # (pyarrow's group_by and joins need it).
    return table.unify_dictionaries() if options.get("dictionary") else table


def schema(location: str, **options: Any) -> "pyarrow.Schema":
    """The Arrow schema of the table at ``location``.

    ``options``: ``string_type``, ``fill_as_null``, ``decode_cf``, ``arrays``, ``dictionary``,
    ``storage_options``, ``ref``, ``range_split_bytes``, ``coalesce_bytes``.
    :attr:`ZarrTable.left_out` lists the arrays that are not
    columns. Nothing of the table's data is read.

    Example::

        >>> zarrow.schema("data/pbmc_sample.zarr/obs").names
    """
    import pyarrow as pa

    return pa.schema(ZarrTable(location, **options))


def session_context(
    ctx: "datafusion.SessionContext | None" = None,
    *,
    storage_options: dict[str, str] | None = None,
) -> "datafusion.SessionContext":
    """A datafusion-python ``SessionContext`` (``ctx`` or a new one) that knows zarr:
    ``CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '…' [OPTIONS (…)]`` creates zarr
    tables (``storage_options`` for the stores they open); ``ctx.register_table(name,
    ZarrTable(location))`` adds one by location.

    Example::

        >>> ctx = zarrow.session_context()
        >>> ctx.sql("CREATE EXTERNAL TABLE obs STORED AS ZARR LOCATION 'data/pbmc_sample.zarr/obs'")
        >>> ctx.sql("SELECT count(*) FROM obs").show()
    """
    if ctx is None:
        from datafusion import SessionContext

        ctx = SessionContext()
    ctx.register_table_factory("ZARR", ZarrTableFactory(storage_options=storage_options))
    return ctx
