"""Cursors, full scans, reconcile, backfill and partitions through the whole engine."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.model.events import iso_time
from watukuy.model.rows import PKey

from .conftest import Recorder, World, item, page_fetch, timestamp_fetch

T = "2025-12-31T12:00:00.000Z"


async def test_fifty_items_tied_on_one_timestamp_across_page_boundaries(world: World) -> None:
    for i in range(1, 51):
        world.api.add(item(i, T))
    world.api.add(item(51, "2025-12-31T12:00:01.000Z"))
    poller = wk.define_poller(
        name="ties",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(limit=20),
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("ties", recorder)
    first = await engine.tick()
    assert [e.subject for e in recorder.events] == [f"item-{i:03d}" for i in range(1, 52)]
    assert first.polled[0].items == 51
    await world.clock.advance("10m")
    second = await engine.tick()
    assert second.polled[0].events == 0
    assert len(recorder.events) == 51


async def test_lag_and_the_default_lookback_catch_a_late_commit_a_plain_watermark_misses(
    world: World,
) -> None:
    now = world.clock.now()
    world.api.add(item(1, iso_time(now - 100_000)))
    world.api.add(item(2, iso_time(now - 5_000)))

    def poller(name: str, lag: str, overlap: str | None) -> wk.PollerDefinition[Any]:
        return wk.define_poller(
            name=name,
            identity=lambda o: o["id"],
            cursor=wk.TimestampCursor(field="updated_at", tie_break="id", lag=lag, overlap=overlap),
            fetch=timestamp_fetch(limit=50),
        )

    engine = world.engine(
        poller("lagged", "30s", "0s"), poller("plain", "0s", "0s"), poller("default", "0s", None)
    )
    lagged, plain, default = Recorder(), Recorder(), Recorder()
    engine.on("lagged", lagged)
    engine.on("plain", plain)
    engine.on("default", default)
    await engine.tick()
    assert [e.subject for e in lagged.events] == ["item-001"]  # item-002 is within the lag
    assert [e.subject for e in plain.events] == ["item-001", "item-002"]
    assert [e.subject for e in default.events] == ["item-001", "item-002"]  # no delay

    # A transaction stamped 8 s ago commits only now: it is older than item-002.
    world.api.add(item(3, iso_time(now - 8_000)))
    await world.clock.advance("60s")
    await engine.tick()
    assert sorted(e.subject for e in lagged.events) == ["item-001", "item-002", "item-003"]
    assert [e.subject for e in plain.events] == ["item-001", "item-002"]  # missed for good
    # The default lookback re-read what the first cycle passed: 3 s behind the watermark.
    assert [e.subject for e in default.events] == ["item-001", "item-002", "item-003"]


def catalog(**options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("fetch", page_fetch(page_size=5))
    return wk.define_poller(
        name="catalog",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        retain="payload",
        **options,
    )


async def test_snapshot_diff_emits_deletes_after_two_complete_listings(world: World) -> None:
    for i in range(1, 13):
        world.api.add(item(i, T))
    engine = world.engine(catalog())
    recorder = Recorder()
    engine.on("catalog", recorder)
    await engine.tick()
    assert len(recorder.events) == 12

    world.api.remove("item-004")
    world.api.remove("item-011")
    world.api.update("item-002", status="paid")
    await world.clock.advance("10m")
    await engine.tick()  # the first complete pass to miss them: not yet
    assert [(e.type, e.subject) for e in recorder.events[12:]] == [("updated", "item-002")]
    await world.clock.advance("10m")
    result = await engine.tick()  # the second one in a row: deleted
    new = recorder.events[13:]
    assert [(e.type, e.subject) for e in new] == [
        ("deleted", "item-004"),
        ("deleted", "item-011"),
    ]
    deleted = new[0]
    assert deleted.data == {**item(4, T)}  # retain="payload": the last known item
    assert result.polled[0].events == 2
    assert await world.store.count_items(PKey("catalog")) == 10


async def test_one_confirming_pass_deletes_on_the_first_miss(world: World) -> None:
    for i in range(1, 13):
        world.api.add(item(i, T))
    engine = world.engine(catalog(deletes=wk.Deletes(confirm_passes=1)))
    recorder = Recorder()
    engine.on("catalog", recorder)
    await engine.tick()
    world.api.remove("item-004")
    await world.clock.advance("10m")
    await engine.tick()
    assert [(e.type, e.subject) for e in recorder.events[12:]] == [("deleted", "item-004")]


async def test_a_truncated_listing_resumes_and_deletes_only_after_whole_passes(
    world: World,
) -> None:
    for i in range(1, 13):
        world.api.add(item(i, T))
    engine = world.engine(catalog(max_pages_per_cycle=2))  # 12 items = 3 pages of 5
    recorder = Recorder()
    engine.on("catalog", recorder)
    await engine.tick(catch_up=False)
    assert len(recorder.events) == 10
    world.api.remove("item-001")
    await world.clock.advance("10m")
    # The pass resumes at page 3, which the removal shifted: item-011 moved to page 2 and
    # this pass misses it, item-012 is new. Nothing is deleted from a first pass.
    await engine.tick(catch_up=False)
    assert [(e.type, e.subject) for e in recorder.events[10:]] == [("created", "item-012")]
    for _ in range(4):  # two more passes of two cycles: item-011 found, item-001 confirmed
        await world.clock.advance("10m")
        await engine.tick(catch_up=False)
    assert [(e.type, e.subject) for e in recorder.events[11:]] == [
        ("created", "item-011"),
        ("deleted", "item-001"),
    ]
    assert await world.store.count_items(PKey("catalog")) == 11


async def test_a_304_is_never_an_empty_listing(world: World) -> None:
    for i in range(1, 4):
        world.api.add(item(i, T))
    world.api.set_etags(True)
    engine = world.engine(catalog(schedule=wk.Schedule(min="10s", max="10m", jitter=0)))
    recorder = Recorder()
    engine.on("catalog", recorder)
    await engine.tick()
    assert len(recorder.events) == 3
    before = (await engine.inspect())["pollers"][0]["schedule"]["interval_ms"]
    await world.clock.advance("10m")
    result = await engine.tick()  # every page answers 304 Not Modified
    assert result.polled[0].items == 0
    assert len(recorder.events) == 3  # no deletes
    report = (await engine.inspect())["pollers"][0]
    assert report["last_poll"]["not_modified"] is True
    assert report["schedule"]["interval_ms"] == before * 3 // 2
    assert report["items"] == 3


async def test_reconcile_emits_deletes_for_a_timestamp_poller(world: World) -> None:
    for i in range(1, 8):
        world.api.add(item(i, T))
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(limit=50),
        reconcile=wk.Reconcile(every="6h", fetch=page_fetch(page_size=3)),
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    first = await engine.tick()
    assert [r.lane for r in first.polled] == ["live", "reconcile"]
    assert len(recorder.events) == 7  # reconcile found nothing new
    world.api.remove("item-005")
    await world.clock.advance("1h")
    second = await engine.tick()
    assert [r.lane for r in second.polled] == ["live"]  # reconcile not due yet
    await world.clock.advance("5h")
    third = await engine.tick()
    assert [r.lane for r in third.polled] == ["live", "reconcile"]
    assert recorder.events[7:] == []  # the first complete pass to miss it
    await world.clock.advance("6h")
    await engine.tick()
    assert [(e.type, e.subject, e.lane) for e in recorder.events[7:]] == [
        ("deleted", "item-005", "reconcile")
    ]


async def test_backfill_skips_known_versions_unless_forced(world: World) -> None:
    for i in range(1, 6):
        world.api.add(item(i, f"2025-12-31T12:00:0{i}.000Z"))
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        version=lambda o: o["version"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(limit=2),
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    assert len(recorder.events) == 5

    await engine.backfill("orders", from_=None)
    result = await engine.tick()
    assert [r.lane for r in result.polled] == ["backfill"]
    assert len(recorder.events) == 5  # every item known at the same version
    assert (await engine.inspect())["pollers"][0]["cursors"].get("backfill") is None

    await engine.backfill("orders", from_=None, to="2025-12-31T12:00:03.000Z", force=True)
    await engine.tick()
    forced = recorder.events[5:]
    # The lane stops at the first page whose cursor reaches the target (pages of 2).
    assert [(e.type, e.subject, e.lane) for e in forced] == [
        ("updated", f"item-{i:03d}", "backfill") for i in range(1, 5)
    ]


async def test_two_hundred_partitions_keep_circuits_and_outboxes_apart(world: World) -> None:
    tenants = [f"t{n:03d}" for n in range(200)]
    for tenant in tenants:
        world.api.tenant(tenant).add(item(1, T))
        world.api.tenant(tenant).add(item(2, T))
    poller = wk.define_poller(
        name="invoices",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(limit=10),
        partitions=lambda: tenants,
        circuit=wk.Circuit(failures=1),
        delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
    )
    engine = world.engine(poller, tick_concurrency=8)
    recorder = Recorder(fail=lambda event: event.partition == "t007")
    engine.on("invoices", recorder)
    world.api.fail_next(500, path="/t/t042/items")
    result = await engine.tick()
    assert len(result.polled) == 200
    assert [r.partition for r in result.errors] == ["t042"]
    assert len(recorder.events) == 2 * 198
    report = {p["partition"]: p for p in (await engine.inspect())["pollers"]}
    assert len(report) == 200
    assert report["t042"]["schedule"]["circuit"] == "open"
    assert {p["schedule"]["circuit"] for k, p in report.items() if k != "t042"} == {"closed"}
    assert report["t007"]["parked"] == 2
    assert sum(p["parked"] for p in report.values()) == 2
    assert sum(p["outbox_pending"] for p in report.values()) == 0


async def test_partitioned_operations_require_a_partition(world: World) -> None:
    poller = wk.define_poller(
        name="invoices",
        identity=lambda o: o["id"],
        cursor=wk.TokenCursor(),
        fetch=timestamp_fetch(),
        partitions=lambda: ["a"],
    )
    engine = world.engine(poller)
    for operation in (engine.trigger, engine.pause, engine.resume):
        with pytest.raises(wk.ConfigError, match="is partitioned") as caught:
            await operation("invoices")
        assert caught.value.field == "partition"


async def test_removed_partitions_are_paused_not_deleted(world: World) -> None:
    tenants = ["a", "b"]
    for tenant in tenants:
        world.api.tenant(tenant).add(item(1, T))
    poller = wk.define_poller(
        name="inv",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(),
        partitions=lambda: list(tenants),
        partitions_refresh="1m",
    )
    engine = world.engine(poller)
    engine.on("inv", Recorder())
    await engine.tick()
    tenants.remove("b")
    await world.clock.advance("2m")
    await engine.tick()
    state = await world.store.load_state(PKey("inv", "b"))
    assert state is not None
    assert state.paused is True
    assert await world.store.count_items(PKey("inv", "b")) == 1
    assert [p["partition"] for p in (await engine.inspect())["pollers"]] == ["a"]


async def test_a_refresh_sees_a_list_changed_in_place_and_new_partition_data(
    world: World,
) -> None:
    tenants = [wk.Partition("a", data={"token": 1}), wk.Partition("b", data={"token": 1})]
    for tenant in tenants:
        world.api.tenant(tenant.key).add(item(1, T))
    inner = timestamp_fetch()
    seen: list[tuple[str, int]] = []

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        seen.append((ctx.partition.key, ctx.partition.data["token"]))
        page: wk.Page[Any] = await inner(ctx)
        return page

    poller: wk.PollerDefinition[Any] = wk.define_poller(
        name="inv",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch,
        partitions=lambda: tenants,  # the same list object every time
        partitions_refresh="1m",
        schedule=wk.Schedule(min="1m", max="1m", jitter=0),
    )
    engine = world.engine(poller)
    engine.on("inv", Recorder())
    await engine.tick()
    assert sorted(seen) == [("a", 1), ("b", 1)]
    tenants.pop()  # "b" leaves, in place
    seen.clear()
    await world.clock.advance("2m")
    await engine.tick()
    assert seen == [("a", 1)]
    state = await world.store.load_state(PKey("inv", "b"))
    assert state is not None
    assert state.paused is True
    tenants[0] = wk.Partition("a", data={"token": 2})  # same key, new credentials
    seen.clear()
    await world.clock.advance("2m")
    await engine.tick()
    assert seen == [("a", 2)]


class CountingStore:
    """Counts load_state calls on the way through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.loads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def capabilities(self) -> Any:
        return self._inner.capabilities

    async def load_state(self, key: PKey) -> Any:
        self.loads += 1
        return await self._inner.load_state(key)


def tenants_poller(world: World, count: int, schedule: wk.Schedule) -> wk.PollerDefinition[Any]:
    """Poller ``inv`` over ``count`` tenants ``t00``, ``t01``..., each with one item."""
    tenants = [f"t{n:02d}" for n in range(count)]
    for tenant in tenants:
        world.api.tenant(tenant).add(item(1, T))
    return wk.define_poller(
        name="inv",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(),
        partitions=lambda: tenants,
        schedule=schedule,
    )


async def test_a_warm_tick_visits_only_due_keys(world: World) -> None:
    poller = tenants_poller(world, 50, wk.Schedule(min="1m", max="1h", jitter=0))
    counting = CountingStore(world.store)
    engine = World(clock=world.clock, api=world.api, store=counting).engine(poller)  # type: ignore[arg-type]
    engine.on("inv", Recorder())
    first = await engine.tick()
    assert len(first.polled) == 50
    counting.loads = 0
    await world.clock.advance("10s")
    idle = await engine.tick()
    assert (idle.polled, idle.skipped_not_due) == ([], 50)
    assert counting.loads == 0  # the due index answered: no key was read

    # Another process (the CLI, say) triggers one key: the due index shows it.
    other = world.engine(poller, instance_id="cli")
    await other.trigger("inv", partition="t07")
    visited = await engine.tick()
    assert [(r.partition, r.lane) for r in visited.polled] == [("t07", "live")]
    assert counting.loads == 2  # the run's check and its re-read under the lease


async def test_the_daemon_reads_the_due_index_and_audits_a_few_keys_per_resync(
    world: World,
) -> None:
    poller = tenants_poller(world, 40, wk.Schedule(min="1h", max="2h", jitter=0))
    counting = CountingStore(world.store)
    engine = World(clock=world.clock, api=world.api, store=counting).engine(  # type: ignore[arg-type]
        poller, resync_every="15s"
    )
    recorder = Recorder()
    engine.on("inv", recorder)
    await engine.start()
    try:
        await world.clock.advance("1s")
        assert len(recorder.events) == 40
        # An index entry left stale (as a crash between two Redis Cluster writes could):
        # the key is due by its schedule, but its wake_at says "in a day".
        key = PKey("inv", "t33")
        state = await world.store.load_state(key)
        assert state is not None
        now = world.clock.now()
        due_now = state.schedule.__class__(next_due_at=now)
        await world.store.save_state_unfenced(
            key, {"schedule": due_now, "wake_at": now + 86_400_000}, now
        )
        world.api.tenant("t33").add(item(2, "2025-12-31T13:00:00.000Z"))
        counting.loads = 0
        await world.clock.advance("15s")  # one resync: the index says nothing is due
        assert counting.loads <= 16  # the audit reads a bounded number of keys, not 40
        # 40 keys, 16 audited per resync: every key is re-read within three resyncs.
        await world.clock.advance("45s")
        assert [e.subject for e in recorder.events if e.partition == "t33"] == [
            "item-001",
            "item-002",
        ]
    finally:
        await engine.stop()
