"""What ``fetch`` may do with ``ctx.http``, as types.

:class:`FetchHttp` is the shape of ``ctx.http`` and :class:`FetchResponse` the shape of what
its requests return. Both are protocols, so this module imports no HTTP library: the
helper in :mod:`watukuy.http` (``HttpClient`` and ``HttpResponse``, built on httpx)
implements them, and a type checker reading a ``fetch`` annotated with
``ctx: wk.FetchContext[...]`` knows every attribute it may use. A misspelt one
(``response.not_modifed``) is an error there rather than at three in the morning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self, TypeAlias, runtime_checkable

from .durations import Duration
from .rows import RateLimitInfo

__all__ = ["FetchHttp", "FetchResponse", "QueryParams", "QueryScalar", "QueryValue"]

QueryScalar: TypeAlias = str | int | float | bool | None
"""One query value; ``None`` means "leave the parameter out"."""

QueryValue: TypeAlias = QueryScalar | Sequence[QueryScalar]
"""A query value, or a list of them (the key is repeated once per element)."""

QueryParams: TypeAlias = Mapping[str, QueryValue]
"""The ``params=`` of a request: names to values, appended to the URL's query string."""


@runtime_checkable
class FetchResponse(Protocol):
    """An answer received through ``ctx.http``, body already read.

    It reads like an ``httpx.Response`` (``status_code``, ``headers``, ``text``,
    ``content``, ``json()``, ``is_success``, ``raise_for_status()``), plus ``status`` and
    ``ok`` as shorter names, ``not_modified`` for a ``304`` and the parsed ``rate_limit``.
    Reading the body of a ``304`` raises
    :class:`~watukuy.model.errors.NotModifiedError`: check ``not_modified`` first.
    """

    @property
    def status(self) -> int:
        """HTTP status code (also ``status_code``)."""
        ...

    @property
    def status_code(self) -> int:
        """HTTP status code, as httpx names it."""
        ...

    @property
    def ok(self) -> bool:
        """True for a 2xx answer and for ``304 Not Modified``."""
        ...

    @property
    def is_success(self) -> bool:
        """Same as ``ok``."""
        ...

    @property
    def not_modified(self) -> bool:
        """True for ``304 Not Modified``: the resource is as it was, and there is no body."""
        ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Response headers; names are looked up whatever their case."""
        ...

    @property
    def url(self) -> str:
        """The URL requested, absolute, query string included."""
        ...

    @property
    def rate_limit(self) -> RateLimitInfo | None:
        """The rate-limit headers of this answer, parsed, or ``None`` when it had none."""
        ...

    @property
    def raw(self) -> Any:
        """The HTTP library's own response object (an ``httpx.Response``), for anything
        this protocol does not cover."""
        ...

    @property
    def content(self) -> bytes:
        """The body as bytes."""
        ...

    @property
    def text(self) -> str:
        """The body decoded with the response charset (UTF-8 when none is given)."""
        ...

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            NotModifiedError: The answer is a ``304``.
            ValueError: The body is not JSON (a ``watukuy.http.BodyError``).
        """
        ...

    def raise_for_status(self) -> Self:
        """Raise the :class:`~watukuy.model.errors.HttpError` this answer stands for when it
        is neither 2xx nor ``304``; return the response otherwise."""
        ...


@runtime_checkable
class FetchHttp(Protocol):
    """``ctx.http``: the HTTP helper ``fetch`` receives, bound to its key and lane.

    Each call sends one request (never a retry), charged to the poller's budget, with
    stored validators on ``GET`` and ``HEAD``; see
    https://watukuy.readthedocs.io/en/latest/http/ for what it does and
    :class:`watukuy.http.HttpClient` for the implementation.
    """

    async def get(
        self,
        url: str,
        *,
        params: QueryParams | None = None,
        headers: Mapping[str, str] | None = None,
        cost: float | None = None,
        validators: bool | None = None,
        timeout: Duration | None = None,
        raise_for_status: bool = True,
    ) -> FetchResponse:
        """Send a ``GET``; see :meth:`request` for the arguments."""
        ...

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: QueryParams | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        content: str | bytes | None = None,
        cost: float | None = None,
        validators: bool | None = None,
        timeout: Duration | None = None,
        raise_for_status: bool = True,
    ) -> FetchResponse:
        """Send one request.

        Args:
            method: HTTP method, any case.
            url: An absolute URL, or one relative to the HTTP client's ``base_url``;
                ``params`` are appended to its query string.
            params: Query parameters: ``None`` values are left out, lists repeat the key,
                booleans are written ``true`` / ``false``.
            headers: Extra headers; they replace the defaults of the same name.
            json: A JSON body.
            content: A raw body.
            cost: Budget tokens to charge (default: the poller's ``budget_cost``).
            validators: Send and store ``ETag`` / ``Last-Modified`` validators (default: on
                for ``GET`` and ``HEAD``).
            timeout: Request timeout (default: the HTTP client's own).
            raise_for_status: Raise :class:`~watukuy.model.errors.HttpError` for an answer
                other than 2xx and ``304``; with ``False`` it is returned.

        Returns:
            The response, body read.
        """
        ...
