"""Pages on other origins against the admin page, in real servers and a real Chromium.

Three uvicorn servers on 127.0.0.1 in one thread and event loop, beside the engine of
conftest.py (on a SqliteStore), polled once: the key ``orders/globex`` has a live cursor
and items in its snapshot.



- **open**: ``admin_app(engine, auth=None)`` at ``/``: what ``watukuy ui`` serves on
  127.0.0.1 without ``--token``;
- **mounted**: a user's Starlette app with ``TrustedHostMiddleware`` mounting
  ``admin_app(engine, auth=...)`` at ``/watukuy``, as docs/operations.md shows (access
  needs the cookie ``operator=let-me-in``);
- **attacker**: pages the tests write, on another port: another origin of the same site
  (the cookies of 127.0.0.1 go with its requests, even ``SameSite=Strict`` ones), and,
  through Chromium's host resolver rules, ``evil.test``: another site.

Chromium resolves ``evil.test`` to 127.0.0.1, which is what DNS rebinding achieves. The
raw HTTP tests need no browser; the browser tests skip without Chromium, as in conftest.py.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.model.rows import PKey

from .conftest import AUTH_COOKIE, _build, chromium, in_a_thread, serve
from .test_admin_page import wait_for

AUTH = dict([AUTH_COOKIE])
KEY = PKey("orders", "globex")
KEY_PAGE = "key?poller=orders&partition=globex"


@dataclass
class Servers:
    """The ports of the three servers, and the engine behind the admin pages."""

    engine: wk.Engine
    loop: asyncio.AbstractEventLoop
    open: int
    mounted: int
    attacker: int
    attacks: dict[str, str] = field(default_factory=dict)

    def key_state(self) -> tuple[str | None, int, bool]:
        """The live cursor, the snapshot's size and whether the key is paused."""

        async def read() -> tuple[str | None, int, bool]:
            store = self.engine.store
            state = await store.load_state(KEY)
            assert state is not None
            return state.cursors.get("live"), await store.count_items(KEY), state.paused

        return asyncio.run_coroutine_threadsafe(read(), self.loop).result(10)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    from starlette.applications import Starlette
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse
    from starlette.routing import Mount, Route

    from watukuy.integrations.admin import admin_app

    db = tmp_path_factory.mktemp("cross-origin") / "watukuy.db"
    attacks: dict[str, str] = {}

    def operators(request: Request) -> bool:
        return request.cookies.get(AUTH_COOKIE[0]) == AUTH_COOKIE[1]

    async def attack(request: Request) -> HTMLResponse:
        return HTMLResponse(attacks.get(request.path_params["name"], "nothing here"))

    async def start() -> tuple[Servers, list[tuple[Any, asyncio.Future[None], int]]]:
        engine = _build(db)[0]
        await engine.tick()
        mounted = Starlette(routes=[Mount("/watukuy", admin_app(engine, auth=operators))])
        mounted.add_middleware(TrustedHostMiddleware, allowed_hosts=["localhost", "127.0.0.1"])
        running = [
            await serve(admin_app(engine, auth=None)),
            await serve(mounted),
            await serve(Starlette(routes=[Route("/{name}", attack)])),
        ]
        ports = [port for _, _, port in running]
        found = Servers(engine, asyncio.get_running_loop(), *ports, attacks=attacks)
        return found, running

    async def stop(started: tuple[Servers, list[tuple[Any, asyncio.Future[None], int]]]) -> None:
        found, running = started
        for server, serving, _ in running:
            server.should_exit = True
            await serving
        await found.engine.store.close()

    with in_a_thread("cross-origin-servers", start, stop) as (found, _):
        yield found


def csrf_of(page: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert match is not None, page[:300]
    return match.group(1)


# --- raw HTTP: admin_app mounted in a user's app ---------------------------------------------


def test_the_mounted_page_refuses_a_rebound_host(servers: Servers) -> None:
    url = f"http://127.0.0.1:{servers.mounted}/watukuy/"
    for host in (f"evil.test:{servers.mounted}", "evil.test"):
        refused = httpx.get(url, cookies=AUTH, headers={"host": host})
        assert refused.status_code == 400, host
        assert 'name="csrf"' not in refused.text
    assert httpx.get(url, cookies=AUTH).status_code == 200


def test_the_mounted_page_refuses_a_valid_cookie_and_token_from_another_origin(
    servers: Servers,
) -> None:
    before = servers.key_state()
    base = f"http://localhost:{servers.mounted}/watukuy/"
    with httpx.Client(base_url=base, cookies=AUTH, timeout=10) as client:
        token = csrf_of(client.get(KEY_PAGE).text)
        form = {"csrf": token, "action": "pause", "poller": "orders", "partition": "globex"}
        refused = client.post("action", data=form, headers={"origin": "https://evil.example"})
        assert refused.status_code == 403
        assert "cross-origin" in refused.text
        assert servers.key_state() == before
        # The same form from the page itself goes through.
        own = {"origin": f"http://localhost:{servers.mounted}", "sec-fetch-site": "same-origin"}
        assert client.post("action", data=form, headers=own).status_code == 303
        assert servers.key_state()[2] is True
        resume = {**form, "action": "resume"}
        assert client.post("action", data=resume, headers=own).status_code == 303
    assert servers.key_state() == before


def test_the_mounted_page_never_resets_in_the_request_that_asks(servers: Servers) -> None:
    before = servers.key_state()
    base = f"http://localhost:{servers.mounted}/watukuy/"
    own = {"origin": f"http://localhost:{servers.mounted}", "sec-fetch-site": "same-origin"}
    with httpx.Client(base_url=base, cookies=AUTH, headers=own, timeout=10) as client:
        token = csrf_of(client.get(KEY_PAGE).text)
        asked = client.post(
            "action",
            data={
                "csrf": token,
                "action": "reset",
                "poller": "orders",
                "partition": "globex",
                "to": "null",
                "clear_snapshot": "on",
                "confirmed": "yes",
            },
        )
    assert asked.status_code == 200
    assert 'name="confirm"' in asked.text
    assert servers.key_state() == before


# --- in Chromium: the open page, as watukuy ui serves it ----------------------------------


@pytest.fixture(scope="module")
def chrome(servers: Servers) -> Iterator[Any]:
    """Headless Chromium that resolves ``evil.test`` to 127.0.0.1."""
    driver = chromium("--host-resolver-rules=MAP evil.test 127.0.0.1")
    try:
        yield driver
    finally:
        driver.quit()


def _body(driver: Any) -> str:
    return str(driver.execute_script("return document.body ? document.body.innerText : ''"))


def test_a_rebound_name_loads_no_page_and_no_token(servers: Servers, chrome: Any) -> None:
    chrome.get(f"http://evil.test:{servers.open}/{KEY_PAGE}")
    assert "does not answer to host" in _body(chrome)
    assert 'name="csrf"' not in chrome.page_source
    chrome.get(f"http://127.0.0.1:{servers.open}/{KEY_PAGE}")  # its own name: served
    assert 'name="csrf"' in chrome.page_source


def _form(action_url: str, fields: dict[str, str]) -> str:
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">'
        for name, value in fields.items()
    )
    return (
        f'<form id="f" method="post" action="{html.escape(action_url)}">{inputs}</form>'
        "<script>document.getElementById('f').submit();</script>"
    )


def _fetch(action_url: str, fields: dict[str, str]) -> str:
    body = "&".join(f"{name}={value}" for name, value in fields.items())
    return (
        "<p id='done'>sending</p><script>"
        f"fetch({action_url!r}, {{method: 'POST', mode: 'no-cors', credentials: 'include', "
        "headers: {'content-type': 'application/x-www-form-urlencoded'}, "
        f"body: {body!r}}})"
        ".finally(function () { document.getElementById('done').textContent = 'sent'; });"
        "</script>"
    )


def test_a_page_on_another_origin_cannot_drive_the_admin_page(
    servers: Servers, chrome: Any
) -> None:
    before = servers.key_state()
    # The operator has the page open: the browser holds its session cookie, and the
    # attacker (somehow) knows the form token that goes with it.
    chrome.get(f"http://127.0.0.1:{servers.open}/{KEY_PAGE}")
    token = csrf_of(chrome.page_source)
    action = f"http://127.0.0.1:{servers.open}/action"
    pause = {"csrf": token, "action": "pause", "poller": "orders", "partition": "globex"}
    wipe = {
        **pause,
        "action": "reset",
        "to": "null",
        "clear_snapshot": "on",
        "confirmed": "yes",
    }
    servers.attacks.update(
        {
            "pause.html": _form(action, pause),
            "wipe.html": _form(action, wipe),
            "fetch.html": _fetch(action, pause),
        }
    )
    for origin in (f"http://127.0.0.1:{servers.attacker}", f"http://evil.test:{servers.attacker}"):
        for page in ("pause.html", "wipe.html"):
            chrome.get(f"{origin}/{page}")
            text = wait_for(lambda: _body(chrome) if "forbidden" in _body(chrome) else "")
            assert "cross-origin" in text, (origin, page, text)
            assert servers.key_state() == before, (origin, page)
        chrome.get(f"{origin}/fetch.html")
        wait_for(lambda: "sent" in _body(chrome))
        assert servers.key_state() == before, (origin, "fetch")
    # The same form, from the page itself, still works.
    chrome.get(f"http://127.0.0.1:{servers.open}/{KEY_PAGE}")
    chrome.find_element("css selector", '[data-action="pause"]').click()
    wait_for(lambda: "Paused" in _body(chrome))
    assert servers.key_state()[2] is True
    chrome.find_element("css selector", '[data-action="resume"]').click()
    wait_for(lambda: "Resumed" in _body(chrome))
    assert servers.key_state() == before
