"""What ``ctx.http`` hands back: the response, and the capped read of an error body."""

from __future__ import annotations

import codecs
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Final, cast

import httpx

from watukuy.core import json as wkjson
from watukuy.core.errors import WatukuyError
from watukuy.core.rows import RateLimitInfo

__all__ = ["MAX_ERROR_BODY", "HttpResponse", "read_error_text"]

MAX_ERROR_BODY: Final = 64 * 1024
"""Bytes of an error body kept on :class:`~watukuy.core.errors.HttpError` (the rest is
never downloaded)."""


class HttpResponse:
    """An answer received through ``ctx.http``, body already read.

    Attributes:
        status: HTTP status code.
        ok: True for 2xx and for ``304 Not Modified``.
        not_modified: True for ``304 Not Modified`` (there is no body then).
        headers: Response headers (case-insensitive).
        url: The URL requested, query string included.
        rate_limit: Rate-limit headers of this response, parsed, or ``None``.
        raw: The underlying ``httpx.Response``.
    """

    __slots__ = ("headers", "not_modified", "rate_limit", "raw", "status", "url")

    def __init__(self, raw: httpx.Response, *, url: str, rate_limit: RateLimitInfo | None) -> None:
        self.raw = raw
        self.status: int = raw.status_code
        self.not_modified: bool = raw.status_code == 304
        self.headers: httpx.Headers = raw.headers
        self.url = url
        self.rate_limit = rate_limit

    @property
    def ok(self) -> bool:
        """True for a 2xx answer and for ``304 Not Modified``."""
        return 200 <= self.status < 300 or self.not_modified

    def _require_body(self) -> None:
        if self.not_modified:
            raise WatukuyError(
                f"{self.url} answered 304 Not Modified, which has no body; "
                "check response.not_modified before reading it",
                code="INVALID_STATE",
            )

    @property
    def content(self) -> bytes:
        """The body as bytes.

        Raises:
            WatukuyError: The response is a 304 (code ``INVALID_STATE``).
        """
        self._require_body()
        return self.raw.content

    @property
    def text(self) -> str:
        """The body decoded with the response charset (UTF-8 when none is given).

        Raises:
            WatukuyError: The response is a 304 (code ``INVALID_STATE``).
        """
        self._require_body()
        return self.raw.text

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            WatukuyError: The response is a 304 (code ``INVALID_STATE``).
            ValueError: The body is not JSON (a fetch failure for the scheduler).
        """
        self._require_body()
        return wkjson.loads(self.raw.content)

    def __repr__(self) -> str:
        return f"<HttpResponse {self.status} {self.url}>"


def _decode(data: bytes, charset: str | None) -> str:
    encoding = "utf-8"
    if charset:
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            pass
    return data.decode(encoding, errors="replace")


async def _read_head(raw: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of the body; the rest is never downloaded."""
    chunks: list[bytes] = []
    size = 0
    # httpx's byte iterator is an async generator; close it when we stop early.
    async with aclosing(cast("AsyncGenerator[bytes, None]", raw.aiter_bytes())) as stream:
        async for chunk in stream:
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    return b"".join(chunks)[:limit]


async def read_error_text(raw: httpx.Response) -> str:
    """The first :data:`MAX_ERROR_BODY` bytes of a streamed body, decoded leniently."""
    return _decode(await _read_head(raw, MAX_ERROR_BODY), raw.charset_encoding)
