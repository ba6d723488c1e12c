"""Route matching and the answers of the data routes (pure: no counting, no faults)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import httpx

from watukuy.model.errors import ConfigError, HttpError

from ._faults import problem_body, retry_after_seconds
from ._items import Dataset, decode_token, encode_token
from ._items import positive_int as _positive
from ._protocol import (
    NoAnswer,
    Request,
    Response,
    etag_matches,
    http_date,
    json_response,
    parse_http_date,
    problem_response,
    strong_etag,
)

__all__ = ["conditional", "direct_error", "route_of", "serve_route"]

_ROUTES: Final = {("items",): "since", ("items", "page"): "page", ("items", "token"): "token"}


def _int_param(query: Mapping[str, str], name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"expected an integer, got {raw!r}", field=name) from None


def route_of(rest: tuple[str, ...]) -> str | None:
    if rest in _ROUTES:
        return _ROUTES[rest]
    if rest == ("items", "all"):
        return "all"
    if len(rest) == 2 and rest[0] == "items" and rest[1]:
        return "item"
    return None


def serve_route(
    request: Request, data: Dataset | None, route: str | None, rest: tuple[str, ...], page_size: int
) -> Response:
    """The answer of a data route for one tenant's dataset (``None``: unknown tenant)."""
    if route is None:
        return problem_response(404, f"no route {request.method} {request.path}")
    if request.method != "GET":
        denied = problem_response(405, f"{request.path} only answers GET")
        denied.headers.append(("allow", "GET"))
        return denied
    if data is None:
        return problem_response(404, f"unknown tenant in {request.path}")
    query = request.query
    try:
        if route == "item":
            item = data.raw(rest[1])
            if item is None:
                return problem_response(404, f"no item {rest[1]!r}")
            body: Any = item
        elif route == "since":
            since = query.get("since") or None
            size = _positive(_int_param(query, "limit", page_size), "limit")
            after = (query.get("after_id") or None) if since else None
            rows, more = data.since(since, after, size)
            body = {"data": rows, "has_more": more}
        elif route == "page":
            number = _positive(_int_param(query, "page", 1), "page")
            size = _positive(_int_param(query, "page_size", page_size), "page_size")
            rows, pages, more = data.page(number, size)
            body = {"data": rows, "page": number, "pages": pages, "has_more": more}
        elif route == "token":
            size = _positive(_int_param(query, "limit", page_size), "limit")
            token = query.get("cursor") or None
            rows, last = data.after(decode_token(token) if token else None, size)
            body = {"data": rows, "next": None if last is None else encode_token(last)}
        else:
            body = {"data": data.all_raw()}
    except ConfigError as error:
        return problem_response(400, error.message)
    return json_response(200, body)


def conditional(
    request: Request, response: Response, data: Dataset, *, etags: bool, last_modified: bool
) -> Response:
    """Add validators to a 200 and turn it into a 304 when the client's copy is current.

    ``If-None-Match`` wins over ``If-Modified-Since`` when both are sent (RFC 9110 §13.2.2).
    """
    validators: list[tuple[str, str]] = []
    fresh = False
    if etags:
        tag = strong_etag(response.body)
        validators.append(("etag", tag))
        fresh = etag_matches(request.headers.get("if-none-match"), tag)
    if last_modified:
        validators.append(("last-modified", http_date(data.modified_at)))
        since = parse_http_date(request.headers.get("if-modified-since"))
        if "if-none-match" not in request.headers and since is not None:
            fresh = (data.modified_at // 1000) * 1000 <= since
    if fresh:
        return Response(304, validators)
    response.headers.extend(validators)
    return response


def direct_error(url: str, outcome: Response | NoAnswer, now: int) -> Exception:
    """What a direct listing call raises for a scripted or rate-limited answer."""
    if outcome == "network":
        return httpx.ConnectError("connection dropped (scripted fault)", request=_get(url))
    if outcome == "timeout":
        return httpx.ReadTimeout("no answer (scripted fault)", request=_get(url))
    assert isinstance(outcome, Response)
    text = outcome.body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError as error:
        if outcome.status < 400:
            return error  # what parsing the body would raise
        parsed = None
    if outcome.status < 400:
        return ValueError(
            f"a scripted {outcome.status} answer has no direct-call form; use an HTTP face"
        )
    problem = parsed if isinstance(parsed, dict) else None
    title = (problem or {}).get("title") or problem_body(outcome.status)["title"]
    header = outcome.header("retry-after")
    return HttpError(
        f"GET {url} responded {outcome.status}: {title}",
        status=outcome.status,
        url=url,
        method="GET",
        retry_after=None if header is None else retry_after_seconds(header, now),
        problem=problem,
        body_text=text[:65_536],
    )


def _get(url: str) -> httpx.Request:
    return httpx.Request("GET", url)
