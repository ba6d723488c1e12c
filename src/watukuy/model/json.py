"""JSON in and out: fast where it can be, exact where it must be.

watukuy stores payloads (events, items, cursors) as JSON text. :func:`dumps` uses orjson,
and hands it the few values it refuses (integers beyond 64 bits) as ready-made digits, so
big integers survive a round trip unchanged. :func:`to_jsonable` turns the
typed items users work with (pydantic models, msgspec structs, dataclasses, datetimes,
enums, UUIDs, decimals) into plain JSON data.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json as _stdjson
import math
import re
import sys
from collections.abc import Mapping
from typing import Any, Final

import orjson

__all__ = [
    "ENCODING_ERRORS",
    "MAX_DEPTH",
    "JsonValue",
    "dumps",
    "dumps_typed",
    "dumps_typed_bytes",
    "encoding_problem",
    "loads",
    "to_jsonable",
]

JsonValue = None | bool | int | float | str | list[Any] | dict[str, Any]

ENCODING_ERRORS: Final = (TypeError, ValueError, RecursionError)
"""What writing a value as JSON (or hashing it) raises when the value cannot be written:
nested deeper than orjson's limit (:data:`MAX_DEPTH`) or Python's recursion limit, NaN or
Infinity, a value that contains itself, a value with no JSON form."""

MAX_DEPTH: Final = 254
"""The deepest nesting of objects and arrays orjson writes; deeper values are refused."""


def encoding_problem(error: BaseException) -> str:
    """Why a value could not be written as JSON, in words, for an item's quarantine."""
    text = str(error)
    if isinstance(error, RecursionError) or "Recursion limit reached" in text:
        return f"it is nested more than {MAX_DEPTH} levels deep"
    return text or type(error).__name__


_INT_RANGE = range(-(2**63), 2**64)  # what orjson writes itself


def _with_big_ints(value: Any) -> Any:
    """``value`` with every integer orjson refuses replaced by a fragment of its digits."""
    if type(value) is int:
        return value if value in _INT_RANGE else orjson.Fragment(str(value).encode())
    if isinstance(value, dict):
        return {key: _with_big_ints(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_with_big_ints(item) for item in value]
    return value


def dumps(value: Any) -> str:
    """Serialise plain JSON data to compact text (pass it through :func:`to_jsonable` first:
    that is where NaN and Infinity are rejected; orjson itself would write them as null).

    Integers beyond 64 bits, which orjson refuses, are written digit for digit; everything
    else in the same value is still written by orjson, so a float reads the same whichever
    way its value went (``1e-05`` is ``0.00001`` both ways).
    """
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as error:
        if "Integer exceeds 64-bit range" in str(error):
            try:
                return orjson.dumps(_with_big_ints(value)).decode()
            except orjson.JSONEncodeError as again:
                raise TypeError(str(again)) from again
        raise TypeError(str(error)) from error


_TYPED_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def dumps_typed(value: Any) -> str:
    """Serialise data that may hold typed values (models, structs, datetimes, enums...).

    The same text as ``dumps(to_jsonable(value))``, without walking plain parts in Python:
    orjson writes what it can and hands every other value to :func:`to_jsonable`. Values
    orjson cannot take at all (integers beyond 64 bits, non-string keys) go the slow way.
    Unlike :func:`to_jsonable`, a NaN in plain data is written as null; callers hash items
    (which rejects NaN) before they serialise them.
    """
    try:
        return orjson.dumps(value, default=to_jsonable, option=_TYPED_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return dumps(to_jsonable(value))


def dumps_typed_bytes(value: Any) -> tuple[bytes, bool]:
    """:func:`dumps_typed` as UTF-8 bytes, and whether orjson wrote them.

    Text orjson wrote reads back exactly with ``orjson.loads`` (it writes no integer beyond
    64 bits); the other text needs :func:`loads`.
    """
    try:
        return orjson.dumps(value, default=to_jsonable, option=_TYPED_OPTIONS), True
    except orjson.JSONEncodeError:
        return dumps(to_jsonable(value)).encode(), False


# orjson reads integers beyond 64 bits as floats, silently; a run of 19+ digits not part of
# a fraction or exponent might be one, so such text goes through the exact stdlib parser.
_LONG_INTEGER = re.compile(rb"(?<![\d.eE+-])-?\d{19,}(?![\d.eE])")


# Every digit becomes "0" and every other byte "x": a run of 19 digits is then a plain
# substring search, far cheaper than the regex on the (usual) text that has none.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))
_NINETEEN_DIGITS = b"0" * 19


def loads(text: str | bytes) -> Any:
    """Parse JSON text; integers beyond 64 bits are read exactly."""
    raw = text.encode() if isinstance(text, str) else text
    if _NINETEEN_DIGITS in raw.translate(_DIGITS_ONLY) and _LONG_INTEGER.search(raw):
        return _stdjson.loads(raw)
    return orjson.loads(raw)


def _iso(value: dt.datetime | dt.date | dt.time) -> str:
    text = value.isoformat()
    if isinstance(value, dt.datetime | dt.time) and text.endswith("+00:00"):
        text = text[:-6] + "Z"
    return text


def _is_uuid_or_decimal(value: Any) -> bool:
    # A UUID or a Decimal exists only once its module is loaded: asking the loaded modules
    # spares every process that never uses them importing both at start-up.
    uuid, decimal = sys.modules.get("uuid"), sys.modules.get("decimal")
    return (uuid is not None and isinstance(value, uuid.UUID)) or (
        decimal is not None and isinstance(value, decimal.Decimal)
    )


def to_jsonable(value: Any) -> Any:
    """Convert a typed value into plain JSON data (dicts, lists, str, int, float, bool, None).

    Pydantic models are dumped in JSON mode, msgspec structs with ``msgspec.to_builtins``,
    dataclasses field by field, datetimes as ISO 8601 (``Z`` for UTC, as pydantic writes
    them), UUIDs and decimals as strings, enums as their values, sets and tuples as lists.

    Raises:
        TypeError: A value that has no JSON form, or a float that is NaN or infinite.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{value!r} has no JSON form")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, enum.Enum):
                key = key.value
            if not isinstance(key, str):
                if isinstance(key, int) and not isinstance(key, bool):
                    key = str(key)
                else:
                    raise TypeError(f"object keys must be strings, got {key!r}")
            out[key] = to_jsonable(item)
        return out
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and hasattr(type(value), "model_fields"):
        return to_jsonable(model_dump(mode="json"))
    if hasattr(type(value), "__struct_fields__"):
        import msgspec  # only present when the user's items are msgspec structs

        return to_jsonable(msgspec.to_builtins(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return _iso(value)
    if _is_uuid_or_decimal(value):
        return str(value)
    if isinstance(value, set | frozenset):
        # Sets have no order; sort so the same set always hashes the same.
        items = [to_jsonable(item) for item in value]
        return sorted(items, key=dumps)
    raise TypeError(f"{type(value).__name__} has no JSON form")
