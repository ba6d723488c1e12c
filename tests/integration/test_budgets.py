"""Rate budgets through the whole engine (G6), on a VirtualClock and a MemoryStore.

Every request a poller sends through ``ctx.http`` is charged to its budget first, so the
FakeApi's request log is the ground truth: how many calls were made, and at which virtual
time. A ``Budget(requests=n, per=p)`` is a hard cap of ``n`` calls in any window of ``p``, so
with ``requests=2, per="10s"`` the first two calls go out at once and the next two exactly
when those are ten seconds old.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import watukuy as wk
from watukuy.budget import InMemoryBudgetStore
from watukuy.model.options import Fairness
from watukuy.model.ports import BudgetPolicy
from watukuy.model.rows import PKey
from watukuy.runtime.hooks import BudgetWaitDetails
from watukuy.testing import FakeApi, VirtualClock

from .conftest import BASE, Recorder, World, item, timestamp_fetch


@pytest.fixture
async def world() -> World:
    """A MemoryStore world (budgets live in the engine, not in the state store)."""
    clock = VirtualClock()
    store = wk.MemoryStore()
    await store.migrate()
    return World(clock=clock, api=FakeApi(clock), store=store)


def stamp(second: int) -> str:
    return f"2025-12-31T12:00:{second:02d}.000Z"


def fill(world: World, tenant: str, count: int, first: int = 1) -> None:
    """``count`` items on ``tenant``, one second apart, so keyset pages are predictable."""
    for n in range(first, first + count):
        world.api.tenant(tenant).add(item(n, stamp(n)))


def keyset_poller(name: str, tenant: str, **options: Any) -> wk.PollerDefinition[Any]:
    """A timestamp poller on ``tenant`` paging 2 items at a time, charging budget ``erp``."""
    options.setdefault("budget", "erp")
    options.setdefault("fetch", timestamp_fetch(limit=2, path=f"/t/{tenant}/items"))
    options.setdefault("schedule", wk.Schedule(min="1h", max="2h", jitter=0))
    return wk.define_poller(
        name=name,
        identity=lambda o: o["id"],
        # overlap=0: no lookback re-read, so each listing costs the requests counted below.
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap=0),
        **options,
    )


def listing_fetch(tenant: str, page_size: int = 2) -> Callable[..., Any]:
    """A full listing of ``tenant`` by page number (what a reconcile lane walks)."""

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{BASE}/t/{tenant}/items/page", params={"page": ctx.page, "page_size": page_size}
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return fetch


@dataclass
class BudgetWaits:
    """Records every ``on_budget_wait`` with the virtual time it fired at."""

    clock: VirtualClock
    seen: list[tuple[str, str, str, int, int]] = field(default_factory=list)

    def on_budget_wait(self, details: BudgetWaitDetails) -> None:
        self.seen.append(
            (details.poller, details.lane, details.budget, details.wait_ms, self.clock.now())
        )


def calls(world: World, start: int, skip: int = 0) -> list[tuple[int, str, str]]:
    """``(ms since start, tenant, route)`` of every request the FakeApi served."""
    return [(r.at - start, r.tenant, r.route or "") for r in world.api.log[skip:]]


async def drive(clock: VirtualClock, task: asyncio.Task[Any]) -> None:
    """Fire timers one by one until ``task`` is done."""
    await clock.flush()
    while not task.done():
        assert await clock.run_next(), "the task waits for something other than the clock"
        await clock.flush()


async def test_two_pollers_sharing_two_per_ten_seconds_make_exactly_six_calls(
    world: World,
) -> None:
    fill(world, "a", 5)  # 5 items in pages of 2: three requests each
    fill(world, "b", 5)
    waits = BudgetWaits(world.clock)
    engine = world.engine(
        keyset_poller("alpha", "a"),
        keyset_poller("beta", "b"),
        budgets={"erp": wk.Budget(requests=2, per="10s")},
        hooks=waits,
    )
    recorder = Recorder()
    engine.on("alpha", recorder)
    engine.on("beta", Recorder())
    start = world.clock.now()

    tick = asyncio.create_task(engine.tick())
    await world.clock.advance_to(start + 9_999)
    assert world.api.calls == 2  # the window of the first two is full for ten seconds
    await world.clock.advance_to(start + 10_000)
    assert world.api.calls == 4
    await world.clock.advance_to(start + 19_999)
    assert not tick.done()  # the last two only fit at +20 s
    assert world.api.calls == 4
    await world.clock.advance_to(start + 20_000)
    assert tick.done()
    result = tick.result()

    assert world.api.calls == 6
    # Two per window, each pair as the previous one leaves, round-robin between the pollers.
    assert calls(world, start) == [
        (0, "a", "since"),
        (0, "b", "since"),
        (10_000, "a", "since"),
        (10_000, "b", "since"),
        (20_000, "a", "since"),
        (20_000, "b", "since"),
    ]
    assert result.duration_ms == 20_000
    assert result.errors == []
    assert sorted((r.poller, r.items, r.events) for r in result.polled) == [
        ("alpha", 5, 5),
        ("beta", 5, 5),
    ]
    assert len(recorder.events) == 5
    # One on_budget_wait per request that waited, with the exact wait, fired on the grant.
    assert waits.seen == [
        ("alpha", "live", "erp", 10_000, start + 10_000),
        ("beta", "live", "erp", 10_000, start + 10_000),
        ("alpha", "live", "erp", 10_000, start + 20_000),
        ("beta", "live", "erp", 10_000, start + 20_000),
    ]
    assert world.clock.pending_timers() == 0


async def test_lane_priority_live_before_reconcile_before_backfill(world: World) -> None:
    for tenant in ("live", "rec", "back"):
        fill(world, tenant, 3)  # pages of 2: two requests per listing
    budget_store = InMemoryBudgetStore()
    engine = world.engine(
        # Declared in reverse priority, so the queue order is not the declaration order.
        keyset_poller("back", "back"),
        keyset_poller(
            "rec",
            "rec",
            reconcile=wk.Reconcile(every="1m", fetch=listing_fetch("rec")),
        ),
        keyset_poller("live", "live", schedule=wk.Schedule(min="1m", max="1m", jitter=0)),
        budgets={"erp": wk.Budget(requests=1, per="1s", max_wait="1m")},
        budget_store=budget_store,
    )
    for name in ("back", "rec", "live"):
        engine.on(name, Recorder())
    await drive(world.clock, asyncio.create_task(engine.tick()))  # first sync of all three
    setup_calls = world.api.calls
    assert setup_calls == 8  # three live listings and one reconcile listing, 2 pages each

    await world.clock.advance("2m")
    fill(world, "live", 3, first=4)  # new data for the live lane: two more pages
    await engine.backfill("back", from_=None)
    # Another consumer of the budget just filled its window: every lane has to queue.
    assert await budget_store.try_take("erp", BudgetPolicy(1, 1_000), 1, world.clock.now()) == 0
    start = world.clock.now()
    tick = asyncio.create_task(engine.tick())
    await drive(world.clock, tick)
    result = tick.result()

    assert calls(world, start, skip=setup_calls) == [
        (1_000, "live", "since"),
        (2_000, "live", "since"),
        (3_000, "rec", "page"),
        (4_000, "rec", "page"),
        (5_000, "back", "since"),
        (6_000, "back", "since"),
    ]
    assert sorted((r.poller, r.lane, r.error is None) for r in result.polled) == [
        ("back", "backfill", True),
        ("live", "live", True),
        ("rec", "reconcile", True),
    ]


def weighted_pollers(fairness: Fairness, world: World) -> tuple[wk.Engine, InMemoryBudgetStore]:
    """A weight-3 and a weight-1 poller, six requests each, on a one-per-second budget."""
    fill(world, "heavy", 12)  # pages of 2: six requests each
    fill(world, "light", 12)
    budget_store = InMemoryBudgetStore()
    engine = world.engine(
        keyset_poller("heavy", "heavy", budget_weight=3),
        keyset_poller("light", "light", budget_weight=1),
        budgets={"erp": wk.Budget(requests=1, per="1s", fairness=fairness, max_wait="1m")},
        budget_store=budget_store,
    )
    engine.on("heavy", Recorder())
    engine.on("light", Recorder())
    return engine, budget_store


@pytest.mark.parametrize(
    ("fairness", "expected"),
    [
        # Least recently served goes next: weights play no part.
        ("round-robin", "HL" * 6),
        # Lowest cost per unit of weight goes next (arrival order breaks ties): about
        # three heavy calls per light one until the heavy poller runs out of pages.
        ("weighted", "HLHHLHHHLLLL"),
    ],
)
async def test_fairness_modes_decide_who_is_granted_next(
    world: World, fairness: Fairness, expected: str
) -> None:
    engine, budget_store = weighted_pollers(fairness, world)
    # Start with a full window, so that every call is a contested grant.
    assert await budget_store.try_take("erp", BudgetPolicy(1, 1_000), 1, world.clock.now()) == 0
    start = world.clock.now()
    tick = asyncio.create_task(engine.tick())
    await drive(world.clock, tick)
    assert tick.result().errors == []

    served = calls(world, start)
    assert "".join("H" if tenant == "heavy" else "L" for _, tenant, _ in served) == expected
    assert [at for at, _, _ in served] == [1_000 * n for n in range(1, 13)]


async def test_a_budget_timeout_defers_the_cycle_without_counting_a_failure(
    world: World,
) -> None:
    fill(world, "a", 5)
    waits = BudgetWaits(world.clock)
    reasons: list[tuple[str, int]] = []

    class Schedules:
        def on_schedule_change(self, details: Any) -> None:
            reasons.append((details.reason, details.next_due_at))

    engine = world.engine(
        keyset_poller(
            "alpha",
            "a",
            schedule=wk.Schedule(min="30s", max="5m", jitter=0),
            circuit=wk.Circuit(failures=1),  # one counted failure would open it
        ),
        budgets={"erp": wk.Budget(requests=1, per="1m", max_wait="5s")},
        hooks=[waits, Schedules()],
    )
    recorder = Recorder()
    engine.on("alpha", recorder)
    start = world.clock.now()

    tick = asyncio.create_task(engine.tick())
    await world.clock.advance_to(start + 4_999)
    assert not tick.done()
    await world.clock.advance_to(start + 5_000)
    assert tick.done()
    result = tick.result()  # reported, not raised

    assert world.api.calls == 1  # page 2 never went out
    [cycle] = result.polled
    assert cycle.error is not None
    assert cycle.error["name"] == "BudgetTimeoutError"
    assert cycle.error["code"] == "BUDGET_TIMEOUT"
    assert cycle.error["message"] == "budget 'erp' had no tokens within 5000ms"
    assert (cycle.items, cycle.events, cycle.delivered) == (2, 2, 2)  # page 1 was committed
    assert [e.subject for e in recorder.events] == ["item-001", "item-002"]
    schedule = (await engine.inspect())["pollers"][0]["schedule"]
    assert schedule["circuit"] == "closed"
    assert schedule["consecutive_failures"] == 0
    assert schedule["next_due_at"] == start + 5_000 + 30_000  # deferred by schedule.min
    assert schedule["last_error"]["name"] == "BudgetTimeoutError"
    assert reasons == [("throttled", start + 35_000)]
    assert waits.seen == []  # no request was granted after waiting

    # Due again once the window has room: the cycle resumes from page 2 (and page 3 is
    # deferred the same way, the next room being a minute away).
    await world.clock.advance_to(start + 60_000)
    tick = asyncio.create_task(engine.tick())
    await drive(world.clock, tick)
    assert [e.subject for e in recorder.events][2:] == ["item-003", "item-004"]
    assert [r.at - start for r in world.api.log] == [0, 60_000]
    assert [r.error["name"] if r.error else None for r in tick.result().polled] == [
        "BudgetTimeoutError"
    ]
    assert reasons[1:] == [("throttled", start + 95_000)]


async def test_cost_zero_skips_the_budget(world: World) -> None:
    fill(world, "free", 9)  # pages of 2: five requests
    fill(world, "uncounted", 9)

    async def uncounted(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{BASE}/t/uncounted/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 2},
            cost=0,  # an endpoint the vendor does not count
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    budget_store = InMemoryBudgetStore()
    waits = BudgetWaits(world.clock)
    engine = world.engine(
        keyset_poller("free", "free", budget_cost=0),
        keyset_poller("uncounted", "uncounted", fetch=uncounted),
        budgets={"erp": wk.Budget(requests=1, per="1h")},
        budget_store=budget_store,
        hooks=waits,
    )
    start = world.clock.now()
    tick = asyncio.create_task(engine.tick())
    await world.clock.flush()
    assert tick.done()  # one request per hour, yet nothing waited for the clock
    result = tick.result()

    assert result.errors == []
    assert [(r.poller, r.items) for r in result.polled] == [("free", 9), ("uncounted", 9)]
    assert world.api.calls == 10
    assert {r.at for r in world.api.log} == {start}
    assert budget_store.peek("erp") == ()  # the budget was never charged
    assert waits.seen == []
    assert await world.store.count_items(PKey("free")) == 9


async def test_inspect_and_budget_usage_show_how_much_of_each_budget_is_in_use(
    world: World,
) -> None:
    fill(world, "a", 5)  # three requests, two of them inside the first window
    engine = world.engine(
        keyset_poller("alpha", "a"),
        budgets={"erp": wk.Budget(requests=2, per="10s"), "idle": wk.Budget(5, "1m", burst=2)},
    )
    engine.on("alpha", Recorder())
    before = await engine.budget_usage()
    assert before == {
        "erp": {"requests": 2, "per_ms": 10_000, "burst": None, "used": 0.0, "waiting": 0},
        "idle": {"requests": 5, "per_ms": 60_000, "burst": 2, "used": 0.0, "waiting": 0},
    }
    start = world.clock.now()
    tick = asyncio.create_task(engine.tick())
    await world.clock.advance_to(start + 5_000)
    during = await engine.budget_usage()
    assert during["erp"]["used"] == 2.0  # the window is full
    assert during["erp"]["waiting"] == 1  # and the third page waits for room
    await world.clock.advance_to(start + 10_000)
    assert tick.done()
    report = await engine.inspect()
    assert report["budgets"]["erp"]["used"] == 1.0  # the first two left the window
    assert report["budgets"]["erp"]["waiting"] == 0
    assert report["budgets"]["idle"]["used"] == 0.0


async def test_an_engine_without_budgets_reports_none(world: World) -> None:
    engine = world.engine(keyset_poller("alpha", "a", budget=None))
    assert await engine.budget_usage() == {}
    assert (await engine.inspect())["budgets"] == {}
