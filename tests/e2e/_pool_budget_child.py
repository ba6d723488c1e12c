"""One engine process for ``test_budget_at_the_vendor.py``: twenty keys, five connections.

Runs a daemon engine (system clock, its own MemoryStore) with one poller of 20 partitions,
each wanting a request every 100 ms, all charged to the budget ``vendor`` (10 requests per
second), through an ``httpx.AsyncClient`` limited to 5 connections: far more requests want
to go than the pool can carry at once, so many wait for a connection after their grant.
With ``--redis`` the budget lives in a ``RedisBudgetStore`` (shared with another process).
It starts at ``--start-at`` (epoch ms), runs until it has made ``--requests`` requests (or
for ``--seconds`` at most), and prints one JSON line: the requests it made and the cycles
that failed. Stopping on a count, not on the clock, keeps the run's size the same on a busy
machine, where the process may start late.

Usage::

    python tests/e2e/_pool_budget_child.py --api URL [--redis URL --prefix PREFIX] \\
        --name NAME --start-at EPOCH_MS --requests 30 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import httpx

import watukuy as wk

PARTITIONS = [f"p{n:02d}" for n in range(20)]


def poller(api: str, name: str) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{api}/items",
            params={"partition": ctx.partition.key},
            headers={"x-client-id": name},
            validators=False,
        )
        return wk.Page(items=response.json()["data"])

    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        partitions=lambda: PARTITIONS,
        budget="vendor",
        schedule=wk.Schedule(min="100ms", max="100ms", adaptive=False, jitter=0),
    )


class Observed:
    def __init__(self, wanted: int) -> None:
        self.errors: list[str] = []
        self.fetches = 0
        self._wanted = wanted
        self.enough = asyncio.Event()

    def on_fetch(self, details: Any) -> None:
        self.fetches += 1
        if self.fetches >= self._wanted:
            self.enough.set()

    def on_error(self, details: Any) -> None:
        self.errors.append(str(details.error.get("message", "")))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = wk.SystemClock()
    redis_client: Any = None
    budget_store: Any = None
    if args.redis:
        import redis.asyncio as aioredis

        redis_client = aioredis.Redis.from_url(args.redis)
        budget_store = wk.RedisBudgetStore(redis_client, prefix=args.prefix)
    observed = Observed(args.requests)
    http = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=5, max_keepalive_connections=5),
        timeout=httpx.Timeout(10.0),
    )
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller(args.api, args.name)],
        budgets={"vendor": wk.Budget(requests=10, per="1s", max_wait="1m")},
        budget_store=budget_store,
        instance_id=args.name,
        clock=clock,
        hooks=observed,
        http_client=http,
    )
    try:
        await clock.sleep(args.start_at - clock.now())
        await engine.start()
        try:
            await asyncio.wait_for(observed.enough.wait(), timeout=args.seconds)
        except TimeoutError:
            pass  # the parent's checks say how many requests there were
        await engine.stop(drain=False, timeout="5s")
    finally:
        await http.aclose()
        if redis_client is not None:
            await redis_client.aclose()
    return {"name": args.name, "errors": observed.errors, "requests": observed.fetches}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", required=True)
    parser.add_argument("--redis", default=None)
    parser.add_argument("--prefix", default="watukuy:")
    parser.add_argument("--name", required=True)
    parser.add_argument("--start-at", type=int, required=True)
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    summary = asyncio.run(run(parser.parse_args()))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
