"""Change sets and filtered consumers through the whole engine (FakeApi, Memory/SqliteStore)."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

import watukuy as wk
from watukuy.model.events import event_from_json, event_to_json
from watukuy.model.rows import PKey
from watukuy.runtime.hooks import FilteredDetails

from .conftest import Recorder, World, item, page_fetch

T = "2025-12-31T12:00:00.000Z"
KEY = PKey("orders")


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("retain", "payload")
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=page_fetch(page_size=5),
        deletes=wk.Deletes(confirm_passes=1),
        **options,
    )


async def _sync(world: World, engine: wk.Engine, changes: int = 1) -> None:
    await engine.tick()
    for _ in range(changes):
        await world.clock.advance("10m")
        await engine.tick()


async def test_updated_events_carry_a_patch_and_sorted_changed_paths(world: World) -> None:
    world.api.add(item(1, T, lines=[{"id": "a", "qty": 1}, {"id": "b", "qty": 2}]))
    engine = world.engine(orders())
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    world.api.update("item-001", status="paid", lines=[{"id": "b", "qty": 5}])
    await world.clock.advance("10m")
    await engine.tick()
    world.api.remove("item-001")
    await world.clock.advance("10m")
    await engine.tick()

    created, updated, deleted = recorder.events
    assert (created.type, created.changes, created.changed_paths) == ("created", None, None)
    assert updated.type == "updated"
    assert updated.changes == [
        {"op": "remove", "path": "/lines/0"},
        {"op": "replace", "path": "/lines/0/qty", "value": 5},
        {"op": "replace", "path": "/status", "value": "paid"},
        {"op": "replace", "path": "/updated_at", "value": updated.data["updated_at"]},
        {"op": "replace", "path": "/version", "value": 2},
    ]
    assert updated.changed_paths == (
        "/lines/0",
        "/lines/0/qty",
        "/status",
        "/updated_at",
        "/version",
    )
    assert wk.apply_patch(updated.previous, updated.changes) == updated.data
    assert deleted.type == "deleted"
    assert deleted.changes is None
    assert deleted.data == updated.data  # the last known data


async def test_with_a_fingerprint_fields_outside_it_never_show_up(world: World) -> None:
    world.api.add(item(1, T, total=10))
    poller = orders(fingerprint=lambda o: {"status": o["status"], "total": o["total"]})
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    world.api.update("item-001", status="paid")  # also moves updated_at and version
    await world.clock.advance("10m")
    await engine.tick()
    assert recorder.events[-1].changes == [{"op": "replace", "path": "/status", "value": "paid"}]


async def test_retain_hash_carries_no_patch(world: World) -> None:
    world.api.add(item(1, T))
    engine = world.engine(orders(retain="hash"))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    world.api.update("item-001", status="paid")
    await world.clock.advance("10m")
    await engine.tick()
    assert [(e.type, e.changes, e.changed_paths) for e in recorder.events] == [
        ("created", None, None),
        ("updated", None, None),
    ]


async def test_a_schema_and_array_key_none_diff_arrays_by_position(world: World) -> None:
    world.api.add(item(1, T, lines=[{"id": "a", "qty": 1}, {"id": "b", "qty": 2}]))
    engine = world.engine(orders(array_key=None, fingerprint=lambda o: {"lines": o["lines"]}))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    world.api.update("item-001", lines=[{"id": "b", "qty": 2}])
    await world.clock.advance("10m")
    await engine.tick()
    assert recorder.events[-1].changes == [
        {"op": "replace", "path": "/lines/0/id", "value": "b"},
        {"op": "replace", "path": "/lines/0/qty", "value": 2},
        {"op": "remove", "path": "/lines/1"},
    ]


async def test_events_stored_without_changes_still_load() -> None:
    old = (
        '{"id":"e1","type":"updated","source":"urn:watukuy:orders","subject":"o1",'
        '"time":"1970-01-01T00:00:00.000Z","poller":"orders","partition":"","lane":"live",'
        '"sequence":1,"cursor":null,"data":{"a":2},"previous":{"a":1},"attempt":1}'
    )
    event = event_from_json(old)
    assert event.changes is None
    patched = event_from_json(event_to_json(wk.Event(**{**_fields(event), "changes": []})))
    assert patched.changes == []
    assert "changes" not in event_to_json(event)


def _fields(event: wk.Event[Any]) -> dict[str, Any]:
    return {name: getattr(event, name) for name in wk.Event.__dataclass_fields__}


# --- filters --------------------------------------------------------------------------------


@dataclass
class FilteredLog:
    seen: list[FilteredDetails]

    def on_filtered(self, details: FilteredDetails) -> None:
        self.seen.append(details)


async def _three_orders(world: World, when: Any, **poller: Any) -> Recorder:
    """item-001 pending -> paid, item-002 pending -> shipped (lines change), item-003
    deleted, item-004 created later; returns what the filtered handler saw."""
    world.api.add(item(1, T, status="pending", lines=[{"id": "a", "qty": 1}]))
    world.api.add(item(2, T, status="pending", lines=[{"id": "a", "qty": 1}]))
    world.api.add(item(3, T, status="pending"))
    engine = world.engine(orders(**poller))
    recorder = Recorder()
    engine.on("orders", recorder, when=when)
    await engine.tick()
    world.api.update("item-001", status="paid")
    world.api.update("item-002", status="shipped", lines=[{"id": "a", "qty": 3}])
    world.api.remove("item-003")
    world.api.add(item(4, T, status="pending"))
    await world.clock.advance("10m")
    await engine.tick()
    assert await engine.store.count_pending(KEY) == 0  # filtered ones are acked too
    return recorder


def _seen(recorder: Recorder) -> list[tuple[str, str]]:
    return [(event.type, event.subject) for event in recorder.events]


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (wk.changed("status"), [("updated", "item-001"), ("updated", "item-002")]),
        (wk.changed("status", to="paid"), [("updated", "item-001")]),
        (wk.changed("/status", from_="pending", to="shipped"), [("updated", "item-002")]),
        (wk.changed("/lines/*/qty"), [("updated", "item-002")]),
        (wk.changed("/lines/*/qty", to=3), [("updated", "item-002")]),
        (wk.changed("/lines/*/qty", to=4), []),
        (wk.changed("/lines/*/id"), []),
        (
            wk.created() | wk.deleted(),
            [("created", f"item-00{n}") for n in (1, 2, 3)]
            + [("created", "item-004"), ("deleted", "item-003")],
        ),
        (wk.changed("status") & ~wk.changed("lines"), [("updated", "item-001")]),
        (wk.updated() & ~wk.changed("status", to="paid"), [("updated", "item-002")]),
        (
            wk.changed("status", to="paid") | (lambda event: event.subject == "item-003"),
            [("created", "item-003"), ("updated", "item-001"), ("deleted", "item-003")],
        ),
        (
            (lambda event: event.type == "updated") & wk.changed("lines"),
            [("updated", "item-002")],
        ),
        (lambda event: event.type == "deleted", [("deleted", "item-003")]),
    ],
    ids=repr,
)
async def test_every_combinator_on_a_handler(
    world: World, when: Any, expected: list[tuple[str, str]]
) -> None:
    recorder = await _three_orders(world, when)
    assert sorted(_seen(recorder)) == sorted(expected)


async def test_filtered_events_are_acked_counted_and_hooked(world: World) -> None:
    log = FilteredLog([])
    world.api.add(item(1, T, status="pending"))
    world.api.add(item(2, T, status="pending"))
    engine = world.engine(orders(), hooks=[log])
    recorder = Recorder()
    engine.on("orders", recorder, when=wk.changed("status", to="paid"))
    await engine.tick()
    world.api.update("item-001", status="paid")
    world.api.update("item-002", status="lost")
    await world.clock.advance("10m")
    result = await engine.tick()
    assert _seen(recorder) == [("updated", "item-001")]
    report = await engine.inspect()
    assert report["pollers"][0]["filtered"] == 3  # two created, one updated to "lost"
    assert [(d.event.type, d.event.subject) for d in log.seen] == [
        ("created", "item-001"),
        ("created", "item-002"),
        ("updated", "item-002"),
    ]
    assert await engine.store.count_pending(KEY) == 0
    assert result.polled[0].error is None


async def test_a_filtered_out_event_never_blocks_its_key(world: World) -> None:
    world.api.add(item(1, T, status="pending"))
    engine = world.engine(orders())
    recorder = Recorder()
    engine.on("orders", recorder, when=wk.changed("status", to="paid"))
    await engine.tick()
    for status in ("packed", "weighed", "paid"):
        world.api.update("item-001", status=status)
        await world.clock.advance("10m")
        await engine.tick()
    assert [(e.type, e.data["status"]) for e in recorder.events] == [("updated", "paid")]


async def test_a_filter_that_raises_fails_the_delivery_like_a_handler(world: World) -> None:
    world.api.add(item(1, T))

    def broken(event: wk.Event[Any]) -> bool:
        raise RuntimeError("filter bug")

    engine = world.engine(orders(delivery=wk.Delivery(retry=wk.Retry(attempts=1))))
    recorder = Recorder()
    engine.on("orders", recorder, when=broken)
    await engine.tick()
    parked = await engine.parked.list("orders")
    assert [row.kind for row in parked] == ["poison"]
    assert "filter bug" in parked[0].error["message"]
    assert recorder.events == []


async def test_filters_on_a_subscription(world: World) -> None:
    world.api.add(item(1, T, status="pending"))
    world.api.add(item(2, T, status="pending"))
    engine = world.engine(orders())
    subscription = engine.subscribe("orders", when=wk.changed("status", to="paid"))
    await engine.tick()
    world.api.update("item-001", status="paid")
    world.api.update("item-002", status="lost")
    await world.clock.advance("10m")
    got: list[wk.Event[Any]] = []

    async def consume() -> None:
        async for event in subscription:
            got.append(event)
            subscription.close(ack_current=True)

    consumer = asyncio.ensure_future(consume())
    await engine.tick()
    await consumer
    assert [(e.type, e.subject, e.data["status"]) for e in got] == [("updated", "item-001", "paid")]
    assert (await engine.inspect())["pollers"][0]["filtered"] == 3


@pytest.mark.parametrize(
    "when",
    [wk.changed("status"), wk.created() | wk.changed("status"), ~wk.changed("/lines/*/qty")],
    ids=repr,
)
def test_filters_that_need_previous_are_refused_on_retain_hash(world: World, when: Any) -> None:
    engine = world.engine(orders(retain="hash"))
    with pytest.raises(wk.ConfigError, match='retain="payload"') as raised:
        engine.on("orders", Recorder(), when=when)
    assert raised.value.field == "when"
    with pytest.raises(wk.ConfigError, match='retain="payload"'):
        engine.subscribe("orders", when=when)


def test_type_filters_and_plain_predicates_are_fine_on_retain_hash(world: World) -> None:
    engine = world.engine(orders(retain="hash"))
    engine.on("orders", Recorder(), when=wk.created() | wk.deleted())
    engine.off("orders")
    engine.on("orders", Recorder(), when=lambda event: event.type == "updated")
    engine.off("orders")
    with pytest.raises(wk.ConfigError, match="callable"):
        engine.on("orders", Recorder(), when=42)  # type: ignore[arg-type]


class Line(BaseModel):
    id: str
    qty: int


class Order(BaseModel):
    id: str
    status: str
    updated_at: dt.datetime
    lines: list[Line] = []


async def test_typed_items_get_patches_and_filters_over_their_json_form(world: World) -> None:
    world.api.add(item(1, T, status="pending", lines=[{"id": "a", "qty": 1}]))
    poller = wk.define_poller(
        name="orders",
        schema=Order,
        identity=lambda o: o.id,
        cursor=wk.SnapshotDiff(),
        fetch=page_fetch(page_size=5),
        retain="payload",
    )
    engine = world.engine(poller)
    seen: list[wk.Event[Order]] = []

    async def handler(event: wk.Event[Order], ctx: wk.HandlerContext) -> None:
        seen.append(event)

    engine.on(poller, handler, when=wk.changed("status", to="paid") | wk.changed("/lines/*/qty"))
    await engine.tick()
    world.api.update("item-001", status="paid")
    await world.clock.advance("10m")
    await engine.tick()
    world.api.update("item-001", lines=[{"id": "a", "qty": 4}])
    await world.clock.advance("10m")
    await engine.tick()
    first, second = seen
    assert isinstance(first.data, Order)
    assert first.changed_paths == ("/status", "/updated_at")
    assert second.changed_paths == ("/lines/0/qty", "/updated_at")
    assert first.previous is not None
    assert first.data is not None
    assert wk.apply_patch(
        first.previous.model_dump(mode="json"), first.changes or []
    ) == first.data.model_dump(mode="json")
