"""What ``ctx.http`` hands back: the response, and the capped read of an error body."""

from __future__ import annotations

import codecs
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any, ClassVar, Final, Self, cast

import httpx

from watukuy.model import json as wkjson
from watukuy.model.errors import ErrorCode, HttpError, NotModifiedError, WatukuyError
from watukuy.model.rows import RateLimitInfo

__all__ = ["MAX_ERROR_BODY", "BodyError", "HttpResponse", "read_error_text"]

_SHOWN_BYTES: Final = 120


class BodyError(WatukuyError, ValueError):
    """A response body that is not what ``json()`` can read: HTML, another format, or
    bytes that are not UTF-8. Code ``INVALID_PAGE``; also a ``ValueError``."""

    default_code: ClassVar[ErrorCode] = "INVALID_PAGE"


MAX_ERROR_BODY: Final = 64 * 1024
"""Bytes of an error body kept on :class:`~watukuy.model.errors.HttpError` (the rest is
never downloaded)."""


class HttpResponse:
    """An answer received through ``ctx.http``, body already read; it implements
    :class:`watukuy.FetchResponse`, the type to annotate with.

    It reads like an ``httpx.Response``: ``status_code``, ``headers``, ``text``,
    ``content``, ``json()``, ``is_success`` and ``raise_for_status()``; ``status`` and
    ``ok`` are the same facts under shorter names.

    Attributes:
        status: HTTP status code (also ``status_code``).
        ok: True for 2xx and for ``304 Not Modified``.
        not_modified: True for ``304 Not Modified`` (there is no body then: reading it
            raises :class:`~watukuy.model.errors.NotModifiedError`).
        headers: Response headers (case-insensitive).
        url: The URL requested, query string included.
        rate_limit: Rate-limit headers of this response, parsed, or ``None``.
        raw: The underlying ``httpx.Response``.
    """

    __slots__ = (
        "_error",
        "_shown_url",
        "headers",
        "not_modified",
        "rate_limit",
        "raw",
        "status",
        "url",
    )

    def __init__(
        self,
        raw: httpx.Response,
        *,
        url: str,
        rate_limit: RateLimitInfo | None,
        shown_url: str | None = None,
        error: Callable[[], HttpError] | None = None,
    ) -> None:
        self.raw = raw
        self.status: int = raw.status_code
        self.not_modified: bool = raw.status_code == 304
        self.headers: httpx.Headers = raw.headers
        self.url = url
        self.rate_limit = rate_limit
        # The URL as errors may show it (credentials masked).
        self._shown_url = shown_url if shown_url is not None else url
        # Builds the HttpError this answer stands for (responses fetched with
        # ``raise_for_status=False``); None for 2xx and 304.
        self._error = error

    @property
    def status_code(self) -> int:
        """HTTP status code, as httpx names it (same as ``status``)."""
        return self.status

    @property
    def ok(self) -> bool:
        """True for a 2xx answer and for ``304 Not Modified``."""
        return 200 <= self.status < 300 or self.not_modified

    @property
    def is_success(self) -> bool:
        """True for a 2xx answer and for ``304 Not Modified`` (same as ``ok``)."""
        return self.ok

    def raise_for_status(self) -> Self:
        """Raise the :class:`~watukuy.model.errors.HttpError` ``ctx.http`` would have
        raised, for an answer other than 2xx and 304; returns the response otherwise.

        Only useful after ``raise_for_status=False``: by default ``ctx.http`` raises
        before handing such an answer back.

        Raises:
            HttpError: The answer is not 2xx nor 304.
        """
        if self.ok:
            return self
        if self._error is not None:
            raise self._error()
        raise HttpError(
            f"{self._method()} {self._shown_url} responded {self.status}",
            status=self.status,
            url=self._shown_url,
            method=self._method(),
        )

    def _method(self) -> str:
        return self.raw.request.method if self._has_request() else "GET"

    def _require_body(self) -> None:
        if self.not_modified:
            raise NotModifiedError(
                f"{self._shown_url} answered 304 Not Modified, which has no body; "
                "check response.not_modified before reading it"
            )

    @property
    def content(self) -> bytes:
        """The body as bytes.

        Raises:
            NotModifiedError: The response is a 304 (code ``INVALID_STATE``); escaping
                ``fetch``, it reads as an unchanged page.
        """
        self._require_body()
        return self.raw.content

    @property
    def text(self) -> str:
        """The body decoded with the response charset (UTF-8 when none is given).

        Raises:
            NotModifiedError: The response is a 304 (code ``INVALID_STATE``); escaping
                ``fetch``, it reads as an unchanged page.
        """
        self._require_body()
        return self.raw.text

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            NotModifiedError: The response is a 304 (code ``INVALID_STATE``); escaping
                ``fetch``, it reads as an unchanged page.
            BodyError: The body is not JSON, or not valid UTF-8 (a fetch failure for the
                scheduler). The message says what came instead: status, content type, the
                first bytes and the URL (credentials masked).
        """
        self._require_body()
        content = self.raw.content
        try:
            return wkjson.loads(content)
        except ValueError as error:
            raise self._bad_body(content, error) from error

    def _bad_body(self, content: bytes, error: ValueError) -> BodyError:
        kind = self.headers.get("content-type") or "no content type"
        try:
            content.decode("utf-8")
        except UnicodeDecodeError as bad:
            problem = f"a body that is not valid UTF-8 (byte {bad.start})"
        else:
            json_type = "json" in kind.lower()
            problem = f"invalid JSON ({error})" if json_type else "a body that is not JSON"
        head = content[:_SHOWN_BYTES]
        more = f"... ({len(content)} bytes)" if len(content) > _SHOWN_BYTES else ""
        return BodyError(
            f"{self._method()} {self._shown_url} answered {self.status} ({kind}) with {problem}; "
            f"it starts {head!r}{more}"
        )

    def _has_request(self) -> bool:
        try:
            self.raw.request  # noqa: B018 - httpx raises when the response has no request
        except RuntimeError:
            return False
        return True

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
