"""``tick`` side by side per poller, a backfill driven to completion, and the progress
line that counts their work as it happens."""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_fakes import Polled, build_engine
from rich.console import Console, Group

import watukuy as wk
from watukuy.cli import main
from watukuy.cli._meter import Counts, Meter, Rates, Reading
from watukuy.cli._progress import _live_view, drive_backfill, tick_with_progress
from watukuy.cli._watch import Watch, figures_line, watching
from watukuy.model.rows import PKey
from watukuy.runtime.hooks import PollEndDetails, PollStartDetails
from watukuy.testing import SeededRandom, VirtualClock

START = 1_767_225_600_000 + 3_600_000  # as the polled fixture: after the items' stamps
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def quiet() -> Console:
    return Console(file=io.StringIO(), width=100)


def terminal() -> tuple[Console, io.StringIO]:
    """A console that believes it draws on a terminal, into a string."""
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120), out


def screen(out: io.StringIO) -> str:
    """What was drawn, without the cursor movements and colours."""
    return _CONTROL.sub("", out.getvalue())


async def test_tick_with_progress_combines_one_pass_per_poller(polled: Polled) -> None:
    await polled.clock.advance("1m")
    result = await tick_with_progress(
        polled.engine, ["orders", "tenants"], "50s", console=quiet(), show=True
    )
    assert sorted((r["poller"], r["partition"], r["events"]) for r in result["polled"]) == [
        ("orders", "", 0),
        ("tenants", "t1", 0),
        ("tenants", "t2", 0),
    ]
    assert result["skipped_leased"] == 0
    assert result["skipped_not_due"] == 0
    assert result["timed_out"] is False
    assert (result["caught_up"], result["pending_keys"]) == (True, [])
    assert set(result) == {
        "polled",
        "skipped_leased",
        "skipped_not_due",
        "duration_ms",
        "timed_out",
        "pending_keys",
        "caught_up",
    }


async def test_drive_backfill_runs_the_lane_to_completion(polled: Polled) -> None:
    key = PKey("orders")
    await polled.engine.backfill("orders", None, force=True)
    outcome = await drive_backfill(polled.engine, key, console=quiet(), show=True)
    assert outcome.to_dict() == {
        "poller": "orders",
        "partition": "",
        "cycles": 1,
        "items": 5,
        "events": 5,
        "done": True,
        "error": None,
    }
    state = await polled.store.load_state(key)
    assert state is not None
    assert state.backfill is None
    # Nothing left to drive: the lane is already gone.
    again = await drive_backfill(polled.engine, key, console=quiet(), show=False)
    assert (again.cycles, again.done) == (0, True)


def test_the_figures_line_shows_totals_rates_elapsed_time_and_keys() -> None:
    reading = Reading(
        totals=Counts(pages=412, items=41_200, events=1_050),
        per_second=Rates(pages=34.13, items=3_410.4, events=87.46),
        elapsed_ms=72_500,
    )
    keys = ["orders", "tenants/t1", "tenants/t2 (backfill)", "tenants/t3", "tenants/t4"]
    assert figures_line(reading, keys).plain == (
        "0:01:12  412 pages 34.1/s · 41,200 items 3,410/s · 1,050 events 87.5/s"
        " · orders, tenants/t1, tenants/t2 (backfill) +2"
    )
    narrow = Console(file=io.StringIO(), width=60)
    with narrow.capture() as captured:
        narrow.print(Group(figures_line(reading, keys)))  # as the display renders it
    assert captured.get() == "0:01:12  412 pages 34.1/s · 41,200 items 3,410/s · 1,050 ev…\n"
    first = Reading(Counts(pages=1, items=1, events=0), None, 0)
    assert figures_line(first).plain == "0:00:00  1 page -/s · 1 item -/s · 0 events -/s"


def _context(poller: str, partition: str, lane: Any) -> dict[str, Any]:
    return {"poller": poller, "partition": partition, "lane": lane, "instance_id": "i"}


def test_the_watch_names_the_keys_in_a_cycle() -> None:
    watch = Watch(Meter(lambda: 0))
    watch.on_poll_start(PollStartDetails(**_context("orders", "", "live"), started_at=0))
    watch.on_poll_start(PollStartDetails(**_context("tenants", "t1", "backfill"), started_at=0))
    assert watch.working() == ["orders", "tenants/t1 (backfill)"]
    summary: Any = None  # the watch reads only the key of an ended cycle
    watch.on_poll_end(PollEndDetails(**_context("orders", "", "live"), summary=summary))
    assert watch.working() == ["tenants/t1 (backfill)"]


async def test_the_watch_counts_only_while_its_block_runs(polled: Polled) -> None:
    async def poll_orders() -> None:
        await polled.engine.trigger("orders")
        await polled.engine.tick(only="orders")

    with watching(polled.engine, True) as watch:
        assert watch is not None
        await poll_orders()
    counted = watch.meter.pages
    assert counted >= 1
    await poll_orders()
    assert watch.meter.pages == counted
    with watching(polled.engine, False) as off:
        assert off is None


async def test_tick_draws_its_totals_on_a_terminal() -> None:
    engine = build_engine(wk.MemoryStore(), VirtualClock(START))
    console, out = terminal()
    try:
        await tick_with_progress(engine, ["orders", "tenants"], "50s", console=console, show=True)
    finally:
        await engine.stop()
    # orders: 5 items in pages of 2; tenants: one page of 2 (t1) and one of 3 (t2).
    assert "0:00:00  5 pages -/s · 10 items -/s · 10 events -/s" in screen(out)
    assert "tick" in screen(out)
    assert "2/2 pollers" in screen(out)


async def test_tick_draws_nothing_when_the_display_is_off() -> None:
    engine = build_engine(wk.MemoryStore(), VirtualClock(START))
    console, out = terminal()
    try:
        result = await tick_with_progress(
            engine, ["orders", "tenants"], "50s", console=console, show=False
        )
    finally:
        await engine.stop()
    assert out.getvalue() == ""
    assert sum(row["items"] for row in result["polled"]) == 10


async def test_backfill_draws_its_totals_on_a_terminal(polled: Polled) -> None:
    await polled.engine.backfill("orders", None, force=True)
    console, out = terminal()
    await drive_backfill(polled.engine, PKey("orders"), console=console, show=True)
    assert "3 pages -/s · 5 items -/s · 5 events -/s" in screen(out)
    assert "backfill orders" in screen(out)


async def test_the_line_moves_while_a_cycle_is_still_fetching() -> None:
    """Redrawn as the work happens, not at the end: a cycle waits in its second page while
    the line already counts the first and names the key; time passes on the engine's
    clock, and the rates follow it."""
    clock = VirtualClock(START)
    release = asyncio.Event()

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        if ctx.page == 1:
            return wk.Page(items=[{"id": str(n)} for n in range(30)], has_more=True)
        await release.wait()
        return wk.Page(items=[], has_more=False)

    engine = wk.Engine(
        store=wk.MemoryStore(),
        clock=clock,
        random=SeededRandom(1),
        pollers=[
            wk.define_poller(
                name="slow", identity=lambda o: o["id"], cursor=wk.SnapshotDiff(), fetch=fetch
            )
        ],
    )
    engine.on("slow", lambda event, ctx: None)
    console, out = terminal()
    ticking = asyncio.create_task(
        tick_with_progress(engine, ["slow"], None, console=console, show=True)
    )
    try:
        await _drawn(out, "1 page -/s · 30 items -/s")
        await clock.advance("2s")
        await _drawn(out, "0:00:02  1 page 0.5/s · 30 items 15.0/s · 30 events 15.0/s · slow")
    finally:
        release.set()
        await ticking
        await engine.stop()


async def _drawn(out: io.StringIO, text: str) -> None:
    """Wait until ``text`` was drawn (the display redraws several times a second)."""
    for _ in range(400):
        if text in screen(out):
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"never drawn: {text!r} in {screen(out)[-600:]!r}")


async def test_the_run_view_has_the_figures_beneath_the_table(polled: Polled) -> None:
    watch = Watch(Meter(polled.clock.now))
    watch.meter.add_page(7)
    console, out = terminal()
    console.print(_live_view(dict(await polled.engine.inspect()), watch))
    assert "0:00:00  1 page -/s · 7 items -/s · 0 events -/s" in screen(out)
    assert "orders" in screen(out)
    bare, out = terminal()
    bare.print(_live_view(dict(await polled.engine.inspect()), None))
    assert "pages" not in screen(out)


VENDOR_APP = """
import httpx
import watukuy as wk

def vendor(request):
    return httpx.Response(200, json=[{"id": n} for n in range(3)])

async def fetch(ctx):
    response = await ctx.http.get("https://vendor.test/things")
    return wk.Page(items=response.json())

engine = wk.Engine(
    store=wk.MemoryStore(),
    pollers=[
        wk.define_poller(
            name="things", identity=lambda t: t["id"], cursor=wk.SnapshotDiff(), fetch=fetch
        )
    ],
    http_client=httpx.AsyncClient(transport=httpx.MockTransport(vendor)),
)
engine.on("things", lambda event, ctx: None)
"""


@pytest.fixture
def vendor_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``--app`` for an engine that finds three things in one page."""
    name = f"vendor_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(VENDOR_APP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    yield f"{name}:engine"
    sys.modules.pop(name, None)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, _CONTROL.sub("", out), err


PROGRESS_LINE = re.compile(r"\d+:\d\d:\d\d  1 page \S+/s · 3 items \S+/s · 3 events \S+/s")


def test_tick_on_a_terminal_draws_the_progress_line(
    vendor_app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: the output is a terminal
    code, out, err = _cli(["tick", "--app", vendor_app], capsys)
    assert (code, err) == (0, "")
    assert PROGRESS_LINE.search(out), out
    assert "1/1 pollers" in out


def test_tick_with_json_on_a_terminal_prints_the_json_alone(
    vendor_app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    code, out, err = _cli(["tick", "--app", vendor_app, "--json"], capsys)
    assert (code, err) == (0, "")
    [line] = out.splitlines()
    assert [row["items"] for row in json.loads(line)["polled"]] == [3]


def test_tick_into_a_pipe_draws_no_progress(
    vendor_app: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(["tick", "--app", vendor_app], capsys)
    assert (code, err) == (0, "")
    assert "pollers" not in out
    assert not PROGRESS_LINE.search(out)
    assert "things" in out  # the result table is printed all the same
