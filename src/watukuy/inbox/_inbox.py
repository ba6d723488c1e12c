"""``Inbox``: the public face, which picks the adapter for whatever it is handed."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, overload

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError

from . import _base
from ._dispatch import adapt, open_async, open_sync, shared_sqlite, source_kind, unknown
from ._sql import Dialect, InboxEvent, Placeholders, Statements, epoch_ms, now_ms, validate_table

if TYPE_CHECKING:
    import sqlite3

    import aiosqlite
    import psycopg
    import psycopg_pool
    from sqlalchemy import Connection as SaConnection
    from sqlalchemy import Engine
    from sqlalchemy.ext.asyncio import AsyncConnection as SaAsyncConnection
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
    from sqlalchemy.orm import Session, sessionmaker

    SyncConnection: TypeAlias = (
        sqlite3.Connection | psycopg.Connection[Any] | Session | SaConnection
    )
    AsyncConnection: TypeAlias = (
        aiosqlite.Connection | psycopg.AsyncConnection[Any] | AsyncSession | SaAsyncConnection
    )
    SyncSource: TypeAlias = psycopg_pool.ConnectionPool[Any] | Engine | sessionmaker[Any]
    AsyncSource: TypeAlias = (
        psycopg_pool.AsyncConnectionPool[Any] | AsyncEngine | async_sessionmaker[Any]
    )

__all__ = ["Inbox"]

E = TypeVar("E", bound=InboxEvent)
C = TypeVar("C")
PgConn = TypeVar("PgConn", bound="psycopg.Connection[Any]")
PgAsyncConn = TypeVar("PgAsyncConn", bound="psycopg.AsyncConnection[Any]")
SessionT = TypeVar("SessionT", bound="Session")
AsyncSessionT = TypeVar("AsyncSessionT", bound="AsyncSession")
Conn_co = TypeVar("Conn_co", covariant=True)


class AsyncHandlerDecorator(Protocol[Conn_co]):
    """What ``inbox.handler(async_source)`` returns: ``(event, ctx, conn)`` becomes a
    watukuy handler ``(event, ctx)``."""

    def __call__(
        self, fn: Callable[[E, C, Conn_co], Awaitable[None]], /
    ) -> Callable[[E, C], Coroutine[Any, Any, None]]: ...


class SyncHandlerDecorator(Protocol[Conn_co]):
    """What ``inbox.handler(sync_source)`` returns: ``(event, ctx, conn)`` becomes a
    watukuy handler ``(event, ctx)`` (run in a worker thread by the engine)."""

    def __call__(self, fn: Callable[[E, C, Conn_co], None], /) -> Callable[[E, C], None]: ...


class Inbox:
    """An idempotency table in the consumer's own database, written in the same
    transaction as the consumer's effect.

    A crash between a handler's effect and watukuy's ack redelivers the event; with the
    inbox, the redelivery finds the event's id already committed next to the effect and is
    skipped, so the effect happens exactly once. See
    https://watukuy.readthedocs.io/en/latest/delivery/#effects-exactly-once-the-inbox.

    Args:
        table: The table's name: letters, digits and underscores (at most 48). One table
            per effect: two handlers that both consume a poller into one database each need
            an inbox of their own.
        retention: How long ids are kept, counted from the event's observation time, by
            :meth:`prune` when it is not told otherwise. Keep it longer than any event can
            wait for delivery (retries, parked events, outages), or a late redelivery is
            applied again.

    Raises:
        ConfigError: The table name is not a plain identifier, or the retention is not a
            duration.
    """

    def __init__(self, table: str = "watukuy_inbox", *, retention: Duration = "30d") -> None:
        self._table = validate_table(table)
        self._retention_ms = parse_duration(retention, "retention")
        self._statements: dict[tuple[Dialect, Placeholders], Statements] = {}

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table

    @property
    def retention_ms(self) -> int:
        """The default retention of :meth:`prune`, in milliseconds."""
        return self._retention_ms

    def __repr__(self) -> str:
        return f"Inbox(table={self._table!r}, retention_ms={self._retention_ms})"

    # --- the steps -----------------------------------------------------------------------

    @overload
    def once(self, conn: SyncConnection, event: InboxEvent) -> AbstractContextManager[bool]: ...

    @overload
    def once(
        self, conn: AsyncConnection, event: InboxEvent
    ) -> AbstractAsyncContextManager[bool]: ...

    def once(self, conn: Any, event: InboxEvent) -> Any:
        """Record ``event`` in the caller's transaction; the block learns if it is fresh.

        ``with inbox.once(conn, event) as fresh:`` (``async with`` for an asyncio
        connection). The id is inserted in the transaction ``conn`` is in, or the one its
        first statement opens; the inbox never commits it: commit after the block, as
        ``with conn:``, ``conn.transaction()``, ``pool.connection()`` or
        ``session.begin()`` do, and the id and the effect land together. ``fresh`` is
        ``False`` for an event already applied (or being applied by a concurrent
        transaction, which the insert waits for): skip the effect then. If the block
        raises, a savepoint undoes the id and the block's writes, so the retry is fresh.

        Args:
            conn: A ``sqlite3`` or ``aiosqlite`` connection, a psycopg ``Connection`` or
                ``AsyncConnection``, or a SQLAlchemy ``Session``, ``AsyncSession``,
                ``Connection`` or ``AsyncConnection``.
            event: The event (anything with ``id``, ``poller``, ``partition``, ``time``).

        Raises:
            ConfigError: ``conn`` commits each statement on its own (autocommit outside a
                transaction), so the id would be committed before the effect; or ``conn``
                is of a kind the inbox does not know.
        """
        sync, adapter = adapt(conn, self._statements_for)
        return _base.once(adapter, event) if sync else _base.once_async(adapter, event)

    @overload
    def migrate(self, target: SyncConnection | SyncSource) -> None: ...

    @overload
    def migrate(self, target: AsyncConnection | AsyncSource) -> Coroutine[Any, Any, None]: ...

    def migrate(self, target: Any) -> Any:
        """Create the table and its index when they are missing (idempotent, and safe from
        several processes at once). Awaitable for asyncio targets.

        On a connection or session it runs in the transaction already open (you commit
        it), or in one of its own that it commits; on a pool, an engine or a session
        factory it takes a connection and commits.
        """
        return self._maintain(target, _base.migrate, _base.migrate_async)

    @overload
    def prune(
        self, target: SyncConnection | SyncSource, *, older_than: Duration | datetime | None = None
    ) -> int: ...

    @overload
    def prune(
        self,
        target: AsyncConnection | AsyncSource,
        *,
        older_than: Duration | datetime | None = None,
    ) -> Coroutine[Any, Any, int]: ...

    def prune(self, target: Any, *, older_than: Duration | datetime | None = None) -> Any:
        """Delete the ids of events observed before a cutoff; returns how many went.

        Args:
            target: As for :meth:`migrate`.
            older_than: A duration before now, or a moment (a naive ``datetime`` is UTC);
                by default the inbox's ``retention``. An event older than the cutoff that
                is still delivered afterwards is applied again.
        """
        if isinstance(older_than, datetime):
            cutoff = epoch_ms(older_than)
        else:
            span = (
                self._retention_ms
                if older_than is None
                else parse_duration(older_than, "older_than")
            )
            cutoff = now_ms() - span
        return self._maintain(
            target,
            lambda adapter: _base.prune(adapter, cutoff),
            lambda adapter: _base.prune_async(adapter, cutoff),
        )

    # --- handlers --------------------------------------------------------------------------

    @overload
    def handler(
        self, source: psycopg_pool.AsyncConnectionPool[PgAsyncConn]
    ) -> AsyncHandlerDecorator[PgAsyncConn]: ...

    @overload
    def handler(
        self, source: psycopg_pool.ConnectionPool[PgConn]
    ) -> SyncHandlerDecorator[PgConn]: ...

    @overload
    def handler(self, source: AsyncEngine) -> AsyncHandlerDecorator[SaAsyncConnection]: ...

    @overload
    def handler(self, source: Engine) -> SyncHandlerDecorator[SaConnection]: ...

    @overload
    def handler(
        self, source: async_sessionmaker[AsyncSessionT]
    ) -> AsyncHandlerDecorator[AsyncSessionT]: ...

    @overload
    def handler(self, source: sessionmaker[SessionT]) -> SyncHandlerDecorator[SessionT]: ...

    @overload
    def handler(
        self, source: aiosqlite.Connection
    ) -> AsyncHandlerDecorator[aiosqlite.Connection]: ...

    @overload
    def handler(self, source: sqlite3.Connection) -> SyncHandlerDecorator[sqlite3.Connection]: ...

    def handler(self, source: Any) -> Any:
        """Turn ``fn(event, ctx, conn)`` into a watukuy handler that owns the transaction.

        For each delivery the handler takes a connection (a session) from ``source``, opens
        a transaction, records the event's id, calls ``fn`` with the connection only when
        the id is fresh, and commits both together; if ``fn`` raises, both roll back and
        the delivery is retried. Use it under ``engine.on``::

            @engine.on("orders")
            @inbox.handler(pool)
            async def on_order(event, ctx, conn): ...

        Args:
            source: A psycopg ``ConnectionPool`` or ``AsyncConnectionPool``, a SQLAlchemy
                ``Engine`` or ``AsyncEngine`` (``fn`` gets a ``Connection``), a
                ``sessionmaker`` or ``async_sessionmaker`` (``fn`` gets a session), or one
                ``sqlite3`` or ``aiosqlite`` connection, which the deliveries take in turn,
                one transaction at a time (a ``sqlite3`` one must be opened with
                ``check_same_thread=False``: blocking handlers run in worker threads).
                Asyncio sources need an ``async def fn``; the others a plain ``def``.

        Raises:
            ConfigError: ``source`` is of a kind the inbox does not know.
        """
        return self._decorator(source)

    # --- dispatch ----------------------------------------------------------------------------

    def _statements_for(self, dialect: Dialect, style: Placeholders) -> Statements:
        key = (dialect, style)
        statements = self._statements.get(key)
        if statements is None:
            statements = self._statements[key] = Statements.build(dialect, self._table, style)
        return statements

    def _maintain(
        self,
        target: Any,
        step: Callable[[Any], Any],
        step_async: Callable[[Any], Coroutine[Any, Any, Any]],
    ) -> Any:
        """Run a maintenance step (migrate, prune) on a connection or a source."""
        kind = source_kind(target)
        if kind == "":
            sync, adapter = adapt(target, self._statements_for)
            return step(adapter) if sync else step_async(adapter)
        if kind.startswith("async-"):

            async def run() -> Any:
                async with open_async(kind, target) as conn:
                    _, adapter = adapt(conn, self._statements_for)
                    return await step_async(adapter)

            return run()
        with open_sync(kind, target) as conn:
            _, adapter = adapt(conn, self._statements_for)
            return step(adapter)

    def _decorator(self, source: Any) -> Any:
        kind = source_kind(source)
        shared = shared_sqlite(source) if kind == "" else None
        if shared is not None:
            kind, source = shared
        if kind == "":
            raise unknown(
                source,
                "a psycopg pool, a SQLAlchemy engine, a session factory or a SQLite connection",
                "source",
            )
        if kind.startswith("async-"):

            def decorate_async(fn: Callable[..., Awaitable[None]]) -> Any:
                if not _is_async(fn):
                    raise ConfigError(
                        f"an asyncio source needs an async def handler, got {fn!r}", field="fn"
                    )

                @functools.wraps(fn)
                async def handle(event: Any, ctx: Any) -> None:
                    async with open_async(kind, source) as conn:
                        _, adapter = adapt(conn, self._statements_for)
                        async with adapter.transaction():
                            await adapter.require_transaction()
                            if await _base.record_async(adapter, event):
                                await fn(event, ctx, conn)

                return handle

            return decorate_async

        def decorate(fn: Callable[..., None]) -> Any:
            # A coroutine left unawaited would commit the id without the effect.
            if _is_async(fn):
                raise ConfigError(
                    f"a blocking source needs a plain def handler, got the async {fn!r}",
                    field="fn",
                )

            @functools.wraps(fn)
            def handle(event: Any, ctx: Any) -> None:
                with open_sync(kind, source) as conn:
                    _, adapter = adapt(conn, self._statements_for)
                    with adapter.transaction():
                        adapter.require_transaction()
                        if _base.record(adapter, event):
                            result: object = fn(event, ctx, conn)  # type: ignore[func-returns-value]
                            if inspect.isawaitable(result):
                                if inspect.iscoroutine(result):
                                    result.close()
                                raise ConfigError(
                                    f"{fn!r} returned an awaitable; a blocking source needs "
                                    "a plain def handler",
                                    field="fn",
                                )

            return handle

        return decorate


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )
