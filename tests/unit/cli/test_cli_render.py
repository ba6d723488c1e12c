"""The human output of the CLI: compact formats, and tables that stay one row per line."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console, RenderableType

from watukuy.cli._render import (
    cursor_text,
    format_ms,
    format_time,
    inspect_view,
    parked_table,
    tick_view,
)

NOW = 1_767_229_200_000  # 2026-01-01T01:00:00Z


def render(renderable: RenderableType, width: int, *, terminal: bool = True) -> str:
    console = Console(
        width=width,
        file=io.StringIO(),
        color_system=None,
        highlight=False,
        force_terminal=terminal,
    )
    console.print(renderable)
    output = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(output, str)
    return output


def entry(poller: str, partition: str = "", **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "poller": poller,
        "partition": partition,
        "paused": False,
        "lease": None,
        "cursors": {},
        "schedule": {"circuit": "closed", "interval_ms": 30_000, "last_error": None},
        "last_poll": None,
        "outbox_pending": 0,
        "parked": 0,
        "items": 0,
        "lag_ms": None,
    }
    base.update(changes)
    return base


REPORT: dict[str, Any] = {
    "instance_id": "worker-7f3a-very-long-instance-name",
    "status": "running",
    "generated_at": NOW,
    "pollers": [
        entry(
            "orders",
            cursors={"live": {"value": "2026-01-01T00:59:58.123Z", "tie_break": "ord-000123"}},
            lag_ms=1_877,
            items=12_345,
            outbox_pending=17,
            lease={
                "owner": "worker-7f3a-very-long-instance-name",
                "epoch": 9,
                "expires_at": NOW + 5,
            },
        ),
        entry(
            "invoices",
            "acme-international-holdings",
            cursors={"live": {"value": "eyJhZnRlciI6Imludi1hY21lLTAwMDEifQ"}},
            schedule={
                "circuit": "half-open",
                "interval_ms": 300_000,
                "last_error": {
                    "name": "HttpError",
                    "message": "GET /x responded 503:\nUnavailable",
                },
            },
            parked=3,
            items=7,
            lease={"owner": "gone-instance", "epoch": 2, "expires_at": NOW - 1},
        ),
        entry("catalog", cursors={"live": None}, paused=True, items=40),
    ],
}


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "-"),
        (0, "0ms"),
        (850, "850ms"),
        (1_500, "1.5s"),
        (999.6, "1.0s"),
        (59_999, "1.0m"),  # the unit it reaches once rounded: never "60.0s"
        (3_599_000, "1.0h"),
        (120_000, "2.0m"),
        (5_400_000, "1.5h"),
        (172_800_000, "2.0d"),
        (-1_500, "-1.5s"),
    ],
)
def test_format_ms(ms: int | None, text: str) -> None:
    assert format_ms(ms) == text


def test_format_time() -> None:
    assert format_time(0) == "1970-01-01 00:00:00Z"
    assert format_time(NOW) == "2026-01-01 01:00:00Z"
    assert format_time(None) == "-"


@pytest.mark.parametrize(
    ("cursor", "text"),
    [
        (None, "-"),
        ({"value": "2026-01-01T00:00:00Z", "tie_break": "o1"}, "2026-01-01T00:00:00Z #o1"),
        ({"value": 1767225600, "tie_break": None}, "1767225600"),
        ({"value": None, "tie_break": None}, "(start)"),
        ({"value": "tok"}, "tok"),
        ({"value": None}, "(start)"),
        ({"page": 4}, "page 4"),
        ("raw", "raw"),
        ({"a": [1, 2]}, '{"a":[1,2]}'),
    ],
)
def test_cursor_text(cursor: Any, text: str) -> None:
    assert cursor_text(cursor) == text


def test_inspect_table_at_100_columns_is_one_readable_row_per_key() -> None:
    assert render(inspect_view(REPORT), 100).splitlines() == [
        "watukuy  3 keys  instance worker-7f3a-very-long-instance-name (running)  at "
        "2026-01-01 01:00:00Z",
        "key               cursor             lag  circuit    every  pending  parked  items  "
        "lease           ",
        "─" * 100,
        "orders            2026-01-01T00:5…  1.9s  closed     30.0s       17       0  12345  "
        "worker-7f3a-ver…",
        "invoices/acme-i…  eyJhZnRlciI6Iml…     -  half-open   5.0m        0       3      7  "
        "gone-instance (…",
        "catalog (paused)  -                    -  closed     30.0s        0       0     40  "
        "-               ",
        "invoices/acme-international-holdings: HttpError: GET /x responded 503: Unavailable",
    ]


@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_inspect_rows_never_wrap_and_numbers_are_never_cut(width: int) -> None:
    lines = render(inspect_view(REPORT), width).splitlines()
    assert len(lines) == 7
    assert all(len(line) <= width for line in lines)
    assert lines[1].split() == [
        "key",
        "cursor",
        "lag",
        "circuit",
        "every",
        "pending",
        "parked",
        "items",
        "lease",
    ]
    # The fixed columns keep their natural widths, so their cells read the same at any width.
    assert "  1.9s  closed     30.0s       17       0  12345  " in lines[3]
    assert "     -  half-open   5.0m        0       3      7  " in lines[4]
    assert "     -  closed     30.0s        0       0     40  " in lines[5]
    assert lines[3].startswith("orders ")
    assert lines[4].startswith("invoices/")
    assert lines[5].startswith("catalog (")


def test_inspect_at_a_wide_terminal_shows_everything() -> None:
    text = render(inspect_view(REPORT), 160)
    assert "2026-01-01T00:59:58.123Z #ord-000123" in text
    assert "invoices/acme-international-holdings " in text
    assert "gone-instance (expired)" in text
    assert "worker-7f3a-very-long-instance-name" in text


def test_inspect_view_without_keys() -> None:
    empty: dict[str, Any] = {
        "instance_id": None,
        "status": "store-only",
        "generated_at": NOW,
        "pollers": [],
    }
    text = render(inspect_view(empty), 100)
    assert text.splitlines() == [
        "watukuy  0 keys  store only  at 2026-01-01 01:00:00Z",
        "no keys yet: nothing has been polled",
    ]


def test_inspect_ends_with_a_line_per_budget() -> None:
    report = {
        **REPORT,
        "budgets": {
            "erp": {"requests": 150, "per_ms": 1_000, "burst": None, "used": 37.0, "waiting": 2},
            "crm": {"requests": 10, "per_ms": 1_000, "burst": 3, "used": 1.5, "waiting": 0},
            "old": {"requests": 5, "per_ms": 60_000, "burst": None, "used": None, "waiting": 0},
        },
    }
    lines = render(inspect_view(report), 100).splitlines()
    assert lines[-3:] == [
        "budget erp: 37 of 150 per 1.0s, 2 waiting",
        "budget crm: 1.5 of a bucket of 3 (1 per 100ms)",
        "budget old: ? of 5 per 1.0m",
    ]
    assert render(inspect_view(REPORT), 100).splitlines()[-1].startswith("invoices/")


def test_inspect_ends_a_keys_late_arrivals_with_a_line_of_their_own() -> None:
    late = {
        "count": 12,
        "max_ms": 4_100,
        "p99_ms": 4_000,
        "beyond_window": 0,
        "missed": 2,
        "window_ms": 10_000,
    }
    report = {**REPORT, "pollers": [entry("orders", late_arrivals=late)]}
    lines = render(inspect_view(report), 200).splitlines()
    assert lines[-1] == (
        "orders: 12 late arrival(s), up to 4.1s behind the watermark (p99 4.0s), lookback "
        "10.0s; 2 missed by the live lane (found by reconcile)"
    )
    quiet = {**REPORT, "pollers": [entry("orders", late_arrivals={"count": 0, "missed": 0})]}
    assert "late arrival" not in render(inspect_view(quiet), 200)


def test_tick_view_says_throttled_not_failed() -> None:
    result = {
        "polled": [
            {
                "poller": "orders",
                "partition": "",
                "lane": "live",
                "items": 0,
                "events": 0,
                "delivered": 0,
                "duration_ms": 5,
                "error": {"name": "HttpError", "message": "responded 429", "status": 429},
                "throttled": True,
            }
        ],
        "skipped_leased": 0,
        "skipped_not_due": 0,
        "duration_ms": 5,
        "timed_out": False,
    }
    lines = render(tick_view(result), 100).splitlines()
    assert lines[2].endswith("throttled: responded 429")
    assert lines[-1] == "1 cycle ran (0 failed, 1 throttled), 0 not due, 0 leased elsewhere, 5ms"


def test_tick_view() -> None:
    result = {
        "polled": [
            {
                "poller": "orders",
                "partition": "",
                "lane": "live",
                "items": 7,
                "events": 7,
                "delivered": 6,
                "duration_ms": 1_250,
                "error": None,
                "cycles": 3,
                "pending": True,
            },
            {
                "poller": "invoices",
                "partition": "t1",
                "lane": "backfill",
                "items": 0,
                "events": 0,
                "delivered": 0,
                "duration_ms": 40,
                "error": {"name": "HttpError", "message": "responded 503"},
            },
        ],
        "skipped_leased": 1,
        "skipped_not_due": 2,
        "duration_ms": 1_300,
        "timed_out": True,
        "pending_keys": [{"poller": "orders", "partition": ""}],
    }
    lines = render(tick_view(result), 120).splitlines()
    assert lines[0].split() == [
        "key",
        "lane",
        "cycles",
        "items",
        "events",
        "delivered",
        "took",
        "backlog",
        "error",
    ]
    assert lines[2].split() == [
        "orders",
        "live",
        "3",
        "7",
        "7",
        "6",
        "1.2s",
        "more",
        "pending",
        "-",
    ]
    assert lines[3].split()[:8] == ["invoices/t1", "backfill", "1", "0", "0", "0", "40ms", "-"]
    assert lines[3].endswith("responded 503")
    assert lines[-2:] == [
        "4 cycles ran (1 failed), 2 not due, 1 leased elsewhere, 1.3s (stopped at --max-duration)",
        "1 key has more pending: run tick again or raise --max-duration",
    ]
    caught_up = {**result, "polled": [{**result["polled"][0], "pending": False}]}
    caught_up["pending_keys"] = []
    lines = render(tick_view(caught_up), 120).splitlines()
    assert lines[2].split()[7:9] == ["caught", "up"]
    assert lines[-1].startswith("3 cycles ran (0 failed)")
    several = {**result, "pending_keys": [{"poller": "a", "partition": ""}] * 3}
    assert render(tick_view(several), 120).splitlines()[-1] == (
        "3 keys have more pending: run tick again or raise --max-duration"
    )
    empty: dict[str, Any] = {
        "polled": [],
        "skipped_leased": 0,
        "skipped_not_due": 4,
        "duration_ms": 3,
    }
    assert render(tick_view(empty), 100).splitlines() == [
        "0 cycles ran (0 failed), 4 not due, 0 leased elsewhere, 3ms"
    ]


def test_parked_table_shows_the_id_prefixes() -> None:
    rows = [
        {
            "id": "a" * 64,
            "kind": "poison",
            "attempts": 5,
            "parked_at": NOW,
            "event": {"type": "updated", "subject": "ord-1"},
            "error": {"message": "boom\nsecond line"},
        },
        {
            "id": "b" * 64,
            "kind": "invalid",
            "attempts": 0,
            "parked_at": NOW,
            "event": None,
            "error": {"message": "total: expected a number"},
        },
    ]
    lines = render(parked_table(rows), 100).splitlines()
    assert lines[0].split() == ["id", "kind", "attempts", "parked", "at", "what", "error"]
    assert lines[2].split() == [
        "a" * 12,
        "poison",
        "5",
        "2026-01-01",
        "01:00:00Z",
        "updated",
        "ord-1",
        "boom",
        "second",
        "line",
    ]
    assert lines[3].split()[:3] == ["b" * 12, "invalid", "0"]
    assert "invalid item" in lines[3]
    assert lines[-1] == "2 parked; --ids takes these prefixes"
    assert render(parked_table([]), 100).strip() == "no parked rows"


def test_inspect_rows_are_never_cut_when_the_output_is_not_a_terminal() -> None:
    # The CLI's console in a pipe is as wide as it needs to be (see _console()).
    text = render(inspect_view(REPORT), 1_000_000, terminal=False)
    assert "…" not in text
    assert "worker-7f3a-very-long-instance-name" in text
    assert "2026-01-01T00:59:58.123Z #ord-000123" in text
    for entry_ in REPORT["pollers"]:
        name = entry_["poller"] + (f"/{entry_['partition']}" if entry_["partition"] else "")
        assert name in text
    lease = next(e["lease"] for e in REPORT["pollers"] if e["lease"])
    assert lease["owner"] in text


def test_inspect_marks_overdue_keys_and_a_stalled_loop() -> None:
    report = {
        **REPORT,
        "loop": {
            "alive": True,
            "next_wake_at": NOW - 95_000,
            "late_ms": 95_000,
            "grace_ms": 30_000,
            "stalled": True,
        },
        "pollers": [
            entry("orders", waiting_ms=290_000, overdue=True),
            entry("invoices", waiting_ms=4_000, overdue=False),
            entry("catalog", paused=True, waiting_ms=None, overdue=False),
        ],
    }
    lines = render(inspect_view(report), 120).splitlines()
    assert lines[3].startswith("orders (overdue) ")
    assert lines[4].startswith("invoices ")
    assert lines[5].startswith("catalog (paused) ")
    assert lines[6:] == [
        "daemon loop stalled: 1.6m past the wake-up it planned",
        "orders: overdue: due 4.8m ago with nobody working on it",
    ]
