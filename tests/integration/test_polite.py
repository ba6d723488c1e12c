"""An API that misbehaves never makes the engine hammer it.

Each test runs the daemon (or ticks) on a ``VirtualClock`` against a scripted vendor and
counts the requests it receives over a fixed stretch of virtual time, with the default
``Schedule`` and ``Circuit``: every hot loop shows up as thousands of requests.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.model.ports import StateStore
from watukuy.model.rows import CircuitState, PKey
from watukuy.testing import SeededRandom, VirtualClock

from .conftest import open_store

BASE = "https://vendor.test"
T0 = "2025-12-31T00:00:00.000Z"

Answer = Callable[[httpx.Request, int], httpx.Response]


@dataclass
class ScriptedVendor:
    """A scripted API: ``answer(request, n)`` for the n-th request (1-based) of a path."""

    clock: VirtualClock
    answers: dict[str, Answer] = field(default_factory=dict)
    log: list[tuple[str, int]] = field(default_factory=list)

    def count(self, path: str) -> int:
        return sum(1 for logged, _ in self.log if logged == path)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.log.append((path, self.clock.now()))
        return self.answers[path](request, self.count(path))

    def engine(
        self, store: StateStore, *pollers: wk.PollerDefinition[Any], hooks: Any = None
    ) -> wk.Engine:
        return wk.Engine(
            store=store,
            pollers=list(pollers),
            clock=self.clock,
            random=SeededRandom(3),
            instance_id="polite",
            hooks=hooks,
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(self.handle)),
        )


def listing(*items: dict[str, Any], has_more: bool = False, cursor: str | None = None) -> Answer:
    def answer(request: httpx.Request, n: int) -> httpx.Response:
        body: dict[str, Any] = {"data": list(items), "has_more": has_more}
        if cursor is not None:
            body["next"] = cursor
        return httpx.Response(200, json=body)

    return answer


def status(code: int, headers: dict[str, str] | None = None) -> Answer:
    return lambda request, n: httpx.Response(code, headers=headers or {}, json={"error": code})


def item(n: int, at: str = T0) -> dict[str, Any]:
    return {"id": f"item-{n:03d}", "updated_at": at}


async def fetch_items(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    response = await ctx.http.get(f"{BASE}/items", params={"since": ctx.cursor.value})
    body = response.json()
    return wk.Page(items=body["data"], has_more=body["has_more"])


async def fetch_tokens(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    response = await ctx.http.get(f"{BASE}/tokens", params={"cursor": ctx.cursor.value})
    body = response.json()
    return wk.Page(items=body["data"], cursor=body["next"], has_more=body["has_more"])


async def fetch_everything(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    response = await ctx.http.get(f"{BASE}/all", params={"page": ctx.page})
    body = response.json()
    return wk.Page(items=body["data"], has_more=body["has_more"])


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("cursor", wk.TimestampCursor(field="updated_at", tie_break="id"))
    options.setdefault("fetch", fetch_items)
    return wk.define_poller(name="orders", identity=lambda o: o["id"], **options)


@pytest.fixture
async def store() -> AsyncIterator[StateStore]:
    created = wk.MemoryStore()
    await created.migrate()
    yield created
    await created.close()


@pytest.fixture
def vendor() -> ScriptedVendor:
    return ScriptedVendor(VirtualClock())


async def run_daemon(engine: wk.Engine, clock: VirtualClock, duration: str) -> None:
    async with engine:
        await clock.advance(duration)


# --- the rows of the table ---------------------------------------------------------------


async def test_a_page_that_claims_more_without_moving_the_cursor_fails_the_cycle(
    vendor: ScriptedVendor, store: StateStore
) -> None:
    vendor.answers["/tokens"] = listing(item(1), has_more=True, cursor="same")
    poller = orders(cursor=wk.TokenCursor(), fetch=fetch_tokens)
    engine = vendor.engine(store, poller)
    engine.on("orders", lambda event, ctx: None)
    first = await engine.tick()
    [cycle] = first.polled
    assert cycle.error is not None
    assert cycle.error["code"] == "INVALID_PAGE"
    assert "left the cursor where it was" in cycle.error["message"]
    assert vendor.count("/tokens") == 2  # the page that moved it, then the one that did not
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.consecutive_failures == 1

    await run_daemon(engine, vendor.clock, "60s")
    # Backoff, then the circuit: a handful of cycles in a minute, two requests each.
    assert vendor.count("/tokens") <= 20
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.circuit is CircuitState.OPEN


async def test_retry_after_zero_every_time_backs_off_without_opening_the_circuit(
    vendor: ScriptedVendor, store: StateStore
) -> None:
    vendor.answers["/items"] = status(429, {"retry-after": "0"})
    engine = vendor.engine(store, orders())
    await run_daemon(engine, vendor.clock, "10m")
    # 1 s, 2 s, 4 s, ... (backoff, jittered) up to schedule.max: about ten in ten minutes.
    assert vendor.count("/items") <= 15
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.consecutive_failures == 0
    assert state.schedule.circuit is CircuitState.CLOSED
    assert state.schedule.consecutive_throttles >= 3


async def test_a_throttled_cycle_is_reported_as_throttled_not_failed(
    vendor: ScriptedVendor, store: StateStore, caplog: pytest.LogCaptureFixture
) -> None:
    vendor.answers["/items"] = status(429, {"retry-after": "0"})
    engine = vendor.engine(store, orders())
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        result = await engine.tick()
    [cycle] = result.polled
    assert cycle.throttled
    assert cycle.error is not None
    assert cycle.error["status"] == 429
    assert result.errors == []
    assert result.throttled == [cycle]
    assert result.to_dict()["polled"][0]["throttled"] is True
    messages = [record.getMessage() for record in caplog.records]
    assert any(message.startswith("[orders] live cycle throttled") for message in messages), (
        messages
    )
    assert not any("failed" in message for message in messages), messages


async def test_a_429_without_retry_after_waits_a_growing_floor(
    vendor: ScriptedVendor, store: StateStore
) -> None:
    vendor.answers["/items"] = status(429)
    engine = vendor.engine(store, orders(schedule=wk.Schedule(min="1s", max="5m")))
    await run_daemon(engine, vendor.clock, "10m")
    times = [at for path, at in vendor.log if path == "/items"]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # backoff 1 s x2 (jittered +-10%) up to schedule.max: the gaps keep growing, and a
    # throttle never counts as a failure.
    assert len(times) <= 15
    assert gaps[:4] == sorted(gaps[:4])
    assert gaps[3] >= 7_000
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.consecutive_failures == 0


async def test_a_far_future_retry_after_is_capped_at_schedule_max(
    vendor: ScriptedVendor, store: StateStore
) -> None:
    vendor.answers["/items"] = status(429, {"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"})
    engine = vendor.engine(store, orders())
    now = vendor.clock.now()
    result = await engine.tick()
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.next_due_at is not None
    assert state.schedule.next_due_at <= now + 5 * 60_000  # the default schedule.max
    assert state.wake_at is not None
    assert state.wake_at <= now + 5 * 60_000
    assert result.polled[0].throttled


async def test_a_failing_reconcile_backs_off_alone_and_the_live_lane_keeps_polling(
    vendor: ScriptedVendor, store: StateStore
) -> None:
    vendor.answers["/items"] = listing(item(1))
    vendor.answers["/all"] = status(500)
    poller = orders(reconcile=wk.Reconcile(every="1h", fetch=fetch_everything))
    opened: list[str] = []

    class Hooks:
        def on_circuit_open(self, details: Any) -> None:
            opened.append(details.lane)

    engine = vendor.engine(store, poller, hooks=Hooks())
    seen: list[str] = []
    engine.on("orders", lambda event, ctx: seen.append(event.subject))
    await run_daemon(engine, vendor.clock, "10m")
    # Backoff with jitter, the reconcile lane's own circuit after five failures, then one
    # probe per schedule.max: a handful of requests, not thousands.
    assert vendor.count("/all") <= 12
    assert opened == ["reconcile"]
    assert vendor.count("/items") >= 3  # the live lane went on polling
    assert seen == ["item-001"]
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.circuit is CircuitState.CLOSED
    assert state.schedule.consecutive_failures == 0
    assert state.schedule.lanes["reconcile"].circuit is CircuitState.OPEN

    # The listing recovers: the next probe closes the lane's circuit.
    vendor.answers["/all"] = listing(item(1))
    again = vendor.engine(store, poller)
    again.on("orders", lambda event, ctx: None)
    await run_daemon(again, vendor.clock, "10m")
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert "reconcile" not in state.schedule.lanes
    assert state.last_reconcile_at is not None


async def test_a_failing_backfill_backs_off_alone(
    vendor: ScriptedVendor, store: StateStore
) -> None:
    calls = {"backfill": 0}

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        if ctx.lane == "backfill":
            calls["backfill"] += 1
            response = await ctx.http.get(f"{BASE}/old")
        else:
            response = await ctx.http.get(f"{BASE}/items")
        body = response.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    vendor.answers["/items"] = listing(item(1))
    vendor.answers["/old"] = status(500)
    engine = vendor.engine(store, orders(fetch=fetch))
    engine.on("orders", lambda event, ctx: None)
    await engine.tick()
    await engine.backfill("orders", from_="2025-01-01T00:00:00Z")
    await run_daemon(engine, vendor.clock, "10m")
    assert 5 <= vendor.count("/old") <= 12
    assert vendor.count("/items") >= 3
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.backfill is not None
    assert state.schedule.lanes["backfill"].circuit is CircuitState.OPEN
    assert state.schedule.circuit is CircuitState.CLOSED


async def test_the_strictest_of_two_rate_limit_policies_paces_the_key(
    vendor: ScriptedVendor, store: StateStore
) -> None:
    def answer(request: httpx.Request, n: int) -> httpx.Response:
        # A new item on every answer keeps AIMD at schedule.min (1 s): only pacing slows it.
        at = f"2025-12-31T00:00:{n % 60:02d}.000Z"
        return httpx.Response(
            200,
            headers={"ratelimit": '"burst";r=5;t=1, "day";r=900;t=3600'},
            json={"data": [item(n, at)], "has_more": False},
        )

    vendor.answers["/items"] = answer
    engine = vendor.engine(store, orders(schedule=wk.Schedule(min="1s", max="5m", jitter=0)))
    engine.on("orders", lambda event, ctx: None)
    await run_daemon(engine, vendor.clock, "60s")
    # The daily policy leaves 900 requests for an hour: one every 4 s, not one per second.
    assert 12 <= vendor.count("/items") <= 16
    state = await store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.rate_limit is not None
    assert state.schedule.rate_limit.remaining == 900


# --- absurd header values never reach the store -------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    store = await open_store(request.param, tmp_path, request)
    yield store
    await store.close()


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": str(2**70)},
        {"retry-after": "1e30"},
        {"ratelimit": '"burst";r=0;t=' + str(2**70)},
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(2**70)},
        {"ratelimit-limit": str(10**40), "ratelimit-remaining": str(10**40)},
    ],
    ids=["retry-after", "retry-after-float", "ratelimit-t", "vendor-reset", "huge-counts"],
)
async def test_huge_header_values_are_stored_fine(
    any_store: StateStore, headers: dict[str, str]
) -> None:
    vendor = ScriptedVendor(VirtualClock())
    throttled = "retry-after" in headers
    code = 429 if throttled else 200
    vendor.answers["/items"] = (
        status(code, headers)
        if throttled
        else (
            lambda request, n: httpx.Response(
                200, headers=headers, json={"data": [], "has_more": False}
            )
        )
    )
    engine = vendor.engine(any_store, orders())
    now = vendor.clock.now()
    result = await engine.tick()
    [cycle] = result.polled
    assert cycle.error is None or cycle.throttled, cycle.error
    state = await any_store.load_state(PKey("orders"))
    assert state is not None
    assert state.schedule.next_due_at is not None
    assert state.schedule.next_due_at <= now + 86_400_000
    info = state.schedule.rate_limit
    if info is not None:
        assert info.reset_at is None or info.reset_at <= now + 86_400_000
        assert info.limit is None or info.limit < 2**63
