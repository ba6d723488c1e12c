"""An ``httpx.AsyncClient(base_url=...)`` passed as ``http_client=``, against a real HTTP
server on 127.0.0.1: a ``fetch`` that asks ``ctx.http`` for ``/v1/customers`` reaches
``<base_url>/v1/customers``, whichever transport the client has."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import watukuy as wk
from support.servers import ScriptedServer, Seen, engine_http, reply_with
from watukuy.http import HttpxFactory
from watukuy.http._transport import AsyncioTransport

CUSTOMERS = [{"id": "c1", "name": "Ada"}, {"id": "c2", "name": "Grace"}]


def _vendor(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    if seen.target.startswith("/api/v1/customers"):
        return 200, {"content-type": "application/json"}, json.dumps(CUSTOMERS).encode()
    return 404, {}, b""


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    running = await ScriptedServer(reply_with(_vendor)).start()
    yield running
    await running.stop()


async def fetch_customers(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
    response = await ctx.http.get("/v1/customers", params={"page": ctx.page})
    return wk.Page(items=response.json(), has_more=False)


customers = wk.define_poller(
    name="customers",
    identity=lambda customer: customer["id"],
    cursor=wk.SnapshotDiff(),
    fetch=fetch_customers,
)


async def test_an_engine_given_a_client_with_a_base_url_polls_relative_urls(
    server: ScriptedServer,
) -> None:
    client = httpx.AsyncClient(base_url=f"{server.origin}/api", timeout=5)
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[customers], http_client=client)
    created: list[str] = []

    @engine.on(customers)
    async def on_customer(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        created.append(event.subject)

    try:
        (result,) = (await engine.tick()).polled
    finally:
        await client.aclose()
    assert result.error is None
    assert sorted(created) == ["c1", "c2"]
    assert [seen.target for seen in server.seen] == ["/api/v1/customers?page=1"]


async def test_without_a_base_url_the_fetch_fails_saying_what_to_do(
    server: ScriptedServer,
) -> None:
    client = httpx.AsyncClient(timeout=5)
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[customers], http_client=client)
    try:
        (result,) = (await engine.tick()).polled
    finally:
        await client.aclose()
    assert result.error is not None
    assert "set base_url on the httpx.AsyncClient" in str(result.error)
    assert server.requests == []


@pytest.mark.parametrize("transport", ["httpx", "engine"])
async def test_the_base_url_is_honoured_on_either_transport(
    server: ScriptedServer, transport: str
) -> None:
    # "engine": the HTTP/1.1 transport on asyncio streams the engine gives its own client.
    chosen = (
        AsyncioTransport(ssl_context=ssl.create_default_context(), limits=httpx.Limits())
        if transport == "engine"
        else None
    )
    client = httpx.AsyncClient(base_url=f"{server.origin}/api/", transport=chosen, timeout=5)
    factory = HttpxFactory(client)
    try:
        response = await engine_http(factory, "watukuy.tests.base_url").get(
            "v1/customers", params={"since": None, "limit": 2}
        )
    finally:
        await client.aclose()
    assert response.json() == CUSTOMERS
    assert response.url == f"{server.origin}/api/v1/customers?limit=2"
    assert [seen.target for seen in server.seen] == ["/api/v1/customers?limit=2"]
