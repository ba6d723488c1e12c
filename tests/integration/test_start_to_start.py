"""A key's interval runs from the start of one run to the start of the next.

The store answers slowly and so does the vendor. Counted from the end of a cycle, every
interval would grow by what the run took (the state read, the lease, the answer, the
commit); counted from the start of the run, the requests reach the vendor exactly one
interval apart, because every run spends the same time before its request leaves.
"""

from __future__ import annotations

import asyncio

import httpx

import watukuy as wk
from support.vendors import ArrivalsVendor
from watukuy.model.rows import PKey, PollerState
from watukuy.testing import VirtualClock

from .conftest import listing_poller


class SlowStore(wk.MemoryStore):
    """A memory store whose state reads take 50 ms on the virtual clock."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock

    async def load_state(self, key: PKey) -> PollerState | None:
        await self.clock.sleep(50)
        return await super().load_state(key)


async def test_requests_reach_the_vendor_one_interval_apart() -> None:
    clock = VirtualClock()
    vendor = ArrivalsVendor(clock, latency_ms=100)

    poller = listing_poller(wk.Schedule(min="10s", max="10s", jitter=0))
    engine = wk.Engine(
        store=SlowStore(clock),
        pollers=[poller],
        clock=clock,
        fair_share_spread=0,
        http_client=httpx.AsyncClient(transport=vendor),
    )
    engine.on("orders", lambda event, ctx: None)
    starting = asyncio.ensure_future(engine.start())  # its first pass reads the state too
    while not starting.done():
        await clock.advance("10ms")
    await starting
    for _ in range(450):  # 45 s in steps of 100 ms
        await clock.advance("100ms")
    stopping = asyncio.ensure_future(engine.stop())
    while not stopping.done():
        await clock.advance("100ms")
    await stopping

    gaps = [b - a for a, b in zip(vendor.arrivals, vendor.arrivals[1:], strict=False)]
    assert len(gaps) >= 3
    # Not 10 s plus the two state reads, the answer and the commit of every run.
    assert set(gaps) == {10_000}, gaps
