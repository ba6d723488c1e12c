"""The floor: the plainest correct script doing the engine's work, one pass, one process.

An ``httpx.Client`` walks the vendor's keyset listing from the stored cursor (with the
query parameters and the answer's list key of ``--shape``, see :mod:`bench.http._workload`,
and the same client whether or not the vendor keeps the connection alive); every page is
parsed with orjson, every item hashed (SHA-256 of its sorted-key JSON), and the page is
committed in ONE transaction: the snapshot rows of the items whose hash changed, one event
row per such item (a SHA-256 id and the item's JSON) and the cursor. The same writes go to
SQLite (WAL, ``synchronous=NORMAL``, as ``SqliteStore``) or to PostgreSQL through psycopg.

It prints one JSON line: ``{"items": n, "events": n, "pages": n}``.

Run: ``python -m bench.http.floor --url http://127.0.0.1:PORT --sqlite floor.db`` or
``--postgres DSN --schema NAME``.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
from typing import Any

# httpx imports its command-line client (httpx._main, with click, rich and pygments)
# whenever those are installed, and the ``watukuy`` command installs them: about 75 ms that
# a bare script in a venv of its own never pays, and that the engine (which imports httpx
# without it, see watukuy.http._import) does not pay either. The floor imports httpx as
# it would be imported there: httpx then binds ``httpx.main`` to a stub.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402
import orjson  # noqa: E402

from ._workload import PAGE_SIZE, SHAPES, Shape  # noqa: E402

POLLER = "orders"

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_items (
    poller TEXT NOT NULL, identity TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (poller, identity));
CREATE TABLE IF NOT EXISTS floor_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, poller TEXT NOT NULL,
    identity TEXT NOT NULL, type TEXT NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS floor_cursor (poller TEXT PRIMARY KEY, since TEXT, after TEXT);
"""

POSTGRES_SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_items (
    poller TEXT NOT NULL, identity TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (poller, identity));
CREATE TABLE IF NOT EXISTS floor_events (
    seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, poller TEXT NOT NULL,
    identity TEXT NOT NULL, type TEXT NOT NULL, data JSON NOT NULL);
CREATE TABLE IF NOT EXISTS floor_cursor (poller TEXT PRIMARY KEY, since TEXT, after TEXT);
"""


def _digest(item: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(item, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _event_id(identity: str, hashed: str, kind: str) -> str:
    return hashlib.sha256(f"floor|{POLLER}|{identity}|{hashed}|{kind}".encode()).hexdigest()


class Sqlite:
    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.executescript(SQLITE_SCHEMA)
        self.mark = "?"

    def cursor(self) -> tuple[str | None, str | None]:
        row = self.conn.execute(
            "SELECT since, after FROM floor_cursor WHERE poller = ?", (POLLER,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def known(self, identities: list[str]) -> dict[str, str]:
        marks = ",".join("?" * len(identities))
        rows = self.conn.execute(
            f"SELECT identity, hash FROM floor_items WHERE poller = ? AND identity IN ({marks})",
            (POLLER, *identities),
        )
        return dict(rows.fetchall())

    def commit(self, snapshot: list[Any], events: list[Any], position: Any) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO floor_items VALUES (?, ?, ?) "
            "ON CONFLICT (poller, identity) DO UPDATE SET hash = excluded.hash",
            snapshot,
        )
        conn.executemany(
            "INSERT INTO floor_events (id, poller, identity, type, data) VALUES (?, ?, ?, ?, ?)",
            events,
        )
        conn.execute(
            "INSERT INTO floor_cursor VALUES (?, ?, ?) ON CONFLICT (poller) DO UPDATE "
            "SET since = excluded.since, after = excluded.after",
            position,
        )
        conn.execute("COMMIT")


class Postgres:
    def __init__(self, dsn: str, schema: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        self.conn.execute(f'SET search_path TO "{schema}"')
        self.conn.execute(POSTGRES_SCHEMA)

    def cursor(self) -> tuple[str | None, str | None]:
        row = self.conn.execute(
            "SELECT since, after FROM floor_cursor WHERE poller = %s", (POLLER,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def known(self, identities: list[str]) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT identity, hash FROM floor_items WHERE poller = %s AND identity = ANY(%s)",
            (POLLER, identities),
        )
        return dict(rows.fetchall())

    def commit(self, snapshot: list[Any], events: list[Any], position: Any) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO floor_items VALUES (%s, %s, %s) "
                "ON CONFLICT (poller, identity) DO UPDATE SET hash = excluded.hash",
                snapshot,
            )
            cur.executemany(
                "INSERT INTO floor_events (id, poller, identity, type, data) "
                "VALUES (%s, %s, %s, %s, %s::json)",
                [(*row[:4], row[4].decode()) for row in events],
            )
            cur.execute(
                "INSERT INTO floor_cursor VALUES (%s, %s, %s) ON CONFLICT (poller) DO UPDATE "
                "SET since = excluded.since, after = excluded.after",
                position,
            )


def run(url: str, db: Sqlite | Postgres, shape: Shape) -> dict[str, int]:
    """One pass from the stored cursor to the end of the listing."""
    since, after = db.cursor()
    items = events = pages = 0
    with httpx.Client(base_url=url, timeout=30) as client:
        while True:
            params: dict[str, str | int] = {"limit": PAGE_SIZE}
            if since is not None:
                params[shape.since] = since
            if after is not None:
                params[shape.after] = after
            body = orjson.loads(client.get("/orders", params=params).content)
            data = body[shape.items]
            pages += 1
            if data:
                known = db.known([item["id"] for item in data])
                snapshot, rows = [], []
                for item in data:
                    identity = item["id"]
                    hashed = _digest(item)
                    old = known.get(identity)
                    if old == hashed:
                        continue
                    kind = "created" if old is None else "updated"
                    snapshot.append((POLLER, identity, hashed))
                    rows.append(
                        (
                            _event_id(identity, hashed, kind),
                            POLLER,
                            identity,
                            kind,
                            orjson.dumps(item),
                        )
                    )
                last = data[-1]
                since, after = last["updated_at"], last["id"]
                db.commit(snapshot, rows, (POLLER, since, after))
                items += len(data)
                events += len(rows)
            if not body["has_more"]:
                break
    return {"items": items, "events": events, "pages": pages}


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, run one pass, print the counts."""
    parser = argparse.ArgumentParser(prog="python -m bench.http.floor")
    parser.add_argument("--url", required=True)
    parser.add_argument("--sqlite")
    parser.add_argument("--postgres")
    parser.add_argument("--schema", default="bench_http_floor")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="asyncio")
    args = parser.parse_args(argv)
    db: Sqlite | Postgres = (
        Sqlite(args.sqlite) if args.sqlite else Postgres(args.postgres, args.schema)
    )
    sys.stdout.write(orjson.dumps(run(args.url, db, SHAPES[args.shape])).decode() + "\n")


if __name__ == "__main__":
    main()
