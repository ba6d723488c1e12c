"""Never executed: type-checked to pin what ``fetch`` may do with ``ctx.http``.

``ctx.http`` is a :class:`watukuy.FetchHttp` and its requests return a
:class:`watukuy.FetchResponse`, so every attribute a ``fetch`` reads is checked (a typo
fails: ``tests/typing/negative/response_typo.py``). The HTTP helper the engine binds
implements both protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, assert_type

import watukuy as wk
from watukuy.http import HttpClient, HttpResponse, HttpxFactory
from watukuy.model.http_port import HttpScope


def items_of(response: wk.FetchResponse) -> list[dict[str, Any]]:
    body: dict[str, list[dict[str, Any]]] = response.json()
    return body["data"]


async def fetch_orders(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
    response = await ctx.http.get(
        "https://erp.example.com/orders",
        params={"updated_since": ctx.cursor.value, "limit": 100, "expand": ["lines"]},
        headers={"x-tenant": "acme"},
        cost=2,
        timeout="10s",
    )
    assert_type(response, wk.FetchResponse)
    if response.not_modified:
        return wk.Page(items=[], has_more=False)
    assert_type(response.status_code, int)
    assert_type(response.status, int)
    assert_type(response.ok, bool)
    assert_type(response.headers, Mapping[str, str])
    assert_type(response.url, str)
    assert_type(response.text, str)
    assert_type(response.content, bytes)
    assert_type(response.rate_limit, wk.RateLimitInfo | None)
    more = response.headers.get("x-has-more") == "true"
    return wk.Page(items=items_of(response), has_more=more)


async def fetch_search(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    response = await ctx.http.request(
        "POST",
        "/v1/search",  # relative: resolved against the client's base_url
        json={"after": ctx.cursor.value},
        validators=False,
        raise_for_status=False,
    )
    if response.status_code == 404:
        return wk.Page(items=[], has_more=False)
    checked = response.raise_for_status()
    assert_type(checked, wk.FetchResponse)
    body: dict[str, Any] = checked.json()
    return wk.Page(items=body["items"], cursor=body.get("next"))


async def fetch_catalog(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
    assert_type(ctx.page, int)
    assert_type(ctx.page_token, str | None)  # a full listing paged by tokens
    response = await ctx.http.get(ctx.page_token or "https://vendor.example/catalog/")
    body: dict[str, Any] = response.json()
    return wk.Page(items=body["results"], cursor=body["next"], has_more=body["next"] is not None)


def bound(factory: HttpxFactory, scope: HttpScope) -> wk.FetchHttp:
    client: HttpClient = factory.bind(scope)
    return client  # the helper the engine binds is a FetchHttp


def answered(response: HttpResponse) -> wk.FetchResponse:
    return response  # and its response a FetchResponse


orders = wk.define_poller(
    name="orders",
    identity=lambda order: order["id"],
    cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
    fetch=fetch_orders,
)
catalog = wk.define_poller(
    name="catalog",
    identity=lambda product: product["sku"],
    cursor=wk.SnapshotDiff(),
    fetch=fetch_catalog,
)
search = wk.define_poller(
    name="search",
    identity=lambda hit: hit["id"],
    cursor=wk.TokenCursor(),
    fetch=fetch_search,
)
