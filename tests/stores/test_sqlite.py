"""SqliteStore: the contract suite on a file and in memory, then what only SQLite has."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError, LeaseLostError, StoreError
from watukuy.model.ports import StateStore
from watukuy.model.rows import (
    ItemMark,
    Lease,
    ListingLink,
    ListingState,
    PKey,
    empty_poller_state,
    state_to_fields,
)
from watukuy.stores import MemoryStore, store_from_url
from watukuy.stores.sqlite import SCHEMA_VERSION, SqliteStore, sqlite_migrations
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

# (version,) of every migration file in the package, in order.
_SHIPPED = [(version,) for version, _ in sqlite_migrations()]


class TestSqliteFileContract(StoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[StateStore]:
        store = SqliteStore(tmp_path / "watukuy.db")
        await store.migrate()
        yield store
        await store.close()


class TestSqliteMemoryContract(StoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[StateStore]:
        store = SqliteStore(":memory:", table_prefix="")
        await store.migrate()
        yield store
        await store.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "watukuy.db"


@pytest.fixture
def raw(db: Path) -> Iterator[sqlite3.Connection]:
    """A second, plain connection to the same file, as another process would hold."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=0)
    yield conn
    conn.close()


async def _lease(store: SqliteStore, key: PKey = KEY) -> Lease:
    lease = await store.acquire_lease(key, "node-a", TTL, T0)
    assert lease is not None
    return lease


# --- configuration and lifecycle ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": ""}, "path: expected a file path or ':memory:', got ''"),
        ({"path": "x.db", "table_prefix": "bad-prefix"}, "table_prefix: expected letters"),
        ({"path": "x.db", "table_prefix": "1st_"}, "got '1st_'"),
        ({"path": "x.db", "table_prefix": 'x"y'}, "table_prefix:"),
        ({"path": "x.db", "busy_timeout": "soon"}, "busy_timeout: expected a duration"),
        ({"path": "x.db", "busy_timeout": -1}, "busy_timeout: expected a non-negative"),
    ],
)
def test_bad_configuration_names_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        SqliteStore(**kwargs)  # type: ignore[arg-type]


async def test_the_constructor_does_no_io(db: Path) -> None:
    store = SqliteStore(db)
    assert not db.exists()  # noqa: ASYNC240
    assert await store.list_keys() == []
    assert db.exists()  # noqa: ASYNC240
    await store.close()


async def test_close_is_idempotent_and_a_closed_store_reopens(db: Path) -> None:
    store = SqliteStore(db)
    await store.close()
    await store.save_state_unfenced(KEY, {"sequence": 3}, T0)
    await store.close()
    await store.close()
    state = await store.load_state(KEY)
    assert state is not None
    assert state.sequence == 3
    await store.close()


async def test_data_survives_a_new_store_on_the_same_file(db: Path) -> None:
    first = SqliteStore(db)
    lease = await _lease(first)
    await first.commit_poll(KEY, lease, batch(upserts=[item_row("a")], events=[outbox_row("e", 1)]))
    await first.close()
    second = SqliteStore(db)
    assert await second.load_versions(KEY, ["a"]) == {"a": item_row("a")}
    assert await second.get_lease(KEY) == lease
    await second.close()


async def test_a_memory_database_is_private_and_gone_after_close() -> None:
    one, two = SqliteStore(":memory:"), SqliteStore(":memory:")
    await one.save_state_unfenced(KEY, {}, T0)
    assert await one.list_keys() == [KEY]
    assert await two.list_keys() == []
    await one.close()
    assert await one.list_keys() == []
    await one.close()
    await two.close()


async def test_wal_mode_and_the_schema_version_are_on_disk(
    db: Path, raw: sqlite3.Connection
) -> None:
    store = SqliteStore(db, table_prefix="wk_")
    await store.migrate()
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert raw.execute('SELECT version FROM "wk_migrations"').fetchall() == _SHIPPED
    tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    expected = {"pollers", "items", "outbox", "parked", "validators", "log", "migrations"}
    expected |= {"epoch_floors", "tombstones"}
    assert tables == {f"wk_{name}" for name in expected}
    await store.close()


async def test_migrations_ship_as_versioned_files() -> None:
    [(first, initial), (second, due_index), *later] = sqlite_migrations("p_")
    # A store at SCHEMA_VERSION reads no migration file: it must be the newest one.
    assert sqlite_migrations()[-1][0] == SCHEMA_VERSION
    assert [first, second, *(version for version, _ in later)] == list(range(1, 3 + len(later)))
    assert 'CREATE TABLE IF NOT EXISTS "p_pollers"' in initial
    assert 'ALTER TABLE "p_pollers" ADD COLUMN wake_at INTEGER;' in due_index
    scripts = dict(later)
    assert 'CREATE TABLE IF NOT EXISTS "p_tombstones"' in scripts[4]
    assert "{prefix}" not in initial + due_index + "".join(scripts.values())
    seen_marks = dict(later)[5]
    assert 'ALTER TABLE "p_items" ADD COLUMN seen_pass' in seen_marks
    assert "{prefix}" not in initial + due_index + seen_marks
    with pytest.raises(ConfigError, match="table_prefix"):
        sqlite_migrations("p-")


async def test_two_prefixes_share_a_file_without_seeing_each_other(db: Path) -> None:
    left, right = SqliteStore(db, table_prefix="left_"), SqliteStore(db, table_prefix="right_")
    await left.save_state_unfenced(KEY, {}, T0)
    assert await left.list_keys() == [KEY]
    assert await right.list_keys() == []
    await left.close()
    await right.close()


async def test_concurrent_migrations_on_one_file_all_succeed(db: Path) -> None:
    stores = [SqliteStore(db) for _ in range(4)]
    await asyncio.gather(*(store.migrate() for store in stores))
    await asyncio.gather(*(store.migrate() for store in stores))
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version FROM watukuy_migrations").fetchall() == _SHIPPED
    conn.close()
    for store in stores:
        await store.close()


# --- the due index (migration 2) -----------------------------------------------------------


def _version_1_database(path: Path) -> None:
    """A database as the store left it before migration 2: version 1 only, and states
    written without a ``wake_at`` field."""
    [(_, initial), *_] = sqlite_migrations()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(initial)
    conn.execute(
        "CREATE TABLE watukuy_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT "
        "NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000))"
    )
    conn.execute("INSERT INTO watukuy_migrations (version) VALUES (1)")
    old = state_to_fields(dataclasses.replace(empty_poller_state(T0), sequence=7))
    del old["wake_at"]
    conn.executemany(
        'INSERT INTO watukuy_pollers (poller, "partition", state, lease_owner, lease_epoch, '
        "lease_expires_at) VALUES (?, ?, ?, ?, ?, ?)",
        [
            ("orders", "", wkjson.dumps(old), "node-a", 3, T0 + TTL),
            ("orders", "b", wkjson.dumps(old), None, 0, None),
        ],
    )
    conn.close()


async def test_a_version_1_database_is_upgraded_in_place(db: Path, raw: sqlite3.Connection) -> None:
    _version_1_database(db)
    store = SqliteStore(db)
    await store.migrate()
    assert raw.execute("SELECT version FROM watukuy_migrations").fetchall() == _SHIPPED
    assert raw.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'watukuy_pollers'"
    ).fetchall() == [("watukuy_pollers_due_idx",)]
    # Rows written before the migration have no wake time (nothing is back-filled).
    old = await store.load_state(KEY)
    assert old == dataclasses.replace(empty_poller_state(T0), sequence=7, wake_at=None)
    assert old.wake_at is None
    assert await store.due_keys("orders", T0 + 10**9) == []
    # The old rows join the index as soon as a wake time is written, by any kind of write.
    lease = Lease("node-a", 3, T0 + TTL)
    await store.commit_poll(KEY, lease, batch(state_patch={"wake_at": T0 + 5}))
    await store.save_state_unfenced(PKey("orders", "b"), {"wake_at": T0 + 1}, T0)
    assert await store.due_keys("orders", T0 + 10**9) == [("b", T0 + 1), ("", T0 + 5)]
    state = await store.load_state(KEY)
    assert state is not None
    assert (state.sequence, state.wake_at) == (7, T0 + 5)
    await store.close()
    again = SqliteStore(db)
    await again.migrate()  # already at the latest version: nothing to do
    assert await again.due_keys("orders", T0 + 1) == [("b", T0 + 1)]
    # A key created after the migration is born due.
    assert await again.acquire_lease(PKey("orders", "c"), "node-b", TTL, T0 + 2) is not None
    assert await again.due_keys("orders", T0 + 2) == [("b", T0 + 1), ("c", T0 + 2)]
    await again.close()


async def test_a_version_2_snapshot_keeps_its_rows_and_gains_revisions(
    db: Path, raw: sqlite3.Connection
) -> None:
    # Yesterday's schema (versions 1 and 2) with a snapshot row written by yesterday's code.
    _version_1_database(db)
    [_, (_, due_index), *_] = sqlite_migrations()
    raw.executescript(due_index)
    raw.execute("INSERT INTO watukuy_migrations (version) VALUES (2)")
    raw.execute(
        'INSERT INTO watukuy_items (poller, "partition", identity, version, hash, '
        "schema_version, payload, seen_at) VALUES ('orders', '', 'a', 'v1', 'h1', 1, NULL, 5)"
    )
    store = SqliteStore(db)
    await store.migrate()
    assert raw.execute("SELECT MAX(version) FROM watukuy_migrations").fetchone() == _SHIPPED[-1]
    # The old row reads back as revision 0, the revision of an item's first event.
    rows = await store.load_versions(KEY, ["a"])
    assert rows["a"].revision == 0
    assert (rows["a"].version, rows["a"].hash, rows["a"].seen_at) == ("v1", "h1", 5)
    # Today's writes on it: a delete leaves a tombstone, a re-creation drops it again.
    lease = Lease("node-a", 3, T0 + TTL)
    await store.commit_poll(KEY, lease, batch(deletes=["a"], now=T0))
    tombstones = await store.load_tombstones(KEY, ["a"])
    assert (tombstones["a"].reason, tombstones["a"].revision) == ("deleted", 0)
    assert tombstones["a"].removed_at == T0


# --- seen marks (migration 5) ----------------------------------------------------------------


async def test_a_version_2_database_keeps_its_items_and_starts_them_unseen(
    db: Path, raw: sqlite3.Connection
) -> None:
    [(_, initial), (_, due_index), *_] = sqlite_migrations()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executescript(initial)
    conn.executescript(due_index)
    conn.execute(
        "CREATE TABLE watukuy_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT "
        "NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000))"
    )
    conn.execute("INSERT INTO watukuy_migrations (version) VALUES (1), (2)")
    old = state_to_fields(dataclasses.replace(empty_poller_state(T0), sequence=3))
    del old["listing"], old["held_deletes"]  # fields written since
    conn.execute(
        'INSERT INTO watukuy_pollers (poller, "partition", state, wake_at, lease_owner, '
        "lease_epoch, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("orders", "", wkjson.dumps(old), T0, "node-a", 1, T0 + TTL),
    )
    conn.executemany(
        'INSERT INTO watukuy_items (poller, "partition", identity, version, hash, '
        "schema_version, payload, seen_at) VALUES ('orders', '', ?, NULL, ?, 1, NULL, ?)",
        [("a", "h-a", T0), ("b", "h-b", T0)],
    )
    conn.close()
    store = SqliteStore(db)
    await store.migrate()
    assert raw.execute("SELECT max(version) FROM watukuy_migrations").fetchone() == _SHIPPED[-1]
    state = await store.load_state(KEY)
    assert state is not None
    assert (state.sequence, state.listing, state.held_deletes) == (3, ListingState(), None)
    assert sorted(await store.load_versions(KEY, ["a", "b"])) == ["a", "b"]
    assert [i async for chunk in store.stream_unseen(KEY, 1) for i in chunk] == ["a", "b"]
    lease = Lease("node-a", 1, T0 + TTL)
    await store.commit_poll(KEY, lease, batch(seen=["b"], seen_pass=1))
    assert [i async for chunk in store.stream_unseen(KEY, 1) for i in chunk] == ["a"]
    await store.close()


# --- listing links (migration 6) ------------------------------------------------------------


async def test_a_version_5_database_keeps_its_rows_and_marks_and_gains_links(
    db: Path, raw: sqlite3.Connection
) -> None:
    # Yesterday's schema (versions 1 to 5), with rows and seen marks written by yesterday's
    # code; today's store upgrades it in place and writes links on those rows.
    yesterday = [(v, script) for v, script in sqlite_migrations() if v <= 5]
    assert [v for v, _ in yesterday] == [1, 2, 3, 4, 5]
    raw.execute(
        "CREATE TABLE watukuy_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT "
        "NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000))"
    )
    for version, script in yesterday:
        raw.executescript(script)
        raw.execute("INSERT INTO watukuy_migrations (version) VALUES (?)", (version,))
    raw.execute(
        'INSERT INTO watukuy_pollers (poller, "partition", state, wake_at, lease_owner, '
        "lease_epoch, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            "orders",
            "",
            wkjson.dumps(state_to_fields(empty_poller_state(T0))),
            T0,
            "node-a",
            1,
            T0 + TTL,
        ),
    )
    raw.executemany(
        'INSERT INTO watukuy_items (poller, "partition", identity, version, hash, '
        "schema_version, payload, seen_at, revision, seen_pass) "
        "VALUES ('orders', '', ?, 'v', ?, 1, NULL, ?, 2, ?)",
        [("a", "h-a", T0, 7), ("b", "h-b", T0, 0)],
    )
    store = SqliteStore(db)
    await store.migrate()
    assert raw.execute("SELECT version FROM watukuy_migrations").fetchall() == _SHIPPED
    columns = {row[1] for row in raw.execute("PRAGMA table_info(watukuy_items)")}
    assert {"link_read", "link_prev", "link_next"} <= columns
    rows = await store.load_versions(KEY, ["a", "b"])
    assert {i: (r.hash, r.revision) for i, r in rows.items()} == {"a": ("h-a", 2), "b": ("h-b", 2)}
    # Old rows keep their marks and have no link until a commit writes one.
    assert await store.load_marks(KEY, ["a", "b"]) == {"a": ItemMark(7), "b": ItemMark(0)}
    lease = Lease("node-a", 1, T0 + TTL)
    await store.commit_poll(KEY, lease, batch(links={"b": ListingLink(2, "a", None)}))
    assert await store.load_marks(KEY, ["a", "b"]) == {
        "a": ItemMark(7),
        "b": ItemMark(0, ListingLink(2, "a", None)),
    }
    await store.close()


async def test_the_wake_at_column_mirrors_the_state_document(
    db: Path, raw: sqlite3.Connection
) -> None:
    store = SqliteStore(db)
    lease = await _lease(store)
    mirror = (
        "SELECT \"partition\", wake_at, json_extract(state, '$.wake_at') FROM watukuy_pollers "
        'ORDER BY "partition"'
    )
    assert raw.execute(mirror).fetchall() == [("", T0, T0)]  # born due
    await store.commit_poll(KEY, lease, batch(state_patch={"wake_at": T0 + 9}))
    await store.save_state_unfenced(PKey("orders", "b"), {"wake_at": T0 + 3}, T0)
    await store.save_state_unfenced(PKey("orders", "c"), {"sequence": 2}, T0 + 4)
    assert raw.execute(mirror).fetchall() == [
        ("", T0 + 9, T0 + 9),
        ("b", T0 + 3, T0 + 3),
        ("c", T0 + 4, T0 + 4),
    ]
    await store.save_state(KEY, lease, {"wake_at": None, "paused": True})
    await store.save_state_unfenced(PKey("orders", "b"), {"sequence": 1}, T0)
    await store.save_state_unfenced(PKey("orders", "d"), {"wake_at": None}, T0 + 5)
    assert raw.execute(mirror).fetchall() == [
        ("", None, None),
        ("b", T0 + 3, T0 + 3),
        ("c", T0 + 4, T0 + 4),
        ("d", None, None),
    ]
    await store.close()


async def test_due_keys_is_answered_from_the_index_alone(db: Path, raw: sqlite3.Connection) -> None:
    store = SqliteStore(db)
    await store.migrate()
    plan = raw.execute(
        "EXPLAIN QUERY PLAN " + store._sql.due,  # the store's own statement
        ("orders", T0, 10),
    ).fetchall()
    details = " | ".join(row[-1] for row in plan)
    assert "USING COVERING INDEX watukuy_pollers_due_idx (poller=? AND wake_at" in details
    assert "TEMP B-TREE" not in details  # already in (wake_at, partition) order
    await store.close()


# --- the snapshot and its tombstones as rowid tables (migration 7) ----------------------------

_ITEM_ROW = (
    'SELECT poller, "partition", identity, version, hash, schema_version, payload, seen_at, '
    "revision, seen_pass, link_read, link_prev, link_next FROM watukuy_items "
    'ORDER BY poller, "partition", identity'
)
_TOMBSTONE_ROW = (
    'SELECT poller, "partition", identity, version, hash, schema_version, revision, reason, '
    'removed_at FROM watukuy_tombstones ORDER BY poller, "partition", identity'
)
_LAYOUT = (
    "SELECT type, name, sql FROM sqlite_master WHERE tbl_name IN ('watukuy_items', "
    "'watukuy_tombstones') ORDER BY name"
)


def _version_6_database(conn: sqlite3.Connection) -> None:
    """Versions 1 to 6 applied, as the store left a database before migration 7."""
    conn.execute(
        "CREATE TABLE watukuy_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT "
        "NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000))"
    )
    for version, script in sqlite_migrations():
        if version <= 6:
            conn.executescript(script)
            conn.execute("INSERT INTO watukuy_migrations (version) VALUES (?)", (version,))


async def test_a_version_6_snapshot_keeps_every_row_in_rowid_tables(
    db: Path, raw: sqlite3.Connection, tmp_path: Path
) -> None:
    _version_6_database(raw)
    assert all("WITHOUT ROWID" in sql for kind, _, sql in raw.execute(_LAYOUT) if kind == "table")
    raw.execute(
        'INSERT INTO watukuy_pollers (poller, "partition", state, wake_at, lease_owner, '
        "lease_epoch, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            "orders",
            "",
            wkjson.dumps(state_to_fields(empty_poller_state(T0))),
            T0,
            "node-a",
            1,
            T0 + TTL,
        ),
    )
    # Every column written, NULLs included, in two keys, ids out of order.
    raw.executemany(
        'INSERT INTO watukuy_items (poller, "partition", identity, version, hash, '
        "schema_version, payload, seen_at, revision, seen_pass, link_read, link_prev, link_next) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            ("orders", "", "c", "v3", "h-c", 2, '{"id":"c"}', T0 + 3, 4, 7, 2, "b", None),
            ("orders", "", "a", None, "h-a", 1, None, T0, 0, 0, None, None, None),
            ("orders", "", "b", "v2", "h-b", 1, "x" * 9000, T0 + 1, 1, 7, 2, "a", "c"),
            ("orders", "eu", "a", "v1", "h-eu", 1, None, T0 + 2, 0, 3, 1, None, None),
        ],
    )
    raw.executemany(
        'INSERT INTO watukuy_tombstones (poller, "partition", identity, version, hash, '
        "schema_version, revision, reason, removed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            ("orders", "", "z", "v9", "h-z", 1, 3, "deleted", T0 - 5),
            ("orders", "", "y", None, "h-y", 2, 0, "cleared", T0 - 9),
        ],
    )
    before = raw.execute(_ITEM_ROW).fetchall(), raw.execute(_TOMBSTONE_ROW).fetchall()
    store = SqliteStore(db)
    await store.migrate()
    assert raw.execute("SELECT version FROM watukuy_migrations").fetchall() == _SHIPPED
    assert (raw.execute(_ITEM_ROW).fetchall(), raw.execute(_TOMBSTONE_ROW).fetchall()) == before
    # The new layout: rowid tables, a unique index on each key, nothing left over.
    layout = raw.execute(_LAYOUT).fetchall()
    assert [(kind, name) for kind, name, _ in layout] == [
        ("table", "watukuy_items"),
        ("index", "watukuy_items_key_idx"),
        ("table", "watukuy_tombstones"),
        ("index", "watukuy_tombstones_age_idx"),
        ("index", "watukuy_tombstones_key_idx"),
    ]
    assert not any("WITHOUT ROWID" in sql for _, _, sql in layout)
    assert raw.execute("PRAGMA index_list(watukuy_items)").fetchall() == [
        (0, "watukuy_items_key_idx", 1, "c", 0)
    ]
    tombstone_indexes = raw.execute("PRAGMA index_list(watukuy_tombstones)").fetchall()
    assert {(name, unique) for _, name, unique, _, _ in tombstone_indexes} == {
        ("watukuy_tombstones_key_idx", 1),
        ("watukuy_tombstones_age_idx", 0),
    }
    for index in ("watukuy_items_key_idx", "watukuy_tombstones_key_idx"):
        key_columns = raw.execute(f"PRAGMA index_info({index})").fetchall()
        assert [column for _, _, column in key_columns] == ["poller", "partition", "identity"]
    tables = raw.execute("SELECT name FROM sqlite_master WHERE name LIKE '%rebuilt%'").fetchall()
    assert tables == []
    # A fresh database ends in exactly the same layout.
    fresh = SqliteStore(tmp_path / "fresh.db")
    await fresh.migrate()
    await fresh.close()
    other = sqlite3.connect(tmp_path / "fresh.db")
    assert other.execute(_LAYOUT).fetchall() == layout
    other.close()
    # Today's writes on the old rows: the upsert meets its conflict in the index, the marks
    # and links stay, a delete leaves its tombstone, a re-created identity drops its own.
    rows = await store.load_versions(KEY, ["a", "b", "c"])
    assert {i: (r.hash, r.revision) for i, r in rows.items()} == {
        "a": ("h-a", 0),
        "b": ("h-b", 1),
        "c": ("h-c", 4),
    }
    assert rows["b"].payload == "x" * 9000
    lease = Lease("node-a", 1, T0 + TTL)
    update = item_row("b", hash="h-b2", revision=2)
    await store.commit_poll(KEY, lease, batch(upserts=[update, item_row("d")], deletes=["a"]))
    assert await store.count_items(KEY) == 3
    assert (await store.load_versions(KEY, ["b"]))["b"].hash == "h-b2"
    assert await store.load_marks(KEY, ["b"]) == {"b": ItemMark(7, ListingLink(2, "a", "c"))}
    await store.commit_poll(KEY, lease, batch(upserts=[item_row("z")], revived=["z"]))
    tombstones = await store.load_tombstones(KEY, ["a", "y", "z"])
    assert {i: (t.reason, t.removed_at) for i, t in tombstones.items()} == {
        "a": ("deleted", T0),
        "y": ("cleared", T0 - 9),
    }
    await store.commit_poll(KEY, lease, batch(deletes=["d"], now=T0 + 1))
    await store.commit_poll(KEY, lease, batch(upserts=[item_row("d")], revived=["d"]))
    await store.commit_poll(KEY, lease, batch(deletes=["d"], now=T0 + 2))
    assert (await store.load_tombstones(KEY, ["d"]))["d"].removed_at == T0 + 2
    assert await store.prune_tombstones(KEY, T0) == 1  # "y"
    assert await store.count_items(PKey("orders", "eu")) == 1
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        raw.execute(
            'INSERT INTO watukuy_items (poller, "partition", identity, hash, schema_version, '
            "seen_at) VALUES ('orders', '', 'b', 'h', 1, 0)"
        )
    await store.close()


async def test_every_read_and_write_of_the_snapshot_searches_its_indexes(
    db: Path, raw: sqlite3.Connection
) -> None:
    store = SqliteStore(db)
    await store.migrate()
    sql, k = store._sql, ("orders", "")  # the store's own statements
    statements = [
        (sql.items_between, (*k, "a", "z", 10)),
        (sql.items_in + "(?,?)", (*k, "a", "b")),
        (sql.marks_in + "(?,?)", (*k, "a", "b")),
        (sql.unseen_first, (*k, 3, 10)),
        (sql.unseen_after, (*k, 3, "a", 10)),
        (sql.identities_first, (*k, 10)),
        (sql.identities_after, (*k, "a", 10)),
        (sql.count_items, k),
        (sql.mark_items_in + "(?,?)", (1, *k, "a", "b")),
        (sql.entomb_items_in + "(?,?)", (T0, *k, "a", "b")),
        (sql.delete_items_in + "(?,?)", (*k, "a", "b")),
        *((statement, k) for statement in sql.clear_items),
        (sql.mark_and_link_item, ("a", 1, 2, None, None, *k)),
        (
            sql.mark_and_link_head + "(?, ?, ?, ?, ?)" + sql.mark_and_link_tail,
            ("a", 1, 2, None, None, *k),
        ),
    ]
    for statement, params in statements:
        plan = [row[-1] for row in raw.execute("EXPLAIN QUERY PLAN " + statement, params)]
        # Steps read "SCAN <table> ..." or "SEARCH <table> ..."; "i" is the UPDATE's alias.
        on_items = [step for step in plan if step.split()[1] in ("watukuy_items", "i")]
        assert on_items, plan
        for step in on_items:
            assert step.startswith("SEARCH "), plan
            assert "INDEX watukuy_items_key_idx (poller=? AND partition=?" in step, plan
        assert "TEMP B-TREE" not in " ".join(plan), plan  # already in identity order
    for statement in (sql.tombstones_in + "(?,?)", sql.revive_in + "(?,?)"):
        plan = [row[-1] for row in raw.execute("EXPLAIN QUERY PLAN " + statement, (*k, "a", "b"))]
        assert plan == [
            "SEARCH watukuy_tombstones USING INDEX watukuy_tombstones_key_idx "
            "(poller=? AND partition=? AND identity=?)"
        ]
    plan = [row[-1] for row in raw.execute("EXPLAIN QUERY PLAN " + sql.prune_tombstones, (*k, T0))]
    assert plan == [
        "SEARCH watukuy_tombstones USING INDEX watukuy_tombstones_age_idx "
        "(poller=? AND partition=? AND removed_at<?)"
    ]
    await store.close()


# --- errors --------------------------------------------------------------------------------


async def test_an_unopenable_file_is_a_store_error(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "missing-dir" / "x.db")
    with pytest.raises(StoreError, match=r"^list_keys: unable to open database file") as info:
        await store.list_keys()
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    await store.close()


async def test_a_driver_error_inside_commit_rolls_everything_back(
    db: Path, raw: sqlite3.Connection
) -> None:
    store = SqliteStore(db)
    lease = await _lease(store)
    await store.commit_poll(KEY, lease, batch(upserts=[item_row("kept")]))
    # The database itself refuses the last write of the transaction.
    raw.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON watukuy_parked "
        "BEGIN SELECT RAISE(ABORT, 'parked rows are refused'); END"
    )
    doomed = batch(
        state_patch={"sequence": 7},
        upserts=[item_row("new")],
        deletes=["kept"],
        events=[outbox_row("e1", 1)],
        log=True,
        parked=[parked_invalid("bad")],
    )
    with pytest.raises(StoreError, match=r"^commit_poll: parked rows are refused") as info:
        await store.commit_poll(KEY, lease, doomed)
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    assert await store.load_versions(KEY, ["kept", "new"]) == {"kept": item_row("kept")}
    assert await store.count_pending(KEY) == 0
    assert await store.read_log(KEY) == []
    state = await store.load_state(KEY)
    assert state is not None
    assert state.sequence == 0
    raw.execute("DROP TRIGGER refuse")
    await store.commit_poll(KEY, lease, doomed)
    assert await store.count_parked(KEY) == 1
    await store.close()


async def test_out_of_range_integers_are_store_errors(db: Path) -> None:
    store = SqliteStore(db)
    lease = await _lease(store)
    with pytest.raises(StoreError, match=r"^commit_poll: ") as info:
        await store.commit_poll(KEY, lease, batch(events=[outbox_row("e1", 2**63)]))
    assert isinstance(info.value.__cause__, OverflowError)
    assert await store.count_pending(KEY) == 0
    await store.close()


async def test_lease_lost_is_not_wrapped(db: Path) -> None:
    store = SqliteStore(db)
    lease = await _lease(store)
    await store.release_lease(KEY, lease)
    with pytest.raises(LeaseLostError) as info:
        await store.save_state(KEY, lease, {"paused": True})
    assert info.value.__cause__ is None
    await store.close()


# --- locks, busy timeout and the event loop -------------------------------------------------


async def test_a_lock_held_longer_than_the_busy_timeout_fails_cleanly(
    db: Path, raw: sqlite3.Connection
) -> None:
    store = SqliteStore(db, busy_timeout="200ms")
    await store.migrate()
    raw.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"^acquire_lease: database is locked") as info:
        await store.acquire_lease(KEY, "node-a", TTL, T0)
    waited = time.monotonic() - started
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    # SQLite's busy handler gives up only once the timeout is spent, so this bound holds on
    # any machine; a loaded one only makes the wait longer (no upper bound for that reason).
    assert waited >= 0.15
    raw.execute("ROLLBACK")
    assert await store.acquire_lease(KEY, "node-a", TTL, T0) == Lease("node-a", 1, T0 + TTL)
    await store.close()


async def _on_the_worker(method: str) -> None:
    """Wait until the store's worker thread is inside ``method`` (a call it has started:
    cancelling its task no longer stops it). Looked up in the thread's stack, a check every
    millisecond, since nothing else tells when a call blocked in SQLite has begun."""
    for _ in range(10_000):
        for thread in threading.enumerate():
            if not thread.name.startswith("watukuy-sqlite") or thread.ident is None:
                continue
            frame = sys._current_frames().get(thread.ident)
            while frame is not None:
                if frame.f_code.co_name == method:
                    return
                frame = frame.f_back
        await asyncio.sleep(0.001)
    raise AssertionError(f"the worker never started {method}")


async def test_the_event_loop_keeps_running_while_a_call_waits_for_a_lock(
    db: Path, raw: sqlite3.Connection
) -> None:
    # The lock is released by a task of the event loop itself, once the commit is on the
    # worker and ten more turns of the loop went by: if the commit blocked the loop, the
    # lock would never be released and the commit would fail after its 5 s busy timeout.
    store = SqliteStore(db, busy_timeout="5s")
    lease = await _lease(store)
    raw.execute("BEGIN IMMEDIATE")
    turns = 0
    released_while_waiting: list[bool] = []

    async def release_after_ten_turns(commit: asyncio.Task[None]) -> None:
        nonlocal turns
        await _on_the_worker("_commit")
        while turns < 10:
            await asyncio.sleep(0)
            turns += 1
        released_while_waiting.append(not commit.done())
        raw.execute("ROLLBACK")

    commit = asyncio.create_task(store.commit_poll(KEY, lease, batch(upserts=[item_row("a")])))
    releaser = asyncio.create_task(release_after_ten_turns(commit))
    await commit
    await releaser
    assert turns == 10
    assert released_while_waiting == [True]  # the commit really waited for the lock
    assert await store.count_items(KEY) == 1
    await store.close()


async def test_a_cancelled_call_leaves_the_store_usable(db: Path, raw: sqlite3.Connection) -> None:
    store = SqliteStore(db, busy_timeout="5s")
    lease = await _lease(store)
    raw.execute("BEGIN IMMEDIATE")
    call = asyncio.create_task(store.commit_poll(KEY, lease, batch(upserts=[item_row("a")])))
    await _on_the_worker("_commit")
    call.cancel()
    raw.execute("ROLLBACK")
    with pytest.raises(asyncio.CancelledError):
        await call
    # The worker finished what it had started; the next call runs normally after it.
    await store.commit_poll(KEY, lease, batch(upserts=[item_row("b")]))
    assert sorted(await store.load_versions(KEY, ["a", "b"])) == ["a", "b"]
    await store.close()


async def test_two_connections_fence_each_other(db: Path) -> None:
    first, second = SqliteStore(db), SqliteStore(db)
    lease = await _lease(first)
    assert await second.acquire_lease(KEY, "node-b", TTL, T0 + 1) is None
    taken = await second.acquire_lease(KEY, "node-b", TTL, T0 + TTL)
    assert taken == Lease("node-b", 2, T0 + 2 * TTL)
    with pytest.raises(LeaseLostError):
        await first.commit_poll(KEY, lease, batch(upserts=[item_row("stale")]))
    assert await second.count_items(KEY) == 0
    await first.close()
    await second.close()


async def test_one_ack_call_longer_than_a_statement_chunk_removes_exactly_its_rows(
    db: Path,
) -> None:
    # Acks are deleted 500 ids per statement: 1,203 ids (one repeated, one unknown) span
    # three statements, and the rows left are exactly the ones not acked.
    store = SqliteStore(db)
    lease = await _lease(store)
    events = [outbox_row(f"e{n:04d}", n) for n in range(1, 1301)]
    await store.commit_poll(KEY, lease, batch(events=events))
    acked = [f"e{n:04d}" for n in range(1, 1202)] + ["e0001", "unknown"]
    await store.ack_events(KEY, lease, acked)
    left = await store.load_pending(KEY, 1000)
    assert [row.event_id for row in left] == [f"e{n:04d}" for n in range(1202, 1301)]
    await store.close()


@pytest.mark.parametrize("shared", [True, False])
async def test_a_commit_longer_than_a_statement_writes_every_row_exactly(
    db: Path, shared: bool
) -> None:
    # A commit's rows go in as many statements as the connection's parameter limit allows;
    # the values its rows share (key, commit time, schema version) are bound once each.
    store = SqliteStore(db)
    lease = await _lease(store)
    await store._call("limit", lambda conn: conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 40))
    store._parameters = 40
    at = (lambda n: T0) if shared else (lambda n: T0 + n % 3)
    events = [outbox_row(f"e{n:03d}", n, created_at=at(n)) for n in range(1, 101)]
    items = [
        item_row(f"i{n:03d}", payload=f'{{"n":{n}}}', revision=n, seen_at=at(n))
        for n in range(1, 101)
    ]
    # Links land on rows that exist only: the odd ones are written by a later commit.
    links = {f"i{n:03d}": ListingLink(n, f"i{n - 1:03d}", None) for n in range(1, 102)}
    await store.commit_poll(
        KEY,
        lease,
        batch(
            events=events,
            upserts=items,
            links={i: link for i, link in links.items() if int(i[1:]) % 2 == 0},
        ),
    )
    assert await store.load_pending(KEY, 1000) == events
    assert await store.load_versions(KEY, [row.identity for row in items]) == {
        row.identity: row for row in items
    }
    await store.commit_poll(
        KEY, lease, batch(links={i: link for i, link in links.items() if int(i[1:]) % 2})
    )
    assert await store.load_marks(KEY, list(links)) == {
        row.identity: ItemMark(0, links[row.identity]) for row in items
    }
    await store.close()


async def _reads(store: SqliteStore) -> tuple[object, ...]:
    """What every multi-row read of the store answers for KEY."""
    identities = [chunk async for chunk in store.stream_identities(KEY, batch_size=7)]
    unseen = [chunk async for chunk in store.stream_unseen(KEY, before=10, batch_size=7)]
    return (
        await store.load_marks(KEY, [f"i{n:02d}" for n in range(100)]),
        await store.load_pending(KEY, 50),
        await store.load_pending(KEY, 50, after_sequence=3),
        await store.load_versions(KEY, [f"i{n:02d}" for n in range(0, 30, 2)]),
        await store.load_versions(KEY, [f"i{n:02d}" for n in range(100)]),
        await store.list_keys(),
        await store.list_keys(KEY.poller),
        await store.due_keys(KEY.poller, T0 + 10**9),
        identities,
        unseen,
    )


async def test_multi_row_reads_answer_the_same_row_by_row(db: Path) -> None:
    # Multi-row reads come back as one JSON row (one step of the library: one wait for
    # the GIL, not one per row). An answer over SQLite's length limit is read row by row:
    # both ways give the same rows, in the same order, with the same types.
    store = SqliteStore(db)
    lease = await _lease(store)
    events = [outbox_row(f"e{n:02d}", n // 2, last_error=None) for n in range(40, 0, -1)]
    items = [item_row(f"i{n:02d}", payload=f'{{"n":{n}}}', version=None) for n in range(20)]
    links = {f"i{n:02d}": ListingLink(n, None if n % 3 else "\u00e9", "") for n in range(0, 20, 2)}
    await store.commit_poll(
        KEY, lease, batch(events=events, upserts=items, seen=["i03"], seen_pass=4, links=links)
    )
    for partition in ("b", "a", "c"):
        await _lease(store, PKey(KEY.poller, partition))
    at_once = await _reads(store)
    assert [row.event_id for row in at_once[1]][:4] == ["e01", "e02", "e03", "e04"]
    assert at_once[4]["i07"] == items[7]
    assert at_once[0]["i03"] == ItemMark(4, None)
    assert at_once[0]["i06"] == ItemMark(0, ListingLink(6, "\u00e9", ""))
    await store._call("limit", lambda conn: conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 300))
    with pytest.raises(StoreError):  # the limit holds: a long event is refused
        await store.commit_poll(KEY, lease, batch(events=[outbox_row("long", 99, event="x" * 400)]))
    assert await _reads(store) == at_once
    await store.close()


# --- store URLs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///relative.db", "relative.db"),
        ("sqlite:///dir/relative.db", "dir/relative.db"),
        ("sqlite:////abs/path.db", "/abs/path.db"),
        ("sqlite:////abs/with%20space.db", "/abs/with space.db"),
        ("sqlite://:memory:", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("SQLITE:///upper.db", "upper.db"),
    ],
)
def test_sqlite_urls(url: str, path: str) -> None:
    store = store_from_url(url)
    assert isinstance(store, SqliteStore)
    assert repr(store) == f"SqliteStore({path!r}, table_prefix='watukuy_')"


async def test_sqlite_url_options(tmp_path: Path) -> None:
    store = store_from_url(f"sqlite:///{tmp_path}/x.db?table_prefix=app_&busy_timeout=250ms")
    assert isinstance(store, SqliteStore)
    assert repr(store) == f"SqliteStore('{tmp_path}/x.db', table_prefix='app_')"
    await store.migrate()
    conn = sqlite3.connect(tmp_path / "x.db")
    assert conn.execute("SELECT version FROM app_migrations").fetchall() == _SHIPPED
    conn.close()
    await store.close()


def test_memory_url() -> None:
    assert isinstance(store_from_url("memory://"), MemoryStore)
    assert store_from_url("memory://") is not store_from_url("memory://")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "mysql://root:hunter2@db/app",
            "store: expected a URL starting with memory://, sqlite://, postgresql://, "
            "postgres://, redis:// or rediss://, got 'mysql://root:***@db/app'",
        ),
        ("ftp://user:p%40ss@host:21/x", "got 'ftp://user:***@host:21/x'"),
        ("no-scheme.db", "got 'no-scheme.db'"),
        ("sqlite://relative.db", "store: expected sqlite:///relative.db"),
        ("sqlite://", "store: expected sqlite:///relative.db"),
        ("sqlite:///x.db?journal=off", "store: unknown SQLite option 'journal'"),
        ("sqlite:///x.db?busy_timeout=soon", "busy_timeout: expected a duration"),
        ("memory://somewhere", "store: memory:// takes no path or options"),
    ],
)
def test_bad_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        store_from_url(url)
    assert message in str(info.value)
    assert "hunter2" not in str(info.value)
    assert "p%40ss" not in str(info.value)


def test_remote_urls_pick_the_remote_stores() -> None:
    pytest.importorskip("psycopg")
    pytest.importorskip("redis")
    from watukuy.stores.postgres import PostgresStore
    from watukuy.stores.redis import RedisStore

    assert isinstance(store_from_url("postgresql://u@127.0.0.1:1/db"), PostgresStore)
    assert isinstance(store_from_url("postgres://u@127.0.0.1:1/db"), PostgresStore)
    assert isinstance(store_from_url("redis://127.0.0.1:1/0"), RedisStore)
    assert isinstance(store_from_url("rediss://127.0.0.1:1/0"), RedisStore)


def test_importing_the_stores_loads_no_optional_driver() -> None:
    code = (
        "import sys, watukuy.stores as s; "
        "assert not {'psycopg', 'psycopg_pool', 'redis'} & set(sys.modules), sorted(sys.modules); "
        "assert 'PostgresStore' in dir(s); "
        "s.PostgresStore; assert 'psycopg' in sys.modules; "
        "s.RedisStore; s.RedisBudgetStore; assert 'redis' in sys.modules; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr
