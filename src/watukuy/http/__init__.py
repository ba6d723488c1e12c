"""``ctx.http``: the HTTP helper ``fetch`` receives, built on httpx.

:class:`HttpxFactory` owns one ``httpx.AsyncClient`` for the whole engine and hands each
lane cycle an :class:`HttpClient` bound to its (poller, partition) key. The helper sends
every request exactly once and:

- builds the query string (``None`` left out, lists repeated, booleans ``true``/``false``);
- charges the poller's rate budget before sending;
- sends ``If-None-Match`` / ``If-Modified-Since`` from stored validators on ``GET`` and
  ``HEAD``, stores new ones, and reports ``304 Not Modified`` to the runner;
- parses rate-limit headers (:func:`parse_rate_limit`) for the scheduler's pacing;
- raises :class:`~watukuy.model.errors.HttpError` with ``Retry-After``
  (:func:`parse_retry_after`) and RFC 9457 Problem Details
  (:func:`parse_problem_details`) for error answers;
- never puts a credential in a log line, an error or a hook record (:class:`Redaction`,
  :func:`redact_url`, :func:`redact_headers`, :class:`RedactingFilter`).
"""

# ruff: noqa: E402  (httpx is imported first, by import_httpx, then the modules using it)

from __future__ import annotations

from ._import import import_httpx

import_httpx()  # before any module of this package runs its own ``import httpx``

from ._client import HttpClient
from ._factory import DEFAULT_LIMITS, DEFAULT_TIMEOUT, HttpxFactory, default_user_agent
from ._problem import parse_problem_details
from ._ratelimit import parse_rate_limit, parse_retry_after
from ._redact import (
    DEFAULT_REDACTION,
    REDACTED,
    SENSITIVE_HEADERS,
    RedactingFilter,
    Redaction,
    redact_headers,
    redact_text,
    redact_url,
)
from ._response import MAX_ERROR_BODY, HttpResponse
from ._url import QueryParams, QueryScalar, QueryValue, build_url, url_hash

__all__ = [
    "DEFAULT_REDACTION",
    "DEFAULT_LIMITS",
    "DEFAULT_TIMEOUT",
    "MAX_ERROR_BODY",
    "REDACTED",
    "SENSITIVE_HEADERS",
    "HttpClient",
    "HttpResponse",
    "HttpxFactory",
    "QueryParams",
    "QueryScalar",
    "QueryValue",
    "Redaction",
    "RedactingFilter",
    "build_url",
    "default_user_agent",
    "parse_problem_details",
    "parse_rate_limit",
    "parse_retry_after",
    "redact_headers",
    "redact_text",
    "redact_url",
    "url_hash",
]
