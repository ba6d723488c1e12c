"""Event ids end to end: one id per distinct observation, the original ids in compat mode.

Each scenario runs on MemoryStore and SqliteStore, on a VirtualClock, through a snapshot
diff listing (it sees updates and deletes every cycle). The consumer drops duplicates by
``event.id``, the way docs/delivery.md tells users to, and must end with the API's state.
"""

from __future__ import annotations

from typing import Any

import watukuy as wk
from watukuy.diff import content_hash, event_id
from watukuy.model.rows import PKey

from .conftest import Recorder, World, page_fetch

SOURCE = "urn:watukuy:orders"
STAMP = "2026-01-01T00:00:00.000Z"


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    # Ids, not delete timing: a delete on the first complete pass that misses the item.
    options.setdefault("deletes", wk.Deletes(confirm_passes=1))
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=page_fetch(page_size=10),
        **options,
    )


def order(status: str) -> dict[str, Any]:
    # Fixed version and stamp: the content is the status alone, so "open" again is exactly
    # the content it had before.
    return {"id": "o1", "status": status, "version": 1, "updated_at": STAMP}


class DedupConsumer:
    """Applies each event once per id, like a table of processed ids."""

    def __init__(self) -> None:
        self.processed: set[str] = set()
        self.state: dict[str, Any] = {}
        self.dropped: list[wk.Event[Any]] = []

    def __call__(self, event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.id in self.processed:
            self.dropped.append(event)
            return
        self.processed.add(event.id)
        if event.type == "deleted":
            self.state.pop(event.subject, None)
        else:
            self.state[event.subject] = event.data


async def cycle(world: World, engine: wk.Engine) -> None:
    """One poll: the clock moves past the schedule's longest interval first."""
    await world.clock.advance("10m")
    await engine.tick()


def api_state(world: World) -> dict[str, Any]:
    return {entry["id"]: entry for entry in world.api.all()}


def set_status(world: World, status: str) -> None:
    world.api.update("o1", status=status, version=1, updated_at=STAMP)


async def run_flips(world: World, poller: wk.PollerDefinition[Any]) -> tuple[Recorder, Any]:
    engine = world.engine(poller)
    recorder, consumer = Recorder(), DedupConsumer()

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        consumer(event, ctx)
        await recorder(event, ctx)

    engine.on("orders", handler)
    world.api.add(order("open"))
    await cycle(world, engine)
    for status in ("closed", "open", "closed"):
        set_status(world, status)
        await cycle(world, engine)
    return recorder, consumer


def original_id(type_: str, item: dict[str, Any]) -> str:
    """The id the original watukuy gives: no revision part."""
    return event_id(SOURCE, "", item["id"], content_hash(item), 1, type_)


async def test_a_status_that_flips_back_gets_a_new_id_every_time(world: World) -> None:
    recorder, consumer = await run_flips(world, orders())
    assert [e.type for e in recorder.events] == ["created", "updated", "updated", "updated"]
    assert len(set(recorder.ids)) == 4
    # The first observation keeps the original id, byte for byte; later ones add revisions.
    assert recorder.ids[0] == original_id("created", order("open"))
    assert recorder.ids[3] == event_id(
        SOURCE, "", "o1", content_hash(order("closed")), 1, "updated", 3
    )
    assert consumer.dropped == []
    assert consumer.state == api_state(world)


async def test_a_deleted_and_recreated_item_gets_new_ids(world: World) -> None:
    engine = world.engine(orders())
    recorder, consumer = Recorder(), DedupConsumer()

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        consumer(event, ctx)
        await recorder(event, ctx)

    engine.on("orders", handler)
    world.api.add(order("open"))
    await cycle(world, engine)
    for _ in range(2):
        world.api.remove("o1")
        await cycle(world, engine)
        world.api.add(order("open"))
        await cycle(world, engine)
    world.api.remove("o1")
    await cycle(world, engine)
    types = [e.type for e in recorder.events]
    assert types == ["created", "deleted", "created", "deleted", "created", "deleted"]
    assert len(set(recorder.ids)) == 6
    assert recorder.ids[0] == original_id("created", order("open"))
    assert consumer.dropped == []
    assert consumer.state == api_state(world) == {}
    # The tombstone outlives the row and is what the next re-creation continues from.
    tombstones = await world.store.load_tombstones(PKey("orders"), ["o1"])
    assert tombstones["o1"].reason == "deleted"
    assert tombstones["o1"].revision == 4


async def test_compat_mode_gives_the_original_ids_for_every_event(world: World) -> None:
    recorder, consumer = await run_flips(world, orders(ids="compat"))
    expected = [
        original_id("created", order("open")),
        original_id("updated", order("closed")),
        original_id("updated", order("open")),
        original_id("updated", order("closed")),
    ]
    assert recorder.ids == expected
    assert len(set(recorder.ids)) == 3  # what the original gives: a repeated id
    assert [e.type for e in consumer.dropped] == ["updated"]

    engine = world.engine(orders(ids="compat"))
    deleted = Recorder()
    engine.on("orders", deleted)
    world.api.remove("o1")
    await cycle(world, engine)
    assert deleted.ids == [original_id("deleted", order("closed"))]


CREATED_V1 = "5dc9ec28d4ec668a7add37c6a32e916f839cd6d98ee013de30acd06b32599862"  # SPEC §3
UPDATED_V1 = "c3c9840e97dfeab6779f02557662f81cc40aeb80cf21777814cd22a67824c775"
DELETED_V1 = "1b3d0baaecf2f438942aef004455b23d2957986db507bb0f398aa52fd4ff29a7"


async def versioned_history(world: World, ids: str) -> list[str]:
    """o1 is created at v1, updated to v2, updated back to v1, then deleted."""
    poller = orders(version=lambda o: o["rev"], ids=ids)
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    world.api.add({**order("open"), "rev": "v1"})
    await cycle(world, engine)
    for status, rev in (("closed", "v2"), ("open", "v1")):
        world.api.update("o1", status=status, rev=rev, version=1, updated_at=STAMP)
        await cycle(world, engine)
    world.api.remove("o1")
    await cycle(world, engine)
    assert [e.type for e in recorder.events] == ["created", "updated", "updated", "deleted"]
    return recorder.ids


def vector(type_: str, version: str, revision: int = 0) -> str:
    return event_id(SOURCE, "", "o1", version, 1, type_, revision)


async def test_compat_mode_matches_the_vectors_for_updates_and_deletes(world: World) -> None:
    ids = await versioned_history(world, "compat")
    assert ids == [CREATED_V1, vector("updated", "v2"), UPDATED_V1, DELETED_V1]


async def test_distinct_mode_keeps_the_vector_of_the_first_event_only(world: World) -> None:
    ids = await versioned_history(world, "distinct")
    assert ids == [
        CREATED_V1,
        vector("updated", "v2", revision=1),
        vector("updated", "v1", revision=2),
        vector("deleted", "v1", revision=3),
    ]
    assert UPDATED_V1 not in ids
    assert DELETED_V1 not in ids


async def test_restarted_engines_and_a_second_world_agree_on_revised_ids(world: World) -> None:
    first, _ = await run_flips(world, orders())
    # An engine on a fresh store that sees the same observations gives the same ids.
    from watukuy.testing import FakeApi, VirtualClock

    clock = VirtualClock()
    other = World(clock=clock, api=FakeApi(clock), store=wk.MemoryStore())
    second, _ = await run_flips(other, orders())
    assert second.ids == first.ids


async def test_reset_with_clear_snapshot_repeats_ids_only_for_the_same_observation(
    world: World,
) -> None:
    engine = world.engine(orders())
    recorder, consumer = Recorder(), DedupConsumer()

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        consumer(event, ctx)
        await recorder(event, ctx)

    engine.on("orders", handler)
    world.api.add(order("open"))
    world.api.add({**order("open"), "id": "o2"})
    await cycle(world, engine)
    set_status(world, "closed")
    await cycle(world, engine)
    before = list(recorder.ids)

    await engine.reset_cursor("orders", to=None, clear_snapshot=True)
    await cycle(world, engine)
    recreated = recorder.events[len(before) :]
    assert [(e.type, e.subject) for e in recreated] == [("created", "o1"), ("created", "o2")]
    # o2 never changed: its re-creation is its first observation again, with its old id.
    assert recreated[1].id == before[1]
    # o1 was at revision 1: the re-creation of that state is new to the consumer...
    assert recreated[0].id not in before
    # ...and a second reset re-creates the very same observation, with the same ids.
    await engine.reset_cursor("orders", to=None, clear_snapshot=True)
    await cycle(world, engine)
    assert recorder.ids[-2:] == [recreated[0].id, recreated[1].id]

    # The revisions survive the resets: the next change gets an id never seen before.
    set_status(world, "open")
    await cycle(world, engine)
    set_status(world, "closed")
    await cycle(world, engine)
    assert recorder.ids[-2] not in recorder.ids[:-2]
    assert recorder.ids[-1] not in recorder.ids[:-1]
    assert consumer.state == api_state(world)


async def test_tombstones_are_pruned_after_their_retention(world: World) -> None:
    engine = world.engine(orders(ids=wk.EventIds(tombstones="1h")))
    engine.on("orders", Recorder())
    world.api.add(order("open"))
    await cycle(world, engine)
    world.api.remove("o1")
    await cycle(world, engine)
    key = PKey("orders")
    assert set(await world.store.load_tombstones(key, ["o1"])) == {"o1"}
    await world.clock.advance("2h")
    await cycle(world, engine)
    assert await world.store.load_tombstones(key, ["o1"]) == {}
