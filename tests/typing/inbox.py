"""Never executed: how ``watukuy.inbox`` types for each kind of connection.

``once()`` is a context manager for a blocking connection and an async one for an asyncio
connection; ``migrate()`` and ``prune()`` are awaitable for asyncio targets only; the
decorator of ``handler()`` hands the function the source's own connection type and
returns a handler the engine accepts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, assert_type

import aiosqlite
import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from sqlalchemy import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session, sessionmaker

import watukuy as wk
from watukuy.inbox import Inbox

inbox = wk.Inbox("orders_inbox", retention="7d")
assert_type(inbox, Inbox)


async def fetch(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    return wk.Page(items=[], has_more=False)


orders = wk.define_poller(
    name="orders", identity=lambda o: o["id"], cursor=wk.TokenCursor(), fetch=fetch
)
engine = wk.Engine(store=wk.MemoryStore(), pollers=[orders])


def blocking(db: sqlite3.Connection, event: wk.Event[Any], session: Session) -> None:
    assert_type(inbox.once(db, event), AbstractContextManager[bool])
    assert_type(inbox.once(session, event), AbstractContextManager[bool])
    assert_type(inbox.migrate(db), None)
    assert_type(inbox.prune(db, older_than="1d"), int)
    with db, inbox.once(db, event) as fresh:
        assert_type(fresh, bool)


async def asyncio_side(
    conn: aiosqlite.Connection, pg: psycopg.AsyncConnection[Any], session: AsyncSession
) -> None:
    event: wk.Event[Any] = wk.Event(
        id="x",
        type="created",
        source="s",
        subject="o1",
        time="2026-01-01T00:00:00.000Z",
        poller="orders",
        partition="",
        lane="live",
        sequence=1,
    )
    assert_type(inbox.once(conn, event), AbstractAsyncContextManager[bool])
    async with pg.transaction(), inbox.once(pg, event) as fresh:
        assert_type(fresh, bool)
    async with inbox.once(session, event) as fresh:
        assert_type(fresh, bool)
    assert_type(await inbox.migrate(conn), None)
    assert_type(await inbox.prune(session), int)


def handlers(
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
    sync_pool: ConnectionPool[psycopg.Connection[Any]],
    db: Engine,
    adb: AsyncEngine,
) -> None:
    async def on_order(
        event: wk.Event[wk.JsonObject], ctx: wk.HandlerContext, conn: psycopg.AsyncConnection[Any]
    ) -> None:
        await conn.execute("SELECT 1")

    @inbox.handler(sync_pool)
    def on_order_blocking(
        event: wk.Event[Any], ctx: wk.HandlerContext, conn: psycopg.Connection[Any]
    ) -> None:
        conn.execute("SELECT 1")

    @inbox.handler(db)
    def on_order_sa(event: wk.Event[Any], ctx: wk.HandlerContext, conn: Connection) -> None: ...

    @inbox.handler(sessionmaker(db))
    def on_order_session(
        event: wk.Event[Any], ctx: wk.HandlerContext, session: Session
    ) -> None: ...

    @inbox.handler(async_sessionmaker(adb))
    async def on_order_async_session(
        event: wk.Event[Any], ctx: wk.HandlerContext, session: AsyncSession
    ) -> None: ...

    counted = inbox.handler(pool)(on_order)
    assert_type(
        counted,
        Callable[[wk.Event[wk.JsonObject], wk.HandlerContext], Coroutine[Any, Any, None]],
    )
    engine.on(orders, counted)
    engine.on("orders", on_order_blocking)
