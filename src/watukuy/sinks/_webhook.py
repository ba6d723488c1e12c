"""Re-emit events as signed webhooks: the promise of watukuy, made literal."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from types import TracebackType
from typing import Any, Final

import httpx

from watukuy._system import SystemClock
from watukuy.http import DEFAULT_REDACTION, REDACTED, parse_retry_after
from watukuy.http._redirects import send_following
from watukuy.model.durations import Duration
from watukuy.model.errors import ConfigError, HttpError
from watukuy.model.events import Event
from watukuy.model.ports import Clock
from watukuy.runtime.context import HandlerContext

from ._common import optional_seconds
from ._serialize import SinkFormat, check_format, serialize_event
from ._signing import decode_webhook_secret, sign_webhook

__all__ = [
    "DEFAULT_WEBHOOK_TIMEOUT",
    "MAX_WEBHOOK_ERROR_BODY_CHARS",
    "WebhookDeliveryError",
    "WebhookSink",
    "webhook_sink",
]

DEFAULT_WEBHOOK_TIMEOUT: Final = "10s"
"""Default per-request timeout of :func:`webhook_sink`."""

MAX_WEBHOOK_ERROR_BODY_CHARS: Final = 4096
"""Characters of a failed answer's body kept on :class:`WebhookDeliveryError`."""

_SNIPPET_CHARS: Final = 200


class WebhookDeliveryError(HttpError):
    """The receiver answered with a status outside ``success_statuses``.

    A subclass of :class:`~watukuy.HttpError` (code ``HTTP``), so the dispatcher retries the
    event with backoff and finally parks it with these details attached.

    Attributes:
        status: The HTTP status the receiver sent.
        url: The webhook URL, without credentials or query string.
        method: Always ``"POST"``.
        retry_after: The receiver's ``Retry-After``, in seconds, when it sent one.
        body_text: The start of the answer's body (at most
            :data:`MAX_WEBHOOK_ERROR_BODY_CHARS` characters, then ``…``).
    """

    def __init__(
        self, *, status: int, url: str, body_text: str = "", retry_after: float | None = None
    ) -> None:
        message = f"POST {url} answered {status}"
        snippet = " ".join(body_text.split())
        if snippet:
            cut = snippet[:_SNIPPET_CHARS] + ("…" if len(snippet) > _SNIPPET_CHARS else "")
            message += f": {cut}"
        super().__init__(
            message,
            status=status,
            url=url,
            method="POST",
            retry_after=retry_after,
            body_text=body_text,
        )


def _public_url(url: httpx.URL) -> str:
    """The URL without user info and query: what may appear in errors and logs."""
    return str(url.copy_with(userinfo=b"", query=None, fragment=None))


def _check_url(url: object) -> httpx.URL:
    try:
        parsed = httpx.URL(url) if isinstance(url, str | httpx.URL) else None
    except (httpx.InvalidURL, TypeError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(f"expected an absolute http(s) URL, got {url!r}", field="url")
    return parsed


def _check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise ConfigError(f"expected a mapping of strings, got {headers!r}", field="headers")
    lowered: dict[str, str] = {}
    # Typed as objects: callers outside mypy pass anything, and the check below says so.
    pairs: Iterable[tuple[object, object]] = headers.items()
    for name, value in pairs:
        if not isinstance(name, str) or not isinstance(value, str):
            shown = REDACTED if DEFAULT_REDACTION.is_sensitive(name) else repr(value)
            raise ConfigError(
                f"expected string names and values, got {name!r}: {shown}", field="headers"
            )
        lowered[name.lower()] = value
    return lowered


class WebhookSink:
    """POSTs each event to one URL, signed per Standard Webhooks (see :func:`webhook_sink`).

    An ``async with`` block (or :meth:`aclose`) closes the HTTP client the sink created
    itself; a client you passed in stays yours to close.
    """

    def __init__(
        self,
        url: str | httpx.URL,
        secret: str | bytes,
        *,
        headers: Mapping[str, str] | None = None,
        format: SinkFormat = "cloudevents",
        timeout: Duration = DEFAULT_WEBHOOK_TIMEOUT,
        success_statuses: Container[int] = range(200, 300),
        client: httpx.AsyncClient | None = None,
        clock: Clock | None = None,
        follow_redirects: bool = False,
    ) -> None:
        self._url = _check_url(url)
        if not isinstance(follow_redirects, bool):
            raise ConfigError(
                f"expected a bool, got {follow_redirects!r}", field="follow_redirects"
            )
        self._follow = follow_redirects
        self.url: str = _public_url(self._url)
        """The target, without credentials or query string (safe to log)."""
        self._key = decode_webhook_secret(secret)
        self._headers = _check_headers(headers)
        self.format: SinkFormat = check_format(format)
        seconds = optional_seconds(timeout, "timeout")
        if seconds is None:
            raise ConfigError("expected a positive duration, got None", field="timeout")
        self._timeout = seconds
        statuses: object = success_statuses
        if not isinstance(statuses, Container) or isinstance(statuses, str | bytes):
            raise ConfigError(
                f"expected a container of status codes such as range(200, 300), got "
                f"{success_statuses!r}",
                field="success_statuses",
            )
        self._success = success_statuses
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise ConfigError(f"expected an httpx.AsyncClient, got {client!r}", field="client")
        self._client = client
        self._owns_client = client is None
        self._clock: Clock = clock if clock is not None else SystemClock()

    def __repr__(self) -> str:
        return f"WebhookSink({self.url!r}, format={self.format!r})"

    async def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Deliver one event, then ``ctx.ack()``; raise when the receiver did not accept it."""
        await self.publish(event)
        ctx.ack()

    async def publish(self, event: Event[Any]) -> int:
        """POST one event and return the receiver's status.

        Network failures and timeouts propagate as httpx errors; the sink never retries on
        its own (the dispatcher does, with backoff).

        Raises:
            WebhookDeliveryError: The status is not in ``success_statuses``.
        """
        wire = serialize_event(event, self.format)
        timestamp = str(self._clock.now() // 1000)
        headers = dict(self._headers)
        headers.update(
            {
                "content-type": wire.content_type,
                "webhook-id": event.id,
                "webhook-timestamp": timestamp,
                "webhook-signature": sign_webhook(self._key, event.id, timestamp, wire.body),
            }
        )
        client = self._client
        if client is None:
            client = self._client = httpx.AsyncClient()
        request = client.build_request(
            "POST", self._url, content=wire.body, headers=headers, timeout=self._timeout
        )
        # The client's own follow_redirects is ignored: a signed request goes to this URL,
        # and with follow_redirects=True to other paths of its origin, never elsewhere.
        response = await send_following(client, request, follow=self._follow, cross_origin="refuse")
        try:
            if response.status_code in self._success:
                return response.status_code
            body_text = await _read_text(response, MAX_WEBHOOK_ERROR_BODY_CHARS)
            raise WebhookDeliveryError(
                status=response.status_code,
                url=self.url,
                body_text=body_text,
                retry_after=parse_retry_after(
                    response.headers.get("retry-after"), self._clock.now()
                ),
            )
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if the sink created it (a later event opens a new one)."""
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def __aenter__(self) -> WebhookSink:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _read_text(response: httpx.Response, limit: int) -> str:
    """The start of a body, decoded leniently; the rest is never read into memory."""
    chunks: list[str] = []
    size = 0
    truncated = False
    try:
        async for chunk in response.aiter_text():
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                truncated = True
                break
    except httpx.HTTPError:
        pass  # the body is only a diagnostic; the status already says what failed
    text = "".join(chunks)
    return text[:limit] + "…" if truncated else text


def webhook_sink(
    url: str | httpx.URL,
    secret: str | bytes,
    headers: Mapping[str, str] | None = None,
    format: SinkFormat = "cloudevents",
    timeout: Duration = DEFAULT_WEBHOOK_TIMEOUT,
    success_statuses: Container[int] = range(200, 300),
    client: httpx.AsyncClient | None = None,
    *,
    clock: Clock | None = None,
    follow_redirects: bool = False,
) -> WebhookSink:
    """A handler that POSTs each event as a signed webhook (Standard Webhooks).

    Each request carries ``webhook-id`` (``event.id``, stable across redeliveries, so a
    receiver dedups on it), ``webhook-timestamp`` (unix seconds) and ``webhook-signature``
    (``v1,<base64 HMAC-SHA256>`` over ``<id>.<timestamp>.<body>``). The body is the event
    as a CloudEvent (``application/cloudevents+json``); with ``format="changes"``, a
    CloudEvent whose ``data`` is only the JSON Patch of the change
    (``datacontenttype: application/json-patch+json``, see
    https://watukuy.readthedocs.io/en/latest/changes/); with
    ``format="raw"``, the watukuy envelope (``application/json``)::

        engine.on("orders", webhook_sink(
            "https://customer.example.com/hooks/orders",
            secret=os.environ["WEBHOOK_SECRET"],      # "whsec_<base64>" or a raw string
            headers={"x-tenant": "acme"},
        ))

    An answer outside ``success_statuses`` raises :class:`WebhookDeliveryError`, network
    errors propagate, and the dispatcher retries and eventually parks the event. Receivers
    check requests with :func:`verify_webhook_signature`.

    Args:
        url: Absolute ``http``/``https`` URL of the receiver.
        secret: ``whsec_<base64>``, a raw string, or key bytes.
        headers: Extra request headers; they never replace ``content-type`` or the
            ``webhook-*`` headers.
        format: ``"cloudevents"``, ``"changes"`` or ``"raw"``.
        timeout: Per-request timeout.
        success_statuses: The statuses that count as delivered (default: any 2xx).
        client: An ``httpx.AsyncClient`` to send with (you close it); default: one the sink
            creates on first use and closes in :meth:`WebhookSink.aclose`.
        clock: Source of ``webhook-timestamp`` (default: the system clock).
        follow_redirects: Follow redirects within the URL's origin (same scheme, host and
            port). Off by default: a redirect answer is then a failed delivery. A redirect
            to another origin, or from ``https`` to ``http``, is always refused, so the
            signature and your headers never reach another server. The ``client``'s own
            ``follow_redirects`` setting is ignored.

    Raises:
        ConfigError: An argument is invalid (the secret is never echoed).
    """
    return WebhookSink(
        url,
        secret,
        headers=headers,
        format=format,
        timeout=timeout,
        success_statuses=success_statuses,
        client=client,
        clock=clock,
        follow_redirects=follow_redirects,
    )
