"""The parent side of the end-to-end crash tests: children, the API they poll, the log.

- :class:`Child` starts ``engine_child.py`` as an OS process (stdout and stderr go to files,
  so a child never blocks on a full pipe), waits for its lines, and signals it.
- :class:`Dataset` mutates the served ``FakeApi`` and remembers every version it stored and
  when each item was removed: what the checks compare the consumer log with.
- :func:`read_deliveries` reads the consumer log the children wrote.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from watukuy.model import json as wkjson
from watukuy.testing import FakeApi
from watukuy.testing.chaos._checks import Delivery

CHILD = Path(__file__).with_name("engine_child.py")


class Child:
    """One engine process."""

    def __init__(
        self, process: asyncio.subprocess.Process, name: str, out: Path, err: Path
    ) -> None:
        self.process = process
        self.name = name
        self.out = out
        self.err = err

    @classmethod
    async def start(cls, folder: Path, name: str, args: Sequence[str]) -> Child:
        out = folder / f"{name}.out"
        err = folder / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, str(CHILD), "--instance", name, *args, stdout=stdout, stderr=stderr
            )
        return cls(process, name, out, err)

    def lines(self) -> list[str]:
        """What the child printed so far."""
        return self.out.read_text().splitlines()

    async def wait_for(self, prefix: str, timeout: float = 15.0) -> str:
        """The first line starting with ``prefix``, waiting for it up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines():
                if line.startswith(prefix):
                    return line
            if self.process.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} never printed {prefix!r} (exit {self.process.returncode}); "
                    f"stdout: {self.lines()[-10:]}; stderr: {self.err.read_text()[-2000:]}"
                )
            await asyncio.sleep(0.01)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the child."""
        os.kill(self.process.pid, sig)

    async def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (a graceful ``stop()``), then the exit status."""
        self.signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), timeout)

    async def kill(self) -> int:
        """SIGKILL, then the exit status (``-9``)."""
        self.process.kill()
        return await self.process.wait()


class Dataset:
    """Seeded mutations of the served API, with the history the checks need."""

    def __init__(self, api: FakeApi, seed: int, initial: int) -> None:
        self.api = api
        self.random = random.Random(seed)
        self.served: dict[str, list[dict[str, Any]]] = {}
        self.removed: dict[str, int] = {}
        self.counts = {"created": 0, "updated": 0, "deleted": 0}
        self._next = 0
        for _ in range(initial):
            self.create()

    def _record(self, stored: dict[str, Any]) -> None:
        self.served.setdefault(stored["id"], []).append(stored)

    def create(self) -> str:
        """Add a new item (ids are never reused)."""
        self._next += 1
        identity = f"item-{self._next:05d}"
        self._record(self.api.add({"id": identity, "value": self.random.randint(0, 999)}))
        self.counts["created"] += 1
        return identity

    def mutate(self) -> None:
        """One seeded create (40%), update (40%) or delete (20%)."""
        existing = self.api.all()
        roll = self.random.random()
        if not existing or roll < 0.4:
            self.create()
            return
        target = self.random.choice(existing)
        if roll < 0.8:
            self._record(self.api.update(target["id"], value=target["value"] + 1))
            self.counts["updated"] += 1
        else:
            self.api.remove(target["id"])
            self.removed[target["id"]] = int(time.time() * 1000)
            self.counts["deleted"] += 1

    def final(self) -> dict[str, dict[str, Any]]:
        """The API's items now, by id."""
        return {item["id"]: item for item in self.api.all()}


def create_consumer_log(path: Path) -> None:
    """The consumer log table, created before any child writes to it."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE deliveries (n INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT, "
            "type TEXT, subject TEXT, sequence INTEGER, lane TEXT, data TEXT, previous TEXT, "
            "attempt INTEGER, instance TEXT, at INTEGER)"
        )


def read_deliveries(path: Path) -> list[Delivery]:
    """Every row of the consumer log, in the order it was written."""
    with sqlite3.connect(path, timeout=10) as db:
        rows = db.execute(
            "SELECT event_id, type, subject, sequence, lane, data, previous, attempt, "
            "instance, at FROM deliveries ORDER BY n"
        ).fetchall()
    return [
        Delivery(
            id=row[0],
            type=row[1],
            subject=row[2],
            sequence=row[3],
            lane=row[4],
            data=wkjson.loads(row[5]),
            previous=wkjson.loads(row[6]),
            attempt=row[7],
            instance=row[8],
            at=row[9],
        )
        for row in rows
    ]
