"""Token-bucket budgets (``burst``) and held grants, on a virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from watukuy.budget import Grant, InMemoryBudgetStore, take
from watukuy.budget.bucket import take_bucket
from watukuy.budget.manager import BudgetHold, BudgetManager
from watukuy.budget.window import settle
from watukuy.model.errors import ConfigError
from watukuy.model.options import Budget
from watukuy.model.ports import BudgetPolicy
from watukuy.testing.clock import VirtualClock

BUCKET = BudgetPolicy(requests=10, per_ms=1_000, burst=3)


def grant_times(manager: BudgetManager, clock: VirtualClock, n: int) -> list[asyncio.Task[int]]:
    start = clock.now()
    times: list[int] = []

    async def one(i: int) -> int:
        waited = await manager.acquire(
            "erp", requester=f"k{i}/", lane="live", weight=1, cost=1, max_wait_ms=60_000
        )
        times.append(clock.now() - start)
        return waited

    tasks = [asyncio.get_running_loop().create_task(one(i)) for i in range(n)]
    grant_times.times = times  # type: ignore[attr-defined]
    return tasks


async def test_a_burst_of_three_then_one_every_100_ms() -> None:
    clock = VirtualClock()
    manager = BudgetManager({"erp": Budget(10, "1s", burst=3)}, InMemoryBudgetStore(), clock)
    tasks = grant_times(manager, clock, 8)
    await clock.advance("1s")
    await asyncio.gather(*tasks)
    assert grant_times.times == [0, 0, 0, 100, 200, 300, 400, 500]  # type: ignore[attr-defined]


async def test_an_idle_bucket_refills_to_its_burst_and_no_further() -> None:
    store = InMemoryBudgetStore()
    answers = [await store.try_take("erp", BUCKET, 1, t) for t in (0, 0, 0, 0)]
    assert answers == [0, 0, 0, 100]
    # After 250 ms: 2.5 tokens came back, so two go at once and the third waits 50 ms.
    answers = [await store.try_take("erp", BUCKET, 1, 250) for _ in range(3)]
    assert answers == [0, 0, 50]
    # A long idle spell refills to the burst, never beyond it.
    answers = [await store.try_take("erp", BUCKET, 1, 60_000) for _ in range(4)]
    assert answers == [0, 0, 0, 100]


def test_take_bucket_is_pure_and_exact() -> None:
    assert take_bucket(None, BUCKET, 1, 0) == (100.0, 0)
    assert take_bucket(300.0, BUCKET, 1, 0) == (None, 100)
    assert take_bucket(300.0, BUCKET, 1, 100) == (400.0, 0)
    assert take_bucket(300.0, BUCKET, 0, 0) == (None, 0)
    assert take_bucket(0.0, BudgetPolicy(3, 1_000, burst=1), 1, 0) == (1000 / 3, 0)


async def test_the_hard_cap_stays_the_default() -> None:
    clock = VirtualClock()
    manager = BudgetManager({"erp": Budget(3, "1s")}, InMemoryBudgetStore(), clock)
    tasks = grant_times(manager, clock, 6)
    await clock.advance("1s")
    await asyncio.gather(*tasks)
    assert grant_times.times == [0, 0, 0, 1_000, 1_000, 1_000]  # type: ignore[attr-defined]


def test_burst_is_checked() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError) as caught:
            Budget(10, "1s", burst=bad)  # type: ignore[arg-type]
        assert caught.value.field == "budget.burst"


async def test_a_cost_above_the_burst_is_a_config_error() -> None:
    clock = VirtualClock()
    manager = BudgetManager({"erp": Budget(10, "1s", burst=2)}, InMemoryBudgetStore(), clock)
    with pytest.raises(ConfigError, match="allows 2 at once"):
        await manager.acquire(
            "erp", requester="a/", lane="live", weight=1, cost=3, max_wait_ms=1_000
        )


# --- held grants ---------------------------------------------------------------------------

POLICY = BudgetPolicy(requests=2, per_ms=1_000)


def test_a_held_grant_counts_until_settled_and_then_per_after() -> None:
    log, wait = take((), POLICY, 1, 0, stamp=30_000, ticket="a")
    assert (log, wait) == ((Grant(30_000, 1, "a"),), 0)
    log, wait = take(log, POLICY, 1, 0)
    assert log == (Grant(0, 1), Grant(30_000, 1, "a"))
    # The plain grant leaves at 1000; the held one would stay until 31000.
    assert take(log, POLICY, 1, 1_500) == ((Grant(1_500, 1), Grant(30_000, 1, "a")), 0)
    full = take(log, POLICY, 1, 1_500)[0]
    assert take(full, POLICY, 1, 1_500)[1] == 1_000  # the grant at 1500 leaves first
    # Its answer came at 400: it counts until 1400, like a grant made at 400.
    settled = settle(log, "a", 400)
    assert settled == (Grant(0, 1), Grant(400, 1))
    assert take(settled, POLICY, 1, 999)[1] == 1
    assert take(settled, POLICY, 1, 1_000)[1] == 0
    assert take(settle(settled, "gone", 500), POLICY, 1, 1_000)[1] == 0
    assert settle(settled, "gone", 500) == settled


async def test_a_held_grant_keeps_the_window_until_per_after_its_answer() -> None:
    clock = VirtualClock()
    store = InMemoryBudgetStore()
    manager = BudgetManager({"erp": Budget(2, "1s")}, store, clock)

    async def hold() -> BudgetHold:
        return await manager.hold(
            "erp",
            requester="a/",
            lane="live",
            weight=1,
            cost=1,
            max_wait_ms=60_000,
            hold_ms=30_000,
        )

    first, second = await hold(), await hold()
    assert (first.waited_ms, second.waited_ms) == (0, 0)
    third = asyncio.get_running_loop().create_task(hold())
    # The two requests are answered 400 ms later (they waited for a connection, say).
    await clock.advance_ms(400)
    await manager.settle(first)
    await manager.settle(second)
    await clock.advance_ms(999)
    assert not third.done()  # a plain grant would have gone at 1000
    await clock.advance_ms(1)
    assert (await third).waited_ms == 1_400
    await manager.settle(await third)
