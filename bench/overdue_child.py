"""One engine process for :mod:`bench.bench_overdue`: twenty keys on ``Budget(10, "1s")``.

A daemon engine (system clock, its own MemoryStore) with one poller of 20 partitions, each
wanting a poll every ``--interval-ms``, all charged to one ``Budget(10, "1s")``: the keys
want far more polls than the budget grants, so every key is overdue all the time and the
budget alone decides how often the vendor hears from the engine. It runs ``--seconds``,
stops, and prints one JSON line: when it ran (``time.monotonic()``, comparable with the
vendor's stamps on the same host) and the cycles that failed.

Usage::

    python -m bench.overdue_child --api URL --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx

import watukuy as wk

KEYS = [f"k{n:02d}" for n in range(20)]


class Failures:
    """Hooks that keep the message of every failed cycle."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def on_error(self, details: Any) -> None:
        self.errors.append(str(details.error.get("message", "")))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get(f"{args.api}/t/{ctx.partition.key}/orders", validators=False)
        return wk.Page(items=response.json()["data"])

    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        partitions=lambda: KEYS,
        budget="vendor",
        # Pinned at ``min``; ``max`` only sets how long a request may wait for the budget.
        schedule=wk.Schedule(min=args.interval_ms / 1000, max="1m", adaptive=False, jitter=0),
    )
    failures = Failures()
    clock = wk.SystemClock()
    http = httpx.AsyncClient(timeout=httpx.Timeout(10.0))
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller],
        budgets={"vendor": wk.Budget(10, "1s")},
        clock=clock,
        hooks=failures,
        http_client=http,
        resync_every=args.resync_every,
    )
    engine.on("orders", lambda event, ctx: None)
    try:
        started = time.monotonic()
        await engine.start()
        await clock.sleep(int(args.seconds * 1000))
        stopped = time.monotonic()
        await engine.stop(drain=False, timeout="5s")
    finally:
        await http.aclose()
    return {"started": started, "stopped": stopped, "errors": failures.errors}


def main() -> None:
    """Parse the command line, run, print the JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.overdue_child")
    parser.add_argument("--api", required=True)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval-ms", type=int, default=50)
    parser.add_argument("--resync-every", default="15s")
    print(json.dumps(asyncio.run(run(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
