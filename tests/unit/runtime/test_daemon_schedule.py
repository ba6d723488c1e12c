"""The daemon's schedule without an engine: wake-ups, starts and rescheduling on a virtual
clock, with a stand-in for the engine's run of a key."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import watukuy as wk
from watukuy.model.partition import Partition
from watukuy.model.redact import DEFAULT_REDACTION, RedactingLogger
from watukuy.model.rows import PKey, PollerState, ScheduleState
from watukuy.runtime.daemon import STORE_ERROR_MIN_MS, DaemonOptions, DaemonSchedule
from watukuy.runtime.engine_options import admission_for
from watukuy.runtime.key_marks import KeyMarks
from watukuy.runtime.partition_book import PartitionBook
from watukuy.runtime.poller import PollerDefinition
from watukuy.runtime.runner import KeyRunResult
from watukuy.testing import SeededRandom, VirtualClock

KEY = PKey("orders", "")


class Runs:
    """Stands in for ``EngineCore._run_key``: records each call, answers ``result``."""

    def __init__(self, result: KeyRunResult) -> None:
        self.result = result
        self.calls: list[tuple[PKey, bool]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(
        self,
        poller: PollerDefinition[Any],
        partition: Partition,
        *,
        force: bool = False,
        deadline: int | None = None,
    ) -> KeyRunResult:
        self.calls.append((PKey(poller.name, partition.key), force))
        await self.release.wait()
        return self.result


def daemon(runs: Runs, clock: VirtualClock, marks: KeyMarks | None = None) -> DaemonSchedule:
    orders = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=lambda ctx: [],
    )
    pollers = {"orders": orders}
    store = wk.MemoryStore()
    book = PartitionBook(pollers, store, clock, appeared=lambda k, n: None, disappeared=print)
    return DaemonSchedule(
        store=store,
        clock=clock,
        random=SeededRandom(7),
        pollers=pollers,
        book=book,
        marks=marks or KeyMarks(),
        admission=admission_for({}, pollers),
        run_key=runs,
        has_consumer=lambda name: True,
        log=RedactingLogger(logging.getLogger("watukuy"), DEFAULT_REDACTION),
        options=DaemonOptions(
            lease_ttl_ms=30_000, resync_ms=15_000, fair_spread_ms=0, max_concurrent=None
        ),
    )


def ran(next_due_at: int) -> KeyRunResult:
    state = PollerState(schedule=ScheduleState(next_due_at=next_due_at))
    return KeyRunResult("ran", state=state, wake_at=next_due_at)  # what the run computed


async def settled(schedule: DaemonSchedule) -> None:
    while schedule.running:
        await asyncio.sleep(0)


def test_a_key_keeps_its_sooner_wake_up_and_none_unschedules_it() -> None:
    clock = VirtualClock()
    schedule = daemon(Runs(ran(0)), clock)
    now = clock.now()
    schedule.schedule(KEY, now + 5_000)
    schedule.schedule(KEY, now + 9_000)
    assert schedule.wake_at == {KEY: now + 5_000}
    schedule.schedule(KEY, now + 1_000)
    assert schedule.wake_at == {KEY: now + 1_000}
    schedule.schedule(KEY, None)
    assert schedule.wake_at == {}


def test_a_key_the_store_failed_waits_out_its_backoff() -> None:
    clock = VirtualClock()
    marks = KeyMarks(store_backoff={KEY: (1, clock.now() + 4_000)})
    schedule = daemon(Runs(ran(0)), clock, marks)
    schedule.schedule(KEY, clock.now())
    assert schedule.wake_at == {KEY: clock.now() + 4_000}


async def test_a_due_key_runs_and_is_rescheduled_from_its_state() -> None:
    clock = VirtualClock()
    now = clock.now()
    runs = Runs(ran(now + 60_000))
    schedule = daemon(runs, clock)
    await schedule.resync(initial=True)  # a key never polled is due now
    assert schedule.wake_at == {KEY: now}
    assert schedule.next_resync == now + 15_000
    next_look = schedule.launch_due(now)
    assert list(schedule.running) == [KEY]
    assert next_look == now + 15_000
    await settled(schedule)
    assert runs.calls == [(KEY, False)]
    assert schedule.wake_at[KEY] == now + 60_000
    assert schedule.wake.is_set()


async def test_a_forced_key_runs_forced_once() -> None:
    clock = VirtualClock()
    marks = KeyMarks(forced={KEY})
    runs = Runs(ran(clock.now() + 60_000))
    schedule = daemon(runs, clock, marks)
    schedule.wake_now(KEY)
    schedule.launch_due(clock.now())
    await settled(schedule)
    assert runs.calls == [(KEY, True)]
    assert marks.forced == set()


async def test_a_key_asked_for_while_it_runs_runs_again_forced() -> None:
    clock = VirtualClock()
    marks = KeyMarks()
    runs = Runs(ran(clock.now() + 60_000))
    runs.release.clear()
    schedule = daemon(runs, clock, marks)
    schedule.wake_now(KEY)
    schedule.launch_due(clock.now())
    await asyncio.sleep(0)
    schedule.wake_now(KEY)  # a trigger while the run is in progress
    schedule.launch_due(clock.now())
    runs.release.set()
    await settled(schedule)
    assert schedule.wake_at == {KEY: clock.now()}
    assert marks.forced == {KEY}


async def test_a_leased_key_is_looked_at_again_when_the_lease_runs_out() -> None:
    clock = VirtualClock()
    now = clock.now()
    schedule = daemon(Runs(KeyRunResult("leased", leased_until=now + 7_000)), clock)
    schedule.wake_now(KEY)
    schedule.launch_due(now)
    await settled(schedule)
    assert schedule.wake_at == {KEY: now + 7_000}


async def test_a_run_without_a_state_waits_for_the_store() -> None:
    clock = VirtualClock()
    schedule = daemon(Runs(KeyRunResult("ran")), clock)
    schedule.wake_now(KEY)
    schedule.launch_due(clock.now())
    await settled(schedule)
    assert schedule.wake_at == {KEY: clock.now() + STORE_ERROR_MIN_MS}


async def test_a_forgotten_key_does_not_run() -> None:
    clock = VirtualClock()
    runs = Runs(ran(0))
    schedule = daemon(runs, clock)
    schedule.schedule(KEY, clock.now())
    schedule.forget(KEY)
    assert schedule.launch_due(clock.now()) == schedule.next_resync
    assert runs.calls == []


async def test_settling_without_drain_cancels_the_runs() -> None:
    clock = VirtualClock()
    runs = Runs(ran(0))
    runs.release.clear()
    schedule = daemon(runs, clock)
    schedule.wake_now(KEY)
    schedule.launch_due(clock.now())
    task = schedule.running[KEY]
    await schedule.settle(drain=False, timeout_ms=1_000)
    assert task.cancelled()
    assert schedule.running == {}
