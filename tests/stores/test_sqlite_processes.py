"""Several OS processes sharing one SQLite file, on the real clock.

These are end-to-end tests: each one starts Python subprocesses running a short script
against the same database file, and waits a few hundred milliseconds at most.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from watukuy.model.errors import LeaseLostError
from watukuy.model.rows import CommitBatch, ItemRow, Lease, OutboxRow, PKey
from watukuy.stores.sqlite import SqliteStore, sqlite_migrations

pytestmark = pytest.mark.slow

KEY = PKey("orders", "tenant:\u00e9")

# Process B: once told to go, waits for the key's lease to become free, takes it, and
# commits its own page.
_TAKE_OVER = """
import asyncio, json, sys, time
from watukuy.model.rows import CommitBatch, ItemRow, OutboxRow, PKey
from watukuy.stores.sqlite import SqliteStore

async def main(path):
    print("ready", flush=True)
    sys.stdin.readline()
    store = SqliteStore(path, busy_timeout="2s")
    key = PKey("orders", "tenant:\\u00e9")
    refused = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = int(time.time() * 1000)
        lease = await store.acquire_lease(key, "process-b", 60_000, now)
        if lease is not None:
            page = CommitBatch(
                state_patch={"sequence": 1, "cursors": {"live": '"b-1"'}},
                upserts=[ItemRow("from-b", "v1", "hash-b", 1, None, now)],
                events=[OutboxRow("event-b", 1, '{"id":"event-b"}', created_at=now)],
                now=now,
            )
            await store.commit_poll(key, lease, page)
            print(json.dumps({"epoch": lease.epoch, "at": now, "refused": refused}))
            break
        refused += 1
        await asyncio.sleep(0.02)
    await store.close()

asyncio.run(main(sys.argv[1]))
"""

_MIGRATE = """
import asyncio, sys
from watukuy.model.rows import PKey
from watukuy.stores.sqlite import SqliteStore

async def main(path):
    store = SqliteStore(path)
    await store.migrate()
    await store.save_state_unfenced(PKey(sys.argv[2]), {}, 0)
    await store.close()
    print("migrated")

asyncio.run(main(sys.argv[1]))
"""

_WRITER = """
import asyncio, sys
from watukuy.model.rows import CommitBatch, ItemRow, OutboxRow, PKey
from watukuy.stores.sqlite import SqliteStore

async def main(path, name):
    store = SqliteStore(path, busy_timeout="10s")
    key = PKey(name)
    lease = await store.acquire_lease(key, name, 600_000, 0)
    for page in range(20):
        rows = [ItemRow(f"{page}-{n}", None, "h", 1) for n in range(100)]
        events = [OutboxRow(f"{name}-{page}-{n}", page * 100 + n, "{}") for n in range(100)]
        await store.commit_poll(key, lease, CommitBatch(upserts=rows, events=events))
    await store.close()
    print("wrote")

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

# (version,) of every migration file in the package, in order.
_SHIPPED = [(version,) for version, _ in sqlite_migrations()]


def _now() -> int:
    return int(time.time() * 1000)


async def _python(script: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _output(process: asyncio.subprocess.Process) -> str:
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode().strip()


def _script(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


async def test_a_stale_process_cannot_commit_after_another_took_over(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    take_over = await _python(_script(tmp_path, "take_over", _TAKE_OVER), str(db))
    assert take_over.stdout is not None
    assert take_over.stdin is not None
    # B has started (imports done) before A takes its short lease, so B meets it held.
    ready = await asyncio.wait_for(take_over.stdout.readline(), timeout=60)
    assert ready == b"ready\n"

    store_a = SqliteStore(db)
    lease_a = await store_a.acquire_lease(KEY, "process-a", 300, _now())
    assert lease_a is not None
    assert lease_a.epoch == 1
    take_over.stdin.write(b"go\n")
    await take_over.stdin.drain()

    report: dict[str, Any] = json.loads(await _output(take_over))
    # B was refused while A's lease was valid, then got the next epoch once it expired.
    assert report["epoch"] == 2
    assert report["refused"] >= 1
    assert report["at"] >= lease_a.expires_at

    # A wakes up (as after a long GC pause) and commits a page with its old lease.
    now = _now()
    stale_page = CommitBatch(
        state_patch={"sequence": 9, "cursors": {"live": '"a-9"'}},
        upserts=[ItemRow("from-a", "v1", "hash-a", 1, '{"a":1}', now)],
        deletes=["from-b"],
        events=[OutboxRow("event-a", 9, '{"id":"event-a"}', created_at=now)],
        log=True,
        now=now,
    )
    with pytest.raises(LeaseLostError) as info:
        await store_a.commit_poll(KEY, lease_a, stale_page)
    assert (info.value.poller, info.value.partition, info.value.epoch) == (
        "orders",
        "tenant:\u00e9",
        1,
    )
    await store_a.close()

    # Nothing of A's page is in the file, whoever reads it; B's page is intact.
    fresh = SqliteStore(db)
    assert await fresh.load_versions(KEY, ["from-a", "from-b"]) == {
        "from-b": ItemRow("from-b", "v1", "hash-b", 1, None, report["at"])
    }
    assert [row.event_id for row in await fresh.load_pending(KEY, 10)] == ["event-b"]
    assert await fresh.read_log(KEY) == []
    state = await fresh.load_state(KEY)
    assert state is not None
    assert (state.sequence, dict(state.cursors)) == (1, {"live": '"b-1"'})
    assert await fresh.get_lease(KEY) == Lease("process-b", 2, report["at"] + 60_000)
    await fresh.close()


async def test_several_processes_migrate_one_file_at_once(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    script = _script(tmp_path, "migrate", _MIGRATE)
    processes = [await _python(script, str(db), f"poller-{n}") for n in range(4)]
    outputs = await asyncio.gather(*(_output(p) for p in processes))
    assert outputs == ["migrated"] * 4
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version FROM watukuy_migrations").fetchall() == _SHIPPED
    assert conn.execute("SELECT COUNT(*) FROM watukuy_pollers").fetchone() == (4,)
    conn.close()


async def test_processes_writing_at_the_same_time_wait_for_each_other(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    script = _script(tmp_path, "writer", _WRITER)
    first = SqliteStore(db)
    await first.migrate()  # one schema, so the writers contend only on their commits
    processes = [await _python(script, str(db), name) for name in ("left", "right")]
    assert await asyncio.gather(*(_output(p) for p in processes)) == ["wrote", "wrote"]
    for name in ("left", "right"):
        assert await first.count_items(PKey(name)) == 2_000
        assert await first.count_pending(PKey(name)) == 2_000
    await first.close()
