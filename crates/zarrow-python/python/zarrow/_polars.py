"""``scan_polars``: a zarr table as a polars ``LazyFrame``, through polars' IO-plugin API
(``polars.io.plugins.register_io_source``).

The schema is read up front (the table is opened, nothing of it is read). At each collect
polars hands the source its projection, predicate, row limit and batch size: the projection
becomes :func:`zarrow.scan`'s ``columns``, the predicate is translated to SQL
(``_polars_predicate``) and given as ``filter=`` — chunks it cannot match are never fetched,
and zarrow drops the rows it rules out as it cuts each batch (nothing of it where zarrow
cannot evaluate it) — and polars' own predicate is applied to the rows left; the row limit
stops the scan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from . import _polars_predicate
from ._prune import scan_pruned
from ._zarrow import ZarrowError, scan

if TYPE_CHECKING:  # pragma: no cover
    import polars

__all__ = ["scan_polars"]


# When polars filters each batch: at most this many rows a batch, and this many bytes of the
# columns read (see `filtered_batch_rows`).
FILTERED_BATCH_ROWS = 1 << 20
FILTERED_BATCH_BYTES = 64 << 20


def scan_polars(
    location: str,
    *,
    columns: list[str] | None = None,
    on_scan: Callable[[dict[str, Any]], None] | None = None,
    **options: Any,
) -> "polars.LazyFrame":
    """The table at ``location`` (an array, a group, an xarray dataset, an AnnData dataframe
    or sparse matrix) as a polars ``LazyFrame`` that reads only what the query needs.

    - ``columns``: the columns the frame has (default: all).
    - ``options``: those of :func:`zarrow.scan` — ``string_type`` (default ``"view"``:
      polars' own string layout, handed over without a copy), ``dictionary`` (string
      columns as ``Categorical``, for low-cardinality columns),
      ``fill_as_null``, ``decode_cf``, ``arrays``, ``storage_options``, ``ref``, ``range_split_bytes``,
      ``coalesce_bytes``, ``batch_size``, and ``filter``
      (a SQL predicate zarrow applies before polars sees a row).
    - ``on_scan``: called once per scan the query runs, when it ends, with what was pushed
      down (``columns``, ``prune`` — the SQL the polars predicate became, or None —,
      ``filter`` — that SQL if zarrow also filtered rows with it, else None —, ``n_rows``,
      ``batch_size``) and :attr:`zarrow.ZarrStream.metrics` (``chunks_read``,
      ``chunks_pruned``, ``bytes_fetched``, …).

    Pushed down: the projection (only the selected arrays' chunks are fetched), the
    predicate's comparisons with literals, ``is_between``, ``is_in``, ``is_null``,
    ``str.contains`` (a literal), ``str.starts_with``/``ends_with`` and ``&``/``|``/``~``
    (as SQL: on dimension, index and coordinate columns chunks that cannot match are
    skipped, and on any column zarrow drops the rows it rules out before polars gets them;
    polars still filters every row it gets, and what cannot be translated is left to it),
    ``head``/``limit`` (the scan stops), and the batch size (polars' hint; with a predicate
    and no ``batch_size``, up to 1,048,576 rows in 64 MiB of the columns read, as polars'
    filter costs per batch).
    Works with ``collect(engine="streaming")``.

    Example::

        >>> import polars as pl, zarrow
        >>> lf = zarrow.scan_polars("data/pbmc_sample.zarr/obs")
        >>> lf.filter(pl.col("dim_0") < 100).group_by("cell_type").len().collect()
    """
    import polars as pl
    from polars.io.plugins import register_io_source

    options.setdefault("string_type", "view")
    for reserved in ("columns", "limit", "prune"):
        if reserved in options:
            raise ZarrowError(
                f"scan_polars: '{reserved}' is not an option here; use "
                f"{'columns=' if reserved == 'columns' else 'the LazyFrame (select/head/filter)'}"
            )
    planned = scan(location, columns, **options)
    empty = _empty(planned)
    schema = pl.DataFrame(empty).schema
    chosen = list(schema.keys())
    own_batch_size = options.pop("batch_size", None)

    def source(
        with_columns: list[str] | None,
        predicate: "polars.Expr | None",
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator["polars.DataFrame"]:
        wanted = list(with_columns) if with_columns is not None else chosen
        prune = _polars_predicate.to_sql(predicate) if predicate is not None else None
        if own_batch_size:
            size = own_batch_size
        elif predicate is not None:
            size = filtered_batch_rows(empty.schema, wanted, batch_size)
        else:
            size = batch_size
        stream = scan_pruned(location, wanted, prune, size,
                             n_rows if predicate is None else None, options, rows=True)
        left = n_rows
        try:
            for batch in stream:
                if left is not None and left <= 0:
                    break
                frame = pl.DataFrame(_record_batch(batch))
                if predicate is not None:
                    frame = frame.filter(predicate)
                if left is not None:
                    frame = frame.head(left)
                    left -= frame.height
                if frame.height:
                    yield frame
        finally:
            if on_scan is not None:
                on_scan({"columns": wanted, "prune": stream.prune,
                         "filter": stream.prune if stream.filtered else None,
                         "n_rows": n_rows, "batch_size": size, **stream.metrics})

    kwargs: dict[str, Any] = {"schema": schema}
    import inspect

    if "explain_name" in inspect.signature(register_io_source).parameters:
        kwargs.update(explain_name="zarrow", explain_detail=location)
    return register_io_source(source, **kwargs)


def filtered_batch_rows(schema: Any, columns: list[str], hint: int | None) -> int:
    """The rows of a batch polars filters: its filter costs about a millisecond a call
    whatever the rows (a filtered read of 10M rows took a third longer in polars' 100,000-row
    batches than in 2^20-row ones), so as many as fit in `FILTERED_BATCH_BYTES` of the
    `columns` read (of the pyarrow `schema`; a value of no fixed width counted as 32 bytes),
    at most `FILTERED_BATCH_ROWS` and never fewer than polars' `hint`."""

    def width(field: Any) -> int:
        try:
            return max(field.type.bit_width // 8, 1)
        except ValueError:  # strings, lists, …
            return 32

    row = sum(width(schema.field(c)) for c in columns) or 1
    return max(hint or 0, min(FILTERED_BATCH_ROWS, FILTERED_BATCH_BYTES // row))


def _empty(stream: Any) -> Any:
    import pyarrow as pa

    return pa.schema(stream).empty_table()


def _record_batch(batch: Any) -> Any:
    import pyarrow as pa

    return pa.record_batch(batch)
