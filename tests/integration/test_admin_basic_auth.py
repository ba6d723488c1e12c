"""``basic_auth``: the admin page's sign-in a browser can answer by itself. Over ASGI
(``httpx.ASGITransport``); tests/browser signs in with a real Chromium."""

from __future__ import annotations

import base64
import re

import pytest

import watukuy as wk
from watukuy.integrations.admin import admin_app, basic_auth
from watukuy.model.rows import PKey

from .test_admin import client_for, make_engine

PASSWORD = "correct-horse-battery"


def basic(user: str, password: str) -> dict[str, str]:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {encoded}"}


async def test_the_browser_is_asked_to_sign_in_and_the_operator_acts() -> None:
    engine = make_engine()
    app = admin_app(engine, auth=basic_auth("ops", PASSWORD))
    async with client_for(app) as client:
        refused = await client.get("/")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == (
            'Basic realm="watukuy admin", charset="UTF-8"'
        )
        assert "sign in with the admin page's user name and password" in refused.text
        # The protections that do not depend on who signed in stay in front.
        assert "frame-ancestors 'none'" in refused.headers["content-security-policy"]
        for wrong in (basic("ops", "wrong-password!"), basic("eve", PASSWORD)):
            assert (await client.get("/", headers=wrong)).status_code == 401
        assert (await client.get("/", headers={"authorization": "Basic !!"})).status_code == 401
        assert (await client.get("/", headers={"authorization": "Bearer x"})).status_code == 401

        client.headers.update(basic("ops", PASSWORD))
        page = await client.get("/key?poller=orders")
        assert page.status_code == 200
        assert "No authentication." not in page.text
        token = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
        assert token is not None
        paused = await client.post(
            "/action", data={"csrf": token.group(1), "action": "pause", "poller": "orders"}
        )
        assert paused.status_code in (200, 303)
        forged = await client.post(
            "/action",
            data={"csrf": token.group(1), "action": "resume", "poller": "orders"},
            headers={"origin": "https://evil.example"},
        )
        assert forged.status_code == 403  # signed in, but from another origin
    state = await engine.store.load_state(PKey("orders", ""))
    assert state is not None
    assert state.paused


async def test_any_user_name_when_none_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WATUKUY_ADMIN_USER", raising=False)
    app = admin_app(make_engine(), auth=basic_auth(password=PASSWORD, realm="ops"))
    async with client_for(app) as client:
        assert (await client.get("/")).headers["www-authenticate"].startswith('Basic realm="ops"')
        assert (await client.get("/", headers=basic("anyone", PASSWORD))).status_code == 200
        assert (await client.get("/", headers=basic("anyone", "nope"))).status_code == 401


async def test_secrets_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATUKUY_ADMIN_USER", "ana")
    monkeypatch.setenv("WATUKUY_ADMIN_PASSWORD", PASSWORD)
    app = admin_app(make_engine(), auth=basic_auth())
    async with client_for(app) as client:
        assert (await client.get("/", headers=basic("ana", PASSWORD))).status_code == 200
        assert (await client.get("/", headers=basic("bo", PASSWORD))).status_code == 401


def test_bad_settings_name_their_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WATUKUY_ADMIN_PASSWORD", raising=False)
    with pytest.raises(wk.ConfigError, match=r"^password: no password given, and WATUKUY_ADMIN"):
        basic_auth("ops")
    with pytest.raises(wk.ConfigError, match=r"^password: use at least 12 characters"):
        basic_auth("ops", "short")
    with pytest.raises(wk.ConfigError, match=r"^username: "):
        basic_auth("o:ps", PASSWORD)
    with pytest.raises(wk.ConfigError, match=r"^realm: "):
        basic_auth("ops", PASSWORD, realm='say "hi"')


async def test_a_refusing_check_of_ones_own_says_what_to_do() -> None:
    app = admin_app(make_engine(), auth=lambda request: False)
    async with client_for(app) as client:
        refused = await client.get("/")
    assert refused.status_code == 403
    assert refused.text.startswith("forbidden: this application's auth check refused")
    assert "Sign in" in refused.text
