"""The long-running commands: ``tick`` and ``backfill`` with progress, ``run`` with a live view.

Progress is drawn only on a terminal and never with ``--json``; the work done is the same
either way, and the final result is what the command prints. What the display shows, and
how it is fed, is in :mod:`watukuy.cli._watch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from watukuy.cursor import TimestampCursor
from watukuy.cursor.config import read_timestamp_ms
from watukuy.model import json as wkjson
from watukuy.model.rows import PKey
from watukuy.runtime.engine import EngineCore
from watukuy.runtime.results import TickResult

from ._render import cursor_text, inspect_view
from ._watch import Watch, progress_board, watching

__all__ = ["BackfillOutcome", "drive_backfill", "run_live", "tick_with_progress"]

_LEASED_WAIT_S = 1.0
_STALLED_LIMIT = 20


async def tick_with_progress(
    engine: EngineCore,
    names: Sequence[str],
    max_duration: str | None,
    *,
    console: Console,
    show: bool,
) -> dict[str, Any]:
    """One pass over ``names``: every poller ticked side by side (each with the engine's
    ``tick_concurrency``) against one shared deadline, a progress bar advancing as each
    finishes. Returns the combined ``TickResult`` as JSON data."""
    started = engine.clock.now()
    async with progress_board(engine, console, show, unit="pollers") as progress:
        task = progress.add_task("tick", total=len(names)) if progress else None

        async def one(name: str) -> TickResult:
            result = await engine.tick(max_duration=max_duration, only=name)
            if progress is not None and task is not None:
                progress.update(task, advance=1)
            return result

        results = await asyncio.gather(*(one(name) for name in names))
    return TickResult.combine(results, duration_ms=engine.clock.now() - started).to_dict()


@dataclass
class BackfillOutcome:
    """What driving a backfill lane did."""

    poller: str
    partition: str
    cycles: int = 0
    items: int = 0
    events: int = 0
    done: bool = False
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "poller": self.poller,
            "partition": self.partition,
            "cycles": self.cycles,
            "items": self.items,
            "events": self.events,
            "done": self.done,
            "error": self.error,
        }


def _instant(engine: EngineCore, name: str, text: str | None) -> float | None:
    """The instant of a stored timestamp cursor, for a percentage; ``None`` otherwise."""
    config = engine.pollers[name].cursor
    if text is None or not isinstance(config, TimestampCursor):
        return None
    try:
        data = wkjson.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("value") is None:
        return None
    return read_timestamp_ms(data["value"], config.parse)


async def drive_backfill(
    engine: EngineCore, key: PKey, *, console: Console, show: bool
) -> BackfillOutcome:
    """Run ``tick(only=poller)`` until the key's backfill lane is finished.

    When another process holds the key's lease it does the work; this just watches the
    store until the lane is gone. A failing cycle stops the drive (the lane stays active,
    so the daemon or a later ``backfill`` picks it up).
    """
    outcome = BackfillOutcome(key.poller, key.partition)
    stalled = 0
    async with progress_board(engine, console, show) as progress:
        task = progress.add_task(f"backfill {key}", total=None) if progress else None
        while True:
            state = await engine.store.load_state(key)
            if state is None or state.backfill is None:
                outcome.done = True
                break
            origin = _instant(engine, key.poller, state.backfill.from_cursor)
            target = _instant(engine, key.poller, state.backfill.to_cursor)
            result = await engine.tick(only=key.poller)
            ran = [
                r for r in result.polled if r.partition == key.partition and r.lane == "backfill"
            ]
            for row in ran:
                outcome.cycles += 1
                outcome.items += row.items
                outcome.events += row.events
                if row.error is not None:
                    outcome.error = dict(row.error)
            if outcome.error is not None:
                break
            stalled = stalled + 1 if ran and not any(r.items for r in ran) else 0
            if stalled >= _STALLED_LIMIT:
                outcome.error = {
                    "name": "Stalled",
                    "message": f"no items in {stalled} cycles; the lane stays active for the "
                    "daemon",
                }
                break
            if progress is not None and task is not None:
                after = await engine.store.load_state(key)
                position = after.cursors.get("backfill") if after is not None else None
                current = _instant(engine, key.poller, position)
                described = cursor_text(wkjson.loads(position)) if position else "starting"
                fields: dict[str, Any] = {
                    "description": f"backfill {key}: {outcome.events} events, at {described}"
                }
                fraction = _fraction(origin, target, current)
                if fraction is not None:
                    fields["total"] = 1000
                    fields["completed"] = round(1000 * fraction)
                progress.update(task, **fields)
            if not ran:
                await asyncio.sleep(_LEASED_WAIT_S)
    return outcome


def _fraction(origin: float | None, target: float | None, current: float | None) -> float | None:
    """How far ``current`` is from ``origin`` to ``target``, clamped to [0, 1]."""
    if origin is None or target is None or current is None or target == origin:
        return None
    return max(0.0, min(1.0, (current - origin) / (target - origin)))


@contextlib.contextmanager
def _stop_signals(stop: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # Windows, or not the main thread
            pass
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def run_live(
    engine: EngineCore,
    *,
    console: Console,
    refresh_s: float,
    stop_timeout: str,
    emit_json: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    """Run the daemon until SIGINT/SIGTERM, showing ``inspect()`` every ``refresh_s``.

    On a terminal the report is a live table; with ``emit_json`` every refresh prints one
    JSON report per line; otherwise a line says it runs and the final table is printed
    after the drain. Returns the last report.
    """
    stop = asyncio.Event()
    live_enabled = emit_json is None and console.is_terminal
    with _stop_signals(stop), watching(engine, live_enabled) as watch:
        await engine.start()
        report = dict(await engine.inspect())
        try:
            if emit_json is not None:
                emit_json(report)
            if emit_json is None and not live_enabled:
                console.print(
                    f"watukuy running as {engine.instance_id}; Ctrl-C or SIGTERM stops it"
                )
            with (
                Live(_live_view(report, watch), console=console, auto_refresh=False)
                if live_enabled
                else contextlib.nullcontext() as live
            ):
                while not stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), refresh_s)
                    if stop.is_set():
                        break
                    report = dict(await engine.inspect())
                    if emit_json is not None:
                        emit_json(report)
                    if live is not None:
                        live.update(_live_view(report, watch), refresh=True)
        finally:
            await engine.stop(drain=True, timeout=stop_timeout)
        report = dict(await engine.inspect())
    return report


def _live_view(report: dict[str, Any], watch: Watch | None) -> RenderableType:
    """The ``inspect`` screen, with the figures line of the work since ``run`` started."""
    view = inspect_view(report)
    return view if watch is None else Group(view, Text(), watch.line())
