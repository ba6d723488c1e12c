"""The ``watukuy`` command as a real process, against SQLite and PostgreSQL stores.

Every test runs ``python -m watukuy ...`` in a fresh directory holding a small application
module (``wkapp``) whose pollers read an in-process ``FakeApi``: the same seven orders, two
tenants and two poison items on every run, so each process sees the same vendor.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

APP_SOURCE = textwrap.dedent(
    """
    from __future__ import annotations

    import os

    import watukuy as wk
    from watukuy.testing import FakeApi, fake_items

    api = FakeApi(items=fake_items(7))
    api.tenant("t1").seed(fake_items(2))
    api.tenant("t2").seed(fake_items(3))


    async def fetch_orders(ctx):
        page = api.list_since(ctx.cursor.value, ctx.cursor.tie_break, limit=3)
        return wk.Page(items=page.data, has_more=page.has_more)


    async def fetch_tenant(ctx):
        return wk.Page(items=api.tenant(ctx.partition.key).list_all(), has_more=False)


    async def fetch_poison(ctx):
        return wk.Page(items=api.list_all()[:2], has_more=False)


    def identity(item):
        return item["id"]


    def version(item):
        return item["version"]


    orders = wk.define_poller(
        name="orders",
        identity=identity,
        version=version,
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch_orders,
        log=wk.EventLog(retention="1d"),
    )
    tenants = wk.define_poller(
        name="tenants",
        identity=identity,
        version=version,
        cursor=wk.SnapshotDiff(),
        fetch=fetch_tenant,
        partitions=lambda: ["t1", "t2"],
    )
    poison = wk.define_poller(
        name="poison",
        identity=identity,
        cursor=wk.SnapshotDiff(),
        fetch=fetch_poison,
        delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
    )

    engine = wk.Engine(
        store=wk.store_from_url(os.environ["APP_STORE"]), pollers=[orders, tenants, poison]
    )


    @engine.on("orders")
    async def record(event, ctx):
        with open(os.environ["APP_SEEN"], "a", encoding="utf-8") as seen:
            seen.write(f"{event.type} {event.subject} {event.id} {event.lane}\\n")


    @engine.on("tenants")
    async def accept(event, ctx):
        pass


    @engine.on("poison")
    async def refuse(event, ctx):
        raise RuntimeError(f"cannot handle {event.subject}")


    def make_engine():
        return engine


    async def make_engine_later():
        return engine


    not_an_engine = 42
    """
)

APP = "wkapp:engine"
LAST_ORDER = {"value": "2026-01-01T00:00:06.000Z", "tie_break": "item-007"}


@dataclass
class Shell:
    """A directory with the application, and a way to run ``watukuy`` in it."""

    cwd: Path
    store: str
    seen: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "watukuy", *args],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str, env: dict[str, str] | None = None) -> str:
        result = self.run(*args, env=env)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def seen_lines(self) -> list[list[str]]:
        if not self.seen.exists():
            return []
        return [line.split() for line in self.seen.read_text("utf-8").splitlines()]


def _clean_env(store: str, seen: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATUKUY_")}
    env.update(APP_STORE=store, APP_SEEN=str(seen), COLUMNS="100", PYTHONUNBUFFERED="1")
    return env


def _make_shell(tmp_path: Path, store: str) -> Shell:
    (tmp_path / "wkapp.py").write_text(APP_SOURCE, encoding="utf-8")
    (tmp_path / "broken.py").write_text("raise RuntimeError('broken at import')\n", "utf-8")
    seen = tmp_path / "seen.txt"
    return Shell(cwd=tmp_path, store=store, seen=seen, env=_clean_env(store, seen))


def run_all(shell: Shell, commands: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Run independent commands side by side (each is its own process)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda args: shell.run(*args), commands))


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    """A shell on a fresh SQLite store (``wk.db``, created by the first command)."""
    return _make_shell(tmp_path, "sqlite:///wk.db")


@pytest.fixture
def ticked(sh: Shell) -> Shell:
    """A shell whose store has seen one ``tick`` of every poller."""
    sh.ok("tick", "--app", APP)
    return sh


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Shell:
    """One ticked shell for the tests that only read (or fail before writing)."""
    shell = _make_shell(tmp_path_factory.mktemp("shared"), "sqlite:///wk.db")
    shell.ok("tick", "--app", APP)
    return shell


def assert_mistake(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit status 2, exactly one line on stderr (no traceback), mentioning ``fragments``."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _key(report: dict[str, Any], poller: str, partition: str = "") -> dict[str, Any]:
    matches = [
        p for p in report["pollers"] if p["poller"] == poller and p["partition"] == partition
    ]
    assert len(matches) == 1, report
    entry: dict[str, Any] = matches[0]
    return entry


# --- schema, version, help ----------------------------------------------------------------


def test_version_help_and_migrate(sh: Shell) -> None:
    version, flag, usage = (r.stdout for r in run_all(sh, [["version"], ["--version"], ["--help"]]))
    assert version.startswith("watukuy ")
    assert flag == version
    for command in ("inspect", "tick", "run", "backfill", "replay", "reset-cursor", "demo"):
        assert command in usage
    assert json.loads(sh.ok("migrate", "--store", sh.store, "--json")) == {
        "ok": True,
        "action": "migrated",
        "store": "sqlite:///wk.db",
    }
    assert (sh.cwd / "wk.db").exists()
    # A migrated store has no keys until something polls.
    report = sh.json("inspect", "--store", sh.store)
    assert report["pollers"] == []
    assert report["status"] == "store-only"
    assert report["instance_id"] is None


# --- tick and inspect -----------------------------------------------------------------------


def test_tick_then_inspect_with_the_app_and_with_the_store(sh: Shell) -> None:
    result = sh.json("tick", "--app", APP, "--max-duration", "50s")
    cycles = {(r["poller"], r["partition"], r["lane"]): r for r in result["polled"]}
    assert cycles[("orders", "", "live")]["events"] == 7
    assert cycles[("orders", "", "live")]["delivered"] == 7
    assert cycles[("tenants", "t1", "live")]["events"] == 2
    assert cycles[("tenants", "t2", "live")]["events"] == 3
    assert cycles[("poison", "", "live")]["events"] == 2
    assert all(r["error"] is None for r in result["polled"])
    assert result["timed_out"] is False
    assert [line[:2] for line in sh.seen_lines()] == [
        ["created", f"item-00{i}"] for i in range(1, 8)
    ]

    by_app = sh.json("inspect", "--app", APP)
    by_store = sh.json("inspect", "--store", sh.store)
    assert by_app["status"] == "idle"
    assert isinstance(by_app["instance_id"], str)
    assert [(p["poller"], p["partition"]) for p in by_store["pollers"]] == [
        ("orders", ""),
        ("poison", ""),
        ("tenants", "t1"),
        ("tenants", "t2"),
    ]
    for report in (by_app, by_store):
        orders = _key(report, "orders")
        assert orders["cursors"] == {"live": LAST_ORDER}
        assert orders["items"] == 7
        assert orders["outbox_pending"] == 0
        assert orders["parked"] == 0
        assert orders["paused"] is False
        assert orders["lag_ms"] > 0
        assert _key(report, "poison")["parked"] == 2
        assert _key(report, "tenants", "t2")["items"] == 3


def test_inspect_table_is_readable_at_100_columns(shared: Shell) -> None:
    # A 100-column terminal (a pipe would print every value in full); styles stripped.
    terminal = {"TTY_COMPATIBLE": "1"}
    results = [
        shared.run(*args, env=terminal)
        for args in (["inspect", "--app", APP], ["inspect", "--store", shared.store])
    ]
    for result in results:
        assert result.returncode == 0, result.stderr
        text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
        lines = text.splitlines()
        assert all(len(line) <= 100 for line in lines), text
        header = next(line for line in lines if line.lstrip().startswith("key"))
        for column in ("cursor", "lag", "circuit", "every", "pending", "parked", "items", "lease"):
            assert column in header.split(), header
        rows = {line.split()[0]: line.split() for line in lines if line[:1].isalpha()}
        # One line per key, numbers intact: items, parked and pending are whole cells.
        assert rows["orders"][-4:-1] == ["0", "0", "7"]
        assert rows["poison"][-4:-1] == ["0", "2", "2"]
        assert rows["tenants/t1"][-4:-1] == ["0", "0", "2"]
        assert rows["tenants/t2"][-4:-1] == ["0", "0", "3"]
        assert "2026-01-01T00:00:06.000Z" in text
        assert "closed" in rows["orders"]


def test_app_factories_and_the_environment(shared: Shell) -> None:
    results = run_all(
        shared,
        [
            ["inspect", "--json", "--app", "wkapp:make_engine"],
            ["inspect", "--json", "--app", "wkapp:make_engine_later"],
            ["parked", "ls", "--json", "--app", APP, "--poller", "poison"],
        ],
    )
    for result in results[:2]:
        assert _key(json.loads(result.stdout), "orders")["items"] == 7
    assert len(json.loads(results[2].stdout)) == 2
    text = shared.ok("inspect", "--json", env={"WATUKUY_APP": APP})
    assert json.loads(text)["status"] == "idle"
    text = shared.ok("inspect", "--json", env={"WATUKUY_STORE": shared.store})
    assert json.loads(text)["status"] == "store-only"


# --- key operations --------------------------------------------------------------------------


def test_pause_resume_trigger(ticked: Shell) -> None:
    source = ["--store", ticked.store]
    assert ticked.json("pause", *source, "--poller", "orders") == {
        "ok": True,
        "action": "paused",
        "poller": "orders",
        "partition": "",
    }
    assert _key(ticked.json("inspect", "--store", ticked.store), "orders")["paused"] is True
    # A paused key is skipped by tick, even when triggered.
    ticked.ok("trigger", *source, "--poller", "orders")
    skipped = ticked.json("tick", "--app", APP, "--only", "orders")
    assert skipped["polled"] == []
    assert skipped["skipped_not_due"] == 1

    before = int(time.time() * 1000)
    assert ticked.json("resume", *source, "--poller", "orders")["action"] == "resumed"
    orders = _key(ticked.json("inspect", "--store", ticked.store), "orders")
    assert orders["paused"] is False
    assert before - 5_000 <= orders["schedule"]["next_due_at"] <= int(time.time() * 1000)

    done = ticked.json("trigger", *source, "--poller", "tenants", "--partition", "t1")
    assert done == {"ok": True, "action": "triggered", "poller": "tenants", "partition": "t1"}
    again = ticked.json("tick", "--app", APP, "--only", "tenants")
    assert [(r["partition"], r["events"]) for r in again["polled"]] == [("t1", 0)]

    # The same operations through the application's engine.
    app = ["--app", APP, "--poller", "tenants", "--partition", "t2"]
    assert ticked.json("pause", *app)["action"] == "paused"
    assert _key(ticked.json("inspect", "--store", ticked.store), "tenants", "t2")["paused"]
    assert ticked.json("resume", *app)["action"] == "resumed"
    assert ticked.json("trigger", *app)["action"] == "triggered"
    t2 = _key(ticked.json("inspect", "--store", ticked.store), "tenants", "t2")
    assert t2["paused"] is False
    assert t2["schedule"]["next_due_at"] <= int(time.time() * 1000)


def test_reset_cursor_with_the_app_reemits_the_same_ids(ticked: Shell) -> None:
    first = ticked.seen_lines()
    assert len(first) == 7
    done = ticked.json(
        "reset-cursor", "--app", APP, "--poller", "orders", "--to", "null", "--clear-snapshot"
    )
    assert done["to"] is None
    assert done["clear_snapshot"] is True
    assert _key(ticked.json("inspect", "--store", ticked.store), "orders")["items"] == 0
    ticked.ok("tick", "--app", APP, "--only", "orders")
    second = ticked.seen_lines()[7:]
    assert second == first  # same types, subjects, ids and lane


def test_reset_cursor_store_only(ticked: Shell) -> None:
    store = ["--store", ticked.store, "--poller", "orders"]
    ticked.json("reset-cursor", *store, "--to", "null")
    assert _key(ticked.json("inspect", "--store", ticked.store), "orders")["cursors"] == {}

    stored = json.dumps({"value": "2026-01-01T00:00:03.000Z", "tie_break": "item-004"})
    ticked.json("reset-cursor", *store, "--to", stored)
    orders = _key(ticked.json("inspect", "--store", ticked.store), "orders")
    assert orders["cursors"] == {"live": json.loads(stored)}
    assert orders["items"] == 7
    # From there the next tick re-reads items 5..7, all known at the same version.
    result = ticked.json("tick", "--app", APP, "--only", "orders")
    assert [(r["items"], r["events"]) for r in result["polled"]] == [(3, 0)]
    assert _key(ticked.json("inspect", "--store", ticked.store), "orders")["cursors"] == {
        "live": LAST_ORDER
    }

    line = assert_mistake(ticked.run("reset-cursor", *store, "--to", "2026-01-01"), "--to")
    assert "stored form" in line
    assert_mistake(ticked.run("reset-cursor", *store, "--to", '{"page": 3}'), "not shaped like")


def test_backfill_with_force_reemits_as_updated(ticked: Shell) -> None:
    result = ticked.json(
        "backfill", "--app", APP, "--poller", "orders", "--from", "null", "--force"
    )
    assert result["done"] is True
    assert result["events"] == 7
    assert result["error"] is None
    assert [line[0] for line in ticked.seen_lines()[7:]] == ["updated"] * 7
    assert {line[3] for line in ticked.seen_lines()[7:]} == {"backfill"}
    state = _key(ticked.json("inspect", "--store", ticked.store), "orders")
    assert "backfill" not in state["cursors"]

    started = ticked.json(
        "backfill", "--app", APP, "--poller", "orders", "--from", "null", "--no-wait"
    )
    assert started == {
        "ok": True,
        "action": "backfill started",
        "poller": "orders",
        "partition": "",
    }
    assert_mistake(
        ticked.run("backfill", "--app", APP, "--poller", "poison", "--from", "null"),
        "snapshot diff",
    )


def test_replay_puts_logged_events_back_with_their_ids(ticked: Shell) -> None:
    result = ticked.json("replay", "--app", APP, "--poller", "orders", "--from", "0")
    assert result["replayed"] == 7
    ticked.ok("tick", "--app", APP, "--only", "orders")
    lines = ticked.seen_lines()
    assert [line[2] for line in lines[7:]] == [line[2] for line in lines[:7]]
    assert {line[3] for line in lines[7:]} == {"replay"}
    assert_mistake(
        ticked.run(
            "replay", "--app", APP, "--poller", "tenants", "--partition", "t1", "--from", "0"
        ),
        "REPLAY_UNAVAILABLE",
    )


def test_parked_ls_retry_discard(ticked: Shell) -> None:
    key = ["--store", ticked.store, "--poller", "poison"]
    rows = ticked.json("parked", "ls", *key)
    assert [(r["kind"], r["attempts"], r["event"]["subject"]) for r in rows] == [
        ("poison", 1, "item-001"),
        ("poison", 1, "item-002"),
    ]
    assert rows[0]["error"]["message"] == "cannot handle item-001"
    invalid, limited, human = run_all(
        ticked,
        [
            ["parked", "ls", *key, "--kind", "invalid", "--json"],
            ["parked", "ls", *key, "--limit", "1", "--json"],
            ["parked", "ls", *key],
        ],
    )
    assert json.loads(invalid.stdout) == []
    assert len(json.loads(limited.stdout)) == 1
    table = human.stdout
    assert rows[0]["id"][:12] in table
    assert "cannot handle item-001" in table

    retried = ticked.json("parked", "retry", *key, "--ids", rows[0]["id"][:12])
    assert retried["count"] == 1
    assert retried["ids"] == [rows[0]["id"]]
    assert [r["id"] for r in ticked.json("parked", "ls", *key)] == [rows[1]["id"]]
    assert _key(ticked.json("inspect", "--store", ticked.store), "poison")["outbox_pending"] == 1

    assert ticked.json("parked", "discard", *key, "--ids", rows[1]["id"])["count"] == 1
    assert ticked.json("parked", "ls", *key) == []


# --- run -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_run_prints_reports_and_stops_on_sigterm(sh: Shell) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "watukuy", "run", "--app", APP, "--json", "--refresh", "200ms"],
        cwd=sh.cwd,
        env=sh.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        reports = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, process.stderr.read() if process.stderr else ""
            report = json.loads(line)
            reports.append(report)
            if _key(report, "orders")["items"] == 7:
                break
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert reports[0]["status"] == "running"
    assert _key(reports[-1], "orders")["items"] == 7
    last = json.loads(out.strip().splitlines()[-1])
    assert last["status"] == "stopped"
    assert "Traceback" not in err


# --- mistakes: one line on stderr, exit status 2 -----------------------------------------------


# A representative set as real processes; tests/unit/cli/test_cli_mistakes.py runs every
# mistake in process.
MISTAKES: list[tuple[list[str], str]] = [
    (["frobnicate"], "No such command"),
    (["inspect"], "--store URL"),
    (["tick", "--store", "sqlite:///wk.db"], "needs the application"),
    (["pause", "--store", "sqlite:///wk.db"], "--poller"),
    (["pause", "--store", "sqlite:///wk.db", "--poller", "nope"], "no poller 'nope'"),
    (["pause", "--app", APP, "--poller", "nope"], "unknown poller 'nope'"),
    (["pause", "--app", APP, "--poller", "tenants"], "--partition"),
    (["pause", "--store", "sqlite:///wk.db", "--poller", "tenants"], "--partition"),
    (["tick", "--app", APP, "--max-duration", "soon"], "--max-duration"),
    (["inspect", "--store", "sqlite:///missing.db"], "no SQLite database"),
    (["inspect", "--app", "nosuchmodule:engine"], "cannot import module 'nosuchmodule'"),
    (["inspect", "--app", "wkapp:not_an_engine"], "not a watukuy Engine"),
    (["inspect", "--app", "broken:engine"], "broken at import"),
    (["migrate", "--store", "sqlite:////nonexistent-dir/sub/wk.db"], "STORE"),
]


def test_mistakes_exit_2_with_one_line(shared: Shell) -> None:
    results = run_all(shared, [args for args, _ in MISTAKES])
    for (args, fragment), result in zip(MISTAKES, results, strict=True):
        try:
            assert_mistake(result, fragment)
        except AssertionError as error:
            raise AssertionError(f"{args}: {error}") from None
    # Nothing was changed by any of them.
    report = shared.json("inspect", "--store", shared.store)
    assert [p["paused"] for p in report["pollers"]] == [False] * 4
    assert _key(report, "orders")["cursors"] == {"live": LAST_ORDER}


# --- PostgreSQL (store-only commands with --store postgresql://...) -------------------------


@pytest.fixture
def pg_database(postgres_url: str) -> Iterator[str]:
    """A database of this test's own (the CLI addresses tables in ``public``)."""
    import psycopg

    name = f"wk_cli_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = postgres_url.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_store_only_commands_on_postgres(tmp_path: Path, pg_database: str) -> None:
    sh = _make_shell(tmp_path, pg_database)
    store = ["--store", pg_database]
    assert sh.json("migrate", *store)["ok"] is True
    assert sh.json("inspect", *store)["pollers"] == []
    sh.ok("tick", "--app", APP)

    report = sh.json("inspect", *store)
    assert [(p["poller"], p["partition"]) for p in report["pollers"]] == [
        ("orders", ""),
        ("poison", ""),
        ("tenants", "t1"),
        ("tenants", "t2"),
    ]
    assert _key(report, "orders")["cursors"] == {"live": LAST_ORDER}
    assert _key(report, "poison")["parked"] == 2

    # Independent keys, changed side by side.
    results = run_all(
        sh,
        [
            ["pause", *store, "--poller", "tenants", "--partition", "t2", "--json"],
            ["trigger", *store, "--poller", "tenants", "--partition", "t1", "--json"],
            ["reset-cursor", *store, "--poller", "orders", "--to", "null", "--clear-snapshot"],
            ["parked", "ls", *store, "--poller", "poison", "--json"],
            ["inspect", *store],
            ["pause", *store, "--poller", "nope"],
            ["pause", *store, "--poller", "tenants"],
        ],
    )
    assert [r.returncode for r in results[:5]] == [0] * 5, [r.stderr for r in results]
    rows = json.loads(results[3].stdout)
    assert [r["event"]["subject"] for r in rows] == ["item-001", "item-002"]
    assert "tenants/t1" in results[4].stdout
    assert_mistake(results[5], "no poller 'nope'")
    assert_mistake(results[6], "--partition")

    after = sh.json("inspect", *store)
    assert _key(after, "tenants", "t2")["paused"] is True
    assert _key(after, "tenants", "t1")["schedule"]["next_due_at"] <= int(time.time() * 1000)
    assert _key(after, "orders")["cursors"] == {}
    assert _key(after, "orders")["items"] == 0

    results = run_all(
        sh,
        [
            ["resume", *store, "--poller", "tenants", "--partition", "t2", "--json"],
            ["parked", "discard", *store, "--poller", "poison", "--ids", rows[0]["id"][:8]],
            ["parked", "retry", *store, "--poller", "poison", "--ids", rows[1]["id"][:8]],
        ],
    )
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    final = sh.json("inspect", *store)
    assert _key(final, "tenants", "t2")["paused"] is False
    assert _key(final, "poison")["parked"] == 0
    assert _key(final, "poison")["outbox_pending"] == 1


def test_an_unreachable_postgres_is_one_line(sh: Shell) -> None:
    started = time.monotonic()
    result = sh.run(
        "inspect",
        "--store",
        "postgresql://postgres@127.0.0.1:1/test",
        env={"WATUKUY_CONNECT_TIMEOUT": "1s"},
    )
    assert_mistake(result, "no answer from postgresql://postgres@127.0.0.1:1/test within 1s")
    assert time.monotonic() - started < 60  # it gives up instead of hanging
