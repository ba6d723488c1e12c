"""What the health probes judge, on a daemon under a VirtualClock.

Liveness is the engine's own progress: a vendor with nothing new for 15 minutes, polled on
schedule, keeps it healthy whatever the lag; a daemon loop that freezes or ends fails it
within a minute; a key nobody polls fails it once it is overdue. Lag is freshness: only
the full report judges it. A key behind because its budget cannot keep up needs an
operator (readiness), not a restart (liveness).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

import watukuy as wk
from watukuy.integrations import HealthCheck, HealthResult
from watukuy.integrations.fastapi import health_router
from watukuy.model.rows import PKey
from watukuy.testing import FakeApi, VirtualClock, fake_items

from .conftest import World, orders

T0 = 1_767_225_600_000  # the VirtualClock's default start


class FreezableStore(wk.MemoryStore):
    """A memory store whose due index (asked only by the daemon's loop, at each resync)
    hangs once ``frozen`` is set, or raises ``error`` once it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen = asyncio.Event()
        self.error: BaseException | None = None

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        if self.error is not None:
            raise self.error
        if self.frozen.is_set():
            await asyncio.Event().wait()  # never answers
        return await super().due_keys(poller, until, limit)


class LoopDied(BaseException):
    """Something no ``except Exception`` catches, ending the loop's task."""


@dataclass
class Pod:
    """One engine, its store and the vendor it polls."""

    clock: VirtualClock
    api: FakeApi
    store: FreezableStore
    engine: wk.Engine


def make_pod(
    *, partitions: list[str] | None = None, budget: wk.Budget | None = None, **poller: Any
) -> Pod:
    clock = VirtualClock()
    items = fake_items(5, start=T0 - 60_000)  # and nothing new, ever
    api = FakeApi(clock, items=items, tenants=dict.fromkeys(partitions or [], items))
    world = World(clock, api, FreezableStore())
    definition = orders(
        partitions=(lambda: partitions) if partitions is not None else None,
        budget="vendor" if budget is not None else None,
        **poller,
    )
    engine = world.engine(
        definition, budgets={"vendor": budget} if budget is not None else None, instance_id="pod-a"
    )
    engine.on("orders", lambda event, ctx: None)
    assert isinstance(world.store, FreezableStore)
    return Pod(clock, api, world.store, engine)


async def stop(world: Pod) -> None:
    world.store.frozen.clear()
    world.store.error = None
    stopping = asyncio.ensure_future(world.engine.stop(drain=False))
    while not stopping.done():
        await world.clock.advance("100ms")
    await stopping


async def answer(world: Pod, probe: Callable[[], Awaitable[HealthResult]]) -> HealthResult:
    """A probe's verdict, its store calls let through on the virtual clock."""
    work = asyncio.ensure_future(probe())
    while not work.done():
        await world.clock.advance("10ms")
    return await work


async def test_liveness_stays_healthy_through_15_minutes_of_a_quiet_vendor() -> None:
    world = make_pod()
    check = HealthCheck(world.engine, max_lag="1m", require_running=True)
    await world.engine.start()
    try:
        verdicts: list[HealthResult] = []
        for _ in range(90):  # a kubelet's probe every 10 s for 15 minutes
            await world.clock.advance("10s")
            verdicts.append(await answer(world, check.liveness))
        report = await answer(world, check.check)
    finally:
        await stop(world)
    assert [v.reasons for v in verdicts if not v.healthy] == []
    # The vendor was polled all along (AIMD stretched the interval toward schedule.max)...
    assert world.api.calls >= 5
    assert world.api.log[-1].at >= T0 + 10 * 60_000
    # ...had nothing new, and the full report says how stale the data is.
    assert not report.healthy
    assert [finding.code for key in report.keys for finding in key.findings] == ["lag"]
    assert report.keys[0].findings[0].kind == "freshness"


@pytest.mark.parametrize("how", ["frozen", "ended"])
async def test_liveness_fails_within_a_minute_of_the_loop_stopping(how: str) -> None:
    world = make_pod()
    check = HealthCheck(world.engine, max_lag="1m")
    await world.engine.start()
    try:
        await world.clock.advance("5m")  # a while of quiet, healthy polling
        assert (await answer(world, check.liveness)).healthy
        polls = world.api.calls
        if how == "frozen":
            world.store.frozen.set()  # its next resync hangs on the store
        else:
            world.store.error = LoopDied()  # its next resync ends the loop's task
        verdicts: list[tuple[int, HealthResult]] = []
        for second in range(5, 65, 5):
            await world.clock.advance("5s")
            verdicts.append((second, await answer(world, check.liveness)))
    finally:
        await stop(world)
    failed = [(second, verdict) for second, verdict in verdicts if not verdict.healthy]
    assert failed, [verdict.reasons for _, verdict in verdicts]
    first_second, first = failed[0]
    assert first_second <= 60
    assert all(not verdict.healthy for _, verdict in failed)  # and it stays unhealthy
    code = "loop_stalled" if how == "frozen" else "loop_ended"
    assert [finding.code for finding in first.findings] == [code]
    assert first.to_dict()["reasons"] == [
        "daemon loop stalled" if how == "frozen" else "daemon loop ended while the engine runs"
    ]
    assert world.api.calls == polls  # nothing was polled meanwhile


async def test_a_key_nobody_polls_is_overdue_everywhere() -> None:
    world = make_pod(schedule=wk.Schedule(min="1m", max="1m", jitter=0))
    check = HealthCheck(world.engine)
    await world.engine.tick()  # tick() mode: polled now, due again in a minute
    await world.clock.advance("1m")
    on_time = await world.engine.inspect()
    await world.clock.advance("61s")  # due for 61 s, one more than the grace
    late = await world.engine.inspect()
    (entry,) = late["pollers"]
    assert on_time["pollers"][0]["overdue"] is False
    assert (entry["waiting_ms"], entry["overdue"], late["overdue_grace_ms"]) == (
        61_000,
        True,
        60_000,
    )
    verdict = await check.liveness()
    assert verdict.reasons == ["orders: overdue: due 61s ago with nobody working on it (grace 1m)"]
    assert verdict.to_dict()["reasons"] == ["orders: overdue"]
    await world.engine.tick()  # polled again: planned a minute ahead
    assert (await check.liveness()).healthy


async def test_a_key_leased_by_a_live_replica_is_being_worked_on() -> None:
    world = make_pod(schedule=wk.Schedule(min="1m", max="1m", jitter=0))
    await world.engine.tick()
    await world.clock.advance("10m")
    now = world.clock.now()
    lease = await world.store.acquire_lease(PKey("orders"), "pod-b", 30_000, now)
    assert lease is not None  # pod-b is in the middle of a long run
    (entry,) = (await world.engine.inspect())["pollers"]
    assert (entry["waiting_ms"], entry["overdue"]) == (0, False)
    assert (await HealthCheck(world.engine).liveness()).healthy


async def test_keys_behind_their_budget_need_an_operator_not_a_restart() -> None:
    tenants = [f"t{n:02d}" for n in range(20)]
    world = make_pod(
        partitions=tenants,
        budget=wk.Budget(requests=2, per="1m"),
        schedule=wk.Schedule(min="30s", max="30s", jitter=0),
    )
    check = HealthCheck(world.engine)
    await world.engine.start()
    try:
        await world.clock.advance("5m")  # 10 runs granted where 200 were due
        live = await answer(world, check.liveness)
        ready = await answer(world, check.readiness)
    finally:
        await stop(world)
    assert live.healthy, live.reasons
    assert not ready.healthy
    behind = [finding for key in ready.keys for finding in key.findings]
    assert len(behind) >= 5  # more keys are due than the budget grants runs
    assert {finding.code for finding in behind} == {"budget_behind"}
    assert {finding.kind for finding in behind} == {"attention"}
    assert ready.to_dict()["reasons"] == [
        f"orders: overdue, waiting for its budget ({len(behind)} keys)"
    ]


async def test_the_routes_live_ready_and_health_judge_what_they_say() -> None:
    world = make_pod(schedule=wk.Schedule(min="1m", max="1m", jitter=0))
    app = FastAPI()
    app.include_router(health_router(world.engine, max_lag="1m"))
    await world.engine.tick()
    await world.clock.advance("30s")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://pod") as client:
        answers = {
            path: await client.get(f"/watukuy/{path}") for path in ("live", "ready", "health")
        }
    assert {path: response.status_code for path, response in answers.items()} == {
        "live": 200,
        "ready": 200,
        "health": 503,
    }
    assert answers["health"].json() == {
        "status": "unhealthy",
        "reasons": ["orders: lag over max_lag"],
    }
