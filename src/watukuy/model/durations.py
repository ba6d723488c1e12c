"""Durations: what users write, and the milliseconds watukuy computes with.

Every duration option accepts a string with one unit (``"250ms"``, ``"5s"``, ``"2m"``,
``"6h"``, ``"1d"``), a :class:`datetime.timedelta`, or a plain number of **seconds**
(``1.5`` is one and a half seconds, as with :func:`asyncio.sleep`). A number written as
text without a unit (``"5"``, what a command-line option or an environment variable
holds) is seconds too: one rule, whether the number comes as a number or as text. Internally every time
is an integer number of milliseconds, the unit stored by the stores and reported by
``inspect()``.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Final, TypeAlias

from .errors import ConfigError

__all__ = ["Duration", "describe_duration", "format_duration", "parse_duration"]

Duration: TypeAlias = str | int | float | timedelta
"""A span of time: ``"250ms" | "5s" | "2m" | "6h" | "1d"``, a ``timedelta``, or seconds."""

_UNIT_MS: Final = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PATTERN: Final = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: Duration, field: str = "duration") -> int:
    """Turn a user-supplied duration into whole milliseconds.

    Args:
        value: ``"250ms" | "5s" | "2m" | "6h" | "1d"``, a ``timedelta``, or seconds (a
            number, or a number written as text without a unit: ``"5"``).
        field: Name of the option being parsed, used in the error message.

    Returns:
        The duration in milliseconds, rounded to the nearest millisecond.

    Raises:
        ConfigError: The value is negative, not finite, or not a duration at all.
    """
    if isinstance(value, bool):
        raise ConfigError(f"expected a duration like '5s', got {value!r}", field=field)
    if isinstance(value, timedelta):
        ms = value / timedelta(milliseconds=1)
    elif isinstance(value, int | float):
        ms = float(value) * 1_000
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise ConfigError(
                f"expected a duration like '250ms', '5s', '2m', '6h' or '1d' (a bare number "
                f"is seconds), got {value!r}",
                field=field,
            )
        ms = float(match.group(1)) * _UNIT_MS[match.group(2) or "s"]
    else:
        raise ConfigError(f"expected a duration like '5s', got {value!r}", field=field)
    if not math.isfinite(ms) or ms < 0:
        raise ConfigError(f"expected a non-negative finite duration, got {value!r}", field=field)
    return round(ms)


_FORMAT_UNITS: Final = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


def format_duration(ms: int | float | timedelta) -> str:
    """Write milliseconds in the largest unit that divides them exactly.

    ``5000`` becomes ``"5s"``, ``90000`` becomes ``"90s"``, ``250`` becomes ``"250ms"``.
    A ``timedelta`` is accepted too.
    """
    if isinstance(ms, timedelta):
        ms = ms / timedelta(milliseconds=1)
    whole = round(ms)
    if whole == 0:
        return "0ms"
    sign = "-" if whole < 0 else ""
    whole = abs(whole)
    for unit, size in _FORMAT_UNITS:
        if whole % size == 0:
            return f"{sign}{whole // size}{unit}"
    return f"{sign}{whole}ms"


_DESCRIBE_UNITS: Final = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000))


def describe_duration(ms: int | float | None) -> str:
    """A duration for people, to one decimal: ``850ms``, ``1.5s``, ``2.0m``, ``1.2h``,
    ``3.0d``; ``-`` for ``None``.

    The unit is the largest one the duration reaches once rounded, so 59,990 ms reads
    ``1.0m`` rather than ``60.0s``.
    """
    if ms is None:
        return "-"
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms < 999.5:
        return f"{sign}{int(ms)}ms"
    for unit, size in _DESCRIBE_UNITS:
        if round(ms / size, 1) >= 1:
            return f"{sign}{ms / size:.1f}{unit}"
    return f"{sign}{ms / 1_000:.1f}s"
