"""The HTTP shapes both faces of the fake API share: requests, responses and the log.

The in-process transport and the real server translate their own request objects into a
:class:`Request`, let the API answer with a :class:`Response` (or a fault kind meaning "no
answer at all"), and translate back. Nothing here touches a socket.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import unquote

from watukuy.model import json as wkjson
from watukuy.model.redact import DEFAULT_REDACTION, REDACTED

from ._faults import JSON_TYPE, PROBLEM_TYPE, problem_body

__all__ = [
    "NoAnswer",
    "Request",
    "RequestRecord",
    "Response",
    "etag_matches",
    "http_date",
    "json_response",
    "problem_response",
    "redact",
    "split_path",
    "strong_etag",
]

NoAnswer = Literal["network", "timeout"]
"""A request that gets no HTTP answer: the connection drops, or nothing ever comes."""


def redact(headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased headers with credentials (by the default redaction policy) as ``***``."""
    return {
        name.lower(): REDACTED if DEFAULT_REDACTION.is_sensitive(name) else value
        for name, value in headers.items()
    }


def split_path(raw_path: str) -> tuple[str, ...]:
    """Percent-decoded segments of an absolute path (``/t/a%2Fb/items`` -> t, a/b, items)."""
    return tuple(unquote(part) for part in raw_path.split("/")[1:])


@dataclass(frozen=True, slots=True)
class Request:
    """A request as the fake API sees it.

    Attributes:
        method: Upper-case method.
        segments: Decoded path segments relative to the base URL.
        query: Query parameters (the first value of a repeated name wins).
        headers: Headers with lower-case names.
        body: The request body.
    """

    method: str
    segments: tuple[str, ...]
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def path(self) -> str:
        """The decoded path relative to the base URL, as faults and the log see it."""
        return "/" + "/".join(self.segments)


@dataclass(slots=True)
class Response:
    """An answer: status, headers (lower-case names) and body."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """A header value by lower-case name."""
        return next((v for k, v in self.headers if k == name), None)


def json_response(status: int, data: Any, *, content_type: str = JSON_TYPE) -> Response:
    """A JSON answer."""
    return Response(status, [("content-type", content_type)], wkjson.dumps(data).encode())


def problem_response(status: int, detail: str | None = None, **extra: Any) -> Response:
    """An RFC 9457 Problem Details answer (``application/problem+json``)."""
    return json_response(status, problem_body(status, detail, **extra), content_type=PROBLEM_TYPE)


def strong_etag(body: bytes) -> str:
    """A strong entity tag derived from the body bytes."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """``If-None-Match`` evaluation: weak comparison, lists and ``*`` (RFC 9110 §13.1.2)."""
    if not if_none_match:
        return False
    wanted = etag.removeprefix("W/")
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == wanted:
            return True
    return False


def http_date(ms: int) -> str:
    """Epoch milliseconds as an IMF-fixdate (whole seconds, rounded down)."""
    moment = dt.datetime.fromtimestamp(ms // 1000, tz=dt.UTC)
    return email.utils.format_datetime(moment, usegmt=True)


def parse_http_date(value: str | None) -> int | None:
    """An HTTP-date as epoch ms, or ``None``."""
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp()) * 1000


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request the fake API served (the ``log``).

    Attributes:
        seq: 1-based position in the log since the API was created (never reset, so a
            harness can read the log incrementally with ``after=seq``).
        at: Clock time the request was answered (after any latency), epoch ms.
        method: HTTP method (``"GET"`` for direct listing calls).
        path: Decoded path relative to the base URL, e.g. ``/t/acme/items``.
        query: Query parameters.
        headers: Request headers, lower-cased, credentials redacted.
        status: Response status; ``0`` when no answer was sent (network or timeout fault).
        client: The ``x-client-id`` request header, when present.
        tenant: The tenant addressed (``""`` for the default tenant).
        route: ``"since"``, ``"page"``, ``"token"``, ``"all"``, ``"item"``, or ``None``
            for a path that is not a route.
    """

    seq: int
    at: int
    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    status: int
    client: str | None
    tenant: str
    route: str | None

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON data (what ``GET /_control/log`` returns)."""
        data = asdict(self)
        data["query"] = dict(self.query)
        data["headers"] = dict(self.headers)
        return data
