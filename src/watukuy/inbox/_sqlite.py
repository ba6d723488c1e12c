"""SQLite: ``sqlite3.Connection`` and ``aiosqlite.Connection``.

The ``sqlite3`` module's default (legacy) transaction control opens a transaction on its own
only before ``INSERT``/``UPDATE``/``DELETE``, and never before a ``SAVEPOINT``, which outside
a transaction would open one that its ``RELEASE`` commits. So when no transaction is open
yet, the inbox begins it explicitly, as the module would have at its first write, and leaves
the commit to the caller (``with conn:`` does it). A connection in autocommit mode
(``isolation_level=None``, or ``autocommit=True`` on Python 3.12 and later) with no
transaction open would commit the id on its own, before the effect: it is refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from watukuy.model.errors import ConfigError

from ._sql import SAVEPOINT, Statements

if TYPE_CHECKING:
    import sqlite3

    import aiosqlite

__all__ = ["AiosqliteAdapter", "SqliteAdapter", "autocommits", "begin_statement"]

_LEGACY = -1  # sqlite3.LEGACY_TRANSACTION_CONTROL (Python 3.12)


def autocommits(conn: Any) -> bool:
    """Whether a statement on this ``sqlite3`` (or ``aiosqlite``) connection outside a
    transaction commits on its own, even a plain ``INSERT``."""
    mode = getattr(conn, "autocommit", _LEGACY)
    if mode is True:
        return True
    return mode == _LEGACY and conn.isolation_level is None


def begin_statement(conn: Any) -> str:
    """``BEGIN`` with the connection's own flavour (``DEFERRED``, ``IMMEDIATE``...)."""
    level = getattr(conn, "isolation_level", None) or ""
    return f"BEGIN {level}".strip()


def refuse(kind: str) -> ConfigError:
    """The error for a connection that would commit the id before the effect."""
    return ConfigError(
        f"the {kind} is in autocommit mode and no transaction is open, so the event id "
        "would be committed on its own, before the effect; open a transaction first "
        "(BEGIN, or a connection with the default isolation_level)",
        field="conn",
    )


class SqliteAdapter:
    """A ``sqlite3.Connection``."""

    def __init__(self, conn: sqlite3.Connection, statements: Statements) -> None:
        self.conn = conn
        self.statements = statements

    def execute(self, sql: str, params: Sequence[object]) -> int:
        cursor = self.conn.execute(sql, tuple(params))
        try:
            return cursor.rowcount
        finally:
            cursor.close()

    def require_transaction(self) -> None:
        if self.conn.in_transaction:
            return
        if autocommits(self.conn):
            raise refuse("sqlite3 connection")
        self.conn.execute(begin_statement(self.conn))

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self.conn.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            yield
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {SAVEPOINT}")
            self.conn.execute(f"RELEASE {SAVEPOINT}")
            raise
        self.conn.execute(f"RELEASE {SAVEPOINT}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute(begin_statement(self.conn))
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


class AiosqliteAdapter:
    """An ``aiosqlite.Connection``."""

    def __init__(self, conn: aiosqlite.Connection, statements: Statements) -> None:
        self.conn = conn
        self.statements = statements

    async def execute(self, sql: str, params: Sequence[object]) -> int:
        async with self.conn.execute(sql, tuple(params)) as cursor:
            return cursor.rowcount

    async def require_transaction(self) -> None:
        if self.conn.in_transaction:
            return
        if autocommits(self.conn):
            raise refuse("aiosqlite connection")
        await self.execute(begin_statement(self.conn), ())

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        await self.execute(f"SAVEPOINT {SAVEPOINT}", ())
        try:
            yield
        except BaseException:
            await self.execute(f"ROLLBACK TO {SAVEPOINT}", ())
            await self.execute(f"RELEASE {SAVEPOINT}", ())
            raise
        await self.execute(f"RELEASE {SAVEPOINT}", ())

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if self.conn.in_transaction:
            yield
            return
        await self.execute(begin_statement(self.conn), ())
        try:
            yield
        except BaseException:
            await self.execute("ROLLBACK", ())
            raise
        await self.execute("COMMIT", ())
