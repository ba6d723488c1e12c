"""The progress line of ``tick``, ``backfill`` and ``run``: a hook set that counts, and the
bar that shows what it counted.

Beneath the bar a line counts the work as it happens: pages, items and events so far and
per second, the time since the start, and the keys in a cycle. A :class:`Watch` added to
the engine for the command's duration feeds it (one addition per page and per commit, into
a :class:`~watukuy.cli._meter.Meter`); the display reads it when it redraws, several times
a second, from the event loop: no thread, and no polling of the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator

from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.text import Text

from watukuy.runtime.engine import EngineCore
from watukuy.runtime.hooks import (
    CommitDetails,
    FetchDetails,
    Hooks,
    PollEndDetails,
    PollStartDetails,
)

from ._meter import Meter, Reading
from ._render import key_name

__all__ = ["Watch", "figures_line", "progress_board", "watching"]

# Redraws per second of the progress display: often enough to look alive, rarely enough
# to cost nothing next to the work it shows.
_REDRAWS_PER_S = 8
# Keys named on the figures line; more are counted ("+3").
_KEYS_SHOWN = 3


class Watch(Hooks):
    """The hook set behind the progress display: it counts pages, items and events into a
    :class:`~watukuy.cli._meter.Meter` and keeps the keys that are in a cycle.

    Args:
        meter: Where the counts go.
    """

    __slots__ = ("_working", "meter")

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        # Keys (and lanes) in a cycle, in the order their cycles started.
        self._working: dict[tuple[str, str, str], None] = {}

    def on_poll_start(self, details: PollStartDetails) -> None:
        """A cycle of a key began: it is worked on."""
        self._working[(details.poller, details.partition, details.lane)] = None

    def on_fetch(self, details: FetchDetails) -> None:
        """A page was fetched."""
        self.meter.add_page(details.items)

    def on_commit(self, details: CommitDetails) -> None:
        """A page (or a pass's deletes) was committed with its events."""
        self.meter.add_events(details.events)

    def on_poll_end(self, details: PollEndDetails) -> None:
        """A cycle of a key ended."""
        self._working.pop((details.poller, details.partition, details.lane), None)

    def working(self) -> list[str]:
        """The keys in a cycle, as ``poller/partition``, with the lane when it is not live."""
        return [
            key_name(poller, partition) + ("" if lane == "live" else f" ({lane})")
            for poller, partition, lane in self._working
        ]

    def line(self) -> Text:
        """The figures line as it reads now."""
        return figures_line(self.meter.read(), self.working())


def figures_line(reading: Reading, working: Iterable[str] = ()) -> Text:
    """``0:00:12  412 pages 34.1/s · 41,200 items 3,410/s · 1,050 events 87.5/s · orders``.

    Args:
        reading: What the meter shows.
        working: The keys in a cycle (the first few are named, the others counted).

    Returns:
        One line of text, cut short with an ellipsis rather than wrapped; the rates read
        ``-/s`` until some time has passed.
    """
    totals, rates = reading.totals, reading.per_second
    parts = [
        f"{_count(totals.pages, 'page')} {_rate(rates.pages if rates else None)}",
        f"{_count(totals.items, 'item')} {_rate(rates.items if rates else None)}",
        f"{_count(totals.events, 'event')} {_rate(rates.events if rates else None)}",
    ]
    keys = list(working)
    if keys:
        more = len(keys) - _KEYS_SHOWN
        parts.append(", ".join(keys[:_KEYS_SHOWN]) + (f" +{more}" if more > 0 else ""))
    # One line whatever the width: on a narrow terminal the keys at its end give way.
    line = f"{_clock_text(reading.elapsed_ms)}  " + " · ".join(parts)
    return Text(line, no_wrap=True, overflow="ellipsis")


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def _rate(per_second: float | None) -> str:
    if per_second is None:
        return "-/s"
    return f"{per_second:,.1f}/s" if per_second < 100 else f"{per_second:,.0f}/s"


def _clock_text(ms: int) -> str:
    """``H:MM:SS``, as rich writes elapsed time."""
    seconds = max(ms, 0) // 1000
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class _Percent(ProgressColumn):
    """``42%`` once the task has a total; nothing while it has none."""

    def render(self, task: Task) -> Text:
        return Text("" if task.total is None else f"{task.percentage:>3.0f}%")


class _Board(Progress):
    """A progress bar with the figures line of a :class:`Watch` beneath it.

    Args:
        watch: Whose figures to show.
        console: Where to draw.
        unit: What the bar counts (``"pollers"``: ``1/3 pollers``); ``None`` for a
            percentage (a backfill, whose end is a cursor, not a count).
    """

    def __init__(self, watch: Watch, console: Console, unit: str | None) -> None:
        self._watch = watch  # before the base class, which renders once
        counted: ProgressColumn = (
            TextColumn(f"{{task.completed:.0f}}/{{task.total:.0f}} {unit}")
            if unit is not None
            else _Percent()
        )
        super().__init__(
            SpinnerColumn(),
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            counted,
            console=console,
            transient=True,
            auto_refresh=False,  # redrawn from the event loop (see progress_board): no thread
        )

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield self._watch.line()


@contextlib.contextmanager
def watching(engine: EngineCore, enabled: bool) -> Iterator[Watch | None]:
    """A :class:`Watch` on ``engine`` for the duration of the block.

    Args:
        engine: The engine whose work to count.
        enabled: Whether anything is shown; when not, the block gets ``None`` and the
            engine no hook at all.
    """
    if not enabled:
        yield None
        return
    watch = Watch(Meter(engine.clock.now))
    remove = engine.add_hooks(watch)
    try:
        yield watch
    finally:
        remove()


async def _redraw(refresh: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(1 / _REDRAWS_PER_S)
        refresh()


@contextlib.asynccontextmanager
async def progress_board(
    engine: EngineCore, console: Console, enabled: bool, *, unit: str | None = None
) -> AsyncIterator[Progress | None]:
    """A progress bar with the figures line beneath it, drawn on ``console`` and redrawn
    several times a second while the block runs; the block adds its task to it.

    Args:
        engine: The engine whose work the figures count (see :func:`watching`).
        console: Where to draw (a terminal: the caller decides).
        enabled: Whether to draw; when not, the block gets ``None``.
        unit: What the bar counts (``1/3 pollers``), or ``None`` for a percentage.
    """
    with watching(engine, enabled) as watch:
        if watch is None:
            yield None
            return
        with _Board(watch, console, unit) as board:
            redraw = asyncio.create_task(_redraw(board.refresh))
            try:
                yield board
            finally:
                redraw.cancel()
                await asyncio.wait({redraw})
