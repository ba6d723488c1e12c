"""Reading what an API says about its limits: rate-limit headers and ``Retry-After``.

Both parsers are pure (``now`` is passed in), lenient about spacing and unknown
parameters, and return ``None`` instead of raising when a value makes no sense.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from email.utils import parsedate_to_datetime
from typing import Final

from watukuy.model.options import MAX_THROTTLE_MS
from watukuy.model.records import dataclass
from watukuy.model.rows import RateLimitInfo, RateLimitSource

__all__ = ["parse_rate_limit", "parse_retry_after"]

# A reset value of 10+ digits is an epoch in seconds, 13+ digits an epoch in milliseconds;
# anything smaller is a delta in seconds.
_EPOCH_SECONDS_FROM: Final = 1_000_000_000
_EPOCH_MS_FROM: Final = 1_000_000_000_000
# An epoch-seconds reset older than this is neither a plausible delta nor a plausible
# timestamp (a stale or broken header), so it is dropped.
_STALE_EPOCH_S: Final = 86_400

# Nothing read from a header waits longer than a day (the scheduler caps lower still), and
# no count beyond 2**53 is believed: absurd values must never reach the store.
_MAX_WAIT_MS: Final = MAX_THROTTLE_MS
_MAX_COUNT: Final = 2**53 - 1
_MAX_WAIT_S: Final = _MAX_WAIT_MS / 1_000

_LEADING_NUMBER: Final = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)", re.ASCII)
_SECONDS: Final = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?", re.ASCII)


def _lowered(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        # Repeated fields combine into one list, as HTTP defines for list-valued headers.
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _number(value: str | None) -> float | None:
    """The leading non-negative decimal of a value (``"100, 100;w=60"`` gives 100)."""
    if value is None:
        return None
    match = _LEADING_NUMBER.match(value)
    if match is None:
        return None
    number = float(match.group(1))
    return number if math.isfinite(number) else None


def _count(value: str | None) -> int | None:
    number = _number(value)
    return None if number is None or number > _MAX_COUNT else int(number)


def _ms(seconds: float) -> int | None:
    ms = seconds * 1_000
    # Half-up rounding, the way the original watukuy rounds, so both agree on reset_at.
    return math.floor(ms + 0.5) if math.isfinite(ms) else None


def _after(now: int, seconds: float | None) -> int | None:
    if seconds is None:
        return None
    delta = _ms(min(seconds, _MAX_WAIT_MS / 1_000))
    return None if delta is None else now + delta


def _at_most_a_day(now: int, at: int | None) -> int | None:
    return None if at is None else min(at, now + _MAX_WAIT_MS)


def _reset(value: str | None, now: int) -> int | None:
    """A reset value: epoch ms (13+ digits), recent epoch seconds (10+), else a delta."""
    number = _number(value)
    if number is None:
        return None
    if number >= _EPOCH_MS_FROM:
        return _at_most_a_day(now, math.floor(min(number, now + _MAX_WAIT_MS) + 0.5))
    if number >= _EPOCH_SECONDS_FROM:
        fresh = number > now / 1_000 - _STALE_EPOCH_S
        return _at_most_a_day(now, _ms(min(number, now / 1_000 + 86_400))) if fresh else None
    return _after(now, number)


def _split(value: str, separator: str) -> list[str]:
    """Split on ``separator`` outside double quotes; trimmed, empty parts dropped."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    escaped = False
    for char in value:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


@dataclass(slots=True)
class _Member:
    """One structured-field member: an optional bare item and its ``key=value`` params."""

    name: str | None = None
    params: dict[str, str] = field(default_factory=dict)


def _member(text: str) -> _Member:
    member = _Member()
    for segment in _split(text, ";"):
        key, eq, raw = segment.partition("=")
        if not eq:
            if member.name is None:
                member.name = _unquote(segment)
            continue
        key = key.strip().lower()
        if key and key not in member.params:
            member.params[key] = _unquote(raw.strip())
    return member


def _info(
    source: RateLimitSource,
    limit: int | None,
    remaining: int | None,
    reset_at: int | None,
    policy: str | None = None,
) -> RateLimitInfo | None:
    if limit is None and remaining is None and reset_at is None:
        return None
    return RateLimitInfo(
        limit=limit, remaining=remaining, reset_at=reset_at, policy=policy, source=source
    )


@dataclass(frozen=True, slots=True)
class _Quota:
    """One policy of a ``RateLimit`` field: what is left of it and when it resets."""

    name: str | None
    remaining: int | None
    reset_at: int | None
    limit: int | None


def _sf_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 and math.isfinite(value) else None


def _sf_count(value: object) -> int | None:
    number = _sf_number(value)
    return None if number is None or number > _MAX_COUNT else int(number)


def _sf_name(value: object) -> str | None:
    return str(value) if isinstance(value, str) else None


def _structured(text: str) -> list[tuple[str | None, dict[str, object]]] | None:
    """``(name, parameters)`` per member of a structured ``RateLimit`` or
    ``RateLimit-Policy`` field (RFC 9651), or ``None`` when it is not one.

    The current form is a List of named items (``"burst";r=5;t=1, "day";r=900;t=3600``);
    the older form is a Dictionary with one policy (``limit=100, remaining=50, reset=30``).
    """
    # The parser is imported on the first RateLimit field: most APIs never send one.
    from ._sfv import Item, SfvError, parse_dictionary, parse_list

    try:
        members = parse_list(text)
    except SfvError:
        members = None
    if members is not None:
        return [
            (_sf_name(member.value), dict(member.params))
            for member in members
            if isinstance(member, Item)
        ]
    try:
        dictionary = parse_dictionary(text)
    except SfvError:
        return None
    # ``r=1;t=2`` reads as a Dictionary too: the parameters of a member count as keys.
    params: dict[str, object] = {}
    for key, member in dictionary.items():
        if not isinstance(member, Item):
            continue
        if not isinstance(member.value, bool):
            params.setdefault(key, member.value)
        for name, value in member.params.items():
            params.setdefault(name, value)
    return [(None, params)]


def _lenient(text: str) -> list[tuple[str | None, dict[str, object]]]:
    """Members of a field that is not a valid structured field (spaces around ``;``, say),
    split by hand; numbers are read as far as they go."""
    out: list[tuple[str | None, dict[str, object]]] = []
    for part in _split(text, ","):
        member = _member(part)
        params: dict[str, object] = {}
        for key, raw in member.params.items():
            number = _number(raw)
            params[key] = number if number is not None else raw
        out.append((member.name, params))
    return out


def _members(text: str) -> list[tuple[str | None, dict[str, object]]]:
    parsed = _structured(text)
    return parsed if parsed is not None else _lenient(text)


def _quota(name: str | None, params: dict[str, object], now: int) -> _Quota:
    remaining = _sf_count(params.get("r", params.get("remaining")))
    seconds = _sf_number(params.get("t", params.get("reset")))
    limit = _sf_count(params.get("limit", params.get("q")))
    return _Quota(name, remaining, _after(now, seconds), limit)


def _strictness(quota: _Quota, now: int) -> tuple[float, float]:
    """Sort key: the policy that asks for the longest spacing of the next requests first
    (the reset time shared by what remains), then the one with the least remaining."""
    remaining = quota.remaining if quota.remaining is not None else math.inf
    if quota.reset_at is None or quota.remaining is None:
        return (-1.0, -remaining)
    return ((quota.reset_at - now) / max(quota.remaining, 1), -remaining)


def _policy_rate(params: dict[str, object]) -> float:
    quota = _sf_number(params.get("q", params.get("limit")))
    window = _sf_number(params.get("w", params.get("window")))
    if quota is None:
        return math.inf
    return quota / window if window else quota


def _ietf(headers: dict[str, str], now: int) -> RateLimitInfo | None:
    current = headers.get("ratelimit")
    policy = headers.get("ratelimit-policy")
    if current is None and policy is None:
        return None
    chosen: _Quota | None = None
    if current is not None:
        quotas = [_quota(name, params, now) for name, params in _members(current)]
        quotas = [q for q in quotas if (q.remaining, q.reset_at, q.limit) != (None, None, None)]
        if quotas:
            # Several policies at once (a burst and a daily quota, say): honour the
            # strictest, so that pacing never spends what the tighter one has left.
            chosen = max(quotas, key=lambda quota: _strictness(quota, now))
    limit = chosen.limit if chosen is not None else None
    if policy is not None:
        policies = _members(policy)
        named = [params for name, params in policies if chosen and name == chosen.name]
        if named:
            picked: dict[str, object] | None = named[0]
        elif policies:
            # No policy named by RateLimit: the one allowing the fewest requests per second.
            picked = min((params for _, params in policies), key=_policy_rate)
        else:
            picked = None
        if picked is not None:
            quota_limit = _sf_count(picked.get("q", picked.get("limit")))
            limit = quota_limit if quota_limit is not None else limit
    if chosen is None:
        return _info("ietf", limit, None, None, policy)
    return _info("ietf", limit, chosen.remaining, chosen.reset_at, policy)


def _legacy(headers: dict[str, str], now: int) -> RateLimitInfo | None:
    return _info(
        "legacy",
        _count(headers.get("ratelimit-limit")),
        _count(headers.get("ratelimit-remaining")),
        _reset(headers.get("ratelimit-reset"), now),
    )


def _vendor(headers: dict[str, str], now: int) -> RateLimitInfo | None:
    def first(suffix: str) -> str | None:
        value = headers.get(f"x-ratelimit-{suffix}")
        return value if value is not None else headers.get(f"x-rate-limit-{suffix}")

    reset_after = _number(first("reset-after"))
    reset_at = _after(now, reset_after) if reset_after is not None else _reset(first("reset"), now)
    return _info("vendor", _count(first("limit")), _count(first("remaining")), reset_at)


def parse_rate_limit(
    headers: Mapping[str, str] | Iterable[tuple[str, str]], now: int
) -> RateLimitInfo | None:
    """Read rate-limit response headers, trying three header families in order.

    The first family that yields anything wins:

    1. IETF structured fields: ``RateLimit: "default";r=50;t=30`` (remaining, seconds to
       reset) with ``RateLimit-Policy: "default";q=100;w=60`` (quota, window). Unknown
       parameters are ignored, the quoted policy name is optional, the policy named by
       ``RateLimit`` is chosen among several (else the first), and the older dictionary
       form ``limit=100, remaining=50, reset=30`` is read too.
    2. The legacy triple ``RateLimit-Limit`` / ``-Remaining`` / ``-Reset`` (delta seconds).
    3. Vendor headers ``X-RateLimit-*`` and ``X-Rate-Limit-*``: a reset of 10+ digits is
       an epoch in seconds (dropped when more than a day old), of 13+ digits an epoch in
       milliseconds, otherwise a delta in seconds; ``X-RateLimit-Reset-After`` (delta
       seconds) is preferred when present.

    Header names are matched case-insensitively. Fractional limits are truncated.

    Args:
        headers: Response headers (a mapping such as ``httpx.Headers``, or pairs).
        now: Current time in epoch milliseconds, to turn deltas into ``reset_at``.

    Returns:
        The parsed information, or ``None`` when no family yields a usable value.
    """
    try:
        lowered = _lowered(headers)
        return _ietf(lowered, now) or _legacy(lowered, now) or _vendor(lowered, now)
    except (ValueError, OverflowError, TypeError):  # pragma: no cover - defensive
        return None


def parse_retry_after(value: str | None, now: int) -> float | None:
    """Read a ``Retry-After`` value as seconds to wait.

    A non-negative number of seconds (``"120"``, ``"1.5"``) is returned as is; an HTTP-date
    (``"Wed, 21 Oct 2015 07:28:00 GMT"``) becomes the seconds from ``now`` until then,
    ``0.0`` when it is already past.

    Args:
        value: The raw header value, or ``None`` when the header is absent.
        now: Current time in epoch milliseconds.

    Returns:
        Seconds to wait, at most one day (``86400.0``; a later date or a larger number is
        read as one day), or ``None`` for a missing, negative or unreadable value.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if _SECONDS.fullmatch(text):
        seconds = float(text)
        return min(seconds, _MAX_WAIT_S) if math.isfinite(seconds) and seconds >= 0 else None
    try:
        moment = parsedate_to_datetime(text)
        # A date without a zone ("-0000") is taken as UTC, which HTTP-dates always are.
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        epoch_s = moment.timestamp()
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    delta_ms = math.floor(epoch_s * 1_000) - now
    return min(max(0.0, delta_ms / 1_000), _MAX_WAIT_S)
