"""A polars predicate (``pl.Expr``) as a SQL predicate for chunk pruning and row filtering.

polars hands an IO source its predicate as an ``Expr``; its serialized form
(``expr.meta.serialize(format="json")``) is a tree this module walks. Comparisons, ``&``,
``|``, ``~``, ``is_between``, ``is_in``, ``is_null`` / ``is_not_null`` on columns and literals
become SQL, and ``str.contains`` (of a literal, or of a regex with no metacharacters),
``str.starts_with`` and ``str.ends_with`` (of a string literal) ``LIKE``. The SQL prunes
chunks and filters rows in zarrow (``_polars``), and polars still applies its own predicate
to every row it gets, so the SQL need only be a condition every row polars keeps meets: a
part that cannot be translated is replaced by ``TRUE`` where that only weakens the predicate
(under ``&`` and ``|``), and makes its whole negation untranslatable (under ``~``). Nothing
here raises: a predicate it does not understand gives ``None`` (no pruning).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["to_sql"]

_COMPARISONS = {"Eq": "=", "NotEq": "<>", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_LOGICAL = {"And": "AND", "LogicalAnd": "AND", "Or": "OR", "LogicalOr": "OR"}
_UNITS = {"Nanoseconds": "Nanosecond", "Microseconds": "Microsecond", "Milliseconds": "Millisecond"}
_TRUE = "TRUE"
# What makes a polars `str.contains` pattern more than the substring it spells.
_REGEX_META = frozenset("\\.^$|?*+()[]{}")


class _Untranslatable(Exception):
    """A part of the expression SQL cannot say (caught inside this module)."""


def to_sql(predicate: Any) -> str | None:
    """The SQL predicate that prunes what ``predicate`` (a ``polars.Expr``) may keep, or
    ``None`` when nothing of it can be said in SQL."""
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
        sql = _positive(tree)
    except Exception:  # an Expr polars cannot serialize, a tree of another polars version
        return None
    return None if sql == _TRUE else sql


def _positive(node: Any) -> str:
    """`node` where replacing what cannot be translated by TRUE only weakens it."""
    if isinstance(node, dict) and "BinaryExpr" in node:
        e = node["BinaryExpr"]
        op = _LOGICAL.get(e.get("op"))
        if op == "AND":
            parts = [p for p in (_positive(e["left"]), _positive(e["right"])) if p != _TRUE]
            return " AND ".join(parts) if parts else _TRUE
        if op == "OR":
            left, right = _positive(e["left"]), _positive(e["right"])
            return _TRUE if _TRUE in (left, right) else f"({left} OR {right})"
    try:
        return _exact(node)
    except _Untranslatable:
        return _TRUE


def _exact(node: Any) -> str:
    """`node` said exactly in SQL, or `_Untranslatable`."""
    if not isinstance(node, dict) or len(node) != 1:
        raise _Untranslatable
    kind, body = next(iter(node.items()))
    if kind == "BinaryExpr":
        op = body.get("op")
        if op in _COMPARISONS:
            return f"({_value(body['left'])} {_COMPARISONS[op]} {_value(body['right'])})"
        if op in _LOGICAL:
            return f"({_exact(body['left'])} {_LOGICAL[op]} {_exact(body['right'])})"
        raise _Untranslatable
    if kind == "Function":
        return _function(body)
    raise _Untranslatable


def _function(body: dict[str, Any]) -> str:
    function, inputs = body.get("function"), body.get("input", [])
    if isinstance(function, dict) and "StringExpr" in function:
        return _string_match(function["StringExpr"], inputs)
    if not (isinstance(function, dict) and "Boolean" in function):
        raise _Untranslatable
    boolean = function["Boolean"]
    name = boolean if isinstance(boolean, str) else next(iter(boolean), None)
    if name == "Not" and len(inputs) == 1:
        return f"(NOT {_exact(inputs[0])})"
    if name in ("IsNull", "IsNotNull") and len(inputs) == 1:
        return f"({_value(inputs[0])} IS {'NOT ' if name == 'IsNotNull' else ''}NULL)"
    if name == "IsBetween" and len(inputs) == 3:
        closed = boolean["IsBetween"].get("closed", "Both")
        low = ">=" if closed in ("Both", "Left") else ">"
        high = "<=" if closed in ("Both", "Right") else "<"
        x = _value(inputs[0])
        return f"({x} {low} {_value(inputs[1])} AND {x} {high} {_value(inputs[2])})"
    if name == "IsIn" and len(inputs) == 2:
        values = _list(inputs[1])
        if not values:
            return "FALSE"
        if any(v is None for v in values):
            raise _Untranslatable  # polars' null matching differs from SQL's IN
        return f"({_value(inputs[0])} IN ({', '.join(_literal(v) for v in values)}))"
    raise _Untranslatable


def _string_match(kind: Any, inputs: list[Any]) -> str:
    """A column's ``str.contains`` / ``starts_with`` / ``ends_with`` of a string literal as
    ``LIKE`` (``%``, ``_`` and the escape ``\\`` in the literal escaped)."""
    name = kind if isinstance(kind, str) else next(iter(kind), None)
    if len(inputs) != 2 or not (isinstance(inputs[0], dict) and "Column" in inputs[0]):
        raise _Untranslatable
    try:
        text = inputs[1]["Literal"]["Scalar"]["String"]
    except (KeyError, TypeError):
        raise _Untranslatable from None
    if not isinstance(text, str):
        raise _Untranslatable
    escaped = re.sub(r"([\\%_])", r"\\\1", text)
    options = kind.get(name) if isinstance(kind, dict) else None
    literal = isinstance(options, dict) and options.get("literal") is True
    if name == "Contains" and (literal or not _REGEX_META & set(text)):
        pattern = f"%{escaped}%"
    elif name == "StartsWith":
        pattern = f"{escaped}%"
    elif name == "EndsWith":
        pattern = f"%{escaped}"
    else:
        raise _Untranslatable
    return f"({_value(inputs[0])} LIKE {_literal(pattern)})"


def _value(node: Any) -> str:
    """A column or a literal."""
    if isinstance(node, dict) and "Column" in node and isinstance(node["Column"], str):
        return '"' + node["Column"].replace('"', '""') + '"'
    if isinstance(node, dict) and "Literal" in node:
        return _scalar(node["Literal"])
    raise _Untranslatable


def _scalar(literal: Any) -> str:
    if not isinstance(literal, dict) or len(literal) != 1:
        raise _Untranslatable
    kind, body = next(iter(literal.items()))
    if kind == "Dyn" and isinstance(body, dict) and len(body) == 1:
        return _literal(next(iter(body.values())))
    if kind != "Scalar" or not isinstance(body, dict) or len(body) != 1:
        raise _Untranslatable
    dtype, value = next(iter(body.items()))
    if dtype == "Datetime" and isinstance(value, list) and len(value) == 3:
        ticks, unit, zone = value
        if unit not in _UNITS or not isinstance(ticks, int):
            raise _Untranslatable
        tz = "None" if zone is None else f'Some("{zone}")'
        return f"arrow_cast({ticks}, 'Timestamp({_UNITS[unit]}, {tz})')"
    if dtype == "Date" and isinstance(value, int):
        return f"arrow_cast(arrow_cast({value}, 'Int32'), 'Date32')"
    if dtype in ("String", "Boolean") or dtype.startswith(("Int", "UInt", "Float")):
        return _literal(value)
    raise _Untranslatable


def _literal(value: Any) -> str:
    # JSON writes a NaN as null: a null literal is never translated.
    if value is None:
        raise _Untranslatable
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Untranslatable
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise _Untranslatable


def _list(node: Any) -> list[Any]:
    """The values of an `is_in` list literal (polars writes it as an Arrow IPC stream)."""
    try:
        data = node["Literal"]["Scalar"]["List"]
    except (KeyError, TypeError):
        raise _Untranslatable from None
    import pyarrow as pa

    table = pa.ipc.open_stream(bytes(data)).read_all()
    if table.num_columns != 1:
        raise _Untranslatable
    column = table.column(0)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
            or pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
            or pa.types.is_string_view(column.type) or pa.types.is_boolean(column.type)):
        raise _Untranslatable
    return list(column.to_pylist())
