"""``watukuy ui`` as a real process on 127.0.0.1, without ``--token``, attacked with raw
HTTP the way a web page elsewhere would: through DNS rebinding (its own name, re-pointed at
127.0.0.1, in ``Host``), with a stolen cookie and CSRF token from another origin, and with
a destructive action and its confirmation in one request.

The store is one ``watukuy demo`` wrote: its key ``orders`` has a live cursor and items in
its snapshot. Every attack must leave both as they were.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_cli_ui import _env, _serve, _stop

import watukuy as wk
from watukuy.model.rows import PKey

WIPE = {
    "action": "reset",
    "poller": "orders",
    "partition": "",
    "to": "null",
    "clear_snapshot": "on",
    "confirmed": "yes",
}
"""Reset the cursor and clear the snapshot, "confirmed" in the same request (issue 35)."""


async def _key_state(path: Path) -> tuple[str | None, int, bool]:
    """The live cursor of ``orders``, its snapshot's size and whether it is paused."""
    store = wk.SqliteStore(str(path))
    try:
        state = await store.load_state(PKey("orders"))
        assert state is not None
        return state.cursors.get("live"), await store.count_items(PKey("orders")), state.paused
    finally:
        await store.close()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store the demo polled for a second: ``orders`` has a cursor and a snapshot."""
    path = tmp_path / "ui.db"
    demo = subprocess.run(
        [sys.executable, "-m", "watukuy", "demo", "--duration", "1s", "--db", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=_env(tmp_path),
    )
    assert demo.returncode == 0, demo.stderr
    cursor, items, paused = asyncio.run(_key_state(path))
    assert cursor is not None
    assert items > 0
    assert not paused
    return path


@pytest.fixture
def served(tmp_path: Path, store: Path) -> Iterator[tuple[str, int]]:
    """``watukuy ui --store ...`` on a free port: (its URL, its port)."""
    process, url = _serve(tmp_path, "--store", f"sqlite:///{store}", "--allow-host", "ops.internal")
    try:
        yield url, int(url.rstrip("/").rsplit(":", 1)[1])
    finally:
        _stop(process)


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]{64})"', html)
    assert match is not None, html[:500]
    return match.group(1)


async def test_a_rebound_name_gets_nothing_and_changes_nothing(
    served: tuple[str, int], store: Path
) -> None:
    url, port = served
    before = await _key_state(store)
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", ""):
            page = await client.get("key", params={"poller": "orders"}, headers={"host": host})
            assert page.status_code == 400, (host, page.text)
            assert "does not answer to" in page.text
            assert 'name="csrf"' not in page.text
            assert "set-cookie" not in page.headers
        # The attack of issue 35 in one go: pause, and reset with clear-snapshot "confirmed".
        for form in ({"action": "pause", "poller": "orders", "partition": ""}, WIPE):
            evil = {"host": f"evil.example:{port}", "origin": f"http://evil.example:{port}"}
            posted = await client.post("action", data=form, headers=evil)
            assert posted.status_code == 400
        # The page's own names, and the one the operator added, are answered.
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "ops.internal"):
            assert (await client.get("", headers={"host": host})).status_code == 200, host
    assert await _key_state(store) == before


def test_a_valid_cookie_and_token_from_another_origin_are_refused(served: tuple[str, int]) -> None:
    url, port = served
    with httpx.Client(base_url=url, timeout=10) as client:
        token = csrf_of(client.get("key", params={"poller": "orders"}).text)
        form = {"csrf": token, "action": "pause", "poller": "orders", "partition": ""}
        attacks: list[dict[str, str]] = [
            {"origin": "https://evil.example"},
            {"origin": f"http://localhost:{port + 1}"},  # another app on this machine
            {"origin": "null"},
            {"sec-fetch-site": "cross-site"},
            {"sec-fetch-site": "same-site"},
            {"referer": "https://evil.example/attack.html"},
        ]
        for headers in attacks:
            refused = client.post("action", data=form, headers=headers)
            assert refused.status_code == 403, (headers, refused.status_code)
            assert refused.text.startswith("forbidden: cross-origin request"), refused.text
        assert "Paused" not in client.get("key", params={"poller": "orders"}).text
        # The page's own origin, as a browser sends it, is accepted.
        own = {"origin": f"http://127.0.0.1:{port}", "sec-fetch-site": "same-origin"}
        done = client.post("action", data=form, headers=own)
        assert done.status_code == 303, done.text
        page = client.get(done.headers["location"])
    assert "Paused: the key is neither polled nor delivered" in page.text


async def test_a_destructive_action_cannot_be_confirmed_in_the_request_that_asks(
    served: tuple[str, int], store: Path
) -> None:
    url, port = served
    before = await _key_state(store)
    own = {"origin": f"http://127.0.0.1:{port}", "sec-fetch-site": "same-origin"}
    async with httpx.AsyncClient(base_url=url, timeout=10, headers=own) as client:
        token = csrf_of((await client.get("key", params={"poller": "orders"})).text)
        form = {"csrf": token, **WIPE}
        asked = await client.post("action", data=form)
        assert asked.status_code == 200
        assert "clear the snapshot" in asked.text
        assert await _key_state(store) == before
        forged = await client.post(
            "action", data={**form, "confirm": f"9999999999999.x.{'0' * 64}"}
        )
        assert forged.status_code == 403
        assert await _key_state(store) == before
        confirm = re.search(r'name="confirm" value="([^"]+)"', asked.text)
        assert confirm is not None
        changed = await client.post(
            "action", data={**form, "to": "2026-01-01T00:00:00Z", "confirm": confirm.group(1)}
        )
        assert changed.status_code == 403  # a confirmation is for the form it showed
        assert await _key_state(store) == before
        done = await client.post("action", data={**form, "confirm": confirm.group(1)})
        assert done.status_code == 303
        replayed = await client.post("action", data={**form, "confirm": confirm.group(1)})
        assert replayed.status_code == 403  # once
    cursor, items, paused = await _key_state(store)
    assert (cursor, items, paused) == (None, 0, False)
