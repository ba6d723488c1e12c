"""The daemon starts no more key runs on a budget than the budget can serve (G6).

Forty tenants of one poller share ``Budget(4, "1s")``; every tenant is due at once. A run
started anyway would wait in the budget's queue while holding a lease, and with a short
``max_wait`` give up with ``BudgetTimeoutError``. The daemon instead keeps the keys in a
line, oldest due first, and starts at most the budget's admission limit (four) at a time:
no request times out, the budget is spent, and the tenants are polled in the order they
became due. The budget store is the in-memory one, then Redis (marked ``redis``): the line
only decides when a run starts, every grant still comes from the store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

import watukuy as wk
from support.vendors import ArrivalsVendor
from watukuy.model.ports import BudgetStore
from watukuy.testing import SeededRandom, VirtualClock

TENANTS = [f"t{n:02d}" for n in range(40)]


def tenants(vendor: ArrivalsVendor) -> list[str]:
    """The tenant of each request, in arrival order (``/t/<tenant>/items``)."""
    return [path.split("/")[2] for path in vendor.paths]


class Errors:
    def __init__(self) -> None:
        self.codes: Counter[str] = Counter()

    def on_error(self, details: Any) -> None:
        self.codes[details.error.get("code") or "?"] += 1


def engine_for(
    clock: VirtualClock, vendor: ArrivalsVendor, errors: Errors, budget_store: BudgetStore | None
) -> wk.Engine:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get(f"https://vendor.test/t/{ctx.partition.key}/items")
        return wk.Page(items=response.json()["data"])

    poller = wk.define_poller(
        name="tenants",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        partitions=lambda: TENANTS,
        budget="vendor",
        schedule=wk.Schedule(min="1h", max="2h", jitter=0),
    )
    return wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller],
        # A wait of 3 s serves 12 requests: started all at once, most of the forty would
        # time out.
        budgets={"vendor": wk.Budget(4, "1s", max_wait="3s")},
        budget_store=budget_store,
        clock=clock,
        random=SeededRandom(3),
        hooks=errors,
        http_client=httpx.AsyncClient(transport=vendor),
    )


async def test_runs_on_a_budget_are_admitted_oldest_due_first_and_none_times_out() -> None:
    await admitted_oldest_due_first(None)  # the engine's own in-memory budget store


@pytest.mark.redis
async def test_admission_with_a_redis_budget_store(redis_client: Any, redis_prefix: str) -> None:
    # Redis answers in real time while the clock is virtual: on a loaded machine the engine
    # falls behind the steps, so this variant waits for every tenant and leaves out the
    # bound on how fast the budget was spent (the in-memory variant holds it).
    await admitted_oldest_due_first(
        wk.RedisBudgetStore(redis_client, prefix=redis_prefix), real_io=True
    )


async def admitted_oldest_due_first(
    budget_store: BudgetStore | None, *, real_io: bool = False
) -> None:
    clock = VirtualClock()
    vendor = ArrivalsVendor(clock, latency_ms=100)
    errors = Errors()
    engine = engine_for(clock, vendor, errors, budget_store)
    engine.on("tenants", lambda event, ctx: None)
    manager = engine._budget_manager
    assert manager is not None
    assert engine._admission.limit("vendor") == 4

    most_running = most_waiting = 0
    await engine.start()
    steps = 0
    # 15 s of virtual time in steps of 100 ms; with real I/O, until every tenant was polled.
    while steps < 150 or (real_io and len(vendor.arrivals) < len(TENANTS) and steps < 1_500):
        await clock.advance("100ms")
        if real_io:
            await asyncio.sleep(0.002)  # let the store's answers come in
        steps += 1
        most_running = max(most_running, len(engine._running))
        most_waiting = max(most_waiting, manager.waiting("vendor"))
    stopping = asyncio.ensure_future(engine.stop())
    while not stopping.done():
        await clock.advance("100ms")
    await stopping

    assert errors.codes == Counter()  # no BudgetTimeoutError, no other failure
    assert most_running <= 4
    assert most_waiting <= 4
    polled = tenants(vendor)
    assert sorted(polled) == TENANTS  # every tenant, once
    assert polled == TENANTS  # in the order they became due (the listing's, here)
    if not real_io:
        # The budget is spent: four requests per window of a second and the 100 ms answer.
        assert vendor.arrivals[-1] - vendor.arrivals[0] <= 11_000


async def test_a_trigger_goes_before_the_keys_that_are_merely_due() -> None:
    clock = VirtualClock()
    vendor = ArrivalsVendor(clock, latency_ms=100)
    errors = Errors()
    engine = engine_for(clock, vendor, errors, None)
    engine.on("tenants", lambda event, ctx: None)
    await engine.start()
    # Runs start at the budget's pace, one per 250 ms: by 100 ms only t00 started, and
    # the other thirty-nine wait in the line.
    await clock.advance("100ms")
    await engine.trigger("tenants", partition="t39")
    for _ in range(30):
        await clock.advance("100ms")
    stopping = asyncio.ensure_future(engine.stop(drain=False))
    while not stopping.done():
        await clock.advance("100ms")
    await stopping

    polled = tenants(vendor)
    assert polled[0] == "t00"
    assert polled[1] == "t39"  # the first run started after the trigger
    assert polled[2:8] == TENANTS[1:7]
    assert errors.codes == Counter()


async def test_runs_on_a_budget_start_at_its_pace() -> None:
    clock = VirtualClock()
    vendor = ArrivalsVendor(clock, latency_ms=100)
    errors = Errors()
    engine = engine_for(clock, vendor, errors, None)
    engine.on("tenants", lambda event, ctx: None)
    started = clock.now()
    await engine.start()
    for _ in range(12):
        await clock.advance("100ms")
    stopping = asyncio.ensure_future(engine.stop(drain=False))
    while not stopping.done():
        await clock.advance("100ms")
    await stopping

    # Budget(4, "1s") admits four runs, started a tenth of the limit (one) at once and
    # then one per 250 ms, as fast as the budget grants: not all four at 0 ms. The fifth
    # waits for the first grant to leave the window (answered at 100 ms, so 1.1 s).
    times = [at - started for at in vendor.arrivals]
    assert times[:5] == [0, 250, 500, 750, 1_100]
    assert errors.codes == Counter()


async def test_max_concurrent_keys_still_bounds_every_line() -> None:
    clock = VirtualClock()
    vendor = ArrivalsVendor(clock, latency_ms=100)
    errors = Errors()

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get(f"https://vendor.test/t/{ctx.partition.key}/items")
        return wk.Page(items=response.json()["data"])

    def poller(name: str, budget: str | None) -> wk.PollerDefinition[Any]:
        return wk.define_poller(
            name=name,
            identity=lambda o: o["id"],
            cursor=wk.SnapshotDiff(),
            fetch=fetch,
            partitions=lambda: TENANTS[:10],
            budget=budget,
            schedule=wk.Schedule(min="1h", max="2h", jitter=0),
        )

    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller("budgeted", "vendor"), poller("free", None)],
        budgets={"vendor": wk.Budget(4, "1s")},
        max_concurrent_keys=3,
        clock=clock,
        random=SeededRandom(3),
        hooks=errors,
        http_client=httpx.AsyncClient(transport=vendor),
    )
    engine.on("budgeted", lambda event, ctx: None)
    engine.on("free", lambda event, ctx: None)
    most_running = most_budgeted = 0
    await engine.start()
    for _ in range(100):
        await clock.advance("100ms")
        most_running = max(most_running, len(engine._running))
        most_budgeted = max(most_budgeted, engine._admission.in_flight("vendor"))
    stopping = asyncio.ensure_future(engine.stop())
    while not stopping.done():
        await clock.advance("100ms")
    await stopping

    assert errors.codes == Counter()
    assert most_running <= 3
    assert most_budgeted <= 3
    assert len(vendor.arrivals) == 20  # ten tenants of each poller, every one polled
