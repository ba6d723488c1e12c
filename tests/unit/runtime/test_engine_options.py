"""The engine's options are checked before anything runs, each mistake naming its field."""

from __future__ import annotations

import pytest

import watukuy as wk
from watukuy.runtime.engine_options import (
    admission_for,
    budget_manager_for,
    check_budgets,
    check_sizes,
    index_pollers,
    optional_duration,
)
from watukuy.testing import VirtualClock


def poller(name: str, **options: object) -> wk.PollerDefinition[object]:
    return wk.define_poller(
        name=name,
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=lambda ctx: [],
        **options,  # type: ignore[arg-type]
    )


def test_pollers_are_indexed_by_name_from_a_list_or_a_mapping() -> None:
    orders, users = poller("orders"), poller("users")
    assert index_pollers([orders, users]) == {"orders": orders, "users": users}
    assert index_pollers({"orders": orders}) == {"orders": orders}


@pytest.mark.parametrize(
    ("pollers", "message"),
    [
        ([], "at least one poller"),
        (["orders"], "expected definitions from define_poller()"),
        ([poller("orders"), poller("orders")], "duplicate poller name 'orders'"),
        ({"users": poller("orders")}, "key 'users' must equal the poller name 'orders'"),
    ],
)
def test_a_wrong_list_of_pollers_is_refused(pollers: object, message: str) -> None:
    with pytest.raises(wk.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        index_pollers(pollers)  # type: ignore[arg-type]


def test_budgets_are_coerced_and_each_poller_budget_must_exist() -> None:
    pollers = index_pollers([poller("orders", budget="erp")])
    budgets = check_budgets({"erp": {"requests": 10, "per": "1s"}}, pollers)  # type: ignore[dict-item]
    assert budgets == {"erp": wk.Budget(requests=10, per="1s")}
    with pytest.raises(wk.ConfigError, match="uses budget 'erp', which is not in budgets"):
        check_budgets({}, pollers)
    with pytest.raises(wk.ConfigError, match="expected a Budget"):
        check_budgets({"erp": 10}, pollers)  # type: ignore[dict-item]


def test_a_budget_cost_the_budget_can_never_grant_is_refused() -> None:
    pollers = index_pollers([poller("orders", budget="erp", budget_cost=50)])
    with pytest.raises(wk.ConfigError, match="budget_cost 50") as caught:
        check_budgets({"erp": wk.Budget(requests=10, per="1s")}, pollers)
    assert caught.value.field == "budget_cost"


@pytest.mark.parametrize(
    ("sizes", "field"),
    [
        ({"dispatch_batch_size": 0}, "dispatch_batch_size"),
        ({"tick_concurrency": True}, "tick_concurrency"),
        ({"max_concurrent_keys": 0}, "max_concurrent_keys"),
        ({"max_concurrent_keys": 1.5}, "max_concurrent_keys"),
    ],
)
def test_counts_are_integers_from_one(sizes: dict[str, object], field: str) -> None:
    given: dict[str, object] = {
        "dispatch_batch_size": 1000,
        "tick_concurrency": 4,
        "max_concurrent_keys": None,
        **sizes,
    }
    with pytest.raises(wk.ConfigError) as caught:
        check_sizes(**given)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_good_counts_pass() -> None:
    check_sizes(dispatch_batch_size=1, tick_concurrency=1, max_concurrent_keys=None)
    check_sizes(dispatch_batch_size=1, tick_concurrency=1, max_concurrent_keys=3)


def test_an_optional_duration_is_none_or_milliseconds() -> None:
    assert optional_duration(None, "fair_share_spread") is None
    assert optional_duration("2s", "fair_share_spread") == 2_000
    with pytest.raises(wk.ConfigError) as caught:
        optional_duration("soon", "fair_share_spread")
    assert caught.value.field == "fair_share_spread"


def test_no_budgets_no_manager_and_open_admission() -> None:
    pollers = index_pollers([poller("orders")])
    assert budget_manager_for({}, None, VirtualClock(), "me") is None
    assert admission_for({}, pollers).next_start(0) is None


def test_a_budget_gets_a_manager_and_an_admission_line() -> None:
    pollers = index_pollers([poller("orders", budget="erp")])
    budgets = {"erp": wk.Budget(requests=100, per="1m")}
    manager = budget_manager_for(budgets, None, VirtualClock(), "me")
    assert manager is not None
    assert list(manager.names) == ["erp"]
    assert admission_for(budgets, pollers).limit("erp") >= 1
