"""What ``retain="payload"`` with change sets costs, next to ``retain="hash"`` (the default).

The same 100,000-item sync as ``bench_engine``'s snapshot scenario (``SnapshotDiff`` over an
in-process ``FakeApi`` in pages of 500, a ``SqliteStore`` file, no-op hooks), run three
times: with ``retain="hash"``; with ``retain="payload"`` and the patch computation switched
off (what ``retain="payload"`` cost before change sets: bigger rows, ``previous`` parsed);
and with ``retain="payload"`` as it ships. For each:

* **initial sync**: the 100,000 ``created`` events are committed (no handler attached);
* **dispatch created**: they are delivered to a no-op handler (no patch: ``created``);
* **all changed**: every item's ``status`` changes, a cycle commits 100,000 ``updated``
  events, which are then delivered (**dispatch updated**): with ``retain="payload"``
  each delivery computes ``event.changes``, a JSON Patch from ``previous`` to ``data``;
* **filtered**: the same again with the handler behind ``when=wk.changed("status",
  to="paid")``, which only a tenth of the items reach, so nine tenths are acked unseen.

Storage is read from the database afterwards: the bytes the ``payload`` column of
``watukuy_items`` holds per item, and the database file per item. One more figure says why
the patch is computed when an event is delivered rather than stored with it: the bytes a
stored patch would add to each ``updated`` outbox row (and log row), against the time
computing it takes.

Run with ``make bench`` or ``python -m bench changes``. Figures, not pass/fail.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import watukuy as wk
from watukuy.diff.patch import json_patch
from watukuy.model.rows import PKey
from watukuy.pipeline.delivery import Rehydration
from watukuy.testing import FakeApi, fake_items

try:
    from bench.bench_engine import ITEMS, PAGE, NoopHooks
except ImportError:  # run as a script from inside bench/
    from bench_engine import (  # type: ignore[import-not-found,no-redef,unused-ignore]
        ITEMS,
        PAGE,
        NoopHooks,
    )

PAID_EVERY = 10  # one item in ten goes to "paid" in the filtered round


@dataclass
class Run:
    """The figures of one ``retain`` mode."""

    retain: str
    patches: bool = True
    seconds: dict[str, float] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    payload_bytes: int = 0
    file_bytes: int = 0
    delivered: int = 0


def _api() -> FakeApi:
    start = wk.SystemClock().now() - (ITEMS + 3_600) * 1_000
    return FakeApi(items=fake_items(ITEMS, start=start), page_size=PAGE, log_limit=1_000)


def _poller(api: FakeApi, retain: str) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        page = api.list_page(ctx.page, PAGE)
        return wk.Page(items=page.data, has_more=page.has_more)

    return wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        version=lambda item: item["version"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=wk.Schedule(min="1h", max="2h"),
        max_pages_per_cycle=10_000,
        retain="payload" if retain == "payload" else "hash",
    )


async def _timed(run: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()
    started = time.perf_counter()
    await run()
    return time.perf_counter() - started


async def _poll(engine: wk.Engine, run: Run, label: str) -> None:
    await engine.trigger("orders")
    result: list[wk.TickResult] = []

    async def tick() -> None:
        result.append(await engine.tick())

    run.seconds[label] = await _timed(tick)
    cycle = result[0].polled[0]
    if cycle.error is not None:
        raise RuntimeError(f"{run.retain} {label}: {cycle.error}")
    run.events[label] = cycle.events


async def _dispatch(
    engine: wk.Engine, run: Run, label: str, when: wk.EventFilter | None = None
) -> None:
    key = PKey("orders")
    pending = await engine.store.count_pending(key)
    delivered: list[int] = [0]

    async def counting(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        delivered[0] += 1

    if when is None:
        engine.on("orders", counting)
    else:
        engine.on("orders", counting, when=when)
    run.seconds[label] = await _timed(engine.tick)
    engine.off("orders")
    left = await engine.store.count_pending(key)
    if left:
        raise RuntimeError(f"{run.retain} {label}: {left} of {pending} events left pending")
    run.events[label] = pending
    run.delivered = delivered[0]


def _ids() -> list[str]:
    width = len(str(ITEMS))  # fake_items numbers its ids to the width of the count
    return [f"item-{n:0{width}d}" for n in range(1, ITEMS + 1)]


def _no_patches(self: Rehydration, stored: wk.Event[Any]) -> None:
    return None


def _storage(path: Path, run: Run) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (payload,) = db.execute(
            "SELECT coalesce(sum(length(payload)), 0) FROM watukuy_items"
        ).fetchone()
    run.payload_bytes = int(payload)
    run.file_bytes = path.stat().st_size


async def _run(retain: str, *, patches: bool = True) -> Run:
    api = _api()
    run = Run(retain, patches)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "engine.db"
        store = wk.SqliteStore(path)
        engine = wk.Engine(
            store=store, pollers=[_poller(api, retain)], hooks=NoopHooks(), instance_id="bench"
        )
        await engine.migrate()
        try:
            await _poll(engine, run, "initial sync")
            await _dispatch(engine, run, "dispatch created")
            for identity in _ids():
                api.update(identity, status="shipped")
            await _poll(engine, run, "all changed")
            await _dispatch(engine, run, "dispatch updated")
            if retain == "payload" and patches:
                for n, identity in enumerate(_ids(), 1):
                    api.update(identity, status="paid" if n % PAID_EVERY == 0 else "lost")
                await _poll(engine, run, "all changed again")
                await _dispatch(
                    engine, run, "dispatch, 1 in 10 passes", wk.changed("status", to="paid")
                )
        finally:
            await engine.stop()
            await store.close()
        _storage(path, run)
    return run


def _stored_patch_cost() -> tuple[float, float]:
    """(bytes a stored patch adds to one updated event's JSON, microseconds to compute it)."""
    before = fake_items(1_000, start=0)
    after = [{**item, "status": "shipped", "version": 2} for item in before]
    started = time.perf_counter()
    patches = [json_patch(a, b) for a, b in zip(before, after, strict=True)]
    micros = (time.perf_counter() - started) / len(patches) * 1e6
    size = sum(len(json.dumps(patch, separators=(",", ":"))) for patch in patches) / len(patches)
    return size + len(',"changes":'), micros


def _print(hashed: Run, unpatched: Run, payload: Run) -> None:
    print(
        f"change sets on SqliteStore: {ITEMS:,} items in pages of {PAGE} (SnapshotDiff, "
        "direct FakeApi listing calls, no-op hooks, a no-op handler at concurrency 1)"
    )
    print(
        f"{'cycle':<28}{'hash s':>9}{'payload, no patch s':>21}{'payload s':>11}"
        f"{'payload/hash':>14}{'events':>10}"
    )
    for label, seconds in payload.seconds.items():
        base = hashed.seconds.get(label)
        middle = unpatched.seconds.get(label)
        ratio = f"{seconds / base:>13.2f}x" if base else f"{'-':>14}"
        shown = f"{base:>9.2f}" if base is not None else f"{'-':>9}"
        between = f"{middle:>21.2f}" if middle is not None else f"{'-':>21}"
        print(
            f"{label:<28}{shown}{between}{seconds:>11.2f}{ratio}{payload.events.get(label, 0):>10,}"
        )
    filtered = payload.seconds.get("dispatch, 1 in 10 passes")
    if filtered is not None:
        print(
            f"  filtered dispatch: {payload.delivered:,} of {ITEMS:,} events reached the "
            f"handler, the rest were acked unseen; {ITEMS / filtered:,.0f} events/s overall"
        )
    label = "dispatch updated"
    print(
        f"  dispatch of updated events: {ITEMS / hashed.seconds[label]:,.0f} events/s with "
        f'retain="hash", {ITEMS / unpatched.seconds[label]:,.0f} with retain="payload" '
        f"without patches, {ITEMS / payload.seconds[label]:,.0f} with patches "
        f"({(payload.seconds[label] - unpatched.seconds[label]) / ITEMS * 1e6:+,.1f} us "
        "per event for the patch)"
    )
    print(
        f'  storage: retain="payload" keeps {payload.payload_bytes / ITEMS:,.0f} bytes of '
        f"payload per item (the JSON of these items); database file "
        f"{payload.file_bytes / ITEMS:,.0f} bytes per item, against "
        f'{hashed.file_bytes / ITEMS:,.0f} with retain="hash"'
    )
    size, micros = _stored_patch_cost()
    print(
        f"  storing the patch with each event instead would add {size:,.0f} bytes to every "
        f"updated outbox (and log) row, to save {micros:,.1f} us of compute per delivery: "
        "patches are computed at delivery"
    )


async def run() -> tuple[Run, Run, Run]:
    """Both modes, then the table."""
    logger = logging.getLogger("watukuy")
    level = logger.level
    logger.setLevel(logging.ERROR)  # the syncs run without a handler on purpose
    computing = Rehydration.changes_of
    try:
        hashed = await _run("hash")
        Rehydration.changes_of = _no_patches  # type: ignore[method-assign]
        try:
            unpatched = await _run("payload", patches=False)
        finally:
            Rehydration.changes_of = computing  # type: ignore[method-assign]
        payload = await _run("payload")
    finally:
        logger.setLevel(level)
    _print(hashed, unpatched, payload)
    return hashed, unpatched, payload


def main() -> None:
    """Entry point used by ``make bench``."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
