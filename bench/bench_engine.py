"""The whole engine on SqliteStore: initial sync, re-sync cycles and dispatch, next to the floor.

An in-process ``FakeApi`` holds 100,000 items served in pages of 500. ``fetch`` calls its
listings directly (``api.list_page`` / ``api.list_since``), so the figures are the engine's
own cost (diff, hashing, ids, events, commits, scheduling) and not an HTTP stack's; one
extra row runs the same sync through ``ctx.http`` over ``api.transport()`` for comparison.
The store is a ``SqliteStore`` file in a temporary directory, the clock the system clock,
and every hook is attached as a no-op, so the hook bus is paid for as in an observed
deployment.

Two strategies, each on its own database:

* **snapshot/page**: ``SnapshotDiff`` over the page-numbered listing. Every cycle lists all
  200 pages and diffs them against the stored snapshot, so "nothing changed" is a real
  re-scan of 100,000 known items.
* **timestamp**: ``TimestampCursor`` over the keyset listing. Later cycles only fetch what
  changed since the watermark.

Each strategy runs an initial sync with no handler attached, so that its 100,000 events stay
pending; delivers them to a no-op async handler (the snapshot poller at
``delivery.concurrency=1``, the timestamp poller at 32); detaches the handler; then runs a
cycle after 1% of the items changed and a cycle where nothing changed.

The dispatch targets are read from a separate pair (**same events**): two fresh snapshot
engines sync the same listing, then one delivers its 100,000 events at concurrency 1 and
the other at 32, so both rates are measured on identical events. A last pair (**handler
waits 1 ms**) delivers 5,000 events at concurrency 1 and 32 to a handler that awaits 1 ms
per event, as one posting to a webhook does; it is reported, not a target. So is the
**constant ordering key** row: 5,000 events under one ordering key, where each event waits
for the previous one's ack (a store round trip per event).

The floor is ``bench/bench_stores.py``'s, measured in the same run: the plainest code that
commits a page of 500 item upserts and 500 outbox events to the same SQLite schema. Its
pages carry sequential event ids, which SQLite appends to the outbox's primary-key index;
real event ids are SHA-256 digests that land all over it. So the same floor is also run
writing all 100,000 items in one go, once with each kind of id, for a like-for-like view.

Targets: initial sync >= 50% of the floor's items/s; a no-change cycle over 100,000 known
items >= 5x faster than the initial sync; dispatch >= 10,000 events/s at concurrency 1,
and more at 32. Each is printed as met or MISSED.

Run with ``make bench`` or ``python -m bench engine``. Missed targets are reported, not
raised; it raises only when the engine misbehaves (a failed cycle, events left pending).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import hashlib
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import watukuy as wk
from watukuy.model.rows import PKey
from watukuy.runtime.hooks import HOOK_NAMES
from watukuy.testing import FakeApi, fake_items

try:
    from bench import bench_stores
except ImportError:  # run as a script from inside bench/
    import bench_stores  # type: ignore[import-not-found,no-redef,unused-ignore]

ITEMS = 100_000
PAGE = 500
CHANGED = ITEMS // 100
FLOOR_SHARE_TARGET = 0.5
NO_CHANGE_SPEEDUP_TARGET = 5.0
DISPATCH_TARGET = 10_000
SAME_EVENTS = "same events"  # the like-for-like dispatch pair
WAITING = "handler waits 1 ms"  # the pair that shows what concurrency is for
SERIAL = "constant ordering key"  # every event acked before the next is handed over
WAITING_ITEMS = 5_000
HANDLER_WAIT = 0.001


class NoopHooks:
    """Every hook, doing nothing: the engine builds and hands over every detail record."""

    def __getattr__(self, name: str) -> Callable[[Any], None]:
        if name not in HOOK_NAMES:
            raise AttributeError(name)
        return _noop


def _noop(details: Any) -> None:
    return None


async def _handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
    return None


async def _waiting_handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
    await asyncio.sleep(HANDLER_WAIT)  # a webhook or broker round trip


@dataclass
class Row:
    """One measured cycle; ``fetch`` is the part of ``seconds`` spent inside ``fetch``."""

    strategy: str
    cycle: str
    seconds: float
    items: int
    events: int
    fetch: float = 0.0


Fetch = Callable[[wk.FetchContext[Any]], Awaitable[wk.Page[Any]]]


class Timed:
    """Wraps a fetch and adds up the time spent in it (the API's share of a cycle)."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self.seconds = 0.0

    async def __call__(self, ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        started = time.perf_counter()
        try:
            return await self._fetch(ctx)
        finally:
            self.seconds += time.perf_counter() - started


def _page_fetch(api: FakeApi) -> Fetch:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        page = api.list_page(ctx.page, PAGE)
        return wk.Page(items=page.data, has_more=page.has_more)

    return fetch


def _http_page_fetch(api: FakeApi) -> Fetch:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{api.base_url}/items/page", params={"page": ctx.page, "page_size": PAGE}
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return fetch


def _since_fetch(api: FakeApi) -> Fetch:
    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        since, after = ctx.cursor.value, ctx.cursor.tie_break
        found = api.list_since(
            None if since is None else str(since), None if after is None else str(after), PAGE
        )
        return wk.Page(items=found.data, has_more=found.has_more)

    return fetch


def _poller(
    name: str,
    cursor: wk.CursorConfig,
    fetch: Timed,
    concurrency: int = 1,
    *,
    version: bool = True,
    ordering_key: Callable[[wk.Event[Any]], str] | None = None,
) -> wk.PollerDefinition[Any]:
    # The FakeApi's items carry a version, as most APIs' items carry an updated_at or an
    # etag: declaring it is the recommended set-up (an unchanged version skips hashing).
    # One row below runs without it, hashing every item.
    return wk.define_poller(
        name=name,
        identity=lambda item: item["id"],
        version=(lambda item: item["version"]) if version else None,
        cursor=cursor,
        fetch=fetch,
        # Never due on its own: every cycle below is started with trigger().
        schedule=wk.Schedule(min="1h", max="2h"),
        max_pages_per_cycle=10_000,
        delivery=wk.Delivery(concurrency=concurrency, ordering_key=ordering_key),
    )


def _api(items: int = ITEMS) -> FakeApi:
    # Stamped in the past, one second apart, so a timestamp cursor sees every item at once.
    start = wk.SystemClock().now() - (items + 3_600) * 1_000
    return FakeApi(items=fake_items(items, start=start), page_size=PAGE, log_limit=1_000)


@asynccontextmanager
async def _engine(
    poller: wk.PollerDefinition[Any], http: httpx.AsyncClient | None = None
) -> AsyncIterator[wk.Engine]:
    with tempfile.TemporaryDirectory() as folder:
        store = wk.SqliteStore(Path(folder) / "engine.db")
        engine = wk.Engine(
            store=store,
            pollers=[poller],
            hooks=NoopHooks(),
            instance_id="bench",
            http_client=http,
        )
        await engine.migrate()
        try:
            yield engine
        finally:
            await engine.stop()
            await store.close()
            if http is not None:
                await http.aclose()


async def _timed(run: Callable[[], Awaitable[wk.TickResult]]) -> tuple[float, wk.TickResult]:
    gc.collect()
    started = time.perf_counter()
    result = await run()
    return time.perf_counter() - started, result


async def _cycle(
    engine: wk.Engine, fetch: Timed, strategy: str, label: str, *, trigger: bool
) -> Row:
    name = next(iter(engine.pollers))
    if trigger:
        await engine.trigger(name)
    fetch.seconds = 0.0
    seconds, result = await _timed(engine.tick)
    if len(result.polled) != 1 or result.polled[0].error is not None:
        raise RuntimeError(f"{strategy} {label}: unexpected tick result {result}")
    cycle = result.polled[0]
    return Row(strategy, label, seconds, cycle.items, cycle.events, fetch.seconds)


def _change(api: FakeApi) -> None:
    """Touch 1% of the items, spread over the whole listing."""
    step = ITEMS // CHANGED
    for n in range(0, ITEMS, step):
        api.update(f"item-{n + 1:06d}", status="changed")


async def _dispatch(
    engine: wk.Engine,
    strategy: str,
    concurrency: int,
    handler: Callable[[wk.Event[Any], wk.HandlerContext], Awaitable[None]] = _handler,
) -> Row:
    name = next(iter(engine.pollers))
    key = PKey(name)
    pending = await engine.store.count_pending(key)
    engine.on(name, handler)
    seconds, _ = await _timed(engine.tick)
    left = await engine.store.count_pending(key)
    engine.off(name)
    if left:
        raise RuntimeError(f"dispatch left {left} of {pending} events pending")
    return Row(strategy, f"dispatch, concurrency {concurrency}", seconds, 0, pending)


async def _strategy(
    strategy: str,
    cursor: wk.CursorConfig,
    make_fetch: Callable[[FakeApi], Fetch],
    concurrency: int,
) -> list[Row]:
    api = _api()
    fetch = Timed(make_fetch(api))
    poller = _poller(strategy.split("/")[0], cursor, fetch, concurrency)
    async with _engine(poller) as engine:
        rows = [await _cycle(engine, fetch, strategy, "initial sync", trigger=False)]
        rows.append(await _dispatch(engine, strategy, concurrency))
        _change(api)
        rows.append(await _cycle(engine, fetch, strategy, "1% changed", trigger=True))
        rows.append(await _cycle(engine, fetch, strategy, "nothing changed", trigger=True))
    return rows


async def _dispatch_pair() -> list[Row]:
    """Dispatch at concurrency 1 and 32 over the same 100,000 events (two engines, each
    after its own initial sync of the same listing), so the two rates compare like for like."""
    rows = []
    for concurrency in (1, 32):
        api = _api()
        fetch = Timed(_page_fetch(api))
        poller = _poller("snapshot", wk.SnapshotDiff(), fetch, concurrency)
        async with _engine(poller) as engine:
            await _cycle(engine, fetch, SAME_EVENTS, "initial sync", trigger=False)
            rows.append(await _dispatch(engine, SAME_EVENTS, concurrency))
    return rows


async def _waiting_pair() -> list[Row]:
    """Dispatch at concurrency 1 and 32 to a handler that waits 1 ms per event (as one that
    posts to a webhook does): what concurrency is for. Fewer events, or concurrency 1 would
    take minutes."""
    rows = []
    for concurrency in (1, 32):
        api = _api(WAITING_ITEMS)
        fetch = Timed(_page_fetch(api))
        poller = _poller("snapshot", wk.SnapshotDiff(), fetch, concurrency)
        async with _engine(poller) as engine:
            await _cycle(engine, fetch, WAITING, "initial sync", trigger=False)
            rows.append(await _dispatch(engine, WAITING, concurrency, _waiting_handler))
    return rows


async def _serial() -> list[Row]:
    """Dispatch of 5,000 events with one ordering key for all: each event is handed over only
    once the previous one's ack has landed, a store round trip per event."""
    api = _api(WAITING_ITEMS)
    fetch = Timed(_page_fetch(api))
    poller = _poller("snapshot", wk.SnapshotDiff(), fetch, ordering_key=lambda event: "all")
    async with _engine(poller) as engine:
        await _cycle(engine, fetch, SERIAL, "initial sync", trigger=False)
        return [await _dispatch(engine, SERIAL, 1)]


async def _unversioned() -> list[Row]:
    """The snapshot scenario without ``version``: every re-listed item is hashed."""
    api = _api()
    fetch = Timed(_page_fetch(api))
    poller = _poller("snapshot", wk.SnapshotDiff(), fetch, version=False)
    label = "snapshot, no version"
    async with _engine(poller) as engine:
        return [
            await _cycle(engine, fetch, label, "initial sync", trigger=False),
            await _cycle(engine, fetch, label, "nothing changed", trigger=True),
        ]


async def _over_http() -> list[Row]:
    api = _api()
    http = httpx.AsyncClient(transport=api.transport())
    fetch = Timed(_http_page_fetch(api))
    poller = _poller("snapshot", wk.SnapshotDiff(), fetch)
    label = "snapshot via ctx.http"
    async with _engine(poller, http) as engine:
        return [
            await _cycle(engine, fetch, label, "initial sync", trigger=False),
            await _cycle(engine, fetch, label, "nothing changed", trigger=True),
        ]


def _sqlite_case() -> Any:
    return next(c for c in bench_stores.local_cases() if c.name == "SqliteStore")


async def _floor() -> tuple[float, float]:
    """Items/s of ``SqliteStore.commit_poll`` and of its floor, from bench_stores."""
    store_s, floor_s = await bench_stores.measure(_sqlite_case())
    return bench_stores.PAGE_ITEMS / store_s, bench_stores.PAGE_ITEMS / floor_s


def _hashed_ids(batch: Any) -> Any:
    events = [
        dataclasses.replace(row, event_id=hashlib.sha256(row.event_id.encode()).hexdigest())
        for row in batch.events
    ]
    return dataclasses.replace(batch, events=events)


async def _floor_at_scale(*, hashed: bool) -> float:
    """Items/s of the same floor writing all ``ITEMS`` as consecutive pages into one table.

    bench_stores' pages carry sequential event ids, which SQLite appends to the outbox's
    primary-key index; the engine's ids are SHA-256 digests, which land all over it.
    """
    pages = [bench_stores.make_page(n) for n in range(ITEMS // bench_stores.PAGE_ITEMS)]
    if hashed:
        pages = [_hashed_ids(page) for page in pages]
    async with _sqlite_case().floor() as write:
        gc.collect()
        started = time.perf_counter()
        for page in pages:
            await write(bench_stores.KEY, page)
        return ITEMS / (time.perf_counter() - started)


def _print(
    rows: list[Row], store_rate: float, floor_rate: float, at_scale: tuple[float, float]
) -> None:
    print(
        f"engine on SqliteStore: {ITEMS:,} items in pages of {PAGE}, fetch = direct FakeApi "
        "listing calls (one row via ctx.http), no-op hooks, system clock; 'fetch' = seconds "
        "spent inside fetch (the API's share)"
    )
    print(
        f"floor (bench_stores, this run, pages into a small database): {floor_rate:,.0f} "
        f"items/s; SqliteStore.commit_poll {store_rate:,.0f} items/s"
    )
    print(
        f"the same floor writing all {ITEMS:,} items into one growing database, as the "
        f"initial sync does: {at_scale[0]:,.0f} items/s with sequential event ids, "
        f"{at_scale[1]:,.0f} with SHA-256 ids (as the engine writes them) -- 'vs floor' "
        "compares with this last one, the same work"
    )
    print(
        f"{'strategy':<23}{'cycle':<26}{'seconds':>8}{'fetch':>7}{'items/s':>10}{'events':>9}"
        f"{'events/s':>10}{'vs floor':>10}{'vs initial':>11}"
    )
    initial: dict[str, float] = {}
    for row in rows:
        if row.cycle == "initial sync":
            initial[row.strategy] = row.seconds
        items_rate = f"{row.items / row.seconds:>10,.0f}" if row.items else f"{'-':>10}"
        events_rate = f"{row.events / row.seconds:>10,.0f}" if row.events else f"{'-':>10}"
        share = f"{row.items / row.seconds / at_scale[1]:>10.0%}" if row.items else f"{'-':>10}"
        speedup = (
            f"{initial[row.strategy] / row.seconds:>10.1f}x"
            if row.strategy in initial and not row.cycle.startswith("dispatch")
            else f"{'-':>11}"
        )
        fetch = f"{row.fetch:>7.2f}" if row.fetch else f"{'-':>7}"
        print(
            f"{row.strategy:<23}{row.cycle:<26}{row.seconds:>8.2f}{fetch}{items_rate}"
            f"{row.events:>9,}{events_rate}{share}{speedup}"
        )
    _print_targets(rows, floor_rate, at_scale[1])


def _print_targets(rows: list[Row], floor_rate: float, hashed_rate: float) -> None:
    def find(strategy: str, cycle: str) -> Row:
        return next(r for r in rows if r.strategy == strategy and r.cycle == cycle)

    initial = find("snapshot/page", "initial sync")
    unchanged = find("snapshot/page", "nothing changed")
    one = find(SAME_EVENTS, "dispatch, concurrency 1")
    many = find(SAME_EVENTS, "dispatch, concurrency 32")
    share = initial.items / initial.seconds / hashed_rate
    speedup = initial.seconds / unchanged.seconds
    rate_one = one.events / one.seconds
    rate_many = many.events / many.seconds
    checks = [
        (
            f"initial sync >= {FLOOR_SHARE_TARGET:.0%} of the floor",
            share >= FLOOR_SHARE_TARGET,
            f"{share:.0%} ({initial.items / initial.seconds / floor_rate:.0%} of the "
            "small-database floor)",
        ),
        (
            f"no-change re-scan >= {NO_CHANGE_SPEEDUP_TARGET:g}x faster than the initial sync",
            speedup >= NO_CHANGE_SPEEDUP_TARGET,
            f"{speedup:.1f}x",
        ),
        (
            f"dispatch at concurrency 1 >= {DISPATCH_TARGET:,} events/s",
            rate_one >= DISPATCH_TARGET,
            f"{rate_one:,.0f}/s",
        ),
        ("dispatch at concurrency 32 > at 1", rate_many > rate_one, f"{rate_many:,.0f}/s"),
    ]
    for text, ok, figure in checks:
        print(f"  {'met   ' if ok else 'MISSED'} {text}: {figure}")
    slow_one = find(WAITING, "dispatch, concurrency 1")
    slow_many = find(WAITING, "dispatch, concurrency 32")
    print(
        f"  (not a target) {WAITING}: concurrency 32 delivers "
        f"{slow_one.seconds / slow_many.seconds:.1f}x the events/s of concurrency 1"
    )
    serial = find(SERIAL, "dispatch, concurrency 1")
    print(
        f"  (not a target) {SERIAL}, each event acked before the next: "
        f"{serial.events / serial.seconds:,.0f} events/s"
    )


async def run() -> list[Row]:
    """Run every scenario and print the table; returns the measured rows."""
    # The initial syncs run without a handler on purpose; the engine's warning about it
    # would only clutter the table.
    logger = logging.getLogger("watukuy")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        store_rate, floor_rate = await _floor()
        at_scale = (
            await _floor_at_scale(hashed=False),
            await _floor_at_scale(hashed=True),
        )
        rows = await _strategy("snapshot/page", wk.SnapshotDiff(), _page_fetch, concurrency=1)
        rows += await _strategy(
            "timestamp",
            wk.TimestampCursor(field="updated_at", tie_break="id"),
            _since_fetch,
            concurrency=32,
        )
        rows += await _dispatch_pair()
        rows += await _waiting_pair()
        rows += await _serial()
        rows += await _unversioned()
        rows += await _over_http()
    finally:
        logger.setLevel(level)
    _print(rows, store_rate, floor_rate, at_scale)
    return rows


def main() -> None:
    """Entry point used by ``make bench``."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
