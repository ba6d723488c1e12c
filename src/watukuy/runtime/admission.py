"""Which due keys the daemon starts: the oldest due first, no more per budget than it serves.

A key run of a poller with a ``budget`` spends almost all of its time waiting for that
budget once more keys are due than the budget grants. Started anyway, such a run holds a
lease (renewed meanwhile), a task and a place in the budget's queue, and after ``max_wait``
gives up with ``BudgetTimeoutError`` having polled nothing. So the daemon keeps the keys
of each budget in a line of their own, ordered by due time, and starts the head of a line
only while fewer than the budget's *admission limit* of its runs are in flight
(:func:`admission_limit`). Keys without a budget have a line too, bounded only by the
engine's ``max_concurrent_keys``.

The line decides when a run starts, never whether a request may go out: every request
still has its cost granted by the budget store (in this process or shared through Redis),
so the budget's cap holds whatever the lines do.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping

from watukuy.model.options import Budget
from watukuy.model.rows import PKey

__all__ = ["Admission", "Entry", "admission_limit"]

Entry = tuple[int, int, PKey]
"""A wake-up: ``(due at, sequence, key)``, ordered by due time, then by arrival."""


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


class Admission:
    """The lines of due keys, one per budget (``None``: keys of pollers without one).

    Args:
        limits: The admission limit of each budget (see :func:`admission_limit`).
    """

    def __init__(self, limits: Mapping[str, int]) -> None:
        self._limits = dict(limits)
        self._lines: dict[str | None, list[tuple[int, Entry]]] = {}
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

    def push(self, entry: Entry, budget: str | None, *, urgent: bool = False) -> None:
        """A due key joins the line of its budget; an ``urgent`` one (a ``trigger()``)
        goes before every key that is merely due."""
        heapq.heappush(self._lines.setdefault(budget, []), (0 if urgent else 1, entry))

    def pop(self, valid: Callable[[Entry], bool]) -> tuple[Entry, str | None] | None:
        """The oldest due entry among the lines whose budget has room, taken off its line.

        Entries ``valid`` turns down (superseded wake-ups) are dropped on the way.
        ``None`` when every line is empty or full.
        """
        best: list[tuple[int, Entry]] | None = None
        best_budget: str | None = None
        for budget, line in self._lines.items():
            while line and not valid(line[0][1]):
                heapq.heappop(line)
            if not line or self._full(budget):
                continue
            if best is None or line[0] < best[0]:
                best, best_budget = line, budget
        if best is None:
            return None
        return heapq.heappop(best)[1], best_budget

    def started(self, budget: str | None) -> None:
        """A run on ``budget`` started."""
        if budget is not None and budget in self._in_flight:
            self._in_flight[budget] += 1

    def finished(self, budget: str | None) -> None:
        """A run on ``budget`` ended."""
        if budget is not None and self._in_flight.get(budget, 0) > 0:
            self._in_flight[budget] -= 1

    def clear(self) -> None:
        """Forget every line and every run in flight (the daemon stopped)."""
        self._lines.clear()
        self._in_flight = dict.fromkeys(self._limits, 0)

    def _full(self, budget: str | None) -> bool:
        if budget is None:
            return False
        limit = self._limits.get(budget)
        return limit is not None and self._in_flight.get(budget, 0) >= limit

    def __repr__(self) -> str:
        lines = {budget: len(line) for budget, line in self._lines.items()}
        return f"Admission(in_flight={self._in_flight}, lines={lines})"
