"""Checking an engine's options before anything runs.

:class:`~watukuy.runtime.engine.EngineCore` calls these from its constructor: every mistake
in the configuration is a :class:`~watukuy.model.errors.ConfigError` naming the field, raised
at construction, never later by a run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.options import Budget
from watukuy.model.ports import BudgetPolicy, BudgetStore, Clock, budget_capacity, describe_capacity

from .admission import Admission, Pace, admission_limit, start_pace
from .poller import PollerDefinition

if TYPE_CHECKING:
    from watukuy.budget.manager import BudgetManager

__all__ = [
    "admission_for",
    "budget_manager_for",
    "check_budgets",
    "check_sizes",
    "check_source_prefix",
    "index_pollers",
    "optional_duration",
    "with_source_prefix",
]


def index_pollers(
    pollers: Sequence[PollerDefinition[Any]] | Mapping[str, PollerDefinition[Any]],
) -> dict[str, PollerDefinition[Any]]:
    """The poller definitions by name.

    Args:
        pollers: A list of definitions, or a mapping whose keys equal their names.

    Raises:
        ConfigError: No poller, a value that is not a definition, two with one name, or a
            mapping key that differs from its definition's name.
    """
    index: dict[str, PollerDefinition[Any]] = {}
    if isinstance(pollers, Mapping):
        items = list(pollers.items())
        for key, poller in items:
            if isinstance(poller, PollerDefinition) and key != poller.name:
                raise ConfigError(
                    f"key {key!r} must equal the poller name {poller.name!r}", field="pollers"
                )
        values = [poller for _, poller in items]
    else:
        values = list(pollers)
    if not values:
        raise ConfigError("at least one poller is required", field="pollers")
    for poller in values:
        if not isinstance(poller, PollerDefinition):
            raise ConfigError(
                f"expected definitions from define_poller(), got {poller!r}", field="pollers"
            )
        if poller.name in index:
            raise ConfigError(f"duplicate poller name {poller.name!r}", field="pollers")
        index[poller.name] = poller
    return index


def check_source_prefix(prefix: object) -> str | None:
    """``prefix`` when it is a valid ``source_prefix``: text without spaces or controls.

    Raises:
        ConfigError: Naming ``source_prefix``, for anything else.
    """
    if prefix is None:
        return None
    if (
        not isinstance(prefix, str)
        or not prefix
        or any(ch.isspace() or not ch.isprintable() for ch in prefix)
    ):
        raise ConfigError(
            f"expected a non-empty string without spaces (such as 'urn:acme:'), got {prefix!r}",
            field="source_prefix",
        )
    return prefix


def with_source_prefix(
    pollers: Mapping[str, PollerDefinition[Any]], prefix: str | None
) -> dict[str, PollerDefinition[Any]]:
    """The pollers, each without a ``source`` of its own taking ``prefix`` + its name."""
    if prefix is None:
        return dict(pollers)
    return {
        name: poller
        if poller.own_source
        else dataclasses.replace(poller, source=f"{prefix}{poller.name}")
        for name, poller in pollers.items()
    }


def check_budgets(
    budgets: Mapping[str, Budget] | None, pollers: Mapping[str, PollerDefinition[Any]]
) -> dict[str, Budget]:
    """The named budgets, each a :class:`Budget` (a mapping of its fields is accepted).

    Raises:
        ConfigError: A value that is not a budget, a poller naming a budget that does not
            exist, or a poller whose ``budget_cost`` its budget can never grant.
    """
    resolved: dict[str, Budget] = {}
    for name, budget in (budgets or {}).items():
        if isinstance(budget, Mapping):
            budget = Budget(**budget)
        if not isinstance(budget, Budget):
            raise ConfigError(f"expected a Budget, got {budget!r}", field=f"budgets.{name}")
        resolved[name] = budget
    for poller in pollers.values():
        if poller.budget is None:
            continue
        if poller.budget not in resolved:
            raise ConfigError(
                f"poller {poller.name!r} uses budget {poller.budget!r}, which is not in "
                f"budgets ({sorted(resolved)})",
                field="budgets",
            )
        budget = resolved[poller.budget]
        policy = BudgetPolicy(requests=budget.requests, per_ms=budget.per_ms, burst=budget.burst)
        if poller.budget_cost > budget_capacity(policy):
            # Every request of this poller would wait for room that never comes.
            raise ConfigError(
                f"poller {poller.name!r} has budget_cost {poller.budget_cost:g}, which budget "
                f"{poller.budget!r} ({describe_capacity(policy)}) can never grant",
                field="budget_cost",
            )
    return resolved


def check_sizes(
    *, dispatch_batch_size: int, tick_concurrency: int, max_concurrent_keys: int | None
) -> None:
    """Check the engine's counts: each an integer ``>= 1`` (``max_concurrent_keys`` may be
    ``None``, no limit).

    Raises:
        ConfigError: A count that is not such an integer (a ``bool`` is not one).
    """
    for name, value in (
        ("dispatch_batch_size", dispatch_batch_size),
        ("tick_concurrency", tick_concurrency),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"expected an integer >= 1, got {value!r}", field=name)
    if max_concurrent_keys is not None and (
        isinstance(max_concurrent_keys, bool)
        or not isinstance(max_concurrent_keys, int)
        or max_concurrent_keys < 1
    ):
        raise ConfigError(
            f"expected an integer >= 1 or None, got {max_concurrent_keys!r}",
            field="max_concurrent_keys",
        )


def admission_for(
    budgets: Mapping[str, Budget], pollers: Mapping[str, PollerDefinition[Any]]
) -> Admission:
    """The daemon's admission lines: due keys wait there, one line per budget, until a run
    on their budget may start. Runs on a budget also start at its pace: a burst, then as
    fast as it grants."""
    limits: dict[str, int] = {}
    paces: dict[str, Pace] = {}
    for name, budget in budgets.items():
        costs = [p.budget_cost for p in pollers.values() if p.budget == name]
        waits = [p.schedule.max_ms for p in pollers.values() if p.budget == name]
        limits[name] = admission_limit(budget, costs=costs, waits=waits)
        paces[name] = start_pace(budget, costs=costs, limit=limits[name])
    return Admission(limits, paces)


def budget_manager_for(
    budgets: Mapping[str, Budget],
    budget_store: BudgetStore | None,
    clock: Clock,
    instance_id: str,
) -> BudgetManager | None:
    """The manager of the named budgets (``None`` when there are none)."""
    if not budgets:
        return None
    # Imported here: an engine without budgets never loads the budget machinery.
    from watukuy.budget.manager import BudgetManager
    from watukuy.budget.window import InMemoryBudgetStore

    return BudgetManager(
        budgets, budget_store or InMemoryBudgetStore(), clock, instance_id=instance_id
    )


def optional_duration(value: Duration | None, field: str) -> int | None:
    """``value`` in milliseconds, ``None`` when it is ``None``.

    Raises:
        ConfigError: ``value`` is not a duration (naming ``field``).
    """
    return None if value is None else parse_duration(value, field)
