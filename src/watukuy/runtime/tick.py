"""One ``tick()`` pass: which keys it visits, and the workers that run them.

``EngineCore.tick`` lists each poller's partitions, asks :class:`TickKeys` which of them to
visit, and hands them to a :class:`TickPass`, whose workers run them a few at a time and
return what they found. A pass cut short by its deadline still has what finished before:
its findings are kept as the workers go, and :meth:`TickPass.stalls` says what each
unfinished run was waiting for.

A key whose run stopped with more to fetch (the page cap cut its cycle, say) is run again
in a catch-up round after every chosen key had its turn, and so on until each key caught
up, the deadline comes near, or (without a deadline) a key ran :data:`MAX_RUNS_PER_KEY`
times. A key runs again when the scheduler planned its next run (:func:`catch_up_at`): at
once, or, in a pass with a deadline, once the wait rate-limit pacing asked for is over. Rounds keep the keys fair: a
key with a long backlog takes one run per round, like every other key still behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import field
from typing import Any

from watukuy.model.errors import StoreError
from watukuy.model.partition import Partition
from watukuy.model.ports import Clock, StateStore
from watukuy.model.records import dataclass
from watukuy.model.redact import RedactingLogger
from watukuy.model.rows import PKey

from .daemon import RunKey
from .key_marks import KeyMarks
from .partition_book import PartitionBook
from .poller import PollerDefinition
from .runner import KeyRunResult, TickPollResult, catch_up_at
from .stalls import Stall, diagnose

__all__ = ["MAX_RUNS_PER_KEY", "TickFindings", "TickKeys", "TickPass"]

MAX_RUNS_PER_KEY = 100
"""Runs of one key in a ``tick()`` without ``max_duration``: a key still behind after them is
reported pending (at the default page cap, 5,000 pages)."""

_Key = tuple[PollerDefinition[Any], Partition]


class TickKeys:
    """Chooses the partitions each tick visits, remembering which pollers a tick has
    already visited whole.

    Args:
        store: The engine's store (its due index).
        book: The partitions of each poller.
        marks: The per-key marks (forced keys, keys the store failed).
        log: The engine's logger.
    """

    def __init__(
        self, store: StateStore, book: PartitionBook, marks: KeyMarks, log: RedactingLogger
    ) -> None:
        self._store = store
        self._book = book
        self._marks = marks
        self._log = log
        self._swept: set[str] = set()  # pollers whose every key tick() has visited

    def revisit(self, name: str) -> None:
        """Make the next tick visit every key of poller ``name`` (a consumer was attached:
        outboxes may wait for it)."""
        self._swept.discard(name)

    async def choose(self, name: str, partitions: list[Partition], now: int) -> list[Partition]:
        """The partitions a tick visits.

        The first tick of an engine (or the first after a consumer was attached) visits
        every key: that is how keys never polled, keys that predate the due index and
        outboxes waiting for a consumer are found. A warm engine then asks the store's due
        index and visits only the keys due now, partitions listed since the last tick and
        forced keys: an idle tick costs in proportion to the due keys, not to all keys.
        (The daemon's rolling audit has no counterpart here: an idle tick reads no state.)
        """
        fresh = self._book.take_fresh(name)
        if name not in self._swept:
            self._swept.add(name)
            return partitions
        try:
            due = await self._store.due_keys(name, now)
        except StoreError as error:
            # Without the due index every key is visited: each run then meets the store on
            # its own, reports its error and backs off (instead of the whole pass failing).
            self._log.warning("tick(): the due index of %s could not be read: %s", name, error)
            return partitions
        wanted = [partition for partition, _ in due]
        # Forced keys, and keys whose last run the store failed (it may not list them).
        marks = self._marks
        again = {
            key.partition for key in (*marks.forced, *marks.store_backoff) if key.poller == name
        }
        wanted += sorted(fresh | again)
        return self._book.pick(name, wanted)


@dataclass(slots=True)
class TickFindings:
    """What a pass found so far: the fields of ``TickResult`` but its duration."""

    polled: list[TickPollResult] = field(default_factory=list)
    skipped_leased: int = 0
    skipped_not_due: int = 0
    timed_out: bool = False
    _lanes: dict[tuple[str, str, str], int] = field(default_factory=dict, repr=False, compare=False)

    def add(self, results: Sequence[TickPollResult]) -> None:
        """Count the cycles of one run: a lane that already ran in the pass adds up in its
        entry (one entry per poller, partition and lane)."""
        for result in results:
            lane = (result.poller, result.partition, result.lane)
            at = self._lanes.get(lane)
            if at is None:
                self._lanes[lane] = len(self.polled)
                self.polled.append(result)
            else:
                self.polled[at] = self.polled[at].then(result)


class TickPass:
    """The workers of one pass: they take the chosen keys in turn and run each.

    Args:
        names: The pollers of the pass.
        deadline: When the pass stops starting runs (``None``: no deadline).
        clock: The engine's clock.
        store: The engine's store (named when a run stalled in it).
        marks: The per-key marks (forced keys, keys the store failed).
        run_key: The engine's run of one key.
        concurrency: Keys run at once.
        catch_up: Run the keys still behind again (see the module docstring); ``False``
            runs each key once.
    """

    def __init__(
        self,
        names: Sequence[str],
        deadline: int | None,
        *,
        clock: Clock,
        store: StateStore,
        marks: KeyMarks,
        run_key: RunKey,
        concurrency: int,
        catch_up: bool = True,
    ) -> None:
        self.names = list(names)
        self._deadline = deadline
        self._clock = clock
        self._store = store
        self._marks = marks
        self._run_key = run_key
        self._concurrency = concurrency
        self._catch_up = catch_up
        self.findings = TickFindings()
        """What the pass found so far (kept as it goes: a pass cut short still has it)."""
        self._running: dict[PKey, tuple[asyncio.Task[Any], int]] = {}

    def not_due(self, count: int) -> None:
        """Count keys the pass chose not to visit (not due)."""
        self.findings.skipped_not_due += count

    async def run(self, keys: list[_Key]) -> TickFindings:
        """Run ``keys``, ``concurrency`` at a time, then the catch-up rounds of the keys
        still behind; return what the pass found."""
        runs: dict[PKey, int] = {}
        behind = await self._round([(key, 0) for key in keys], runs, first=True)
        while behind:
            behind = await self._round(behind, runs, first=False)
        return self.findings

    async def _round(
        self, keys: list[tuple[_Key, int]], runs: dict[PKey, int], *, first: bool
    ) -> list[tuple[_Key, int]]:
        """Run ``keys`` once each, none before the time it comes with; returns those to run
        again, with when (see :meth:`_again`)."""
        queue = iter(keys)
        behind: list[tuple[_Key, int]] = []
        workers = [
            asyncio.create_task(self._worker(queue, behind, runs, first=first))
            for _ in range(min(self._concurrency, max(1, len(keys))))
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        # The next round: the keys in the order they may run again, this round's order
        # among those that may run at the same time.
        order = {id(key): index for index, (key, _) in enumerate(keys)}
        return sorted(behind, key=lambda entry: (entry[1], order[id(entry[0])]))

    def _again(self, outcome: KeyRunResult, runs: int) -> int | None:
        """When to run the key once more in this pass (``None``: not in this pass). It is
        behind, and the pass has room for at least one more of its pages after the wait
        the scheduler planned. Without a deadline the pass waits for nothing (a test on a
        virtual clock that nobody moves would wait forever): a key runs again only when
        due at once, and at most :data:`MAX_RUNS_PER_KEY` times."""
        at = catch_up_at(outcome) if self._catch_up else None
        now = self._clock.now()
        if at is None:
            return None
        if self._deadline is None:
            return now if at <= now and runs < MAX_RUNS_PER_KEY else None
        at = max(at, now)
        # A run fetches at least one page: start one only when a page of this key's last
        # cycle would still end before the deadline.
        last = None if outcome.state is None else outcome.state.schedule.last_poll
        page_ms = 0 if last is None else last.duration_ms // max(1, last.pages)
        return at if at < self._deadline and at + page_ms <= self._deadline else None

    async def _worker(
        self,
        queue: Iterator[tuple[_Key, int]],
        behind: list[tuple[_Key, int]],
        runs: dict[PKey, int],
        *,
        first: bool,
    ) -> None:
        found = self.findings
        deadline = self._deadline
        for item, not_before in queue:
            poller, partition = item
            if deadline is not None and self._clock.now() >= deadline:
                # A catch-up round cut short leaves its keys pending (their results say so);
                # only keys never visited make the pass time out.
                found.timed_out = found.timed_out or first
                return
            key = PKey(poller.name, partition.key)
            if not_before > self._clock.now():
                # The pace the scheduler asked for (_again made sure a page still fits).
                await self._clock.sleep(not_before - self._clock.now())
            if self._marks.store_backoff.get(key, (0, 0))[1] > self._clock.now():
                if first:  # the store failed this key's last run: backing off
                    found.skipped_not_due += 1
                continue
            forced = self._marks.take_forced(key)
            task = asyncio.current_task()
            if task is not None:
                self._running[key] = (task, self._clock.now())
            try:
                outcome = await self._run_key(poller, partition, force=forced, deadline=deadline)
            finally:
                self._running.pop(key, None)
            found.add(outcome.results)
            runs[key] = runs.get(key, 0) + 1
            again = self._again(outcome, runs[key])
            if again is not None:
                behind.append((item, again))
            if not first:
                continue  # the key was counted when the pass chose it
            if outcome.outcome == "leased":
                found.skipped_leased += 1
            elif outcome.outcome in ("not-due", "paused"):
                found.skipped_not_due += 1

    def stalls(self, work: asyncio.Future[Any], deadline: int) -> list[tuple[PKey, int, Stall]]:
        """What each run still going at the end of the grace was waiting for (the pass
        itself, ``work``, when no run had started: it was listing keys)."""
        late = self._clock.now() - deadline
        if not self._running:
            names = self.names
            key = PKey(names[0], "") if names else PKey("", "")
            what = f"the pass (choosing the keys of {', '.join(names)})"
            return [(key, self._clock.now(), diagnose(work, self._store, what, late))]
        return [
            (key, began, diagnose(task, self._store, _key_text(key), late))
            for key, (task, began) in self._running.items()
        ]


def _key_text(key: PKey) -> str:
    return f"{key.poller}/{key.partition}" if key.partition else key.poller
