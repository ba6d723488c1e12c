"""PostgresStore on a real server: the contract suite plus what only PostgreSQL can show."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError, StoreError
from watukuy.model.ports import StateStore
from watukuy.model.rows import (
    CommitBatch,
    ItemMark,
    Lease,
    ListingLink,
    OutboxRow,
    PKey,
    StatePatch,
    empty_poller_state,
    state_to_fields,
)
from watukuy.stores.postgres import SCHEMA_VERSION, PostgresStore, _migration_files
from watukuy.testing.store_contract import (
    KEY,
    T0,
    TTL,
    StoreContract,
    batch,
    item_row,
    outbox_row,
    parked_invalid,
)

pytestmark = pytest.mark.postgres

# (version, name) of every migration file in the package, in order.
_SHIPPED = [(version, name) for version, name, _ in _migration_files()]


class TestPostgresStoreContract(StoreContract):
    @pytest.fixture
    async def store(self, postgres_store: PostgresStore) -> StateStore:
        return postgres_store


class TestPostgresStoreContractWithAPrefix(StoreContract):
    """The same contract with a non-default table prefix and an injected pool."""

    @pytest.fixture
    async def store(self, postgres_url: str, pg_schema: str) -> AsyncIterator[StateStore]:
        async with AsyncConnectionPool(postgres_url, open=False, min_size=1) as pool:
            store = PostgresStore(pool, schema=pg_schema, table_prefix="wk2_")
            await store.migrate()
            yield store
            await store.close()


async def _query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement on a fresh connection of its own (never the store's pool)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(sql, params or None)
        return await cur.fetchall() if cur.description is not None else []


# --- construction and lifecycle ---------------------------------------------------------


async def test_the_constructor_does_no_io() -> None:
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/nowhere")
    assert store.pool.closed is True  # not opened, no connection attempted
    await store.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schema": "bad-name"}, "schema: expected letters, digits and underscores"),
        ({"schema": "1abc"}, "got '1abc'"),
        ({"table_prefix": "x;drop"}, "table_prefix: expected letters"),
        ({"table_prefix": "p" * 41}, "table_prefix: expected letters"),
    ],
)
def test_bad_identifiers_are_config_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PostgresStore("postgresql://localhost/x", **kwargs)


@pytest.mark.parametrize("value", ["", "   ", 42, None])
def test_a_missing_dsn_is_a_config_error(value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"dsn_or_pool: expected a DSN .*got {value!r}"):
        PostgresStore(value)


def test_an_empty_prefix_is_allowed() -> None:
    assert repr(PostgresStore("postgresql://x/y", table_prefix="")) == (
        "PostgresStore(schema='public', table_prefix='')"
    )


def test_without_psycopg_the_class_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from watukuy.stores.postgres import PostgresStore\n"
        "try:\n"
        "    PostgresStore('postgresql://x/y')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == (
        "PostgresStore needs psycopg 3 and psycopg_pool: pip install 'watukuy[postgres]'"
    )


async def test_an_owned_pool_opens_lazily_and_closes(postgres_url: str, pg_schema: str) -> None:
    store = PostgresStore(postgres_url, schema=pg_schema)
    assert store.pool.closed is True
    assert await store.acquire_lease(KEY, "node-a", TTL, T0) is not None  # migrates lazily
    assert store.pool.closed is False
    await store.close()
    assert store.pool.closed is True


async def test_an_injected_pool_is_never_closed(postgres_url: str, pg_schema: str) -> None:
    async with AsyncConnectionPool(postgres_url, min_size=1) as pool:
        store = PostgresStore(pool, schema=pg_schema)
        await store.migrate()
        await store.close()
        assert pool.closed is False
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT 41 + 1")
            assert await cur.fetchone() == (42,)


async def test_an_unreachable_server_is_a_store_error() -> None:
    async with AsyncConnectionPool(
        "postgresql://nobody@127.0.0.1:1/nowhere", min_size=1, timeout=0.2, open=False
    ) as pool:
        store = PostgresStore(pool)
        with pytest.raises(StoreError, match=r"^load_state: ") as info:
            await store.load_state(KEY)
        assert isinstance(info.value.__cause__, psycopg.OperationalError)


# --- migrations ---------------------------------------------------------------------------


async def test_migrate_creates_the_schema_and_records_each_version(
    postgres_url: str, pg_schema: str
) -> None:
    store = PostgresStore(postgres_url, schema=pg_schema, table_prefix="t_")
    await store.migrate()
    await store.migrate()
    await store.close()
    versions = await _query(
        postgres_url, f'SELECT version, name FROM "{pg_schema}"."t_migrations" ORDER BY version'
    )
    assert versions == _SHIPPED
    tables = await _query(
        postgres_url,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
        " ORDER BY table_name",
        pg_schema,
    )
    assert [t for (t,) in tables] == [
        "t_epoch_floors",
        "t_items",
        "t_log",
        "t_migrations",
        "t_outbox",
        "t_parked",
        "t_pollers",
        "t_tombstones",
        "t_validators",
    ]


async def test_a_schema_at_the_newest_version_starts_without_reading_migrations(
    postgres_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _SHIPPED[-1][0] == SCHEMA_VERSION  # the fast path's idea of "newest"
    first = PostgresStore(postgres_url, schema=pg_schema)
    await first.migrate()
    await first.close()

    def no_files() -> list[tuple[int, str, str]]:
        raise AssertionError("a migrated schema read the migration files")

    monkeypatch.setattr("watukuy.stores.postgres._migration_files", no_files)
    again = PostgresStore(postgres_url, schema=pg_schema)
    await again.migrate()
    assert await again.load_state(KEY) is None
    await again.close()
    # A fresh schema still needs them: the fast path only skips work that is done.
    fresh = PostgresStore(postgres_url, schema=pg_schema, table_prefix="fresh_")
    with pytest.raises(StoreError, match="migration files"):
        await fresh.migrate()
    await fresh.close()


async def test_concurrent_migrations_apply_each_version_once(
    postgres_url: str, pg_schema: str
) -> None:
    stores = [PostgresStore(postgres_url, schema=pg_schema) for _ in range(6)]
    try:
        await asyncio.gather(*(store.migrate() for store in stores))
        # A second wave on the now-migrated schema, also concurrent, changes nothing.
        await asyncio.gather(*(store.migrate() for store in stores))
    finally:
        await asyncio.gather(*(store.close() for store in stores))
    versions = await _query(postgres_url, f'SELECT version FROM "{pg_schema}"."watukuy_migrations"')
    assert sorted(versions) == [(version,) for version, _ in _SHIPPED]


async def test_two_prefixes_share_a_schema(postgres_url: str, pg_schema: str) -> None:
    first = PostgresStore(postgres_url, schema=pg_schema, table_prefix="a_")
    second = PostgresStore(postgres_url, schema=pg_schema, table_prefix="b_")
    try:
        await asyncio.gather(first.migrate(), second.migrate())
        await first.save_state_unfenced(KEY, {"paused": True}, T0)
        assert await first.list_keys() == [KEY]
        assert await second.list_keys() == []
    finally:
        await first.close()
        await second.close()


# --- yesterday's schema: revisions and tombstones (4), escaped keys (5) ------------------


async def _schema_at(url: str, schema: str, last: int) -> None:
    """A schema as the store left it with migrations up to ``last`` applied."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(
            f'CREATE TABLE "{schema}".migrations (version integer PRIMARY KEY, name text NOT NULL,'
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, text in _migration_files():
            if version <= last:
                ddl = text.replace("{{schema}}", schema).replace("{{prefix}}", "")
                await conn.execute(ddl.encode())
                await conn.execute(
                    f'INSERT INTO "{schema}".migrations VALUES (%s, %s)', (version, name)
                )


async def test_a_version_2_snapshot_gains_revisions_and_tombstones(
    postgres_url: str, pg_schema: str
) -> None:
    await _schema_at(postgres_url, pg_schema, 2)
    await _query(
        postgres_url,
        f'INSERT INTO "{pg_schema}".pollers (poller, "partition", state, lease_owner, lease_epoch,'
        " lease_expires_at) VALUES ('orders', '', %s, 'node-a', 3, %s)",
        wkjson.dumps(state_to_fields(empty_poller_state(T0))),
        T0 + TTL,
    )
    await _query(
        postgres_url,
        f'INSERT INTO "{pg_schema}".items (poller, "partition", identity, version, hash,'
        " schema_version, payload, seen_at) VALUES ('orders', '', 'a', 'v1', 'h1', 1, NULL, 5)",
    )
    store = PostgresStore(postgres_url, schema=pg_schema, table_prefix="")
    try:
        await store.migrate()
        rows = await store.load_versions(KEY, ["a"])
        assert (rows["a"].version, rows["a"].hash, rows["a"].revision) == ("v1", "h1", 0)
        await store.commit_poll(KEY, Lease("node-a", 3, T0 + TTL), batch(deletes=["a"]))
        tombstones = await store.load_tombstones(KEY, ["a"])
        assert (tombstones["a"].reason, tombstones["a"].revision) == ("deleted", 0)
    finally:
        await store.close()


async def test_a_version_4_schema_escapes_the_keys_it_already_holds(
    postgres_url: str, pg_schema: str
) -> None:
    # Before version 5 a U+0001 was stored as it is; two identities that become each
    # other's old form on the way must both survive the rewrite.
    await _schema_at(postgres_url, pg_schema, 4)
    partition, identities = "t\x01", ["a\x01", "a\x01\x02", "plain"]
    await _query(
        postgres_url,
        f'INSERT INTO "{pg_schema}".pollers (poller, "partition", state, lease_owner, lease_epoch,'
        " lease_expires_at) VALUES ('orders', %s, %s, 'node-a', 3, %s)",
        partition,
        wkjson.dumps(state_to_fields(empty_poller_state(T0))),
        T0 + TTL,
    )
    for n, identity in enumerate(identities):
        await _query(
            postgres_url,
            f'INSERT INTO "{pg_schema}".items (poller, "partition", identity, version, hash,'
            " schema_version, payload, seen_at, revision) VALUES ('orders', %s, %s, %s, %s, 1,"
            " NULL, 5, %s)",
            partition,
            identity,
            f"v\x01{n}",
            f"h{n}",
            n,
        )
    await _query(
        postgres_url,
        f'INSERT INTO "{pg_schema}".parked (poller, "partition", id, kind, item, error,'
        " attempts, parked_at, hold_key) VALUES ('orders', %s, 'p1', 'invalid', 'null', '{}',"
        " 0, 5, %s)",
        partition,
        "k\x01",
    )
    store = PostgresStore(postgres_url, schema=pg_schema, table_prefix="")
    try:
        await store.migrate()
        key = PKey("orders", partition)
        assert await store.list_keys() == [key]
        rows = await store.load_versions(key, identities)
        assert {i: (r.version, r.revision) for i, r in rows.items()} == {
            i: (f"v\x01{n}", n) for n, i in enumerate(identities)
        }
        assert [i for chunk in await _chunks(store, key) for i in chunk] == sorted(identities)
        assert await store.held_keys(key) == {"k\x01"}
        lease = await store.get_lease(key)
        assert lease is not None
        # And today's writes of a NUL next to them read back as written.
        await store.commit_poll(key, lease, batch(upserts=[item_row("a\x00", hash="h9")]))
        assert sorted(await store.load_versions(key, [*identities, "a\x00"])) == sorted(
            [*identities, "a\x00"]
        )
    finally:
        await store.close()


async def test_a_version_6_schema_keeps_its_rows_and_marks_and_gains_links(
    postgres_url: str, pg_schema: str
) -> None:
    # Yesterday's schema (versions 1 to 6) with rows and seen marks written by yesterday's
    # code; today's store adds the link columns in place and writes links on those rows.
    await _schema_at(postgres_url, pg_schema, 6)
    await _query(
        postgres_url,
        f'INSERT INTO "{pg_schema}".pollers (poller, "partition", state, lease_owner, lease_epoch,'
        " lease_expires_at) VALUES ('orders', '', %s, 'node-a', 3, %s)",
        wkjson.dumps(state_to_fields(empty_poller_state(T0))),
        T0 + TTL,
    )
    for identity, seen in (("a", 7), ("b\x01", 0)):
        await _query(
            postgres_url,
            f'INSERT INTO "{pg_schema}".items (poller, "partition", identity, version, hash,'
            " schema_version, payload, seen_at, revision, seen_pass)"
            " VALUES ('orders', '', %s, 'v1', 'h1', 1, NULL, 5, 2, %s)",
            identity.replace("\x01", "\x01\x02"),
            seen,
        )
    store = PostgresStore(postgres_url, schema=pg_schema, table_prefix="")
    try:
        await store.migrate()
        versions = await _query(
            postgres_url, f'SELECT version, name FROM "{pg_schema}".migrations ORDER BY version'
        )
        assert versions == _SHIPPED
        rows = await store.load_versions(KEY, ["a", "b\x01"])
        assert {i: r.revision for i, r in rows.items()} == {"a": 2, "b\x01": 2}
        assert await store.load_marks(KEY, ["a", "b\x01", "c"]) == {
            "a": ItemMark(7),
            "b\x01": ItemMark(0),
        }
        links = {"a": ListingLink(0, None, "b\x01"), "b\x01": ListingLink(0, "a", "\x00")}
        await store.commit_poll(KEY, Lease("node-a", 3, T0 + TTL), batch(links=links))
        assert await store.load_marks(KEY, ["a", "b\x01"]) == {
            "a": ItemMark(7, links["a"]),
            "b\x01": ItemMark(0, links["b\x01"]),
        }
    finally:
        await store.close()


async def test_links_and_marks_of_thousands_of_rows_round_trip(
    postgres_store: PostgresStore,
) -> None:
    # load_marks reads in statements of up to 1,000 identities; a commit writes every link
    # of a page in one statement, and a read past the bigint range fails before any write.
    store = postgres_store
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    ids = [f"i{n:05d}" for n in range(2500)]
    links = {i: ListingLink(n // 100, ids[n - 1] if n else None, None) for n, i in enumerate(ids)}
    await store.commit_poll(
        KEY,
        lease,
        batch(upserts=[item_row(i) for i in ids], seen=ids[::2], seen_pass=3, links=links),
    )
    marks = await store.load_marks(KEY, [*reversed(ids), "absent", ids[0]])
    assert marks == {i: ItemMark(0 if n % 2 else 3, links[i]) for n, i in enumerate(ids)}
    with pytest.raises(ValueError, match="64 bits"):
        await store.commit_poll(
            KEY, lease, batch(deletes=ids[:1], links={ids[1]: ListingLink(2**63)})
        )
    assert await store.count_items(KEY) == len(ids)
    assert (await store.load_marks(KEY, ids[1:2]))[ids[1]] == ItemMark(0, links[ids[1]])


async def _chunks(store: PostgresStore, key: PKey) -> list[list[str]]:
    return [chunk async for chunk in store.stream_identities(key, 2)]


# --- the due index (migration 2) ---------------------------------------------------------


async def _version_1_schema(url: str, schema: str) -> None:
    """A schema as the store left it before migration 2: version 1 only, and states written
    without a ``wake_at`` field."""
    initial = resources.files("watukuy.stores") / "sql" / "postgres" / "0001_initial.sql"
    ddl = initial.read_text("utf-8").replace("{{schema}}", schema).replace("{{prefix}}", "")
    old = state_to_fields(dataclasses.replace(empty_poller_state(T0), sequence=7))
    del old["wake_at"]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(ddl.encode())
        await conn.execute(
            f'CREATE TABLE "{schema}".migrations (version integer PRIMARY KEY, name text NOT NULL,'
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.execute(f"INSERT INTO \"{schema}\".migrations VALUES (1, 'initial')")
        for partition, owner, epoch in (("", "node-a", 3), ("b", None, 0)):
            await conn.execute(
                f'INSERT INTO "{schema}".pollers (poller, "partition", state, lease_owner,'
                " lease_epoch, lease_expires_at) VALUES ('orders', %s, %s, %s, %s, %s)",
                (partition, wkjson.dumps(old), owner, epoch, T0 + TTL if owner else None),
            )


async def test_a_version_1_schema_is_upgraded_in_place(postgres_url: str, pg_schema: str) -> None:
    await _version_1_schema(postgres_url, pg_schema)
    store = PostgresStore(postgres_url, schema=pg_schema, table_prefix="")
    try:
        await store.migrate()
        versions = await _query(
            postgres_url, f'SELECT version, name FROM "{pg_schema}".migrations ORDER BY version'
        )
        assert versions == _SHIPPED
        # Rows written before the migration have no wake time (nothing is back-filled).
        old = await store.load_state(KEY)
        assert old == dataclasses.replace(empty_poller_state(T0), sequence=7, wake_at=None)
        assert old.wake_at is None
        assert await store.due_keys("orders", T0 + 10**9) == []
        # The old rows join the index as soon as a wake time is written, by any kind of write.
        await store.commit_poll(
            KEY, Lease("node-a", 3, T0 + TTL), batch(state_patch={"wake_at": T0 + 5})
        )
        await store.save_state_unfenced(PKey("orders", "b"), {"wake_at": T0 + 1}, T0)
        assert await store.due_keys("orders", T0 + 10**9) == [("b", T0 + 1), ("", T0 + 5)]
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.sequence, state.wake_at) == (7, T0 + 5)
        await store.migrate()  # already at the latest version: nothing to do
        assert await store.due_keys("orders", T0 + 1) == [("b", T0 + 1)]
        # A key created after the migration is born due.
        assert await store.acquire_lease(PKey("orders", "c"), "node-b", TTL, T0 + 2) is not None
        assert await store.due_keys("orders", T0 + 2) == [("b", T0 + 1), ("c", T0 + 2)]
    finally:
        await store.close()


async def test_the_wake_at_column_mirrors_the_state_document(
    postgres_store: PostgresStore, postgres_url: str, pg_schema: str
) -> None:
    store = postgres_store
    mirror = (
        "SELECT \"partition\", wake_at, (state->>'wake_at')::bigint"
        f' FROM "{pg_schema}".watukuy_pollers ORDER BY "partition"'
    )
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    assert await _query(postgres_url, mirror) == [("", T0, T0)]  # born due
    await store.commit_poll(KEY, lease, batch(state_patch={"wake_at": T0 + 9}))
    await store.save_state_unfenced(PKey("orders", "b"), {"wake_at": T0 + 3}, T0)
    await store.save_state_unfenced(PKey("orders", "c"), {"sequence": 2}, T0 + 4)
    assert await _query(postgres_url, mirror) == [
        ("", T0 + 9, T0 + 9),
        ("b", T0 + 3, T0 + 3),
        ("c", T0 + 4, T0 + 4),
    ]
    await store.save_state(KEY, lease, {"wake_at": None, "paused": True})
    await store.save_state_unfenced(PKey("orders", "b"), {"sequence": 1}, T0)
    await store.save_state_unfenced(PKey("orders", "d"), {"wake_at": None}, T0 + 5)
    assert await _query(postgres_url, mirror) == [
        ("", None, None),
        ("b", T0 + 3, T0 + 3),
        ("c", T0 + 4, T0 + 4),
        ("d", None, None),
    ]


async def test_due_keys_can_be_answered_from_the_index_alone(
    postgres_store: PostgresStore, postgres_url: str, pg_schema: str
) -> None:
    for n in range(50):
        key = PKey("orders", f"p{n:02d}")
        await postgres_store.save_state_unfenced(key, {"wake_at": T0 + n % 7}, T0)
    await postgres_store.save_state_unfenced(PKey("orders", "paused"), {"wake_at": None}, T0)
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute(f'SET search_path = "{pg_schema}"')
        await conn.execute("SET enable_seqscan = off")  # a 51-row table would be scanned
        await conn.execute("ANALYZE watukuy_pollers")
        cur = await conn.execute(
            "EXPLAIN SELECT \"partition\", wake_at FROM watukuy_pollers WHERE poller = 'orders'"
            ' AND wake_at IS NOT NULL AND wake_at <= 1 ORDER BY wake_at, "partition" LIMIT 5'
        )
        plan = "\n".join(row[0] for row in await cur.fetchall())
    assert "Index Only Scan using watukuy_pollers_due_idx" in plan, plan
    assert "Sort" not in plan, plan  # already in (wake_at, partition) order
    due = await postgres_store.due_keys("orders", T0 + 1, limit=9)
    assert due == [(f"p{n:02d}", T0) for n in range(0, 50, 7)] + [("p01", T0 + 1)]


# --- JSON documents -----------------------------------------------------------------------


async def test_nul_characters_survive_in_every_json_document(
    postgres_store: PostgresStore,
) -> None:
    lease = await postgres_store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    nul_error = {"name": "Error", "message": "bad byte \x00 here"}
    patch: StatePatch = {"cursors": {"live": "tok\x00en"}}
    await postgres_store.commit_poll(
        KEY,
        lease,
        batch(
            state_patch=patch,
            upserts=[item_row("a", payload='{"s":"\\u0000"}')],
            events=[outbox_row("e1", 1, event='{"s":"\\u0000"}')],
            parked=[parked_invalid("p1", error=nul_error, item='"\\u0000"')],
            log=True,
        ),
    )
    await postgres_store.record_attempt(KEY, lease, "e1", nul_error, None)
    state = await postgres_store.load_state(KEY)
    assert state is not None
    assert state.cursors == {"live": "tok\x00en"}
    pending = await postgres_store.load_pending(KEY, 10)
    assert (pending[0].event, pending[0].last_error) == ('{"s":"\\u0000"}', nul_error)
    parked = await postgres_store.list_parked(KEY)
    assert (parked[0].error, parked[0].item) == (nul_error, '"\\u0000"')
    assert (await postgres_store.read_log(KEY))[0].event == '{"s":"\\u0000"}'


async def test_payloads_are_stored_as_written(postgres_url: str, pg_schema: str) -> None:
    store = PostgresStore(postgres_url, schema=pg_schema)
    try:
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        text = '{"b": 1.50, "a": 123456789012345678901234567890}'
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("x", payload=text)]))
    finally:
        await store.close()
    rows = await _query(postgres_url, f'SELECT payload::text FROM "{pg_schema}".watukuy_items')
    assert rows == [(text,)]  # not reformatted: json, not jsonb


# --- round trips and failures -------------------------------------------------------------


class _CountingConnection(psycopg.AsyncConnection[Any]):
    """Counts the statements the store sends (injected through the pool)."""

    statements: list[str] = []  # noqa: RUF012 - shared on purpose: the pool makes instances
    queries: list[str] = []  # noqa: RUF012 - the same, whole

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        type(self).statements.append(str(query).split(None, 1)[0])
        type(self).queries.append(str(query))
        return await super().execute(query, params, **kwargs)


async def test_a_commit_costs_the_same_statements_for_any_page_size(
    postgres_url: str, pg_schema: str
) -> None:
    def page(start: int, size: int, delete: str) -> CommitBatch:
        return batch(
            state_patch={"sequence": start + size},
            upserts=[item_row(f"i{n}") for n in range(start, start + size)],
            deletes=[delete],
            events=[outbox_row(f"e{n}", n) for n in range(start, start + size)],
            parked=[parked_invalid(f"p{start}")],
            log=True,
        )

    async with AsyncConnectionPool(
        postgres_url, min_size=1, connection_class=_CountingConnection, kwargs={"autocommit": True}
    ) as pool:
        store = PostgresStore(pool, schema=pg_schema)
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        counts: list[list[str]] = []
        for start, size, delete in ((1, 3, "i0"), (10, 2_000, "i1")):
            _CountingConnection.statements.clear()
            await store.commit_poll(KEY, lease, page(start, size, delete))
            counts.append(list(_CountingConnection.statements))
    # The lock, then one statement per table: items, deletes (each moving its rows to the
    # tombstones), outbox, log, parked, state.
    expected = ["SELECT", "INSERT", "WITH", "INSERT", "INSERT", "INSERT", "UPDATE"]
    assert counts == [expected, expected]
    assert await _query(postgres_url, f'SELECT count(*) FROM "{pg_schema}".watukuy_items') == [
        (3 + 2_000 - 1,)
    ]


async def test_a_page_naming_a_pending_event_id_is_written_again_with_upserts(
    postgres_url: str, pg_schema: str
) -> None:
    """New events go in with a plain insert; one whose id is still pending makes that
    transaction fail on the primary key, and the page is written once more, whole."""
    async with AsyncConnectionPool(
        postgres_url, min_size=1, connection_class=_CountingConnection, kwargs={"autocommit": True}
    ) as pool:
        store = PostgresStore(pool, schema=pg_schema)
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        first = batch(
            state_patch={"sequence": 2},
            upserts=[item_row("i1")],
            events=[outbox_row("e1", 1, created_at=T0), outbox_row("e2", 2, created_at=T0)],
        )
        _CountingConnection.statements.clear()
        await store.commit_poll(KEY, lease, first)
        # The lock, items, outbox (new events of one creation time: the plain insert), state.
        assert _CountingConnection.statements == ["SELECT", "INSERT", "INSERT", "UPDATE"]
        _CountingConnection.statements.clear()
        again = outbox_row("e1", 4, created_at=T0 + 50)
        second = batch(
            state_patch={"sequence": 4},
            upserts=[item_row("i2")],
            events=[outbox_row("e3", 3, created_at=T0 + 50), again],
            now=T0 + 50,
        )
        await store.commit_poll(KEY, lease, second)
        # The lock, items, outbox, state: twice, the first time rolled back.
        assert _CountingConnection.statements == ["SELECT", "INSERT", "INSERT", "UPDATE"] * 2
        assert await store.load_pending(KEY, 10) == [
            outbox_row("e2", 2, created_at=T0),
            outbox_row("e3", 3, created_at=T0 + 50),
            again,
        ]
        assert await store.count_items(KEY) == 2
        state = await store.load_state(KEY)
        assert state is not None
        assert state.sequence == 4


async def test_new_snapshot_rows_are_inserted_and_a_stored_one_turns_the_key_to_upserts(
    postgres_url: str, pg_schema: str
) -> None:
    """Rows at revision 0 go in with a plain insert; one that is stored already makes that
    transaction fail on the primary key, the page is written once more with the upsert, and
    so are the key's pages after it."""
    async with AsyncConnectionPool(
        postgres_url, min_size=1, connection_class=_CountingConnection, kwargs={"autocommit": True}
    ) as pool:
        store = PostgresStore(pool, schema=pg_schema)
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        writes: list[list[str]] = []
        upserted: list[bool] = []
        pages = [
            [item_row("i1"), item_row("i2")],
            [item_row("i3"), item_row("i1", hash="h-moved", seen_at=T0 + 5)],
            [item_row("i4")],
        ]
        for n, rows in enumerate(pages):
            _CountingConnection.statements.clear()
            _CountingConnection.queries.clear()
            await store.commit_poll(KEY, lease, batch(state_patch={"sequence": n}, upserts=rows))
            writes.append(list(_CountingConnection.statements))
            upserted.append("ON CONFLICT" in _CountingConnection.queries[-2])
        sql = await _query(
            postgres_url,
            f'SELECT identity, hash, seen_at FROM "{pg_schema}".watukuy_items ORDER BY identity',
        )
    one = ["SELECT", "INSERT", "UPDATE"]
    assert writes == [one, one * 2, one]
    assert upserted == [False, True, True]
    assert sql == [
        ("i1", "h-moved", T0 + 5),
        ("i2", "hash-i2", T0),
        ("i3", "hash-i3", T0),
        ("i4", "hash-i4", T0),
    ]


async def test_a_commit_that_knows_the_state_is_one_round_trip_and_sees_an_operator(
    postgres_url: str, pg_schema: str
) -> None:
    """After its first commit the store sends a commit whole (the fence compares the stored
    state with the one it wrote); a state an operator changed meanwhile is read again
    under the lock, and the operator's pause holds."""
    async with AsyncConnectionPool(
        postgres_url, min_size=1, connection_class=_CountingConnection, kwargs={"autocommit": True}
    ) as pool:
        store = PostgresStore(pool, schema=pg_schema)
        await store.migrate()
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        sent: list[list[str]] = []
        for n in range(2):
            _CountingConnection.queries.clear()
            await store.commit_poll(KEY, lease, batch(state_patch={"sequence": n + 1}))
            sent.append([q.split("(", 1)[0].split()[-1] for q in _CountingConnection.queries])
        operator = PostgresStore(postgres_url, schema=pg_schema)
        try:
            await operator.save_state_unfenced(KEY, {"paused": True}, T0 + 1)
        finally:
            await operator.close()
        _CountingConnection.queries.clear()
        await store.commit_poll(KEY, lease, batch(state_patch={"sequence": 3, "wake_at": T0 + 99}))
        sent.append([q.split("(", 1)[0].split()[-1] for q in _CountingConnection.queries])
        state = await store.load_state(KEY)
    assert state is not None
    assert (state.paused, state.sequence, state.wake_at) == (True, 3, None)
    lock = store._q["lock"].split("(", 1)[0].split()[-1]
    fence = f'"{pg_schema}"."watukuy_fence_state"'
    assert [q[0] for q in sent] == [lock, fence, fence]
    # The third commit met the operator's write and read the state again.
    assert sent[2][-2] == lock


async def test_a_connection_killed_mid_commit_writes_nothing(
    postgres_url: str, pg_schema: str
) -> None:
    app = f"wk-kill-{pg_schema}"
    store = PostgresStore(make_conninfo(postgres_url, application_name=app), schema=pg_schema)
    blocker = await psycopg.AsyncConnection.connect(postgres_url)
    try:
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        # Another transaction inserts the parked row the commit will also write, and keeps
        # it uncommitted: the commit's items, outbox and log rows are in, and it waits.
        await blocker.execute(
            f'INSERT INTO "{pg_schema}".watukuy_parked (poller, "partition", id, kind, error,'
            " attempts, parked_at) VALUES (%s, %s, 'p1', 'invalid', '{}', 0, 0)",
            (KEY.poller, KEY.partition),
        )
        doomed = batch(
            state_patch={"sequence": 2, "cursors": {"live": '"c2"'}},
            upserts=[item_row("a"), item_row("b")],
            events=[outbox_row("e1", 1), outbox_row("e2", 2)],
            parked=[parked_invalid("p1")],
            log=True,
        )
        commit = asyncio.create_task(store.commit_poll(KEY, lease, doomed))
        killed: list[tuple[Any, ...]] = []
        give_up = time.monotonic() + 60  # the commit blocks within ms; generous under load
        while time.monotonic() < give_up:
            killed = await _query(
                postgres_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                app,
            )
            if killed or commit.done():
                break
        assert killed == [(True,)], "the commit never blocked on the parked row"
        with pytest.raises(StoreError, match=r"^commit_poll: ") as info:
            await commit
        assert isinstance(info.value.__cause__, psycopg.OperationalError)
        await blocker.rollback()
        s = f'"{pg_schema}"'
        for table in ("items", "outbox", "log", "parked"):
            assert await _query(postgres_url, f"SELECT count(*) FROM {s}.watukuy_{table}") == [
                (0,)
            ], table
        state = await store.load_state(KEY)  # the pool replaced the killed connection
        assert state is not None
        assert (state.sequence, dict(state.cursors)) == (0, {})
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("after")]))
        assert await store.count_items(KEY) == 1
    finally:
        await blocker.close()
        await store.close()


async def test_stream_identities_sees_rows_written_after_its_position(
    postgres_store: PostgresStore,
) -> None:
    lease = await postgres_store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    await postgres_store.commit_poll(KEY, lease, batch(upserts=[item_row("b"), item_row("d")]))
    seen: list[list[str]] = []
    async for chunk in postgres_store.stream_identities(KEY, 1):
        seen.append(chunk)
        if chunk == ["b"]:
            await postgres_store.commit_poll(
                KEY, lease, batch(upserts=[item_row("a"), item_row("c")])
            )
    assert seen == [["b"], ["c"], ["d"]]  # keyset paging: "a" sorts before the position


async def test_partitions_keep_their_own_rows(postgres_store: PostgresStore) -> None:
    other = PKey(KEY.poller, "tenant:x")
    for key in (KEY, other):
        lease = await postgres_store.acquire_lease(key, "node-a", TTL, T0)
        assert lease is not None
        await postgres_store.commit_poll(key, lease, batch(upserts=[item_row(str(key))]))
    assert await postgres_store.load_versions(other, [str(KEY), str(other)]) == {
        str(other): item_row(str(other))
    }


async def test_a_call_cancelled_half_way_never_leaves_a_transaction_behind(
    postgres_store: PostgresStore,
) -> None:
    """A task cancelled in the middle of a fenced write used to hand its connection back
    to the pool inside an open transaction; the next borrower then ran (and held row
    locks) inside it, and a later commit waited forever. Found by the chaos harness."""
    key = PKey("orders")

    async def one_round(attempt: int) -> None:
        now = attempt * 100_000
        lease = await postgres_store.acquire_lease(key, "a", 10_000, now)
        assert lease is not None
        await postgres_store.commit_poll(
            key,
            lease,
            CommitBatch(
                state_patch={"sequence": attempt + 1},
                events=[OutboxRow(f"e{attempt}", attempt + 1, "{}")],
            ),
        )
        ack = asyncio.ensure_future(postgres_store.ack_events(key, lease, [f"e{attempt}"]))
        for _ in range(attempt % 8):
            await asyncio.sleep(0)
        ack.cancel()
        await asyncio.gather(ack, return_exceptions=True)
        await postgres_store.release_lease(key, lease)
        other = await postgres_store.acquire_lease(key, "b", 10_000, now + 50_000)
        assert other is not None
        await postgres_store.ack_events(key, other, [f"e{attempt}"])
        await postgres_store.release_lease(key, other)

    async def rounds() -> None:
        for attempt in range(24):
            await one_round(attempt)

    await asyncio.wait_for(rounds(), timeout=60)
    assert await postgres_store.count_pending(key) == 0


class _HeldStore(PostgresStore):
    """Holds the first fenced write between its row lock and its write until ``go`` is set
    (a store that never wrote the key's state reads it under the lock first)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inside = asyncio.Event()
        self.go = asyncio.Event()
        self._held = False

    async def _run(
        self,
        conn: psycopg.AsyncConnection[Any],
        key: PKey,
        statements: Any,
    ) -> None:
        if not self._held:
            self._held = True
            self.inside.set()
            await self.go.wait()
        await super()._run(conn, key, statements)


async def _waits_for_a_row_lock(postgres_url: str, schema: str) -> bool:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND position(%s in query) > 0",
            (f'"{schema}".',),
        )
        row = await cur.fetchone()
        return row is not None and row[0] > 0


async def test_two_fenced_writes_on_one_key_serialise_on_its_row(
    postgres_url: str, pg_schema: str
) -> None:
    # A fenced write reads the key's state under the row lock and writes it back patched.
    # A second write on another connection, started while the first one sits between its
    # lock and its write, must wait for it; otherwise it reads the old state, and one of
    # the two patches is lost.
    store = _HeldStore(postgres_url, schema=pg_schema)
    await store.migrate()
    try:
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease is not None
        first = asyncio.create_task(store.save_state(KEY, lease, {"paused": True}))
        await store.inside.wait()
        second = asyncio.create_task(store.save_state(KEY, lease, {"sequence": 7}))
        # Until the second write either finished or is seen waiting for a lock.
        while not second.done() and not await _waits_for_a_row_lock(postgres_url, pg_schema):
            await asyncio.sleep(0.01)
        store.go.set()
        await asyncio.gather(first, second)
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.paused, state.sequence) == (True, 7), "a concurrent fenced write was lost"
    finally:
        await store.close()


def _scanned(plan: dict[str, Any], table: str) -> int:
    """Rows the plan read from ``table`` (every scan node on it, all loops counted)."""
    total = 0
    if plan.get("Relation Name") == table and "Scan" in plan["Node Type"]:
        total += plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
        total += plan.get("Rows Removed by Filter", 0) * plan.get("Actual Loops", 1)
    for child in plan.get("Plans", []):
        total += _scanned(child, table)
    return total


@pytest.mark.parametrize(
    ("query", "table", "params"),
    [
        ("load_versions", "watukuy_items", lambda ids: (*_k_of(), ids)),
        ("mark_items", "watukuy_items", lambda ids: (*_k_of(), 7, ids)),
        ("delete_items", "watukuy_items", lambda ids: (*_k_of(), ids, T0)),
    ],
)
async def test_lookups_by_a_list_of_keys_probe_the_index_without_table_statistics(
    postgres_url: str, pg_schema: str, query: str, table: str, params: Any
) -> None:
    # A fresh store whose tables were never analysed: the planner has only its defaults,
    # and "key = ANY(list)" then scanned every row of the key and filtered (a first sync
    # of 100,000 items took 80 s instead of 6). Each statement reads only the listed rows.
    store = PostgresStore(postgres_url, schema=pg_schema)
    await store.migrate()
    await store.close()
    rows = 20_000
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        for name in ("watukuy_items", "watukuy_tombstones"):
            await conn.execute(f'ALTER TABLE "{pg_schema}".{name} SET (autovacuum_enabled = false)')
        poller, part = _k_of()
        await conn.execute(
            f'INSERT INTO "{pg_schema}".watukuy_items (poller, "partition", identity, hash,'
            " schema_version, seen_at) SELECT %s, %s, 'i' || n, 'h', 1, 0"
            " FROM generate_series(1, %s) AS n",
            (poller, part, rows),
        )
        stats = await conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace"
            " WHERE s.nspname = %s AND c.relname = %s AND c.reltuples >= 0",
            (pg_schema, table),
        )
        assert await stats.fetchone() == (0,)  # never analysed
        wanted = [f"i{n}" for n in range(5_000, 5_200)]
        sql = store._q[query]
        async with conn.transaction(force_rollback=True):
            cur = await conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params(wanted))
            row = await cur.fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    # Each listed row once (by its probe) and, for a write, once more by its ctid.
    assert _scanned(plan, table) <= 2 * len(wanted), json.dumps(plan, indent=1)


async def test_an_ack_probes_the_primary_key_without_table_statistics(
    postgres_url: str, pg_schema: str
) -> None:
    # "event_id = ANY(list)" on a table never analysed read every index entry of the key
    # (the pending index's, or the primary key's on its two leading columns) and filtered:
    # with the rows of earlier acks still in the index, each ack of a sync cost more than
    # the one before it. The ack reads only the rows it deletes.
    store = PostgresStore(postgres_url, schema=pg_schema)
    await store.migrate()
    await store.close()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        outbox = f'"{pg_schema}".watukuy_outbox'
        await conn.execute(f"ALTER TABLE {outbox} SET (autovacuum_enabled = false)")
        poller, part = _k_of()
        await conn.execute(
            f'INSERT INTO {outbox} (poller, "partition", event_id, seq, event, created_at)'
            " SELECT %s, %s, 'e' || n, n, '{}', 0 FROM generate_series(1, 20000) AS n",
            (poller, part),
        )
        # Delivered and acked already: dead rows, still in every index.
        await conn.execute(f"DELETE FROM {outbox} WHERE seq <= 15000")
        wanted = [f"e{n}" for n in range(18_000, 18_200)]
        async with conn.transaction(force_rollback=True):
            cur = await conn.execute(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {store._q['ack']}", (poller, part, wanted)
            )
            row = await cur.fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    assert _scanned(plan, "watukuy_outbox") <= 2 * len(wanted), json.dumps(plan, indent=1)


def _k_of() -> tuple[str, str]:
    from watukuy.stores.postgres import _k

    return _k(KEY)
