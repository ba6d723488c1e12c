"""Scripted failures and the rate limiter of the fake API.

A :class:`Fault` is one scripted answer taken from a FIFO queue by the next request it
matches. The :class:`RateLimiter` counts requests in fixed windows and renders the header
family real APIs use, so the engine's header parsers and pacing meet the same variety they
meet in production.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import fnmatch
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final, Literal, TypeAlias

from watukuy.model import json as wkjson
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError

__all__ = [
    "Fault",
    "FaultKind",
    "FaultQueue",
    "RateLimitScope",
    "RateLimitStyle",
    "RateLimiter",
    "ResetFormat",
    "RetryAfter",
    "format_retry_after",
    "make_fault",
    "problem_body",
    "retry_after_seconds",
]

FaultKind = Literal["network", "timeout", "malformed"]
"""Faults that are not an HTTP status: a dropped connection, no answer, a broken body."""

RetryAfter: TypeAlias = int | float | dt.timedelta | dt.datetime | str
"""Seconds (a number or timedelta), an instant (sent as an HTTP-date), or a raw header value."""

RateLimitStyle = Literal["ietf", "legacy", "vendor", "vendor-x-rate"]
ResetFormat = Literal["delta", "epoch", "epoch_ms"]
RateLimitScope = Literal["api", "tenant", "client"]

JSON_TYPE: Final = "application/json"
PROBLEM_TYPE: Final = "application/problem+json"
MALFORMED_BODY: Final = b'{"data": [{"id": "item-001", "name": '

_KINDS: Final = ("network", "timeout", "malformed")


def problem_body(status: int, detail: str | None = None, **extra: Any) -> dict[str, Any]:
    """RFC 9457 Problem Details for ``status`` (``type`` is ``about:blank``)."""
    body: dict[str, Any] = {"type": "about:blank", "title": _phrase(status), "status": status}
    if detail is not None:
        body["detail"] = detail
    body.update(extra)
    return body


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"Status {status}"


def _raw(body: bytes | str) -> bytes:
    return body.encode() if isinstance(body, str) else body


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


def format_retry_after(value: RetryAfter) -> str:
    """The ``Retry-After`` header value for seconds, an instant, or a verbatim string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return email.utils.format_datetime(moment.astimezone(dt.UTC), usegmt=True)
    if isinstance(value, dt.timedelta):
        return _format_seconds(value.total_seconds())
    return _format_seconds(value)


def retry_after_seconds(header: str, now: int) -> float | None:
    """Seconds a ``Retry-After`` value asks for, relative to ``now`` (epoch ms)."""
    try:
        seconds = float(header)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        return max(0.0, moment.timestamp() - now / 1000)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


@dataclass(frozen=True, slots=True)
class Fault:
    """One scripted answer, built by ``FakeApi.fail_next``.

    Attributes:
        status: An HTTP status (``200``-``599``), or ``"network"`` (the connection drops:
            ``httpx.ConnectError`` in process), ``"timeout"`` (no answer:
            ``httpx.ReadTimeout`` in process, a silent connection over real HTTP) or
            ``"malformed"`` (``200`` with a truncated JSON body).
        headers: Response headers (already including ``Retry-After`` and content type).
        body: Response body.
        path: Glob on the request path (relative to the base URL, e.g. ``/items`` or
            ``/t/*/items/page``); ``None`` matches every request.
    """

    status: int | FaultKind
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    path: str | None = None

    def matches(self, path: str) -> bool:
        """Whether a request to ``path`` takes this fault."""
        return self.path is None or fnmatch.fnmatchcase(path, self.path)

    @property
    def log_status(self) -> int:
        """The status recorded in the request log (``0`` when nothing was answered)."""
        if self.status == "malformed":
            return 200
        return self.status if isinstance(self.status, int) else 0


def make_fault(
    status: int | FaultKind = 500,
    *,
    retry_after: RetryAfter | None = None,
    problem: Mapping[str, Any] | None = None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    path: str | None = None,
) -> Fault:
    """Validate ``fail_next`` arguments and render the fault's response once."""
    if isinstance(status, str):
        if status not in _KINDS:
            raise ConfigError(
                f"expected an HTTP status or one of {', '.join(_KINDS)}, got {status!r}",
                field="status",
            )
    elif isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
        raise ConfigError(f"expected an HTTP status 200-599, got {status!r}", field="status")
    if path is not None and (not isinstance(path, str) or not path.startswith("/")):
        raise ConfigError(f"expected a path glob starting with '/', got {path!r}", field="path")
    if status in ("network", "timeout"):
        for name, value in (
            ("retry_after", retry_after),
            ("problem", problem),
            ("body", body),
            ("headers", headers),
        ):
            if value is not None:
                raise ConfigError(f"a {status} fault sends no response", field=name)
        return Fault(status=status, path=path)
    if problem is not None and body is not None:
        raise ConfigError("give either problem or body, not both", field="problem")
    if problem is not None and not isinstance(problem, Mapping):
        raise ConfigError(f"expected a mapping, got {problem!r}", field="problem")
    out: list[tuple[str, str]] = []
    payload: bytes
    if status == "malformed":
        if problem is not None or (body is not None and not isinstance(body, bytes | str)):
            raise ConfigError("a malformed fault takes raw text or bytes as body", field="body")
        payload = MALFORMED_BODY if body is None else _raw(body)
        content_type = JSON_TYPE
    elif problem is not None:
        payload, content_type = wkjson.dumps(dict(problem)).encode(), PROBLEM_TYPE
    elif isinstance(body, bytes | str):
        payload, content_type = _raw(body), JSON_TYPE
    elif body is not None:
        payload, content_type = wkjson.dumps(wkjson.to_jsonable(body)).encode(), JSON_TYPE
    elif isinstance(status, int) and status >= 400:
        payload = wkjson.dumps(problem_body(status)).encode()
        content_type = PROBLEM_TYPE
    else:
        payload, content_type = b"", ""
    if content_type:
        out.append(("content-type", content_type))
    if retry_after is not None:
        if not isinstance(retry_after, int | float | dt.timedelta | dt.datetime | str) or (
            isinstance(retry_after, int | float)
            and (isinstance(retry_after, bool) or not math.isfinite(retry_after) or retry_after < 0)
        ):
            raise ConfigError(
                f"expected seconds, a datetime or a header value, got {retry_after!r}",
                field="retry_after",
            )
        out.append(("retry-after", format_retry_after(retry_after)))
    for name, value in (headers or {}).items():
        out = [(k, v) for k, v in out if k.lower() != name.lower()]
        out.append((str(name).lower(), str(value)))
    return Fault(status=status, headers=tuple(out), body=payload, path=path)


@dataclass(slots=True)
class FaultQueue:
    """Scripted faults in FIFO order; a request takes the first one matching its path."""

    _faults: deque[Fault] = field(default_factory=deque)

    def push(self, fault: Fault, times: int) -> None:
        """Queue ``fault`` for the next ``times`` matching requests."""
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ConfigError(f"expected a positive integer, got {times!r}", field="times")
        self._faults.extend([fault] * times)

    def take(self, path: str) -> Fault | None:
        """Remove and return the first fault matching ``path``."""
        for index, fault in enumerate(self._faults):
            if fault.matches(path):
                del self._faults[index]
                return fault
        return None

    def __len__(self) -> int:
        return len(self._faults)

    def clear(self) -> None:
        """Drop every queued fault."""
        self._faults.clear()


@dataclass(frozen=True, slots=True)
class RateVerdict:
    """What the limiter decided for one request."""

    allowed: bool
    headers: tuple[tuple[str, str], ...]
    reset_seconds: int


class RateLimiter:
    """Fixed-window request counting with one header family.

    A window opens with the first request of a key and lasts ``window``; the first request
    at or after its end opens the next one. Every answered request counts, except the
    ``429`` answers the limiter itself gives when the window is used up.

    Args:
        style: ``"ietf"`` (``RateLimit`` + ``RateLimit-Policy`` structured fields),
            ``"legacy"`` (``RateLimit-Limit`` / ``-Remaining`` / ``-Reset``, delta
            seconds), ``"vendor"`` (``X-RateLimit-*``) or ``"vendor-x-rate"``
            (``X-Rate-Limit-*``).
        limit: Requests per window.
        window: Window length.
        reset: How vendor styles write the reset: ``"delta"`` seconds, ``"epoch"``
            seconds or ``"epoch_ms"``; default ``"epoch"``. IETF and legacy styles always
            send delta seconds.
        reset_after: Vendor styles also send ``X-RateLimit-Reset-After`` (delta seconds).
        per: Who shares a window: the whole ``"api"``, each ``"tenant"``, or each
            ``"client"`` (by ``x-client-id``).
    """

    def __init__(
        self,
        style: RateLimitStyle,
        *,
        limit: int,
        window: Duration,
        reset: ResetFormat | None,
        reset_after: bool,
        per: RateLimitScope,
    ) -> None:
        if style not in ("ietf", "legacy", "vendor", "vendor-x-rate"):
            raise ConfigError(
                f"expected 'ietf', 'legacy', 'vendor', 'vendor-x-rate' or None, got {style!r}",
                field="style",
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"expected a positive integer, got {limit!r}", field="limit")
        self.window_ms = parse_duration(window, "window")
        if self.window_ms <= 0:
            raise ConfigError(f"must be greater than zero, got {window!r}", field="window")
        vendor = style.startswith("vendor")
        if reset not in (None, "delta", "epoch", "epoch_ms") or (
            not vendor and reset not in (None, "delta")
        ):
            allowed = "'delta', 'epoch' or 'epoch_ms'" if vendor else "'delta'"
            raise ConfigError(f"expected {allowed} for {style}, got {reset!r}", field="reset")
        if reset_after and not vendor:
            raise ConfigError(f"only vendor styles send it, not {style!r}", field="reset_after")
        if per not in ("api", "tenant", "client"):
            raise ConfigError(f"expected 'api', 'tenant' or 'client', got {per!r}", field="per")
        self.style: RateLimitStyle = style
        self.limit = limit
        self.reset: ResetFormat = reset or ("epoch" if vendor else "delta")
        self.reset_after = reset_after
        self.per: RateLimitScope = per
        self._windows: dict[str, list[int]] = {}

    def key(self, tenant: str, client: str | None) -> str:
        """The window a request counts in."""
        if self.per == "tenant":
            return tenant
        if self.per == "client":
            return client or ""
        return ""

    def take(self, key: str, now: int) -> RateVerdict:
        """Count one request at ``now``; ``allowed`` is false when the window is used up."""
        window = self._windows.get(key)
        if window is None or now >= window[0] + self.window_ms:
            window = self._windows[key] = [now, 0]
        allowed = window[1] < self.limit
        if allowed:
            window[1] += 1
        end = window[0] + self.window_ms
        remaining = self.limit - window[1]
        delta = max(1, math.ceil((end - now) / 1000))
        return RateVerdict(allowed, self._headers(remaining, delta, end), delta)

    def _headers(self, remaining: int, delta: int, end: int) -> tuple[tuple[str, str], ...]:
        if self.style == "ietf":
            window_s = max(1, math.ceil(self.window_ms / 1000))
            return (
                ("ratelimit-policy", f'"default";q={self.limit};w={window_s}'),
                ("ratelimit", f'"default";r={remaining};t={delta}'),
            )
        if self.style == "legacy":
            return (
                ("ratelimit-limit", str(self.limit)),
                ("ratelimit-remaining", str(remaining)),
                ("ratelimit-reset", str(delta)),
            )
        prefix = "x-ratelimit" if self.style == "vendor" else "x-rate-limit"
        reset = {"delta": delta, "epoch": math.ceil(end / 1000), "epoch_ms": end}[self.reset]
        headers = [
            (f"{prefix}-limit", str(self.limit)),
            (f"{prefix}-remaining", str(remaining)),
            (f"{prefix}-reset", str(reset)),
        ]
        if self.reset_after:
            headers.append((f"{prefix}-reset-after", str(delta)))
        return tuple(headers)
