"""``event.cursor`` of a ``deleted`` event that a full listing proved names the pass that
proved it; every other event keeps ``cursor=None``."""

from __future__ import annotations

from typing import Any

import watukuy as wk
from watukuy.model.events import event_from_json, event_to_json
from watukuy.testing import SeededRandom, VirtualClock

Items = list[dict[str, Any]]


def full_listing(items: Items, **options: Any) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[dict(item) for item in items], has_more=False)

    return wk.define_poller(
        name="catalog",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=wk.Schedule(min="1m", max="1m", jitter=0),
        **options,
    )


async def run(engine: wk.Engine, clock: VirtualClock, passes: int) -> None:
    for _ in range(passes):
        await engine.tick()
        await clock.advance("1m")


async def test_a_snapshot_diff_delete_carries_the_pass_that_proved_it() -> None:
    items: Items = [{"id": "a", "v": 1}, {"id": "b", "v": 1}]
    clock = VirtualClock()
    engine = wk.Engine(
        store=wk.MemoryStore(), pollers=[full_listing(items)], clock=clock, random=SeededRandom(2)
    )
    seen: list[wk.Event[Any]] = []
    engine.on("catalog", lambda event, ctx: seen.append(event))
    await run(engine, clock, 1)  # pass 1 lists a and b
    items[0]["v"] = 2
    del items[1]
    await run(engine, clock, 3)  # passes 2 and 3 miss b: two confirming passes (the default)
    assert [(e.type, e.subject, e.cursor) for e in seen] == [
        ("created", "a", None),
        ("created", "b", None),
        ("updated", "a", None),
        ("deleted", "b", {"pass": 3}),
    ]
    deleted = seen[-1]
    assert deleted.to_dict()["cursor"] == {"pass": 3}
    assert event_from_json(event_to_json(deleted)).cursor == {"pass": 3}
    listing = (await engine.inspect())["pollers"][0]["listing"]["live"]
    assert listing["completed"] >= 3


async def test_a_redelivered_delete_keeps_its_cursor() -> None:
    items: Items = [{"id": "a"}, {"id": "b"}]
    clock = VirtualClock()
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[
            full_listing(
                items,
                deletes=wk.Deletes(confirm_passes=1),
                delivery=wk.Delivery(retry=wk.Retry(attempts=3)),
            )
        ],
        clock=clock,
        random=SeededRandom(2),
    )
    attempts: list[tuple[int, Any]] = []

    def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.type == "deleted":
            attempts.append((event.attempt, event.cursor))
            if event.attempt == 1:
                raise RuntimeError("downstream busy")

    engine.on("catalog", handler)
    await run(engine, clock, 1)
    del items[1]
    await run(engine, clock, 4)
    assert attempts == [(1, {"pass": 2}), (2, {"pass": 2})]


async def test_a_reconcile_delete_carries_its_pass_and_live_events_none() -> None:
    listed: Items = [
        {"id": "a", "at": "2026-01-01T00:00:00Z"},
        {"id": "b", "at": "2026-01-01T00:00:00Z"},
    ]

    async def live(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[], has_more=False)

    async def reconcile(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[dict(item) for item in listed], has_more=False)

    poller = wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        cursor=wk.TimestampCursor(field="at", initial="2026-01-01T00:00:00Z"),
        fetch=live,
        reconcile=wk.Reconcile(every="10m", fetch=reconcile),
        deletes=wk.Deletes(confirm_passes=1),
    )
    clock = VirtualClock()
    engine = wk.Engine(
        store=wk.MemoryStore(), pollers=[poller], clock=clock, random=SeededRandom(5)
    )
    seen: list[wk.Event[Any]] = []
    engine.on("orders", lambda event, ctx: seen.append(event))
    await engine.tick()
    del listed[1]
    for _ in range(3):
        await clock.advance("10m")
        await engine.tick()
    deletes = [e for e in seen if e.type == "deleted"]
    assert [(e.subject, e.lane) for e in deletes] == [("b", "reconcile")]
    assert isinstance(deletes[0].cursor, dict)
    assert deletes[0].cursor["pass"] >= 2
    assert all(e.cursor is None for e in seen if e.type != "deleted")
