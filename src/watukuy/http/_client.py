"""``ctx.http``: one request at a time, done the way a rate-limited API expects.

For every request the helper builds the URL, charges the budget, adds conditional
headers from stored validators, sends exactly once (it never retries: the scheduler owns
retries), reads rate-limit headers, stores new validators, and turns error answers into
:class:`~watukuy.model.errors.HttpError`. Network errors and timeouts propagate as httpx
raised them; the scheduler treats them as fetch failures.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import httpx

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, HttpError, LeaseLostError
from watukuy.model.http_port import HttpScope
from watukuy.model.redact import serialize_error
from watukuy.model.rows import RateLimitInfo, Validator

from ._problem import parse_problem_details, problem_summary
from ._ratelimit import parse_rate_limit, parse_retry_after
from ._redact import REDACTED, Redaction
from ._redirects import send_following
from ._response import MAX_ERROR_BODY, HttpResponse, read_error_text
from ._url import QueryParams, build_url, url_hash

__all__ = ["HttpClient"]

_CONDITIONAL_METHODS: Final = frozenset({"GET", "HEAD"})


def _method(value: object) -> str:
    if not isinstance(value, str) or not value.strip().isalpha():
        raise ConfigError(f"expected an HTTP method like 'GET', got {value!r}", field="method")
    return value.strip().upper()


def _cost(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"expected a number >= 0, got {value!r}", field="cost")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"expected a finite number >= 0, got {value!r}", field="cost")
    return float(value)


def _headers(
    defaults: Mapping[str, str], given: Mapping[str, str] | None, redaction: Redaction
) -> httpx.Headers:
    headers = httpx.Headers(defaults)
    if given is None:
        return headers
    if not isinstance(given, Mapping):
        raise ConfigError(
            f"expected a mapping of header names to strings, got {given!r}", field="headers"
        )
    # Typed as objects: callers outside mypy pass anything, and the check below says so.
    pairs: Iterable[tuple[object, object]] = given.items()
    for name, value in pairs:
        if not isinstance(name, str) or not isinstance(value, str):
            shown = REDACTED if redaction.is_sensitive(name) else repr(value)
            raise ConfigError(
                f"expected string header names and values, got {name!r}: {shown}",
                field="headers",
            )
        # Caller headers replace the defaults of the same name, whatever their casing.
        headers[name] = value
    return headers


def _described(error: Exception, verb: str, shown_url: str, request: httpx.Request) -> Exception:
    """A request that got no answer, told with its type, method and (masked) URL.

    httpx's own messages often say nothing (``str(httpx.ReadTimeout())`` is empty), and
    never say which request failed. The error keeps its type, so ``except
    httpx.ReadTimeout`` still catches it; the original is its ``__cause__``. Anything that
    is not an ``httpx.RequestError`` is returned as it is.
    """
    if not isinstance(error, httpx.RequestError):
        return error
    detail = str(error).strip()
    message = f"{type(error).__name__} on {verb} {shown_url}" + (f": {detail}" if detail else "")
    try:
        return type(error)(message, request=request)
    except TypeError:  # a subclass of the caller's own with another signature
        return error


_HOLD_UNBOUNDED_MS: Final = 60_000
_HOLD_MAX_MS: Final = 300_000


def _hold_ms(timeout: httpx.Timeout) -> int:
    """How long a budget grant may stay held for one request: what its timeouts allow
    (waiting for a connection, connecting, writing, reading), at most five minutes; a
    minute when a phase has no timeout."""
    phases = (timeout.pool, timeout.connect, timeout.write, timeout.read)
    if any(phase is None for phase in phases):
        return _HOLD_UNBOUNDED_MS
    return min(_HOLD_MAX_MS, math.ceil(sum(phase or 0.0 for phase in phases) * 1_000))


class HttpClient:
    """The ``ctx.http`` of one lane cycle of one (poller, partition) key.

    It implements :class:`watukuy.FetchHttp`, the type of ``FetchContext.http``. Build it
    with :meth:`HttpxFactory.bind <watukuy.http.HttpxFactory.bind>`; the engine does that
    for you. Every request goes out once, with ``user-agent`` and
    ``accept: application/json`` unless you pass your own.

    Args:
        client: Returns the shared ``httpx.AsyncClient`` (called once per request).
        scope: The key, lane, store, budget and observations of this cycle.
        user_agent: Default ``User-Agent`` header.
        slots: Requests allowed in the client's pool at once (``None``: no limit); the
            others wait here, in order, until one of them has its answer.
    """

    def __init__(
        self,
        client: Callable[[], httpx.AsyncClient],
        scope: HttpScope,
        *,
        user_agent: str,
        slots: Callable[[], asyncio.Semaphore | None] | None = None,
    ) -> None:
        self._client = client
        self._slots = slots
        self._scope = scope
        self._defaults = {"user-agent": user_agent, "accept": "application/json"}

    async def get(
        self,
        url: str | httpx.URL,
        *,
        params: QueryParams | None = None,
        headers: Mapping[str, str] | None = None,
        cost: float | None = None,
        validators: bool | None = None,
        timeout: Duration | None = None,
        raise_for_status: bool = True,
    ) -> HttpResponse:
        """Send a ``GET``; conditional (``If-None-Match`` / ``If-Modified-Since``) by default.

        See :meth:`request` for the arguments.
        """
        return await self.request(
            "GET",
            url,
            params=params,
            headers=headers,
            cost=cost,
            validators=validators,
            timeout=timeout,
            raise_for_status=raise_for_status,
        )

    async def request(
        self,
        method: str,
        url: str | httpx.URL,
        *,
        params: QueryParams | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        content: str | bytes | None = None,
        cost: float | None = None,
        validators: bool | None = None,
        timeout: Duration | None = None,
        raise_for_status: bool = True,
    ) -> HttpResponse:
        """Send one request.

        Args:
            method: HTTP method, any case.
            url: Absolute URL, or one relative to the ``base_url`` of the client (httpx's
                rule: its path is appended to the base URL's); ``params`` are appended to its
                query string.
            params: Query parameters: ``None`` values are left out, lists repeat the key,
                booleans are written ``true`` / ``false``.
            headers: Extra headers; they replace the defaults of the same name.
            json: A JSON body (sets ``content-type: application/json``).
            content: A raw body.
            cost: Budget tokens to charge (default: the poller's ``budget_cost``);
                ``0`` skips the budget.
            validators: Send stored ``ETag`` / ``Last-Modified`` validators and store new
                ones. Default: on for ``GET`` and ``HEAD``.
            timeout: Request timeout (default: the HTTP client's own).
            raise_for_status: Raise :class:`HttpError` for answers other than 2xx and
                304; with ``False`` they are returned with ``ok`` false.

        Returns:
            The response, body read.

        Raises:
            ConfigError: A bad argument (a relative URL and no ``base_url``, an unsupported
                query value...).
            BudgetTimeoutError: No budget tokens within the budget's ``max_wait``.
            HttpError: A non-2xx answer other than 304 (unless ``raise_for_status=False``).
            LeaseLostError: Storing validators found the key's lease taken over.
            httpx.HTTPError: The request could not be sent or timed out.

        Redirects are followed when the client's ``follow_redirects`` is on (it is for the
        client the engine creates): within the origin as they are, to another origin
        without any sensitive header, query parameter or user info, never from ``https``
        to ``http`` (that raises :class:`HttpError`).
        """
        scope = self._scope
        verb = _method(method)
        client = self._client()
        # Resolved before anything else sees it: budgets, validators, redirect rules and
        # redaction all work on the absolute URL.
        final_url = build_url(url, params, base_url=client.base_url)
        request_headers = _headers(self._defaults, headers, scope.redaction)
        shown_url = scope.redaction.url(final_url)
        if json is not None and content is not None:
            raise ConfigError("pass either json or content, not both", field="json")
        seconds = None if timeout is None else parse_duration(timeout, "timeout") / 1_000
        charge = scope.budget_cost if cost is None else _cost(cost)
        conditional = verb in _CONDITIONAL_METHODS if validators is None else bool(validators)
        conditional = conditional and scope.validators  # the lane's rule wins (HttpScope)

        timeouts = httpx.Timeout(seconds) if seconds is not None else client.timeout
        if charge > 0 and scope.budget is not None and scope.gate is not None:
            scope.on_sending()  # the grant may take a while: nobody should wait for it
        held = await self._charge(charge, _hold_ms(timeouts))
        key = url_hash(final_url) if conditional else None
        if key is not None:
            await self._add_conditions(key, final_url, request_headers)

        request = client.build_request(
            verb,
            final_url,
            headers=request_headers,
            json=json,
            content=content,
            timeout=httpx.USE_CLIENT_DEFAULT if seconds is None else httpx.Timeout(seconds),
        )
        slots = None if self._slots is None else self._slots()
        if slots is not None:
            if slots.locked():
                scope.on_sending()  # other requests hold every slot
            try:
                await slots.acquire()
            except BaseException:
                await self._settle(held)  # cancelled while waiting: nothing was sent
                raise
        try:
            return await self._send(
                client,
                request,
                verb,
                final_url,
                shown_url,
                key,
                request_headers,
                held,
                raise_for_status,
            )
        finally:
            if slots is not None:
                slots.release()

    async def _send(
        self,
        client: httpx.AsyncClient,
        request: httpx.Request,
        verb: str,
        final_url: str,
        shown_url: str,
        key: str | None,
        request_headers: httpx.Headers,
        held: Any,
        raise_for_status: bool,
    ) -> HttpResponse:
        scope = self._scope
        started = scope.clock.now()
        scope.observations.requests += 1
        # An idle connection takes the request at once: it is written before this task
        # gives the event loop back.
        scope.on_sending()
        try:
            raw = await send_following(
                client, request, follow=client.follow_redirects, redaction=scope.redaction
            )
        except Exception as error:
            scope.logger.debug(
                "%s %s failed: %s",
                verb,
                shown_url,
                error,
                extra={
                    "method": verb,
                    "url": shown_url,
                    "duration_ms": scope.clock.now() - started,
                    "request_headers": scope.redaction.headers(request_headers),
                    "error": serialize_error(error, redaction=scope.redaction),
                },
            )
            described = _described(error, verb, shown_url, request)
            if described is error:
                raise
            raise described from error
        finally:
            # The vendor has the request (or never will): the grant counts from now on.
            await self._settle(held)
        try:
            return await self._receive(
                raw, verb, final_url, shown_url, key, request_headers, started, raise_for_status
            )
        except httpx.RequestError as error:  # the body failed halfway (a timeout, a reset)
            described = _described(error, verb, shown_url, request)
            if described is error:
                raise
            raise described from error
        finally:
            await raw.aclose()

    async def _receive(
        self,
        raw: httpx.Response,
        verb: str,
        url: str,
        shown_url: str,
        key: str | None,
        request_headers: httpx.Headers,
        started: int,
        raise_for_status: bool,
    ) -> HttpResponse:
        scope = self._scope
        now = scope.clock.now()
        rate_limit = parse_rate_limit(raw.headers, now)
        if rate_limit is not None:
            scope.observations.rate_limit = rate_limit
        status = raw.status_code
        scope.logger.debug(
            "%s %s -> %d",
            verb,
            shown_url,
            status,
            extra={
                "method": verb,
                "url": shown_url,
                "status": status,
                "duration_ms": now - started,
                "request_headers": scope.redaction.headers(request_headers),
                "response_headers": scope.redaction.headers(raw.headers),
            },
        )
        if status == 304:
            scope.observations.not_modified = True
            await raw.aread()
            return HttpResponse(raw, url=url, rate_limit=rate_limit, shown_url=shown_url)
        if 200 <= status < 300:
            await raw.aread()
            if key is not None:
                await self._store_validator(key, url, raw.headers)
            return HttpResponse(raw, url=url, rate_limit=rate_limit, shown_url=shown_url)
        if not raise_for_status:
            await raw.aread()
            received = scope.clock.now()

            def error() -> HttpError:
                text = raw.content[:MAX_ERROR_BODY].decode("utf-8", errors="replace")
                return self._http_error(raw, verb, shown_url, text, rate_limit, received)

            return HttpResponse(
                raw, url=url, rate_limit=rate_limit, shown_url=shown_url, error=error
            )
        body_text = await read_error_text(raw)
        raise self._http_error(raw, verb, shown_url, body_text, rate_limit, scope.clock.now())

    def _http_error(
        self,
        raw: httpx.Response,
        verb: str,
        shown_url: str,
        body_text: str,
        rate_limit: RateLimitInfo | None,
        now: int,
    ) -> HttpError:
        status = raw.status_code
        problem = parse_problem_details(raw.headers.get("content-type"), body_text)
        summary = problem_summary(problem)
        message = f"{verb} {shown_url} responded {status}" + (f": {summary}" if summary else "")
        return HttpError(
            self._scope.redaction.text(message),
            status=status,
            url=shown_url,
            method=verb,
            retry_after=parse_retry_after(raw.headers.get("retry-after"), now),
            rate_limit=rate_limit,
            problem=problem,
            body_text=body_text,
        )

    async def _charge(self, cost: float, hold_ms: int) -> Any:
        """Take ``cost`` from the poller's budget; returns the held grant to settle (or
        ``None``) once the request is answered."""
        scope = self._scope
        if scope.budget is None or scope.gate is None or cost <= 0:
            return None
        hold = getattr(scope.gate, "hold", None)
        held: Any = None
        if callable(hold):
            held = await hold(
                scope.budget,
                requester=f"{scope.key.poller}/{scope.key.partition}",
                lane=scope.lane,
                weight=scope.budget_weight,
                cost=cost,
                max_wait_ms=scope.max_wait_ms,
                hold_ms=hold_ms,
            )
            waited = int(held.waited_ms)
        else:
            waited = await scope.gate.acquire(
                scope.budget,
                requester=f"{scope.key.poller}/{scope.key.partition}",
                lane=scope.lane,
                weight=scope.budget_weight,
                cost=cost,
                max_wait_ms=scope.max_wait_ms,
            )
        if waited <= 0:
            return held
        scope.observations.waited_ms += waited
        try:
            outcome = scope.on_budget_wait(scope.budget, waited)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as error:
            # A hook never changes what the request does.
            scope.logger.warning(
                "on_budget_wait failed: %s",
                error,
                extra={"error": serialize_error(error, redaction=scope.redaction)},
            )
        return held

    async def _settle(self, held: Any) -> None:
        if held is None:
            return
        settle = getattr(self._scope.gate, "settle", None)
        if callable(settle):
            await settle(held)

    async def _add_conditions(self, key: str, url: str, headers: httpx.Headers) -> None:
        scope = self._scope
        try:
            stored = await scope.store.get_validator(scope.key, key)
        except Exception as error:
            # Validators only save bandwidth; without them the request is unconditional.
            scope.logger.warning(
                "could not load HTTP validators for %s: %s",
                scope.redaction.url(url),
                error,
                extra={"error": serialize_error(error, redaction=scope.redaction)},
            )
            return
        if stored is None:
            return
        if stored.etag and "if-none-match" not in headers:
            headers["if-none-match"] = stored.etag
        if stored.last_modified and "if-modified-since" not in headers:
            headers["if-modified-since"] = stored.last_modified

    async def _store_validator(self, key: str, url: str, headers: httpx.Headers) -> None:
        etag = headers.get("etag")
        last_modified = headers.get("last-modified")
        if etag is None and last_modified is None:
            return
        scope = self._scope
        validator = Validator(etag=etag, last_modified=last_modified, stored_at=scope.clock.now())
        if scope.observations.defer_validators:
            # The runner stores it once the page is committed (see HttpObservations).
            scope.observations.pending_validators.append((key, validator))
            return
        try:
            await scope.store.set_validator(scope.key, scope.lease(), key, validator)
        except LeaseLostError:
            raise
        except Exception as error:
            scope.logger.warning(
                "could not store HTTP validators for %s: %s",
                scope.redaction.url(url),
                error,
                extra={"error": serialize_error(error, redaction=scope.redaction)},
            )

    def __repr__(self) -> str:
        return f"<HttpClient {self._scope.key} lane={self._scope.lane}>"
