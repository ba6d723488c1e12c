"""Reading and writing timestamps the way the API writes them.

The default rules understand three families of values:

* ISO 8601 text: ``2026-01-01T12:00:00Z``, ``2026-01-01T14:00:00+02:00``,
  ``2026-01-01 12:00:00.123456``, ``2026-01-01`` (date only). The separator may be ``T``,
  ``t`` or a space; seconds and any number of fractional digits are optional; the zone may
  be ``Z``, ``+HH:MM``, ``+HHMM`` or ``+HH``. Text without a zone is read as UTC.
* Epoch seconds: exactly 10 digits, as text (``"1767225600"``) or a number (``1767225600``,
  ``1767225600.25``).
* Epoch milliseconds: exactly 13 digits, as text or a number.

Parsing is exact to the nanosecond internally, so two stamps a microsecond apart never
compare equal. Formatting (used only to move a watermark back by ``overlap``) is
*shape-preserving*: the result has the type, separator, number of fractional digits and zone
of a sample value, and is rounded down so it is never later than the instant asked for.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from typing import Final, NamedTuple, TypeAlias

__all__ = [
    "NS_PER_MS",
    "TimestampValue",
    "format_ns",
    "format_timestamp",
    "normalise_timestamp",
    "parse_ns",
    "parse_timestamp",
    "text_ns",
]

TimestampValue: TypeAlias = str | int | float
"""A timestamp as the API writes it: ISO text, or epoch seconds/milliseconds."""

NS_PER_MS: Final = 1_000_000
_NS_PER_S: Final = 1_000_000_000
_NS_PER_MIN: Final = 60 * _NS_PER_S
_NS_PER_DAY: Final = 86_400 * _NS_PER_S
_EPOCH_ORDINAL: Final = dt.date(1970, 1, 1).toordinal()

_EPOCH_DIGITS: Final = re.compile(r"\d{10}|\d{13}", re.ASCII)
_ISO: Final = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})"
    r"(?:(?P<sep>[Tt ])(?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:(?P<fsep>[.,])(?P<frac>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?)?",
    re.ASCII,
)


class _IsoShape(NamedTuple):
    """How one ISO 8601 value was written, so a shifted instant can be written alike."""

    sep: str | None  # None: date only
    has_seconds: bool
    frac_sep: str
    frac_digits: int
    zone: str  # "" (read as UTC), "Z", "z" or the offset exactly as written
    offset_s: int


def normalise_timestamp(value: object) -> TimestampValue | None:
    """Reduce a field value to something a timestamp parser accepts.

    Text and finite numbers pass through unchanged. A ``datetime`` (as a typed item may
    carry) becomes ISO text in UTC with ``Z``; naive datetimes are taken as UTC. A ``date``
    becomes ``YYYY-MM-DD``. Anything else (``None``, booleans, NaN, other objects) gives
    ``None``: such a value never moves a watermark.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat() + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return None


def _offset_seconds(zone: str) -> int | None:
    if zone in ("", "Z", "z"):
        return 0
    hours = int(zone[1:3])
    minutes = int(zone[-2:]) if len(zone) > 3 else 0
    if hours > 23 or minutes > 59:
        return None
    seconds = hours * 3_600 + minutes * 60
    return -seconds if zone[0] == "-" else seconds


def _parse_iso(text: str) -> tuple[int, _IsoShape] | None:
    match = _ISO.fullmatch(text)
    if match is None:
        return None
    parts = match.groupdict()
    try:
        day = dt.date(int(parts["year"]), int(parts["month"]), int(parts["day"]))
    except ValueError:
        return None
    hour = int(parts["hour"] or 0)
    minute = int(parts["minute"] or 0)
    second = int(parts["second"] or 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    zone = parts["zone"] or ""
    offset = _offset_seconds(zone)
    if offset is None:
        return None
    frac = parts["frac"] or ""
    # Digits beyond nanoseconds carry no information we can compare; drop them.
    frac_ns = int(frac[:9].ljust(9, "0")) if frac else 0
    seconds = (day.toordinal() - _EPOCH_ORDINAL) * 86_400 + hour * 3_600 + minute * 60 + second
    ns = (seconds - offset) * _NS_PER_S + frac_ns
    shape = _IsoShape(
        sep=parts["sep"],
        has_seconds=parts["second"] is not None,
        frac_sep=parts["fsep"] or ".",
        frac_digits=len(frac),
        zone=zone,
        offset_s=offset,
    )
    return ns, shape


def _format_iso(ns: int, shape: _IsoShape) -> str:
    local = ns + shape.offset_s * _NS_PER_S
    if shape.sep is None:
        unit = _NS_PER_DAY
    elif not shape.has_seconds:
        unit = _NS_PER_MIN
    else:
        unit = 10 ** max(0, 9 - shape.frac_digits)
    local -= local % unit
    days, rem = divmod(local, _NS_PER_DAY)
    day = dt.date.fromordinal(_EPOCH_ORDINAL + days)
    text = f"{day.year:04d}-{day.month:02d}-{day.day:02d}"
    if shape.sep is None:
        return text
    seconds, frac = divmod(rem, _NS_PER_S)
    hour, seconds = divmod(seconds, 3_600)
    minute, second = divmod(seconds, 60)
    text += f"{shape.sep}{hour:02d}:{minute:02d}"
    if shape.has_seconds:
        text += f":{second:02d}"
        if shape.frac_digits:
            digits = f"{frac:09d}"
            digits = digits[: shape.frac_digits].ljust(shape.frac_digits, "0")
            text += shape.frac_sep + digits
    return text + shape.zone


def _integer_digits(value: int | float) -> int:
    return len(str(int(value)))


def _scaled_floor(value: float, scale: int) -> int:
    # A float read from JSON stands for its shortest decimal text; scale that text exactly.
    # (decimal is imported here: only float timestamps need it, and it costs start-up time.)
    from decimal import ROUND_FLOOR, Decimal

    return int((Decimal(repr(value)) * scale).to_integral_value(rounding=ROUND_FLOOR))


def parse_ns(value: TimestampValue) -> int | None:
    """Read a timestamp with the default rules, in nanoseconds since the epoch.

    Returns:
        The instant, or ``None`` when the value is not a timestamp these rules understand.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return text_ns(value)
    if isinstance(value, int | float) and math.isfinite(value) and value > 0:
        digits = _integer_digits(value)
        if digits not in (10, 13):
            return None
        scale = _NS_PER_S if digits == 10 else NS_PER_MS
        return value * scale if isinstance(value, int) else _scaled_floor(value, scale)
    return None


# A page's stamps are read more than once (to drop items inside ``lag``, then to move the
# watermark): remembering the latest few thousand makes every read after the first a lookup.
@functools.lru_cache(maxsize=4096)
def text_ns(value: str) -> int | None:
    """:func:`parse_ns` of a text value (cached)."""
    fast = _utc_seconds_or_millis_ns(value)
    if fast is not None:
        return fast
    if _EPOCH_DIGITS.fullmatch(value):
        return int(value) * (_NS_PER_S if len(value) == 10 else NS_PER_MS)
    parsed = _parse_iso(value)
    return None if parsed is None else parsed[0]


def _utc_seconds_or_millis_ns(text: str) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS[.mmm]Z``, the shape most APIs write, without the regex.

    Returns ``None`` for anything else, valid or not; :func:`_parse_iso` then decides.
    """
    size = len(text)
    if size not in (20, 24) or text[-1] not in "Zz":
        return None
    if text[4] != "-" or text[7] != "-" or text[10] not in "Tt " or text[13] != ":":
        return None
    if text[16] != ":" or (size == 24 and text[19] not in ".,"):
        return None
    digits = text[:4] + text[5:7] + text[8:10] + text[11:13] + text[14:16] + text[17:19]
    if size == 24:
        digits += text[20:23]
    if not (digits.isascii() and digits.isdigit()):
        return None
    hour, minute, second = int(digits[8:10]), int(digits[10:12]), int(digits[12:14])
    if hour > 23 or minute > 59 or second > 59:
        return None
    try:
        day = dt.date(int(digits[:4]), int(digits[4:6]), int(digits[6:8]))
    except ValueError:
        return None
    seconds = (day.toordinal() - _EPOCH_ORDINAL) * 86_400 + hour * 3_600 + minute * 60 + second
    return seconds * _NS_PER_S + (int(digits[14:]) * NS_PER_MS if size == 24 else 0)


def format_ns(ns: int, like: TimestampValue) -> TimestampValue:
    """Write an instant (nanoseconds) in the shape of ``like``, rounding down.

    Raises:
        ValueError: ``like`` is not a value the default rules understand, or the instant
            falls outside the years 1..9999.
    """
    if isinstance(like, str):
        if _EPOCH_DIGITS.fullmatch(like):
            unit = _NS_PER_S if len(like) == 10 else NS_PER_MS
            return str(ns // unit)
        parsed = _parse_iso(like)
        if parsed is not None:
            try:
                return _format_iso(ns, parsed[1])
            except (ValueError, OverflowError) as error:
                raise ValueError(f"{ns}ns is outside the years 1..9999") from error
    elif parse_ns(like) is not None:
        unit = _NS_PER_S if _integer_digits(like) == 10 else NS_PER_MS
        if isinstance(like, int):
            return ns // unit
        return ns / unit
    raise ValueError(f"{like!r} is not an ISO 8601 timestamp or epoch seconds/milliseconds")


def parse_timestamp(value: object) -> float:
    """Read a timestamp with the default rules, in epoch milliseconds.

    Args:
        value: ISO 8601 text, 10-digit epoch seconds or 13-digit epoch milliseconds (text or
            number), a ``datetime`` or a ``date``.

    Returns:
        Epoch milliseconds; sub-millisecond digits are kept as the fraction.

    Raises:
        ValueError: The value is not a timestamp these rules understand.
    """
    normal = normalise_timestamp(value)
    ns = None if normal is None else parse_ns(normal)
    if ns is None:
        raise ValueError(f"{value!r} is not an ISO 8601 timestamp or epoch seconds/milliseconds")
    return ns / NS_PER_MS


def format_timestamp(ms: float, like: TimestampValue) -> TimestampValue:
    """Write epoch milliseconds in the shape of ``like``, never later than ``ms``.

    ``format_timestamp(1767225480000, "2026-01-01T02:00:00+02:00")`` gives
    ``"2026-01-01T01:58:00+02:00"``; with ``like=1767225600`` it gives ``1767225480``.

    Raises:
        ValueError: ``like`` is not a value the default rules understand.
    """
    if isinstance(ms, bool) or not math.isfinite(ms):
        raise ValueError(f"expected finite epoch milliseconds, got {ms!r}")
    ns = ms * NS_PER_MS if isinstance(ms, int) else _scaled_floor(ms, NS_PER_MS)
    return format_ns(ns, like)
