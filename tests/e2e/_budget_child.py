"""One engine process for ``test_redis_budget.py``: poll as fast as a shared budget allows.

Runs a daemon engine (system clock, its own MemoryStore) with one timestamp poller that
polls a served FakeApi every 50 ms, charging every request to the budget ``shared``
(20 requests per 10 s) kept in Redis by ``RedisBudgetStore``. It starts at ``--start-at``
(epoch ms, so that both children begin together), runs for ``--seconds``, stops, and prints
one JSON line: the times at which the budget store granted a token (the ``now`` each
successful take was made with), the budget waits, and the cycles that failed.

Usage::

    python tests/e2e/_budget_child.py --api URL --redis URL --prefix PREFIX \\
        --name child-a --start-at EPOCH_MS --seconds 25
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import redis.asyncio as aioredis

import watukuy as wk
from watukuy.model.ports import BudgetPolicy
from watukuy.stores.redis import RedisBudgetStore

BUDGET = "shared"


class RecordingBudgetStore:
    """Wraps the Redis budget store and remembers when it granted tokens."""

    def __init__(self, inner: RedisBudgetStore) -> None:
        self._inner = inner
        self.granted: list[int] = []

    async def try_take(self, budget: str, policy: BudgetPolicy, cost: float, now: int) -> int:
        wait = await self._inner.try_take(budget, policy, cost, now)
        if wait == 0:
            self.granted.append(now)
        return wait


class Observed:
    """Hook set counting budget waits and failed cycles."""

    def __init__(self) -> None:
        self.waits: list[int] = []
        self.errors: list[str] = []

    def on_budget_wait(self, details: Any) -> None:
        self.waits.append(details.wait_ms)

    def on_error(self, details: Any) -> None:
        self.errors.append(str(details.error.get("message", "")))


def poller(api: str, name: str) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{api}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 100},
            headers={"x-client-id": name},
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch,
        budget=BUDGET,
        schedule=wk.Schedule(min="50ms", max="50ms", adaptive=False, jitter=0),
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = wk.SystemClock()
    client = aioredis.Redis.from_url(args.redis)
    budget_store = RecordingBudgetStore(RedisBudgetStore(client, prefix=args.prefix))
    observed = Observed()
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller(args.api, args.name)],
        budgets={BUDGET: wk.Budget(requests=20, per="10s", max_wait="1m")},
        budget_store=budget_store,
        instance_id=args.name,
        clock=clock,
        hooks=observed,
    )

    async def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        return None

    engine.on("orders", handle)
    try:
        await clock.sleep(args.start_at - clock.now())
        await engine.start()
        await clock.sleep(args.start_at + args.seconds * 1000 - clock.now())
        await engine.stop(drain=True, timeout="10s")
    finally:
        await client.aclose()
    return {
        "name": args.name,
        "granted": budget_store.granted,
        "waits": observed.waits,
        "errors": observed.errors,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", required=True)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--start-at", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    summary = asyncio.run(run(parser.parse_args()))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
