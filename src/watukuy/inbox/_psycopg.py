"""PostgreSQL through psycopg 3: ``Connection``, ``AsyncConnection`` and their pools.

A connection that is not in autocommit mode (psycopg's default) opens a transaction at its
first statement and leaves the commit to the caller: the inbox writes in it. An autocommit
connection is fine inside a ``conn.transaction()`` block, and refused outside one, where the
id would be committed on its own, before the effect. Maintenance (``migrate``, ``prune``)
runs in ``conn.transaction()``, which commits only a transaction it opened itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from watukuy.model.errors import ConfigError

from ._sql import SAVEPOINT, Statements

if TYPE_CHECKING:
    import psycopg

__all__ = ["AsyncPsycopgAdapter", "PsycopgAdapter"]

_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE


def _check(conn: Any) -> None:
    if conn.autocommit and conn.info.transaction_status == _IDLE:
        raise ConfigError(
            "the psycopg connection is in autocommit mode outside a transaction, so the "
            "event id would be committed on its own, before the effect; use "
            "`with conn.transaction():` around the block",
            field="conn",
        )


class PsycopgAdapter:
    """A ``psycopg.Connection``."""

    def __init__(self, conn: psycopg.Connection[Any], statements: Statements) -> None:
        self.conn = conn
        self.statements = statements

    def execute(self, sql: str, params: Sequence[object]) -> int:
        with self.conn.cursor() as cursor:
            cursor.execute(sql, tuple(params))
            return cursor.rowcount

    def require_transaction(self) -> None:
        _check(self.conn)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self.conn.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            yield
        except BaseException:
            self.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            self.conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
            raise
        self.conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield


class AsyncPsycopgAdapter:
    """A ``psycopg.AsyncConnection``."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], statements: Statements) -> None:
        self.conn = conn
        self.statements = statements

    async def execute(self, sql: str, params: Sequence[object]) -> int:
        async with self.conn.cursor() as cursor:
            await cursor.execute(sql, tuple(params))
            return cursor.rowcount

    async def require_transaction(self) -> None:
        _check(self.conn)

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        await self.conn.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            yield
        except BaseException:
            await self.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            await self.conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
            raise
        await self.conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self.conn.transaction():
            yield
