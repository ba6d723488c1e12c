"""Which due keys the daemon starts: the earliest deadline first, no more per budget than
it serves.

A key run of a poller with a ``budget`` spends almost all of its time waiting for that
budget once more keys are due than the budget grants. Started anyway, such a run holds a
lease (renewed meanwhile), a task and a place in the budget's queue, and after ``max_wait``
gives up with ``BudgetTimeoutError`` having polled nothing. So the daemon keeps the keys
of each budget in a line of their own, ordered by deadline, and starts the head of a line
only while fewer than the budget's *admission limit* of its runs are in flight
(:func:`admission_limit`). Keys without a budget have a line too, bounded only by the
engine's ``max_concurrent_keys``.

A key's deadline is the latest its run should start: for a poll wake-up, the top of the
jitter band the schedule promises (see :func:`~watukuy.scheduler.planned_top`), which a
key woken early in its band is far from and a key woken at the top has reached; for any
other wake-up (a first run, a retry, a trigger), its due time. When more keys are due
than the budget serves, the ones closest to breaking their schedule go first and the
ones with room to spare wait.

Runs also start at the budget's pace (:func:`start_pace`): a burst of about a tenth of
the admission limit, then one start per ``per / requests`` (times the smallest cost). When
thousands of keys fall due at once (a start, a restart, a schedule they share), the runs
then reach the budget about as fast as it grants, instead of all at once: each run finds
its grant within moments of starting, the earliest deadlines still go first, and no run
sits out ``max_wait`` in the budget's queue holding a lease.

The line decides when a run starts, never whether a request may go out: every request
still has its cost granted by the budget store (in this process or shared through Redis),
so the budget's cap holds whatever the lines do.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping

from watukuy.model.options import Budget
from watukuy.model.records import dataclass
from watukuy.model.rows import PKey

__all__ = ["Admission", "Entry", "Pace", "admission_limit", "start_pace"]

Entry = tuple[int, int, PKey]
"""A wake-up: ``(due at, sequence, key)``."""


def admission_limit(budget: Budget, *, costs: Iterable[float], waits: Iterable[int]) -> int:
    """How many key runs on ``budget`` the daemon keeps in flight at most.

    What the budget grants in one window: ``requests`` (or ``burst`` if larger) divided by
    the smallest ``budget_cost`` of its pollers, scaled down when the longest wait for a
    grant (``max_wait``, else the shortest ``schedule.max`` of its pollers) is shorter
    than the window. Every run admitted can then be granted within about one window, and
    there is always a run waiting when room appears (a grant counts until ``per`` after
    its answer, longer than a run needs to commit what it fetched).

    Args:
        budget: The budget.
        costs: The ``budget_cost`` of each poller using it (``0`` is free: ignored).
        waits: The ``schedule.max`` of each poller using it, in milliseconds.

    Returns:
        An integer ``>= 1``.
    """
    capacity = float(
        budget.requests if budget.burst is None else max(budget.requests, budget.burst)
    )
    cost = min((float(c) for c in costs if c > 0), default=1.0)
    wait = budget.max_wait_ms
    if wait is None:
        wait = min(waits, default=budget.per_ms)
    share = min(1.0, wait / budget.per_ms)
    return max(1, math.floor(capacity * share / cost))


@dataclass(frozen=True, slots=True)
class Pace:
    """How fast runs on one budget start: a token bucket of run starts.

    Attributes:
        burst: Starts allowed at once (the bucket's size; it starts full).
        spacing_ms: Milliseconds per start once the burst is spent (one token each).
    """

    burst: int
    spacing_ms: float


def start_pace(budget: Budget, *, costs: Iterable[float], limit: int) -> Pace:
    """The pace of run starts on ``budget``: what it grants, with a burst of a tenth.

    A run asks for at least one grant, so starting runs faster than the budget grants only
    lengthens its queue. The burst, a tenth of the admission limit (at least one), lets a
    few runs start together when the budget has been idle.

    Args:
        budget: The budget.
        costs: The ``budget_cost`` of each poller using it (``0`` is free: ignored).
        limit: Its admission limit (see :func:`admission_limit`).

    Returns:
        The pace.
    """
    cost = min((float(c) for c in costs if c > 0), default=1.0)
    return Pace(burst=max(1, limit // 10), spacing_ms=budget.per_ms * cost / budget.requests)


@dataclass(slots=True)
class _Bucket:
    """The run starts one budget has left: its pace, its tokens, when they were counted."""

    pace: Pace
    tokens: float
    stamp: int | None = None

    def refill(self, now: int) -> None:
        if self.stamp is None:
            self.tokens = float(self.pace.burst)
        elif now > self.stamp:
            gained = (now - self.stamp) / self.pace.spacing_ms
            self.tokens = min(float(self.pace.burst), self.tokens + gained)
        if self.stamp is None or now > self.stamp:
            self.stamp = now

    def ready_at(self, now: int) -> int:
        self.refill(now)
        if self.tokens >= 1:
            return now
        return now + max(1, math.ceil((1 - self.tokens) * self.pace.spacing_ms))


class Admission:
    """The lines of due keys, one per budget (``None``: keys of pollers without one).

    Args:
        limits: The admission limit of each budget (see :func:`admission_limit`).
        paces: The pace of run starts of each budget (see :func:`start_pace`); a budget
            without one starts runs as fast as its limit lets it.
    """

    def __init__(self, limits: Mapping[str, int], paces: Mapping[str, Pace] | None = None) -> None:
        self._limits = dict(limits)
        self._paces = dict(paces or {})
        self._buckets = {name: _Bucket(pace, 0.0) for name, pace in self._paces.items()}
        # (0 urgent / 1 not, deadline, entry): triggers first, then the earliest deadline.
        self._lines: dict[str | None, list[tuple[int, int, Entry]]] = {}
        self._in_flight: dict[str, int] = dict.fromkeys(self._limits, 0)

    def limit(self, budget: str) -> int | None:
        """The admission limit of ``budget`` (``None`` for an unknown name)."""
        return self._limits.get(budget)

    def in_flight(self, budget: str) -> int:
        """Runs on ``budget`` started and not yet finished."""
        return self._in_flight.get(budget, 0)

    def queued(self, budget: str | None) -> int:
        """Entries in the line of ``budget`` (superseded ones included until dropped)."""
        return len(self._lines.get(budget, ()))

    def push(
        self, entry: Entry, budget: str | None, *, urgent: bool = False, deadline: int | None = None
    ) -> None:
        """A due key joins the line of its budget, in the order of its ``deadline`` (by
        default its due time); an ``urgent`` one (a ``trigger()``) goes before every key
        that is merely due."""
        order = entry[0] if deadline is None else deadline
        heapq.heappush(self._lines.setdefault(budget, []), (0 if urgent else 1, order, entry))

    def pop(
        self, valid: Callable[[Entry], bool], now: int | None = None
    ) -> tuple[Entry, str | None] | None:
        """The entry with the earliest deadline among the lines whose budget has room, taken
        off its line.

        Entries ``valid`` turns down (superseded wake-ups) are dropped on the way. With
        ``now``, a budget whose pace has no start left (see :meth:`next_start`) has no room
        either; a popped entry spends one. ``None`` when every line is empty or full.
        """
        best: list[tuple[int, int, Entry]] | None = None
        best_budget: str | None = None
        for budget, line in self._lines.items():
            while line and not valid(line[0][2]):
                heapq.heappop(line)
            if not line or self._full(budget) or not self._paced_in(budget, now):
                continue
            if best is None or line[0] < best[0]:
                best, best_budget = line, budget
        if best is None:
            return None
        if now is not None and best_budget is not None and best_budget in self._buckets:
            self._buckets[best_budget].tokens -= 1
        return heapq.heappop(best)[2], best_budget

    def next_start(self, now: int) -> int | None:
        """When the pace next lets a waiting run start on a budget that has room for it:
        ``now`` when one may start already, ``None`` when no paced line waits with room.

        A line ready at ``now`` is part of the answer, never left out: a caller that read
        the time a moment after :meth:`pop` turned the line down (its pace was a
        millisecond short) must still be told to look again now, not at its next
        unrelated wake-up.
        """
        earliest: int | None = None
        for budget, bucket in self._buckets.items():
            if not self._lines.get(budget) or self._full(budget):
                continue
            at = bucket.ready_at(now)
            if earliest is None or at < earliest:
                earliest = at
        return earliest

    def started(self, budget: str | None) -> None:
        """A run on ``budget`` started."""
        if budget is not None and budget in self._in_flight:
            self._in_flight[budget] += 1

    def finished(self, budget: str | None) -> None:
        """A run on ``budget`` ended."""
        if budget is not None and self._in_flight.get(budget, 0) > 0:
            self._in_flight[budget] -= 1

    def clear(self) -> None:
        """Forget every line, every run in flight and the paces' history (the daemon
        stopped)."""
        self._lines.clear()
        self._in_flight = dict.fromkeys(self._limits, 0)
        self._buckets = {name: _Bucket(pace, 0.0) for name, pace in self._paces.items()}

    def _paced_in(self, budget: str | None, now: int | None) -> bool:
        if now is None or budget is None:
            return True
        bucket = self._buckets.get(budget)
        return bucket is None or bucket.ready_at(now) <= now

    def _full(self, budget: str | None) -> bool:
        if budget is None:
            return False
        limit = self._limits.get(budget)
        return limit is not None and self._in_flight.get(budget, 0) >= limit

    def __repr__(self) -> str:
        lines = {budget: len(line) for budget, line in self._lines.items()}
        return f"Admission(in_flight={self._in_flight}, lines={lines})"
