"""A :func:`zarrow.scan` pruned by a SQL predicate an engine derived from its own filter
(polars' in ``_polars``, pyarrow's in ``_dataset``), and the SQL it was pruned with. The
engine filters the rows itself, after zarrow has dropped those the SQL rules out where asked;
SQL zarrow cannot plan costs the pruning, never the query.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._zarrow import ZarrowError, scan

__all__ = ["PrunedStream", "scan_pruned"]


class PrunedStream:
    """A :class:`zarrow.ZarrStream`, the SQL it was pruned with, and whether zarrow also
    dropped the rows that SQL rules out (``filtered``)."""

    def __init__(self, stream: Any, prune: str | None, filtered: bool = False) -> None:
        self.stream, self.prune, self.filtered = stream, prune, filtered

    def __iter__(self) -> Iterator[Any]:
        return iter(self.stream)

    @property
    def metrics(self) -> dict[str, float]:
        return dict(self.stream.metrics)


def scan_pruned(location: str, columns: list[str], prune: str | None, batch_size: int | None,
                limit: int | None, options: dict[str, Any], *,
                rows: bool = False) -> PrunedStream:
    """`scan` pruned by `prune`, and with `rows` its rows filtered by it too (in zarrow's
    Rust, before the engine's filter sees them: `prune` must hold for every row the engine
    keeps, and `limit` must not count rows the engine may still drop; a caller's own `filter`
    option is ANDed in). Without either if zarrow cannot use that SQL (a type DataFusion
    cannot compare, …; `filter=` and `prune=` parse alike, so one failing means both would):
    the engine's filter still applies, so that is never an error."""
    kwargs = dict(options, batch_size=batch_size, limit=limit)
    if prune is not None:
        own = kwargs.get("filter")
        how = "filter" if rows else "prune"
        sql = f"({own}) AND ({prune})" if rows and own is not None else prune
        try:
            stream = scan(location, columns, **dict(kwargs, **{how: sql}))
            return PrunedStream(stream, prune, filtered=rows)
        except ZarrowError as e:
            if f"{how} `" not in str(e):
                raise
    return PrunedStream(scan(location, columns, **kwargs), None)
