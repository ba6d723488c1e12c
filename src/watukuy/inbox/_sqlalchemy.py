"""SQLAlchemy 2: ``Session``, ``Connection`` and their asyncio twins.

Statements go through ``text()`` in the transaction SQLAlchemy began (a session or a
connection begins one at its first statement and leaves the commit to you: ``session.begin()``
or ``session.commit()``). The savepoint is SQLAlchemy's own ``begin_nested()``, so a block
that raises also expires what the session loaded inside it. Two driver quirks are looked at
under SQLAlchemy: an ``AUTOCOMMIT`` isolation level commits each statement on its own and is
refused; and ``sqlite3``'s legacy mode would let the savepoint open (and its release commit)
the transaction, so the inbox begins it first, as the driver would have at the first write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, cast

from watukuy.model.errors import ConfigError

from ._sql import Dialect, Statements, named
from ._sqlite import autocommits, begin_statement

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
    from sqlalchemy.orm import Session

__all__ = ["AsyncSqlalchemyAdapter", "SqlalchemyAdapter", "dialect_of"]


def dialect_of(name: str) -> Dialect:
    """The inbox dialect of a SQLAlchemy dialect name.

    Raises:
        ConfigError: Neither PostgreSQL nor SQLite.
    """
    if name in ("postgresql", "sqlite"):
        return cast("Dialect", name)
    raise ConfigError(f"the inbox speaks PostgreSQL and SQLite, not {name!r}", field="conn")


def _refuse() -> ConfigError:
    return ConfigError(
        "the SQLAlchemy connection runs with isolation_level='AUTOCOMMIT', so the event id "
        "would be committed on its own, before the effect; use a transactional connection",
        field="conn",
    )


def _needs_begin(driver: Any, dialect: Dialect) -> bool:
    """Check the DBAPI connection under SQLAlchemy: refuse autocommit, and say whether a
    ``sqlite3``/``aiosqlite`` connection in legacy mode has no transaction open yet."""
    if dialect == "sqlite":
        if driver.in_transaction:
            return False
        if autocommits(driver):
            raise _refuse()
        return True
    if getattr(driver, "autocommit", False):  # psycopg
        raise _refuse()
    return False


class SqlalchemyAdapter:
    """A ``sqlalchemy.orm.Session`` or a ``sqlalchemy.Connection``."""

    def __init__(self, target: Session | Connection, statements: Statements) -> None:
        self.target = target
        self.statements = statements

    def _connection(self) -> Connection:
        from sqlalchemy.orm import Session

        return self.target.connection() if isinstance(self.target, Session) else self.target

    def execute(self, sql: str, params: Sequence[object]) -> int:
        from sqlalchemy import text

        result = self.target.execute(text(sql), named(params))
        return int(getattr(result, "rowcount", 0))

    def require_transaction(self) -> None:
        connection = self._connection()
        driver = connection.connection.driver_connection
        if _needs_begin(driver, self.statements.dialect):
            connection.exec_driver_sql(begin_statement(driver))

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        with self.target.begin_nested():
            yield

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self.target.in_transaction():
            yield
            return
        with self.target.begin():
            yield


class AsyncSqlalchemyAdapter:
    """A ``sqlalchemy.ext.asyncio.AsyncSession`` or ``AsyncConnection``."""

    def __init__(self, target: AsyncSession | AsyncConnection, statements: Statements) -> None:
        self.target = target
        self.statements = statements

    async def _connection(self) -> AsyncConnection:
        from sqlalchemy.ext.asyncio import AsyncSession

        if isinstance(self.target, AsyncSession):
            return await self.target.connection()
        return self.target

    async def execute(self, sql: str, params: Sequence[object]) -> int:
        from sqlalchemy import text

        result = await self.target.execute(text(sql), named(params))
        return int(getattr(result, "rowcount", 0))

    async def require_transaction(self) -> None:
        connection = await self._connection()
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        if _needs_begin(driver, self.statements.dialect):
            await connection.exec_driver_sql(begin_statement(driver))

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        async with self.target.begin_nested():
            yield

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if self.target.in_transaction():
            yield
            return
        async with self.target.begin():
            yield
