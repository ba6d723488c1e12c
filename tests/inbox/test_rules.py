"""The rules around the caller's transaction, concurrency and bad input."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inbox_kinds import Boom, make_event, unique

import watukuy as wk
from watukuy.inbox import Inbox

# --- input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["", "1abc", "inbox-events", 'in"box', "public.inbox", "a" * 49, "in box"]
)
def test_a_table_name_must_be_a_plain_identifier(name: str) -> None:
    with pytest.raises(wk.ConfigError, match="table"):
        Inbox(name)


def test_the_defaults_and_the_retention() -> None:
    inbox = Inbox()
    assert (inbox.table, inbox.retention_ms) == ("watukuy_inbox", 30 * 86_400_000)
    assert Inbox("a" * 48, retention="7d").retention_ms == 7 * 86_400_000
    with pytest.raises(wk.ConfigError, match="retention"):
        Inbox(retention="soon")


def test_the_module_reads_like_an_inbox_of_the_default_table(tmp_path: Path) -> None:
    from watukuy import inbox

    assert inbox.DEFAULT.table == "watukuy_inbox"
    db = sqlite3.connect(tmp_path / "consumer.db")
    inbox.migrate(db)
    event = make_event()
    answers = []
    for _ in range(2):  # a delivery, then its redelivery
        with db, inbox.once(db, event) as fresh:
            answers.append(fresh)
    assert answers == [True, False]
    assert inbox.prune(db, older_than="0ms") == 1
    db.close()


async def test_a_sqlite_connection_serves_a_handler_one_transaction_at_a_time(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / "consumer.db", check_same_thread=False)
    db.execute("CREATE TABLE applied (id TEXT)")
    db.commit()
    inbox = Inbox()
    inbox.migrate(db)
    seen: list[str] = []

    @inbox.handler(db)
    def apply(event: wk.Event[Any], ctx: object, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO applied VALUES (?)", (event.id,))
        seen.append(event.id)
        if event.sequence == 3:
            raise Boom("the effect failed")

    events = [make_event(n) for n in (1, 2, 1, 2, 1)]  # three redeliveries
    # Blocking handlers run in worker threads, several at once.
    await asyncio.gather(*(asyncio.to_thread(apply, event, None) for event in events))
    with pytest.raises(Boom):
        await asyncio.to_thread(apply, make_event(3), None)
    assert sorted(seen) == sorted([make_event(1).id, make_event(2).id, make_event(3).id])
    rows = db.execute("SELECT id FROM applied ORDER BY id").fetchall()
    assert [row[0] for row in rows] == sorted([make_event(1).id, make_event(2).id])
    assert not db.in_transaction  # each delivery committed (or rolled back) its own


async def test_an_aiosqlite_connection_serves_an_async_handler(tmp_path: Path) -> None:
    import aiosqlite

    async with aiosqlite.connect(tmp_path / "consumer.db") as db:
        await db.execute("CREATE TABLE applied (id TEXT)")
        await db.commit()
        inbox = Inbox()
        await inbox.migrate(db)

        @inbox.handler(db)
        async def apply(event: wk.Event[Any], ctx: object, conn: aiosqlite.Connection) -> None:
            await conn.execute("INSERT INTO applied VALUES (?)", (event.id,))
            await asyncio.sleep(0)  # let the other deliveries try to interleave

        await asyncio.gather(*(apply(make_event(n), None) for n in (1, 2, 1, 3, 2, 1)))
        async with db.execute("SELECT count(*), count(DISTINCT id) FROM applied") as cursor:
            assert await cursor.fetchone() == (3, 3)
        assert not db.in_transaction


def test_an_unknown_connection_is_refused_with_what_is_known() -> None:
    with pytest.raises(wk.ConfigError, match=r"conn: expected a connection or a session"):
        Inbox().migrate(object())  # type: ignore[call-overload]
    with pytest.raises(wk.ConfigError, match=r"source: expected a psycopg pool.*SQLite"):
        Inbox().handler(object())  # type: ignore[call-overload]


async def test_a_handler_of_the_wrong_colour_is_refused_before_it_can_lose_an_effect(
    tmp_path: Path,
) -> None:
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    blocking = sa.create_engine(f"sqlite:///{tmp_path / 'consumer.db'}")
    asyncio_engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'consumer.db'}")

    async def coroutine_fn(event: Any, ctx: Any, conn: Any) -> None: ...

    def plain_fn(event: Any, ctx: Any, conn: Any) -> None: ...

    with pytest.raises(wk.ConfigError, match="plain def"):
        Inbox().handler(blocking)(coroutine_fn)  # type: ignore[arg-type]
    with pytest.raises(wk.ConfigError, match="async def"):
        Inbox().handler(asyncio_engine)(plain_fn)  # type: ignore[arg-type]
    inbox = Inbox()
    inbox.migrate(blocking)
    sneaky = inbox.handler(blocking)(lambda event, ctx, conn: coroutine_fn(event, ctx, conn))  # type: ignore[arg-type]
    with pytest.raises(wk.ConfigError, match="returned an awaitable"):
        sneaky(make_event(1), None)
    with blocking.connect() as conn:  # the transaction rolled back: the id is not kept
        assert conn.execute(sa.text("SELECT count(*) FROM watukuy_inbox")).scalar_one() == 0
    blocking.dispose()
    await asyncio_engine.dispose()


def test_an_event_without_an_iso_time_is_refused() -> None:
    db = sqlite3.connect(":memory:")
    inbox = Inbox()
    inbox.migrate(db)
    with (
        pytest.raises(wk.ConfigError, match=r"event\.time"),
        db,
        inbox.once(db, make_event(1, time="yesterday")),
    ):
        pass


def test_importing_the_inbox_imports_no_driver() -> None:
    code = (
        "import sqlite3, sys\n"
        "import watukuy as wk\n"
        "inbox = wk.Inbox()\n"
        "db = sqlite3.connect(':memory:')\n"
        "inbox.migrate(db)\n"
        "drivers = {'aiosqlite', 'psycopg', 'psycopg_pool', 'sqlalchemy'} & set(sys.modules)\n"
        "assert not drivers, drivers\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --- SQLite: the caller's transaction -------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path / "consumer.db", timeout=10)
    conn.execute("CREATE TABLE effects (event_id TEXT)")
    conn.commit()
    yield conn
    conn.close()


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as other:
        value: int = other.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    return value


def test_once_never_commits_the_callers_transaction(db: sqlite3.Connection, tmp_path: Path) -> None:
    inbox = Inbox()
    inbox.migrate(db)
    with inbox.once(db, make_event(1)) as fresh:
        assert fresh
        db.execute("INSERT INTO effects VALUES ('1')")
    db.execute("INSERT INTO effects VALUES ('after')")  # still the same transaction
    assert db.in_transaction
    assert _count(tmp_path / "consumer.db", "watukuy_inbox") == 0
    db.rollback()
    assert _count(tmp_path / "consumer.db", "watukuy_inbox") == 0
    with db, inbox.once(db, make_event(1)) as fresh:
        assert fresh


def test_a_failed_block_is_undone_even_if_the_caller_commits(
    db: sqlite3.Connection, tmp_path: Path
) -> None:
    inbox = Inbox()
    inbox.migrate(db)
    with db:
        db.execute("INSERT INTO effects VALUES ('before')")
        try:
            with inbox.once(db, make_event(1)):
                db.execute("INSERT INTO effects VALUES ('1')")
                raise Boom
        except Boom:
            pass  # swallowed: the caller commits what came before
    assert _count(tmp_path / "consumer.db", "effects") == 1
    assert _count(tmp_path / "consumer.db", "watukuy_inbox") == 0


def test_sqlite_autocommit_is_refused_outside_a_transaction(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "consumer.db", isolation_level=None)
    inbox = Inbox()
    inbox.migrate(conn)  # maintenance opens a transaction of its own
    with pytest.raises(wk.ConfigError, match="autocommit"), inbox.once(conn, make_event(1)):
        pass
    conn.execute("BEGIN")
    with inbox.once(conn, make_event(1)) as fresh:
        assert fresh
    conn.execute("COMMIT")
    assert _count(tmp_path / "consumer.db", "watukuy_inbox") == 1
    conn.close()


async def test_aiosqlite_autocommit_is_refused_outside_a_transaction(tmp_path: Path) -> None:
    import aiosqlite

    async with aiosqlite.connect(tmp_path / "consumer.db", isolation_level=None) as conn:
        inbox = Inbox()
        await inbox.migrate(conn)
        with pytest.raises(wk.ConfigError, match="autocommit"):
            async with inbox.once(conn, make_event(1)):
                pass


def test_two_sqlite_connections_with_one_id_apply_it_once(tmp_path: Path) -> None:
    path = tmp_path / "consumer.db"
    first = sqlite3.connect(path, timeout=10, check_same_thread=False)
    second = sqlite3.connect(path, timeout=10, check_same_thread=False)
    inbox = Inbox()
    inbox.migrate(first)
    event = make_event(1)
    results: list[bool] = []
    with first, inbox.once(first, event) as fresh:
        results.append(fresh)

        def other() -> None:
            with second, inbox.once(second, event) as again:
                results.append(again)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(0.3)
        assert thread.is_alive()  # waiting for the first writer's lock
    thread.join(10)
    assert results == [True, False]


def test_sqlalchemy_on_sqlite_leaves_the_commit_to_the_session(tmp_path: Path) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    path = tmp_path / "consumer.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    inbox = Inbox()
    inbox.migrate(engine)
    with Session(engine) as session:
        with inbox.once(session, make_event(1)) as fresh:
            assert fresh
        # The savepoint's release did not commit: pysqlite would have, had the inbox not
        # begun the transaction first.
        assert _count(path, "watukuy_inbox") == 0
        session.commit()
    assert _count(path, "watukuy_inbox") == 1
    autocommit = sa.create_engine(f"sqlite:///{path}", isolation_level="AUTOCOMMIT")
    with (
        Session(autocommit) as session,
        pytest.raises(wk.ConfigError, match="AUTOCOMMIT"),
        inbox.once(session, make_event(2)),
    ):
        pass
    engine.dispose()
    autocommit.dispose()


# --- PostgreSQL -----------------------------------------------------------------------------


@pytest.fixture
def pg_inbox(postgres_url: str) -> Iterator[Inbox]:
    import psycopg

    inbox = Inbox(unique("inbox"))
    with psycopg.connect(postgres_url) as conn:
        inbox.migrate(conn)
    yield inbox
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{inbox.table}"'.encode())


def _pg_ids(url: str, inbox: Inbox) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{inbox.table}"'.encode()).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
def test_psycopg_autocommit_is_refused_outside_a_transaction_block(
    postgres_url: str, pg_inbox: Inbox
) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(wk.ConfigError, match="autocommit"), pg_inbox.once(conn, make_event(1)):
            pass
        with conn.transaction(), pg_inbox.once(conn, make_event(1)) as fresh:
            assert fresh
    assert _pg_ids(postgres_url, pg_inbox) == 1


@pytest.mark.postgres
def test_psycopg_once_leaves_the_commit_to_the_caller(postgres_url: str, pg_inbox: Inbox) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        with pg_inbox.once(conn, make_event(1)) as fresh:
            assert fresh
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert _pg_ids(postgres_url, pg_inbox) == 0
        conn.rollback()
        try:
            with pg_inbox.once(conn, make_event(2)):
                conn.execute(b"SELECT 1 / 0")  # the transaction is now in error
        except psycopg.errors.DivisionByZero:
            pass
        conn.commit()  # the savepoint was rolled back: the transaction is usable again
    assert _pg_ids(postgres_url, pg_inbox) == 0


@pytest.mark.postgres
@pytest.mark.parametrize("outcome", ["commit", "rollback"])
async def test_two_postgres_transactions_with_one_id_apply_it_once(
    postgres_url: str, pg_inbox: Inbox, outcome: str
) -> None:
    import psycopg

    event = make_event(1)
    async with (
        await psycopg.AsyncConnection.connect(postgres_url) as first,
        await psycopg.AsyncConnection.connect(postgres_url) as second,
    ):

        async def apply(conn: psycopg.AsyncConnection[Any]) -> bool:
            async with conn.transaction(), pg_inbox.once(conn, event) as fresh:
                return fresh

        async with pg_inbox.once(first, event) as fresh:  # psycopg's implicit transaction
            assert fresh
        waiting = asyncio.create_task(apply(second))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # the insert waits on the first transaction's row
        if outcome == "commit":
            await first.commit()
            assert await waiting is False
        else:
            await first.rollback()
            assert await waiting is True
    assert _pg_ids(postgres_url, pg_inbox) == 1


@pytest.mark.postgres
async def test_concurrent_migrations_on_postgres(postgres_url: str) -> None:
    import psycopg

    inbox = Inbox(unique("inbox"))
    try:
        connections = [await psycopg.AsyncConnection.connect(postgres_url) for _ in range(4)]
        await asyncio.gather(*(inbox.migrate(conn) for conn in connections))
        for conn in connections:
            await conn.close()
        assert _pg_ids(postgres_url, inbox) == 0
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP TABLE IF EXISTS "{inbox.table}"'.encode())


@pytest.mark.postgres
def test_sqlalchemy_autocommit_on_postgres_is_refused(postgres_url: str, pg_inbox: Inbox) -> None:
    import sqlalchemy as sa

    url = postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with (
        engine.connect() as conn,
        pytest.raises(wk.ConfigError, match="AUTOCOMMIT"),
        pg_inbox.once(conn, make_event(1)),
    ):
        pass

    @pg_inbox.handler(engine)
    def on_event(event: wk.Event[Any], ctx: Any, conn: sa.Connection) -> None:
        raise AssertionError("never called")

    with pytest.raises(wk.ConfigError, match="AUTOCOMMIT"):
        on_event(make_event(1), None)
    engine.dispose()
