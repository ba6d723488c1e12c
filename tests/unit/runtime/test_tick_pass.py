"""A tick pass without an engine: which keys it visits, and what its workers find."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import watukuy as wk
from watukuy.model.partition import Partition
from watukuy.model.redact import DEFAULT_REDACTION, RedactingLogger
from watukuy.model.rows import PKey
from watukuy.runtime.key_marks import KeyMarks
from watukuy.runtime.partition_book import PartitionBook
from watukuy.runtime.poller import PollerDefinition
from watukuy.runtime.runner import KeyRunResult, TickPollResult
from watukuy.runtime.tick import TickKeys, TickPass
from watukuy.testing import VirtualClock

TENANTS = ["a", "b", "c"]


def tenants() -> PollerDefinition[Any]:
    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=lambda ctx: [],
        partitions=lambda: TENANTS,
    )


def polled(key: PKey) -> TickPollResult:
    return TickPollResult(
        poller=key.poller,
        partition=key.partition,
        lane="live",
        items=1,
        events=0,
        delivered=0,
        duration_ms=0,
    )


class Runs:
    """Stands in for ``EngineCore._run_key``: each partition answers its own outcome."""

    def __init__(self, outcomes: dict[str, str], clock: VirtualClock, took_ms: int = 0) -> None:
        self.outcomes = outcomes
        self.clock = clock
        self.took_ms = took_ms
        self.calls: list[tuple[str, bool, int | None]] = []

    async def __call__(
        self,
        poller: PollerDefinition[Any],
        partition: Partition,
        *,
        force: bool = False,
        deadline: int | None = None,
    ) -> KeyRunResult:
        self.calls.append((partition.key, force, deadline))
        await self.clock.sleep(self.took_ms)
        outcome: Any = self.outcomes.get(partition.key, "ran")
        results = [polled(PKey(poller.name, partition.key))] if outcome == "ran" else []
        return KeyRunResult(outcome, results=results)


def log() -> RedactingLogger:
    return RedactingLogger(logging.getLogger("watukuy"), DEFAULT_REDACTION)


async def test_the_first_tick_visits_every_key_then_only_the_due_and_forced_ones() -> None:
    clock = VirtualClock()
    poller = tenants()
    store = wk.MemoryStore()
    book = PartitionBook(
        {"orders": poller}, store, clock, appeared=lambda k, n: None, disappeared=print
    )
    marks = KeyMarks(forced={PKey("orders", "b")})
    keys = TickKeys(store, book, marks, log())
    partitions = await book.of("orders")
    assert [p.key for p in await keys.choose("orders", partitions, clock.now())] == TENANTS
    # Warm: the due index of an empty store lists nothing; the forced key is visited.
    assert [p.key for p in await keys.choose("orders", partitions, clock.now())] == ["b"]
    keys.revisit("orders")  # a consumer was attached: every key again
    assert [p.key for p in await keys.choose("orders", partitions, clock.now())] == TENANTS


async def test_a_pass_returns_what_its_workers_found() -> None:
    clock = VirtualClock()
    poller = tenants()
    marks = KeyMarks(
        forced={PKey("orders", "a")},
        store_backoff={PKey("orders", "c"): (1, clock.now() + 5_000)},
    )
    runs = Runs({"b": "leased"}, clock)
    tick = TickPass(
        ["orders"],
        None,
        clock=clock,
        store=wk.MemoryStore(),
        marks=marks,
        run_key=runs,
        concurrency=2,
    )
    tick.not_due(4)
    found = await tick.run([(poller, Partition(name)) for name in TENANTS])
    assert found is tick.findings
    assert [r.partition for r in found.polled] == ["a"]
    assert found.skipped_leased == 1
    assert found.skipped_not_due == 5  # the four not chosen, and c backing off
    assert not found.timed_out
    assert sorted(runs.calls) == [("a", True, None), ("b", False, None)]
    assert marks.forced == set()


async def test_a_pass_past_its_deadline_starts_no_more_runs() -> None:
    clock = VirtualClock()
    poller = tenants()
    runs = Runs({}, clock, took_ms=1_000)
    deadline = clock.now() + 500
    tick = TickPass(
        ["orders"],
        deadline,
        clock=clock,
        store=wk.MemoryStore(),
        marks=KeyMarks(),
        run_key=runs,
        concurrency=1,
    )
    work = asyncio.ensure_future(tick.run([(poller, Partition(name)) for name in TENANTS]))
    while not work.done():
        await clock.advance("100ms")
    found = work.result()
    assert [call[0] for call in runs.calls] == ["a"]
    assert found.timed_out
    assert [r.partition for r in found.polled] == ["a"]


class Backlogs:
    """Stands in for ``EngineCore._run_key``: each partition has cycles left to run, and the
    scheduler plans its next run ``wait_ms`` after each cut-short one."""

    def __init__(self, cycles: dict[str, int], clock: VirtualClock, wait_ms: int = 0) -> None:
        self.left = dict(cycles)
        self.clock = clock
        self.wait_ms = wait_ms
        self.calls: list[str] = []

    async def __call__(
        self,
        poller: PollerDefinition[Any],
        partition: Partition,
        *,
        force: bool = False,
        deadline: int | None = None,
    ) -> KeyRunResult:
        self.calls.append(partition.key)
        self.left[partition.key] -= 1
        pending = self.left[partition.key] > 0
        result = dataclasses.replace(polled(PKey(poller.name, partition.key)), pending=pending)
        wake_at = self.clock.now() + (self.wait_ms if pending else 60_000)
        return KeyRunResult("ran", results=[result], wake_at=wake_at)


def backlog_pass(
    clock: VirtualClock, runs: Backlogs, *, catch_up: bool = True, deadline: int | None = None
) -> TickPass:
    return TickPass(
        ["orders"],
        deadline,
        clock=clock,
        store=wk.MemoryStore(),
        marks=KeyMarks(),
        run_key=runs,
        concurrency=1,
        catch_up=catch_up,
    )


async def test_keys_still_behind_run_again_in_rounds_and_add_up() -> None:
    clock = VirtualClock()
    runs = Backlogs({"a": 3, "b": 1, "c": 2}, clock)
    found = await backlog_pass(clock, runs).run([(tenants(), Partition(n)) for n in TENANTS])
    assert runs.calls == ["a", "b", "c", "a", "c", "a"]
    assert [(r.partition, r.cycles, r.items, r.pending) for r in found.polled] == [
        ("a", 3, 3, False),
        ("b", 1, 1, False),
        ("c", 2, 2, False),
    ]


async def test_a_key_paced_by_the_scheduler_runs_again_once_the_wait_is_over() -> None:
    clock = VirtualClock()
    begun = clock.now()
    runs = Backlogs({"a": 3, "b": 1, "c": 1}, clock, wait_ms=1_000)  # rate-limit pacing
    tick = backlog_pass(clock, runs, deadline=begun + 60_000)
    work = asyncio.ensure_future(tick.run([(tenants(), Partition(n)) for n in TENANTS]))
    while not work.done():
        await clock.advance("100ms")
    assert runs.calls == ["a", "b", "c", "a", "a"]
    assert not any(r.pending for r in work.result().polled)
    assert clock.now() - begun >= 2_000


async def test_without_a_deadline_a_paced_key_is_left_pending() -> None:
    clock = VirtualClock()
    runs = Backlogs({"a": 3, "b": 1, "c": 1}, clock, wait_ms=1_000)
    found = await backlog_pass(clock, runs).run([(tenants(), Partition(n)) for n in TENANTS])
    assert runs.calls == ["a", "b", "c"]  # and the pass did not wait on the clock
    assert [r.partition for r in found.polled if r.pending] == ["a"]


async def test_a_wait_past_the_deadline_leaves_the_key_pending() -> None:
    clock = VirtualClock()
    runs = Backlogs({"a": 3, "b": 1, "c": 1}, clock, wait_ms=1_000)
    tick = backlog_pass(clock, runs, deadline=clock.now() + 900)
    found = await tick.run([(tenants(), Partition(n)) for n in TENANTS])
    assert runs.calls == ["a", "b", "c"]
    assert [(r.partition, r.pending) for r in found.polled] == [
        ("a", True),
        ("b", False),
        ("c", False),
    ]
    assert not found.timed_out


async def test_without_catch_up_each_key_runs_once() -> None:
    clock = VirtualClock()
    runs = Backlogs({"a": 3, "b": 1, "c": 2}, clock)
    tick = backlog_pass(clock, runs, catch_up=False)
    found = await tick.run([(tenants(), Partition(n)) for n in TENANTS])
    assert runs.calls == ["a", "b", "c"]
    assert [r.partition for r in found.polled if r.pending] == ["a", "c"]


def test_a_run_that_only_delivered_adds_up_without_changing_what_the_lane_said() -> None:
    cycle = dataclasses.replace(polled(PKey("orders", "a")), delivered=1, pending=True)
    delivered = dataclasses.replace(cycle, items=0, delivered=2, cycles=0, pending=False)
    assert cycle.then(delivered) == dataclasses.replace(cycle, delivered=3)
    caught_up = dataclasses.replace(cycle, pending=False)
    assert cycle.then(caught_up) == dataclasses.replace(caught_up, items=2, delivered=2, cycles=2)
