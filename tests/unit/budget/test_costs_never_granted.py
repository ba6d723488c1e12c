"""A cost no budget can ever grant is refused, never waited for.

``Budget(10, "1s", burst=3)`` holds three tokens at most, so a request costing five waits
for room that never comes. ``Engine(...)`` refuses the poller at construction, and the
in-memory budget store refuses such a take the way ``RedisBudgetStore`` does (the Redis
side is in ``tests/stores/test_budget_bucket.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.budget import InMemoryBudgetStore
from watukuy.model.errors import ConfigError
from watukuy.model.ports import BudgetPolicy


def poller(cost: float) -> wk.PollerDefinition[Any]:
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=lambda ctx: wk.Page(items=[]),
        budget="erp",
        budget_cost=cost,
    )


def engine(cost: float, budget: wk.Budget) -> wk.Engine:
    return wk.Engine(store=wk.MemoryStore(), pollers=[poller(cost)], budgets={"erp": budget})


@pytest.mark.parametrize(
    ("cost", "budget", "capacity"),
    [
        (5, wk.Budget(10, "1s", burst=3), "a burst of 3"),
        (11, wk.Budget(10, "1s"), "a budget of 10 requests per window"),
        (30.5, wk.Budget(10, "1s", burst=30), "a burst of 30"),
    ],
)
def test_the_engine_refuses_a_poller_whose_cost_its_budget_never_grants(
    cost: float, budget: wk.Budget, capacity: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        engine(cost, budget)
    assert raised.value.field == "budget_cost"
    assert str(raised.value) == (
        f"budget_cost: poller 'orders' has budget_cost {cost:g}, which budget 'erp' "
        f"({capacity}) can never grant"
    )


@pytest.mark.parametrize(
    ("cost", "budget"),
    [
        (3, wk.Budget(10, "1s", burst=3)),
        (10, wk.Budget(10, "1s")),
        (20, wk.Budget(10, "1s", burst=30)),  # a bucket holds its burst, more than requests
        (0, wk.Budget(1, "1s", burst=1)),
    ],
)
def test_a_cost_the_budget_can_grant_is_accepted(cost: float, budget: wk.Budget) -> None:
    assert engine(cost, budget).pollers["orders"].budget_cost == cost


async def test_the_in_memory_bucket_refuses_a_cost_larger_than_its_burst() -> None:
    store = InMemoryBudgetStore()
    policy = BudgetPolicy(requests=10, per_ms=1_000, burst=3)
    for now in (0, 200, 400, 1_000, 10_000):  # it used to answer a 200 ms wait each time
        with pytest.raises(
            ConfigError, match=r"^cost: a cost of 5 can never be granted by a burst of 3$"
        ):
            await store.try_take("erp", policy, 5, now)
    assert await store.try_take("erp", policy, 3, 0) == 0


async def test_a_bucket_grants_up_to_its_burst_even_above_requests() -> None:
    store = InMemoryBudgetStore()
    policy = BudgetPolicy(requests=10, per_ms=1_000, burst=30)
    assert await store.try_take("erp", policy, 20, 0) == 0
    with pytest.raises(ConfigError, match=r"^cost: a cost of 31 can never be granted by a burst"):
        await store.try_take("erp", policy, 31, 0)
