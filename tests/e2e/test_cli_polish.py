"""The ``watukuy`` command as people type it: options before the subcommand (``watukuy -A
app:engine inspect``), full values in pipes, a refused retry that says why, one unit for
durations in ``--json``, ``--version``, and a demo that shows its code and fits 100 columns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

LONG = "a-poller-whose-name-is-long-enough-to-be-cut-on-any-screen-0123456789"

APP_SOURCE = textwrap.dedent(
    f"""
    from __future__ import annotations

    import os
    from typing import Any

    import watukuy as wk

    ITEMS = [{{"id": "item-001", "n": 1}}, {{"id": "item-002", "n": "two"}}]


    def number(raw: Any) -> dict[str, Any]:
        if not isinstance(raw["n"], int):
            raise ValueError("n must be a number")
        return dict(raw)


    async def fetch(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        return wk.Page(items=ITEMS, has_more=False)


    strict = wk.define_poller(
        name="strict",
        schema=number,
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
    )
    long_one = wk.define_poller(
        name="{LONG}",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
    )
    engine = wk.Engine(store=wk.store_from_url(os.environ["APP_STORE"]), pollers=[strict, long_one])


    @engine.on("strict")
    async def accept(event: Any, ctx: wk.HandlerContext) -> None:
        pass


    @engine.on("{LONG}")
    async def accept_long(event: Any, ctx: wk.HandlerContext) -> None:
        pass
    """
)
APP = "polish_app:engine"


class Shell:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.store = "sqlite:///polish.db"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WATUKUY_")}
        self.env.update(APP_STORE=self.store, COLUMNS="60", PYTHONUNBUFFERED="1")
        (cwd / "polish_app.py").write_text(APP_SOURCE, encoding="utf-8")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "watukuy", *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def ok(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout


@pytest.fixture(scope="module")
def sh(tmp_path_factory: pytest.TempPathFactory) -> Shell:
    shell = Shell(tmp_path_factory.mktemp("polish"))
    # -A before the subcommand, as Celery users type it.
    shell.ok("-A", APP, "tick")
    return shell


def test_app_and_store_go_before_or_after_the_subcommand(sh: Shell) -> None:
    before_app = json.loads(sh.ok("-A", APP, "inspect", "--json"))
    long_app = json.loads(sh.ok("--app", APP, "inspect", "--json"))
    before_store = json.loads(sh.ok("--store", sh.store, "inspect", "--json"))
    after_store = json.loads(sh.ok("inspect", "--store", sh.store, "--json"))
    after_short = json.loads(sh.ok("inspect", "-A", APP, "--json"))

    assert before_app["status"] == long_app["status"] == after_short["status"] == "idle"
    assert before_store["status"] == after_store["status"] == "store-only"
    keys = sorted(p["poller"] for p in before_store["pollers"])
    assert keys == sorted(["strict", LONG])
    # What is typed after the subcommand wins over what is typed before it.
    wins = json.loads(
        sh.ok("--store", "sqlite:///elsewhere.db", "inspect", "--store", sh.store, "--json")
    )
    assert sorted(p["poller"] for p in wins["pollers"]) == keys
    assert not (sh.cwd / "elsewhere.db").exists()


def test_tables_are_never_cut_in_a_pipe(sh: Shell) -> None:
    table = sh.ok("inspect", "--store", sh.store)  # COLUMNS=60, stdout is a pipe
    assert LONG in table
    assert "…" not in table
    rows = sh.ok("parked", "ls", "--store", sh.store, "--poller", "strict")
    assert "n must be a number" in rows
    assert "…" not in rows


def test_retrying_a_quarantined_item_says_why_and_fails(sh: Shell) -> None:
    key = ["--store", sh.store, "--poller", "strict"]
    rows = json.loads(sh.ok("parked", "ls", *key, "--json"))
    assert [(r["kind"], r["item"]["id"]) for r in rows] == [("invalid", "item-002")]

    result = sh.run("parked", "retry", *key, "--ids", rows[0]["id"][:12])
    assert result.returncode == 2, (result.stdout, result.stderr)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "quarantined item" in message
    assert "nothing to retry" in message
    assert "parked discard" in message
    assert json.loads(sh.ok("parked", "ls", *key, "--json")) == rows  # nothing changed


def _keys(value: Any, path: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            found.append((key, inner))
            found.extend(_keys(inner, f"{path}.{key}"))
    elif isinstance(value, list):
        for inner in value:
            found.extend(_keys(inner, path))
    return found


def test_inspect_json_gives_durations_in_milliseconds_and_says_so(sh: Shell) -> None:
    help_text = " ".join(sh.ok("inspect", "--help").split())
    assert "every duration is in milliseconds (keys ending in _ms" in help_text
    assert "epoch milliseconds (keys ending in _at or _until)" in help_text

    report = json.loads(sh.ok("inspect", "--store", sh.store, "--json"))
    timed = [
        key
        for key, value in _keys(report)
        if any(word in key for word in ("duration", "interval", "lag", "wait", "_in", "time"))
        and not isinstance(value, dict | list)
    ]
    assert timed, report
    assert [key for key in timed if not key.endswith("_ms")] == []
    times = [v for k, v in _keys(report) if k.endswith(("_at", "_until")) and v is not None]
    assert times
    assert all(isinstance(v, int) and v > 1_000_000_000_000 for v in times), times
    assert report["generated_at"] > 1_000_000_000_000  # epoch milliseconds


def test_version_flag(sh: Shell) -> None:
    from importlib import metadata

    assert sh.ok("--version").strip() == f"watukuy {metadata.version('watukuy')}"


def test_demo_shows_its_code(sh: Shell) -> None:
    code = sh.ok("demo", "--show-code")
    first = code.splitlines()[0]
    assert first.startswith("# The demo's pollers: ")
    path = Path(first.removeprefix("# The demo's pollers: "))
    assert path.name == "_pollers.py"
    assert path.is_file()
    assert "define_poller(" in code
    assert "watukuy demo --show-code" in " ".join(sh.ok("demo", "--help").split())


@pytest.mark.slow
def test_the_demo_fits_100_columns(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATUKUY_")}
    env["COLUMNS"] = "200"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "watukuy",
            "demo",
            "--no-ui",
            "--duration",
            "3s",
            "--mutate-every",
            "200ms",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("watukuy demo --show-code" in line for line in lines)
    assert any(line.startswith("stopped:") for line in lines)
    assert [line for line in lines if len(line.rstrip()) > 100] == []
