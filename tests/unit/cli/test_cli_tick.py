"""``watukuy tick`` in process: it catches up, says which keys are still behind, takes a
bare number of seconds, and counts the retried parked events it delivers."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from watukuy.cli import main

APP = """
import os
from pathlib import Path

import httpx
import watukuy as wk

HERE = Path(__file__).parent
COUNT = {count}


def vendor(request):
    start = int(request.url.params["after"])
    page = [{{"id": f"t{{n:04d}}"}} for n in range(start, min(start + 100, COUNT))]
    end = start + len(page)
    more = end < COUNT
    return httpx.Response(200, json={{"data": page, "next": str(end), "more": more}})


async def fetch(ctx):
    response = await ctx.http.get(
        "https://vendor.test/things", params={{"after": ctx.cursor.value or "0"}}
    )
    body = response.json()
    return wk.Page(items=body["data"], cursor=body["next"], has_more=body["more"])


def handle(event, ctx):
    if (HERE / "broken").exists() and event.subject == "t0002":
        raise RuntimeError("handler refuses t0002")


engine = wk.Engine(
    store=wk.SqliteStore(HERE / f"{{__name__}}.db"),
    pollers=[
        wk.define_poller(
            name="things",
            identity=lambda t: t["id"],
            cursor=wk.TokenCursor(),
            fetch=fetch,
            max_pages_per_cycle={cap},
            delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
        )
    ],
    http_client=httpx.AsyncClient(transport=httpx.MockTransport(vendor)),
)
engine.on("things", handle)
"""


class App:
    """An application module in ``tmp_path`` (a SQLite file store next to it), run through
    ``main`` as a fresh process would: the module is imported anew for every command."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], **options: object):
        self.name = f"ticking_{uuid.uuid4().hex[:8]}"
        self.dir = tmp_path
        self.capsys = capsys
        text = APP.format(**{"count": 250, "cap": 50, **options})
        (tmp_path / f"{self.name}.py").write_text(text, encoding="utf-8")

    def run(self, *argv: str) -> tuple[int, str]:
        try:
            code = main([*argv, "--app", f"{self.name}:engine"])
        finally:
            sys.modules.pop(self.name, None)
        out, _ = self.capsys.readouterr()
        return code, out


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_tick_catches_up_past_the_page_cap_with_a_bare_number_of_seconds(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = App(app_dir, capsys, count=2_500, cap=5)  # 25 pages, five a cycle

    code, out = app.run("tick", "--max-duration", "120", "--json")

    assert code == 0
    result = json.loads(out)
    [things] = result["polled"]
    assert (things["events"], things["delivered"], things["cycles"]) == (2_500, 2_500, 5)
    assert things["pending"] is False
    assert (result["caught_up"], result["pending_keys"]) == (True, [])

    table = App(app_dir, capsys, count=2_500, cap=5)
    code, out = table.run("tick", "--max-duration", "2m")
    assert code == 0
    assert "caught up" in out
    assert "more pending" not in out


def test_tick_says_which_keys_have_more_pending(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = App(app_dir, capsys, count=10**9)  # the vendor always has another page

    code, out = app.run("tick", "--max-duration", "0.3", "--json")

    assert code == 0
    result = json.loads(out)
    assert result["polled"][0]["pending"] is True
    assert result["polled"][0]["cycles"] >= 1
    assert (result["caught_up"], result["pending_keys"]) == (
        False,
        [{"poller": "things", "partition": ""}],
    )

    code, out = app.run("tick", "--max-duration", "0.3")
    assert code == 0
    assert "more pending" in out
    assert out.splitlines()[-1] == "1 key has more pending: run tick again or raise --max-duration"


def test_tick_counts_a_retried_parked_event_it_delivers(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = App(app_dir, capsys, count=3)
    (app_dir / "broken").touch()
    code, out = app.run("tick", "--json")
    assert (code, json.loads(out)["polled"][0]["delivered"]) == (0, 2)
    code, out = app.run("parked", "ls", "--poller", "things", "--json")
    [parked] = json.loads(out)

    (app_dir / "broken").unlink()
    code, _ = app.run("parked", "retry", "--poller", "things", "--ids", parked["id"])
    assert code == 0
    code, out = app.run("tick", "--json")

    assert code == 0
    [things] = json.loads(out)["polled"]
    assert (things["items"], things["events"], things["delivered"]) == (0, 0, 1)
