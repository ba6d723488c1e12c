"""A scripted HTTP/1.1 server on 127.0.0.1, and a ``ctx.http`` bound as the engine binds it.

:class:`ScriptedServer` is a few lines on ``asyncio.start_server``: each test scripts the
answer, so keep-alive, closed connections, chunked bodies, timeouts, redirects between two
origins and TLS handshakes all happen on real sockets.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from watukuy.http import HttpClient, HttpxFactory
from watukuy.model.http_port import HttpObservations, HttpScope
from watukuy.model.rows import Lease, PKey
from watukuy.testing import VirtualClock

Answer = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]
"""Writes the answer to one request (head and body); returns whether to keep the
connection open for the next request."""

Reply = tuple[int, dict[str, str], bytes]
"""A status, extra headers and a body."""


@dataclass
class Seen:
    """One request as the server read it; header names in lower case."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    @classmethod
    def parse(cls, request: bytes) -> Seen:
        head, _, body = request.partition(b"\r\n\r\n")
        line, *fields = head.decode().split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers: dict[str, str] = {}
        for field in fields:
            name, _, value = field.partition(":")
            headers[name.strip().lower()] = value.strip()
        return cls(method, target, headers, body)


async def ok(request: bytes, writer: asyncio.StreamWriter) -> bool:
    """``200 {"ok": true}``, and the connection stays open."""
    body = b'{"ok": true}'
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    return True


def reply_with(reply: Callable[[Seen], Reply]) -> Answer:
    """An answer that replies what ``reply`` makes of the request, then closes the
    connection (one request per connection, and it says so)."""

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        status, extra, payload = reply(Seen.parse(request))
        head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nconnection: close\r\n"
        head += f"content-length: {len(payload)}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in extra.items())
        writer.write(head.encode() + b"\r\n" + payload)
        await writer.drain()
        return False

    return answer


class ScriptedServer:
    """An HTTP/1.1 server on a free port of 127.0.0.1 that records what it received.

    Args:
        answer: Writes the answer to each request; replace it at any time.
        tls: Serve HTTPS with this server-side context.
    """

    def __init__(self, answer: Answer = ok, *, tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []
        """Every request read in full (head and body), in arrival order."""
        self.alpn: list[str | None] = []
        """Over TLS, the protocol ALPN chose, once per request."""
        self.writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self._arrived = asyncio.Condition()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``, or ``https://`` over TLS."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def seen(self) -> list[Seen]:
        """The requests, parsed."""
        return [Seen.parse(request) for request in self.requests]

    async def received(self, count: int) -> None:
        """Wait until the server has read ``count`` requests in all."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    async def start(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        return self

    def close(self) -> None:
        """Stop listening; connections still open are left to end on their own."""
        assert self._server is not None
        self._server.close()

    async def stop(self) -> None:
        """Stop listening and wait until the server is closed."""
        self.close()
        assert self._server is not None
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
                async with self._arrived:
                    self._arrived.notify_all()
                tls = writer.get_extra_info("ssl_object")
                if tls is not None:
                    self.alpn.append(tls.selected_alpn_protocol())
                if not await self.answer(head + body, writer):
                    return
        except (ssl.SSLError, ConnectionError):
            pass  # the client refused the certificate, or hung up mid-answer
        finally:
            writer.close()


class _NoValidators:
    async def get_validator(self, key: PKey, url_hash: str) -> None:
        return None

    async def set_validator(self, *args: Any) -> None:
        return None


def engine_http(factory: HttpxFactory, logger: str) -> HttpClient:
    """A ``ctx.http`` exactly as the engine binds it (the factory owns its client), for the
    key ``orders`` with no validators, no budget and a virtual clock."""
    lease = Lease(owner="me", epoch=1, expires_at=2**40)
    scope = HttpScope(
        key=PKey("orders", ""),
        lane="live",
        store=_NoValidators(),  # type: ignore[arg-type]
        lease=lambda: lease,
        observations=HttpObservations(),
        budget=None,
        budget_weight=1.0,
        budget_cost=1.0,
        max_wait_ms=1_000,
        gate=None,
        clock=VirtualClock(start=1_700_000_000_000),
        logger=logging.getLogger(logger),
    )
    return factory.bind(scope)
