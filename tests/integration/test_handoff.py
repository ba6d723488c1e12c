"""The rows a page has just committed go to the dispatcher from memory, when they are all
the outbox holds; anything else pending makes it read the outbox, in sequence order.

Either way each event is decoded from its stored text, so a consumer receives the same
event whether it came from memory, from the outbox, or again after a crash.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx

import watukuy as wk
from watukuy.model.rows import OutboxRow, PKey
from watukuy.testing.faulty import ForwardingStore

from .conftest import Recorder, World, orders, seed

KEY = PKey("orders")


class CountingStore(ForwardingStore):
    """Counts the outbox reads."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.loads = 0

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        self.loads += 1
        return await super().load_pending(key, limit, after_sequence)


def engine_on(world: World, store: CountingStore, **options: Any) -> wk.Engine:
    return wk.Engine(
        store=store,
        pollers=[orders(**options)],
        clock=world.clock,
        random=wk.SystemRandom(3),
        http_client=httpx.AsyncClient(transport=world.api.transport()),
        dispatch_batch_size=10,
    )


async def test_a_page_alone_in_the_outbox_is_delivered_without_reading_it_back(
    world: World,
) -> None:
    seed(world, 25)
    counting = CountingStore(world.store)
    engine = engine_on(world, counting)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    assert [e.subject for e in recorder.events] == [f"item-{i:03d}" for i in range(1, 26)]
    # One read: the drain before the poll, which finds the outbox empty.
    assert counting.loads == 1
    assert await world.store.count_pending(KEY) == 0


async def test_an_older_pending_event_makes_the_dispatcher_read_the_outbox_in_order(
    world: World,
) -> None:
    seed(world, 3)
    counting = CountingStore(world.store)
    engine = engine_on(world, counting, delivery=wk.Delivery(retry=wk.Retry(attempts=5)))
    seen: list[tuple[str, str, int]] = []
    refuse = {"item-002"}

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        seen.append((event.subject, event.type, ctx.attempt))
        if event.subject in refuse:
            raise RuntimeError("not now")

    engine.on("orders", handler)
    await engine.tick()  # item-002 fails and waits for its retry
    assert await world.store.count_pending(KEY) == 1
    refuse.clear()
    world.api.update("item-002", status="paid", updated_at="2025-12-31T12:00:01.000Z")
    # Polled again while the retry still waits: the update must wait behind it.
    before = counting.loads
    await engine.trigger("orders")
    await engine.tick()
    assert counting.loads > before
    assert [s for s in seen if s[0] == "item-002"] == [("item-002", "created", 1)]
    assert await world.store.count_pending(KEY) == 2
    report = (await engine.inspect())["pollers"][0]
    await world.clock.advance_to(report["schedule"]["next_retry_at"])
    await engine.tick()
    # The retried creation comes before the update of the same item, never after it.
    assert [s for s in seen if s[0] == "item-002"] == [
        ("item-002", "created", 1),
        ("item-002", "created", 2),
        ("item-002", "updated", 1),
    ]
    assert await world.store.count_pending(KEY) == 0


async def test_an_event_from_memory_is_the_event_the_outbox_holds(world: World) -> None:
    at = dt.datetime(2025, 12, 31, 12, tzinfo=dt.UTC)

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        # Typed values, as a fetch built on an SDK returns them.
        return wk.Page(items=[{"id": "o1", "updated_at": at, "lines": ("a", "b")}])

    counting = CountingStore(world.store)
    engine = engine_on(world, counting, fetch=fetch)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    (event,) = recorder.events
    # Decoded from the stored text: what a redelivery after a crash would receive too.
    assert event.data == {"id": "o1", "updated_at": "2025-12-31T12:00:00Z", "lines": ["a", "b"]}
    assert counting.loads == 1


async def test_several_consumers_split_a_page_handed_over_from_memory(world: World) -> None:
    seed(world, 12)
    counting = CountingStore(world.store)
    engine = engine_on(world, counting)
    a, b = Recorder(), Recorder()
    engine.on("orders", a, consumer="a")
    engine.on("orders", b, consumer="b")
    await engine.tick()
    assert len(a.events) == 12
    assert a.ids == b.ids
    assert counting.loads == 1
    assert await world.store.count_pending(KEY) == 0
