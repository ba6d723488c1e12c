"""The daemon starts the keys that are due before it resyncs with the store.

A resync asks the store's due index which keys wake soon and re-reads a few keys' state:
store round trips that take time on a busy store. Keys already due must not wait for
them: the loop starts them first, then resyncs, then starts whatever the resync found.
"""

from __future__ import annotations

import asyncio

import httpx

import watukuy as wk
from support.vendors import ArrivalsVendor
from watukuy.testing import VirtualClock

from .conftest import listing_poller


class SlowIndexStore(wk.MemoryStore):
    """A memory store whose due index hangs while ``hold`` is clear."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = asyncio.Event()
        self.hold.set()
        self.index_calls = 0

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        self.index_calls += 1
        await self.hold.wait()
        return await super().due_keys(poller, until, limit)


async def test_a_due_key_starts_while_the_resync_is_still_waiting_for_the_store() -> None:
    clock = VirtualClock()
    vendor = ArrivalsVendor(clock)
    store = SlowIndexStore()

    poller = listing_poller(wk.Schedule(min="10s", max="10s", jitter=0))
    engine = wk.Engine(
        store=store,
        pollers=[poller],
        clock=clock,
        resync_every="10s",  # the resync falls due with the second poll
        fair_share_spread=0,
        http_client=httpx.AsyncClient(transport=vendor),
    )
    engine.on("orders", lambda event, ctx: None)
    start = clock.now()
    await engine.start()
    await clock.advance("1s")
    assert [at - start for at in vendor.arrivals] == [0]
    store.hold.clear()  # from now on the due index does not answer
    await clock.advance("9s")
    for _ in range(10):
        await clock.advance("10ms")
    assert store.index_calls >= 1  # the resync is waiting for the index...
    # ...and the key due at 10 s was polled all the same.
    assert [at - start for at in vendor.arrivals] == [0, 10_000]
    store.hold.set()
    stopping = asyncio.ensure_future(engine.stop())
    while not stopping.done():
        await clock.advance("100ms")
    await stopping
