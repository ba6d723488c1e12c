"""Redirects between two real HTTP servers on 127.0.0.1 (two ports, so two origins).

``ctx.http`` with the engine's own client follows redirects: within the origin as they
are, to another origin without a single credential. The webhook sink follows none unless
told to, and then never to another origin.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import watukuy as wk
from support.servers import Answer, ScriptedServer, engine_http, reply_with
from watukuy.http import HttpxFactory
from watukuy.model.errors import HttpError
from watukuy.sinks import WebhookDeliveryError, webhook_sink

MARK = "R3D1R3CT"
SENSITIVE = {
    "authorization": f"Bearer {MARK}-authorization",
    "cookie": f"session={MARK}-cookie",
    "x-api-key": f"{MARK}-x-api-key",
    "x-auth-token": f"{MARK}-x-auth-token",
    "api-key": f"{MARK}-api-key",
    "x-foo-token": f"{MARK}-x-foo-token",
}


_OK = reply_with(lambda seen: (200, {}, b"{}"))
"""The servers' answer until a test scripts another."""


@pytest.fixture
async def servers() -> AsyncIterator[tuple[ScriptedServer, ScriptedServer]]:
    a, b = ScriptedServer(_OK), ScriptedServer(_OK)
    await a.start()
    await b.start()
    yield a, b
    await a.stop()
    await b.stop()


def _http(factory: HttpxFactory) -> Any:
    return engine_http(factory, "watukuy.tests.redirects")


def _redirect(status: int, location: str) -> Answer:
    return reply_with(lambda seen: (status, {"location": location}, b""))


async def test_a_redirect_to_another_origin_carries_no_credential(
    servers: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, b = servers
    a.answer = reply_with(
        lambda seen: (
            302,
            {"location": f"{b.origin}/landing?{seen.target.split('?')[1]}"},
            b"",
        )
    )
    b.answer = reply_with(
        lambda seen: (200, {"content-type": "application/json"}, b'{"landed": true}')
    )
    factory = HttpxFactory()
    try:
        res = await _http(factory).get(
            f"{a.origin}/start",
            params={"api_key": f"{MARK}-q", "access_token": f"{MARK}-q2", "page": 2},
            headers={**SENSITIVE, "x-tenant": "acme"},
        )
    finally:
        await factory.aclose()
    assert res.json() == {"landed": True}
    [first] = a.seen
    assert first.headers["x-api-key"] == SENSITIVE["x-api-key"]  # the origin got everything
    [landed] = b.seen
    assert landed.target == "/landing?page=2"
    assert landed.headers["x-tenant"] == "acme"
    for name in SENSITIVE:
        assert name not in landed.headers
    assert MARK not in repr(landed)


async def test_a_redirect_within_the_origin_keeps_everything(
    servers: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, _ = servers
    a.answer = reply_with(
        lambda seen: (
            (301, {"location": "/new?api_key=" + MARK}, b"")
            if seen.target.startswith("/old")
            else (200, {}, b"[]")
        )
    )
    factory = HttpxFactory()
    try:
        res = await _http(factory).get(f"{a.origin}/old", headers=SENSITIVE)
    finally:
        await factory.aclose()
    assert res.status == 200
    old, new = a.seen
    assert old.target == "/old"
    assert new.target == f"/new?api_key={MARK}"
    for name, value in SENSITIVE.items():
        assert new.headers[name] == value


async def test_redirect_loops_end_in_an_http_error(
    servers: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, _ = servers
    a.answer = _redirect(302, "/again")
    factory = HttpxFactory()
    try:
        with pytest.raises(HttpError, match="more than 20 redirects"):
            await _http(factory).get(f"{a.origin}/again")
    finally:
        await factory.aclose()
    assert len(a.seen) == 21


async def test_a_client_that_does_not_follow_sees_the_redirect(
    servers: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, b = servers
    a.answer = _redirect(302, f"{b.origin}/x")
    async with httpx.AsyncClient(follow_redirects=False) as client:
        res = await _http(HttpxFactory(client)).get(f"{a.origin}/x", raise_for_status=False)
    assert res.status == 302
    assert b.seen == []


async def test_https_to_http_is_refused_between_real_servers(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    secure, plain = ScriptedServer(_OK, tls=tls), ScriptedServer(_OK)
    await secure.start()
    await plain.start()
    try:
        assert secure.origin.startswith("https://")
        secure.answer = _redirect(302, f"{plain.origin}/plain")
        trust = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(verify=trust, follow_redirects=True) as client:
            with pytest.raises(HttpError, match="refused a redirect from https to http"):
                await _http(HttpxFactory(client)).get(
                    f"{secure.origin}/secure", params={"token": MARK}, headers=SENSITIVE
                )
    finally:
        await secure.stop()
        await plain.stop()
    assert len(secure.seen) == 1  # the request went over TLS, the redirect was not followed
    assert plain.seen == []


async def test_https_to_http_is_refused() -> None:
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(302, headers={"location": "http://api.example.com/plain"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle), follow_redirects=True)
    async with client:
        with pytest.raises(HttpError, match="refused a redirect from https to http") as raised:
            await _http(HttpxFactory(client)).get(
                "https://api.example.com/secure", params={"token": MARK}
            )
    assert [str(r.url) for r in sent] == [f"https://api.example.com/secure?token={MARK}"]
    assert raised.value.status == 302
    assert MARK not in str(raised.value)


# --- the webhook sink -------------------------------------------------------------------------

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _event() -> wk.Event[Any]:
    return wk.Event(
        id="e1",
        type="created",
        source="urn:watukuy:orders",
        subject="o1",
        time="2026-01-01T00:00:00Z",
        poller="orders",
        partition="",
        lane="live",
        sequence=1,
        cursor=None,
        data={"id": "o1"},
        previous=None,
        attempt=1,
    )


async def test_the_webhook_sink_follows_no_redirect_by_default(
    servers: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, b = servers
    a.answer = _redirect(307, f"{b.origin}/hooks")
    # Even a client configured to follow redirects does not make the sink follow them.
    async with httpx.AsyncClient(follow_redirects=True) as client:
        sink = webhook_sink(
            f"{a.origin}/hooks", SECRET, headers={"x-tenant-token": MARK}, client=client
        )
        with pytest.raises(WebhookDeliveryError) as raised:
            await sink.publish(_event())
    assert raised.value.status == 307
    assert len(a.seen) == 1
    assert b.seen == []


async def test_the_webhook_sink_never_takes_its_signature_to_another_origin(
    servers: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, b = servers
    a.answer = _redirect(308, f"{b.origin}/hooks")
    async with webhook_sink(f"{a.origin}/hooks", SECRET, follow_redirects=True) as sink:
        with pytest.raises(HttpError, match="refused a redirect to another origin"):
            await sink.publish(_event())
    assert len(a.seen) == 1
    assert b.seen == []


async def test_the_webhook_sink_follows_within_its_origin_when_told(
    servers: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, _ = servers
    a.answer = reply_with(
        lambda seen: (
            (308, {"location": "/hooks/v2"}, b"") if seen.target == "/hooks" else (204, {}, b"")
        )
    )
    async with webhook_sink(f"{a.origin}/hooks", SECRET, follow_redirects=True) as sink:
        assert await sink.publish(_event()) == 204
    first, moved = a.seen
    assert moved.method == "POST"
    assert moved.body == first.body
    assert moved.headers["webhook-signature"] == first.headers["webhook-signature"]
