"""The engine's own HTTP transport (HTTP/1.1 over asyncio streams), against a real server.

The server is a few lines on ``asyncio.start_server`` that answer what each test scripts,
so keep-alive, a server closing an idle connection, chunked bodies, timeouts, a connection
dropped half way and the pool's limits are all real sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from watukuy.http._factory import HttpxFactory
from watukuy.http._transport import AsyncioTransport

Answer = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]
"""Writes the answer to one request head; returns whether to keep the connection open."""


@dataclass
class Server:
    """A scripted HTTP/1.1 server on 127.0.0.1."""

    answer: Answer
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                if not await self.answer(head + body, writer):
                    return
        finally:
            writer.close()


async def ok(request: bytes, writer: asyncio.StreamWriter) -> bool:
    body = b'{"ok": true}'
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    return True


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Answer], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> Server:
        server = Server(answer)
        running = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        server.port = running.sockets[0].getsockname()[1]
        servers.append(running)
        return server

    yield start
    for running in servers:
        running.close()


async def until(done: Callable[[], bool]) -> None:
    """Wait, a turn of the loop at a time, for the sockets to get there (5 s at most)."""
    async with asyncio.timeout(5):
        while not done():
            await asyncio.sleep(0.001)


def client(**limits: int | None) -> httpx.AsyncClient:
    import ssl

    transport = AsyncioTransport(
        ssl_context=ssl.create_default_context(),
        limits=httpx.Limits(**limits) if limits else httpx.Limits(),  # type: ignore[arg-type]
    )
    return httpx.AsyncClient(transport=transport, timeout=5)


async def test_connections_are_kept_alive_and_reused(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(ok)
    async with client() as http:
        for _ in range(5):
            response = await http.get(server.url + "/a")
            assert response.json() == {"ok": True}
    assert server.connections == 1
    assert len(server.requests) == 5
    assert server.requests[0].startswith(b"GET /a HTTP/1.1\r\n")


async def test_a_connection_the_server_closed_while_idle_is_replaced(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def once(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await ok(request, writer)
        return False  # close after each answer, without saying so

    server = await serve(once)
    async with client() as http:
        for _ in range(3):
            assert (await http.get(server.url)).status_code == 200
    assert server.connections == 3


async def test_a_reused_connection_closed_under_a_request_sends_it_again(
    serve: Callable[..., Awaitable[Server]],
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
        assert (await http.get(server.url)).status_code == 200
        assert (await http.get(server.url)).status_code == 200  # sent again, transparently
        assert server.connections == 2
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post(server.url, content=b"x")


async def test_chunked_and_large_bodies(serve: Callable[..., Awaitable[Server]]) -> None:
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
        assert (await http.get(server.url + "/c")).content == b"hello chunked world"
        assert (await http.get(server.url + "/big")).content == big
        assert (await http.get(server.url + "/c")).content == b"hello chunked world"
    assert server.connections == 1


async def test_head_and_a_body_sent_with_the_request(
    serve: Callable[..., Awaitable[Server]],
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
        head = await http.head(server.url)
        assert head.status_code == 200
        assert head.content == b""
        posted = await http.post(server.url, json={"a": 1})
        assert posted.status_code == 201
        assert posted.json() == {"a": 1}
        assert posted.reason_phrase == "Created"
        assert posted.http_version == "HTTP/1.1"
    assert server.connections == 1


async def test_an_answer_cut_short_is_an_error_and_the_connection_is_dropped(
    serve: Callable[..., Awaitable[Server]],
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
            await http.get(server.url)
        assert (await http.get(server.url)).status_code == 200
    assert server.connections == 2


async def test_timeouts_and_refused_connections(serve: Callable[..., Awaitable[Server]]) -> None:
    async def silent(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(5)
        return False

    server = await serve(silent)
    async with client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(server.url, timeout=0.2)
    closed = await serve(ok)
    port = closed.port
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get("http://127.0.0.1:1/")  # nothing listens on port 1
        assert (await http.get(f"http://127.0.0.1:{port}")).status_code == 200


async def test_a_cancelled_request_closes_its_connection(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    release = asyncio.Event()

    async def slow(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"/slow" in request:
            await release.wait()
        return await ok(request, writer)

    server = await serve(slow)
    async with client() as http:
        task = asyncio.ensure_future(http.get(server.url + "/slow"))
        await until(lambda: bool(server.requests))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert (await http.get(server.url + "/fast")).status_code == 200
    assert server.connections == 2


async def test_the_pool_bounds_connections_and_waits_for_one(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    gate = asyncio.Event()

    async def gated(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await gate.wait()
        return await ok(request, writer)

    server = await serve(gated)
    async with client(max_connections=2, max_keepalive_connections=2) as http:
        calls = [asyncio.ensure_future(http.get(server.url)) for _ in range(3)]
        await until(lambda: len(server.requests) == 2)
        await asyncio.sleep(0.01)
        assert len(server.requests) == 2  # the third waits for a connection
        gate.set()
        assert [r.status_code for r in await asyncio.gather(*calls)] == [200, 200, 200]
        assert server.connections == 2
        gate.clear()
        blocked = [asyncio.ensure_future(http.get(server.url)) for _ in range(2)]
        await until(lambda: len(server.requests) == 5)
        with pytest.raises(httpx.PoolTimeout):
            await http.get(server.url, timeout=httpx.Timeout(5, pool=0.05))
        gate.set()
        await asyncio.gather(*blocked)


async def test_a_server_that_says_close_is_not_reused(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def closing(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return False

    server = await serve(closing)
    async with client() as http:
        for _ in range(3):
            assert (await http.get(server.url)).content == b"ok"
    assert server.connections == 3


async def test_the_engines_own_client_uses_it_unless_a_proxy_is_configured(
    monkeypatch: pytest.MonkeyPatch, serve: Callable[..., Awaitable[Server]]
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
    assert (await factory.client.get(server.url)).json() == {"ok": True}
    await factory.aclose()
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    proxied = HttpxFactory()
    assert not isinstance(proxied.client._transport, AsyncioTransport)
    await proxied.aclose()
