"""The fake vendor itself: the tenants' datasets, the fault state and the request handling.

:class:`Vendor` is what every face of the fake API talks to: the in-process transport and
the real server hand it a :class:`Request` and send back its answer, the control
API calls its operations, and the tenant views read and change its datasets and run their
direct listings through the same counting, faults and log. ``FakeApi`` is a ``Vendor``
that also offers those faces; nothing here imports them.

The members the faces use (``_handle``, ``_relative``, ``_open``, ...) are underscored:
they belong to this package and stay off ``FakeApi``'s public surface.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import urlencode, urlsplit

from watukuy._system import SystemClock
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.ports import Clock

from ._faults import (
    FaultKind,
    FaultQueue,
    RateLimiter,
    RateLimitScope,
    RateLimitStyle,
    ResetFormat,
    RetryAfter,
    make_fault,
)
from ._items import Dataset
from ._items import positive_int as _positive
from ._protocol import (
    NoAnswer,
    Request,
    RequestRecord,
    Response,
    problem_response,
    redact,
    split_path,
)
from ._routes import conditional, direct_error, route_of, serve_route

__all__ = ["DEFAULT_BASE_URL", "Vendor"]

DEFAULT_BASE_URL: Final = "https://fake.api"
_T = TypeVar("_T")


class Vendor:
    """The state and request handling of a fake vendor API (what ``FakeApi`` is built on).

    It holds one dataset per tenant (the default tenant ``""`` exists from the start), the
    scripted faults, the rate limit, the conditional-request switches, the latency, the
    request count and the log, and answers requests with them.

    Args:
        clock: Time source for ``updated_at`` stamps, latency and the log (default: the
            system clock; pass a ``VirtualClock`` to keep tests instant).
        base_url: Where the faces answer; its path is the route prefix of every face.
        page_size: Default page size of every listing.
        log_limit: Most recent requests kept in :attr:`log` (``None``: keep all).

    Raises:
        ConfigError: An argument is invalid.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        page_size: int = 100,
        log_limit: int | None = 100_000,
    ) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise ConfigError(
                f"expected an absolute http(s) URL, got {base_url!r}", field="base_url"
            )
        self._origin = (parts.scheme, parts.hostname, parts.port)
        self._base_segments = split_path(parts.path.rstrip("/")) if parts.path.strip("/") else ()
        self.base_url: str = base_url.rstrip("/")
        """The base URL, without a trailing slash."""
        self.page_size: int = _positive(page_size, "page_size")
        """Default page size of every listing."""
        if log_limit is not None:
            _positive(log_limit, "log_limit")
        self._tenants: dict[str, Dataset] = {"": Dataset(self._clock.now)}
        self._faults = FaultQueue()
        self._limiter: RateLimiter | None = None
        self._etags = False
        self._last_modified = False
        self._latency_ms = 0
        self._calls = 0
        self._seq = 0
        self._log: deque[RequestRecord] = deque(maxlen=log_limit)

    # --- tenants --------------------------------------------------------------------------

    def tenants(self) -> list[str]:
        """Names of every tenant, sorted (the default tenant ``""`` first)."""
        return sorted(self._tenants)

    def _open(self, name: str) -> Dataset:
        """The dataset of tenant ``name``, created empty on first use."""
        if not isinstance(name, str):
            raise ConfigError(f"expected a string, got {name!r}", field="tenant")
        if name not in self._tenants:
            self._tenants[name] = Dataset(self._clock.now)
        return self._tenants[name]

    def _dataset(self, name: str) -> Dataset:
        """The dataset of an existing tenant (``KeyError`` for an unknown one)."""
        return self._tenants[name]

    # --- faults and knobs -----------------------------------------------------------------

    def fail_next(
        self,
        status: int | FaultKind = 500,
        *,
        times: int = 1,
        retry_after: RetryAfter | None = None,
        problem: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        path: str | None = None,
    ) -> None:
        """Script the answer to the next ``times`` requests (FIFO, before any real work).

        Args:
            status: An HTTP status 200-599; ``"network"`` (connection dropped:
                ``httpx.ConnectError`` in process, a closed socket over real HTTP);
                ``"timeout"`` (no answer: ``httpx.ReadTimeout`` in process, a silent
                socket over real HTTP); ``"malformed"`` (200 with a truncated JSON body).
            times: How many consecutive matching requests get this answer.
            retry_after: ``Retry-After``: seconds (number or timedelta), a datetime (sent
                as an HTTP-date), or a string sent verbatim.
            problem: RFC 9457 Problem Details, sent as ``application/problem+json``.
                Without ``problem`` or ``body`` an error status gets a default problem.
            body: A raw body (``str``/``bytes``) or JSON data, sent as
                ``application/json`` unless ``headers`` says otherwise.
            headers: Extra response headers.
            path: Only requests whose path (relative to the base URL) matches this glob
                take the fault, e.g. ``"/items"`` or ``"/t/*/items/page"``.

        Raises:
            ConfigError: An argument is invalid or does not fit the fault kind.
        """
        fault = make_fault(
            status, retry_after=retry_after, problem=problem, body=body, headers=headers, path=path
        )
        self._faults.push(fault, times)

    def pending_faults(self) -> int:
        """Scripted faults not yet taken."""
        return len(self._faults)

    def clear_faults(self) -> None:
        """Drop every scripted fault."""
        self._faults.clear()

    def set_rate_limit(
        self,
        style: RateLimitStyle | None = "ietf",
        *,
        limit: int = 100,
        window: Duration = "60s",
        reset: ResetFormat | None = None,
        reset_after: bool = False,
        per: RateLimitScope = "api",
    ) -> None:
        """Count requests in fixed windows, send rate-limit headers, answer 429 when used up.

        A window opens with the first request and lasts ``window``. Every answered request
        counts (429s given by the limiter do not); headers report the remaining count after
        the request. Exhausted: ``429`` with ``Retry-After`` (seconds to the window's end)
        and a problem body. ``style=None`` turns limiting off.

        Args:
            style: ``"ietf"``: ``RateLimit: "default";r=<remaining>;t=<seconds>`` and
                ``RateLimit-Policy: "default";q=<limit>;w=<window seconds>``. ``"legacy"``:
                ``RateLimit-Limit``, ``RateLimit-Remaining``, ``RateLimit-Reset`` (delta
                seconds). ``"vendor"``: ``X-RateLimit-Limit``/``-Remaining``/``-Reset``.
                ``"vendor-x-rate"``: the same under ``X-Rate-Limit-*``.
            limit: Requests per window.
            window: Window length (a number means seconds).
            reset: Vendor styles only: the reset as ``"delta"`` seconds, ``"epoch"``
                seconds (default, rounded up) or ``"epoch_ms"``.
            reset_after: Vendor styles only: also send ``<prefix>-Reset-After`` (delta s).
            per: One window for the whole ``"api"``, per ``"tenant"``, or per ``"client"``
                (the ``x-client-id`` header).

        Raises:
            ConfigError: An argument is invalid.
        """
        if style is None:
            self._limiter = None
            return
        self._limiter = RateLimiter(
            style, limit=limit, window=window, reset=reset, reset_after=reset_after, per=per
        )

    def set_etags(self, enabled: bool = True) -> None:
        """Give every 200 data answer a strong ``ETag`` of its body, and answer ``304`` to a
        matching ``If-None-Match`` (weak comparison, lists and ``*``). Off by default."""
        self._etags = bool(enabled)

    def set_last_modified(self, enabled: bool = True) -> None:
        """Send ``Last-Modified`` (the tenant's last change, whole seconds) and answer
        ``304`` to an ``If-Modified-Since`` at or after it, when no ``If-None-Match`` was
        sent. Off by default: like real servers, it misses two changes within one second."""
        self._last_modified = bool(enabled)

    def set_latency(self, latency: Duration) -> None:
        """Make every HTTP request wait ``latency`` on the API's clock before it is served
        (with a ``VirtualClock`` it completes only once the test advances the clock).
        A number means seconds, as for every duration; ``0`` turns it off."""
        self._latency_ms = parse_duration(latency, "latency")

    @property
    def latency_ms(self) -> int:
        """The current latency in milliseconds."""
        return self._latency_ms

    # --- stats ------------------------------------------------------------------------------

    @property
    def calls(self) -> int:
        """Requests served (direct listings and HTTP, faulted ones too; control excluded)."""
        return self._calls

    @property
    def log(self) -> list[RequestRecord]:
        """A copy of the request log, oldest first (the last ``log_limit`` requests)."""
        return list(self._log)

    def log_after(self, seq: int, limit: int | None = None) -> list[RequestRecord]:
        """Log records with ``seq`` greater than ``seq`` (for incremental reading)."""
        # Records are contiguous in seq, so the first wanted one sits at a known offset.
        start = max(0, seq - self._log[0].seq + 1) if self._log else 0
        stop = None if limit is None else start + max(0, limit)
        return list(itertools.islice(self._log, start, stop))

    @property
    def last_seq(self) -> int:
        """``seq`` of the most recent request (``0`` before the first)."""
        return self._seq

    def reset_stats(self) -> None:
        """Zero :attr:`calls` and empty the log (``seq`` keeps counting; faults stay)."""
        self._calls = 0
        self._log.clear()

    # --- the request pipeline ---------------------------------------------------------------

    def _relative(self, segments: tuple[str, ...]) -> tuple[str, ...] | None:
        """Segments under the base path, or ``None`` for a path outside it."""
        size = len(self._base_segments)
        if segments[:size] != self._base_segments:
            return None
        return segments[size:]

    async def _handle(self, request: Request) -> Response | NoAnswer:
        """Answer one HTTP request (segments already relative to the base path)."""
        if self._latency_ms:
            await self._clock.sleep(self._latency_ms)
        segments = request.segments
        tenant = ""
        if len(segments) >= 2 and segments[0] == "t":
            tenant, segments = segments[1], segments[2:]
        route = route_of(segments)
        outcome, extra = self._admit(request, tenant)
        if outcome is None:
            data = self._tenants.get(tenant)
            outcome = serve_route(request, data, route, segments, self.page_size)
            if outcome.status == 200 and data is not None:
                outcome = conditional(
                    request, outcome, data, etags=self._etags, last_modified=self._last_modified
                )
            outcome.headers.extend(extra)
        status = outcome.status if isinstance(outcome, Response) else 0
        self._record(request, tenant, route, status)
        return outcome

    def _admit(
        self, request: Request, tenant: str
    ) -> tuple[Response | NoAnswer | None, list[tuple[str, str]]]:
        """Count the request, then apply a scripted fault or the rate limit."""
        self._calls += 1
        fault = self._faults.take(request.path)
        if fault is not None and fault.status == "network":
            return "network", []
        if fault is not None and fault.status == "timeout":
            return "timeout", []
        extra: list[tuple[str, str]] = []
        if self._limiter is not None:
            key = self._limiter.key(tenant, request.headers.get("x-client-id"))
            verdict = self._limiter.take(key, self._clock.now())
            extra = list(verdict.headers)
            if fault is None and not verdict.allowed:
                detail = f"at most {self._limiter.limit} requests per window"
                denied = problem_response(429, detail)
                denied.headers += [("retry-after", str(verdict.reset_seconds)), *extra]
                return denied, []
        if fault is not None:
            names = {name for name, _ in fault.headers}
            headers = [*fault.headers, *((k, v) for k, v in extra if k not in names)]
            return Response(fault.log_status, headers, fault.body), []
        return None, extra

    def _record(self, request: Request, tenant: str, route: str | None, status: int) -> None:
        self._seq += 1
        self._log.append(
            RequestRecord(
                seq=self._seq,
                at=self._clock.now(),
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers=redact(request.headers),
                status=status,
                client=request.headers.get("x-client-id"),
                tenant=tenant,
                route=route,
            )
        )

    def _direct(
        self,
        tenant: str,
        rest: tuple[str, ...],
        route: str,
        params: Mapping[str, object],
        run: Callable[[Dataset], _T],
    ) -> _T:
        """Serve a direct listing call through the same counting, faults and log."""
        query = {k: str(v) for k, v in params.items() if v is not None}
        prefix = ("t", tenant) if tenant else ()
        request = Request("GET", (*prefix, *rest), query)
        outcome, _ = self._admit(request, tenant)
        if outcome is None:
            try:
                result = run(self._tenants[tenant])
            except ConfigError:
                self._record(request, tenant, route, 400)
                raise
            self._record(request, tenant, route, 200)
            return result
        self._record(request, tenant, route, outcome.status if isinstance(outcome, Response) else 0)
        suffix = f"?{urlencode(request.query)}" if request.query else ""
        raise direct_error(self.base_url + request.path + suffix, outcome, self._clock.now())
