"""A budget as the vendor counts it, on a virtual clock: 5 pooled connections, 10 keys.

The transport plays a connection pool of 5 and a vendor whose answers take 50 to 300 ms;
a request arrives at the vendor when it gets a connection. ``Budget(10, "1s")`` must hold
in the vendor's count of arrivals: a grant charged when made lets requests that waited
for a connection arrive in the same second as requests granted a second later.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from typing import Any

import httpx

import watukuy as wk
from support.vendors import ArrivalsVendor
from watukuy.testing import SeededRandom, VirtualClock

LATENCIES_MS = (200, 50, 300, 120, 250, 80, 180)


def busiest_second(times: list[int]) -> int:
    ordered = sorted(times)
    return max(
        (sum(1 for t in ordered[i:] if t < start + 1_000) for i, start in enumerate(ordered)),
        default=0,
    )


async def test_no_second_at_the_vendor_holds_more_than_the_budget() -> None:
    clock = VirtualClock()
    latency = functools.partial(next, itertools.cycle(LATENCIES_MS))
    vendor = ArrivalsVendor(clock, latency_ms=latency, connections=5)

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get("https://vendor.test/items", validators=False)
        return wk.Page(items=response.json()["data"])

    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        partitions=lambda: [f"p{n:02d}" for n in range(10)],
        budget="vendor",
        schedule=wk.Schedule(min="100ms", max="100ms", adaptive=False, jitter=0),
    )
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller],
        budgets={"vendor": wk.Budget(10, "1s", max_wait="1m")},
        clock=clock,
        random=SeededRandom(5),
        http_client=httpx.AsyncClient(transport=vendor),
    )
    await engine.start()
    await clock.advance("4s")
    stopping = asyncio.ensure_future(engine.stop(drain=False))
    while not stopping.done():  # requests in flight sleep on the virtual clock
        await clock.advance("100ms")
    await stopping
    assert busiest_second(vendor.arrivals) <= 10, sorted(vendor.arrivals)[:40]
    assert len(vendor.arrivals) >= 30  # the budget is used, not starved
