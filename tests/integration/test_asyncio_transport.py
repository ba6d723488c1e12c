"""The engine's own HTTP transport (HTTP/1.1 over asyncio streams), against a real server.

The server (``support.servers.ScriptedServer``) answers what each test scripts, so
keep-alive, a server closing an idle connection, chunked bodies, timeouts, a connection
dropped half way and the pool's limits are all real sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from support.servers import Answer, ScriptedServer, ok
from watukuy.http._factory import HttpxFactory
from watukuy.http._transport import AsyncioTransport


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Answer], Awaitable[ScriptedServer]]]:
    servers: list[ScriptedServer] = []

    async def start(answer: Answer) -> ScriptedServer:
        servers.append(await ScriptedServer(answer).start())
        return servers[-1]

    yield start
    for server in servers:
        server.close()


async def received(server: ScriptedServer, count: int) -> None:
    """Wait until ``server`` has read ``count`` requests (5 s at most)."""
    async with asyncio.timeout(5):
        await server.received(count)


def client(**limits: int | None) -> httpx.AsyncClient:
    import ssl

    transport = AsyncioTransport(
        ssl_context=ssl.create_default_context(),
        limits=httpx.Limits(**limits) if limits else httpx.Limits(),  # type: ignore[arg-type]
    )
    return httpx.AsyncClient(transport=transport, timeout=5)


async def test_connections_are_kept_alive_and_reused(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    server = await serve(ok)
    async with client() as http:
        for _ in range(5):
            response = await http.get(server.origin + "/a")
            assert response.json() == {"ok": True}
    assert server.connections == 1
    assert len(server.requests) == 5
    assert server.requests[0].startswith(b"GET /a HTTP/1.1\r\n")


async def test_a_connection_the_server_closed_while_idle_is_replaced(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    async def once(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await ok(request, writer)
        return False  # close after each answer, without saying so

    server = await serve(once)
    async with client() as http:
        for _ in range(3):
            assert (await http.get(server.origin)).status_code == 200
    assert server.connections == 3


async def test_a_reused_connection_closed_under_a_request_sends_it_again(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    # The server answers, keeps the connection, then drops it as the next request arrives:
    # a GET is sent again once on a new connection; a POST is not.
    answered = 0

    async def flaky(request: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal answered
        if answered % 2 == 1:
            answered += 1
            return False  # drop the connection without a byte of answer
        answered += 1
        await ok(request, writer)
        return True

    server = await serve(flaky)
    async with client() as http:
        assert (await http.get(server.origin)).status_code == 200
        assert (await http.get(server.origin)).status_code == 200  # sent again, transparently
        assert server.connections == 2
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post(server.origin, content=b"x")


async def test_chunked_and_large_bodies(serve: Callable[..., Awaitable[ScriptedServer]]) -> None:
    big = b"y" * 1_000_000

    async def chunked(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"/big" in request:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(big))
            writer.write(big)
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            for part in (b"hello ", b"chunked ", b"world"):
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    server = await serve(chunked)
    async with client() as http:
        assert (await http.get(server.origin + "/c")).content == b"hello chunked world"
        assert (await http.get(server.origin + "/big")).content == big
        assert (await http.get(server.origin + "/c")).content == b"hello chunked world"
    assert server.connections == 1


async def test_head_and_a_body_sent_with_the_request(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    async def echo(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if request.startswith(b"HEAD"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        else:
            body = request.split(b"\r\n\r\n", 1)[1]
            writer.write(
                b"HTTP/1.1 201 Created\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
        await writer.drain()
        return True

    server = await serve(echo)
    async with client() as http:
        head = await http.head(server.origin)
        assert head.status_code == 200
        assert head.content == b""
        posted = await http.post(server.origin, json={"a": 1})
        assert posted.status_code == 201
        assert posted.json() == {"a": 1}
        assert posted.reason_phrase == "Created"
        assert posted.http_version == "HTTP/1.1"
    assert server.connections == 1


async def test_an_answer_cut_short_is_an_error_and_the_connection_is_dropped(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    cut = True

    async def short(request: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal cut
        if cut:
            cut = False
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
            await writer.drain()
            return False
        return await ok(request, writer)

    server = await serve(short)
    async with client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(server.origin)
        assert (await http.get(server.origin)).status_code == 200
    assert server.connections == 2


async def test_timeouts_and_refused_connections(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    async def silent(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.Event().wait()  # never answers
        return False

    server = await serve(silent)
    async with client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(server.origin, timeout=0.2)
    closed = await serve(ok)
    port = closed.port
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get("http://127.0.0.1:1/")  # nothing listens on port 1
        assert (await http.get(f"http://127.0.0.1:{port}")).status_code == 200


async def test_a_cancelled_request_closes_its_connection(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    release = asyncio.Event()

    async def slow(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"/slow" in request:
            await release.wait()
        return await ok(request, writer)

    server = await serve(slow)
    async with client() as http:
        task = asyncio.ensure_future(http.get(server.origin + "/slow"))
        await received(server, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert (await http.get(server.origin + "/fast")).status_code == 200
    assert server.connections == 2


async def test_the_pool_bounds_connections_and_waits_for_one(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    gate = asyncio.Event()

    async def gated(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await gate.wait()
        return await ok(request, writer)

    server = await serve(gated)
    async with client(max_connections=2, max_keepalive_connections=2) as http:
        calls = [asyncio.ensure_future(http.get(server.origin)) for _ in range(3)]
        await received(server, 2)
        await asyncio.sleep(0.01)
        assert len(server.requests) == 2  # the third waits for a connection
        gate.set()
        assert [r.status_code for r in await asyncio.gather(*calls)] == [200, 200, 200]
        assert server.connections == 2
        gate.clear()
        blocked = [asyncio.ensure_future(http.get(server.origin)) for _ in range(2)]
        await received(server, 5)
        with pytest.raises(httpx.PoolTimeout):
            await http.get(server.origin, timeout=httpx.Timeout(5, pool=0.05))
        gate.set()
        await asyncio.gather(*blocked)


async def test_a_server_that_says_close_is_not_reused(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    async def closing(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return False

    server = await serve(closing)
    async with client() as http:
        for _ in range(3):
            assert (await http.get(server.origin)).content == b"ok"
    # One connection per answer, and maybe the one opened ahead for a fourth.
    assert len(server.requests) == 3
    assert server.connections in (3, 4)


async def test_a_server_that_closes_after_each_answer_gets_the_next_connection_ahead(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    # HTTP/1.0 without keep-alive: the next connection is opened as soon as the server
    # closes the last, so the next request finds it ready instead of connecting first.
    async def closing(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return False

    server = await serve(closing)
    async with client() as http:
        # One request, then another soon after: from then on the origin gets one ahead.
        assert (await http.get(server.origin)).content == b"ok"
        await asyncio.sleep(0.01)
        assert server.connections == 1  # a single request opens nothing ahead
        assert (await http.get(server.origin)).content == b"ok"
        async with asyncio.timeout(5):
            while server.connections < 3:  # the one opened ahead
                await asyncio.sleep(0.001)
        assert (await http.get(server.origin + "/b")).content == b"ok"
        assert server.connections == 3  # the third request took it
        assert server.requests[2].startswith(b"GET /b HTTP/1.1\r\n")
        # A request made while the next connection is still being opened waits for it
        # rather than opening one more.
        assert (await http.get(server.origin + "/c")).content == b"ok"
        assert server.connections == 4
    assert len(server.requests) == 4


async def test_a_connection_opened_ahead_that_the_server_dropped_is_replaced(
    serve: Callable[..., Awaitable[ScriptedServer]],
) -> None:
    async def closing(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return False

    server = await serve(closing)
    async with client() as http:
        assert (await http.get(server.origin)).content == b"ok"
        assert (await http.get(server.origin)).content == b"ok"
        async with asyncio.timeout(5):
            while len(server.writers) < 3:
                await asyncio.sleep(0.001)
        server.writers[2].close()  # the server drops the idle one before any request
        assert (await http.get(server.origin)).content == b"ok"
    assert len(server.requests) == 3


async def test_the_engines_own_client_uses_it_unless_a_proxy_is_configured(
    monkeypatch: pytest.MonkeyPatch, serve: Callable[..., Awaitable[ScriptedServer]]
) -> None:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    factory = HttpxFactory()
    assert isinstance(factory.client._transport, AsyncioTransport)
    server = await serve(ok)
    assert (await factory.client.get(server.origin)).json() == {"ok": True}
    await factory.aclose()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    proxied = HttpxFactory()
    assert not isinstance(proxied.client._transport, AsyncioTransport)
    await proxied.aclose()
