"""Cursor rules and operations that must never skip an item: overlap on the first request of
a cycle, validators after operations, ``backfill(None)``, and misconfigured pollers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import watukuy as wk
from watukuy.model.rows import PKey
from watukuy.testing.fake_api._items import encode_token

from .conftest import Recorder, World, item, page_fetch, timestamp_fetch, token_fetch

TS = "2025-12-31T23:59:00.000Z"


def tied(world: World, count: int, at: str = TS) -> None:
    """``count`` items ``o000``... all stamped ``at``."""
    for n in range(count):
        world.api.add({"id": f"o{n:03d}", "updated_at": at, "status": "new"})


def recording(fetch: Callable[..., Any], seen: list[tuple[str, Any, Any]]) -> Callable[..., Any]:
    """``fetch``, recording ``(lane, value, tie_break)`` of every request."""

    async def wrapped(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        seen.append((ctx.lane, ctx.cursor.value, ctx.cursor.tie_break))
        page: wk.Page[Any] = await fetch(ctx)
        return page

    return wrapped


def overlapping(seen: list[tuple[str, Any, Any]], **options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("max_pages_per_cycle", 10)
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap="2m"),
        fetch=recording(timestamp_fetch(limit=100), seen),
        **options,
    )


# --- defect 1: overlap belongs to the first request of a cycle ----------------------------


async def test_overlap_moves_back_the_first_request_of_a_cycle_only(world: World) -> None:
    tied(world, 250)
    seen: list[tuple[str, Any, Any]] = []
    engine = world.engine(overlapping(seen))
    recorder = Recorder()
    engine.on("orders", recorder)

    result = await engine.tick()

    assert result.errors == []
    assert len(recorder.events) == 250
    assert {e.subject for e in recorder.events} == {f"o{n:03d}" for n in range(250)}
    assert seen == [("live", None, None), ("live", TS, "o099"), ("live", TS, "o199")]
    report = (await engine.inspect())["pollers"][0]
    assert report["cursors"]["live"] == {"value": TS, "tie_break": "o249"}


async def test_the_next_cycle_reads_the_overlap_window_through_once(world: World) -> None:
    tied(world, 250)
    seen: list[tuple[str, Any, Any]] = []
    engine = world.engine(overlapping(seen))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    world.api.add({"id": "o250", "updated_at": "2025-12-31T23:59:30.000Z", "status": "new"})
    seen.clear()
    await world.clock.advance("10m")

    result = await engine.tick()

    assert result.errors == []
    # The window (two minutes back, 250 tied items) is read once, page after page, and the
    # last page goes on past the watermark; nothing is read twice, nothing is skipped.
    assert seen == [
        ("live", "2025-12-31T23:57:00.000Z", None),
        ("live", TS, "o099"),
        ("live", TS, "o199"),
    ]
    assert [e.subject for e in recorder.events[250:]] == ["o250"]


async def test_overlap_on_the_backfill_lane_continues_page_by_page(world: World) -> None:
    tied(world, 250)
    seen: list[tuple[str, Any, Any]] = []
    engine = world.engine(overlapping(seen))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    seen.clear()

    await engine.backfill("orders", TS, force=True)
    result = await engine.tick()

    assert result.errors == []
    backfill = [request for request in seen if request[0] == "backfill"]
    assert backfill == [
        ("backfill", "2025-12-31T23:57:00.000Z", None),
        ("backfill", TS, "o099"),
        ("backfill", TS, "o199"),
    ]
    assert sorted(e.subject for e in recorder.events if e.lane == "backfill") == [
        f"o{n:03d}" for n in range(250)
    ]


# --- defect 3: backfill(name, None) starts at the very beginning --------------------------

LATER = "2026-06-01T00:00:00.000Z"  # "start live from now": after every item below


def history(world: World, count: int = 5) -> None:
    for n in range(1, count + 1):
        world.api.add(item(n, f"2025-12-31T12:00:0{n}.000Z"))


async def test_backfill_from_none_reads_a_timestamp_history_before_initial(
    world: World,
) -> None:
    history(world)
    seen: list[tuple[str, Any, Any]] = []
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id", initial=LATER),
        fetch=recording(timestamp_fetch(limit=2), seen),
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    assert recorder.events == []  # live starts from `initial`: the history is older

    await engine.backfill("orders", None)
    result = await engine.tick()

    assert result.errors == []
    assert [r.lane for r in result.polled] == ["backfill"]
    assert seen[1] == ("backfill", None, None)  # fetch receives value=None
    assert [(e.type, e.subject, e.lane) for e in recorder.events] == [
        ("created", f"item-00{n}", "backfill") for n in range(1, 6)
    ]
    report = (await engine.inspect())["pollers"][0]
    assert "backfill" not in report["cursors"]  # done: it reached the live cursor
    assert report["cursors"]["live"] == {"value": LATER, "tie_break": None}


async def test_backfill_from_none_reads_a_token_listing_from_no_token(world: World) -> None:
    history(world)
    tokens: list[tuple[str, Any]] = []
    fetch = token_fetch(limit=2)

    async def recorded(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        tokens.append((ctx.lane, ctx.cursor.value))
        page: wk.Page[Any] = await fetch(ctx)
        return page

    start = encode_token("item-003")  # live starts after item-003
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TokenCursor(initial=start),
        fetch=recorded,
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    assert [e.subject for e in recorder.events] == ["item-004", "item-005"]

    await engine.backfill("orders", None)
    result = await engine.tick()

    assert result.errors == []
    assert [lane for lane, _ in tokens] == ["live", "backfill", "backfill", "backfill"]
    assert tokens[1] == ("backfill", None)
    assert [(e.subject, e.lane) for e in recorder.events[2:]] == [
        (f"item-00{n}", "backfill") for n in range(1, 4)
    ]
    assert "backfill" not in (await engine.inspect())["pollers"][0]["cursors"]


async def test_backfill_from_none_on_a_page_cursor_starts_at_its_initial_page(
    world: World,
) -> None:
    history(world)
    pages: list[tuple[str, int]] = []
    fetch = page_fetch(page_size=2)

    async def recorded(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
        pages.append((ctx.lane, ctx.cursor.page))
        page: wk.Page[Any] = await fetch(ctx)
        return page

    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.PageCursor(initial=1),
        fetch=recorded,
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    pages.clear()

    await engine.backfill("orders", None, "4", force=True)  # stops before page 4
    result = await engine.tick()

    assert result.errors == []
    assert pages == [("backfill", 1), ("backfill", 2), ("backfill", 3)]
    assert [e.type for e in recorder.events[5:]] == ["updated"] * 5


# --- defect 5: a misconfigured poller fails loudly instead of losing items -----------------


def orders_poller(**options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("identity", lambda o: o["id"])
    options.setdefault("cursor", wk.TimestampCursor(field="updated_at", tie_break="id"))
    return wk.define_poller(name="orders", fetch=timestamp_fetch(limit=10), **options)


async def assert_failed_page(
    world: World, engine: wk.Engine, recorder: Recorder, lane: str, message: str
) -> None:
    result = await engine.tick()
    failed = [r for r in result.polled if r.lane == lane]
    assert len(failed) == 1
    assert failed[0].error is not None
    assert message in failed[0].error["message"]
    assert failed[0].error["code"] == "CONFIG"
    assert recorder.events == []
    report = (await engine.inspect())["pollers"][0]
    assert message in report["schedule"]["last_error"]["message"]
    assert report["items"] == 0
    assert report["parked"] == 0  # nothing was quarantined past the cursor


async def test_a_cursor_field_no_item_has_fails_the_page(world: World, caplog: Any) -> None:
    history(world)
    engine = world.engine(orders_poller(cursor=wk.TimestampCursor(field="modified_at")))
    recorder = Recorder()
    engine.on("orders", recorder)
    await assert_failed_page(world, engine, recorder, "live", "has 'modified_at'")
    assert (await engine.inspect())["pollers"][0]["cursors"].get("live") is None
    warnings = [
        r for r in caplog.records if r.levelname == "WARNING" and "modified_at" in r.message
    ]
    assert warnings, "the failed page is logged at WARNING"


async def test_a_cursor_field_no_item_has_fails_the_backfill_page(world: World) -> None:
    history(world)
    engine = world.engine(orders_poller(cursor=wk.TimestampCursor(field="modified_at")))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.pause("orders")
    await engine.backfill("orders", None)
    state = await world.store.load_state(PKey("orders"))
    assert state is not None
    assert state.backfill is not None
    await engine.resume("orders")
    result = await engine.tick()
    errors = {r.lane: r.error for r in result.polled}
    for lane in ("live", "backfill"):
        error = errors[lane]
        assert error is not None
        assert "has 'modified_at'" in error["message"]
    assert recorder.events == []
    report = (await engine.inspect())["pollers"][0]
    assert "backfill" not in report["cursors"]  # never moved from where it starts
    state = await world.store.load_state(PKey("orders"))
    assert state is not None
    assert state.backfill is not None  # still to do


async def test_identity_failing_for_every_item_fails_the_page(world: World) -> None:
    history(world)
    engine = world.engine(orders_poller(identity=lambda o: o["order_id"]))
    recorder = Recorder()
    engine.on("orders", recorder)
    await assert_failed_page(
        world, engine, recorder, "live", "identity() failed: KeyError 'order_id'"
    )
    assert (await engine.inspect())["pollers"][0]["cursors"].get("live") is None


async def test_identity_failing_for_every_item_of_a_full_listing_deletes_nothing(
    world: World,
) -> None:
    history(world)
    good = wk.define_poller(
        name="orders", identity=lambda o: o["id"], cursor=wk.SnapshotDiff(), fetch=page_fetch()
    )
    first = world.engine(good)
    first.on("orders", Recorder())
    await first.tick()
    assert await world.store.count_items(PKey("orders")) == 5

    broken = wk.define_poller(
        name="orders",
        identity=lambda o: o["order_id"],
        cursor=wk.SnapshotDiff(),
        fetch=page_fetch(),
    )
    engine = world.engine(broken)
    recorder = Recorder()
    engine.on("orders", recorder)
    await world.clock.advance("10m")
    result = await engine.tick()
    assert result.polled[0].error is not None
    assert "identity() failed: KeyError 'order_id'" in result.polled[0].error["message"]
    assert recorder.events == []  # no `deleted` for the five items it could not identify
    assert await world.store.count_items(PKey("orders")) == 5


async def test_identity_failing_for_every_item_fails_the_reconcile_page(world: World) -> None:
    history(world)
    # The reconcile listing names the id differently: identity() cannot read it.
    renamed = page_fetch()

    async def fetch_renamed(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        page: wk.Page[Any] = await renamed(ctx)
        return wk.Page(
            items=[{"sku": o["id"], "updated_at": o["updated_at"]} for o in page.items],
            has_more=page.has_more,
        )

    poller = orders_poller(reconcile=wk.Reconcile(every="1h", fetch=fetch_renamed))
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    result = await engine.tick()
    errors = {r.lane: r.error for r in result.polled}
    assert errors["live"] is None
    assert errors["reconcile"] is not None
    assert "identity() failed: KeyError 'id'" in errors["reconcile"]["message"]
    assert [e.type for e in recorder.events] == ["created"] * 5  # and no `deleted`
    assert await world.store.count_items(PKey("orders")) == 5


async def test_a_few_unidentifiable_items_among_good_ones_are_quarantined(
    world: World,
) -> None:
    history(world)
    world.api.add({"id": "item-006", "updated_at": "2025-12-31T12:00:06.000Z"})
    engine = world.engine(
        orders_poller(identity=lambda o: o["id"] if o["id"] != "item-003" else o["order_id"])
    )
    recorder = Recorder()
    engine.on("orders", recorder)
    result = await engine.tick()
    assert result.errors == []
    assert len(recorder.events) == 5
    parked = await engine.parked.list("orders", kind="invalid")
    assert [row.error["message"] for row in parked] == ["identity() failed: KeyError 'order_id'"]


async def test_version_failing_for_every_item_fails_the_page_with_context(
    world: World,
) -> None:
    history(world)
    engine = world.engine(orders_poller(version=lambda o: o["rev"]))
    recorder = Recorder()
    engine.on("orders", recorder)
    await assert_failed_page(world, engine, recorder, "live", "version() failed: KeyError 'rev'")


async def test_a_few_unversionable_items_among_good_ones_are_quarantined(
    world: World,
) -> None:
    history(world)
    engine = world.engine(
        orders_poller(version=lambda o: o["rev"] if o["id"] != "item-002" else o["missing"])
    )
    for n in range(1, 6):
        world.api.update(f"item-00{n}", rev=n)
    recorder = Recorder()
    engine.on("orders", recorder)
    result = await engine.tick()
    assert result.errors == []
    assert [e.subject for e in recorder.events] == ["item-001", "item-003", "item-004", "item-005"]
    parked = await engine.parked.list("orders", kind="invalid")
    assert [row.error["message"] for row in parked] == ["version() failed: KeyError 'missing'"]


# --- defect 2: a validator only stands for what this lane already processed from there ----


def many(world: World, count: int) -> None:
    for n in range(1, count + 1):
        world.api.add(item(n, f"2025-12-31T12:00:{n:02d}.000Z"))


def timestamp_orders(**options: Any) -> wk.PollerDefinition[Any]:
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(limit=10),
        **options,
    )


def snapshot_catalog(page_size: int) -> wk.PollerDefinition[Any]:
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=page_fetch(page_size=page_size),
    )


def statuses(world: World, since: int) -> list[tuple[str, int]]:
    return [(r.route, r.status) for r in world.api.log[since:]]


async def test_reset_with_clear_snapshot_reemits_everything_from_an_etag_vendor(
    world: World,
) -> None:
    many(world, 5)
    world.api.set_etags(True)
    engine = world.engine(timestamp_orders())
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    await world.clock.advance("10m")
    await engine.tick()  # nothing new: this idle request is the one a 304 may answer
    first_ids = recorder.ids

    await engine.reset_cursor("orders", None, clear_snapshot=True)
    mark = len(world.api.log)
    await world.clock.advance("1s")
    result = await engine.tick()

    assert result.errors == []
    assert statuses(world, mark) == [("since", 200)]
    assert [e.type for e in recorder.events[5:]] == ["created"] * 5
    assert recorder.ids[5:] == first_ids  # the same ids as the first time
    assert await world.store.count_items(PKey("orders")) == 5


async def test_reset_with_clear_snapshot_reemits_a_whole_listing_once_answered_304(
    world: World,
) -> None:
    many(world, 3)
    world.api.set_etags(True)
    engine = world.engine(snapshot_catalog(page_size=10))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    await world.clock.advance("10m")
    mark = len(world.api.log)
    await engine.tick()
    assert statuses(world, mark) == [("page", 304)]  # a one-page listing: the 304 is kept

    await engine.reset_cursor("orders", None, clear_snapshot=True)
    mark = len(world.api.log)
    await world.clock.advance("1s")
    await engine.tick()

    assert statuses(world, mark) == [("page", 200)]
    assert [e.type for e in recorder.events[3:]] == ["created"] * 3
    assert await world.store.count_items(PKey("orders")) == 3


async def test_a_rewound_cursor_reads_on_past_pages_it_read_before(world: World) -> None:
    many(world, 15)
    world.api.set_etags(True)
    engine = world.engine(timestamp_orders())
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    assert len(recorder.events) == 15

    await engine.reset_cursor("orders", None)
    world.api.update("item-012", updated_at="2025-12-31T12:01:00.000Z", status="paid")
    mark = len(world.api.log)
    await world.clock.advance("1s")
    result = await engine.tick()

    assert result.errors == []
    # The first page is unchanged, but it is read in full again (not answered 304 on the
    # strength of the first cycle), so the cycle gets to the change behind it.
    assert statuses(world, mark) == [("since", 200), ("since", 200)]
    assert [(e.type, e.subject) for e in recorder.events[15:]] == [("updated", "item-012")]


async def test_a_forced_backfill_from_the_first_request_is_read_in_full(world: World) -> None:
    many(world, 5)
    world.api.set_etags(True)
    engine = world.engine(timestamp_orders())
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()

    for attempt in range(2):  # twice: a backfill's own requests do not short-circuit either
        await engine.backfill("orders", None, force=True)
        mark = len(world.api.log)
        await world.clock.advance("1s")
        result = await engine.tick()
        assert result.errors == []
        backfill = [r for r in result.polled if r.lane == "backfill"]
        assert [(r.items, r.events) for r in backfill] == [(5, 5)], attempt
        assert ("since", 304) not in statuses(world, mark)
    assert [e.type for e in recorder.events[5:]] == ["updated"] * 10


async def test_reconcile_is_never_answered_304_so_it_finds_deletes(world: World) -> None:
    many(world, 5)
    world.api.set_etags(True)
    engine = world.engine(timestamp_orders(reconcile=wk.Reconcile(every="1h", fetch=page_fetch())))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()  # live and the first reconcile listing: items 1-5
    world.api.add(item(6, "2025-12-31T12:00:06.000Z"))
    await world.clock.advance("10m")
    await engine.tick()  # live sees item-006
    world.api.remove("item-006")  # ... and the listing is byte for byte the first one again
    await world.clock.advance("1h")
    mark = len(world.api.log)
    result = await engine.tick()

    assert result.errors == []
    assert ("page", 200) in statuses(world, mark)
    await world.clock.advance("1h")
    await engine.tick()  # deletes wait for a second complete pass that misses the item
    assert [(e.type, e.subject) for e in recorder.events[5:]] == [
        ("created", "item-006"),
        ("deleted", "item-006"),
    ]


async def test_a_paged_listing_reads_past_an_unchanged_first_page(world: World) -> None:
    many(world, 12)
    world.api.set_etags(True)
    engine = world.engine(snapshot_catalog(page_size=5))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    world.api.update("item-012", status="paid")  # on page 3; pages 1 and 2 are unchanged
    await world.clock.advance("10m")
    mark = len(world.api.log)
    await engine.tick()

    assert statuses(world, mark) == [("page", 200)] * 3
    assert [(e.type, e.subject) for e in recorder.events[12:]] == [("updated", "item-012")]


async def test_replay_with_an_etag_vendor_needs_no_request(world: World) -> None:
    many(world, 3)
    world.api.set_etags(True)
    engine = world.engine(timestamp_orders(log=wk.EventLog(retention="7d")))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    mark = len(world.api.log)
    replayed = await engine.replay("orders", 0)
    await engine.tick()
    assert replayed.replayed == 3
    assert [e.lane for e in recorder.events[3:]] == ["replay"] * 3
    assert recorder.ids[3:] == recorder.ids[:3]
    assert all(route == "since" for route, _ in statuses(world, mark))
