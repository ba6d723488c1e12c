"""Request URLs: the query string ``ctx.http`` builds, and the key validators are stored under."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from urllib.parse import urlencode

import httpx

from watukuy.model.errors import ConfigError
from watukuy.model.http_api import QueryParams, QueryScalar, QueryValue

__all__ = ["QueryParams", "QueryScalar", "QueryValue", "build_url", "resolve_url", "url_hash"]


def _query_text(key: str, value: QueryScalar) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        # Integral floats are written without ".0", as a JavaScript caller would send them.
        return str(int(value)) if value.is_integer() else repr(value)
    raise ConfigError(
        f"expected a string, number, boolean or None, got {value!r}", field=f"params.{key}"
    )


def _query_pairs(params: QueryParams) -> list[tuple[str, str]]:
    if not isinstance(params, Mapping):
        raise ConfigError(f"expected a mapping of query parameters, got {params!r}", field="params")
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if not isinstance(key, str):
            raise ConfigError(f"expected string keys, got {key!r}", field="params")
        values = value if isinstance(value, list | tuple) else (value,)
        for item in values:
            text = _query_text(key, item)
            if text is not None:
                pairs.append((key, text))
    return pairs


def resolve_url(url: str | httpx.URL, base_url: httpx.URL | str | None = None) -> httpx.URL:
    """The absolute ``http(s)`` URL a request for ``url`` goes to.

    A relative ``url`` is joined to ``base_url`` by httpx's own rule
    (``AsyncClient(base_url=...)``): its path is appended to the base URL's path, which is
    given a trailing ``/`` first, so ``/customers`` against ``https://api.example.com/v1``
    is ``https://api.example.com/v1/customers``. An absolute ``url`` is kept as it is.

    Args:
        url: The URL a ``fetch`` asked for.
        base_url: The HTTP client's ``base_url``; ``None`` or empty when it has none.

    Returns:
        The absolute URL.

    Raises:
        ConfigError: The URL is not an ``http`` or ``https`` URL, or is relative and there
            is no ``base_url`` to resolve it against (``field="url"``).
    """
    if not isinstance(url, str | httpx.URL):
        raise ConfigError(f"expected an absolute http(s) URL, got {url!r}", field="url")
    try:
        target = httpx.URL(url)
        if target.is_relative_url and base_url is not None:
            base = base_url if isinstance(base_url, httpx.URL) else httpx.URL(base_url)
        else:
            base = None
    except httpx.InvalidURL as error:
        raise ConfigError(
            f"expected an absolute http(s) URL, got {str(url)!r} ({error})", field="url"
        ) from None
    if target.is_relative_url:
        # httpx gives a client without a base_url the empty URL, which is not absolute.
        if base is None or not base.is_absolute_url:
            raise ConfigError(
                f"expected an absolute http(s) URL, got {str(url)!r}: give an absolute URL, "
                "or set base_url on the httpx.AsyncClient passed as http_client",
                field="url",
            )
        base_path = base.raw_path if base.raw_path.endswith(b"/") else base.raw_path + b"/"
        target = base.copy_with(raw_path=base_path + target.raw_path.lstrip(b"/"))
    if target.scheme not in ("http", "https") or not target.host:
        raise ConfigError(f"expected an absolute http(s) URL, got {str(target)!r}", field="url")
    return target


def build_url(
    url: str | httpx.URL,
    params: QueryParams | None = None,
    *,
    base_url: httpx.URL | str | None = None,
) -> str:
    """Resolve ``url`` (see :func:`resolve_url`) and append query parameters.

    ``None`` values are left out (so ``{"since": cursor.value}`` sends nothing on the first
    poll), lists and tuples repeat the key once per element, booleans are written
    ``true`` / ``false``. Parameters already in ``url`` are kept, in front; a fragment is
    dropped, since it is never sent.

    Args:
        url: An absolute ``http`` or ``https`` URL, or one relative to ``base_url``.
        params: Query parameters to append.
        base_url: The HTTP client's ``base_url``, for a relative ``url``.

    Returns:
        The final URL, absolute, normalised the way httpx sends it.

    Raises:
        ConfigError: The URL is not absolute and there is no ``base_url``, or a parameter
            value is not a string, number, boolean or ``None``.
    """
    target = resolve_url(url, base_url)
    query = target.query
    if params:
        encoded = urlencode(_query_pairs(params)).encode("ascii")
        if encoded:
            query = query + b"&" + encoded if query else encoded
    return str(target.copy_with(query=query or None, fragment=None))


def url_hash(url: str) -> str:
    """The key validators of ``url`` are stored under: SHA-256 hex of the full URL.

    The query string is part of the key, so ``?page=1`` and ``?page=2`` are different
    resources with their own ``ETag``.
    """
    return hashlib.sha256(url.encode("utf-8")).hexdigest()
