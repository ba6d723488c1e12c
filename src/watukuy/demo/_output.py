"""What the demo shows: a live event stream and status table, plain lines, or JSON lines.

Three interchangeable outputs share one interface, :class:`DemoOutput`:

- :class:`LiveOutput` (a terminal): events scroll above a status table that refreshes
  every second from ``engine.inspect()``;
- :class:`PlainOutput` (``--no-ui``, or stdout is not a terminal): one line per event;
- :class:`JsonOutput` (``--json``): one JSON object per line, ``kind`` telling what it is:
  ``started``, ``resumed``, ``event``, ``drained``, ``fault``, ``stopped``.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping
from typing import Any, Protocol, TextIO

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from watukuy.cursor.strategy import describe_cursor, listing_caught_up
from watukuy.model import json as wkjson

__all__ = ["DemoOutput", "JsonOutput", "LiveOutput", "PlainOutput", "summarize"]

_TYPE_STYLES = {"created": "green", "updated": "cyan", "deleted": "red"}


class DemoOutput(Protocol):
    """Where the demo reports what happens."""

    def started(self, info: Mapping[str, Any]) -> None:
        """The vendor and the engine are up."""

    def resumed(self, info: Mapping[str, Any]) -> None:
        """A previous run left state behind: what is being resumed."""

    def event(self, record: Mapping[str, Any]) -> None:
        """One delivered event."""

    def drained(self, count: int) -> None:
        """Every event the previous run left pending has now been delivered."""

    def fault(self, description: str) -> None:
        """The vendor scripted a failure."""

    def warning(self, message: str) -> None:
        """Something the engine logged at warning level."""

    def status(self, report: Mapping[str, Any], delivered: Mapping[str, int]) -> None:
        """A fresh ``inspect()`` report and the deliveries per key in this run."""

    def stopped(self, info: Mapping[str, Any]) -> None:
        """The demo stopped."""

    def close(self) -> None:
        """Release the terminal."""


def _money(cents: Any) -> str:
    return f"${cents / 100:,.2f}" if isinstance(cents, int) else "-"


def summarize(poller: str, data: Any) -> str:
    """A few words about an item, for the event stream."""
    if not isinstance(data, Mapping):
        return "(no payload)"
    if poller == "orders":
        return f"{data.get('status')} {_money(data.get('total_cents'))} for {data.get('customer')}"
    if poller == "catalog":
        return f"{data.get('name')} {_money(data.get('price_cents'))}, {data.get('stock')} in stock"
    if poller == "invoices":
        return f"{data.get('status')} {_money(data.get('amount_cents'))}"
    return ", ".join(f"{k}={v}" for k, v in list(data.items())[:3])


def _clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S")


def _key(poller: str, partition: str) -> str:
    return f"{poller}/{partition}" if partition else poller


def _event_line(record: Mapping[str, Any]) -> Text:
    kind = str(record["type"])
    line = Text(f"{_clock(record['at'])}  ", style="dim")
    line.append(f"{_key(record['poller'], record['partition']):<17}")
    line.append(f"{kind:<8}", style=_TYPE_STYLES.get(kind, ""))
    line.append(f" {record['subject']:<15} ")
    line.append(summarize(str(record["poller"]), record.get("data")))
    if record.get("lane") not in (None, "live"):
        line.append(f"  [{record['lane']}]", style="magenta")
    if record.get("resumed"):
        line.append("  (left pending by the previous run)", style="yellow")
    if int(record.get("deliveries", 1)) > 1:
        line.append(f"  (delivered {record['deliveries']}x: it was in flight)", style="yellow")
    return line


def _resumed_lines(info: Mapping[str, Any]) -> list[Text]:
    lines = [Text("resuming from the previous run:", style="bold yellow")]
    for key in info["keys"]:
        line = Text(f"  {_key(key['poller'], key['partition']):<17}", style="yellow")
        line.append(f"cursor {key['cursor']}, {key['items']} items known")
        if key["pending"]:
            line.append(f", {key['pending']} events pending delivery", style="bold")
        if key.get("lease_owner"):
            line.append(f", lease of {key['lease_owner']} expires in {key['lease_expires_in']}")
        lines.append(line)
    lines.append(
        Text(
            f"  consumer log: {info['consumer_log_events']} events delivered before; "
            f"vendor replayed {info['vendor_steps']} steps",
            style="yellow",
        )
    )
    return lines


def _status_table(report: Mapping[str, Any], delivered: Mapping[str, int]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    table.add_column("key", min_width=16, max_width=20)
    table.add_column("cursor", min_width=8, max_width=36)
    table.add_column("items", justify="right", no_wrap=True, min_width=5)
    table.add_column("delivered", justify="right", no_wrap=True, min_width=9)
    table.add_column("pending", justify="right", no_wrap=True, min_width=7)
    table.add_column("every", justify="right", no_wrap=True, min_width=5)
    table.add_column("circuit", no_wrap=True, min_width=9)
    table.add_column("last poll", min_width=9, max_width=30)
    for entry in report.get("pollers", []):
        key = _key(entry["poller"], entry["partition"])
        schedule = entry.get("schedule") or {}
        last = entry.get("last_poll") or {}
        events = last.get("events") or {}
        if last:
            note = (
                "304 not modified"
                if last.get("not_modified")
                else (
                    f"{last.get('items', 0)} items, +{events.get('created', 0)} "
                    f"~{events.get('updated', 0)} -{events.get('deleted', 0)}"
                )
            )
        else:
            note = "-"
        if schedule.get("last_error"):
            note = str(schedule["last_error"].get("message", "error"))
        interval = schedule.get("interval_ms")
        circuit = str(schedule.get("circuit", "closed"))
        table.add_row(
            Text(key, no_wrap=True, overflow="ellipsis"),
            Text(
                _cursor(entry.get("cursors", {}).get("live"), schedule),
                no_wrap=True,
                overflow="ellipsis",
            ),
            str(entry.get("items", 0)),
            str(delivered.get(key, 0)),
            str(entry.get("outbox_pending", 0)),
            "-" if interval is None else f"{interval / 1000:.1f}s",
            Text(circuit, style="green" if circuit == "closed" else "bold red"),
            Text(
                note,
                no_wrap=True,
                overflow="ellipsis",
                style="red" if schedule.get("last_error") else "",
            ),
        )
    return table


def _cursor(cursor: Any, schedule: Mapping[str, Any]) -> str:
    # The demo's one poller without a cursor is the snapshot diff of the catalog.
    if cursor is None:
        return "full scan"
    caught_up = listing_caught_up(schedule.get("last_poll"), schedule.get("last_error"))
    return describe_cursor(cursor, caught_up=caught_up)


class PlainOutput:
    """One line per happening, for logs and pipes (``--no-ui``)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    def _print(self, renderable: RenderableType) -> None:
        # One event, one line, however narrow the terminal or pipe.
        self.console.print(renderable, soft_wrap=True)

    def started(self, info: Mapping[str, Any]) -> None:
        """Print where everything is."""
        self._print(
            Text.assemble(
                ("watukuy demo", "bold"),
                f"  vendor API {info['api']}  seed {info['seed']}",
            )
        )
        self._print(Text(f"store {info['db']}  consumer log {info['consumer_log']}"))
        self._print(
            Text(
                "pollers: orders (timestamp + reconcile), catalog (snapshot diff),\n"
                "         invoices/acme|globex|initech (token)\n"
                "code: watukuy demo --show-code; Ctrl-C stops, a restart resumes",
                style="dim",
            )
        )

    def resumed(self, info: Mapping[str, Any]) -> None:
        """Print the resumed keys."""
        for line in _resumed_lines(info):
            self._print(line)

    def event(self, record: Mapping[str, Any]) -> None:
        """Print an event line."""
        self._print(_event_line(record))

    def drained(self, count: int) -> None:
        """Say the previous run's outbox is empty now."""
        self._print(Text(f"drained {count} events the previous run left pending", style="yellow"))

    def fault(self, description: str) -> None:
        """Print the scripted failure."""
        self._print(Text(description, style="magenta"))

    def warning(self, message: str) -> None:
        """Print an engine warning."""
        self._print(Text(f"engine: {message}", style="red"))

    def status(self, report: Mapping[str, Any], delivered: Mapping[str, int]) -> None:
        """Plain output shows the table only at the end."""

    def stopped(self, info: Mapping[str, Any]) -> None:
        """Print the final table and a summary."""
        if info.get("report"):
            self._print(_status_table(info["report"], info.get("per_key", {})))
        self._print(
            Text(
                f"stopped: {info['deliveries']} deliveries this run ({info['redelivered']} "
                f"redelivered), {info['consumer_log_events']} distinct events in the consumer "
                f"log.\nRun again to resume; inspect with: watukuy inspect --store "
                f"sqlite:///{info['db']}",
                style="bold",
            )
        )

    def close(self) -> None:
        """Nothing to release."""


class LiveOutput(PlainOutput):
    """Events scrolling above a status table refreshed every second (a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__(console)
        self._live = Live(Text("starting..."), console=self.console, auto_refresh=False)
        self._live.start()

    def _print(self, renderable: RenderableType) -> None:
        self._live.console.print(renderable)

    def status(self, report: Mapping[str, Any], delivered: Mapping[str, int]) -> None:
        """Redraw the table."""
        self._live.update(
            Group(_status_table(report, delivered), Text("Ctrl-C to stop", style="dim")),
            refresh=True,
        )

    def stopped(self, info: Mapping[str, Any]) -> None:
        """Drop the live table, then print the summary."""
        self._live.update(Text(""), refresh=True)
        self._live.stop()
        super().stopped(info)

    def close(self) -> None:
        """Stop the live display if still running."""
        if self._live.is_started:
            self._live.stop()


class JsonOutput:
    """One JSON object per line on stdout (``--json``), flushed as it happens."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout

    def _write(self, kind: str, data: Mapping[str, Any]) -> None:
        self._stream.write(wkjson.dumps(wkjson.to_jsonable({"kind": kind, **data})) + "\n")
        self._stream.flush()

    def started(self, info: Mapping[str, Any]) -> None:
        """``{"kind": "started", ...}``."""
        self._write("started", info)

    def resumed(self, info: Mapping[str, Any]) -> None:
        """``{"kind": "resumed", "keys": [...], ...}``."""
        self._write("resumed", info)

    def event(self, record: Mapping[str, Any]) -> None:
        """``{"kind": "event", "id": ..., ...}``."""
        self._write("event", record)

    def drained(self, count: int) -> None:
        """``{"kind": "drained", "count": n}``."""
        self._write("drained", {"count": count})

    def fault(self, description: str) -> None:
        """``{"kind": "fault", "description": ...}``."""
        self._write("fault", {"description": description})

    def warning(self, message: str) -> None:
        """Warnings go to stderr, keeping stdout one JSON object per line."""
        print(f"engine: {message}", file=sys.stderr)

    def status(self, report: Mapping[str, Any], delivered: Mapping[str, int]) -> None:
        """Not part of the JSON stream."""

    def stopped(self, info: Mapping[str, Any]) -> None:
        """``{"kind": "stopped", ...}`` (without the full report)."""
        self._write("stopped", {k: v for k, v in info.items() if k != "report"})

    def close(self) -> None:
        """Nothing to release."""
