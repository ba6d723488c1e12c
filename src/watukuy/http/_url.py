"""Request URLs: the query string ``ctx.http`` builds, and the key validators are stored under."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import TypeAlias
from urllib.parse import urlencode

import httpx

from watukuy.model.errors import ConfigError

__all__ = ["QueryParams", "QueryScalar", "QueryValue", "build_url", "url_hash"]

QueryScalar: TypeAlias = str | int | float | bool | None
"""One query value; ``None`` means "leave the parameter out"."""

QueryValue: TypeAlias = QueryScalar | Sequence[QueryScalar]
"""A query value, or a list of them (the key is repeated once per element)."""

QueryParams: TypeAlias = Mapping[str, QueryValue]
"""The ``params=`` of a request: names to values, each a :data:`QueryValue`."""


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


def build_url(url: str | httpx.URL, params: QueryParams | None = None) -> str:
    """Append query parameters to an absolute URL.

    ``None`` values are left out (so ``{"since": cursor.value}`` sends nothing on the first
    poll), lists and tuples repeat the key once per element, booleans are written
    ``true`` / ``false``. Parameters already in ``url`` are kept, in front; a fragment is
    dropped, since it is never sent.

    Args:
        url: An absolute ``http`` or ``https`` URL.
        params: Query parameters to append.

    Returns:
        The final URL, normalised the way httpx sends it.

    Raises:
        ConfigError: The URL is not absolute, or a parameter value is not a string,
            number, boolean or ``None``.
    """
    if not isinstance(url, str | httpx.URL):
        raise ConfigError(f"expected an absolute http(s) URL, got {url!r}", field="url")
    try:
        target = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise ConfigError(
            f"expected an absolute http(s) URL, got {str(url)!r} ({error})", field="url"
        ) from None
    if target.scheme not in ("http", "https") or not target.host:
        raise ConfigError(f"expected an absolute http(s) URL, got {str(url)!r}", field="url")
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
