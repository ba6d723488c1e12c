"""What each connection kind provides, and the three steps written once on top of it.

An adapter wraps one connection (a ``sqlite3`` or ``aiosqlite`` connection, a psycopg
connection, a SQLAlchemy session or connection) and offers four things: run a statement and
return its row count, check that a write would land in a transaction the caller commits, a
savepoint, and a transaction of its own for maintenance. :func:`once`, :func:`migrate` and
:func:`prune` (and their ``async`` twins) are the same for every kind.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import Protocol

from ._sql import InboxEvent, Statements, event_row, now_ms

__all__ = [
    "AsyncAdapter",
    "SyncAdapter",
    "migrate",
    "migrate_async",
    "once",
    "once_async",
    "prune",
    "prune_async",
    "record",
    "record_async",
]

logger = logging.getLogger("watukuy.inbox")


class SyncAdapter(Protocol):
    """One blocking connection, seen by the inbox."""

    statements: Statements

    def execute(self, sql: str, params: Sequence[object]) -> int:
        """Run ``sql`` and return its row count."""
        ...

    def require_transaction(self) -> None:
        """Make sure the next write lands in a transaction the caller commits.

        Raises:
            ConfigError: The connection commits each statement on its own.
        """
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """A savepoint: released on success, rolled back to when the block raises."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """The caller's open transaction, or one of our own, committed at the end."""
        ...


class AsyncAdapter(Protocol):
    """One asyncio connection, seen by the inbox."""

    statements: Statements

    async def execute(self, sql: str, params: Sequence[object]) -> int:
        """Run ``sql`` and return its row count."""
        ...

    async def require_transaction(self) -> None:
        """Make sure the next write lands in a transaction the caller commits.

        Raises:
            ConfigError: The connection commits each statement on its own.
        """
        ...

    def savepoint(self) -> AbstractAsyncContextManager[None]:
        """A savepoint: released on success, rolled back to when the block raises."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """The caller's open transaction, or one of our own, committed at the end."""
        ...


def record(adapter: SyncAdapter, event: InboxEvent) -> bool:
    """Insert the id of ``event``: ``True`` when it was not there yet."""
    fresh = adapter.execute(adapter.statements.insert, event_row(event, now_ms())) == 1
    if not fresh:
        logger.debug("inbox: event %s of %s was already applied", event.id, event.poller)
    return fresh


async def record_async(adapter: AsyncAdapter, event: InboxEvent) -> bool:
    """Insert the id of ``event``: ``True`` when it was not there yet."""
    fresh = await adapter.execute(adapter.statements.insert, event_row(event, now_ms())) == 1
    if not fresh:
        logger.debug("inbox: event %s of %s was already applied", event.id, event.poller)
    return fresh


@contextmanager
def once(adapter: SyncAdapter, event: InboxEvent) -> Iterator[bool]:
    """Record ``event`` in the caller's transaction and say whether it is fresh."""
    adapter.require_transaction()
    with adapter.savepoint():
        yield record(adapter, event)


@asynccontextmanager
async def once_async(adapter: AsyncAdapter, event: InboxEvent) -> AsyncIterator[bool]:
    """Record ``event`` in the caller's transaction and say whether it is fresh."""
    await adapter.require_transaction()
    async with adapter.savepoint():
        yield await record_async(adapter, event)


def migrate(adapter: SyncAdapter) -> None:
    """Create the table and its index if they are missing."""
    statements = adapter.statements
    with adapter.transaction():
        if statements.lock is not None:
            adapter.execute(statements.lock, statements.lock_params)
        for sql in statements.create:
            adapter.execute(sql, ())


async def migrate_async(adapter: AsyncAdapter) -> None:
    """Create the table and its index if they are missing."""
    statements = adapter.statements
    async with adapter.transaction():
        if statements.lock is not None:
            await adapter.execute(statements.lock, statements.lock_params)
        for sql in statements.create:
            await adapter.execute(sql, ())


def prune(adapter: SyncAdapter, cutoff_ms: int) -> int:
    """Delete the ids of events observed before ``cutoff_ms``; how many went."""
    with adapter.transaction():
        return adapter.execute(adapter.statements.prune, (cutoff_ms,))


async def prune_async(adapter: AsyncAdapter, cutoff_ms: int) -> int:
    """Delete the ids of events observed before ``cutoff_ms``; how many went."""
    async with adapter.transaction():
        return await adapter.execute(adapter.statements.prune, (cutoff_ms,))
