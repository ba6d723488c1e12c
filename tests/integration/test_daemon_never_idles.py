"""The daemon never sleeps while a key is overdue and its budget has room for a run.

Twenty keys share ``Budget(10, "1s")`` and each wants a poll every 50 ms: every key is
always overdue, and runs start at the budget's pace, one per 100 ms. When the only run in
flight ended a moment before the pace allowed the next start, the loop turned the line
down, read the clock again, saw a pace already ready, took that for "nothing to wait
for" and slept until its next resync (15 s) while all twenty keys waited.

A real clock moves while the loop computes; this virtual one moves a millisecond each time
it is read, so the same happens here, deterministically. The vendor answers after 50-99
ms (drawn from a seeded generator), so runs end at every phase of the pace.
"""

from __future__ import annotations

import asyncio
import functools
import random
from typing import Any

import httpx
import pytest

import watukuy as wk
from support.vendors import ArrivalsVendor
from watukuy.testing import SeededRandom, VirtualClock

KEYS = [f"p{n:02d}" for n in range(20)]
SECONDS = 20


class ReadingMovesTime(VirtualClock):
    """A virtual clock whose every reading is a millisecond after the one before."""

    def now(self) -> int:
        self._now += 1
        return self._now


async def requests_per_second(seed: int) -> list[int]:
    clock = ReadingMovesTime()
    # An empty listing that answers 50-99 ms after each request arrives.
    vendor = ArrivalsVendor(
        clock, latency_ms=functools.partial(random.Random(seed).randint, 50, 99)
    )

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get(f"https://vendor.test/{ctx.partition.key}")
        return wk.Page(items=response.json()["data"])

    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        partitions=lambda: KEYS,
        budget="vendor",
        schedule=wk.Schedule(min="50ms", max="50ms", adaptive=False, jitter=0),
    )
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller],
        budgets={"vendor": wk.Budget(10, "1s", max_wait="1m")},
        clock=clock,
        random=SeededRandom(seed),
        http_client=httpx.AsyncClient(transport=vendor),
    )
    engine.on("orders", lambda event, ctx: None)
    start = clock.now()
    await engine.start()
    await clock.advance(SECONDS)
    stopping = asyncio.ensure_future(engine.stop(drain=False))
    while not stopping.done():
        await clock.advance("100ms")
    await stopping
    per_second = [0] * SECONDS
    for at in vendor.arrivals:
        if (at - start) // 1_000 < SECONDS:
            per_second[(at - start) // 1_000] += 1
    return per_second


@pytest.mark.parametrize("seed", range(6))
async def test_no_second_without_a_request_while_every_key_is_overdue(seed: int) -> None:
    per_second = await requests_per_second(seed)
    silent = [second for second, count in enumerate(per_second) if count == 0]
    assert silent == [], per_second
    # The budget is what limits the polls, never the loop: it grants ten a second.
    assert max(per_second) <= 10
