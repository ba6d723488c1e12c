"""SqliteStore: a :class:`~watukuy.model.ports.StateStore` in one SQLite file (stdlib ``sqlite3``).

The default for one host. The database runs in WAL mode, so readers never wait for the
writer and several processes on the same host can share one file: every write that needs
the lease takes SQLite's write lock first (``BEGIN IMMEDIATE``), checks the lease owner and
epoch inside that transaction, and only then writes. A process that finds the file locked
waits up to ``busy_timeout`` before the call fails with :class:`~watukuy.StoreError`.

``sqlite3`` blocks, so the store never calls it on the event loop: one dedicated worker
thread owns the connection and every method hops there and back. Calls run one at a time,
in the order they were made. The connection is opened on first use (the constructor does
no I/O), the schema is created then if it is missing, and :meth:`SqliteStore.close` closes
both the connection and the thread.

Durability: ``synchronous=NORMAL``, SQLite's recommended setting for WAL. A commit survives
a crash of the process; a power loss may roll back the last few commits, which the engine
then polls again (events keep their ids, so delivery stays at-least-once).

The DDL is versioned in ``watukuy/stores/sql/sqlite/NNNN_*.sql``; applied versions are
recorded in ``<prefix>migrations``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Final, TypeVar, cast

import orjson

from watukuy.model import json as wkjson
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, LeaseLostError, SerializedError
from watukuy.model.rows import (
    CommitBatch,
    ItemMark,
    ItemRow,
    Lease,
    ListingLink,
    LoggedEvent,
    OutboxRow,
    ParkedKind,
    ParkedRow,
    PKey,
    PollerState,
    StatePatch,
    StoreCapabilities,
    Tombstone,
    Validator,
    empty_poller_state,
    patch_to_fields,
    state_from_fields,
    state_to_fields,
)
from watukuy.stores._commit_rows import (
    LinkRow,
    link_rows,
    shared_event_fields,
    shared_item_fields,
)
from watukuy.stores._errors import store_errors

__all__ = ["SqliteStore", "sqlite_migrations"]

T = TypeVar("T")

_PREFIX: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|")
_MIGRATION_FILE: Final = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")
# The newest version in sql/sqlite (a test keeps the two equal): a store whose database is
# at it skips reading the migration files, and importlib.resources, on every start.
SCHEMA_VERSION: Final = 7
# UPDATE ... FROM, which writes a page's links in one statement, is in SQLite since 3.33.
_UPDATE_FROM: Final = sqlite3.sqlite_version_info >= (3, 33)
# Bound parameters per IN (...) list; old SQLite builds allow 999 in total.
_IN_CHUNK: Final = 500
# Bound parameters per multi-row statement, at most (SQLite allows 32,766 since 3.32).
_MAX_PARAMETERS: Final = 32_766
# load_versions reads a sorted run of at least this many identities as one key range.
_RUN_MIN: Final = 64
_K: Final = 'poller = ? AND "partition" = ?'
# The columns of the reads that come back in one step (see _in_one_step).
_ITEM_COLUMNS: Final = "identity, version, hash, schema_version, payload, seen_at, revision"
_MARK_COLUMNS: Final = "identity, seen_pass, link_read, link_prev, link_next"
_OUTBOX_COLUMNS: Final = "event_id, seq, event, attempts, next_attempt_at, last_error, created_at"
_KEY_COLUMNS: Final = 'poller, "partition"'


@functools.lru_cache(maxsize=256)
def _rows_sql(head: str, width: int, count: int, tail: str) -> str:
    row = "(" + ", ".join("?" * width) + ")"
    return head + ", ".join(itertools.repeat(row, count)) + tail


@functools.lru_cache(maxsize=256)
def _selected_rows_sql(head: str, select: str, width: int, count: int, tail: str) -> str:
    row = "(" + ", ".join("?" * width) + ")"
    return f"{head}SELECT {select} FROM (VALUES {', '.join(itertools.repeat(row, count))}){tail}"


@functools.lru_cache(maxsize=64)
def _fenced_delete_sql(head: str, count: int, tail: str) -> str:
    return head + "(" + ",".join("?" * count) + ")" + tail


@functools.lru_cache(maxsize=64)
def _patch_sql(head: str, fields: int, tail: str) -> str:
    return head + ", ?, json(?)" * fields + tail


@functools.lru_cache(maxsize=64)
def _in_one_step(sql: str, columns: str) -> str:
    """``sql``'s rows as one JSON array of ``[column, ...]`` arrays, in one row.

    The sqlite3 module lets the GIL go around every step of a statement and takes it back
    after. While the event loop's thread is busy, taking it back waits for the loop to
    let go, up to the interpreter's switch interval, once per row, so a long answer read
    while the loop is busy takes that interval many times over. A statement with one row of
    answer pays that wait once. ``columns`` names the columns of ``sql``'s result, in order; their values
    must be text, integers or NULL (JSON keeps those exactly).
    """
    return f"SELECT json_group_array(json_array({columns})) FROM ({sql})"


def _has_json(conn: sqlite3.Connection) -> bool:
    """The library has the JSON functions (built in since 3.38, an extension before)."""
    try:
        conn.execute("SELECT json_set('{}', '$.a', json('1'))").fetchone()
    except sqlite3.Error:  # pragma: no cover - builds without JSON1
        return False
    return True


def _parameter_limit(conn: sqlite3.Connection) -> int:
    """Bound parameters one statement of this connection may carry (999 in old builds)."""
    try:
        return min(conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER), _MAX_PARAMETERS)
    except (AttributeError, sqlite3.Error):  # pragma: no cover - getlimit is 3.11+
        return 999


def _insert_rows(
    conn: sqlite3.Connection,
    limit: int,
    head: str,
    rows: Sequence[tuple[Any, ...]],
    tail: str = "",
) -> None:
    """``head VALUES-rows tail`` for ``rows``, as many rows per statement as ``limit``
    parameters allow.

    The library releases the GIL around each step of a statement; ``executemany`` steps
    once per row, so a commit of a thousand rows would wait for the event loop's thread a
    thousand times while that thread is busy. One statement waits once, and does all its
    inserting while the loop runs.
    """
    if not rows:
        return
    width = len(rows[0])
    per = max(1, limit // width)
    for start in range(0, len(rows), per):
        chunk = rows[start : start + per]
        sql = _rows_sql(head, width, len(chunk), tail)
        conn.execute(sql, list(itertools.chain.from_iterable(chunk)))


def _insert_selected(
    conn: sqlite3.Connection, limit: int, head: str, rows: _Rows, tail: str = ""
) -> None:
    """``head SELECT ... FROM (VALUES ...) tail`` for ``rows``: the values they share bound
    once per statement, then each row's own, as many rows per statement as ``limit``
    parameters allow.

    A commit's rows share their key, commit time and more; bound once, they leave the
    library fewer parameters to bind, under the GIL, than a ``VALUES`` row of every column
    (see :func:`_insert_rows`).
    """
    select, width, shared, values = rows
    count_all = len(values) // width
    per = max(1, (limit - len(shared)) // width)
    for start in range(0, count_all, per):
        count = min(per, count_all - start)
        sql = _selected_rows_sql(head, select, width, count, tail)
        conn.execute(sql, (*shared, *values[start * width : (start + count) * width]))


# One row of the update that writes a commit's marks and links: identity, seen pass (None:
# keep the mark), read (None: keep the link), prev, next.
_MarkLinkRow = tuple[str, int | None, int | None, str | None, str | None]


def _mark_and_link_rows(
    seen_pass: int, marked: Sequence[str], links: Sequence[LinkRow]
) -> list[_MarkLinkRow]:
    """A commit's seen marks and listing links as one row per identity."""
    rows: dict[str, _MarkLinkRow] = {i: (i, seen_pass, None, None, None) for i in marked}
    for identity, read, prev, next_ in links:
        mark = rows[identity][1] if identity in rows else None
        rows[identity] = (identity, mark, read, prev, next_)
    return list(rows.values())


def _mark_and_link(
    conn: sqlite3.Connection,
    limit: int,
    sql: _Sql,
    k: tuple[str, str],
    rows: Sequence[_MarkLinkRow],
) -> None:
    """Write marks and links on the rows of key ``k`` that exist, as many per statement as
    ``limit`` parameters allow: one ``UPDATE ... FROM (VALUES ...)`` joined on the
    key (one statement steps once, see :func:`_insert_rows`), or, on a library older than
    3.33 (no ``UPDATE ... FROM``), one ``UPDATE`` per row."""
    if not _UPDATE_FROM:  # pragma: no cover - libraries before 3.33
        conn.executemany(sql.mark_and_link_item, [(*row, *k) for row in rows])
        return
    per = max(1, (limit - len(k)) // 5)
    for start in range(0, len(rows), per):
        chunk = rows[start : start + per]
        statement = _rows_sql(sql.mark_and_link_head, 5, len(chunk), sql.mark_and_link_tail)
        conn.execute(statement, [*itertools.chain.from_iterable(chunk), *k])


def _in_lists(
    conn: sqlite3.Connection,
    limit: int,
    head: str,
    fixed: tuple[Any, ...],
    values: Sequence[Any],
) -> None:
    """``head (values...)`` with ``fixed`` parameters first, as many values per statement
    as ``limit`` parameters allow."""
    step = max(1, limit - len(fixed))
    for start in range(0, len(values), step):
        chunk = values[start : start + step]
        conn.execute(head + "(" + ",".join("?" * len(chunk)) + ")", (*fixed, *chunk))


# A commit's rows for one INSERT ... SELECT: what the SELECT writes into each column, how
# many values each row binds, the values every row shares (bound once per statement, the
# key first), and the rows' own values, flat.
_Rows = tuple[str, int, tuple[Any, ...], list[Any]]


def _item_rows(p: str, q: str, rows: Sequence[ItemRow]) -> _Rows | None:
    """A commit's snapshot rows, sharing what they all have (see ``_commit_rows``)."""
    if not rows:
        return None
    values: list[Any] = []
    add = values.extend
    shared = shared_item_fields(rows)
    if shared is not None:
        for r in rows:
            add((r.identity, r.version, r.hash, r.payload, r.revision))
        select = "?, ?, column1, column2, column3, ?, column4, ?, column5"
        return select, 5, (p, q, *shared), values
    for r in rows:
        add((r.identity, r.version, r.hash, r.schema_version, r.payload, r.seen_at, r.revision))
    return "?, ?, column1, column2, column3, column4, column5, column6, column7", 7, (p, q), values


def _event_rows(p: str, q: str, rows: Sequence[OutboxRow]) -> _Rows | None:
    """A commit's new outbox rows, sharing what they all have (see ``_commit_rows``)."""
    if not rows:
        return None
    values: list[Any] = []
    add = values.extend
    shared = shared_event_fields(rows)
    if shared is not None:
        for r in rows:
            add((r.event_id, r.sequence, r.event))
        return "?, ?, column1, column2, column3, ?, NULL, NULL, ?", 3, (p, q, *shared), values
    for r in rows:
        error = None if r.last_error is None else wkjson.dumps(r.last_error)
        add((r.event_id, r.sequence, r.event, r.attempts, r.next_attempt_at, error, r.created_at))
    return "?, ?, column1, column2, column3, column4, column5, column6, column7", 7, (p, q), values


def sqlite_migrations(table_prefix: str = "watukuy_") -> list[tuple[int, str]]:
    """The versioned DDL, oldest first, with the table prefix filled in.

    For teams that manage schemas with their own tool; :meth:`SqliteStore.migrate` applies
    exactly these and records each version in ``<prefix>migrations``.

    Returns:
        ``(version, sql_script)`` pairs.
    """
    _check_prefix(table_prefix)
    # importlib.resources (and the tempfile it pulls in) is imported when a store
    # migrates, not by ``import watukuy``.
    from importlib import resources

    folder = resources.files("watukuy.stores").joinpath("sql", "sqlite")
    out: list[tuple[int, str]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match is not None:
            script = entry.read_text(encoding="utf-8").replace("{prefix}", table_prefix)
            out.append((int(match.group(1)), script))
    return out


def _check_prefix(prefix: str) -> None:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ConfigError(
            f"expected letters, digits and underscores, not starting with a digit; got {prefix!r}",
            field="table_prefix",
        )


def _statements(script: str) -> Iterator[str]:
    """Split a DDL script into complete statements (comments and blank lines dropped)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        if not pending and (not line.strip() or line.lstrip().startswith("--")):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip()
            pending = ""
    if pending.strip():
        yield pending.strip()


class _Sql:
    """Every DML statement, with the table names of one prefix filled in."""

    def __init__(self, prefix: str) -> None:
        p, i, o = f'"{prefix}pollers"', f'"{prefix}items"', f'"{prefix}outbox"'
        pk, v, lg = f'"{prefix}parked"', f'"{prefix}validators"', f'"{prefix}log"'
        tb = f'"{prefix}tombstones"'
        self.migrations = f'"{prefix}migrations"'
        self.tables = (p, i, o, pk, v, lg, tb)
        self.lease = f"SELECT lease_owner, lease_epoch, lease_expires_at FROM {p} WHERE {_K}"
        self.fence = f"SELECT lease_owner, lease_epoch, state FROM {p} WHERE {_K}"
        self.insert_key = (
            f'INSERT INTO {p} (poller, "partition", state, wake_at, lease_owner, lease_epoch, '
            "lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        self.take_lease = (
            f"UPDATE {p} SET lease_owner = ?, lease_epoch = lease_epoch + 1, "
            f"lease_expires_at = ? WHERE {_K}"
        )
        owned = f"{_K} AND lease_owner = ? AND lease_epoch = ?"
        self.renew = f"UPDATE {p} SET lease_expires_at = ? WHERE {owned}"
        self.release = f"UPDATE {p} SET lease_owner = NULL, lease_expires_at = NULL WHERE {owned}"
        self.state = f"SELECT state FROM {p} WHERE {_K}"
        self.set_state = f"UPDATE {p} SET state = ?, wake_at = ? WHERE {_K}"
        self.patch_fenced_head = f"UPDATE {p} SET state = json_set(state"
        self.patch_fenced_tail = f") WHERE {_K} AND lease_owner = ? AND lease_epoch = ?"
        # The partial index (poller, wake_at, partition) answers this in index order.
        self.due = (
            f'SELECT "partition", wake_at FROM {p} WHERE poller = ? AND wake_at IS NOT NULL '
            'AND wake_at <= ? ORDER BY wake_at, "partition" LIMIT ?'
        )
        self.keys = f'SELECT poller, "partition" FROM {p} ORDER BY poller, "partition"'
        self.keys_of = f'SELECT poller, "partition" FROM {p} WHERE poller = ? ORDER BY "partition"'
        self.delete_key = [f"DELETE FROM {t} WHERE {_K}" for t in self.tables]
        floors = f'"{prefix}epoch_floors"'
        self.keep_epoch = (
            f'INSERT INTO {floors} (poller, "partition", epoch) '
            f'SELECT poller, "partition", lease_epoch FROM {p} WHERE {_K} '
            'ON CONFLICT (poller, "partition") DO UPDATE SET epoch = MAX(epoch, excluded.epoch)'
        )
        self.epoch_floor = f"SELECT epoch FROM {floors} WHERE {_K}"
        self.clear_validators = f"DELETE FROM {v} WHERE {_K}"
        # A row leaving the snapshot leaves its tombstone, in the same transaction.
        entomb = (
            f'INSERT OR REPLACE INTO {tb} (poller, "partition", identity, version, hash, '
            "schema_version, revision, reason, removed_at) "
            'SELECT poller, "partition", identity, version, hash, schema_version, revision, '
        )
        self.clear_items = [
            f"{entomb}'cleared', seen_at FROM {i} WHERE {_K}",
            f"DELETE FROM {i} WHERE {_K}",
        ]
        # An upsert keeps the row's seen mark; only the marks of CommitBatch.seen move it.
        self.insert_item_columns = (
            f'INSERT INTO {i} (poller, "partition", identity, version, hash, '
            "schema_version, payload, seen_at, revision) "
        )
        self.upsert_item_tail = (
            ' ON CONFLICT (poller, "partition", identity) DO UPDATE SET '
            "version = excluded.version, hash = excluded.hash, "
            "schema_version = excluded.schema_version, payload = excluded.payload, "
            "seen_at = excluded.seen_at, revision = excluded.revision"
        )
        self.mark_items_in = f"UPDATE {i} SET seen_pass = ? WHERE {_K} AND identity IN "
        # Links, like marks, are only written on rows that exist; an upsert keeps them. A
        # commit with links writes its marks in the same statement, after the deletes (a
        # deleted row takes no mark either way): one write of each row instead of two. A
        # NULL pass keeps the mark, a NULL read keeps the link.
        keep_or_set = (
            "seen_pass = coalesce({pass_}, seen_pass), link_read = coalesce({read}, link_read), "
            "link_prev = CASE WHEN {read} IS NULL THEN link_prev ELSE {prev} END, "
            "link_next = CASE WHEN {read} IS NULL THEN link_next ELSE {next} END"
        )
        self.mark_and_link_head = (
            f"UPDATE {i} AS i SET "
            + keep_or_set.format(
                pass_="v.column2", read="v.column3", prev="v.column4", next="v.column5"
            )
            + " FROM (VALUES "
        )
        self.mark_and_link_tail = (
            ') AS v WHERE i.poller = ? AND i."partition" = ? AND i.identity = v.column1'
        )
        self.mark_and_link_item = (
            f"UPDATE {i} SET "
            + keep_or_set.format(pass_="?2", read="?3", prev="?4", next="?5")
            + ' WHERE poller = ?6 AND "partition" = ?7 AND identity = ?1'
        )
        self.marks_in = f"SELECT {_MARK_COLUMNS} FROM {i} WHERE {_K} AND identity IN "
        self.unseen_first = (
            f"SELECT identity FROM {i} WHERE {_K} AND seen_pass < ? ORDER BY identity LIMIT ?"
        )
        self.unseen_after = (
            f"SELECT identity FROM {i} WHERE {_K} AND seen_pass < ? AND identity > ? "
            "ORDER BY identity LIMIT ?"
        )
        self.entomb_items_in = f"{entomb}'deleted', ? FROM {i} WHERE {_K} AND identity IN "
        self.delete_items_in = f"DELETE FROM {i} WHERE {_K} AND identity IN "
        self.revive_in = f"DELETE FROM {tb} WHERE {_K} AND identity IN "
        self.tombstones_in = (
            "SELECT identity, version, hash, schema_version, revision, reason, removed_at "
            f"FROM {tb} WHERE {_K} AND identity IN "
        )
        self.any_tombstone = f"SELECT 1 FROM {tb} WHERE {_K} LIMIT 1"
        self.prune_tombstones = f"DELETE FROM {tb} WHERE {_K} AND removed_at < ?"
        self.items_in = f"SELECT {_ITEM_COLUMNS} FROM {i} WHERE {_K} AND identity IN "
        self.items_between = (
            f"SELECT {_ITEM_COLUMNS} FROM {i} WHERE {_K} AND identity BETWEEN ? AND ? LIMIT ?"
        )
        self.identities_first = f"SELECT identity FROM {i} WHERE {_K} ORDER BY identity LIMIT ?"
        self.identities_after = (
            f"SELECT identity FROM {i} WHERE {_K} AND identity > ? ORDER BY identity LIMIT ?"
        )
        self.count_items = f"SELECT COUNT(*) FROM {i} WHERE {_K}"
        self.insert_event_columns = (
            f'INSERT OR REPLACE INTO {o} (poller, "partition", event_id, seq, event, attempts, '
            "next_attempt_at, last_error, created_at) "
        )
        self.upsert_event = self.insert_event_columns + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        self.pending = (
            f"SELECT {_OUTBOX_COLUMNS} FROM {o} WHERE {_K} ORDER BY seq, event_id LIMIT ?"
        )
        self.pending_after = (
            f"SELECT {_OUTBOX_COLUMNS} FROM {o} WHERE {_K} AND seq > ? "
            "ORDER BY seq, event_id LIMIT ?"
        )
        self.count_pending = f"SELECT COUNT(*) FROM {o} WHERE {_K}"
        self.delete_event = f"DELETE FROM {o} WHERE {_K} AND event_id = ?"
        self.delete_events_in = f"DELETE FROM {o} WHERE {_K} AND event_id IN "
        # An ack: the rows go only while the lease is the one held, in one statement.
        self.ack_head = self.delete_events_in
        self.ack_tail = (
            f" AND EXISTS (SELECT 1 FROM {p} WHERE {_K} AND lease_owner = ? AND lease_epoch = ?)"
        )
        self.attempt = (
            f"UPDATE {o} SET attempts = attempts + 1, last_error = ?, next_attempt_at = ? "
            f"WHERE {_K} AND event_id = ?"
        )
        self.upsert_parked = (
            f'INSERT OR REPLACE INTO {pk} (poller, "partition", id, kind, event, item, error, '
            "attempts, parked_at, hold_key, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self.parked = (
            "SELECT id, kind, event, item, error, attempts, parked_at, hold_key, seq "
            f"FROM {pk} WHERE {_K}"
        )
        self.poison = (
            f"SELECT event, parked_at, seq FROM {pk} "
            f"WHERE {_K} AND id = ? AND kind = 'poison' AND event IS NOT NULL"
        )
        self.count_parked = f"SELECT COUNT(*) FROM {pk} WHERE {_K}"
        self.delete_parked = f"DELETE FROM {pk} WHERE {_K} AND id = ?"
        self.held = f"SELECT DISTINCT hold_key FROM {pk} WHERE {_K} AND hold_key IS NOT NULL"
        self.validator = (
            f"SELECT etag, last_modified, stored_at FROM {v} WHERE {_K} AND url_hash = ?"
        )
        self.set_validator = (
            f'INSERT OR REPLACE INTO {v} (poller, "partition", url_hash, etag, last_modified, '
            "stored_at) VALUES (?, ?, ?, ?, ?, ?)"
        )
        self.append_log_head = (
            f'INSERT OR REPLACE INTO {lg} (poller, "partition", seq, event, created_at) VALUES '
        )
        self.log = f"SELECT seq, event, created_at FROM {lg} WHERE {_K}"
        self.prune_log = f"DELETE FROM {lg} WHERE {_K} AND created_at < ?"


def _state_columns(fields: dict[str, Any]) -> tuple[str, int | None]:
    """The ``state`` and ``wake_at`` column values of a state document: the column is a
    copy of the document's field, so the two are always written together."""
    return wkjson.dumps(fields), fields.get("wake_at")


def _initial_state(now: int) -> tuple[str, int | None]:
    return _state_columns(state_to_fields(empty_poller_state(now)))


def _error_of(text: str | None) -> SerializedError | None:
    return None if text is None else cast(SerializedError, wkjson.loads(text))


def _by_sequence(r: Sequence[Any]) -> tuple[int, str]:
    return r[1], r[0]


def _by_wake(due: tuple[str, int]) -> tuple[int, str]:
    return due[1], due[0]


def _outbox_row(r: Sequence[Any]) -> OutboxRow:
    return OutboxRow(r[0], r[1], r[2], r[3], r[4], _error_of(r[5]), r[6])


def _parked_row(r: tuple[Any, ...]) -> ParkedRow:
    error = cast(SerializedError, wkjson.loads(r[4]))
    return ParkedRow(r[0], r[1], r[2], r[3], error, r[5], r[6], r[7], r[8])


class SqliteStore:
    """A :class:`~watukuy.model.ports.StateStore` in a SQLite database file.

    Args:
        path: The database file (created when missing), or ``":memory:"`` for a private
            database that disappears on :meth:`close`.
        table_prefix: Prefix of every table name (letters, digits, underscores).
        busy_timeout: How long a call waits for a lock held by another connection before
            failing with ``StoreError`` (``"5s"``, a ``timedelta``, or seconds).

    Raises:
        ConfigError: An empty path, a prefix that is not an identifier, a bad duration.

    Example:
        >>> store = SqliteStore("watukuy.db")  # no I/O until the first call
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        table_prefix: str = "watukuy_",
        busy_timeout: Duration = "5s",
    ) -> None:
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise ConfigError(f"expected a file path or ':memory:', got {path!r}", field="path")
        _check_prefix(table_prefix)
        self._path = os.fspath(path)
        self._prefix = table_prefix
        self._busy_ms = parse_duration(busy_timeout, "busy_timeout")
        self._sql = _Sql(table_prefix)
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None  # touched only by the worker thread
        self._parameters = 999  # the connection's limit, read when it opens
        self._json = False  # the library has json_set(), checked when it opens

    def __repr__(self) -> str:
        return f"SqliteStore({self._path!r}, table_prefix={self._prefix!r})"

    @property
    def capabilities(self) -> StoreCapabilities:
        """Transactions, log and streaming are all supported."""
        return StoreCapabilities(transactions=True, log=True, streaming=True)

    # --- plumbing ------------------------------------------------------------------------

    async def _call(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="watukuy-sqlite")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._in_worker, what, fn, args)

    def _in_worker(self, what: str, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        with store_errors(what):
            conn = self._conn if self._conn is not None else self._open()
            return fn(conn, *args)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path,
            timeout=self._busy_ms / 1000,
            isolation_level=None,  # transactions are explicit: BEGIN IMMEDIATE ... COMMIT
            check_same_thread=False,
            cached_statements=256,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            # A page commit touches scattered index pages (event ids are hashes): a bigger
            # page cache and less frequent checkpoints halve its cost. Both are upper bounds:
            # memory is only used as the database grows.
            conn.execute("PRAGMA cache_size = -65536")
            conn.execute("PRAGMA wal_autocheckpoint = 10000")
            self._parameters = _parameter_limit(conn)
            self._json = _has_json(conn)
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock. When several connections do it
        # at once, SQLite answers "locked" without waiting (waiting could deadlock), so the
        # busy timeout is applied here by hand.
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    @staticmethod
    @contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so the lease check and the writes that
        # follow it cannot interleave with another process's transaction.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise

    def _fence(self, conn: sqlite3.Connection, key: PKey, lease: Lease) -> str:
        """Check the lease inside the open write transaction; returns the state text."""
        row = conn.execute(self._sql.fence, (key.poller, key.partition)).fetchone()
        if row is None or row[0] != lease.owner or row[1] != lease.epoch:
            raise LeaseLostError(key.poller, key.partition, lease.epoch)
        return cast(str, row[2])

    def _fenced_patch(
        self, conn: sqlite3.Connection, key: PKey, lease: Lease, patch: StatePatch
    ) -> None:
        """Fence and patch in one statement (a patch without ``wake_at``, whose column and
        pause rule need the stored document): each field replaced in the stored JSON, only
        on the row this lease holds. One statement instead of a read and a write is one
        wait for the GIL less while the event loop's thread is busy."""
        changes = patch_to_fields(patch)
        params: list[Any] = []
        for name, value in changes.items():
            params.append("$." + name)
            params.append(wkjson.dumps(value))
        sql = _patch_sql(self._sql.patch_fenced_head, len(changes), self._sql.patch_fenced_tail)
        done = conn.execute(sql, (*params, key.poller, key.partition, lease.owner, lease.epoch))
        if done.rowcount != 1:
            raise LeaseLostError(key.poller, key.partition, lease.epoch)

    def _patch(
        self,
        conn: sqlite3.Connection,
        key: PKey,
        state: str,
        patch: StatePatch,
        *,
        admin: bool = False,
    ) -> None:
        fields = wkjson.loads(state)
        changes = patch_to_fields(patch)
        if not admin and "wake_at" in changes and "paused" not in changes and fields.get("paused"):
            changes["wake_at"] = None  # a run that began before the pause: its wake is void
        fields.update(changes)
        conn.execute(self._sql.set_state, (*_state_columns(fields), key.poller, key.partition))

    # --- lifecycle -----------------------------------------------------------------------

    def _migrate(self, conn: sqlite3.Connection) -> None:
        table = self._sql.migrations
        try:
            applied = conn.execute(f"SELECT MAX(version) FROM {table}").fetchone()[0]
        except sqlite3.OperationalError:
            applied = None
        if applied is not None and applied >= SCHEMA_VERSION:
            return
        migrations = sqlite_migrations(self._prefix)
        with self._transaction(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY, applied_at "
                "INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000))"
            )
            done = {row[0] for row in conn.execute(f"SELECT version FROM {table}")}
            for version, script in migrations:
                if version in done:
                    continue
                for statement in _statements(script):
                    conn.execute(statement)
                conn.execute(f"INSERT INTO {table} (version) VALUES (?)", (version,))

    async def migrate(self) -> None:
        """Create the tables that are missing. Idempotent, and safe from several processes:
        the versions are applied under SQLite's write lock."""
        await self._call("migrate", lambda conn: self._migrate(conn))

    async def close(self) -> None:
        """Close the connection and stop the worker thread. A later call reopens both."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(executor, self._close_connection)
        finally:
            executor.shutdown(wait=False)

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with store_errors("close"):
                conn.close()

    # --- leases --------------------------------------------------------------------------

    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        """Take the key's lease if it is free or expired; ``None`` when someone holds it."""
        return await self._call("acquire_lease", self._acquire, key, owner, ttl_ms, now)

    def _acquire(
        self, conn: sqlite3.Connection, key: PKey, owner: str, ttl_ms: int, now: int
    ) -> Lease | None:
        k = (key.poller, key.partition)
        with self._transaction(conn):
            row = conn.execute(self._sql.lease, k).fetchone()
            if row is None:
                epoch = self._epoch_floor(conn, k) + 1
                conn.execute(
                    self._sql.insert_key, (*k, *_initial_state(now), owner, epoch, now + ttl_ms)
                )
                return Lease(owner, epoch, now + ttl_ms)
            holder, epoch, expires_at = row
            if holder is not None and (expires_at or 0) > now:
                return None
            conn.execute(self._sql.take_lease, (owner, now + ttl_ms, *k))
            return Lease(owner, epoch + 1, now + ttl_ms)

    def _epoch_floor(self, conn: sqlite3.Connection, k: tuple[str, str]) -> int:
        """The last epoch of a deleted predecessor of the key (``0`` when none)."""
        row = conn.execute(self._sql.epoch_floor, k).fetchone()
        return 0 if row is None else int(row[0])

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        """Extend a held lease to ``now + ttl_ms``; ``False`` when it is no longer ours."""
        params = (now + ttl_ms, key.poller, key.partition, lease.owner, lease.epoch)
        return await self._call(
            "renew_lease", lambda conn: conn.execute(self._sql.renew, params).rowcount == 1
        )

    async def release_lease(self, key: PKey, lease: Lease) -> None:
        """Give the lease up; a no-op when it is no longer ours. The epoch is kept."""
        params = (key.poller, key.partition, lease.owner, lease.epoch)
        await self._call("release_lease", lambda conn: conn.execute(self._sql.release, params))

    async def get_lease(self, key: PKey) -> Lease | None:
        """The stored lease when an owner is set, expired or not."""
        row = await self._fetchone("get_lease", self._sql.lease, (key.poller, key.partition))
        if row is None or row[0] is None:
            return None
        return Lease(row[0], row[1], row[2] or 0)

    # --- reads ---------------------------------------------------------------------------

    async def _fetchone(self, what: str, sql: str, params: Sequence[Any]) -> Any:
        return await self._call(what, lambda conn: conn.execute(sql, params).fetchone())

    async def _fetchall(self, what: str, sql: str, params: Sequence[Any]) -> list[Any]:
        return await self._call(what, lambda conn: conn.execute(sql, params).fetchall())

    async def _rows(
        self, what: str, sql: str, columns: str, params: Sequence[Any]
    ) -> list[Sequence[Any]]:
        """The rows of ``sql`` (whose result has ``columns``), read in one step (see
        :func:`_in_one_step`) when the library has the JSON functions."""
        return await self._call(what, self._read_rows, sql, columns, params)

    def _read_rows(
        self, conn: sqlite3.Connection, sql: str, columns: str, params: Sequence[Any]
    ) -> list[Sequence[Any]]:
        if self._json:
            try:
                text = conn.execute(_in_one_step(sql, columns), params).fetchone()[0]
            except sqlite3.DataError:  # an answer over the size limit: row by row
                pass
            else:
                return cast(list[Sequence[Any]], orjson.loads(text))
        return conn.execute(sql, params).fetchall()

    async def _count(self, what: str, sql: str, key: PKey) -> int:
        row = await self._fetchone(what, sql, (key.poller, key.partition))
        return int(row[0])

    # --- state ---------------------------------------------------------------------------

    async def load_state(self, key: PKey) -> PollerState | None:
        """The key's state, or ``None`` when the key has never been seen."""
        row = await self._fetchone("load_state", self._sql.state, (key.poller, key.partition))
        return None if row is None else state_from_fields(wkjson.loads(row[0]))

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        """Fenced partial update of the key's state."""

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                state = self._fence(conn, key, lease)
                if patch:
                    self._patch(conn, key, state, patch)

        await self._call("save_state", write)

    async def save_state_unfenced(self, key: PKey, patch: StatePatch, now: int) -> None:
        """Administrative partial update; creates the key when it does not exist yet."""

        def write(conn: sqlite3.Connection) -> None:
            k = (key.poller, key.partition)
            with self._transaction(conn):
                row = conn.execute(self._sql.state, k).fetchone()
                if row is None:
                    state, wake_at = _initial_state(now)
                    floor = self._epoch_floor(conn, k)
                    conn.execute(self._sql.insert_key, (*k, state, wake_at, None, floor, None))
                else:
                    state = row[0]
                self._patch(conn, key, state, patch, admin=True)

        await self._call("save_state_unfenced", write)

    async def list_keys(self, poller: str | None = None) -> list[PKey]:
        """Every key with state, optionally of one poller, sorted."""
        sql = self._sql
        if poller is None:
            rows = await self._rows("list_keys", sql.keys, _KEY_COLUMNS, ())
        else:
            rows = await self._rows("list_keys", sql.keys_of, _KEY_COLUMNS, (poller,))
        return sorted(PKey(row[0], row[1]) for row in rows)

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """``(partition, wake_at)`` of the keys of ``poller`` due at ``until``, ordered by
        ``(wake_at, partition)``; read from the partial index on ``wake_at``."""
        if limit is not None and limit <= 0:
            return []
        params = (poller, until, -1 if limit is None else limit)
        rows = await self._rows("due_keys", self._sql.due, '"partition", wake_at', params)
        return sorted(((row[0], row[1]) for row in rows), key=_by_wake)

    async def delete_key(self, key: PKey) -> None:
        """Remove every row of the key in every table, its lease included."""

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                conn.execute(self._sql.keep_epoch, (key.poller, key.partition))
                for sql in self._sql.delete_key:
                    conn.execute(sql, (key.poller, key.partition))

        await self._call("delete_key", write)

    async def clear_items(self, key: PKey) -> None:
        """Drop the key's snapshot rows only, leaving a ``"cleared"`` tombstone for each."""
        params = (key.poller, key.partition)

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                for sql in self._sql.clear_items:
                    conn.execute(sql, params)

        await self._call("clear_items", write)

    async def load_tombstones(self, key: PKey, identities: Sequence[str]) -> dict[str, Tombstone]:
        """The tombstones of those identities that have one."""
        wanted = list(dict.fromkeys(identities))
        if not wanted:
            return {}

        def read(conn: sqlite3.Connection) -> dict[str, Tombstone]:
            k = (key.poller, key.partition)
            # Most keys have no tombstone at all: one probe answers for the whole page.
            if conn.execute(self._sql.any_tombstone, k).fetchone() is None:
                return {}
            out: dict[str, Tombstone] = {}
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                sql = self._sql.tombstones_in + "(" + ",".join("?" * len(chunk)) + ")"
                for r in conn.execute(sql, (*k, *chunk)):
                    out[r[0]] = Tombstone(*r)
            return out

        return await self._call("load_tombstones", read)

    async def prune_tombstones(self, key: PKey, older_than: int) -> int:
        """Delete tombstones removed before ``older_than``; returns how many."""
        params = (key.poller, key.partition, older_than)

        def write(conn: sqlite3.Connection) -> int:
            with self._transaction(conn):
                return conn.execute(self._sql.prune_tombstones, params).rowcount

        return await self._call("prune_tombstones", write)

    async def clear_validators(self, key: PKey) -> None:
        """Forget every validator of the key (unfenced)."""
        params = (key.poller, key.partition)
        await self._call(
            "clear_validators", lambda conn: conn.execute(self._sql.clear_validators, params)
        )

    # --- items ---------------------------------------------------------------------------

    async def load_versions(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemRow]:
        """The stored rows of those identities that exist."""
        wanted = list(dict.fromkeys(identities))
        if not wanted:
            return {}

        def read(conn: sqlite3.Connection) -> dict[str, ItemRow]:
            if len(wanted) >= _RUN_MIN and all(a < b for a, b in itertools.pairwise(wanted)):
                # A page listed in identity order is usually a contiguous run of the
                # snapshot: one range scan reads it faster than an IN list of its identities.
                # The LIMIT keeps a sparse run (a filtered listing, many new items) cheap;
                # it then takes the IN path below.
                limit = 2 * len(wanted)
                params = (key.poller, key.partition, wanted[0], wanted[-1], limit + 1)
                rows = self._read_rows(conn, self._sql.items_between, _ITEM_COLUMNS, params)
                if len(rows) <= limit:
                    asked = set(wanted)
                    return {r[0]: ItemRow(*r) for r in rows if r[0] in asked}
            out: dict[str, ItemRow] = {}
            for start in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[start : start + _IN_CHUNK]
                sql = self._sql.items_in + "(" + ",".join("?" * len(chunk)) + ")"
                chunk_params = (key.poller, key.partition, *chunk)
                for r in self._read_rows(conn, sql, _ITEM_COLUMNS, chunk_params):
                    out[r[0]] = ItemRow(*r)
            return out

        return await self._call("load_versions", read)

    async def load_marks(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemMark]:
        """The seen mark and listing link of each stored identity among ``identities``
        (one ``IN`` list per chunk of identities, read in one step)."""
        wanted = list(dict.fromkeys(identities))
        if not wanted:
            return {}

        def read(conn: sqlite3.Connection) -> dict[str, ItemMark]:
            out: dict[str, ItemMark] = {}
            step = max(1, min(_IN_CHUNK, self._parameters - 2))
            for start in range(0, len(wanted), step):
                chunk = wanted[start : start + step]
                sql = self._sql.marks_in + "(" + ",".join("?" * len(chunk)) + ")"
                params = (key.poller, key.partition, *chunk)
                for identity, seen, read_, prev, next_ in self._read_rows(
                    conn, sql, _MARK_COLUMNS, params
                ):
                    link = None if read_ is None else ListingLink(read_, prev, next_)
                    out[identity] = ItemMark(seen, link)
            return out

        return await self._call("load_marks", read)

    async def stream_identities(
        self, key: PKey, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """Every stored identity of the key in code point order, ``batch_size`` at a time,
        paging by the last identity seen (one short query per batch)."""
        if batch_size < 1:
            raise ConfigError(f"must be at least 1, got {batch_size!r}", field="batch_size")
        sql = self._sql
        params = (key.poller, key.partition)
        pages = self._keyset_pages(
            "stream_identities", sql.identities_first, sql.identities_after, params, batch_size
        )
        async for chunk in pages:
            yield chunk

    async def stream_unseen(
        self, key: PKey, before: int, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """The identities whose seen mark is below ``before``, in code point order, paging
        by the last identity returned (one walk of the key's primary-key range)."""
        if batch_size < 1:
            raise ConfigError(f"must be at least 1, got {batch_size!r}", field="batch_size")
        sql = self._sql
        params = (key.poller, key.partition, before)
        pages = self._keyset_pages(
            "stream_unseen", sql.unseen_first, sql.unseen_after, params, batch_size
        )
        async for chunk in pages:
            yield chunk

    async def _keyset_pages(
        self,
        operation: str,
        first: str,
        after_query: str,
        params: tuple[Any, ...],
        batch_size: int,
    ) -> AsyncIterator[list[str]]:
        """Identities ``batch_size`` at a time: ``first`` opens the range, ``after_query``
        continues it after the last identity returned (one short query per batch)."""
        after: str | None = None
        while True:
            if after is None:
                rows = await self._rows(operation, first, "identity", (*params, batch_size))
            else:
                rows = await self._rows(
                    operation, after_query, "identity", (*params, after, batch_size)
                )
            if not rows:
                return
            chunk = sorted(row[0] for row in rows)
            yield chunk
            if len(chunk) < batch_size:
                return
            after = chunk[-1]

    async def count_items(self, key: PKey) -> int:
        """Size of the key's snapshot."""
        return await self._count("count_items", self._sql.count_items, key)

    # --- commit and outbox ---------------------------------------------------------------

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """Write the whole batch in one ``BEGIN IMMEDIATE`` transaction, fenced by ``lease``."""
        await self._call("commit_poll", self._commit, key, lease, batch)

    def _commit(
        self, conn: sqlite3.Connection, key: PKey, lease: Lease, batch: CommitBatch
    ) -> None:
        p, q = key.poller, key.partition
        # Rows are built before the write lock is taken, so the lock is held only for SQL.
        items = _item_rows(p, q, batch.upserts)
        now = batch.now
        seen = list(dict.fromkeys(batch.seen))
        deletes = list(dict.fromkeys(batch.deletes))
        revived = list(dict.fromkeys(batch.revived))
        links = None
        if batch.links:
            links = _mark_and_link_rows(int(batch.seen_pass), seen, link_rows(batch.links))
            seen = []  # written with the links
        events = _event_rows(p, q, batch.events)
        log = [(p, q, r.sequence, r.event, now) for r in batch.events] if batch.log else None
        parked = [
            (
                p,
                q,
                r.id,
                r.kind,
                r.event,
                r.item,
                wkjson.dumps(r.error),
                r.attempts,
                r.parked_at,
                r.hold_key,
                r.sequence,
            )
            for r in batch.parked
        ]
        sql = self._sql
        k = (p, q)
        limit = self._parameters
        patch = batch.state_patch
        with self._transaction(conn):
            if patch and "wake_at" not in patch and self._json:
                self._fenced_patch(conn, key, lease, patch)
            else:
                state = self._fence(conn, key, lease)
                if patch:
                    self._patch(conn, key, state, patch)
            if items is not None:
                # "WHERE true": an upsert after a SELECT needs a WHERE to parse.
                _insert_selected(
                    conn,
                    limit,
                    sql.insert_item_columns,
                    items,
                    " WHERE true" + sql.upsert_item_tail,
                )
            if revived:
                _in_lists(conn, limit, sql.revive_in, k, revived)
            if seen:
                _in_lists(conn, limit, sql.mark_items_in, (int(batch.seen_pass), *k), seen)
            if deletes:
                _in_lists(conn, limit, sql.entomb_items_in, (now, *k), deletes)
                _in_lists(conn, limit, sql.delete_items_in, k, deletes)
            if links:
                _mark_and_link(conn, limit, sql, k, links)
            if events is not None:
                _insert_selected(conn, limit, sql.insert_event_columns, events)
            if log:
                _insert_rows(conn, limit, sql.append_log_head, log)
            if parked:
                conn.executemany(sql.upsert_parked, parked)

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        """Up to ``limit`` pending rows in sequence order, regardless of ``next_attempt_at``;
        only those after ``after_sequence`` when it is given."""
        if limit <= 0:
            return []
        sql = self._sql
        if after_sequence is None:
            params: tuple[Any, ...] = (key.poller, key.partition, limit)
            rows = await self._rows("load_pending", sql.pending, _OUTBOX_COLUMNS, params)
        else:
            params = (key.poller, key.partition, after_sequence, limit)
            rows = await self._rows("load_pending", sql.pending_after, _OUTBOX_COLUMNS, params)
        rows.sort(key=_by_sequence)  # the aggregate keeps the order in practice; make sure
        return [_outbox_row(r) for r in rows]

    async def count_pending(self, key: PKey) -> int:
        """Number of pending outbox rows."""
        return await self._count("count_pending", self._sql.count_pending, key)

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        """Remove delivered rows (fenced); unknown ids are ignored.

        The engine already sends a drain's acks in groups (one call per group), so each
        call is written as it comes.
        """
        ids = list(dict.fromkeys(event_ids))
        fence = (key.poller, key.partition, lease.owner, lease.epoch)
        k = (key.poller, key.partition)

        def write(conn: sqlite3.Connection) -> None:
            step = max(1, self._parameters - 6)
            # One statement per chunk, each its own transaction and fenced by itself: the
            # library steps once, and hands the GIL back to the event loop's thread once,
            # for the whole chunk. Acks are idempotent, so chunks need not land together.
            for start in range(0, len(ids), step):
                chunk = ids[start : start + step]
                sql = _fenced_delete_sql(self._sql.ack_head, len(chunk), self._sql.ack_tail)
                done = conn.execute(sql, (*k, *chunk, *fence))
                if done.rowcount < len(chunk):
                    # Some ids were gone already (acked before: ignored), or the lease is.
                    self._fence(conn, key, lease)

        await self._call("ack_events", write)

    async def record_attempt(
        self,
        key: PKey,
        lease: Lease,
        event_id: str,
        error: SerializedError,
        next_attempt_at: int | None,
    ) -> None:
        """Count a failed attempt (fenced); unknown ids are ignored."""
        params = (wkjson.dumps(error), next_attempt_at, key.poller, key.partition, event_id)

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                self._fence(conn, key, lease)
                conn.execute(self._sql.attempt, params)

        await self._call("record_attempt", write)

    async def park_event(self, key: PKey, lease: Lease, row: ParkedRow) -> None:
        """Insert the parked row and drop the outbox row with the same id (fenced)."""
        p, q = key.poller, key.partition
        values: tuple[Any, ...] = (p, q, row.id, row.kind, row.event, row.item)
        values += (wkjson.dumps(row.error), row.attempts, row.parked_at, row.hold_key, row.sequence)

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                self._fence(conn, key, lease)
                conn.execute(self._sql.upsert_parked, values)
                conn.execute(self._sql.delete_event, (p, q, row.id))

        await self._call("park_event", write)

    async def list_parked(
        self, key: PKey, kind: ParkedKind | None = None, limit: int | None = None
    ) -> list[ParkedRow]:
        """Parked rows ordered by ``(parked_at, id)``, optionally of one kind."""
        sql = self._sql.parked
        params: list[Any] = [key.poller, key.partition]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        sql += " ORDER BY parked_at, id LIMIT ?"
        params.append(-1 if limit is None else max(limit, 0))
        return [_parked_row(r) for r in await self._fetchall("list_parked", sql, params)]

    async def count_parked(self, key: PKey) -> int:
        """Number of parked rows of either kind."""
        return await self._count("count_parked", self._sql.count_parked, key)

    async def retry_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Move parked poison events back to the outbox at their original sequence."""
        unique = list(dict.fromkeys(ids))

        def write(conn: sqlite3.Connection) -> int:
            p, q = key.poller, key.partition
            moved = 0
            with self._transaction(conn):
                for row_id in unique:
                    row = conn.execute(self._sql.poison, (p, q, row_id)).fetchone()
                    if row is None:
                        continue
                    event, parked_at, seq = row
                    sequence = seq if seq is not None else _envelope_sequence(event)
                    values = (p, q, row_id, sequence, event, 0, None, None, parked_at)
                    conn.execute(self._sql.upsert_event, values)
                    conn.execute(self._sql.delete_parked, (p, q, row_id))
                    moved += 1
            return moved

        return await self._call("retry_parked", write)

    async def discard_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Delete parked rows of either kind; returns how many were deleted."""
        params = [(key.poller, key.partition, row_id) for row_id in dict.fromkeys(ids)]
        if not params:
            return 0

        def write(conn: sqlite3.Connection) -> int:
            with self._transaction(conn):
                return conn.executemany(self._sql.delete_parked, params).rowcount

        return await self._call("discard_parked", write)

    async def held_keys(self, key: PKey) -> set[str]:
        """Ordering keys held back by parked rows."""
        rows = await self._fetchall("held_keys", self._sql.held, (key.poller, key.partition))
        return {row[0] for row in rows}

    # --- validators ----------------------------------------------------------------------

    async def get_validator(self, key: PKey, url_hash: str) -> Validator | None:
        """The stored ETag / Last-Modified for a URL hash."""
        params = (key.poller, key.partition, url_hash)
        row = await self._fetchone("get_validator", self._sql.validator, params)
        return None if row is None else Validator(row[0], row[1], row[2])

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        """Store validators for a URL hash (fenced)."""
        v = validator
        values = (key.poller, key.partition, url_hash, v.etag, v.last_modified, v.stored_at)

        def write(conn: sqlite3.Connection) -> None:
            with self._transaction(conn):
                self._fence(conn, key, lease)
                conn.execute(self._sql.set_validator, values)

        await self._call("set_validator", write)

    # --- event log -----------------------------------------------------------------------

    async def read_log(
        self,
        key: PKey,
        *,
        after_sequence: int | None = None,
        from_time: int | None = None,
        to_time: int | None = None,
        limit: int = 1000,
    ) -> list[LoggedEvent]:
        """Logged events in sequence order, filtered by sequence and time (inclusive)."""
        if limit <= 0:
            return []
        sql = self._sql.log
        params: list[Any] = [key.poller, key.partition]
        for clause, value in (
            (" AND seq > ?", after_sequence),
            (" AND created_at >= ?", from_time),
            (" AND created_at <= ?", to_time),
        ):
            if value is not None:
                sql += clause
                params.append(value)
        sql += " ORDER BY seq LIMIT ?"
        params.append(limit)
        rows = await self._fetchall("read_log", sql, params)
        return [LoggedEvent(r[0], r[1], r[2]) for r in rows]

    async def prune_log(self, key: PKey, older_than: int) -> int:
        """Delete log entries created before ``older_than``; returns how many."""
        params = (key.poller, key.partition, older_than)
        return await self._call(
            "prune_log", lambda conn: conn.execute(self._sql.prune_log, params).rowcount
        )


def _envelope_sequence(event: str) -> int:
    """The ``sequence`` of an event envelope, for poison rows parked without one."""
    try:
        value = wkjson.loads(event).get("sequence")
    except (ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
