"""A child process for the inbox crash loop: one real engine whose handler counts events.

The engine keeps its state in a ``SqliteStore`` and polls a ``FakeApi`` served by the
parent over HTTP. Its handler increments a counter in the consumer's own database (a SQLite
file, or PostgreSQL) and appends the event to an ``applied`` table, inside ``inbox.once``
(SQLite, with a ``sqlite3`` connection per worker thread) or under ``inbox.handler(pool)``
(PostgreSQL, a psycopg pool). It tells the parent where it is, one line on stdout per point,
and at the three kill points waits for the parent's answer on stdin, so a ``SIGKILL`` lands
exactly there:

- ``delivered ID`` (no wait): the handler was called;
- ``before-effect ID``: the id is written (uncommitted), the effect not yet;
- ``after-effect ID``: the effect is written, nothing is committed;
- ``after-commit ID``: the id and the effect are committed, the engine has not acked.

Other lines: ``ready``, ``stopped``. SIGTERM stops the engine gracefully. With
``--without-inbox`` (SQLite only) the handler applies every delivery: the control run,
which must double-apply after a kill between commit and ack.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sqlite3
import sys
import threading
from typing import Any

import watukuy as wk
from watukuy.inbox import Inbox

_gate = threading.Lock()


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def wait_at(point: str, event: wk.Event[Any]) -> None:
    """Announce a kill point and wait for the parent to let us pass it."""
    with _gate:
        say(f"{point} {event.id}")
        if sys.stdin.readline() != "go\n":  # the parent is gone: stop here
            raise SystemExit(3)


def version_of(event: wk.Event[Any]) -> int:
    return int(event.data["version"]) if event.data else 0


def sqlite_handler(path: str, inbox: Inbox | None, tables: dict[str, str]) -> Any:
    local = threading.local()
    increment = f'UPDATE "{tables["counter"]}" SET n = n + 1 WHERE id = 1'
    append = f'INSERT INTO "{tables["applied"]}" (event_id, subject, version) VALUES (?, ?, ?)'

    def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        db = getattr(local, "db", None)
        if db is None:  # one connection per worker thread
            db = local.db = sqlite3.connect(path, timeout=30)
        say(f"delivered {event.id}")
        if inbox is None:  # the control: the same consumer without the inbox
            with db:
                wait_at("before-effect", event)
                effect(db, event)
            wait_at("after-commit", event)
            return
        with db, inbox.once(db, event) as fresh:
            if fresh:
                wait_at("before-effect", event)
                effect(db, event)
        if fresh:
            wait_at("after-commit", event)

    def effect(db: sqlite3.Connection, event: wk.Event[Any]) -> None:
        db.execute(increment)
        db.execute(append, (event.id, event.subject, version_of(event)))
        wait_at("after-effect", event)

    return handle


def postgres_handler(url: str, inbox: Inbox, tables: dict[str, str]) -> Any:
    import psycopg
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, min_size=1, max_size=4, open=True)
    increment = f'UPDATE "{tables["counter"]}" SET n = n + 1 WHERE id = 1'.encode()
    append = (
        f'INSERT INTO "{tables["applied"]}" (event_id, subject, version) VALUES (%s, %s, %s)'
    ).encode()
    applied: set[str] = set()

    @inbox.handler(pool)
    def apply(event: wk.Event[Any], ctx: wk.HandlerContext, conn: psycopg.Connection[Any]) -> None:
        wait_at("before-effect", event)
        conn.execute(increment)
        conn.execute(append, (event.id, event.subject, version_of(event)))
        applied.add(event.id)
        wait_at("after-effect", event)

    def handle(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        say(f"delivered {event.id}")
        apply(event, ctx)
        if event.id in applied:
            applied.discard(event.id)
            wait_at("after-commit", event)

    return handle


def build_poller(api: str) -> wk.PollerDefinition[Any]:
    async def since(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{api}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 20},
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        version=lambda o: o["version"],
        # The parent changes the vendor only while no child runs: nothing is written
        # behind a poll, so the cursor needs no lag.
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=since,
        schedule=wk.Schedule(min="100ms", max="300ms"),
        delivery=wk.Delivery(
            concurrency=4, retry=wk.Retry(attempts=50, backoff=wk.Backoff(base="20ms", max="100ms"))
        ),
    )


async def main(args: argparse.Namespace) -> None:
    inbox = Inbox(args.inbox)
    tables = {"counter": args.counter, "applied": args.applied}
    if args.consumer_sqlite:
        handle = sqlite_handler(args.consumer_sqlite, None if args.without_inbox else inbox, tables)
    else:
        handle = postgres_handler(args.consumer_postgres, inbox, tables)
    store = wk.SqliteStore(args.engine_db, busy_timeout="10s")
    engine = wk.Engine(
        store=store,
        pollers=[build_poller(args.api)],
        instance_id=args.instance,
        resync_every="200ms",
        auto_migrate=False,
    )
    engine.on("orders", handle)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await engine.start()
    say("ready")
    await stop.wait()
    await engine.stop(drain=True, timeout="5s")
    await store.close()
    say("stopped")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--instance", required=True)
    parser.add_argument("--api", required=True)
    parser.add_argument("--engine-db", required=True)
    parser.add_argument("--consumer-sqlite")
    parser.add_argument("--consumer-postgres")
    parser.add_argument("--inbox", required=True)
    parser.add_argument("--counter", required=True)
    parser.add_argument("--applied", required=True)
    parser.add_argument("--without-inbox", action="store_true")
    asyncio.run(main(parser.parse_args()))
