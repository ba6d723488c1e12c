"""BudgetManager: grants on a virtual clock, lane priority, fairness, timeouts, cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from watukuy.budget import InMemoryBudgetStore
from watukuy.budget.manager import BudgetManager
from watukuy.model.errors import BudgetTimeoutError, ConfigError
from watukuy.model.options import Budget
from watukuy.model.ports import BudgetPolicy
from watukuy.model.rows import Lane
from watukuy.testing.clock import VirtualClock

MINUTE = 60_000


class CountingStore:
    """An ``InMemoryBudgetStore`` that counts calls and can fail on demand."""

    def __init__(self) -> None:
        self.inner = InMemoryBudgetStore()
        self.calls = 0
        self.fail_next: Exception | None = None

    async def try_take(self, budget: str, policy: BudgetPolicy, cost: float, now: int) -> int:
        self.calls += 1
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        return await self.inner.try_take(budget, policy, cost, now)


class Harness:
    """A manager on a virtual clock, and a log of who was granted when."""

    def __init__(self, **budgets: Budget) -> None:
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.store = CountingStore()
        self.manager = BudgetManager(budgets, self.store, self.clock)
        self.grants: list[tuple[str, int]] = []
        self.tasks: list[asyncio.Task[int]] = []

    def acquire(
        self,
        requester: str,
        *,
        budget: str = "erp",
        lane: Lane = "live",
        weight: float = 1,
        cost: float = 1,
        max_wait_ms: int = 10 * MINUTE,
    ) -> Coroutine[Any, Any, int]:
        return self.manager.acquire(
            budget,
            requester=requester,
            lane=lane,
            weight=weight,
            cost=cost,
            max_wait_ms=max_wait_ms,
        )

    def spawn(self, label: str, requester: str | None = None, **kwargs: Any) -> asyncio.Task[int]:
        async def run() -> int:
            waited = await self.acquire(requester or label, **kwargs)
            self.grants.append((label, self.clock.now() - self.start))
            return waited

        task = asyncio.get_running_loop().create_task(run())
        self.tasks.append(task)
        return task

    def order(self) -> list[str]:
        return [label for label, _ in self.grants]

    def times(self) -> list[int]:
        return [at for _, at in self.grants]


async def test_two_requesters_share_two_per_ten_seconds_exactly() -> None:
    h = Harness(erp=Budget(requests=2, per="10s"))
    for n in range(3):
        h.spawn(f"orders-{n}", "orders/")
        h.spawn(f"invoices-{n}", "invoices/")
    await h.clock.flush()
    assert h.times() == [0, 0]

    # The window is full until the two grants at 0 are ten seconds old.
    await h.clock.advance_ms(9_999)
    assert h.times() == [0, 0]
    await h.clock.advance_ms(1)
    assert h.times() == [0, 0, 10_000, 10_000]
    await h.clock.advance("10s")

    assert h.times() == [0, 0, 10_000, 10_000, 20_000, 20_000]
    assert [label.split("-")[0] for label in h.order()] == ["orders", "invoices"] * 3
    assert [task.result() for task in h.tasks] == [0, 0, 10_000, 10_000, 20_000, 20_000]
    assert h.manager.waiting("erp") == 0
    assert h.clock.pending_timers() == 0


async def test_room_in_the_window_is_granted_at_once() -> None:
    h = Harness(erp=Budget(requests=3, per="1m"))
    assert [await h.acquire("a"), await h.acquire("b"), await h.acquire("a")] == [0, 0, 0]
    assert h.store.calls == 3
    assert h.clock.pending_timers() == 0


async def test_lane_priority_live_reconcile_backfill_replay() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("x")
    lanes: list[Lane] = ["replay", "backfill", "live", "reconcile"]
    for lane in lanes:
        h.spawn(lane, f"{lane}/", lane=lane)
    await h.clock.advance("4s")
    assert h.grants == [
        ("live", 1_000),
        ("reconcile", 2_000),
        ("backfill", 3_000),
        ("replay", 4_000),
    ]


async def test_lane_priority_beats_fairness() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("a/")
    # "a/" was just served, yet its live request goes before b's never-served backfill.
    h.spawn("b-backfill", "b/", lane="backfill")
    h.spawn("a-live", "a/", lane="live")
    await h.clock.advance("2s")
    assert h.order() == ["a-live", "b-backfill"]


async def test_round_robin_serves_the_least_recently_served_requester() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    for n in range(3):
        h.spawn(f"A{n}", "a/")
    for n in range(3):
        h.spawn(f"B{n}", "b/")
    await h.clock.advance("5s")
    assert h.grants == [
        ("A0", 0),
        ("B0", 1_000),
        ("A1", 2_000),
        ("B1", 3_000),
        ("A2", 4_000),
        ("B2", 5_000),
    ]


async def test_round_robin_three_requesters_rotate() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("x/")
    for who in "ccbbaa":
        h.spawn(who, f"{who}/")
    await h.clock.advance("6s")
    # Never-served requesters first in arrival order, then least recently served.
    assert h.order() == ["c", "b", "a", "c", "b", "a"]


async def test_round_robin_serves_the_earliest_deadline_first() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("a/")
    h.spawn("a-waits", "a/")  # a was just served, but its request has waited longest
    await h.clock.advance("500ms")
    h.spawn("b-newcomer", "b/")
    await h.clock.advance("3s")
    assert h.order() == ["a-waits", "b-newcomer"]


async def test_round_robin_deadline_counts_each_requests_max_wait() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("x/")
    h.spawn("patient", "p/", max_wait_ms=10 * MINUTE)
    await h.clock.advance("100ms")
    h.spawn("hurried", "h/", max_wait_ms=5_000)  # gives up first: served first
    await h.clock.advance("3s")
    assert h.order() == ["hurried", "patient"]


async def test_weighted_serves_by_cost_per_weight_with_arrival_order_ties() -> None:
    h = Harness(erp=Budget(requests=1, per="1s", fairness="weighted"))
    await h.acquire("x/")
    for n in range(4):
        h.spawn(f"A{n}", "a/", weight=2)
    for n in range(4):
        h.spawn(f"B{n}", "b/", weight=1)
    await h.clock.advance("8s")
    assert h.order() == ["A0", "B0", "A1", "A2", "B1", "A3", "B2", "B3"]
    assert h.times() == [1_000 * n for n in range(1, 9)]


async def test_weighted_counts_cost_not_requests() -> None:
    h = Harness(erp=Budget(requests=4, per="4s", fairness="weighted"))
    await h.acquire("x/", cost=4)
    h.spawn("heavy0", "heavy/", cost=3)
    h.spawn("light0", "light/", cost=1)
    h.spawn("heavy1", "heavy/", cost=3)
    h.spawn("light1", "light/", cost=1)
    h.spawn("light2", "light/", cost=1)
    await h.clock.advance("20s")
    # heavy0 (3 of the 4 at 4s) puts "heavy" at 3, so light is served three times first:
    # light0 in the room heavy0 left, light1 and light2 once those two grants are 4s old.
    assert h.grants == [
        ("heavy0", 4_000),
        ("light0", 4_000),
        ("light1", 8_000),
        ("light2", 8_000),
        ("heavy1", 12_000),
    ]


async def test_weighted_newcomer_does_not_monopolise_the_budget() -> None:
    h = Harness(erp=Budget(requests=1, per="1s", fairness="weighted"))
    for n in range(8):
        h.spawn(f"A{n}", "a/")
    await h.clock.advance("3.5s")
    assert h.order() == ["A0", "A1", "A2", "A3"]
    for n in range(3):
        h.spawn(f"B{n}", "b/")
    await h.clock.advance("4.5s")
    # Without lifting B to the current share it would take four grants in a row.
    assert h.order()[4:] == ["B0", "A4", "B1", "A5", "B2"]


async def test_budget_max_wait_raises_budget_timeout_and_leaves_the_queue() -> None:
    h = Harness(erp=Budget(requests=1, per="1s", max_wait="400ms"))
    await h.acquire("a/")
    waiting = asyncio.ensure_future(h.acquire("b/", max_wait_ms=MINUTE))
    await h.clock.advance("399ms")
    assert not waiting.done()
    assert h.manager.waiting("erp") == 1
    await h.clock.advance("1ms")
    assert waiting.done()
    error = waiting.exception()
    assert isinstance(error, BudgetTimeoutError)
    assert error.budget == "erp"
    assert error.waited_ms == 400
    assert error.code == "BUDGET_TIMEOUT"
    assert h.manager.waiting("erp") == 0
    assert h.clock.pending_timers() == 0


async def test_argument_max_wait_applies_when_the_budget_sets_none() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("a/")
    waiting = asyncio.ensure_future(h.acquire("b/", max_wait_ms=300))
    await h.clock.advance("300ms")
    error = waiting.exception()
    assert isinstance(error, BudgetTimeoutError)
    assert error.waited_ms == 300


async def test_zero_max_wait_fails_at_once_when_the_window_is_full() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("a/")
    with pytest.raises(BudgetTimeoutError) as caught:
        await h.acquire("b/", max_wait_ms=0)
    assert caught.value.waited_ms == 0
    assert h.clock.now() == h.start


async def test_room_arriving_exactly_at_the_deadline_is_granted() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("a/")
    h.spawn("b", max_wait_ms=1_000)
    await h.clock.advance("1s")
    assert h.grants == [("b", 1_000)]
    assert h.tasks[0].result() == 1_000


async def test_a_timed_out_waiter_does_not_block_the_next() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("a/")
    first = h.spawn("b", max_wait_ms=300)
    h.spawn("c")
    await h.clock.advance("300ms")
    assert isinstance(first.exception(), BudgetTimeoutError)
    await h.clock.advance("700ms")
    assert h.grants == [("c", 1_000)]


async def test_cost_zero_is_free_and_never_touches_the_store() -> None:
    h = Harness(erp=Budget(requests=1, per="1m"))
    await h.acquire("a/")
    calls = h.store.calls
    assert await h.acquire("a/", cost=0) == 0
    assert await h.acquire("a/", cost=0.0) == 0
    assert h.store.calls == calls
    assert h.manager.waiting("erp") == 0


async def test_fractional_costs_are_charged_exactly() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    assert await h.acquire("a/", cost=0.5) == 0
    assert await h.acquire("a/", cost=0.5) == 0
    h.spawn("third", "a/", cost=0.5)
    h.spawn("fourth", "a/", cost=0.25)
    h.spawn("fifth", "a/", cost=0.5)
    await h.clock.advance("999ms")
    assert h.grants == []
    await h.clock.advance("1ms")
    # The two halves at 0 left together; 0.5 + 0.25 fit, another 0.5 would make 1.25.
    assert h.grants == [("third", 1_000), ("fourth", 1_000)]
    await h.clock.advance("1s")
    assert h.grants == [("third", 1_000), ("fourth", 1_000), ("fifth", 2_000)]


async def test_cancelling_a_waiter_removes_it_cleanly() -> None:
    h = Harness(erp=Budget(requests=1, per="1s"))
    await h.acquire("a/")
    doomed = h.spawn("b")
    h.spawn("c")
    await h.clock.flush()
    assert h.manager.waiting("erp") == 2
    doomed.cancel()
    await h.clock.flush()
    assert doomed.cancelled()
    assert h.manager.waiting("erp") == 1
    await h.clock.advance("1s")
    assert h.grants == [("c", 1_000)]
    # The cancelled request took nothing: the next one is due a second later, not two.
    h.spawn("d")
    await h.clock.advance("1s")
    assert h.grants == [("c", 1_000), ("d", 2_000)]
    assert h.clock.pending_timers() == 0


async def test_cancelling_the_only_waiter_stops_the_worker() -> None:
    h = Harness(erp=Budget(requests=1, per="1m"))
    await h.acquire("a/")
    doomed = h.spawn("b")
    await h.clock.flush()
    assert h.clock.pending_timers() == 1
    doomed.cancel()
    await h.clock.flush()
    assert h.manager.waiting("erp") == 0
    assert h.clock.pending_timers() == 0


async def test_a_cheaper_higher_priority_arrival_is_not_held_by_a_longer_wait() -> None:
    h = Harness(erp=Budget(requests=4, per="4s"))
    await h.acquire("x/", cost=2)
    await h.clock.advance("1s")
    await h.acquire("x/", cost=2)
    h.spawn("big", "b/", lane="backfill", cost=4)  # needs an empty window: at 5s
    await h.clock.advance("500ms")
    h.spawn("small", "s/", lane="live", cost=2)  # fits once the grant at 0 leaves: at 4s
    await h.clock.advance("10s")
    # small is not held until big's 5s; big then waits for small's grant to leave.
    assert h.grants == [("small", 4_000), ("big", 8_000)]


async def test_store_failure_fails_that_request_only() -> None:
    h = Harness(erp=Budget(requests=5, per="1s"))
    h.store.fail_next = RuntimeError("redis down")
    broken = h.spawn("a")
    fine = h.spawn("b")
    await h.clock.flush()
    error = broken.exception()
    assert isinstance(error, RuntimeError)
    assert str(error) == "redis down"
    assert fine.result() == 0
    assert h.order() == ["b"]


async def test_budgets_are_independent() -> None:
    h = Harness(a=Budget(requests=1, per="1s"), b=Budget(requests=1, per="1s"))
    await h.acquire("x/", budget="a")
    assert await h.acquire("x/", budget="b") == 0
    h.spawn("second-a", "x/", budget="a")
    await h.clock.flush()
    assert h.manager.waiting("a") == 1
    assert h.manager.waiting("b") == 0
    await h.clock.advance("1s")
    assert h.grants == [("second-a", 1_000)]


async def test_bad_arguments_raise_config_error_naming_the_field() -> None:
    h = Harness(erp=Budget(requests=2, per="1s"))
    with pytest.raises(ConfigError, match=r"^budget: unknown budget 'nope' \(declared: 'erp'\)"):
        await h.acquire("a/", budget="nope")
    with pytest.raises(ConfigError, match=r"^cost: .*got -1"):
        await h.acquire("a/", cost=-1)
    with pytest.raises(ConfigError, match=r"^cost: .*got nan"):
        await h.acquire("a/", cost=float("nan"))
    with pytest.raises(ConfigError, match=r"^cost: a cost of 3 can never be served"):
        await h.acquire("a/", cost=3)
    with pytest.raises(ConfigError, match=r"^budget_weight: .*got 0"):
        await h.acquire("a/", weight=0)
    with pytest.raises(ConfigError, match=r"^lane: .*got 'urgent'"):
        await h.acquire("a/", lane="urgent")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^max_wait_ms: .*got -5"):
        await h.acquire("a/", max_wait_ms=-5)
    assert h.store.calls == 0


def test_constructor_rejects_what_is_not_a_budget() -> None:
    clock = VirtualClock()
    with pytest.raises(ConfigError, match=r"^budgets.erp: expected a Budget"):
        BudgetManager({"erp": {"requests": 1}}, InMemoryBudgetStore(), clock)  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"^budgets: expected a non-empty name"):
        BudgetManager({"": Budget(requests=1, per="1s")}, InMemoryBudgetStore(), clock)
    manager = BudgetManager({"erp": Budget(requests=1, per="1s")}, InMemoryBudgetStore(), clock)
    assert manager.names == ("erp",)
    assert manager.waiting("unknown") == 0


async def test_never_exceeds_the_budget_under_a_crowd() -> None:
    h = Harness(erp=Budget(requests=3, per="3s"))
    lanes: list[Lane] = ["live", "reconcile", "backfill", "replay"]
    for n in range(24):
        h.spawn(f"r{n}", f"p{n % 5}/", lane=lanes[n % 4])
    await h.clock.advance("1m")
    times = h.times()
    assert len(times) == 24
    # Three at once, then three more each time the previous three are 3 s old.
    assert times == [3_000 * (n // 3) for n in range(24)]
    assert max(sum(start <= at < start + 3_000 for at in times) for start in times) == 3
    assert h.clock.pending_timers() == 0


async def test_as_many_waiters_as_the_daemon_admits_are_served_in_order_in_time() -> None:
    # The daemon admits as many runs on a budget as one window grants (and the window's
    # worth again as runs end): each is granted within about a window, far inside max_wait.
    h = Harness(erp=Budget(requests=150, per="1s", max_wait="3s"))
    for n in range(450):
        h.spawn(f"t{n:03d}", f"tenants/t{n:03d}")
    await h.clock.advance("5s")
    assert [task.exception() for task in h.tasks if task.done()] == [None] * 450
    assert h.order() == [f"t{n:03d}" for n in range(450)]  # the order they asked in
    assert h.times() == [1_000 * (n // 150) for n in range(450)]
    assert h.manager.waiting("erp") == 0


def test_a_manager_is_usable_again_after_asyncio_run_cancelled_its_waiters() -> None:
    clock = VirtualClock()
    manager = BudgetManager({"erp": Budget(requests=1, per="1m")}, InMemoryBudgetStore(), clock)

    async def leave_a_waiter_behind() -> None:
        await manager.acquire("erp", requester="a/", lane="live", weight=1, cost=1, max_wait_ms=0)
        asyncio.get_running_loop().create_task(
            manager.acquire(
                "erp", requester="a/", lane="live", weight=1, cost=1, max_wait_ms=MINUTE
            )
        )
        await clock.flush()
        assert manager.waiting("erp") == 1

    asyncio.run(leave_a_waiter_behind())

    async def next_run() -> int:
        await clock.advance("1m")
        return await manager.acquire(
            "erp", requester="b/", lane="live", weight=1, cost=1, max_wait_ms=0
        )

    assert asyncio.run(next_run()) == 0
    assert manager.waiting("erp") == 0


def test_waiters_of_a_loop_closed_without_cancelling_do_not_block_a_new_loop() -> None:
    clock = VirtualClock()
    manager = BudgetManager({"erp": Budget(requests=1, per="1m")}, InMemoryBudgetStore(), clock)
    old = asyncio.new_event_loop()

    async def leave_a_waiter_behind() -> None:
        await manager.acquire("erp", requester="a/", lane="live", weight=1, cost=1, max_wait_ms=0)
        asyncio.get_running_loop().create_task(
            manager.acquire(
                "erp", requester="a/", lane="live", weight=1, cost=1, max_wait_ms=MINUTE
            )
        )
        await clock.flush()

    async def next_run() -> int:
        # The guard only matters if the new request were stuck behind the dead worker.
        return await asyncio.wait_for(
            manager.acquire("erp", requester="b/", lane="live", weight=1, cost=1, max_wait_ms=0),
            timeout=5,
        )

    try:
        old.run_until_complete(leave_a_waiter_behind())
        assert manager.waiting("erp") == 1
        # The window is still full: the new loop's request is answered, not left hanging.
        with pytest.raises(BudgetTimeoutError):
            asyncio.run(next_run())
        assert manager.waiting("erp") == 0
    finally:
        # Let the abandoned loop's tasks unwind before closing it, for a quiet teardown.
        leftovers = asyncio.all_tasks(old)
        for task in leftovers:
            task.cancel()
        old.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
        old.close()
