"""Which adapter for which object: the driver types are looked up in ``sys.modules``.

An object of a driver's type exists only if its module was imported, so looking there
never imports a driver the process does not use.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import Any, TypeAlias

from watukuy.model.errors import ConfigError

from ._sql import Dialect, Placeholders, Statements

__all__ = [
    "SharedConnection",
    "adapt",
    "open_async",
    "open_sync",
    "shared_sqlite",
    "source_kind",
    "unknown",
]

StatementsFor: TypeAlias = Callable[[Dialect, Placeholders], Statements]


def _module(name: str) -> Any:
    """A driver module if the process imported it (an object of its type implies it did)."""
    return sys.modules.get(name)


def adapt(conn: Any, statements_for: StatementsFor) -> tuple[bool, Any]:
    """``(is_sync, adapter)`` for a connection or a session.

    Raises:
        ConfigError: ``conn`` is of a kind the inbox does not know.
    """
    sqlite3 = _module("sqlite3")
    if sqlite3 is not None and isinstance(conn, sqlite3.Connection):
        from ._sqlite import SqliteAdapter

        return True, SqliteAdapter(conn, statements_for("sqlite", "qmark"))
    aiosqlite = _module("aiosqlite")
    if aiosqlite is not None and isinstance(conn, aiosqlite.Connection):
        from ._sqlite import AiosqliteAdapter

        return False, AiosqliteAdapter(conn, statements_for("sqlite", "qmark"))
    psycopg = _module("psycopg")
    if psycopg is not None:
        from ._psycopg import AsyncPsycopgAdapter, PsycopgAdapter

        if isinstance(conn, psycopg.Connection):
            return True, PsycopgAdapter(conn, statements_for("postgresql", "format"))
        if isinstance(conn, psycopg.AsyncConnection):
            statements = statements_for("postgresql", "format")
            return False, AsyncPsycopgAdapter(conn, statements)
    orm = _module("sqlalchemy.orm")
    engine = _module("sqlalchemy.engine")
    if (orm is not None and isinstance(conn, orm.Session)) or (
        engine is not None and isinstance(conn, engine.Connection)
    ):
        from ._sqlalchemy import SqlalchemyAdapter, dialect_of

        bind = conn.get_bind() if orm is not None and isinstance(conn, orm.Session) else conn
        dialect = dialect_of(bind.dialect.name)
        return True, SqlalchemyAdapter(conn, statements_for(dialect, "named"))
    asyncio_ext = _module("sqlalchemy.ext.asyncio")
    if asyncio_ext is not None and isinstance(
        conn, asyncio_ext.AsyncSession | asyncio_ext.AsyncConnection
    ):
        from ._sqlalchemy import AsyncSqlalchemyAdapter, dialect_of

        if isinstance(conn, asyncio_ext.AsyncSession):
            name = conn.get_bind().dialect.name
        else:
            name = conn.dialect.name
        statements = statements_for(dialect_of(name), "named")
        return False, AsyncSqlalchemyAdapter(conn, statements)
    raise unknown(conn, "a connection or a session")


def source_kind(source: Any) -> str:
    """What ``source`` is: ``"pool"``, ``"engine"``, ``"sessionmaker"``, their ``"async-"``
    twins, or ``""`` for anything else (a connection, a session, or unknown)."""
    pool = _module("psycopg_pool")
    if pool is not None:
        if isinstance(source, pool.AsyncConnectionPool):
            return "async-pool"
        if isinstance(source, pool.ConnectionPool):
            return "pool"
    engine = _module("sqlalchemy.engine")
    if engine is not None and isinstance(source, engine.Engine):
        return "engine"
    orm = _module("sqlalchemy.orm")
    if orm is not None and isinstance(source, orm.sessionmaker):
        return "sessionmaker"
    asyncio_ext = _module("sqlalchemy.ext.asyncio")
    if asyncio_ext is not None:
        if isinstance(source, asyncio_ext.AsyncEngine):
            return "async-engine"
        if isinstance(source, asyncio_ext.async_sessionmaker):
            return "async-sessionmaker"
    return ""


class SharedConnection:
    """One SQLite connection that a handler's deliveries take in turn.

    A handler may run for several events at once (each ordering key on its own, blocking
    handlers in worker threads); one SQLite connection holds one transaction at a time, so
    each delivery holds the connection until its transaction ends.
    """

    def __init__(self, conn: Any, *, asyncio_lock: bool) -> None:
        self.conn = conn
        self._thread_lock = threading.Lock()
        self._asyncio_lock = asyncio.Lock() if asyncio_lock else None

    @contextmanager
    def take(self) -> Iterator[Any]:
        with self._thread_lock:
            yield self.conn

    @asynccontextmanager
    async def take_async(self) -> AsyncIterator[Any]:
        assert self._asyncio_lock is not None
        async with self._asyncio_lock:
            yield self.conn


def shared_sqlite(source: Any) -> tuple[str, SharedConnection] | None:
    """``("sqlite" | "async-sqlite", shared)`` for a SQLite connection used as a handler's
    source, ``None`` for anything else."""
    sqlite3 = _module("sqlite3")
    if sqlite3 is not None and isinstance(source, sqlite3.Connection):
        return "sqlite", SharedConnection(source, asyncio_lock=False)
    aiosqlite = _module("aiosqlite")
    if aiosqlite is not None and isinstance(source, aiosqlite.Connection):
        return "async-sqlite", SharedConnection(source, asyncio_lock=True)
    return None


def open_sync(kind: str, source: Any) -> AbstractContextManager[Any]:
    """A connection or session of a blocking source, as a context manager."""
    if kind == "sqlite":
        return source.take()  # type: ignore[no-any-return]  # a SharedConnection
    if kind == "pool":
        return source.connection()  # type: ignore[no-any-return]
    if kind == "engine":
        return source.connect()  # type: ignore[no-any-return]
    return source()  # type: ignore[no-any-return]  # a sessionmaker's session


def open_async(kind: str, source: Any) -> AbstractAsyncContextManager[Any]:
    """A connection or session of an asyncio source, as an async context manager."""
    if kind == "async-sqlite":
        return source.take_async()  # type: ignore[no-any-return]  # a SharedConnection
    if kind == "async-pool":
        return source.connection()  # type: ignore[no-any-return]
    if kind == "async-engine":
        return source.connect()  # type: ignore[no-any-return]
    return source()  # type: ignore[no-any-return]  # an async_sessionmaker's session


def unknown(value: Any, expected: str, field: str = "conn") -> ConfigError:
    """The error for an object of no kind the inbox knows."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    return ConfigError(
        f"expected {expected} of sqlite3, aiosqlite, psycopg or SQLAlchemy, got {kind}",
        field=field,
    )
