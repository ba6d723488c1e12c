"""What a lane cycle asks ``fetch`` with: the ``ctx.http`` bound to a key run and lane, and
the context ``Deletes(verify=)`` is given."""

from __future__ import annotations

from typing import Any

from watukuy.model.http_port import HttpObservations, HttpScope
from watukuy.model.rows import Lane

from .context import FetchContext
from .scope import KeyScope

__all__ = ["bind_http", "verify_context"]


def bind_http(scope: KeyScope, lane: Lane, observations: HttpObservations) -> Any:
    """The ``ctx.http`` of one request of ``lane``, recording into ``observations``;
    ``None`` when the engine has no HTTP client."""
    deps = scope.deps
    if deps.http is None:
        return None
    poller = scope.poller
    budget_wait = deps.budget_max_wait(poller.budget) if poller.budget is not None else None
    hooks = scope.hooks(lane)

    async def on_budget_wait(budget: str, waited: int) -> None:
        await hooks.on_budget_wait(budget=budget, wait_ms=waited)

    keeper = scope.keeper
    return deps.http.bind(
        HttpScope(
            key=scope.key,
            lane=lane,
            store=deps.store,
            lease=lambda: keeper.lease,
            observations=observations,
            budget=poller.budget,
            budget_weight=poller.budget_weight,
            budget_cost=poller.budget_cost,
            max_wait_ms=budget_wait if budget_wait is not None else poller.schedule.max_ms,
            gate=deps.budgets,
            clock=deps.clock,
            logger=scope.logger,
            on_budget_wait=on_budget_wait,
            redaction=deps.redaction,
            validators=lane == "live",
        )
    )


def verify_context(
    scope: KeyScope, lane: Lane, observations: HttpObservations
) -> FetchContext[Any]:
    """What ``Deletes(verify=)`` is given: bound to ``observations`` (the latest fetch's)."""
    return FetchContext(
        cursor=None,
        page=0,
        partition=scope.partition,
        lane=lane,
        http=bind_http(scope, lane, observations),
        attempt=1,
        logger=scope.logger,
        _cancel=scope.cancel,
    )
