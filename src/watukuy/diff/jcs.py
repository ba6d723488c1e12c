"""RFC 8785 by the book: JavaScript's number text, UTF-16 key order, the reference writer.

Everything here favours being obviously right over being fast; :mod:`.canonical` builds
the fast path on top and falls back to :func:`reference_json` whenever it cannot prove its
own output canonical.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from json.encoder import encode_basestring
from typing import Any, Final

from watukuy.model.json import to_jsonable

__all__ = ["format_number", "reference_json", "utf16_sorted"]

_MAX_EXACT_INT: Final = 2**53
_UTF16_SENSITIVE: Final = "\ud800"


def format_number(value: float) -> str:
    """Write a finite number the way JavaScript's ``String(n)`` writes the same double.

    Integers up to 2**53 in magnitude are written exactly; larger integers are first
    rounded to the nearest double, as ``JSON.parse`` would have done.

    Args:
        value: An ``int`` or a finite ``float``.

    Returns:
        The text, e.g. ``"100"`` for ``100.0``, ``"1e+21"`` for ``1e21``, ``"1e-7"``.

    Raises:
        ValueError: ``value`` is NaN or infinite, or an integer too large for a double.
    """
    if isinstance(value, int):
        if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT:
            return int.__repr__(value)
        try:
            value = float(value)
        except OverflowError:
            raise ValueError(
                f"integer {value} is beyond the range of a JSON number (a double)"
            ) from None
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a JSON number; NaN and Infinity are rejected")
    if value.is_integer() and -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT:
        return int.__repr__(int(value))  # exact, and -0.0 becomes "0" as JCS wants
    text = float.__repr__(value)  # shortest round-trip digits, like JavaScript
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # The value is 0.<digits> * 10**point; trailing zeros carry no information.
    point = len(digits) + (int(exponent) if exponent else 0) - len(fraction)
    digits = digits.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    power = point - 1
    head = digits[0] + ("." + digits[1:] if count > 1 else "")
    return f"{sign}{head}e{'+' if power > 0 else '-'}{abs(power)}"


def _utf16_units(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def utf16_sorted(strings: Iterable[str]) -> list[str]:
    """Sort strings by UTF-16 code units, the order JCS (and JavaScript's ``sort``) uses.

    It differs from Python's code-point order only for strings holding characters at or
    above U+D800, so the common case costs one plain sort.
    """
    ordered = sorted(strings)
    if max("".join(ordered), default="") >= _UTF16_SENSITIVE:
        ordered.sort(key=_utf16_units)
    return ordered


def reference_json(value: Any) -> bytes:
    """Canonical JSON by the book: a direct, unhurried RFC 8785 writer.

    Plain data is written natively; anything else (pydantic models, dataclasses,
    datetimes, ...) goes through :func:`~watukuy.model.json.to_jsonable` first.
    :func:`~watukuy.diff.canonical_json` returns the same bytes, faster; this writer is
    its fallback and the reference the tests hold it to.

    Raises:
        ValueError: NaN or Infinity, a lone surrogate, an integer too large for a
            double, or a value that contains itself.
        TypeError: A value with no JSON form.
    """
    parts: list[str] = []
    put = parts.append
    ancestors: set[int] = set()

    def write(node: Any) -> None:
        if node is None:
            put("null")
        elif node is True:
            put("true")
        elif node is False:
            put("false")
        elif isinstance(node, str):
            put(encode_basestring(node))
        elif isinstance(node, int | float):
            put(format_number(node))
        elif isinstance(node, dict | list | tuple):
            if isinstance(node, dict) and not all(isinstance(key, str) for key in node):
                write(to_jsonable(node))  # to_jsonable knows which keys become strings
                return
            marker = id(node)
            if marker in ancestors:
                raise ValueError("circular reference: a value contains itself")
            ancestors.add(marker)
            if isinstance(node, dict):
                put("{")
                for index, key in enumerate(utf16_sorted(node)):
                    if index:
                        put(",")
                    put(encode_basestring(key))
                    put(":")
                    write(node[key])
                put("}")
            else:
                put("[")
                for index, item in enumerate(node):
                    if index:
                        put(",")
                    write(item)
                put("]")
            ancestors.discard(marker)
        else:
            write(to_jsonable(node))

    write(value)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as error:
        bad = error.object[error.start : error.end]
        raise ValueError(
            f"a string holds the lone surrogate {bad!r}, which has no UTF-8 form"
        ) from None
