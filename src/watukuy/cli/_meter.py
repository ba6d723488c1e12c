"""Running totals and per-second rates of pages, items and events: counts in, figures out.

The progress display of ``tick``, ``backfill`` and ``run`` counts with a :class:`Meter`
(one addition per page fetched and per commit) and reads it each time it redraws. The
meter draws nothing and imports nothing of rich; the clock is a function given to it, so a
test drives it with a fake one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Counts", "Meter", "Rates", "Reading"]

DEFAULT_WINDOW_MS = 5_000


@dataclass(frozen=True, slots=True)
class Counts:
    """Pages fetched, items they held, and events committed."""

    pages: int = 0
    items: int = 0
    events: int = 0


@dataclass(frozen=True, slots=True)
class Rates:
    """Pages, items and events per second."""

    pages: float
    items: float
    events: float


@dataclass(frozen=True, slots=True)
class Reading:
    """What a :class:`Meter` shows at one moment.

    Attributes:
        totals: Everything counted since the meter started.
        per_second: Pages, items and events per second over the meter's window (since the
            start while the meter is younger than its window); ``None`` while no time has
            passed.
        elapsed_ms: Time since the meter started.
    """

    totals: Counts
    per_second: Rates | None
    elapsed_ms: int


class Meter:
    """Counts pages, items and events, and reads them as totals and per-second rates.

    The rates are over a sliding window: each :meth:`read` remembers the totals it saw, and
    the next one measures from the latest of those that is at least ``window_ms`` old (from
    the start while there is none). Counting is one addition; the work is done when reading,
    at the display's refresh rate.

    Args:
        now: The current time in milliseconds (an engine's ``clock.now``).
        window_ms: How far back the rates look.
    """

    __slots__ = ("_now", "_seen", "_window_ms", "events", "items", "pages", "started_at")

    def __init__(self, now: Callable[[], int], *, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        if window_ms <= 0:
            raise ValueError(f"window_ms: must be greater than zero, got {window_ms!r}")
        self._now = now
        self._window_ms = window_ms
        self.started_at = now()
        self.pages = 0
        self.items = 0
        self.events = 0
        self._seen: deque[tuple[int, Counts]] = deque([(self.started_at, Counts())])

    def add_page(self, items: int) -> None:
        """Count one page fetched, holding ``items`` items."""
        self.pages += 1
        self.items += items

    def add_events(self, events: int) -> None:
        """Count ``events`` events committed."""
        self.events += events

    def read(self) -> Reading:
        """The totals, the rates over the window, and the time since the start."""
        now = self._now()
        totals = Counts(self.pages, self.items, self.events)
        horizon = now - self._window_ms
        # Keep the latest reading at or before the horizon as the base, and the newer ones.
        while len(self._seen) > 1 and self._seen[1][0] <= horizon:
            self._seen.popleft()
        base_at, base = self._seen[0]
        self._seen.append((now, totals))
        return Reading(totals, _per_second(totals, base, now - base_at), now - self.started_at)


def _per_second(totals: Counts, base: Counts, span_ms: int) -> Rates | None:
    """What was added from ``base`` to ``totals`` in ``span_ms``, per second (``None`` for an
    empty span)."""
    if span_ms <= 0:
        return None
    scale = 1000 / span_ms
    return Rates(
        (totals.pages - base.pages) * scale,
        (totals.items - base.items) * scale,
        (totals.events - base.events) * scale,
    )
