"""Late commits: the quickstart's cursor catches rows that commit seconds out of stamp order,
tells how late they were (inspect, the CLI, the health check, a WARNING), counts what only a
reconcile found, polls held changes on time, and refuses a group of equal stamps it cannot
page past."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.cli._operators import StoreOperator
from watukuy.cli._render import inspect_view
from watukuy.integrations import HealthCheck
from watukuy.model.events import iso_time
from watukuy.model.rows import PKey
from watukuy.runtime.hooks import LateArrivalsDetails
from watukuy.testing import FakeApi, SeededRandom, VirtualClock
from watukuy.testing._late_writers import LateWriters

from .conftest import BASE, Recorder, World, item, page_fetch, timestamp_fetch

ORDERS = PKey("orders")


def quickstart(**options: Any) -> wk.PollerDefinition[Any]:
    """The README's poller: ``TimestampCursor(field="updated_at", tie_break="id")``."""
    options.setdefault("cursor", wk.TimestampCursor(field="updated_at", tie_break="id"))
    options.setdefault("fetch", timestamp_fetch(limit=20))
    return wk.define_poller(name="orders", identity=lambda o: o["id"], **options)


@dataclass
class LateHooks:
    """Records every ``on_late_arrivals``."""

    seen: list[LateArrivalsDetails] = field(default_factory=list)

    def on_late_arrivals(self, details: LateArrivalsDetails) -> None:
        self.seen.append(details)


# --- a database-backed vendor whose transactions commit out of stamp order ----------------


async def run_busy_vendor(cursor: wk.TimestampCursor, seed: int) -> tuple[LateWriters, Recorder]:
    """Five virtual minutes of writers that commit 0-4.3 s after stamping (a tenth of them
    3-4.3 s), polled every 1-10 s."""
    clock = VirtualClock()
    api = FakeApi(clock)
    writers = LateWriters(api, random.Random(seed))
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[quickstart(cursor=cursor, schedule=wk.Schedule(min="1s", max="10s"))],
        clock=clock,
        random=SeededRandom(seed),
        http_client=httpx.AsyncClient(transport=api.transport()),
    )
    recorder = Recorder()
    engine.on("orders", recorder)
    end = clock.now() + 300_000
    while clock.now() < end:
        writers.step(clock.now())
        await engine.tick()
        await clock.advance("250ms")
    for _ in range(20):  # the writers stop; let the poller catch up
        await clock.advance("5s")
        await engine.tick()
    return writers, recorder


def delivered(recorder: Recorder) -> set[tuple[str, int]]:
    return {(e.subject, e.data["version"]) for e in recorder.events}


async def test_the_quickstart_cursor_loses_nothing_to_commits_seconds_out_of_order() -> None:
    writers, recorder = await run_busy_vendor(
        wk.TimestampCursor(field="updated_at", tie_break="id"), seed=3
    )
    assert len(writers.history) > 500
    assert writers.lost(delivered(recorder)) == []
    # Every item ends in the vendor's final state.
    last: dict[str, int] = {}
    for event in recorder.events:
        last[event.subject] = event.data["version"]
    assert last == writers.final()


async def test_without_a_lookback_the_same_vendor_loses_versions() -> None:
    """The control: ``overlap=0`` is the watermark alone, and it skips late commits."""
    writers, recorder = await run_busy_vendor(
        wk.TimestampCursor(field="updated_at", tie_break="id", overlap=0), seed=3
    )
    assert len(writers.lost(delivered(recorder))) > 5


# --- telemetry --------------------------------------------------------------------------


async def test_a_late_commit_the_lookback_catches_is_measured(world: World) -> None:
    now = world.clock.now()
    world.api.add(item(1, iso_time(now - 100_000)))
    world.api.add(item(2, iso_time(now - 1_000)))
    hooks = LateHooks()
    engine = world.engine(quickstart(), hooks=hooks)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    # A transaction stamped 4.1 s before item-002 commits only now.
    world.api.add(item(3, iso_time(now - 5_100)))
    await world.clock.advance("30s")
    await engine.tick()
    assert [e.subject for e in recorder.events] == ["item-001", "item-002", "item-003"]
    assert [(d.lane, d.lateness_ms, d.missed, d.window_ms) for d in hooks.seen] == [
        ("live", (4_100,), 0, 10_000)
    ]
    late = (await engine.inspect())["pollers"][0]["late_arrivals"]
    assert (late["count"], late["max_ms"], late["p99_ms"], late["by_lane"]) == (
        1,
        4_100,
        4_100,
        {"live": 1},
    )
    assert (late["beyond_window"], late["missed"], late["lost_at"]) == (0, 0, None)
    assert (late["window_ms"], late["last_at"]) == (10_000, world.clock.now())
    # Figures a store keeps: the store-only CLI reads the same.
    by_store = await StoreOperator(world.store, world.clock).inspect()
    assert by_store["pollers"][0]["late_arrivals"] == late


async def test_lateness_near_an_explicit_overlap_is_a_warning_that_it_still_covers(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    now = world.clock.now()
    world.api.add(item(1, iso_time(now - 1_000)))
    engine = world.engine(
        quickstart(cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap="5s"))
    )
    engine.on("orders", Recorder())
    await engine.tick()
    world.api.add(item(2, iso_time(now - 5_100)))
    await world.clock.advance("30s")
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        await engine.tick()
    warnings = [r.getMessage() for r in caplog.records if "late arrivals" in r.getMessage()]
    assert warnings == [
        "[orders] late arrivals: 1 item(s) arrived up to 4.1s behind the watermark (found by the live "
        "lane); the 5.0s lookback covers them"
    ]


def reconciled(**options: Any) -> wk.PollerDefinition[Any]:
    return quickstart(
        reconcile=wk.Reconcile(every="1m", fetch=page_fetch(page_size=50)),
        schedule=wk.Schedule(min="30s", max="1m", jitter=0),
        **options,
    )


async def test_lateness_beyond_the_lookback_found_by_a_reconcile_warns_and_shows_everywhere(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    now = world.clock.now()
    world.api.add(item(1, iso_time(now - 1_000)))
    engine = world.engine(reconciled())
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()  # live, then the first reconcile
    # Stamped a minute before the watermark, visible only now: no lookback reaches it.
    world.api.add(item(2, iso_time(now - 61_000)))
    await world.clock.advance("30s")
    await engine.tick()
    assert [e.subject for e in recorder.events] == ["item-001"]
    await world.clock.advance("31s")
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        result = await engine.tick()
    assert [(r.lane, r.events) for r in result.polled] == [("reconcile", 1)]
    assert [(e.subject, e.lane) for e in recorder.events][-1] == ("item-002", "reconcile")
    warnings = [r.getMessage() for r in caplog.records if "late arrivals" in r.getMessage()]
    assert warnings == [
        "[orders] late arrivals: 1 item(s) arrived up to 1.0m behind the watermark (found by the "
        "reconcile lane), which exceeds the 10.0s lookback: widen `overlap` or add `reconcile`"
    ]

    report = await engine.inspect()
    late = report["pollers"][0]["late_arrivals"]
    assert (late["count"], late["max_ms"], late["beyond_window"], late["by_lane"]) == (
        1,
        60_000,
        1,
        {"reconcile": 1},
    )
    assert late["window_ms"] == 120_000  # the default window widened to twice that, capped
    assert late["lost_at"] == world.clock.now()

    text = render_inspect(await StoreOperator(world.store, world.clock).inspect())
    assert (
        "orders: 1 late arrival(s), up to 1.0m behind the watermark (p99 1.0m), lookback "
        "2.0m; 1 later than the lookback"
    ) in text

    verdict = HealthCheck(engine).judge(report)
    (key,) = verdict.keys
    assert [(f.code, f.summary) for f in key.findings] == [
        ("late_arrivals", "late arrivals beyond the lookback")
    ]
    assert key.findings[0].detail == (
        "1 late arrival(s) exceeded the lookback window (latest 60s behind the watermark; "
        "the lookback is now 120s): widen overlap or add reconcile"
    )


def render_inspect(report: dict[str, Any]) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    with console.capture() as capture:
        console.print(inspect_view(report))
    return capture.get()


# --- live-lane misses of a cursor that cannot look back --------------------------------------


@dataclass
class ChangeFeed:
    """A vendor position cursor: the token is how many changes of its feed were read. A
    write that reaches the table but not the feed (a late commit behind the position) is
    invisible to it; the full listing shows everything."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    feed: list[str] = field(default_factory=list)

    def write(self, identity: str, *, in_feed: bool = True) -> None:
        row = self.rows.setdefault(identity, {"id": identity, "version": 0})
        row["version"] += 1
        if in_feed:
            self.feed.append(identity)

    async def changes(self, ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        start = int(ctx.cursor.value or 0)
        items = [dict(self.rows[i]) for i in self.feed[start:]]
        return wk.Page(items=items, cursor=str(len(self.feed)), has_more=False)

    async def everything(self, ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
        return wk.Page(items=[dict(row) for row in self.rows.values()], has_more=False)


async def test_a_token_pollers_misses_are_what_its_next_cycle_did_not_return(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    vendor = ChangeFeed()
    vendor.write("a")
    vendor.write("b")

    @dataclass
    class Hooks(LateHooks):
        def on_poll_end(self, details: Any) -> None:
            # Between the live cycle and the reconcile of the second run: "c" reaches the
            # table but not the feed (a miss); "d" reaches both (a race the live lane wins on
            # its next cycle).
            second = details.lane == "live" and details.summary.started_at > start
            if second and "c" not in vendor.rows:
                vendor.write("c", in_feed=False)
                vendor.write("d")

    hooks = Hooks()
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        version=lambda o: str(o["version"]),
        cursor=wk.TokenCursor(),
        fetch=vendor.changes,
        reconcile=wk.Reconcile(every="1m", fetch=vendor.everything),
        schedule=wk.Schedule(min="30s", max="1m", jitter=0),
    )
    engine = world.engine(poller, hooks=hooks)
    recorder = Recorder()
    engine.on("orders", recorder)
    start = world.clock.now()
    await engine.tick()  # live a, b; the first reconcile is the baseline
    await world.clock.advance("61s")
    await engine.tick()  # live: nothing; then c and d appear; the reconcile finds both
    assert sorted((e.subject, e.lane) for e in recorder.events) == [
        ("a", "live"),
        ("b", "live"),
        ("c", "reconcile"),
        ("d", "reconcile"),
    ]
    assert (await engine.inspect())["pollers"][0]["late_arrivals"]["following"] == 2
    await world.clock.advance_to(await due(world))
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        await engine.tick()  # the next live cycle returns d, not c
    late = (await engine.inspect())["pollers"][0]["late_arrivals"]
    assert (late["missed"], late["following"], late["count"], late["window_ms"]) == (1, 0, 0, None)
    assert [(d.missed, d.lateness_ms) for d in hooks.seen] == [(1, ())]
    assert [r.getMessage() for r in caplog.records if "late arrivals" in r.getMessage()] == [
        "[orders] late arrivals: the reconcile lane found 1 change(s) that the live lane's next "
        "complete cycle did not return: the live cursor skips changes (late commits behind "
        "it, or a vendor position that cannot look back); widen `overlap` or run `reconcile` "
        "more often"
    ]


async def due(world: World) -> int:
    """When the ``orders`` key is planned to poll next."""
    state = await world.store.load_state(ORDERS)
    assert state is not None
    assert state.schedule.next_due_at is not None
    return state.schedule.next_due_at


# --- held changes ---------------------------------------------------------------------------


async def test_a_change_held_by_lag_is_polled_as_soon_as_it_is_deliverable(world: World) -> None:
    world.api.add(item(1, iso_time(world.clock.now() - 600_000)))
    engine = world.engine(
        quickstart(cursor=wk.TimestampCursor(field="updated_at", tie_break="id", lag="30s"))
    )
    recorder = Recorder()
    engine.on("orders", recorder)

    await engine.tick()
    for _ in range(3):  # three idle cycles: the interval grows to 101 s
        await world.clock.advance_to(await due(world))
        await engine.tick()
    fourth = await due(world)
    stamp = fourth - 2_000
    world.api.add(item(2, iso_time(stamp)))
    await world.clock.advance_to(fourth)
    held = await engine.tick()
    assert [r.events for r in held.polled] == [0]  # inside the lag
    state = await world.store.load_state(ORDERS)
    assert state is not None
    assert state.schedule.interval_ms == 101_250  # not an idle back-off
    deliverable = stamp + 30_000
    planned = await due(world)
    assert deliverable <= planned <= deliverable + 5_000
    await world.clock.advance_to(planned)
    await engine.tick()
    assert [e.subject for e in recorder.events] == ["item-001", "item-002"]


# --- a group of equal stamps larger than the page -------------------------------------------


def sorted_only(limit: int) -> Any:
    """A json-server style fetch: ``updated_at >= since``, sorted by (updated_at, id), but
    no way to filter ``id > x``."""

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{BASE}/items", params={"since": ctx.cursor.value, "limit": limit}
        )
        items = res.json()["data"]
        return wk.Page(items=items, has_more=len(items) == limit)

    return fetch


async def test_a_tie_group_larger_than_the_page_fails_the_page_and_says_what_to_change(
    world: World,
) -> None:
    stamp = "2025-12-31T12:00:00.000Z"
    for i in range(1, 13):
        world.api.add(item(i, stamp))
    world.api.add(item(13, "2025-12-31T12:00:01.000Z"))
    engine = world.engine(
        quickstart(cursor=wk.TimestampCursor(field="updated_at"), fetch=sorted_only(5))
    )
    engine.on("orders", Recorder())
    result = await engine.tick()
    (polled,) = result.polled
    assert polled.error is not None
    assert polled.error["code"] == "INVALID_PAGE"
    assert (
        f"all 5 item(s) of the page share updated_at={stamp!r}, the timestamp the request "
        "started from: a group of at least 5 equal timestamps does not fit in a page of 5"
    ) in polled.error["message"]
    assert (
        "Raise the page size above the largest group of equal timestamps"
        in (polled.error["message"])
    )
    state = await world.store.load_state(ORDERS)
    assert state is not None
    assert state.schedule.consecutive_failures == 1  # the fetch-failure path: backoff
    assert state.schedule.last_error == polled.error


# --- what the default lookback costs ------------------------------------------------------


async def poll_as_planned(world: World, engine: wk.Engine, cycles: int) -> list[int]:
    """Run ``cycles`` cycles, each when the previous one planned it: requests per cycle."""
    requests = []
    for _ in range(cycles):
        before = world.api.calls
        await engine.tick()
        requests.append(world.api.calls - before)
        await world.clock.advance_to(await due(world))
    return requests


async def test_on_an_idle_vendor_the_lookback_stops_after_one_window(world: World) -> None:
    """The first request returns to the stored cursor once a window has passed since the
    cursor last moved: the same URL again, answered 304."""
    stamp = world.clock.now() - 1_000
    world.api.add(item(1, iso_time(stamp)))
    world.api.set_etags(True)
    engine = world.engine(quickstart(schedule=wk.Schedule(min="30s", max="5m", jitter=0)))
    engine.on("orders", Recorder())
    assert await poll_as_planned(world, engine, 5) == [1] * 5
    log = [(r.query.get("since"), r.query.get("after_id"), r.status) for r in world.api.log]
    assert log == [
        (None, None, 200),  # the first poll
        (iso_time(stamp - 10_000), None, 200),  # the window the first poll passed, once
        (iso_time(stamp), "item-001", 200),  # the stored cursor from then on
        (iso_time(stamp), "item-001", 304),
        (iso_time(stamp), "item-001", 304),
    ]


@pytest.mark.parametrize(
    ("overlap", "requests"),
    [(None, [3, 3, 1, 1, 1]), ("10s", [3, 3, 3, 3, 3])],
)
async def test_a_tie_group_larger_than_a_page_is_read_again_for_one_window_only(
    world: World, overlap: str | None, requests: list[int]
) -> None:
    engine = tied_group(world, 250, overlap, limit=100)
    engine.on("orders", Recorder())
    assert await poll_as_planned(world, engine, 5) == requests


def tied_group(
    world: World, size: int, overlap: str | None, limit: int, cap: int = 50
) -> wk.Engine:
    """``size`` items stamped with one instant, a second ago, and an engine reading them
    ``limit`` at a time, ``cap`` pages a cycle (30 s .. 5 min, no jitter)."""
    stamp = iso_time(world.clock.now() - 1_000)
    for i in range(1, size + 1):
        world.api.add(item(i, stamp))
    return world.engine(
        quickstart(
            cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap=overlap),
            fetch=timestamp_fetch(limit=limit),
            schedule=wk.Schedule(min="30s", max="5m", jitter=0),
            max_pages_per_cycle=cap,
        )
    )


@pytest.mark.parametrize("overlap", [None, "1m"])
async def test_a_window_longer_than_half_the_page_cap_is_cut_so_the_cycle_moves_on(
    world: World, overlap: str | None
) -> None:
    engine = tied_group(world, 50, overlap, limit=10, cap=4)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick(catch_up=False)  # four pages of the group: cut by the page cap
    world.api.add(item(51, iso_time(world.clock.now())))
    for _ in range(3):  # due at once: the rest of the group is caught up
        await engine.tick(catch_up=False)
    assert sorted(e.subject for e in recorder.events) == [f"item-{i:03d}" for i in range(1, 52)]
