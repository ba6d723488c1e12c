"""How a cursor reads for people: ``(start)`` before a listing was ever finished,
``(caught up)`` after, with one rule for the CLI, the admin page and the demo."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

import watukuy as wk
from watukuy.cli._render import inspect_view
from watukuy.cursor.strategy import describe_cursor, listing_caught_up
from watukuy.model.rows import PollerState, PollSummary, ScheduleState
from watukuy.testing import VirtualClock


@pytest.mark.parametrize(
    ("cursor", "before", "after"),
    [
        ({"value": None}, "(start)", "(caught up)"),
        ({"value": "sync-7"}, "sync-7", "sync-7 (caught up)"),
        ({"page": 1}, "page 1", "(caught up)"),
        ({"value": None, "tie_break": None}, "(start)", "(caught up)"),
        ({"value": "2026-01-01T00:00:00Z", "tie_break": "o1"}, *["2026-01-01T00:00:00Z #o1"] * 2),
        (None, "-", "-"),
    ],
)
def test_the_words_before_and_after_a_finished_listing(
    cursor: Any, before: str, after: str
) -> None:
    assert describe_cursor(cursor) == before
    assert describe_cursor(cursor, caught_up=True) == after


def test_caught_up_means_the_last_cycle_finished_and_none_failed_since() -> None:
    finished = PollSummary(lane="live", started_at=0, truncated=False)
    cut = PollSummary(lane="live", started_at=0, truncated=True)
    assert listing_caught_up(finished)
    assert listing_caught_up({"truncated": False})
    assert not listing_caught_up(None)
    assert not listing_caught_up(cut)
    assert not listing_caught_up({"truncated": True})
    assert not listing_caught_up(finished, {"message": "vendor down"})


def _token_engine(pages: int, max_pages: int, last_says: bool | None = None) -> wk.Engine:
    """A token listing of ``pages`` pages whose last page says ``has_more=last_says``."""

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        n = int(ctx.cursor.value or 0)
        more = n + 1 < pages
        token = str(n + 1) if more else None
        return wk.Page(items=[{"id": n}], cursor=token, has_more=True if more else last_says)

    invoices = wk.define_poller(
        name="invoices",
        identity=lambda item: item["id"],
        cursor=wk.TokenCursor(),
        fetch=fetch,
        max_pages_per_cycle=max_pages,
    )
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[invoices], clock=VirtualClock())
    engine.on("invoices", lambda event, ctx: None)
    return engine


def _shown_cursor(report: dict[str, Any]) -> str:
    """The cursor cell of the key's row in ``watukuy inspect``'s table."""
    console = Console(width=160, file=io.StringIO(), color_system=None)
    console.print(inspect_view(report))
    output = console.file.getvalue()  # type: ignore[attr-defined]
    [row] = [line for line in output.splitlines() if line.startswith("invoices ")]
    cells = row.split("  ")
    return [cell.strip() for cell in cells if cell.strip()][1]


@pytest.mark.parametrize(
    ("last_says", "stored", "shown"),
    [
        (None, {"value": None}, "(caught up)"),  # exhausted: the next cycle starts over
        (False, {"value": "2"}, "2 (caught up)"),  # the last page's token is kept
    ],
)
async def test_a_token_cursor_reads_caught_up_after_a_cycle_that_finished_the_listing(
    last_says: bool | None, stored: dict[str, Any], shown: str
) -> None:
    engine = _token_engine(pages=3, max_pages=50, last_says=last_says)
    await engine.tick()
    report = await engine.inspect()
    assert report["pollers"][0]["cursors"]["live"] == stored
    assert _shown_cursor(report) == shown


async def test_a_cut_cycle_shows_where_the_listing_stands() -> None:
    engine = _token_engine(pages=5, max_pages=2)
    await engine.tick(catch_up=False)  # one cycle, cut by its page cap
    assert _shown_cursor(await engine.inspect()) == "2"


def test_the_demo_reads_cursors_by_the_same_rule() -> None:
    from watukuy.demo._output import _cursor
    from watukuy.demo._run import _describe_cursor

    finished = ScheduleState(last_poll=PollSummary(lane="live", started_at=0))
    state = PollerState(cursors={"live": '{"value": null}'}, schedule=finished)
    assert _describe_cursor(state) == "(caught up)"
    assert _describe_cursor(PollerState(cursors={"live": '{"value": null}'})) == "(start)"
    assert _describe_cursor(None) == "(initial)"
    assert _cursor({"value": None}, {"last_poll": {"truncated": False}}) == "(caught up)"
    assert _cursor({"page": 3}, {"last_poll": None}) == "page 3"
    assert _cursor(None, {}) == "full scan"
