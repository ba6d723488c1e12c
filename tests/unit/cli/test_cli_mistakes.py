"""Every mistake the command line can make: exit status 2, one line on stderr, nothing
changed. In process, against a SQLite store that one ``tick`` has filled (the same checks
run as real processes, for a representative subset, in ``tests/e2e/test_cli.py``)."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from watukuy.cli import main

APP = textwrap.dedent(
    """
    import watukuy as wk
    from watukuy.testing import FakeApi, fake_items

    api = FakeApi(items=fake_items(3))

    async def fetch_orders(ctx):
        page = api.list_since(ctx.cursor.value, ctx.cursor.tie_break)
        return wk.Page(items=page.data, has_more=page.has_more)

    async def fetch_all(ctx):
        return wk.Page(items=api.list_all()[:1], has_more=False)

    async def refuse(event, ctx):
        raise RuntimeError("no")

    def make_engine():
        engine = wk.Engine(
            store=wk.SqliteStore("wk.db"),
            pollers=[
                wk.define_poller(
                    name="orders",
                    identity=lambda o: o["id"],
                    cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
                    fetch=fetch_orders,
                    log=wk.EventLog(),
                ),
                wk.define_poller(
                    name="tenants",
                    identity=lambda o: o["id"],
                    cursor=wk.SnapshotDiff(),
                    fetch=fetch_all,
                    partitions=lambda: ["t1", "t2"],
                ),
                wk.define_poller(
                    name="poison",
                    identity=lambda o: o["id"],
                    cursor=wk.SnapshotDiff(),
                    fetch=fetch_all,
                    delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
                ),
            ],
        )
        engine.on("poison", refuse)
        return engine
    """
)


@dataclass
class Setup:
    app: str
    store: str


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    """A ticked SQLite store in the current directory, and an application factory."""
    name = f"mistakes_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for variable in ("WATUKUY_APP", "WATUKUY_STORE"):
        monkeypatch.delenv(variable, raising=False)
    assert main(["tick", "--app", f"{name}:make_engine", "--json"]) == 0
    yield Setup(app=f"{name}:make_engine", store="sqlite:///wk.db")
    sys.modules.pop(name, None)


def _mistakes(app: str, store: str) -> list[tuple[list[str], str]]:
    module = app.split(":")[0]
    key = ["--store", store, "--poller"]
    return [
        (["tick", "--app", app, "--only", "nope"], "--only: unknown poller 'nope'"),
        (["tick", "--app", app, "--max-duration", "-5s"], "--max-duration"),
        (["run", "--app", app, "--refresh", "0ms"], "--refresh: must be greater than zero"),
        (["run", "--app", app, "--stop-timeout", "later"], "--stop-timeout"),
        (["inspect", "--store", "ftp://example.com/x"], "store: expected a URL starting"),
        (["inspect", "--app", f"{module}:missing"], "has no attribute 'missing'"),
        (["inspect", "--app", module], "expected 'package.module:attribute'"),
        (["pause", "--app", app, "--poller", "orders", "--partition", "x"], "not partitioned"),
        (["pause", *key, "orders", "--partition", "x"], "not partitioned"),
        (["trigger", *key, "tenants", "--partition", "t9"], "no stored partition 't9'"),
        (["resume", *key, "nope"], "the store has no poller 'nope'"),
        (["parked", "ls", *key, "poison", "--limit", "0"], "--limit"),
        (["parked", "ls", *key, "poison", "--kind", "weird"], "--kind"),
        (["parked", "retry", *key, "poison", "--ids", "ffffffff"], "no parked row"),
        (["parked", "retry", *key, "poison", "--ids", "ab"], "too short"),
        (["parked", "discard", *key, "poison", "--ids", ","], "--ids: expected"),
        (["parked", "retry", "--app", app, "--poller", "tenants"], "--ids"),
        (["reset-cursor", *key, "orders", "--to", "soon"], "stored form"),
        (["reset-cursor", *key, "orders", "--to", "[1]"], "not shaped like"),
        (["reset-cursor", "--app", app, "--poller", "orders", "--to", "soon"], "CONFIG"),
        (["backfill", "--app", app, "--poller", "poison", "--from", "null"], "snapshot diff"),
        (["backfill", "--app", app, "--poller", "orders", "--from", "x"], "CONFIG"),
        (["backfill", "--store", store, "--poller", "orders", "--from", "null"], "needs the"),
        (
            ["replay", "--app", app, "--poller", "tenants", "--partition", "t1", "--from", "0"],
            "REPLAY_UNAVAILABLE",
        ),
        (["replay", "--app", app, "--poller", "orders", "--from", "May"], "CONFIG"),
        (["migrate", "--store", "sqlite:////nonexistent-dir/x/wk.db"], "STORE"),
    ]


def test_every_mistake_is_one_line_and_exit_2(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, fragment in _mistakes(setup.app, setup.store):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 2, (argv, out, err)
        assert err.count("\n") == 1, (argv, err)
        assert err.startswith("error"), (argv, err)
        assert fragment in err, (argv, err)
        assert "Traceback" not in err
    # Nothing was changed.
    assert main(["inspect", "--store", setup.store, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(p["poller"], p["partition"], p["paused"]) for p in report["pollers"]] == [
        ("orders", "", False),
        ("poison", "", False),
        ("tenants", "t1", False),
        ("tenants", "t2", False),
    ]
    orders = report["pollers"][0]
    assert orders["cursors"] == {
        "live": {"value": "2026-01-01T00:00:02.000Z", "tie_break": "item-003"}
    }
    assert report["pollers"][1]["parked"] == 1
