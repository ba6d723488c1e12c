"""Following redirects without handing credentials to another server.

httpx, asked to follow redirects, strips only ``Authorization`` and ``Cookie`` when a
redirect leaves the origin; an ``X-Api-Key`` header or an ``?api_key=`` parameter goes
along. watukuy follows redirects itself, one hop at a time:

- within one origin (same scheme, host and port) the request is repeated as it was;
- to another origin, every header and query parameter the
  :class:`~watukuy.model.redact.Redaction` policy calls sensitive is dropped, and so is the
  URL's user info (``Authorization``, ``Cookie``, ``X-Api-Key``, ``X-Auth-Token``, ...);
- ``https`` to ``http`` is refused (an :class:`~watukuy.model.errors.HttpError`), as is any
  other scheme, and more than :data:`MAX_REDIRECTS` hops;
- 303 (and 301/302 after a ``POST``) become a ``GET`` without body, as browsers do.
"""

from __future__ import annotations

from typing import Final, Literal

import httpx

from watukuy.model.errors import HttpError
from watukuy.model.redact import DEFAULT_REDACTION, Redaction

__all__ = ["MAX_REDIRECTS", "REDIRECT_STATUSES", "CrossOrigin", "same_origin", "send_following"]

MAX_REDIRECTS: Final = 20
"""Hops followed before a request fails (the same limit as httpx)."""

REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})

CrossOrigin = Literal["strip", "refuse"]
"""What a redirect to another origin does: drop the credentials and go, or fail."""

_BODY_HEADERS: Final = ("content-length", "content-type", "transfer-encoding")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (
        url.scheme,
        url.host,
        url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme),
    )


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    """True when both URLs have the same scheme, host and (effective) port."""
    return _origin(a) == _origin(b)


def _refused(
    request: httpx.Request, response: httpx.Response, why: str, redaction: Redaction
) -> HttpError:
    url = redaction.url(str(request.url))
    return HttpError(
        redaction.text(f"{request.method} {url} answered {response.status_code}: {why}"),
        status=response.status_code,
        url=url,
        method=request.method,
    )


def _target(request: httpx.Request, response: httpx.Response, redaction: Redaction) -> httpx.URL:
    location = response.headers["location"]
    try:
        url = httpx.URL(location)
    except httpx.InvalidURL:
        raise _refused(request, response, "the Location header is not a URL", redaction) from None
    if url.is_relative_url:
        url = request.url.join(url)
    elif url.scheme and not url.host:
        url = url.copy_with(host=request.url.host)
    return url.copy_with(fragment=None)


def _next_request(
    request: httpx.Request,
    response: httpx.Response,
    redaction: Redaction,
    cross_origin: CrossOrigin,
) -> httpx.Request:
    url = _target(request, response, redaction)
    shown = redaction.url(str(url))
    if url.scheme not in _DEFAULT_PORTS:
        raise _refused(request, response, f"refused a redirect to {shown}", redaction)
    if request.url.scheme == "https" and url.scheme == "http":
        raise _refused(
            request, response, f"refused a redirect from https to http ({shown})", redaction
        )
    headers = httpx.Headers(request.headers)
    headers.pop("host", None)
    if not same_origin(url, request.url):
        if cross_origin == "refuse":
            raise _refused(
                request, response, f"refused a redirect to another origin ({shown})", redaction
            )
        for name in list(headers.keys()):
            if redaction.is_sensitive(name):
                del headers[name]
        kept = [(k, v) for k, v in url.params.multi_items() if not redaction.is_sensitive(k)]
        url = url.copy_with(userinfo=b"", params=kept or None)
    method = request.method
    status = response.status_code
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method = "GET"
    content: bytes | None = request.content
    if method != request.method:
        content = None
        for name in _BODY_HEADERS:
            headers.pop(name, None)
    return httpx.Request(
        method, url, headers=headers, content=content, extensions=request.extensions
    )


async def send_following(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    follow: bool,
    redaction: Redaction = DEFAULT_REDACTION,
    cross_origin: CrossOrigin = "strip",
    max_redirects: int = MAX_REDIRECTS,
) -> httpx.Response:
    """Send ``request`` (streamed) and, when ``follow``, follow its redirects safely.

    Returns the first answer that is not a redirect (or a redirect without ``Location``,
    or any answer when ``follow`` is false); its body is not read yet.

    Raises:
        HttpError: A redirect was refused (https to http, another scheme, another origin
            with ``cross_origin="refuse"``, too many hops).
        httpx.HTTPError: A request could not be sent.
    """
    response = await client.send(request, stream=True, follow_redirects=False)
    hops = 0
    while follow and response.status_code in REDIRECT_STATUSES and "location" in response.headers:
        try:
            if hops >= max_redirects:
                raise _refused(request, response, f"more than {max_redirects} redirects", redaction)
            request = _next_request(request, response, redaction, cross_origin)
        finally:
            await response.aclose()
        hops += 1
        # auth=None: the client's own auth belongs to the first request; a same-origin hop
        # carries its Authorization header along, another origin gets none.
        response = await client.send(request, stream=True, follow_redirects=False, auth=None)
    return response
