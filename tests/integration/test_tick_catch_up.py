"""A ``tick()`` finishes the job: it runs catch-up cycles of the keys the page cap cut short
until they are caught up or the deadline comes near, and says which keys are still behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import watukuy as wk
from watukuy.model.rows import PKey
from watukuy.testing import VirtualClock

from .conftest import Recorder, World, item, timestamp_fetch

T = "2025-12-31T12:00:00.000Z"
START = 1_767_182_400_000  # T in epoch milliseconds


def spread(world: World, count: int) -> None:
    """``count`` items, one a second from T on (a keyset listing pages through them)."""
    from datetime import UTC, datetime

    for n in range(1, count + 1):
        at = datetime.fromtimestamp((START + n * 1_000) / 1_000, UTC)
        world.api.add(item(n, at.isoformat(timespec="milliseconds").replace("+00:00", "Z")))


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    """The ``orders`` poller over the keyset listing, without a lookback: each page is read
    once, so the counts below are exact."""
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap=0),
        **options,
    )


def slow(fetch: Callable[..., Any], clock: VirtualClock, page_ms: int) -> Callable[..., Any]:
    """``fetch``, each page taking ``page_ms`` of virtual time."""

    async def wrapped(ctx: wk.FetchContext[Any]) -> Any:
        await clock.advance_ms(page_ms)
        return await fetch(ctx)

    return wrapped


@pytest.mark.parametrize("store_kind", ["memory"])
async def test_a_tick_brings_in_all_20000_items_past_the_default_page_cap(world: World) -> None:
    spread(world, 20_000)
    engine = world.engine(orders(fetch=timestamp_fetch(limit=100)))
    recorder = Recorder()
    engine.on("orders", recorder)

    result = await engine.tick(max_duration="4m")

    # 200 pages at the default cap of 50 pages a cycle: four cycles, reported in one entry.
    [polled] = result.polled
    assert (polled.events, polled.delivered) == (20_000, 20_000)
    assert (polled.cycles, polled.pending) == (4, False)
    assert world.api.calls == 200
    assert (result.caught_up, result.pending_keys, result.timed_out) == (True, [], False)
    assert len({event.subject for event in recorder.events}) == 20_000
    as_json = result.to_dict()
    assert (as_json["caught_up"], as_json["pending_keys"]) == (True, [])
    assert as_json["polled"][0]["cycles"] == 4


async def test_a_short_deadline_reports_the_key_pending(world: World) -> None:
    spread(world, 1_000)
    # Ten items a page, two pages a cycle, each page one virtual second.
    fetch = slow(timestamp_fetch(limit=10), world.clock, 1_000)
    engine = world.engine(orders(fetch=fetch, max_pages_per_cycle=2))
    engine.on("orders", Recorder())

    result = await engine.tick(max_duration="5s")

    [polled] = result.polled
    assert polled.pending
    assert polled.items == 50  # pages at 0-1 s, ..., 4-5 s; none started past the deadline
    assert polled.cycles == 3
    assert (result.caught_up, result.pending_keys) == (False, [("orders", "")])
    assert result.to_dict()["pending_keys"] == [{"poller": "orders", "partition": ""}]
    assert not result.timed_out  # every key was visited

    # The next tick picks up where this one stopped, and reports the rest.
    await world.clock.advance("1s")
    rest = await engine.tick(max_duration="10m")
    assert (rest.polled[0].items, rest.caught_up) == (950, True)
    assert rest.polled[0].pending is False


async def test_a_catch_up_cycle_starts_only_while_a_page_still_fits(world: World) -> None:
    spread(world, 1_000)
    fetch = slow(timestamp_fetch(limit=10), world.clock, 3_000)
    engine = world.engine(orders(fetch=fetch, max_pages_per_cycle=1))
    engine.on("orders", Recorder())

    # Pages take 3 s: after the one at 6-9 s, one more would end past the 10 s deadline.
    result = await engine.tick(max_duration="10s")

    assert (result.polled[0].cycles, result.polled[0].items) == (3, 30)
    assert result.duration_ms == 9_000
    assert result.pending_keys == [("orders", "")]


async def test_catch_up_rounds_take_turns_between_keys(world: World) -> None:
    for tenant in ("a", "b"):
        for n in range(1, 56):  # 55 items: six pages of ten, the last one short
            world.api.tenant(tenant).add(item(n, f"2025-12-31T12:00:{n:02d}.000Z"))
    pages: list[str] = []
    inner = timestamp_fetch(limit=10)

    async def fetch(ctx: wk.FetchContext[Any]) -> Any:
        pages.append(ctx.partition.key)
        return await inner(ctx)

    poller = orders(fetch=fetch, max_pages_per_cycle=2, partitions=lambda: ["a", "b"])
    engine = world.engine(poller, tick_concurrency=1)
    engine.on("orders", Recorder())

    result = await engine.tick()

    # One cycle (two pages) of a key, then one of the other: a long backlog never starves
    # the other key of its turn.
    assert pages == ["a", "a", "b", "b"] * 3
    assert [(r.partition, r.items, r.cycles) for r in result.polled] == [
        ("a", 55, 3),
        ("b", 55, 3),
    ]
    assert result.caught_up


async def test_without_a_deadline_a_key_runs_at_most_max_runs_per_key_times(
    world: World,
) -> None:
    from watukuy.runtime.tick import MAX_RUNS_PER_KEY

    endless = 0

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        nonlocal endless
        endless += 1
        return wk.Page(items=[{"id": f"i{endless}"}], cursor=str(endless), has_more=True)

    poller = wk.define_poller(
        name="orders", identity=lambda o: o["id"], cursor=wk.TokenCursor(), fetch=fetch
    )
    engine = world.engine(poller)
    engine.on("orders", Recorder())

    result = await engine.tick()

    assert result.polled[0].cycles == MAX_RUNS_PER_KEY
    assert endless == MAX_RUNS_PER_KEY * 50
    assert result.pending_keys == [("orders", "")]


async def test_each_catch_up_run_holds_the_lease_and_lets_it_go(world: World) -> None:
    spread(world, 300)
    acquired: list[int] = []

    class Leases:
        def on_lease_acquired(self, details: Any) -> None:
            acquired.append(details.lease.epoch)

    engine = world.engine(
        orders(fetch=timestamp_fetch(limit=10), max_pages_per_cycle=10), hooks=Leases()
    )
    engine.on("orders", Recorder())

    result = await engine.tick()

    assert result.polled[0].cycles == 3  # 30 pages, ten a cycle
    assert len(set(acquired)) == 3  # three runs, each with its own lease epoch
    assert await world.store.get_lease(PKey("orders")) is None  # released at the end


@pytest.mark.parametrize("store_kind", ["sqlite"])
@pytest.mark.parametrize("due", [False, True], ids=["outbox-only", "with-a-cycle"])
async def test_a_tick_counts_the_retried_parked_event_it_delivers(world: World, due: bool) -> None:
    spread(world, 3)
    poller = orders(
        fetch=timestamp_fetch(limit=10),
        delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
        schedule=wk.Schedule(min="1m", max="1m", adaptive=False, jitter=0),
    )
    engine = world.engine(poller)
    broken = {"item-002"}
    recorder = Recorder(fail=lambda event: event.subject in broken)
    engine.on("orders", recorder)
    first = await engine.tick()
    assert first.polled[0].delivered == 2
    parked = await engine.parked.list("orders")
    assert [row.hold_key for row in parked] == ["item-002"]

    broken.clear()
    assert await engine.parked.retry("orders", [row.id for row in parked]) == 1
    if due:
        await world.clock.advance("1m")  # the live lane runs too, and finds nothing new
    result = await engine.tick()

    assert recorder.by_subject("item-002") == ["created"]
    [polled] = result.polled
    assert (polled.lane, polled.items, polled.delivered) == ("live", 0, 1)
    assert polled.cycles == (1 if due else 0)


async def test_catching_up_keeps_the_pace_the_rate_limit_headers_ask_for(world: World) -> None:
    spread(world, 300)
    world.api.set_rate_limit("ietf", limit=40, window="60s")  # 40 requests a minute
    engine = world.engine(orders(fetch=timestamp_fetch(limit=10), max_pages_per_cycle=5))
    engine.on("orders", Recorder())

    task = asyncio.create_task(engine.tick(max_duration="10m"))
    while not task.done():  # virtual time moves while the pass waits for its pace
        if not await world.clock.run_next():
            await world.clock.flush()
    result = task.result()

    [polled] = result.polled
    assert (polled.events, polled.cycles, result.caught_up) == (300, 6, True)
    assert {request.status for request in world.api.log} == {200}  # never a 429
    assert result.duration_ms > 0  # it waited between cycles instead of running into a 429
