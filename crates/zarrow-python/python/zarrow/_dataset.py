"""``zarrow.dataset``: a zarr table as a ``pyarrow.dataset.Dataset``, so DuckDB (and pyarrow)
push projections and filters into the zarr scan.

``pyarrow.dataset.Dataset`` is a Cython class; a Python subclass of it is accepted by DuckDB's
replacement scans and by ``isinstance`` checks, and what they call is ``scanner(columns=...,
filter=...)``. Here that reads the needed columns through :func:`zarrow.scan` — pruned by the
filter's top-level conjuncts that say ``column <op> number/string`` (the SQL the filter gives
to zarrow's pruner) — and hands the batches to ``pyarrow.dataset.Scanner.from_batches``, which
applies the exact filter and projection. Methods that need a C++ dataset (fragments, joins,
``replace_schema``) raise :class:`zarrow.ZarrowError` instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from ._prune import scan_pruned
from ._zarrow import ZarrowError, scan

__all__ = ["ZarrDataset", "dataset"]

# A comparison as pyarrow prints it: `(name op literal)`; a literal is a number or a string
# without quotes or backslashes inside.
_COMPARISON = re.compile(
    r'^\(?([A-Za-z_][A-Za-z0-9_]*) (==|!=|<|<=|>|>=) (-?\d+(?:\.\d+)?(?:e-?\d+)?|"[^"\\\\]*")\)?$'
)
_SQL_OPS = {"==": "=", "!=": "<>"}


def dataset(location: str, *, on_scan: Callable[[dict[str, Any]], None] | None = None,
            **options: Any) -> "ZarrDataset":
    """The table at ``location`` as a ``pyarrow.dataset.Dataset``: DuckDB queries it with
    projection and filter pushdown, pyarrow scans it (``to_table(columns=..., filter=...)``).

    ``options`` are those of :func:`zarrow.scan` (``string_type``, ``storage_options``,
    ``ref``, ``batch_size``, …). ``on_scan`` is called when each scan ends with what was
    pushed down (``columns``, ``prune``) and :attr:`zarrow.ZarrStream.metrics`.

    Example::

        >>> import duckdb, zarrow
        >>> obs = zarrow.dataset("data/pbmc_sample.zarr/obs")
        >>> duckdb.sql("SELECT cell_type, count(*) FROM obs WHERE dim_0 < 100 GROUP BY ALL")
    """
    return ZarrDataset(location, on_scan=on_scan, **options)


class ZarrDataset(ds.Dataset):
    """A zarr table as a ``pyarrow.dataset.Dataset`` (see :func:`zarrow.dataset`).

    Example::

        >>> zarrow.dataset("data/pbmc_sample.zarr/obs").to_table(columns=["cell_type"])
    """

    def __init__(self, location: str, *, on_scan: Callable[[dict[str, Any]], None] | None = None,
                 **options: Any) -> None:
        self._location = location
        self._options = options
        self._on_scan = on_scan
        self._schema = pa.schema(scan(location, **options))

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema (nothing of the data is read)."""
        return self._schema

    def scanner(self, columns: list[str] | None = None, filter: Any = None,
                **kwargs: Any) -> ds.Scanner:
        """A ``pyarrow.dataset.Scanner`` of ``columns`` (default: all) and the rows ``filter``
        (a ``pyarrow.compute.Expression``) keeps; chunks the filter rules out are not read."""
        wanted = list(columns) if columns is not None else self._schema.names
        text = str(filter) if filter is not None else ""
        # The filter's columns too (a name in its text: reading one too many costs nothing
        # wrong).
        needed = wanted + [n for n in self._schema.names
                           if n not in wanted and re.search(rf"\b{re.escape(n)}\b", text)]
        prune = _prune_sql(text, self._schema.names) if filter is not None else None
        options = dict(self._options)
        if "batch_size" in kwargs:
            options["batch_size"] = kwargs.pop("batch_size")
        batch_size = options.pop("batch_size", None)
        stream = scan_pruned(self._location, needed, prune, batch_size, None, options)
        prune = stream.prune
        reader = pa.RecordBatchReader.from_batches(pa.schema(stream.stream),
                                                   self._batches(stream, needed, prune))
        return ds.Scanner.from_batches(reader, columns=wanted, filter=filter, **kwargs)

    def _batches(self, stream: Any, columns: list[str], prune: str | None
                 ) -> Iterator[pa.RecordBatch]:
        try:
            for batch in stream:
                yield pa.record_batch(batch)
        finally:
            if self._on_scan is not None:
                self._on_scan({"columns": columns, "prune": prune, **stream.metrics})

    def to_table(self, **kwargs: Any) -> pa.Table:
        """The rows as a ``pyarrow.Table`` (``columns=``, ``filter=`` as in :meth:`scanner`)."""
        return self.scanner(**kwargs).to_table()

    def to_batches(self, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """The rows as record batches (``columns=``, ``filter=`` as in :meth:`scanner`)."""
        return iter(self.scanner(**kwargs).to_batches())

    def head(self, num_rows: int, **kwargs: Any) -> pa.Table:
        """The first ``num_rows`` rows."""
        return self.scanner(**kwargs).head(num_rows)

    def count_rows(self, **kwargs: Any) -> int:
        """The number of rows (``filter=`` as in :meth:`scanner`)."""
        return int(self.scanner(**kwargs).count_rows())

    def take(self, indices: Any, **kwargs: Any) -> pa.Table:
        """The rows at ``indices``."""
        return self.scanner(**kwargs).take(indices)

    def _no(self, what: str) -> ZarrowError:
        return ZarrowError(f"{what} is not available on a zarr dataset ('{self._location}'): "
                           "read it with to_table() first")

    def filter(self, expression: Any) -> Any:
        raise self._no("Dataset.filter")

    def get_fragments(self, filter: Any = None) -> Any:
        raise self._no("Dataset.get_fragments")

    def replace_schema(self, schema: Any) -> Any:
        raise self._no("Dataset.replace_schema")

    def join(self, *args: Any, **kwargs: Any) -> Any:
        raise self._no("Dataset.join")

    def join_asof(self, *args: Any, **kwargs: Any) -> Any:
        raise self._no("Dataset.join_asof")

    def sort_by(self, sorting: Any, **kwargs: Any) -> Any:
        raise self._no("Dataset.sort_by")

    @property
    def partition_expression(self) -> Any:
        raise self._no("Dataset.partition_expression")

    def __repr__(self) -> str:
        return f"ZarrDataset('{self._location}', columns={self._schema.names})"


def _prune_sql(text: str, names: list[str]) -> str | None:
    """The top-level conjuncts of a printed pyarrow filter that compare a column with a
    literal, as SQL (dropping the others only weakens what prunes; pyarrow filters exactly)."""
    parts = []
    for conjunct in _split_and(text):
        m = _COMPARISON.match(conjunct.strip())
        if m and m.group(1) in names:
            name, op, literal = m.groups()
            if literal.startswith('"'):
                literal = "'" + literal[1:-1].replace("'", "''") + "'"
            parts.append(f'"{name}" {_SQL_OPS.get(op, op)} {literal}')
    return " AND ".join(parts) or None


def _split_and(text: str) -> list[str]:
    """`(a and b) and c` → [a, b, c] at the outermost level (parentheses balanced, strings
    skipped)."""
    text = text.strip()
    while text.startswith("(") and _depths(text)[-1][0] == 0 and " and " in text and all(
            d > 0 for d, _ in _depths(text)[:-1]):
        text = text[1:-1].strip()
    out, start = [], 0
    for i, (depth, quoted) in enumerate(_depths(text)):
        if depth == 0 and not quoted and text.startswith(" and ", i) and i >= start:
            out.append(text[start:i])
            start = i + 5
    out.append(text[start:])
    if len(out) == 1:
        return out
    return [p for part in out for p in _split_and(part)]


def _depths(text: str) -> list[tuple[int, bool]]:
    """For each character of `text`: the parenthesis depth after it, and whether it is inside
    a string literal."""
    out, depth, quoted = [], 0, False
    for c in text:
        if c == '"':
            quoted = not quoted
        elif not quoted and c == "(":
            depth += 1
        elif not quoted and c == ")":
            depth -= 1
        out.append((depth, quoted))
    return out
