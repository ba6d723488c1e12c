"""Thousands of partitions of one poller in one process, on ``SqliteStore``.

The world: a ``FakeApi`` on a ``VirtualClock`` with one tenant per partition (three items
each), reached in process through ``api.transport()`` by ``ctx.http``; one partitioned
poller with a ``TimestampCursor`` over ``/t/<partition>/items`` and
``Schedule(min="30s", max="5m")`` by default (adaptive, 10% jitter); the engine on a ``SqliteStore``
file with ``max_concurrent_keys=64`` and a handler that records every delivery.

For each partition count the timeline is: ``start()`` and the initial sync of every key;
``minutes`` virtual minutes during which 1% of the partitions change per minute (one item
each, every change on a different partition, at random instants); a quiet period of
``schedule.max`` plus one minute so that every change is polled; ``stop()``; then three
``tick()`` calls from a fresh engine on the same store, at an instant when no key is due.

Definitions (the figures use exactly these):

* **pass**: one wake-up of the daemon. The harness advances the clock to the earliest
  pending timer and lets every woken task run to completion (SQLite work in its thread
  included); the CPU of the pass is ``time.process_time()`` (all threads) around that.
* **idle pass**: a pass in which no key was leased and nothing was fetched: the engine
  woke up without a key to poll (its periodic resync, a partitions refresh, or a stale
  wake-up that found the key not due).
* **key run**: a leased run of one key (drain, live lane, schedule write, release);
  **CPU per key run** is the CPU of the passes that ran keys, without a resync in them,
  divided by the key runs they made.
* **idle tick**: a ``tick()`` that polled no key.

Changes are delivered when an event with the item's partition, id and new ``version``
reached the handler.
"""

from __future__ import annotations

import asyncio
import cProfile
import random
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import watukuy as wk
from watukuy.testing import FakeApi, SeededRandom, VirtualClock, fake_items

from ._passes import DEFINITIONS, CountingSqliteStore, PartitionsRun, Pass, Profiles, figures

__all__ = ["DEFINITIONS", "PartitionsConfig", "PartitionsRun", "figures", "run"]

ITEMS_PER_TENANT = 3
RESYNC_EVERY = "15s"
MAX_CONCURRENT_KEYS = 64


@dataclass(frozen=True)
class PartitionsConfig:
    """Knobs of the scenario.

    Attributes:
        sizes: Partition counts to run, smallest first (the ratios compare the last to the
            first).
        minutes: Virtual minutes with changes.
        change_share: Share of the partitions changing per virtual minute.
        seed: Seed of every random choice.
        schedule: The poller's schedule (the quiet period after the changes lasts
            ``schedule.max`` plus one minute).
        profile_dir: Write cProfile statistics of idle and due passes here (largest size).
    """

    sizes: tuple[int, ...] = (1_000, 10_000)
    minutes: int = 5
    change_share: float = 0.01
    seed: int = 9
    schedule: wk.Schedule = field(default_factory=lambda: wk.Schedule(min="30s", max="5m"))
    profile_dir: Path | None = None


def _tenant(index: int) -> str:
    return f"p{index:05d}"


class _World:
    """The API, the store, the poller and the record of deliveries for one size."""

    def __init__(self, partitions: int, folder: Path, config: PartitionsConfig) -> None:
        self.clock = VirtualClock()
        self.api = FakeApi(self.clock, page_size=100, log_limit=1_000)
        self.names = [_tenant(i) for i in range(partitions)]
        # Stamped before the clock's start, so the first poll of a key sees all its items.
        self.items = fake_items(ITEMS_PER_TENANT, start=self.clock.now() - 60_000)
        for name in self.names:
            self.api.tenant(name).seed(self.items)
        self.store = CountingSqliteStore(folder / "scale.db")
        self.http = httpx.AsyncClient(transport=self.api.transport())
        self.random = SeededRandom(config.seed)
        self.fetches = 0
        self.delivered: set[tuple[str, str, int]] = set()
        base = self.api.base_url
        names = self.names

        async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
            self.fetches += 1
            response = await ctx.http.get(
                f"{base}/t/{ctx.partition.key}/items",
                params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break},
            )
            body = response.json()
            return wk.Page(items=body["data"], has_more=body["has_more"])

        self.poller: wk.PollerDefinition[dict[str, Any]] = wk.define_poller(
            name="accounts",
            identity=lambda item: item["id"],
            cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
            fetch=fetch,
            partitions=lambda: names,
            schedule=config.schedule,
        )

    async def handler(self, event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        data = event.data or {}
        self.delivered.add((event.partition, event.subject, int(data["version"])))

    def engine(self, instance_id: str) -> wk.Engine:
        engine = wk.Engine(
            store=self.store,
            pollers=[self.poller],
            clock=self.clock,
            random=self.random,
            instance_id=instance_id,
            http_client=self.http,
            max_concurrent_keys=MAX_CONCURRENT_KEYS,
            resync_every=RESYNC_EVERY,
        )
        engine.on(self.poller, self.handler)
        return engine

    def _mark(self) -> tuple[int, int, int]:
        return (self.fetches, sum(self.store.calls.values()), len(self.delivered))

    async def quiesce(self) -> None:
        """Let every woken task finish (the clock's settle gives up after a while)."""
        while True:
            mark = self._mark()
            await self.clock.settle()
            if self._mark() == mark:
                return


@dataclass(order=True)
class _Change:
    at: int
    tenant: str = field(compare=False)
    item: str = field(compare=False)


def _plan_changes(world: _World, config: PartitionsConfig, start: int) -> list[_Change]:
    rng = random.Random(config.seed)
    per_minute = max(1, round(len(world.names) * config.change_share))
    total = min(len(world.names), per_minute * config.minutes)
    tenants = rng.sample(world.names, total)
    width = max(3, len(str(ITEMS_PER_TENANT)))
    changes = []
    for index, tenant in enumerate(tenants):
        minute = index // per_minute
        at = start + minute * 60_000 + rng.randrange(60_000)
        item = f"item-{rng.randrange(ITEMS_PER_TENANT) + 1:0{width}d}"
        changes.append(_Change(at, tenant, item))
    return sorted(changes)


async def _step(world: _World, at: int, run: PartitionsRun, profiles: Profiles | None) -> None:
    calls = Counter(world.store.calls)
    fetches = world.fetches
    profile = cProfile.Profile() if profiles is not None else None
    if profile is not None:
        profile.enable()
    cpu = time.process_time()
    await world.clock.advance_to(at)
    await world.quiesce()
    cpu = time.process_time() - cpu
    if profile is not None:
        profile.disable()
    delta = world.store.calls - calls
    step = Pass(at, cpu, delta["acquire_lease"], world.fetches - fetches, delta)
    run.passes.append(step)
    if profiles is not None and profile is not None:
        if step.idle:
            profiles.keep("idle", profile)
        else:
            profiles.due_seen += 1
            if profiles.due_seen % 25 == 1:
                profiles.keep("due", profile)


async def _drive(
    world: _World,
    run: PartitionsRun,
    until: int,
    changes: list[_Change],
    expected: set[tuple[str, str, int]],
    profiles: Profiles | None,
) -> None:
    """Advance the clock timer by timer up to ``until``, applying changes on time."""
    clock = world.clock
    while True:
        due = clock.next_due_at()
        change_at = changes[0].at if changes else None
        if change_at is not None and change_at <= until and (due is None or change_at < due):
            await clock.advance_to(change_at)
            change = changes.pop(0)
            updated = world.api.tenant(change.tenant).update(change.item, status="changed")
            expected.add((change.tenant, change.item, int(updated["version"])))
            continue
        if due is None or due > until:
            break
        await _step(world, due, run, profiles)
    await clock.advance_to(until)
    await world.quiesce()


async def _one_size(partitions: int, config: PartitionsConfig, profile: bool) -> PartitionsRun:
    started = time.perf_counter()
    run = PartitionsRun(partitions)
    profiles = Profiles() if profile else None
    with tempfile.TemporaryDirectory(prefix="wk-scale-") as folder:
        world = _World(partitions, Path(folder), config)
        engine = world.engine("scale-daemon")
        await engine.migrate()
        expected = {(name, item["id"], 1) for name in world.names for item in world.items}
        run.created = len(expected)

        cpu, wall = time.process_time(), time.perf_counter()
        await engine.start()
        await world.quiesce()
        run.initial_cpu_s = time.process_time() - cpu
        run.initial_wall_s = time.perf_counter() - wall
        run.created_delivered = len(expected & world.delivered)

        start = world.clock.now()
        end_changes = start + config.minutes * 60_000
        run.window_ms = (start, end_changes)
        changes = _plan_changes(world, config, start)
        run.changes = len(changes)
        created = set(expected)
        await _drive(world, run, end_changes, changes, expected, profiles)
        quiet_end = end_changes + config.schedule.max_ms + 60_000
        await _drive(world, run, quiet_end, [], expected, profiles)
        await engine.stop()

        changed = expected - created
        run.changes_delivered = len(changed & world.delivered)
        run.created_delivered = len(created & world.delivered)

        ticker = world.engine("scale-tick")
        await ticker.tick()  # the first tick lists the partitions and the stored keys
        for _ in range(3):
            calls = Counter(world.store.calls)
            cpu = time.process_time()
            result = await ticker.tick()
            cpu = time.process_time() - cpu
            run.idle_ticks.append((cpu, len(result.polled), world.store.calls - calls))
        await ticker.stop()
        await world.http.aclose()
        await world.store.close()
    if profiles is not None and config.profile_dir is not None:
        profiles.dump(config.profile_dir, partitions)
    run.wall_s = time.perf_counter() - started
    return run


async def run(config: PartitionsConfig) -> list[PartitionsRun]:
    """Run every size in turn (largest last); returns their measurements."""
    results = []
    for index, size in enumerate(config.sizes):
        profile = config.profile_dir is not None and index == len(config.sizes) - 1
        print(f"  partitions: {size:,} partitions ...", flush=True)
        result = await _one_size(size, config, profile)
        print(
            f"  partitions: {size:,} done in {result.wall_s:.0f} s "
            f"({len(result.passes):,} passes, {sum(p.runs for p in result.passes):,} key runs)",
            flush=True,
        )
        results.append(result)
    return results


def main(config: PartitionsConfig | None = None) -> list[PartitionsRun]:
    """Run the scenario on its own (``python -m bench.scale partitions`` is the usual way)."""
    return asyncio.run(run(config or PartitionsConfig()))
