"""The inbox under real SIGKILLs: every counted event is counted exactly once.

Each run of the loop changes the vendor (a served ``FakeApi``: new items, and new versions
of items whose current version the consumer has applied, so no version is overwritten
before it was seen), starts a child engine (``_crash_child.py``), and kills it with
``SIGKILL`` at one of the three points it announces (before the effect, after the effect
and before the commit, after the commit and before the engine's ack; the runs take them in
turn), at a random occurrence of it (the first, second or third); a child that falls
silent for 5 s before that is killed anyway (counted as ``idle``). The dead child's lease
is released (it is dead: the next child need not wait for the lease to expire), and the
next run starts. A last child then runs until every version is applied and the outbox is
empty, and stops gracefully.

The checks: the counter equals the number of distinct event ids delivered, the rows of the
``applied`` table, the ids in the inbox and the number of versions the vendor produced;
no event id was applied twice; none is missing.

    python tests/inbox/crash_loop.py --runs 300 --databases sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watukuy.model.rows import PKey
from watukuy.stores.sqlite import SqliteStore
from watukuy.testing import FakeApi

CHILD = Path(__file__).with_name("_crash_child.py")
KEY = PKey("orders")
POINTS = ("before-effect", "after-effect", "after-commit")
POSTGRES_URL = os.environ.get(
    "WATUKUY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@dataclass
class Figures:
    """What one loop did and found."""

    database: str
    runs: int = 0
    kills: Counter[str] = field(default_factory=Counter)
    versions: int = 0
    deliveries: int = 0
    delivered_ids: set[str] = field(default_factory=set)
    counter: int = 0
    applied_rows: int = 0
    inbox_ids: int = 0
    double_applied: int = 0
    missing: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every figure agrees and nothing is doubled or missing."""
        return (
            self.counter
            == len(self.delivered_ids)
            == self.applied_rows
            == self.inbox_ids
            == self.versions
            and self.double_applied == 0
            and self.missing == 0
        )

    def summary(self) -> str:
        kills = ", ".join(f"{self.kills[point]} {point}" for point in (*POINTS, "idle"))
        return (
            f"{self.database}: {self.runs} runs, {sum(self.kills.values())} SIGKILLs ({kills}), "
            f"{self.versions} versions, {self.deliveries} deliveries "
            f"({self.deliveries - len(self.delivered_ids)} redeliveries), counter "
            f"{self.counter}, {len(self.delivered_ids)} distinct ids delivered, "
            f"{self.inbox_ids} ids in the inbox, {self.double_applied} double-applied, "
            f"{self.missing} missing, {self.seconds:.1f} s"
        )


class Consumer:
    """The consumer's database, seen from the parent: set up, read, dropped."""

    def __init__(self, database: str, folder: Path) -> None:
        self.database = database
        stem = uuid.uuid4().hex[:10]
        self.tables = {
            "inbox": f"inbox_{stem}",
            "counter": f"counter_{stem}",
            "applied": f"applied_{stem}",
        }
        self.path = folder / "consumer.db"

    def args(self) -> list[str]:
        where = (
            ["--consumer-sqlite", str(self.path)]
            if self.database == "sqlite"
            else ["--consumer-postgres", POSTGRES_URL]
        )
        return [*where, *(f"--{name}={table}" for name, table in self.tables.items())]

    def _run(self, sql: str, fetch: bool = False) -> list[tuple[Any, ...]]:
        if self.database == "sqlite":
            with sqlite3.connect(self.path, timeout=30) as db:
                rows = db.execute(sql).fetchall()
            db.close()
            return rows
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            cursor = conn.execute(sql.encode())
            return cursor.fetchall() if fetch else []

    def setup(self) -> None:
        from watukuy.inbox import Inbox

        counter, applied = self.tables["counter"], self.tables["applied"]
        self._run(f'CREATE TABLE "{counter}" (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)')
        self._run(f'INSERT INTO "{counter}" VALUES (1, 0)')
        self._run(
            f'CREATE TABLE "{applied}" (event_id TEXT NOT NULL, subject TEXT NOT NULL, '
            "version INTEGER NOT NULL)"
        )
        inbox = Inbox(self.tables["inbox"])
        if self.database == "sqlite":
            with sqlite3.connect(self.path) as db:
                inbox.migrate(db)
            db.close()
        else:
            import psycopg

            with psycopg.connect(POSTGRES_URL) as conn:
                inbox.migrate(conn)

    def applied(self) -> list[tuple[str, str, int]]:
        rows = self._run(
            f'SELECT event_id, subject, version FROM "{self.tables["applied"]}"', fetch=True
        )
        return [(str(a), str(b), int(c)) for a, b, c in rows]

    def scalar(self, sql: str) -> int:
        return int(self._run(sql, fetch=True)[0][0])

    def drop(self) -> None:
        if self.database == "postgres":
            self._run("DROP TABLE IF EXISTS " + ", ".join(f'"{t}"' for t in self.tables.values()))


class GatedChild:
    """One child engine, whose kill points the parent answers one line at a time."""

    def __init__(self, process: asyncio.subprocess.Process, name: str) -> None:
        self.process = process
        self.name = name

    @classmethod
    async def start(cls, folder: Path, name: str, args: list[str]) -> GatedChild:
        with (folder / f"{name}.err").open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(CHILD),
                "--instance",
                name,
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
            )
        return cls(process, name)

    async def line(self, timeout: float) -> str | None:
        """The next line, or ``None`` after ``timeout`` seconds of silence."""
        assert self.process.stdout is not None
        try:
            raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError:
            return None
        if not raw:
            raise AssertionError(f"{self.name} exited with {await self.process.wait()}")
        return raw.decode().rstrip("\n")

    async def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        await self.process.stdin.drain()

    async def kill(self) -> None:
        self.process.kill()
        assert await self.process.wait() == -9


class ChangingVendor:
    """The served API, changed only between runs."""

    def __init__(self, rng: random.Random) -> None:
        self.api = FakeApi(page_size=20)
        self.rng = rng
        self.versions: set[tuple[str, int]] = set()
        self._next = 0

    def wave(self, applied: set[tuple[str, int]]) -> None:
        """A few new items, and new versions of items whose current version is applied."""
        # At least three new items: three fresh events, so each kill point occurs at least
        # three times in the run and the chosen occurrence (up to the third) comes.
        for _ in range(self.rng.randint(3, 6)):
            self._next += 1
            stored = self.api.add({"id": f"item-{self._next:05d}", "n": self._next})
            self.versions.add((stored["id"], stored["version"]))
        seen = [item for item in self.api.all() if (item["id"], item["version"]) in applied]
        for item in self.rng.sample(seen, min(len(seen), self.rng.randint(0, 5))):
            stored = self.api.update(item["id"], n=item["n"] + 1)
            self.versions.add((stored["id"], stored["version"]))


async def crash_loop(
    database: str, runs: int, seed: int, folder: Path, *, with_inbox: bool = True
) -> Figures:
    """Run the loop on ``"sqlite"`` or ``"postgres"`` as the consumer's database
    (``with_inbox=False``: the control, a SQLite consumer that applies every delivery)."""
    started = time.monotonic()
    rng = random.Random(seed)
    figures = Figures(database)
    consumer = Consumer(database, folder)
    consumer.setup()
    store = SqliteStore(folder / "engine.db")
    await store.migrate()
    vendor = ChangingVendor(rng)
    server = await vendor.api.serve()
    args = ["--api", server.url, "--engine-db", str(folder / "engine.db"), *consumer.args()]
    if not with_inbox:
        args.append("--without-inbox")

    def applied_versions() -> set[tuple[str, int]]:
        return {(subject, version) for _, subject, version in consumer.applied()}

    def delivered(line: str) -> None:
        if line.startswith("delivered "):
            figures.deliveries += 1
            figures.delivered_ids.add(line.split()[1])

    try:
        for run in range(1, runs + 1):
            vendor.wave(applied_versions())
            target, occurrence = POINTS[(run - 1) % len(POINTS)], rng.randint(0, 2)
            child = await GatedChild.start(folder, f"child-{run}", args)
            seen = 0
            while True:
                line = await child.line(timeout=5.0)
                if line is None:  # idle before the chosen point: it never came
                    figures.kills["idle"] += 1
                    await child.kill()
                    break
                delivered(line)
                point = line.split()[0]
                if point not in POINTS:
                    continue
                if point == target:
                    if seen == occurrence:
                        await child.kill()
                        figures.kills[point] += 1
                        break
                    seen += 1
                await child.go()
            figures.runs += 1
            lease = await store.get_lease(KEY)
            if lease is not None:  # the holder is dead: free its lease at once
                await store.release_lease(KEY, lease)
        last = await GatedChild.start(folder, "last", args)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = await last.line(timeout=0.5)
            if line is not None:
                delivered(line)
                if line.split()[0] in POINTS:
                    await last.go()
                continue
            if applied_versions() >= vendor.versions and await store.count_pending(KEY) == 0:
                break
        last.process.terminate()
        while (line := await last.line(timeout=10)) != "stopped":
            assert line is not None, "the last child did not stop"
            delivered(line)
            if line.split()[0] in POINTS:
                await last.go()
        assert await last.process.wait() == 0
        applied = consumer.applied()
        figures.versions = len(vendor.versions)
        figures.applied_rows = len(applied)
        figures.counter = consumer.scalar(f'SELECT n FROM "{consumer.tables["counter"]}"')
        figures.inbox_ids = consumer.scalar(f'SELECT count(*) FROM "{consumer.tables["inbox"]}"')
        figures.double_applied = len(applied) - len({event_id for event_id, _, _ in applied})
        figures.missing = len(vendor.versions - {(s, v) for _, s, v in applied})
        assert await store.count_pending(KEY) == 0
    finally:
        await server.close()
        await store.close()
        consumer.drop()
    figures.seconds = time.monotonic() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    import tempfile

    failed = False
    for n, database in enumerate(args.databases.split(",")):
        with tempfile.TemporaryDirectory(prefix="watukuy-inbox-crash-") as tmp:
            figures = asyncio.run(crash_loop(database, args.runs, args.seed + n, Path(tmp)))
        print(figures.summary(), "ok" if figures.ok else "FAILED", flush=True)
        failed = failed or not figures.ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
