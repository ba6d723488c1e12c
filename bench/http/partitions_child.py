"""Thousands of partitions of one poller in one process, against a slow vendor, for a while.

One partitioned ``TimestampCursor`` poller (a tenant per partition, three orders each) on a
``SqliteStore``, ``Budget(150, "1s")`` on every request, the engine started as a daemon
(``async with engine``) for ``--seconds``. ``--client explicit`` hands the engine an
``httpx.AsyncClient`` with a pool of 200 connections; ``--client default`` lets the
engine create its own.

A probe task sleeps 20 ms in a loop and records how late it wakes up: the event-loop lag.
Hooks count the lane cycles and the errors by code.

It prints one JSON line: the lag samples' percentiles, the counts, and the monotonic
instants the engine started and stopped (the vendor records each request's arrival on
the same clock).

Run: ``python -m bench.http.partitions_child --url http://127.0.0.1:PORT --sqlite p.db``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections import Counter
from typing import Any

import httpx
import orjson

import watukuy as wk

PROBE_S = 0.02


class Counting:
    """Hooks that count lane cycles and errors."""

    def __init__(self) -> None:
        self.polls = 0
        self.errors: Counter[str] = Counter()

    def on_poll_end(self, details: Any) -> None:
        self.polls += 1

    def on_error(self, details: Any) -> None:
        self.errors[details.error.get("code") or details.error.get("name", "?")] += 1


def percentile(values: list[float], share: float) -> float:
    """The ``share`` percentile of ``values`` (nearest rank), 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(args: Any) -> dict[str, Any]:
    names = [f"t{n:05d}" for n in range(args.partitions)]
    url = args.url

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        params: dict[str, Any] = {"limit": 100}
        if ctx.cursor.value is not None:
            params["since"] = ctx.cursor.value
        if ctx.cursor.tie_break is not None:
            params["after"] = ctx.cursor.tie_break
        body = (await ctx.http.get(f"{url}/t/{ctx.partition.key}/orders", params=params)).json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    poller = wk.define_poller(
        name="tenants",
        identity=lambda order: order["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch,
        partitions=lambda: names,
        schedule=wk.Schedule(min=args.schedule_min, max=args.schedule_max),
        budget="vendor",
    )
    client = None
    if args.client == "explicit":
        client = httpx.AsyncClient(
            timeout=30,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=200),
        )
    store = wk.SqliteStore(args.sqlite)
    hooks = Counting()
    engine = wk.Engine(
        store=store,
        pollers=[poller],
        budgets={"vendor": wk.Budget(args.budget, "1s")},
        hooks=hooks,
        http_client=client,
        instance_id="bench",
    )

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        return None

    engine.on("tenants", handler)
    lags: list[float] = []

    async def probe() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            lags.append(time.perf_counter() - before - PROBE_S)

    await engine.migrate()
    started = time.monotonic()
    async with engine:
        task = asyncio.create_task(probe())
        await asyncio.sleep(args.seconds)
        stopped = time.monotonic()
        task.cancel()
    await store.close()
    if client is not None:
        await client.aclose()
    return {
        "started": started,
        "stopped": stopped,
        "lag_p50": percentile(lags, 0.5),
        "lag_p99": percentile(lags, 0.99),
        "lag_max": max(lags, default=0.0),
        "polls": hooks.polls,
        "errors": dict(hooks.errors),
    }


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run the engine for a while, print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.http.partitions_child")
    parser.add_argument("--url", required=True)
    parser.add_argument("--sqlite", required=True)
    parser.add_argument("--partitions", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--budget", type=int, default=150)
    parser.add_argument("--schedule-min", default="10s")
    parser.add_argument("--schedule-max", default="30s")
    parser.add_argument("--client", choices=("explicit", "default"), default="explicit")
    args = parser.parse_args(argv)
    logging.getLogger("watukuy").setLevel(logging.CRITICAL)
    sys.stdout.write(orjson.dumps(asyncio.run(run(args))).decode() + "\n")


if __name__ == "__main__":
    main()
