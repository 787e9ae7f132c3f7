"""A :func:`zarrow.scan` pruned by a SQL predicate an engine derived from its own filter
(polars' in ``_polars``, pyarrow's in ``_dataset``), and the SQL it was pruned with. The
engine filters the rows itself; SQL zarrow cannot plan costs the pruning, never the query.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._zarrow import ZarrowError, scan

__all__ = ["PrunedStream", "scan_pruned"]


class PrunedStream:
    """A :class:`zarrow.ZarrStream` and the SQL it was pruned with."""

    def __init__(self, stream: Any, prune: str | None) -> None:
        self.stream, self.prune = stream, prune

    def __iter__(self) -> Iterator[Any]:
        return iter(self.stream)

    @property
    def metrics(self) -> dict[str, float]:
        return dict(self.stream.metrics)


def scan_pruned(location: str, columns: list[str], prune: str | None, batch_size: int | None,
                limit: int | None, options: dict[str, Any]) -> PrunedStream:
    """`scan` pruned by `prune`; without it if zarrow cannot use that SQL (a type DataFusion
    cannot compare, …): the engine's filter still applies, so that is never an error."""
    kwargs = dict(options, batch_size=batch_size, limit=limit)
    if prune is not None:
        try:
            return PrunedStream(scan(location, columns, prune=prune, **kwargs), prune)
        except ZarrowError as e:
            if "prune `" not in str(e):
                raise
    return PrunedStream(scan(location, columns, **kwargs), None)
