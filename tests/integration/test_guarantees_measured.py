"""G2, G3 and G10 checked against something the engine did not compute itself.

- G2: ids of first observations (and of a revision) against the SPEC §3 formula, worked
  out with hashlib over the items the API served, in two worlds whose clocks differ.
- G3: a retry waiting out its backoff while later events of its key are committed, with
  ``concurrency=32``.
- G10: the largest batch the dispatcher and the lane ask the store for, and receive, as a
  wrapper around the store records it.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

import watukuy as wk
from watukuy.model.rows import ItemRow, OutboxRow, PKey
from watukuy.testing import FakeApi, VirtualClock
from watukuy.testing.faulty import ForwardingStore

from .conftest import Recorder, World, item, page_fetch, timestamp_fetch

KEY = PKey("orders")


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("fetch", timestamp_fetch(limit=10))
    options.setdefault("cursor", wk.TimestampCursor(field="updated_at", tie_break="id"))
    return wk.define_poller(
        name="orders", identity=lambda o: o["id"], version=lambda o: o["version"], **options
    )


def spec_id(
    identity: str, version: str, type_: str, *, partition: str = "", revision: int = 0
) -> str:
    """SPEC §3, written out: no watukuy code is involved. From an item's second event on,
    its revision is a ninth part (docs/guarantees.md, G2)."""
    parts = ["urn:watukuy:orders", partition, identity, version, "1", type_]
    if revision:
        parts.append(str(revision))
    escaped = [part.replace("\\", "\\\\").replace("|", "\\|") for part in parts]
    return hashlib.sha256(("watukuy|v1|" + "|".join(escaped)).encode()).hexdigest()


def test_the_formula_here_gives_the_spec_vector() -> None:
    assert spec_id("o1", "v1", "created") == (
        "5dc9ec28d4ec668a7add37c6a32e916f839cd6d98ee013de30acd06b32599862"
    )


async def _first_observations(start: int, delay: str) -> tuple[list[wk.Event[Any]], list[str]]:
    clock = VirtualClock(start=start)
    world = World(clock=clock, api=FakeApi(clock), store=wk.MemoryStore())
    for i in range(1, 13):
        world.api.add(item(i, f"2025-12-31T00:00:{i:02d}.000Z"))
    world.api.add({"id": "odd|one\\x", "updated_at": "2025-12-31T00:00:30.000Z", "version": 3})
    await clock.advance(delay)
    engine = world.engine(orders(), instance_id=f"at-{start}")
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    expected = [spec_id(e.subject, str(e.data["version"]), e.type) for e in recorder.events]
    # A second poll, at a different instant in each world, sees a revision of one item.
    world.api.update("item-004", status="paid", version=2, updated_at="2025-12-31T00:01:00Z")
    await clock.advance(delay)
    await engine.tick()
    await engine.stop()
    return recorder.events, expected


async def test_g2_first_observations_have_the_spec_ids_whatever_the_clock_says() -> None:
    early, early_expected = await _first_observations(1_767_225_600_000, "10m")
    late, late_expected = await _first_observations(1_767_225_600_000 + 5 * 3_600_000, "93m")
    created = [event for event in early if event.type == "created"]
    assert len(created) == 13
    assert [event.id for event in created] == early_expected[:13]
    assert [event.id for event in late if event.type == "created"] == late_expected[:13]
    # The revision: both worlds observed the same thing, so they agree on its id, and it is
    # none of the first observations' ids.
    revisions = [[e.id for e in events if e.type == "updated"] for events in (early, late)]
    assert revisions[0] == revisions[1] == [spec_id("item-004", "2", "updated", revision=1)]
    assert revisions[0][0] not in early_expected[:13]
    assert {event.time for event in early} != {event.time for event in late}


async def test_g3_a_retry_in_backoff_holds_later_events_of_its_key(world: World) -> None:
    for i in range(1, 41):
        world.api.add(item(i, f"2025-12-31T00:00:{i:02d}.000Z"))
    poller = orders(
        fetch=timestamp_fetch(limit=100),
        schedule=wk.Schedule(min="1s", max="1m"),
        delivery=wk.Delivery(
            concurrency=32,
            retry=wk.Retry(attempts=5, backoff=wk.Backoff(base="10m", factor=1, max="10m")),
        ),
    )
    engine = world.engine(poller)
    failures = {"item-007": 1}

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        await asyncio.sleep(0)  # a handler that waits lets the other workers start
        if failures.get(event.subject, 0) > 0:
            failures[event.subject] -= 1
            raise RuntimeError(f"first attempt of {event.subject} fails")
        recorder.events.append(event)

    recorder = Recorder()
    engine.on("orders", handler)
    await engine.tick()
    assert len(recorder.events) == 39
    [waiting] = await world.store.load_pending(KEY, 10)
    assert waiting.attempts == 1
    assert waiting.next_attempt_at is not None
    retry_in = waiting.next_attempt_at - world.clock.now()
    assert retry_in > 10_000, "the seeded backoff must leave time for later polls"

    # Later events of the held key (and of others) arrive while the retry waits.
    for version in (2, 3):
        world.api.update(
            "item-007", version=version, updated_at=f"2025-12-31T00:0{version}:00.000Z"
        )
        world.api.update(
            "item-008", version=version, updated_at=f"2025-12-31T00:0{version}:00.000Z"
        )
        await world.clock.advance("2s")
        await engine.tick()
    assert await world.store.count_pending(KEY) == 3
    assert recorder.by_subject("item-007") == []
    assert recorder.by_subject("item-008") == ["created", "updated", "updated"]

    await world.clock.advance(retry_in)
    await engine.tick()
    sevens = [e for e in recorder.events if e.subject == "item-007"]
    assert [(e.type, e.data["version"]) for e in sevens] == [
        ("created", 1),
        ("updated", 2),
        ("updated", 3),
    ]
    assert [e.sequence for e in sevens] == sorted(e.sequence for e in sevens)
    assert await world.store.count_pending(KEY) == 0
    await engine.stop()


async def test_g3_a_failed_attempt_holds_the_pending_events_of_its_key(world: World) -> None:
    for i in range(1, 11):
        world.api.add(item(i, f"2025-12-31T00:00:{i:02d}.000Z"))
    poller = orders(
        schedule=wk.Schedule(min="1s", max="1m"),
        delivery=wk.Delivery(concurrency=32, retry=wk.Retry(attempts=5)),
    )
    engine = world.engine(poller)
    # Nobody listens yet: the created and both updates of item-003 wait in one outbox.
    await engine.tick()
    for version in (2, 3):
        world.api.update(
            "item-003", version=version, updated_at=f"2025-12-31T00:0{version}:00.000Z"
        )
        await world.clock.advance("2s")
        await engine.tick()
    assert await world.store.count_pending(KEY) == 12
    failures = {"item-003": 1}

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        await asyncio.sleep(0)
        if failures.get(event.subject, 0) > 0:
            failures[event.subject] -= 1
            raise RuntimeError(f"first attempt of {event.subject} fails")
        recorder.events.append(event)

    recorder = Recorder()
    engine.on("orders", handler)
    await world.clock.advance("2s")
    await engine.tick()
    assert len(recorder.events) == 9
    assert recorder.by_subject("item-003") == []
    assert await world.store.count_pending(KEY) == 3
    await world.clock.advance("1h")
    await engine.tick()
    assert [(e.type, e.data["version"]) for e in recorder.events if e.subject == "item-003"] == [
        ("created", 1),
        ("updated", 2),
        ("updated", 3),
    ]
    await engine.stop()


class MeasuringStore(ForwardingStore):
    """Records the largest batch asked for and handed over, per operation."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.asked: dict[str, int] = {}
        self.given: dict[str, int] = {}

    def _note(self, operation: str, asked: int, given: int) -> None:
        self.asked[operation] = max(self.asked.get(operation, 0), asked)
        self.given[operation] = max(self.given.get(operation, 0), given)

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        rows = await super().load_pending(key, limit, after_sequence)
        self._note("load_pending", limit, len(rows))
        return rows

    async def load_versions(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemRow]:
        rows = await super().load_versions(key, identities)
        self._note("load_versions", len(identities), len(rows))
        return rows

    async def stream_identities(
        self, key: PKey, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        async for chunk in super().stream_identities(key, batch_size):
            self._note("stream_identities", batch_size, len(chunk))
            yield chunk

    async def stream_unseen(
        self, key: PKey, before: int, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        async for chunk in super().stream_unseen(key, before, batch_size):
            self._note("stream_unseen", batch_size, len(chunk))
            yield chunk


async def test_g10_the_dispatcher_holds_one_batch_of_the_outbox(world: World) -> None:
    for i in range(1, 96):
        world.api.add(item(i, f"2025-12-31T00:{i // 60:02d}:{i % 60:02d}.000Z"))
    measuring = MeasuringStore(world.store)
    engine = wk.Engine(
        store=measuring,
        pollers=[orders(fetch=timestamp_fetch(limit=200))],
        clock=world.clock,
        random=wk.SystemRandom(3),
        http_client=httpx.AsyncClient(transport=world.api.transport()),
        dispatch_batch_size=10,
    )
    recorder = Recorder()
    # Nobody listens during the poll: all 95 events wait in the outbox.
    await engine.tick()
    assert await world.store.count_pending(KEY) == 95
    engine.on("orders", recorder)
    await world.clock.advance("1h")
    await engine.tick()
    assert len(recorder.events) == 95
    assert measuring.asked["load_pending"] == 10
    assert measuring.given["load_pending"] == 10
    await engine.stop()


async def test_g10_a_full_listing_streams_stored_identities_in_batches(world: World) -> None:
    for i in range(1, 2501):
        world.api.add(item(i, "2025-12-31T00:00:00.000Z"))
    measuring = MeasuringStore(world.store)
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        version=lambda o: o["version"],
        cursor=wk.SnapshotDiff(),
        fetch=page_fetch(page_size=500),
        max_pages_per_cycle=10,
    )
    engine = wk.Engine(
        store=measuring,
        pollers=[poller],
        clock=world.clock,
        random=wk.SystemRandom(3),
        http_client=httpx.AsyncClient(transport=world.api.transport()),
    )
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    assert len(recorder.events) == 2500
    for n in (5, 1500, 2222):
        world.api.remove(f"item-{n:03d}" if n < 1000 else f"item-{n}")
    for _ in range(2):  # deletes need two complete passes in a row that missed them
        await world.clock.advance("1h")
        await engine.tick()
    assert sorted(e.subject for e in recorder.events if e.type == "deleted") == [
        "item-005",
        "item-1500",
        "item-2222",
    ]
    # The rows a pass did not see are read back in batches; what it saw is in the store.
    assert measuring.asked["stream_unseen"] == 1000
    assert 0 < measuring.given["stream_unseen"] <= 1000
    assert measuring.asked["load_versions"] <= 1000
    await engine.stop()
