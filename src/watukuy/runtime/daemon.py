"""The daemon's schedule: which key wakes when, and the runs started from it.

:class:`DaemonSchedule` keeps this process's wake-up index (a heap of ``(time, seq, key)``
with the current wake-up of each key beside it), starts the runs that are due through the
admission lines of their budgets, reschedules each key when its run ends, and resyncs the
index with the store's due index so that changes made by other processes are seen. The loop
that calls it, round after round, is the engine's (``EngineCore._loop``): it only sequences
"start what is due, refresh, sleep until the next wake-up".
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from watukuy.model.errors import WatukuyError
from watukuy.model.partition import Partition
from watukuy.model.ports import Clock, Random, StateStore
from watukuy.model.records import dataclass
from watukuy.model.redact import RedactingLogger
from watukuy.model.rows import PKey, PollerState
from watukuy.scheduler import planned_top

from .admission import Admission
from .key_marks import KeyMarks
from .partition_book import PartitionBook
from .poller import PollerDefinition
from .runner import KeyRunResult, wake_time

__all__ = ["DaemonOptions", "DaemonSchedule", "RunKey", "STORE_ERROR_MIN_MS"]

_RETRY_LEASED_MIN_MS = 1_000
_RETRY_LEASED_FLOOR_MS = 100
_MAX_SPREAD_MS = 500
STORE_ERROR_MIN_MS = 1_000
"""The shortest wait before a key (or the resync) that the store failed is tried again."""


class RunKey(Protocol):
    """The engine's run of one key (``EngineCore._run_key``)."""

    def __call__(
        self,
        poller: PollerDefinition[Any],
        partition: Partition,
        *,
        force: bool = False,
        deadline: int | None = None,
    ) -> Awaitable[KeyRunResult]: ...


@dataclass(frozen=True, slots=True)
class DaemonOptions:
    """The engine's options the daemon's schedule reads.

    Attributes:
        lease_ttl_ms: The lease TTL: a key leased elsewhere is looked at again within it.
        resync_ms: How often the index is resynced with the store's due index.
        fair_spread_ms: The upper bound of the fair-share spread (``None``: the default, a
            tenth of the poller's ``schedule.min``, at most 500 ms).
        max_concurrent: Keys run at once (``None``: no limit).
    """

    lease_ttl_ms: int
    resync_ms: int
    fair_spread_ms: int | None
    max_concurrent: int | None


class DaemonSchedule:
    """The wake-up index of the daemon and the runs it starts.

    Args:
        store: The engine's store (its due index and the keys' state).
        clock: The engine's clock.
        random: The engine's randomness (the fair-share spread).
        pollers: The poller definitions by name.
        book: The partitions of each poller.
        marks: The per-key marks shared with the engine's runs and ``tick()``.
        admission: The admission lines of the budgets.
        run_key: The engine's run of one key.
        has_consumer: Whether a poller has at least one consumer now.
        log: The engine's logger.
        options: What the schedule reads of the engine's options.
    """

    def __init__(
        self,
        *,
        store: StateStore,
        clock: Clock,
        random: Random,
        pollers: Mapping[str, PollerDefinition[Any]],
        book: PartitionBook,
        marks: KeyMarks,
        admission: Admission,
        run_key: RunKey,
        has_consumer: Callable[[str], bool],
        log: RedactingLogger,
        options: DaemonOptions,
    ) -> None:
        self._store = store
        self._clock = clock
        self._random = random
        self._pollers = pollers
        self._book = book
        self._marks = marks
        self._admission = admission
        self._run_key = run_key
        self._has_consumer = has_consumer
        self._log = log
        self._options = options
        self.wake = asyncio.Event()
        """Set to make the loop look again before its planned wake-up."""
        self.running: dict[PKey, asyncio.Task[KeyRunResult]] = {}
        """The runs in progress, by key."""
        self.wake_at: dict[PKey, int] = {}
        """Each scheduled key's current wake-up (the heap may hold superseded ones)."""
        self._heap: list[tuple[int, int, PKey]] = []
        # key -> (poll wake-up, its deadline): the top of the jitter band it must start by.
        self._deadlines: dict[PKey, tuple[int, int]] = {}
        self._rerun: set[PKey] = set()  # keys asked for while they ran
        self._seq = itertools.count()
        self._next_resync = 0
        self._resync_failures = 0  # in a row (see refresh)
        self._stall_reported = False

    @property
    def next_resync(self) -> int:
        """When the next resync is due."""
        return self._next_resync

    # --- the index ----------------------------------------------------------------------

    def schedule(self, key: PKey, at: int | None) -> None:
        """Wake ``key`` at ``at`` (``None``: not at all), unless it already wakes sooner
        and is not running."""
        if at is None:
            self.wake_at.pop(key, None)
            return
        failed = self._marks.store_backoff.get(key)
        if failed is not None:
            # The store failed this key's last run: whatever its stored state says, the next
            # run waits out the backoff (a trigger, too: the store is what is failing).
            at = max(at, failed[1])
        current = self.wake_at.get(key)
        if current is not None and current <= at and key not in self.running:
            return
        self.wake_at[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), key))

    def forget(self, key: PKey) -> None:
        """Drop ``key``'s wake-up (its partition is gone)."""
        self.wake_at.pop(key, None)
        self._deadlines.pop(key, None)

    def wake_now(self, key: PKey) -> None:
        """Make ``key`` due now, whatever its current wake-up, and wake the loop."""
        self.wake_at.pop(key, None)
        self.schedule(key, self._clock.now())
        self.wake.set()

    async def adopt(self, name: str) -> None:
        """Schedule the keys of poller ``name``, added to a running engine, and wake the
        loop: they are read as at start-up (a key polled by an earlier process keeps its
        schedule, and an outbox it left is delivered first)."""
        poller = self._pollers[name]
        partitions = await self._book.of(name)
        await self._sweep(name, poller, partitions, self._clock.now(), recovering=True)
        self.wake.set()

    def look_again(self, name: str) -> None:
        """Make every scheduled key of poller ``name`` due now (events may be waiting for a
        consumer just attached) and wake the loop."""
        for key in list(self.wake_at):
            if key.poller == name:
                self.schedule(key, self._clock.now())
        self.wake.set()

    # --- the fair-share spread ----------------------------------------------------------

    def _spread(self, poller: PollerDefinition[Any]) -> int:
        """A random delay added to this engine's next look at a key.

        Replicas read the same ``next_due_at`` from the store; without a spread, the one
        whose event loop happens to be quickest wins every key, every time. With it, each
        wake-up goes to a random replica and the shares even out. Bounded by
        ``fair_share_spread`` (default: a tenth of ``schedule.min``, at most 500 ms).
        """
        limit = self._spread_limit(poller)
        return int(self._random.random() * limit) if limit > 0 else 0

    def _poll_top(
        self,
        poller: PollerDefinition[Any],
        result: KeyRunResult,
        state: PollerState,
        started: int,
        now: int,
    ) -> int:
        """The latest a poll wake-up should start the key's next run: the start of its last
        live run plus ``interval * (1 + jitter)``, less the planning allowance (what
        :func:`~watukuy.scheduler.on_success` plans at most, see
        :func:`~watukuy.scheduler.planned_top`)."""
        schedule = poller.schedule
        interval = state.schedule.interval_ms
        interval = interval if interval is not None else schedule.max_ms
        if any(r.lane == "live" for r in result.results):
            base = started  # this run polled: the runner counted from its start
        else:
            # No live cycle in this run: the schedule still counts from the last one, whose
            # lane started a little after its run did (so this top errs on the late side).
            last = state.schedule.last_poll_at
            base = last if last is not None and last <= now else now
        return base + planned_top(interval, schedule.jitter)

    def _spread_within(self, poller: PollerDefinition[Any], at: int, top: int) -> int:
        """The spread of a poll wake-up at ``at``, drawn under ``top``, the top of its
        jitter band (:meth:`_poll_top`).

        The spread is drawn uniformly from the room left between ``at`` and the top (at
        most the whole spread), so replicas still take turns and no wake-up takes a poll
        past what the schedule promises. A wake-up already past the top (a paced or
        throttled one) keeps its whole spread.
        """
        limit = self._spread_limit(poller)
        if limit <= 0:
            return 0
        if at <= top:
            limit = min(limit, top - at)
        return int(self._random.random() * limit)

    def _spread_limit(self, poller: PollerDefinition[Any]) -> int:
        if self._options.fair_spread_ms is not None:
            return self._options.fair_spread_ms
        return min(_MAX_SPREAD_MS, poller.schedule.min_ms // 10)

    # --- keeping in step with the store -------------------------------------------------

    async def refresh(self) -> None:
        """Resync when due, and refresh the partitions of every poller that needs it.

        A failing ``partitions()`` or store must not stop the loop: the error is logged,
        and a failed resync is tried again after a backoff.
        """
        try:
            if self._clock.now() >= self._next_resync:
                await self.resync()
            # A copy: add_poller() may add one while this awaits.
            for name in list(self._pollers):
                await self._book.of(name)
        except Exception as error:
            self._log.warning(
                "engine loop: %s", error, exc_info=not isinstance(error, WatukuyError)
            )
            if self._clock.now() >= self._next_resync:
                # The resync itself failed (the store's due index, say): try it again
                # after a backoff, not at once and again in a tight loop.
                self._resync_failures += 1
                backoff = STORE_ERROR_MIN_MS << min(self._resync_failures - 1, 10)
                resync_ms = self._options.resync_ms
                self._next_resync = self._clock.now() + min(resync_ms, backoff)

    async def resync(self, *, initial: bool = False) -> None:
        """Bring the wake-up index up to date with changes made by other processes.

        The first pass reads every key's state. The others ask the store's due index which
        keys wake before the next resync and re-read the state of ``AUDIT_BATCH`` keys in
        turn (the rolling audit), so an idle pass costs in proportion to the keys about to
        be due, not to all keys.
        """
        now = self._clock.now()
        for name, poller in list(self._pollers.items()):  # add_poller() may add one meanwhile
            try:
                partitions = await self._book.of(name)
            except Exception as error:
                self._log.warning("partitions() of %s failed: %s", name, error)
                continue
            if initial:
                await self._sweep(name, poller, partitions, now, recovering=True)
                continue
            # An entry within the spread of what this engine already holds is its own
            # schedule coming back (the index has no spread): nothing to do for it.
            slack = self._spread_limit(poller)
            for partition, at in await self._store.due_keys(name, now + self._options.resync_ms):
                key = PKey(name, partition)
                current = self.wake_at.get(key)
                if current is not None and current - slack <= at:
                    continue
                if key in self.running or self._book.named(key) is None:
                    continue
                self.wake_at.pop(key, None)
                self.schedule(key, at)
            audit = self._book.audit_slice(name, partitions)
            await self._sweep(name, poller, audit, now, recovering=False, sooner_only=True)
        self._next_resync = now + self._options.resync_ms
        self._resync_failures = 0

    async def _sweep(
        self,
        name: str,
        poller: PollerDefinition[Any],
        partitions: list[Partition],
        now: int,
        *,
        recovering: bool,
        sooner_only: bool = False,
    ) -> None:
        """Read these keys' state and reschedule them (start-up, and the rolling audit,
        which only ever brings a wake-up forward: a key woken too early finds itself not
        due and reschedules itself)."""
        has_consumer = self._has_consumer(name)
        for partition in partitions:
            key = PKey(name, partition.key)
            if key in self.running:
                continue
            state = await self._store.load_state(key)
            at = wake_time(poller, state, has_consumer=has_consumer, now=now)
            live = recovering and has_consumer and state is not None and not state.paused
            if live and await self._store.count_pending(key) > 0:
                at = now  # a previous process left events in the outbox: deliver them first
            if sooner_only:
                current = self.wake_at.get(key)
                if at is None or (current is not None and current <= at):
                    continue
            self.wake_at.pop(key, None)
            self.schedule(key, at)

    # --- starting runs ------------------------------------------------------------------

    def launch_due(self, now: int) -> int:
        """Start the runs that may start at ``now`` and return when to look again.

        Every due wake-up joins the line of its poller's budget; then runs start, the
        earliest deadline first, on the budgets with room (see runtime/admission.py).

        The next look is computed here, from the state the starts were decided on and the
        same ``now``: whatever may start at ``now`` has started, so a line still waiting
        is held back by its budget's room (a finishing run wakes the loop) or by its pace
        (whose time is among the wake-ups). Read at a later ``now``, a pace that became
        ready in between looked like nothing to wait for, and the loop slept until the
        next resync while every key was overdue.
        """
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if self.wake_at.get(entry[2]) != entry[0]:
                continue  # superseded by a later schedule()
            poller = self._pollers.get(entry[2].poller)
            budget = None if poller is None else poller.budget
            # The deadline stands only for the wake-up it was computed with.
            planned = self._deadlines.pop(entry[2], None)
            deadline = planned[1] if planned is not None and planned[0] == entry[0] else None
            urgent = entry[2] in self._marks.forced
            self._admission.push(entry, budget, urgent=urgent, deadline=deadline)
        max_concurrent = self._options.max_concurrent
        while max_concurrent is None or len(self.running) < max_concurrent:
            picked = self._admission.pop(self._current, now)
            if picked is None:
                break
            (_, _, key), budget = picked
            del self.wake_at[key]
            if key in self.running:
                # Asked for (a trigger, say) while the key runs: the run in progress may
                # already have read the state the request wrote, so run once more after it.
                self._rerun.add(key)
                continue
            poller = self._pollers.get(key.poller)
            partition = self._book.named(key)
            if poller is None or partition is None:
                continue
            force = self._marks.take_forced(key)
            self._admission.started(budget)
            task = asyncio.create_task(self._run_and_reschedule(poller, partition, force))
            self.running[key] = task
        return self._next_wake(now)

    def _current(self, entry: tuple[int, int, PKey]) -> bool:
        """``entry`` is still the key's wake-up (no later ``schedule`` superseded it)."""
        return self.wake_at.get(entry[2]) == entry[0]

    async def _run_and_reschedule(
        self, poller: PollerDefinition[Any], partition: Partition, force: bool
    ) -> KeyRunResult:
        key = PKey(poller.name, partition.key)
        result = KeyRunResult("not-due")
        started = self._clock.now()  # where the runner counts the next interval from
        try:
            result = await self._run_key(poller, partition, force=force)
        finally:
            self.running.pop(key, None)
            self._admission.finished(poller.budget)
            now = self._clock.now()
            at = self._next_at(poller, key, result, started, now)
            if key in self._rerun:
                self._rerun.discard(key)
                if at is not None and result.outcome in ("ran", "not-due"):
                    self._marks.forced.add(key)
                    at = now
            if key not in self.wake_at or (at is not None and at < self.wake_at[key]):
                self.wake_at.pop(key, None)
                self.schedule(key, at)
            self.wake.set()
        return result

    def _next_at(
        self,
        poller: PollerDefinition[Any],
        key: PKey,
        result: KeyRunResult,
        started: int,
        now: int,
    ) -> int | None:
        """When to look at ``key`` again after a run that ended with ``result``."""
        if result.outcome == "leased":
            # Look again when the holder's lease runs out (a dead replica's keys move to
            # a live one within one TTL), or sooner if the holder lets go: its run ends
            # by rescheduling the key, which this engine sees at that time.
            retry = now + max(_RETRY_LEASED_MIN_MS, self._options.lease_ttl_ms // 2)
            if result.leased_until is not None:
                retry = min(retry, max(now + _RETRY_LEASED_FLOOR_MS, result.leased_until))
            return retry + self._spread(poller)
        if result.outcome == "lease-lost":
            return now + self._options.lease_ttl_ms // 2
        if result.state is None:
            failed = self._marks.store_backoff.get(key)
            return failed[1] if failed is not None else now + STORE_ERROR_MIN_MS
        at = result.wake_at  # computed by the run, from the state it saved
        if at is not None and at > now and at == result.state.schedule.next_due_at:
            # A poll wake-up: replicas race for these, and its deadline orders the
            # admission line when more keys are due than the budget serves.
            top = self._poll_top(poller, result, result.state, started, now)
            at += self._spread_within(poller, at, top)
            self._deadlines[key] = (at, max(at, top))
        return at

    def _next_wake(self, now: int) -> int:
        """When the loop looks again, given that :meth:`launch_due` ran at ``now``.

        A run that ends, a trigger or a new partition wakes the loop sooner.
        """
        candidates = [self._next_resync]
        while self._heap and self.wake_at.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        max_concurrent = self._options.max_concurrent
        full = max_concurrent is not None and len(self.running) >= max_concurrent
        if self._heap and not full:
            candidates.append(self._heap[0][0])
        for name in self._pollers:
            refresh = self._book.next_refresh(name)
            if refresh is not None:
                candidates.append(refresh)
        paced = None if full else self._admission.next_start(now)
        if paced is not None:
            if paced <= now and not self._stall_reported:
                # The invariant: after the starts at `now`, no line with room may still be
                # ready at `now`. Should a rule ever break it, say so (once) and look again
                # at once instead of sleeping past a key that may run.
                self._stall_reported = True
                self._log.error(
                    "engine loop: a run could start at %d but did not: %r", now, self._admission
                )
            candidates.append(paced)
        return min(candidates)

    # --- stopping -----------------------------------------------------------------------

    async def settle(self, *, drain: bool, timeout_ms: int) -> None:
        """End the runs in progress: let them finish (up to ``timeout_ms``) when draining,
        then cancel what is left; empty the admission lines and the deadlines."""
        running = list(self.running.values())
        if running and drain:
            await _wait_with_clock(running, self._clock, timeout_ms)
        for task in running:
            if not task.done():
                task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        self.running.clear()
        self._admission.clear()
        self._deadlines.clear()


async def _wait_with_clock(tasks: list[asyncio.Task[Any]], clock: Clock, timeout_ms: int) -> None:
    timer = asyncio.ensure_future(clock.sleep(timeout_ms))
    everything = asyncio.ensure_future(asyncio.gather(*tasks, return_exceptions=True))
    try:
        await asyncio.wait({timer, everything}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        await asyncio.gather(timer, return_exceptions=True)
        if not everything.done():
            everything.cancel()
            await asyncio.gather(everything, return_exceptions=True)
