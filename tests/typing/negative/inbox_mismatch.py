"""Must NOT type-check: the inbox used with the wrong protocol or connection type.

Each ``# case:`` region (up to the next one) must draw at least one error from mypy --strict
and from pyright --strict, and the code before the first case none
(``tests/e2e/test_typing.py``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import aiosqlite
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Engine
from sqlalchemy.orm import Session

import watukuy as wk
from watukuy.inbox import Inbox

inbox = Inbox()


# case: async with around once() of a blocking connection
async def blocking_in_async_with(db: sqlite3.Connection, event: wk.Event[Any]) -> None:
    async with inbox.once(db, event):
        pass


# case: with around once() of an asyncio connection
def asyncio_in_with(conn: aiosqlite.Connection, event: wk.Event[Any]) -> None:
    with inbox.once(conn, event):
        pass


# case: once() on a pool, which holds no transaction
def once_on_a_pool(pool: AsyncConnectionPool[Any], event: wk.Event[Any]) -> None:
    inbox.once(pool, event)


# case: a plain def for an asyncio pool
def plain_def_for_an_asyncio_pool(pool: AsyncConnectionPool[Any]) -> None:
    @inbox.handler(pool)
    def on_order(event: wk.Event[Any], ctx: wk.HandlerContext, conn: Any) -> None: ...


# case: a session where an engine hands a connection
def session_from_an_engine(shop: Engine) -> None:
    @inbox.handler(shop)
    def on_order(event: wk.Event[Any], ctx: wk.HandlerContext, session: Session) -> None: ...
