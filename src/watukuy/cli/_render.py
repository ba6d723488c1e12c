"""Human-readable output of the CLI: compact formats and rich tables.

Every function here turns plain JSON data (what ``--json`` prints) into text or a rich
renderable, so what a person reads and what a script parses never drift apart. Tables keep
one row per line at any terminal width: long cells are cut with an ellipsis, never wrapped;
when the output is not a terminal (a pipe, a file), nothing is cut.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from watukuy.budget.manager import describe_usage
from watukuy.cursor.strategy import describe_cursor, listing_caught_up
from watukuy.model.durations import describe_duration

__all__ = [
    "Col",
    "FittedTable",
    "cursor_text",
    "format_ms",
    "format_time",
    "inspect_view",
    "key_name",
    "parked_table",
    "tick_view",
]


format_ms = describe_duration


def format_time(ms: int | None) -> str:
    """Epoch milliseconds as ``2026-01-01 12:00:01Z`` (UTC, seconds); ``-`` for none."""
    if ms is None:
        return "-"
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def key_name(poller: str, partition: str) -> str:
    """``poller`` or ``poller/partition``, the way keys are written everywhere."""
    return f"{poller}/{partition}" if partition else poller


cursor_text = describe_cursor


def _lease_text(lease: Mapping[str, Any] | None, now: int) -> Text:
    if lease is None:
        return _cell("-", "dim")
    owner = str(lease.get("owner", "?"))
    expires = lease.get("expires_at")
    if isinstance(expires, int) and expires <= now:
        return _cell(f"{owner} (expired)", "dim")
    return _cell(owner)


def _circuit_text(circuit: str) -> Text:
    style = {"closed": "green", "open": "bold red", "half-open": "yellow"}.get(circuit, "")
    return _cell(circuit, style)


def _cell(text: str, style: str = "") -> Text:
    """A cell that stays on one line and ends in an ellipsis when its column is narrow."""
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


@dataclass(frozen=True)
class Col:
    """A column of a :class:`FittedTable`.

    Attributes:
        header: Column title.
        right: Right-justified (numbers).
        shrink_to: Narrowest the column may become when the screen is too narrow (its cells
            then end in an ellipsis); ``None``: the column never shrinks.
        max_width: Widest the column may ever be.
    """

    header: str
    right: bool = False
    shrink_to: int | None = None
    max_width: int | None = None


class FittedTable:
    """A table whose rows each stay on one line at any width.

    Columns start at their natural width; when the screen is narrower, the columns that
    may shrink give way one character at a time (widest first), down to their floor, and
    their cells end in an ellipsis. Numbers never shrink, so they are never cut.

    Args:
        columns: The columns.
        rows: One sequence of cells per row, in column order.
    """

    def __init__(self, columns: Sequence[Col], rows: Sequence[Sequence[Text]]) -> None:
        self.columns = list(columns)
        self.rows = [list(row) for row in rows]

    def _natural(self, capped: bool = True) -> list[int]:
        widths = []
        for index, column in enumerate(self.columns):
            width = max([len(column.header), *(row[index].cell_len for row in self.rows)])
            cap = column.max_width if capped else None
            widths.append(min(width, cap) if cap else width)
        return widths

    def _table(self, widths: Sequence[int]) -> Table:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
        for column, width in zip(self.columns, widths, strict=True):
            table.add_column(
                column.header,
                width=width,
                no_wrap=True,
                overflow="ellipsis",
                justify="right" if column.right else "left",
            )
        for row in self.rows:
            table.add_row(*row)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not console.is_terminal:
            # Not a screen (a pipe, a file, a CI log): nothing is ever cut.
            yield self._table(self._natural(capped=False))
            return
        widths = self._natural()
        wide = options.update_width(sum(widths) + 10 * len(widths))
        rendered = console.render_lines(self._table(widths), wide, pad=False)
        overhead = max(Segment.get_line_length(line) for line in rendered) - sum(widths)
        excess = sum(widths) + overhead - options.max_width
        floors = [
            c.shrink_to if c.shrink_to is not None else w
            for c, w in zip(self.columns, widths, strict=True)
        ]
        while excess > 0:
            room = [w - floor for w, floor in zip(widths, floors, strict=True)]
            widest = max(range(len(widths)), key=lambda i: (room[i] > 0, widths[i]))
            if room[widest] <= 0:
                break  # nothing left to give: the console crops the rest
            widths[widest] -= 1
            excess -= 1
        yield self._table(widths)


def _inspect_table(pollers: Sequence[Mapping[str, Any]], now: int) -> FittedTable:
    # Text columns give way (their cells end in an ellipsis); numbers never shrink.
    columns = [
        Col("key", shrink_to=10, max_width=40),
        Col("cursor", shrink_to=10, max_width=44),
        Col("lag", right=True),
        Col("circuit"),
        Col("every", right=True),
        Col("pending", right=True),
        Col("parked", right=True),
        Col("items", right=True),
        Col("lease", shrink_to=5, max_width=32),
    ]
    rows = []
    for entry in pollers:
        schedule = entry.get("schedule") or {}
        name = _cell(key_name(entry["poller"], entry["partition"]))
        if entry.get("paused"):
            name.append(" (paused)", style="yellow")
        elif entry.get("overdue"):
            name.append(" (overdue)", style="bold red")
        cursors = entry.get("cursors") or {}
        parked = int(entry.get("parked") or 0)
        rows.append(
            [
                name,
                _cell(
                    cursor_text(
                        cursors.get("live"),
                        caught_up=listing_caught_up(
                            schedule.get("last_poll"), schedule.get("last_error")
                        ),
                    )
                ),
                _cell(format_ms(entry.get("lag_ms"))),
                _circuit_text(str(schedule.get("circuit", "closed"))),
                _cell(format_ms(schedule.get("interval_ms"))),
                _cell(str(entry.get("outbox_pending", 0))),
                _cell(str(parked), "bold red" if parked else ""),
                _cell(str(entry.get("items", 0))),
                _lease_text(entry.get("lease"), now),
            ]
        )
    return FittedTable(columns, rows)


def late_text(late: Mapping[str, Any] | None) -> tuple[str, bool] | None:
    """A key's late arrivals in one line, and whether the live lane lost any (some came
    later than its lookback, or a reconcile found misses); ``None`` when there are none."""
    if not late or not (late.get("count") or late.get("missed")):
        return None
    parts = []
    count = int(late.get("count") or 0)
    if count:
        parts.append(
            f"{count} late arrival(s), up to {format_ms(late.get('max_ms'))} behind the "
            f"watermark (p99 {format_ms(late.get('p99_ms'))}), lookback "
            f"{format_ms(late.get('window_ms'))}"
        )
    beyond, missed = int(late.get("beyond_window") or 0), int(late.get("missed") or 0)
    if beyond:
        parts.append(f"{beyond} later than the lookback")
    if missed:
        parts.append(f"{missed} missed by the live lane (found by reconcile)")
    return "; ".join(parts), bool(beyond or missed)


def inspect_view(report: Mapping[str, Any]) -> RenderableType:
    """The ``inspect`` screen: a title line, one table row per key, then last errors."""
    pollers: list[Mapping[str, Any]] = list(report.get("pollers") or [])
    now = int(report.get("generated_at") or 0)
    instance = report.get("instance_id")
    where = f"instance {instance} ({report.get('status')})" if instance else "store only"
    title = Text.assemble(
        ("watukuy", "bold"),
        f"  {len(pollers)} key{'s' if len(pollers) != 1 else ''}  {where}  at {format_time(now)}",
        no_wrap=True,
        overflow="ellipsis",
    )
    parts: list[RenderableType] = [title]
    if not pollers:
        parts.append(Text("no keys yet: nothing has been polled", style="dim"))
        return Group(*parts)
    parts.append(_inspect_table(pollers, now))
    parts.extend(_progress_lines(report, pollers))
    for entry in pollers:
        error = (entry.get("schedule") or {}).get("last_error")
        if error:
            line = Text(
                f"{key_name(entry['poller'], entry['partition'])}: ",
                style="red",
                no_wrap=True,
                overflow="ellipsis",
            )
            line.append(_one_line(f"{error.get('name', 'Error')}: {error.get('message', '')}"))
            parts.append(line)
    for entry in pollers:
        late = late_text(entry.get("late_arrivals"))
        if late is not None:
            style = "red" if late[1] else "yellow"
            parts.append(
                Text(
                    f"{key_name(entry['poller'], entry['partition'])}: {late[0]}",
                    style=style,
                    no_wrap=True,
                    overflow="ellipsis",
                )
            )
    for name, budget in (report.get("budgets") or {}).items():
        parts.append(
            Text(f"budget {name}: {describe_usage(budget)}", no_wrap=True, overflow="ellipsis")
        )
    return Group(*parts)


def _progress_lines(report: Mapping[str, Any], pollers: Sequence[Mapping[str, Any]]) -> list[Text]:
    """What says the engine is not doing its work: its loop, and the overdue keys."""
    lines: list[Text] = []
    loop = report.get("loop")
    if loop and not loop.get("alive", True):
        lines.append(_cell("daemon loop ended while the engine runs", "bold red"))
    elif loop and loop.get("stalled"):
        late = format_ms(loop.get("late_ms"))
        lines.append(_cell(f"daemon loop stalled: {late} past the wake-up it planned", "bold red"))
    for entry in pollers:
        if entry.get("overdue") and not entry.get("paused"):
            text = (
                f"{key_name(entry['poller'], entry['partition'])}: overdue: due "
                f"{format_ms(entry.get('waiting_ms'))} ago with nobody working on it"
            )
            if entry.get("queued"):
                text += " (waiting for its budget)"
            lines.append(_cell(text, "red"))
    return lines


def _error_cell(error: Mapping[str, Any] | None, *, throttled: bool) -> Text:
    if not error:
        return _cell("-")
    message = _one_line(str(error.get("message", "")))
    if throttled:
        return _cell(f"throttled: {message}", "yellow")
    return _cell(message, "red")


def tick_view(result: Mapping[str, Any]) -> RenderableType:
    """What one ``tick`` did: one row per key and lane (the totals of its cycles, and
    whether it caught up), then the totals, and what to do about keys still behind."""
    polled: list[Mapping[str, Any]] = list(result.get("polled") or [])
    columns = [
        Col("key", shrink_to=12, max_width=32),
        Col("lane"),
        Col("cycles", right=True),
        Col("items", right=True),
        Col("events", right=True),
        Col("delivered", right=True),
        Col("took", right=True),
        Col("backlog"),
        Col("error", shrink_to=5, max_width=80),
    ]
    rows = []
    for row in polled:
        error = row.get("error")
        rows.append(
            [
                _cell(key_name(row["poller"], row["partition"])),
                _cell(str(row["lane"])),
                _cell(str(row.get("cycles", 1))),
                _cell(str(row["items"])),
                _cell(str(row["events"])),
                _cell(str(row["delivered"])),
                _cell(format_ms(row["duration_ms"])),
                _backlog_cell(row),
                _error_cell(error, throttled=bool(row.get("throttled"))),
            ]
        )
    table = FittedTable(columns, rows)
    cycles = sum(int(row.get("cycles", 1)) for row in polled)
    failed = sum(1 for row in polled if row.get("error") and not row.get("throttled"))
    throttled = sum(1 for row in polled if row.get("throttled"))
    summary = (
        f"{cycles} cycle{'s' if cycles != 1 else ''} ran ({failed} failed"
        + (f", {throttled} throttled" if throttled else "")
        + "), "
        f"{result.get('skipped_not_due', 0)} not due, "
        f"{result.get('skipped_leased', 0)} leased elsewhere, "
        f"{format_ms(result.get('duration_ms'))}"
        + (" (stopped at --max-duration)" if result.get("timed_out") else "")
    )
    parts: list[RenderableType] = [table] if polled else []
    parts.append(Text(summary))
    pending = len(result.get("pending_keys") or [])
    if pending:
        keys = f"{pending} key{'s' if pending != 1 else ''} {'have' if pending != 1 else 'has'}"
        advice = "run tick again or raise --max-duration"
        parts.append(Text(f"{keys} more pending: {advice}", style="yellow"))
    return Group(*parts)


def _backlog_cell(row: Mapping[str, Any]) -> Text:
    """Whether the lane caught up; a failed or throttled lane cannot say."""
    if row.get("error"):
        return _cell("-")
    if row.get("pending"):
        return _cell("more pending", "yellow")
    return _cell("caught up", "green")


def parked_table(rows: Sequence[Mapping[str, Any]]) -> RenderableType:
    """Parked rows: the id prefix to pass to ``retry``/``discard``, and why they are parked."""
    if not rows:
        return Text("no parked rows")
    columns = [
        Col("id"),
        Col("kind"),
        Col("attempts", right=True),
        Col("parked at"),
        Col("what", shrink_to=8, max_width=40),
        Col("error", shrink_to=8, max_width=80),
    ]
    cells = []
    for row in rows:
        event = row.get("event")
        if isinstance(event, Mapping):
            what = f"{event.get('type')} {event.get('subject')}"
        else:
            what = "invalid item"
        error = row.get("error") or {}
        cells.append(
            [
                _cell(str(row["id"])[:12]),
                _cell(str(row["kind"])),
                _cell(str(row["attempts"])),
                _cell(format_time(row.get("parked_at"))),
                _cell(what),
                _cell(_one_line(str(error.get("message", "")))),
            ]
        )
    table = FittedTable(columns, cells)
    return Group(table, Text(f"{len(rows)} parked; --ids takes these prefixes", style="dim"))


def _one_line(text: str) -> str:
    return " ".join(text.split())
