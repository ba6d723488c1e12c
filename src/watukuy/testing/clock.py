"""A clock where time moves only when the test says so."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeAlias

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.events import iso_time

__all__ = ["Instant", "VirtualClock"]

Instant: TypeAlias = int | str | datetime
"""A point in time: epoch milliseconds, ISO 8601 text with an offset
(``"2026-01-01T00:00:00Z"``), or a timezone-aware ``datetime``."""


def instant_ms(value: Instant, field: str) -> int:
    """``value`` in epoch milliseconds.

    Text and datetimes must say their offset: a naive one would be read in whatever zone
    the machine running the test is in, and a test must not depend on that.

    Raises:
        ConfigError: Naming ``field``: not an instant, not ISO 8601, or naive.
    """
    if isinstance(value, bool):
        raise ConfigError(
            f"expected epoch milliseconds, ISO text or a datetime, got {value!r}", field=field
        )
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ConfigError(
                f"expected ISO 8601 text like '2026-01-01T00:00:00Z', got {value!r}", field=field
            ) from None
        value = parsed
    if not isinstance(value, datetime):
        raise ConfigError(
            f"expected epoch milliseconds, ISO text or a datetime, got {value!r}", field=field
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigError(
            f"{value.isoformat()} has no UTC offset: add one ('Z', '+02:00', tzinfo=UTC)",
            field=field,
        )
    return round(value.timestamp() * 1000)


DEFAULT_START = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z


_THREAD_WAIT_S = 30.0


def _waiting_on_threads() -> list[asyncio.Future[object]]:
    """Futures that tasks are awaiting and that a worker thread will complete.

    ``loop.run_in_executor`` / ``asyncio.to_thread`` chain an asyncio future to a
    ``concurrent.futures.Future``; CPython marks the chain with a ``_call_check_cancel``
    callback, which is how such a future is told apart from a timer or an ``Event``.
    """
    found: list[asyncio.Future[object]] = []
    for task in asyncio.all_tasks():
        waiter = getattr(task, "_fut_waiter", None)
        if waiter is None or waiter.done():
            continue
        for callback, *_ in getattr(waiter, "_callbacks", None) or ():
            if getattr(callback, "__name__", "") == "_call_check_cancel":
                found.append(waiter)
                break
    return found


@dataclass(order=True)
class _Timer:
    due: int
    seq: int
    future: asyncio.Future[None] = field(compare=False)


class VirtualClock:
    """A :class:`~watukuy.model.ports.Clock` for tests: ``now()`` only changes when you
    ``advance`` it, and ``sleep`` resolves when virtual time reaches its deadline.

    ``await clock.advance("30s")`` fires every timer due within the next 30 seconds in
    order, letting the event loop settle after each one so that work woken by a timer
    (including new, shorter sleeps) runs before later timers fire. Nothing ever waits for
    real time to pass.

    Args:
        start: Initial time: epoch milliseconds, ISO 8601 text with an offset
            (``"2026-03-01T09:00:00Z"``) or a timezone-aware ``datetime`` (default
            2026-01-01T00:00:00Z).

    Raises:
        ConfigError: ``start`` is not one of those; a naive time (no offset) is refused,
            since reading it in the local zone would make a test depend on the machine.
    """

    def __init__(self, start: Instant = DEFAULT_START) -> None:
        self._now = instant_ms(start, "start")
        self._timers: list[_Timer] = []
        self._seq = itertools.count()

    # --- the Clock port -----------------------------------------------------------------

    def now(self) -> int:
        """Current virtual time in epoch milliseconds."""
        return self._now

    async def sleep(self, ms: int) -> None:
        """Wait until virtual time has advanced by ``ms`` milliseconds."""
        if ms <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = _Timer(self._now + int(ms), next(self._seq), future)
        heapq.heappush(self._timers, timer)
        try:
            await future
        finally:
            if not future.done():
                future.cancel()
            self._drop_cancelled()

    # --- driving time -------------------------------------------------------------------

    def iso(self) -> str:
        """Current virtual time as an ISO 8601 string (UTC, milliseconds)."""
        return iso_time(self._now)

    def pending_timers(self) -> int:
        """Sleeps still waiting for their deadline."""
        self._drop_cancelled()
        return len(self._timers)

    def next_due_at(self) -> int | None:
        """Deadline of the earliest pending sleep, or ``None``."""
        self._drop_cancelled()
        return self._timers[0].due if self._timers else None

    async def settle(self, rounds: int = 50) -> None:
        """Let the event loop run until no task is ready to make progress.

        Work handed to threads (a ``SqliteStore`` call, a sync handler) is waited for too:
        that is real work finishing, not time passing, so it does not break determinism.
        """
        loop = asyncio.get_running_loop()
        quiet = 0
        for _ in range(rounds * 20):
            await asyncio.sleep(0)
            ready = getattr(loop, "_ready", None)
            if ready is not None and len(ready) > 0:
                quiet = 0
                continue
            threads = _waiting_on_threads()
            if threads:
                await asyncio.wait(threads, timeout=_THREAD_WAIT_S)
                quiet = 0
                continue
            quiet += 1
            if quiet >= 3:
                return

    async def advance(self, duration: Duration) -> None:
        """Move time forward by ``duration`` (a number means seconds), firing timers in order."""
        await self.advance_to(self._now + parse_duration(duration, "advance"))

    async def advance_ms(self, ms: int) -> None:
        """Move time forward by ``ms`` milliseconds."""
        await self.advance_to(self._now + int(ms))

    async def advance_to(self, at: Instant) -> None:
        """Move time forward to ``at``, firing every timer due until then.

        Args:
            at: Epoch milliseconds, ISO 8601 text with an offset or an aware ``datetime``;
                an instant in the past leaves the time where it is.

        Raises:
            ConfigError: ``at`` is not an instant, or is naive.
        """
        at = instant_ms(at, "at")
        await self.settle()
        while True:
            self._drop_cancelled()
            if not self._timers or self._timers[0].due > at:
                break
            timer = heapq.heappop(self._timers)
            self._now = max(self._now, timer.due)
            if not timer.future.done():
                timer.future.set_result(None)
            await self.settle()
        self._now = max(self._now, at)
        await self.settle()

    async def run_next(self) -> bool:
        """Jump to the earliest pending timer and fire it; ``False`` when there is none."""
        due = self.next_due_at()
        if due is None:
            return False
        await self.advance_to(due)
        return True

    async def run_all(self, limit: int = 10_000) -> int:
        """Fire timers until none is left (at most ``limit``); returns how many fired.

        Raises:
            RuntimeError: Timers kept rescheduling themselves beyond ``limit``.
        """
        fired = 0
        while await self.run_next():
            fired += 1
            if fired >= limit:
                raise RuntimeError(f"run_all: still {self.pending_timers()} timers after {limit}")
        return fired

    async def flush(self) -> None:
        """Let ready work run without moving time."""
        await self.settle()

    def _drop_cancelled(self) -> None:
        if any(t.future.done() for t in self._timers):
            self._timers = [t for t in self._timers if not t.future.done()]
            heapq.heapify(self._timers)

    def __repr__(self) -> str:
        return f"VirtualClock(now={self.iso()!r}, pending={len(self._timers)})"
