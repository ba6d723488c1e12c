"""An operator signs in to the admin page with ``basic_auth`` in a real headless Chromium,
and acts: the sign-in a browser can do with no code of the application's (see
conftest.py for the engine behind the page)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from watukuy.model.rows import PKey

from .conftest import _build, chromium, in_a_thread, serve
from .test_admin_page import click, css, flash, wait_for

USER = "ops"
PASSWORD = "correct-horse-battery"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any, Any]]:
    """The page at ``/watukuy`` behind ``basic_auth``: its URL, the engine and its loop."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from watukuy.integrations.admin import admin_app, basic_auth

    db: Path = tmp_path_factory.mktemp("basic-auth") / "watukuy.db"

    async def start() -> tuple[str, Any, Any, Any, Any]:
        engine, *_ = _build(db)
        auth = basic_auth(USER, PASSWORD)
        app = Starlette(routes=[Mount("/watukuy", admin_app(engine, auth=auth, refresh="1s"))])
        await engine.start()
        server, serving, port = await serve(app)
        return f"127.0.0.1:{port}", engine, asyncio.get_running_loop(), server, serving

    async def stop(started: tuple[str, Any, Any, Any, Any]) -> None:
        _, engine, _, server, serving = started
        server.should_exit = True
        await serving
        await engine.stop(drain=False)
        await engine.store.close()

    with in_a_thread("basic-auth-site", start, stop) as (host, engine, loop, _, _):
        yield host, engine, loop


def test_an_operator_signs_in_and_pauses_a_key(signed: tuple[str, Any, Any]) -> None:
    host, engine, loop = signed
    refused = httpx.get(f"http://{host}/watukuy/", timeout=10)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith('Basic realm="watukuy admin"')

    def paused() -> bool:
        state = asyncio.run_coroutine_threadsafe(
            engine.store.load_state(PKey("orders", "acme")), loop
        ).result(10)
        return bool(state is not None and state.paused)

    driver = chromium("--window-size=1280,800")
    try:
        # What a user types in the address bar after the dialog, in one step: the
        # credentials go with the page and every request it makes after.
        driver.get(f"http://{USER}:{PASSWORD}@{host}/watukuy/key?poller=orders&partition=acme")
        wait_for(lambda: css(driver, '[data-action="pause"]'))
        assert "No authentication." not in driver.page_source
        click(driver, '[data-action="pause"]')
        wait_for(lambda: "Paused" in flash(driver))  # not the flash of the action before
        assert paused()
        click(driver, '[data-action="resume"]')
        wait_for(lambda: "Resumed" in flash(driver))  # not the flash of the action before
        assert not paused()
    finally:
        driver.quit()
