"""What the default lookback of ``TimestampCursor`` costs, in requests, and what it saves.

Every scenario runs the README's poller (``TimestampCursor(field="updated_at",
tie_break="id")`` over the in-process ``FakeApi`` keyset listing, pages of 100, the default
``Schedule()``: 30 s to 5 min) on a ``VirtualClock``, driven from one planned poll to the
next, three ways: the default lookback; ``overlap=0`` (the watermark alone, no re-read);
and ``overlap="10s"`` (the classic window the default replaces, re-read every cycle).

* **idle**: 100 items written once, then nothing for an hour: requests in that hour.
* **writes**: a steady stream of 0.1, 1 or 10 writes a second for 20 minutes: requests per
  cycle (the extra ones are the window's pages).
* **bulk**: 1,000 items stamped with one instant (a bulk update, ten pages), then an idle
  hour: requests in that hour.
* **late**: 5 minutes of writers that commit 0-4.3 s after stamping (a tenth of them
  3-4.3 s), polled every 1-10 s: versions never delivered, and requests.

Run with ``python -m bench lookback``. Request counts do not depend on the machine; they are
deterministic for the seeds used here.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

import watukuy as wk
from watukuy.model.events import iso_time
from watukuy.model.rows import PKey
from watukuy.testing import FakeApi, SeededRandom, VirtualClock
from watukuy.testing._late_writers import LateWriters

BASE = "https://fake.api"
PAGE = 100
KEY = PKey("orders")
WAYS: dict[str, Any] = {"default": None, "overlap=0": 0, "overlap=10s": "10s"}


def fetch(limit: int = PAGE) -> Callable[..., Any]:
    async def run(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{BASE}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": limit},
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return run


@dataclass
class World:
    clock: VirtualClock
    api: FakeApi
    engine: wk.Engine
    delivered: set[tuple[str, int]]

    async def due(self) -> int:
        state = await self.engine.store.load_state(KEY)
        assert state is not None
        return state.schedule.next_due_at or self.clock.now()


def world(overlap: Any, schedule: wk.Schedule | None = None, seed: int = 1) -> World:
    clock = VirtualClock()
    api = FakeApi(clock)
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap=overlap),
        fetch=fetch(),
        schedule=schedule or wk.Schedule(),
    )
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller],
        clock=clock,
        random=SeededRandom(seed),
        http_client=httpx.AsyncClient(transport=api.transport()),
    )
    delivered: set[tuple[str, int]] = set()

    def record(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        delivered.add((event.subject, event.data["version"]))

    engine.on("orders", record)
    return World(clock, api, engine, delivered)


async def idle(overlap: Any, items: int, stamp_at: Callable[[int, int], int]) -> tuple[int, int]:
    """``items`` written, one first sync, then an idle hour polled as planned: (requests in
    the first sync, requests in the hour)."""
    w = world(overlap)
    now = w.clock.now()
    for i in range(items):
        w.api.add({"id": f"o{i:05d}", "updated_at": iso_time(stamp_at(now, i)), "version": 1})
    await w.engine.tick()
    first = w.api.calls
    end = w.clock.now() + 3_600_000
    while (at := await w.due()) < end:
        await w.clock.advance_to(at)
        await w.engine.tick()
    return first, w.api.calls - first


async def writes(overlap: Any, per_second: float, minutes: int = 20) -> tuple[int, int]:
    """A steady stream of writes: (requests, cycles)."""
    w = world(overlap)
    rng = random.Random(5)
    end = w.clock.now() + minutes * 60_000
    cycles = 0
    due = w.clock.now()
    step = 100
    while w.clock.now() < end:
        now = w.clock.now()
        if rng.random() < per_second * step / 1_000:
            w.api.add({"id": f"o{rng.randint(0, 10**9):010d}", "updated_at": iso_time(now)})
        if now >= due:
            await w.engine.tick()
            cycles += 1
            due = await w.due()
        await w.clock.advance(f"{step}ms")
    return w.api.calls, cycles


async def late(overlap: Any, seed: int = 3) -> tuple[int, int, int]:
    """Writers committing up to 4.3 s after their stamp: (versions lost, versions, requests)."""
    w = world(overlap, wk.Schedule(min="1s", max="10s"), seed)
    writers = LateWriters(w.api, random.Random(seed))
    end = w.clock.now() + 300_000
    while w.clock.now() < end:
        writers.step(w.clock.now())
        await w.engine.tick()
        await w.clock.advance("250ms")
    for _ in range(20):
        await w.clock.advance("5s")
        await w.engine.tick()
    return len(writers.lost(w.delivered)), len(writers.history), w.api.calls


async def run() -> None:
    print("idle hour after a first sync of 100 items (requests: first sync, then the hour)")
    for name, overlap in WAYS.items():
        first, hour = await idle(overlap, 100, lambda now, i: now - 100_000 + i * 1_000)
        print(f"  {name:12} {first:4d} then {hour:4d} in the hour ({hour / 60:.2f} a minute)")
    print("steady writes for 20 minutes (requests / cycles = requests per cycle)")
    for rate in (0.1, 1.0, 10.0):
        for name, overlap in WAYS.items():
            calls, cycles = await writes(overlap, rate)
            print(
                f"  {rate:4} writes/s  {name:12} {calls:5d} requests / {cycles:4d} cycles "
                f"= {calls / cycles:.2f}"
            )
    print("a bulk of 1,000 equal stamps (ten pages), then an idle hour")
    for name, overlap in WAYS.items():
        first, hour = await idle(overlap, 1_000, lambda now, i: now - 1_000)
        print(f"  {name:12} {first:4d} then {hour:4d} in the hour")
    print("writers committing up to 4.3 s after the stamp, polled every 1-10 s, 5 minutes")
    for name, overlap in WAYS.items():
        lost, total, calls = await late(overlap)
        print(f"  {name:12} {lost:4d} of {total} versions lost, {calls} requests")


def main() -> None:
    """Print the figures."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
