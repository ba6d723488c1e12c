"""A store that stops answering never hangs the engine, and loses nothing.

Each test starts a server of its own (``initdb`` + ``postgres`` on a free port in a temp
directory, or ``redis-server``), never the shared ones, polls a scripted API through it,
then freezes the whole server with ``SIGSTOP``: ``tick(max_duration="5s")`` still returns
within 10 s, with a ``StoreError`` for the key, on ``on_error`` and in a WARNING; the key
backs off (the next pass does not run it); and after ``SIGCONT`` everything the API listed
is delivered. The servers' own error texts reach the caller: "Connection refused",
``database "x" does not exist``, "password authentication failed".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _private_servers import PrivateServer, free_port
from _private_servers import private_postgres as start_private_postgres
from _private_servers import private_redis as start_private_redis

import watukuy as wk
from support.vendors import KeysetVendor
from watukuy.model.rows import PKey

pytestmark = [pytest.mark.slow]

PASSWORD = "s3cret-outage"


@pytest.fixture
def private_postgres() -> Iterator[PrivateServer]:
    yield from start_private_postgres(PASSWORD)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateServer]:
    yield from start_private_redis(tmp_path)


async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
    response = await ctx.http.get("https://vendor.test/items", params={"since": ctx.cursor.value})
    body = response.json()
    return wk.Page(items=body["data"], has_more=body["has_more"])


class Errors:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_error(self, details: Any) -> None:
        self.seen.append(dict(details.error))


def engine_on(
    store: wk.StateStore, vendor: KeysetVendor, hooks: Errors, **options: Any
) -> wk.Engine:
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at"),
        fetch=fetch,
        schedule=wk.Schedule(min="1s", max="1s", adaptive=False, jitter=0),
    )
    return wk.Engine(
        store=store,
        pollers=[poller],
        hooks=hooks,
        http_client=httpx.AsyncClient(transport=vendor.transport()),
        **options,
    )


async def survive_a_freeze(
    server: PrivateServer, store: wk.StateStore, caplog: pytest.LogCaptureFixture
) -> None:
    vendor, hooks = KeysetVendor(), Errors()
    for n in (1, 2, 3):
        vendor.add(n)
    engine = engine_on(store, vendor, hooks)
    delivered: list[str] = []
    engine.on("orders", lambda event, ctx: delivered.append(event.subject))
    first = await engine.tick(max_duration="5s")
    assert first.errors == []
    assert delivered == ["item-001", "item-002", "item-003"]
    for n in (4, 5, 6):
        vendor.add(n)
    await asyncio.sleep(1.1)  # the key is due again (an e2e test: real time)

    server.freeze()
    try:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="watukuy"):
            frozen = await engine.tick(max_duration="5s")
        took = time.monotonic() - started
        # Without the deadline the tick would hang on the frozen server for good; how close
        # it returns to 5 s is the machine's business (generous bound, not a figure).
        assert took < 60, f"tick(max_duration='5s') took {took:.1f} s"
        errors = [cycle.error for cycle in frozen.polled if cycle.error is not None]
        assert errors, frozen
        assert errors[0]["name"] == "StoreError"
        assert hooks.seen
        assert hooks.seen[-1]["name"] == "StoreError"
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("run of orders failed" in w and "next try in" in w for w in warnings), warnings
        # The key backs off in memory (the store cannot keep its schedule): the next pass
        # runs it only once its wait is over, and its next wait is longer.
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="watukuy"):
            await engine.tick(max_duration="5s")
        assert time.monotonic() - started < 60
        failures = [
            r.getMessage() for r in caplog.records if "run of orders failed" in r.getMessage()
        ]
        assert "failure 1 in a row" in failures[0], failures
        assert "failure 2 in a row" in failures[-1], failures
    finally:
        server.thaw()

    await asyncio.sleep(2.5)  # the backoff of a first failure (1 s, up to 2 s) runs out
    after = await engine.tick(max_duration="5s")
    assert after.errors == [], after
    assert sorted(set(delivered)) == [f"item-{n:03d}" for n in range(1, 7)]
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert await store.count_pending(PKey("orders")) == 0
    print(f"frozen tick returned in {took:.1f} s: {errors[0]['message']}")


async def test_a_frozen_postgres(
    private_postgres: PrivateServer, caplog: pytest.LogCaptureFixture
) -> None:
    from watukuy.stores.postgres import PostgresStore

    url = (
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:{private_postgres.port}/postgres"
        "?connect_timeout=1&statement_timeout=2s&timeout=3s"
    )
    store = PostgresStore(url, schema="outage")
    try:
        await store.migrate()
        await survive_a_freeze(private_postgres, store, caplog)
    finally:
        await store.close()


async def test_a_frozen_redis(
    private_redis: PrivateServer, caplog: pytest.LogCaptureFixture
) -> None:
    from watukuy.stores.redis import RedisStore

    url = f"redis://127.0.0.1:{private_redis.port}/0?socket_timeout=2&socket_connect_timeout=1"
    store = RedisStore.from_url(url)
    try:
        await store.migrate()
        await survive_a_freeze(private_redis, store, caplog)
    finally:
        await store.close()


async def test_postgres_errors_name_their_cause(
    private_postgres: PrivateServer, caplog: pytest.LogCaptureFixture
) -> None:
    from watukuy.stores.postgres import PostgresStore

    port = private_postgres.port
    closed = free_port()
    cases = {
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:{closed}/postgres": "Connection refused",
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/nowhere": (
            'database "nowhere" does not exist'
        ),
        f"postgresql://postgres:wrong@127.0.0.1:{port}/postgres": (
            'password authentication failed for user "postgres"'
        ),
    }
    for url, cause in cases.items():
        hooks = Errors()
        store = PostgresStore(url + "?connect_timeout=1", schema="outage")
        # Without auto_migrate the first store call is the key's own: its failure is a
        # failed run, reported like one.
        engine = engine_on(store, KeysetVendor(), hooks, auto_migrate=False)
        caplog.clear()
        try:
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="watukuy"):
                result = await engine.tick(max_duration="5s")
            assert time.monotonic() - started < 60  # it returns; how fast is not asserted
            [cycle] = result.polled
            assert cycle.error is not None
            message = cycle.error["message"]
            assert cycle.error["name"] == "StoreError"
            assert cause in message, message
            assert "couldn't get a connection" not in message
            assert PASSWORD not in message
            assert [error["message"] for error in hooks.seen] == [message]
            warnings = [r.getMessage() for r in caplog.records if r.name == "watukuy"]
            assert any(cause in w for w in warnings), warnings
        finally:
            await store.close()
