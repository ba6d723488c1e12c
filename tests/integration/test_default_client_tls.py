"""The engine's own client builds its TLS context on the first TLS connection, and verifies.

Real servers on 127.0.0.1: a plain one and one with a self-signed certificate (made with
the openssl command). The default client must refuse the self-signed server, trust it when
``SSL_CERT_FILE`` names its certificate (httpx's own rule, read when the context is
built), and never build a TLS context for ``http://``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from watukuy.http import HttpxFactory
from watukuy.http._tls import DeferredTLSContext
from watukuy.model.http_port import HttpObservations, HttpScope
from watukuy.model.rows import Lease, PKey
from watukuy.testing import VirtualClock


class Server:
    """Answers every request with ``200 {}`` and counts the requests it read."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.requests = 0
        self.alpn: list[str | None] = []
        self._server: asyncio.Server | None = None

    @property
    def origin(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (line := await reader.readline()) not in (b"\r\n", b""):
                pass
            if line == b"\r\n":
                self.requests += 1
                tls = writer.get_extra_info("ssl_object")
                if tls is not None:
                    self.alpn.append(tls.selected_alpn_protocol())
                writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}")
                await writer.drain()
        except (ssl.SSLError, ConnectionError):
            pass  # the client refused the certificate and hung up
        finally:
            writer.close()


@pytest.fixture
async def plain() -> AsyncIterator[Server]:
    server = Server()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def secure(certificate: tuple[Path, Path]) -> AsyncIterator[Server]:
    cert, key = certificate
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    tls.set_alpn_protocols(["http/1.1"])
    server = Server(tls)
    await server.start()
    yield server
    await server.stop()


class _NoValidators:
    async def get_validator(self, key: PKey, url_hash: str) -> None:
        return None

    async def set_validator(self, *args: Any) -> None:
        return None


def _http(factory: HttpxFactory) -> Any:
    """A ``ctx.http`` exactly as the engine binds it (the factory owns its client)."""
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
        logger=logging.getLogger("watukuy.tests.tls"),
    )
    return factory.bind(scope)


async def test_the_default_client_refuses_a_certificate_it_does_not_trust(
    secure: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    factory = HttpxFactory()
    try:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await _http(factory).get(f"{secure.origin}/orders")
    finally:
        await factory.aclose()
    assert secure.requests == 0


async def test_the_default_client_trusts_what_ssl_cert_file_names(
    secure: Server, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = HttpxFactory()
    try:
        # Read when the first TLS connection builds the context, as httpx reads it when
        # it builds its own.
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
        answer = await _http(factory).get(f"{secure.origin}/orders")
    finally:
        await factory.aclose()
    assert answer.json() == {}
    assert secure.requests == 1


def _counting() -> tuple[DeferredTLSContext, list[ssl.SSLContext]]:
    built: list[ssl.SSLContext] = []

    def build() -> ssl.SSLContext:
        built.append(httpx.create_ssl_context())
        return built[-1]

    return DeferredTLSContext(build), built


async def test_http_never_builds_the_context_https_builds_it_once(
    plain: Server, secure: Server, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    context, built = _counting()
    async with httpx.AsyncClient(verify=context) as client:
        assert (await client.get(f"{plain.origin}/a")).status_code == 200
        assert (await client.get(f"{plain.origin}/b")).status_code == 200
        assert built == []
        assert not context.built
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
        assert (await client.get(f"{secure.origin}/c")).status_code == 200
        assert (await client.get(f"{secure.origin}/d")).status_code == 200
    assert len(built) == 1
    assert context.built
    assert context.context() is built[0]
    assert (plain.requests, secure.requests) == (2, 2)
    # httpcore's ALPN choice reached the context that did the handshakes.
    assert secure.alpn == ["http/1.1", "http/1.1"]


async def test_the_synchronous_backend_wraps_sockets_with_the_real_context(
    secure: Server, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    refusing, built = _counting()
    trusting = DeferredTLSContext(lambda: ssl.create_default_context(cafile=certificate[0]))

    # The server runs on this test's event loop: the synchronous client runs in a thread.
    def refused() -> None:
        with (
            httpx.Client(verify=refusing) as client,
            pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
        ):
            client.get(f"{secure.origin}/x")

    def trusted() -> int:
        with httpx.Client(verify=trusting) as client:
            return client.get(f"{secure.origin}/y").status_code

    await asyncio.to_thread(refused)
    assert await asyncio.to_thread(trusted) == 200
    assert len(built) == 1
    assert secure.requests == 1


def test_its_own_settings_read_as_a_verifying_client_context() -> None:
    context = DeferredTLSContext()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert not context.built
    assert "not built yet" in repr(context)
