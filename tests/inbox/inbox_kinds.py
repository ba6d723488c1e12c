"""One consumer per connection kind, written the way its users write code.

Each :class:`Consumer` increments a counter row in its own database inside ``inbox.once``
(or under ``inbox.handler``), in a transaction of the kind's usual shape, and can be told to
raise after the effect. The tests in this folder run the same checks on every kind: a fresh
event applies, a duplicate does not, a failed effect leaves no id behind, pruning goes by
event time. Tables get a name of their own per test; PostgreSQL ones are dropped afterwards.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watukuy.inbox import Inbox
from watukuy.model.events import Event

KINDS_SQLITE = [
    "sqlite3",
    "aiosqlite",
    "sa-session-sqlite",
    "sa-connection-sqlite",
    "sa-async-session-sqlite",
    "sa-engine-handler-sqlite",
    "sa-async-engine-handler-sqlite",
]
KINDS_POSTGRES = [
    "psycopg",
    "psycopg-autocommit",
    "psycopg-async",
    "psycopg-pool-handler",
    "psycopg-async-pool-handler",
    "sa-session-postgres",
    "sa-async-session-postgres",
    "sa-sessionmaker-handler-postgres",
    "sa-async-sessionmaker-handler-postgres",
    "sa-async-connection-postgres",
]


class Boom(Exception):
    """Raised by a consumer after its effect, to check that nothing of it stays."""


def make_event(
    n: int = 1, *, time: str = "2026-03-01T12:00:00.000Z", poller: str = "orders"
) -> Event[Any]:
    return Event(
        id=f"{n:064x}",
        type="created",
        source=f"urn:watukuy:{poller}",
        subject=f"o{n}",
        time=time,
        poller=poller,
        partition="",
        lane="live",
        sequence=n,
    )


def unique(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:10]}"


class Consumer:
    """A consumer of one kind: ``apply`` runs its handler once for ``event``."""

    def __init__(self, inbox: Inbox, counter: str) -> None:
        self.inbox = inbox
        self.counter = counter
        self.increment = f'UPDATE "{counter}" SET n = n + 1 WHERE id = 1'

    async def setup(self) -> None:
        raise NotImplementedError

    async def migrate(self) -> None:
        raise NotImplementedError

    async def apply(self, event: Event[Any], *, fail: bool = False) -> bool:
        """Handle ``event``; ``True`` when the effect ran (and was committed)."""
        raise NotImplementedError

    async def count(self) -> int:
        raise NotImplementedError

    async def ids(self) -> int:
        raise NotImplementedError

    async def prune(self, **kwargs: Any) -> int:
        raise NotImplementedError

    async def close(self) -> None:
        """Release connections."""


# --- SQLite -----------------------------------------------------------------------------------


class Sqlite3Consumer(Consumer):
    def __init__(self, inbox: Inbox, counter: str, path: Path) -> None:
        super().__init__(inbox, counter)
        self.path = path
        self.db = sqlite3.connect(path)

    async def setup(self) -> None:
        with self.db:
            self.db.execute(f'CREATE TABLE "{self.counter}" (id INTEGER PRIMARY KEY, n INTEGER)')
            self.db.execute(f'INSERT INTO "{self.counter}" VALUES (1, 0)')

    async def migrate(self) -> None:
        self.inbox.migrate(self.db)

    async def apply(self, event: Event[Any], *, fail: bool = False) -> bool:
        with self.db, self.inbox.once(self.db, event) as fresh:
            if fresh:
                self.db.execute(self.increment)
                if fail:
                    raise Boom
        return fresh

    def scalar(self, sql: str) -> int:
        with sqlite3.connect(self.path) as other:
            value: int = other.execute(sql).fetchone()[0]
        return value

    async def count(self) -> int:
        return self.scalar(f'SELECT n FROM "{self.counter}"')

    async def ids(self) -> int:
        return self.scalar(f'SELECT count(*) FROM "{self.inbox.table}"')

    async def prune(self, **kwargs: Any) -> int:
        return self.inbox.prune(self.db, **kwargs)

    async def close(self) -> None:
        self.db.close()


class AiosqliteConsumer(Sqlite3Consumer):
    async def setup(self) -> None:
        import aiosqlite

        await super().setup()
        self.conn = await aiosqlite.connect(self.path)

    async def migrate(self) -> None:
        await self.inbox.migrate(self.conn)

    async def apply(self, event: Event[Any], *, fail: bool = False) -> bool:
        try:
            async with self.inbox.once(self.conn, event) as fresh:
                if fresh:
                    await self.conn.execute(self.increment)
                    if fail:
                        raise Boom
        except BaseException:
            await self.conn.rollback()
            raise
        await self.conn.commit()
        return fresh

    async def prune(self, **kwargs: Any) -> int:
        return await self.inbox.prune(self.conn, **kwargs)

    async def close(self) -> None:
        await self.conn.close()
        await super().close()


class SaConsumer(Consumer):
    """SQLAlchemy on either database: a sync engine and an asyncio one on the same URL."""

    def __init__(self, inbox: Inbox, counter: str, url: str, async_url: str, style: str) -> None:
        super().__init__(inbox, counter)
        import sqlalchemy as sa
        from sqlalchemy.ext.asyncio import create_async_engine

        self.engine = sa.create_engine(url)
        self.async_engine = create_async_engine(async_url)
        self.style = style
        self.handle: Callable[..., Any] | None = None

    async def setup(self) -> None:
        import sqlalchemy as sa

        with self.engine.begin() as conn:
            conn.execute(
                sa.text(f'CREATE TABLE "{self.counter}" (id INTEGER PRIMARY KEY, n INTEGER)')
            )
            conn.execute(sa.text(f'INSERT INTO "{self.counter}" VALUES (1, 0)'))
        self.handle = self._handler()

    def _handler(self) -> Callable[..., Any] | None:
        import sqlalchemy as sa
        from sqlalchemy.ext.asyncio import async_sessionmaker
        from sqlalchemy.orm import sessionmaker

        increment = sa.text(self.increment)
        if self.style == "engine-handler":

            @self.inbox.handler(self.engine)
            def on_event(event: Event[Any], ctx: Any, conn: sa.Connection) -> None:
                conn.execute(increment)
                if ctx:
                    raise Boom

            return on_event
        if self.style == "async-engine-handler":
            from sqlalchemy.ext.asyncio import AsyncConnection

            @self.inbox.handler(self.async_engine)
            async def on_event_async(event: Event[Any], ctx: Any, conn: AsyncConnection) -> None:
                await conn.execute(increment)
                if ctx:
                    raise Boom

            return on_event_async
        if self.style == "sessionmaker-handler":
            from sqlalchemy.orm import Session

            @self.inbox.handler(sessionmaker(self.engine))
            def on_event_session(event: Event[Any], ctx: Any, session: Session) -> None:
                session.execute(increment)
                if ctx:
                    raise Boom

            return on_event_session
        if self.style == "async-sessionmaker-handler":
            from sqlalchemy.ext.asyncio import AsyncSession

            @self.inbox.handler(async_sessionmaker(self.async_engine))
            async def on_event_async_session(
                event: Event[Any], ctx: Any, session: AsyncSession
            ) -> None:
                await session.execute(increment)
                if ctx:
                    raise Boom

            return on_event_async_session
        return None

    async def migrate(self) -> None:
        if self.style.startswith("async"):
            await self.inbox.migrate(self.async_engine)
        else:
            self.inbox.migrate(self.engine)

    async def apply(self, event: Event[Any], *, fail: bool = False) -> bool:
        import sqlalchemy as sa
        from sqlalchemy.ext.asyncio import AsyncSession
        from sqlalchemy.orm import Session

        before = await self.count()
        increment = sa.text(self.increment)
        if self.handle is not None:
            result = self.handle(event, fail or None)
            if asyncio.iscoroutine(result):
                await result
            return await self.count() > before
        if self.style == "session":
            with (
                Session(self.engine) as session,
                session.begin(),
                self.inbox.once(session, event) as fresh,
            ):
                if fresh:
                    session.execute(increment)
                    if fail:
                        raise Boom
            return fresh
        if self.style == "connection":
            with self.engine.connect() as conn:
                with self.inbox.once(conn, event) as fresh:
                    if fresh:
                        conn.execute(increment)
                        if fail:
                            raise Boom
                conn.commit()
            return fresh
        if self.style == "async-session":
            async with (
                AsyncSession(self.async_engine) as asession,
                asession.begin(),
                self.inbox.once(asession, event) as fresh,
            ):
                if fresh:
                    await asession.execute(increment)
                    if fail:
                        raise Boom
            return fresh
        assert self.style == "async-connection"
        async with self.async_engine.begin() as aconn, self.inbox.once(aconn, event) as fresh:
            if fresh:
                await aconn.execute(increment)
                if fail:
                    raise Boom
        return fresh

    def scalar(self, sql: str) -> int:
        import sqlalchemy as sa

        with self.engine.connect() as conn:
            return int(conn.execute(sa.text(sql)).scalar_one())

    async def count(self) -> int:
        return self.scalar(f'SELECT n FROM "{self.counter}"')

    async def ids(self) -> int:
        return self.scalar(f'SELECT count(*) FROM "{self.inbox.table}"')

    async def prune(self, **kwargs: Any) -> int:
        if self.style.startswith("async"):
            return await self.inbox.prune(self.async_engine, **kwargs)
        return self.inbox.prune(self.engine, **kwargs)

    async def close(self) -> None:
        import sqlalchemy as sa

        if self.engine.dialect.name == "postgresql":
            with self.engine.begin() as conn:
                conn.execute(
                    sa.text(f'DROP TABLE IF EXISTS "{self.counter}", "{self.inbox.table}"')
                )
        self.engine.dispose()
        await self.async_engine.dispose()


# --- psycopg ----------------------------------------------------------------------------------


class PsycopgConsumer(Consumer):
    def __init__(self, inbox: Inbox, counter: str, url: str, style: str) -> None:
        super().__init__(inbox, counter)
        self.url = url
        self.style = style
        self.handle: Callable[..., Any] | None = None

    async def setup(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE TABLE "{self.counter}" (id INTEGER PRIMARY KEY, n INTEGER)')
            conn.execute(f'INSERT INTO "{self.counter}" VALUES (1, 0)')
        if self.style == "sync":
            self.conn = psycopg.connect(self.url)
        elif self.style == "autocommit":
            self.conn = psycopg.connect(self.url, autocommit=True)
        elif self.style == "async":
            self.aconn = await psycopg.AsyncConnection.connect(self.url)
        elif self.style == "pool-handler":
            from psycopg_pool import ConnectionPool

            self.pool = ConnectionPool(self.url, min_size=1, max_size=2, open=True)

            @self.inbox.handler(self.pool)
            def on_event(event: Event[Any], ctx: Any, conn: psycopg.Connection[Any]) -> None:
                conn.execute(self.increment.encode())
                if ctx:
                    raise Boom

            self.handle = on_event
        else:
            from psycopg_pool import AsyncConnectionPool

            self.apool = AsyncConnectionPool(self.url, min_size=1, max_size=2, open=False)
            await self.apool.open()

            @self.inbox.handler(self.apool)
            async def on_event_async(
                event: Event[Any], ctx: Any, conn: psycopg.AsyncConnection[Any]
            ) -> None:
                await conn.execute(self.increment.encode())
                if ctx:
                    raise Boom

            self.handle = on_event_async

    async def migrate(self) -> None:
        if self.style == "async":
            await self.inbox.migrate(self.aconn)
        elif self.style == "async-pool-handler":
            await self.inbox.migrate(self.apool)
        elif self.style == "pool-handler":
            self.inbox.migrate(self.pool)
        else:
            self.inbox.migrate(self.conn)

    async def apply(self, event: Event[Any], *, fail: bool = False) -> bool:
        if self.handle is not None:
            before = await self.count()
            result = self.handle(event, fail or None)
            if asyncio.iscoroutine(result):
                await result
            return await self.count() > before
        increment = self.increment.encode()
        if self.style == "async":
            async with self.aconn.transaction(), self.inbox.once(self.aconn, event) as fresh:
                if fresh:
                    await self.aconn.execute(increment)
                    if fail:
                        raise Boom
            return fresh
        with self.conn.transaction(), self.inbox.once(self.conn, event) as fresh:
            if fresh:
                self.conn.execute(increment)
                if fail:
                    raise Boom
        return fresh

    def scalar(self, sql: str) -> int:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(sql.encode()).fetchone()
        assert row is not None
        return int(row[0])

    async def count(self) -> int:
        return self.scalar(f'SELECT n FROM "{self.counter}"')

    async def ids(self) -> int:
        return self.scalar(f'SELECT count(*) FROM "{self.inbox.table}"')

    async def prune(self, **kwargs: Any) -> int:
        if self.style == "async":
            return await self.inbox.prune(self.aconn, **kwargs)
        if self.style == "async-pool-handler":
            return await self.inbox.prune(self.apool, **kwargs)
        if self.style == "pool-handler":
            return self.inbox.prune(self.pool, **kwargs)
        return self.inbox.prune(self.conn, **kwargs)

    async def close(self) -> None:
        import psycopg

        if self.style == "async":
            await self.aconn.close()
        elif self.style == "async-pool-handler":
            await self.apool.close()
        elif self.style == "pool-handler":
            self.pool.close()
        else:
            self.conn.close()
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "{self.counter}", "{self.inbox.table}"'.encode())


def build(kind: str, tmp_path: Path, postgres_url: str | None) -> Consumer:
    inbox = Inbox(unique("inbox"))
    counter = unique("counter")
    if kind == "sqlite3":
        return Sqlite3Consumer(inbox, counter, tmp_path / "consumer.db")
    if kind == "aiosqlite":
        return AiosqliteConsumer(inbox, counter, tmp_path / "consumer.db")
    if kind.startswith("sa-"):
        database = kind.rsplit("-", 1)[1]
        style = kind.removeprefix("sa-").removesuffix(f"-{database}")
        if database == "sqlite":
            path = tmp_path / "consumer.db"
            return SaConsumer(
                inbox, counter, f"sqlite:///{path}", f"sqlite+aiosqlite:///{path}", style
            )
        assert postgres_url is not None
        url = postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)
        return SaConsumer(inbox, counter, url, url, style)
    assert postgres_url is not None
    style = {"psycopg": "sync", "psycopg-autocommit": "autocommit", "psycopg-async": "async"}.get(
        kind, kind.removeprefix("psycopg-")
    )
    return PsycopgConsumer(inbox, counter, postgres_url, style)
