"""The engine's own client builds its TLS context on the first TLS connection, and verifies.

Real servers on 127.0.0.1: a plain one and one with a self-signed certificate (made with
the openssl command). The default client must refuse the self-signed server, trust it when
``SSL_CERT_FILE`` names its certificate (httpx's own rule, read when the context is
built), and never build a TLS context for ``http://``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.servers import ScriptedServer, engine_http
from watukuy.http import HttpxFactory
from watukuy.http._tls import DeferredTLSContext
from watukuy.http._transport import AsyncioTransport


async def answer_ok(request: bytes, writer: asyncio.StreamWriter) -> bool:
    """``200 {}``, then the connection closes."""
    writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}")
    await writer.drain()
    return False


@pytest.fixture
async def plain() -> AsyncIterator[ScriptedServer]:
    server = await ScriptedServer(answer_ok).start()
    yield server
    await server.stop()


@pytest.fixture
async def secure(certificate: tuple[Path, Path]) -> AsyncIterator[ScriptedServer]:
    cert, key = certificate
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    tls.set_alpn_protocols(["http/1.1"])
    server = await ScriptedServer(answer_ok, tls=tls).start()
    yield server
    await server.stop()


def _http(factory: HttpxFactory) -> Any:
    return engine_http(factory, "watukuy.tests.tls")


async def test_the_default_client_refuses_a_certificate_it_does_not_trust(
    secure: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    factory = HttpxFactory()
    try:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await _http(factory).get(f"{secure.origin}/orders")
    finally:
        await factory.aclose()
    assert len(secure.requests) == 0


async def test_the_default_client_trusts_what_ssl_cert_file_names(
    secure: ScriptedServer, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
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
    assert len(secure.requests) == 1


def _counting() -> tuple[DeferredTLSContext, list[ssl.SSLContext]]:
    built: list[ssl.SSLContext] = []

    def build() -> ssl.SSLContext:
        built.append(httpx.create_ssl_context())
        return built[-1]

    return DeferredTLSContext(build), built


async def test_http_never_builds_the_context_https_builds_it_once(
    plain: ScriptedServer,
    secure: ScriptedServer,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
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
    assert (len(plain.requests), len(secure.requests)) == (2, 2)
    # httpcore's ALPN choice reached the context that did the handshakes.
    assert secure.alpn == ["http/1.1", "http/1.1"]


async def test_the_engine_transport_builds_its_context_on_the_first_https_connection(
    plain: ScriptedServer, secure: ScriptedServer, certificate: tuple[Path, Path]
) -> None:
    built: list[ssl.SSLContext] = []

    def build() -> ssl.SSLContext:
        built.append(ssl.create_default_context(cafile=certificate[0]))
        return built[-1]

    transport = AsyncioTransport(ssl_context=build, limits=httpx.Limits())
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(f"{plain.origin}/a")).status_code == 200
        assert built == []
        assert (await client.get(f"{secure.origin}/b")).status_code == 200
        assert (await client.get(f"{secure.origin}/c")).status_code == 200
    assert len(built) == 1
    assert (len(plain.requests), len(secure.requests)) == (1, 2)
    assert secure.alpn == ["http/1.1", "http/1.1"]


async def test_the_synchronous_backend_wraps_sockets_with_the_real_context(
    secure: ScriptedServer, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
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
    assert len(secure.requests) == 1


def test_its_own_settings_read_as_a_verifying_client_context() -> None:
    context = DeferredTLSContext()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert not context.built
    assert "not built yet" in repr(context)
