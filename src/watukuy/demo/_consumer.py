"""The demo's consumer: a durable log of every delivered event, keyed by event id.

This is what an idempotent consumer looks like: the handler upserts by ``event.id`` and
counts deliveries, so a redelivery after a crash is visible (``deliveries`` 2) and
harmless. It lives in its own SQLite file, apart from the engine's store, the way a real
consumer's database would.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from watukuy.model import json as wkjson
from watukuy.model.events import Event

__all__ = ["ConsumerLog"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS delivered (
    event_id     TEXT PRIMARY KEY,
    poller       TEXT NOT NULL,
    "partition"  TEXT NOT NULL,
    subject      TEXT NOT NULL,
    type         TEXT NOT NULL,
    lane         TEXT NOT NULL,
    sequence     INTEGER NOT NULL,
    data         TEXT,
    first_at     INTEGER NOT NULL,
    last_at      INTEGER NOT NULL,
    deliveries   INTEGER NOT NULL
)
"""


class ConsumerLog:
    """Delivered events in a SQLite file, one row per event id.

    Args:
        path: The SQLite file (created when missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        # WAL with synchronous=NORMAL: a committed row survives the process being killed
        # (it is in the OS's hands), which is the failure the demo shows.
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(_SCHEMA)

    def record(self, event: Event[Any], now: int) -> int:
        """Store a delivery of ``event``; returns how many times it has been delivered."""
        data = None if event.data is None else wkjson.dumps(wkjson.to_jsonable(event.data))
        row = self._conn.execute(
            'INSERT INTO delivered (event_id, poller, "partition", subject, type, lane, '
            "sequence, data, first_at, last_at, deliveries) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) "
            "ON CONFLICT(event_id) DO UPDATE SET deliveries = deliveries + 1, "
            "last_at = excluded.last_at RETURNING deliveries",
            (
                event.id,
                event.poller,
                event.partition,
                event.subject,
                event.type,
                event.lane,
                event.sequence,
                data,
                now,
                now,
            ),
        ).fetchone()
        return int(row[0])

    def count(self) -> int:
        """Distinct events delivered so far."""
        return int(self._conn.execute("SELECT COUNT(*) FROM delivered").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    @staticmethod
    def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """Every row of a consumer log, in delivery order of first arrival (for checks)."""
        conn = sqlite3.connect(Path(path))
        try:
            cursor = conn.execute(
                'SELECT event_id, poller, "partition", subject, type, lane, sequence, data, '
                "first_at, last_at, deliveries FROM delivered ORDER BY first_at, rowid"
            )
            names = [column[0] for column in cursor.description]
            rows = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
        finally:
            conn.close()
        for row in rows:
            row["data"] = None if row["data"] is None else wkjson.loads(row["data"])
        return rows
