"""Acks are written in groups: once 1,024 wait, when the drain ends, when the next event
of a key needs its previous ack, and at the latest 50 ms (on the engine's clock) after a
group's first ack."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

import watukuy as wk
from watukuy.model.rows import CommitBatch, Lease, OutboxRow, PKey
from watukuy.runtime.acks import ACK_GROUP_WAIT_MS
from watukuy.testing import VirtualClock
from watukuy.testing.faulty import ForwardingStore
from watukuy.testing.store_contract import event_json

from .conftest import World, orders, seed

KEY = PKey("orders")


class AckCalls(ForwardingStore):
    """Records how many ids each ``ack_events`` call carries."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.sizes: list[int] = []

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        self.sizes.append(len(event_ids))
        await super().ack_events(key, lease, event_ids)


async def test_a_page_of_quick_deliveries_is_acked_in_one_call(world: World) -> None:
    seed(world, 40)
    store = AckCalls(world.store)
    engine = wk.Engine(
        store=store,
        pollers=[orders()],
        clock=world.clock,
        http_client=httpx.AsyncClient(transport=world.api.transport()),
    )
    delivered: list[str] = []

    async def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        delivered.append(event.subject)

    engine.on("orders", handle)
    (result,) = (await engine.tick()).polled
    assert result.error is None
    assert len(delivered) == 40
    assert store.sizes == [40]
    assert await world.store.count_pending(KEY) == 0


async def test_a_waiting_ack_is_written_once_its_group_wait_passes_on_the_clock(
    world: World,
) -> None:
    seed(world, 2)
    engine = world.engine(orders())
    second_running = asyncio.Event()
    release = asyncio.Event()

    async def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.subject == "item-002":
            second_running.set()
            await release.wait()

    engine.on("orders", handle)
    tick = asyncio.create_task(engine.tick())
    await second_running.wait()
    await world.clock.settle()
    # The first event's ack waits for others to join its group, for the group's wait on
    # the engine's clock, not on the event loop's.
    assert await world.store.count_pending(KEY) == 2
    await world.clock.advance_ms(ACK_GROUP_WAIT_MS - 1)
    assert await world.store.count_pending(KEY) == 2
    await world.clock.advance_ms(1)
    # It landed while the second handler still runs, not after it.
    assert await world.store.count_pending(KEY) == 1
    release.set()
    (result,) = (await tick).polled
    assert result.error is None
    assert await world.store.count_pending(KEY) == 0


async def test_a_long_outbox_is_acked_in_groups_of_at_least_1024() -> None:
    clock = VirtualClock()
    inner = wk.MemoryStore()
    lease = await inner.acquire_lease(KEY, "seed", 30_000, clock.now())
    assert lease is not None
    rows = [
        OutboxRow(f"e{n:05d}", n, event_json(f"e{n:05d}", n), created_at=clock.now())
        for n in range(1, 3001)
    ]
    await inner.commit_poll(KEY, lease, CommitBatch(now=clock.now(), events=rows))
    await inner.release_lease(KEY, lease)
    store = AckCalls(inner)
    poller = orders(schedule=wk.Schedule(min="1h", max="2h"))
    engine = wk.Engine(store=store, pollers=[poller], clock=clock, dispatch_batch_size=250)
    seen = 0

    async def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        nonlocal seen
        seen += 1

    engine.on("orders", handle)
    await engine.tick()
    assert seen == 3000
    assert sum(store.sizes) == 3000
    assert all(size >= 1024 for size in store.sizes[:-1]), store.sizes
    assert len(store.sizes) <= 3
    assert await inner.count_pending(KEY) == 0
