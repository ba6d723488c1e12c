"""The ack writer on its own: a group's deadline is a sleep on the clock it is given."""

from __future__ import annotations

import asyncio

import watukuy as wk
from watukuy.model.rows import CommitBatch, Lease, OutboxRow, PKey
from watukuy.runtime.acks import ACK_GROUP_WAIT_MS, MAX_ACKS_IN_FLIGHT, AckWriter
from watukuy.testing import VirtualClock
from watukuy.testing.store_contract import event_json

KEY = PKey("orders")


async def _outbox(clock: VirtualClock, count: int) -> tuple[wk.MemoryStore, Lease]:
    store = wk.MemoryStore()
    lease = await store.acquire_lease(KEY, "test", 60_000, clock.now())
    assert lease is not None
    rows = [
        OutboxRow(f"e{n:05d}", n, event_json(f"e{n:05d}", n), created_at=clock.now())
        for n in range(1, count + 1)
    ]
    await store.commit_poll(KEY, lease, CommitBatch(now=clock.now(), events=rows))
    return store, lease


async def test_a_queued_ack_lands_when_its_group_wait_passes_on_the_clock() -> None:
    clock = VirtualClock()
    store, lease = await _outbox(clock, 2)
    landed: list[tuple[str, int]] = []

    async def note(event_id: str, detail: int) -> None:
        landed.append((event_id, detail))

    writer: AckWriter[int] = AckWriter(
        store=store, key=KEY, lease=lambda: lease, clock=clock, landed=note
    )
    writer.queue("a", "e00001", 1)
    writer.queue("b", "e00002", 2)
    await clock.settle()
    assert landed == []
    assert clock.next_due_at() == clock.now() + ACK_GROUP_WAIT_MS
    await clock.advance_ms(ACK_GROUP_WAIT_MS - 1)
    assert landed == []
    await clock.advance_ms(1)
    assert landed == [("e00001", 1), ("e00002", 2)]  # one group, in queue order
    assert await store.count_pending(KEY) == 0
    assert clock.pending_timers() == 0
    await writer.end(settle=True)


async def test_waiting_behind_a_group_writes_it_now_and_stops_its_timer() -> None:
    clock = VirtualClock()
    store, lease = await _outbox(clock, 1)
    landed: list[str] = []

    async def note(event_id: str, detail: None) -> None:
        landed.append(event_id)

    writer: AckWriter[None] = AckWriter(
        store=store, key=KEY, lease=lambda: lease, clock=clock, landed=note
    )
    writer.queue("a", "e00001", None)
    previous = writer.behind("a")
    assert previous is not None
    await asyncio.wait_for(previous, timeout=5)  # no time passes on the clock
    assert landed == ["e00001"]
    await clock.settle()
    assert clock.pending_timers() == 0
    await writer.end(settle=True)
    assert not writer.unsettled


async def test_a_full_group_is_written_without_waiting_for_the_clock() -> None:
    clock = VirtualClock()
    store, lease = await _outbox(clock, MAX_ACKS_IN_FLIGHT)
    calls: list[int] = []

    async def note(event_id: str, detail: None) -> None:
        calls.append(1)

    writer: AckWriter[None] = AckWriter(
        store=store, key=KEY, lease=lambda: lease, clock=clock, landed=note
    )
    for n in range(1, MAX_ACKS_IN_FLIGHT + 1):
        writer.queue(f"k{n}", f"e{n:05d}", None)
    assert clock.pending_timers() == 0  # flushed at once: the wait was called off
    await clock.settle()
    assert len(calls) == MAX_ACKS_IN_FLIGHT
    assert await store.count_pending(KEY) == 0
    await writer.end(settle=True)
