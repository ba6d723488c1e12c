"""Outbox rows that share a sequence (a retried parked row, say) across the boundary of a
``load_pending`` batch are all delivered in the same drain."""

from __future__ import annotations

from typing import Any

import watukuy as wk
from watukuy.model.rows import CommitBatch, OutboxRow, PKey
from watukuy.testing import VirtualClock
from watukuy.testing.store_contract import event_json


def _orders() -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[])

    return wk.define_poller(
        name="orders", identity=lambda item: item["id"], cursor=wk.SnapshotDiff(), fetch=fetch
    )


async def test_rows_of_one_sequence_across_a_batch_boundary_wait_no_drain() -> None:
    clock = VirtualClock()
    store = wk.MemoryStore()
    key = PKey("orders")
    lease = await store.acquire_lease(key, "seed", 30_000, clock.now())
    assert lease is not None
    sequences = [1, 2, 2, 2, 2, 3]  # batches of 2: [1, 2] [2, 2] [2, 3]
    rows = [
        OutboxRow(f"e{n}", seq, event_json(f"e{n}", seq), created_at=clock.now())
        for n, seq in enumerate(sequences)
    ]
    await store.commit_poll(key, lease, CommitBatch(now=clock.now(), events=rows))
    await store.release_lease(key, lease)
    engine = wk.Engine(store=store, pollers=[_orders()], clock=clock, dispatch_batch_size=2)
    seen: list[str] = []

    async def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        seen.append(event.id)

    engine.on("orders", handle)
    await engine.tick()
    assert sorted(seen) == sorted(row.event_id for row in rows)
    assert len(seen) == len(rows)  # each once
    assert await store.count_pending(key) == 0
