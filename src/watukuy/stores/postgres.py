"""The PostgreSQL store: many engines on many hosts sharing one database.

Built on psycopg 3 (async) and ``psycopg_pool``. Pass a DSN and the store owns a pool,
opened on first use and closed by :meth:`PostgresStore.close`; pass an
``AsyncConnectionPool`` and the store borrows connections from it and leaves it open
(unless ``close_pool=True``).

How it keeps the contract:

- **Fencing.** Every write that takes a lease runs in one transaction whose first statement
  locks the key's ``pollers`` row (``SELECT ... FOR UPDATE``) and compares the stored owner
  and epoch with the lease; on a mismatch it raises ``LeaseLostError`` and rolls back.
  The writes that do not patch the state lock and compare in the function
  ``<prefix>fence`` (migration ``0009``), which fails the transaction on a lost lease, so
  nothing waits for the lock's answer and the transaction is one round trip.
- **Constant round trips.** ``commit_poll`` writes a page with one statement per table
  however many rows it has: rows travel as one array per column, are expanded server side
  with ``unnest`` and upserted with ``ON CONFLICT``, except a page's new events and its
  snapshot rows at revision 0, which are inserted (the page is written again with the
  upsert in the rare commit that names an event id still pending or a row already
  stored). Fenced writes run in pipeline mode, and a commit sends the state document it
  makes from the one it last wrote (``<prefix>fence_state``, migration ``0010``, fails the
  transaction when the stored one differs, and the commit then reads it under the lock):
  ``BEGIN``, the fence, the writes and ``COMMIT`` travel together, one round trip.
- **Exact JSON.** Documents (state, events, payloads, errors) are ``json`` columns, not
  ``jsonb``: ``jsonb`` rejects the escape ``\\u0000`` anywhere in a document ("unsupported
  Unicode escape sequence"), and any of these documents may carry one (an item field, a
  handler's error message, a cursor). ``json`` keeps the text exactly as written, so big
  integers, key order and ``\\u0000`` round-trip byte for byte; the ``->``/``->>``
  operators still work for ad-hoc queries on documents without that escape.
- **Ordering.** Names, partitions and identities use the ``"C"`` collation, so ``ORDER BY``
  and the keyset pagination of :meth:`~PostgresStore.stream_identities` follow code-point
  order, the order Python sorts strings in.
- **Schema as data.** DDL lives in versioned files (``sql/postgres/NNNN_name.sql``) and the
  statements in ``sql/postgres/queries.sql``. :meth:`~PostgresStore.migrate` applies the
  missing versions under a transaction-scoped advisory lock and records them in
  ``<prefix>migrations``, so several processes may run it at once; the first call on a
  store migrates lazily.

PostgreSQL ``text`` cannot hold the NUL character itself. Partitions, identities, versions
and held ordering keys may be any string all the same: the store writes them through a
reversible, order-keeping escape (``U+0001`` becomes ``U+0001 U+0002``, ``U+0000`` becomes
``U+0001 U+0001``; every other string is stored as it is, see migration ``0005``), so they
behave exactly as in the other stores. JSON documents hold the escaped form ``\\u0000``.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from importlib import resources
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from watukuy.model import json
from watukuy.model.durations import Duration
from watukuy.model.errors import ConfigError, LeaseLostError, SerializedError, StoreError
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
from watukuy.stores._pg_timeouts import (
    Guard,
    PgTimeouts,
    bounded,
    connect_seconds,
    diagnose,
    expired_error,
    split_dsn,
)

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as _error:  # pragma: no cover - exercised only without the extra
    _MISSING: ImportError | None = _error
else:
    _MISSING = None

__all__ = ["PostgresStore"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_MIGRATION_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
_SQL_DIR = resources.files("watukuy.stores").joinpath("sql", "postgres")
# The newest version in sql/postgres (a test keeps the two equal): a schema already at it
# costs a start two round trips, and no migration file is read.
SCHEMA_VERSION: Final = 10
_TABLES = (
    "pollers",
    "items",
    "outbox",
    "parked",
    "validators",
    "log",
    "epoch_floors",
    "tombstones",
)
# delete_key: the rows of a key in every table but pollers, one statement each, after the
# key's row lock (a statement of its own sees every row a commit it waited for wrote).
_CHILD_DELETES = (
    "delete_items_of",
    "delete_outbox_of",
    "delete_parked_of",
    "delete_validators_of",
    "delete_log_of",
    "delete_tombstones_of",
)
# commit_poll: the plain inserts it tries first, the upserts that replace them when a row
# already exists (the page is then written again, see insert_outbox_new), and the table
# each one writes.
_REPLACING: Final = {
    "insert_outbox_new": "upsert_outbox_new",
    "insert_items": "upsert_items",
    "insert_items_shared": "upsert_items_shared",
}
_PLAIN_TABLE: Final = {
    "insert_outbox_new": "outbox",
    "insert_items": "items",
    "insert_items_shared": "items",
}
# Store options a URL DSN may carry next to the timeouts; libpq would refuse them.
_URL_OPTIONS = ("schema", "table_prefix")
_MIN_BIGINT, _MAX_BIGINT = -(2**63), 2**63 - 1
# The SQLSTATEs the fence raises on a lost lease (see 0009_fence_function.sql) and on a
# state that is not the one its writer knew (0010_fence_state_function.sql).
_LEASE_LOST: Final = "WK001"
_STATE_MOVED: Final = "WK002"
# The state documents the store remembers having written (see PostgresStore._patch): one
# per key it commits for, at most this many keys.
_KNOWN_STATES: Final = 1024
# load_marks: identities per statement (the statements of one call share a connection).
_MARKS_CHUNK: Final = 1000
# The store's own pool: a key that runs holds at most a commit (or an ack) and a renewal at
# once, so 20 connections let 10 keys run without a renewal waiting behind their commits.
# psycopg_pool's default of 4 made renewals queue as soon as a few keys ran together. None is
# opened ahead of need: the pool connects when the first call asks and grows as calls
# overlap, so a one-shot tick with nothing to do opens one connection, as a bare script
# does, instead of three (two opened with the pool, one more while they were connecting).
_POOL_MIN, _POOL_MAX = 0, 20


def _migration_files() -> list[tuple[int, str, str]]:
    """Every ``sql/postgres/NNNN_name.sql`` file shipped with the package, in order."""
    found: list[tuple[int, str, str]] = []
    for entry in _SQL_DIR.iterdir():
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return sorted(found)


def _split_options(dsn: str) -> tuple[str, dict[str, str]]:
    """Take ``schema`` and ``table_prefix`` out of a URL DSN's query string.

    Returns:
        The DSN without them, and their values by name. A ``key=value`` DSN is returned
        as it is.
    """
    if "://" not in dsn:
        return dsn, {}
    parts = urlsplit(dsn)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    ours = {name: value for name, value in pairs if name in _URL_OPTIONS}
    if not ours:
        return dsn, {}
    rest = [(name, value) for name, value in pairs if name not in _URL_OPTIONS]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def _load_queries(schema: str, prefix: str) -> dict[str, str]:
    """The named statements of ``queries.sql`` with this store's table names filled in."""
    tables = {name: f'"{schema}"."{prefix}{name}"' for name in (*_TABLES, "fence", "fence_state")}
    text = _SQL_DIR.joinpath("queries.sql").read_text("utf-8")
    queries: dict[str, str] = {}
    for block in text.split("-- name: ")[1:]:
        name, _, body = block.partition("\n")
        # Comments go: psycopg would read a '%' in them as a placeholder.
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        queries[name.strip()] = "\n".join(lines).strip().format_map(tables)
    return queries


def _pipeline(conn: psycopg.AsyncConnection[Any]) -> AbstractAsyncContextManager[Any]:
    """Pipeline mode when the libpq in use supports it (libpq 14+), else plain statements."""
    return conn.pipeline() if psycopg.capabilities.has_pipeline() else nullcontext()


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _envelope_sequence(row: ParkedRow) -> int:
    """The sequence a retried poison event returns to: its own, or for a row parked without
    one, the ``sequence`` of its event envelope (``0`` when that has none either)."""
    if row.sequence is not None:
        return row.sequence
    try:
        envelope = json.loads(row.event or "null")
    except ValueError:
        return 0
    value = envelope.get("sequence") if isinstance(envelope, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _initial_state(now: int) -> tuple[str, int | None]:
    """The ``state`` and ``wake_at`` column values of a new key."""
    fields = state_to_fields(empty_poller_state(now))
    return json.dumps(fields), fields.get("wake_at")


def _parked_columns(parked: Iterable[ParkedRow]) -> tuple[list[Any], ...]:
    """Parked rows as one array per column, in the order of ``upsert_parked``."""
    rows = list(parked)
    return (
        [r.id for r in rows],
        [r.kind for r in rows],
        [r.event for r in rows],
        [r.item for r in rows],
        [json.dumps(r.error) for r in rows],
        [r.attempts for r in rows],
        [r.parked_at for r in rows],
        [None if r.hold_key is None else _enc(r.hold_key) for r in rows],
        [r.sequence for r in rows],
    )


class PostgresStore:
    """A :class:`~watukuy.model.ports.StateStore` on PostgreSQL.

    Args:
        dsn_or_pool: A connection string (the store then owns a pool it opens on first use
            and closes in :meth:`close`) or a ``psycopg_pool.AsyncConnectionPool`` you own
            and open yourself (closed by :meth:`close` only with ``close_pool=True``).
        schema: Schema holding the tables; created by :meth:`migrate` when missing.
        table_prefix: Prefix of every table name. Both may also be given as parameters
            of a URL DSN (``postgresql://db/app?schema=sync&table_prefix=wk_``), which
            win over the arguments, so a ``--store`` URL reaches any store.
        connect_timeout: Longest wait to open a connection or get one from the pool.
        statement_timeout: Server-side limit on one statement (owned pool only).
        lock_timeout: Server-side limit on waiting for a lock (owned pool only).
        timeout: The client's own limit on one store call, whatever the server does
            (default: ``connect_timeout + statement_timeout``); past it the call fails with
            ``StoreError``. All four may also be given as parameters of a URL DSN
            (``postgresql://db/app?statement_timeout=5s&timeout=8s``; a bare number is
            seconds), which win over the arguments.
        close_pool: Whether :meth:`close` closes a pool you passed in. Default ``False``:
            a pool you own stays open for the rest of your code. A pool the store made
            from a DSN is always closed.

    Raises:
        ImportError: psycopg is not installed (``pip install 'watukuy[postgres]'``).
        ConfigError: An invalid DSN/pool, schema or prefix.

    Example::

        store = PostgresStore("postgresql://app@db/app")
        await store.migrate()
    """

    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        schema: str = "public",
        table_prefix: str = "watukuy_",
        *,
        connect_timeout: Duration = "5s",
        statement_timeout: Duration = "10s",
        lock_timeout: Duration = "5s",
        timeout: Duration | None = None,
        close_pool: bool = False,
    ) -> None:
        if _MISSING is not None:
            raise ImportError(
                "PostgresStore needs psycopg 3 and psycopg_pool: pip install 'watukuy[postgres]'"
            ) from _MISSING
        if isinstance(dsn_or_pool, str) and dsn_or_pool.strip():
            dsn_or_pool, in_url = _split_options(dsn_or_pool)
            schema = in_url.get("schema", schema)
            table_prefix = in_url.get("table_prefix", table_prefix)
        if not isinstance(close_pool, bool):
            raise ConfigError(f"expected True or False, got {close_pool!r}", field="close_pool")
        rule = "expected letters, digits and underscores, at most 40, not starting with a digit"
        if not isinstance(schema, str) or not _IDENTIFIER.fullmatch(schema):
            raise ConfigError(f"{rule}; got {schema!r}", field="schema")
        if not isinstance(table_prefix, str) or not _IDENTIFIER.fullmatch(table_prefix or "_"):
            raise ConfigError(f"{rule}; got {table_prefix!r}", field="table_prefix")
        self._pool: AsyncConnectionPool[Any]
        limits: dict[str, Any] = {
            "connect_timeout": connect_timeout,
            "statement_timeout": statement_timeout,
            "lock_timeout": lock_timeout,
            "timeout": timeout,
        }
        if isinstance(dsn_or_pool, str) and dsn_or_pool.strip():
            dsn, in_url = split_dsn(dsn_or_pool)
            self._timeouts = PgTimeouts.of(**{**limits, **in_url})
            try:
                given = conninfo_to_dict(dsn).get("options")
            except psycopg.ProgrammingError as error:
                raise ConfigError(f"not a PostgreSQL DSN: {error}", field="dsn_or_pool") from None
            self._pool = AsyncConnectionPool(
                dsn,
                open=False,
                min_size=_POOL_MIN,
                max_size=_POOL_MAX,
                timeout=self._timeouts.connect_ms / 1_000,
                kwargs={
                    "autocommit": True,
                    "connect_timeout": connect_seconds(self._timeouts),
                    "options": self._timeouts.server_options(None if given is None else str(given)),
                },
            )
            self._conninfo = dsn
            self._owns_pool = True
        elif isinstance(dsn_or_pool, AsyncConnectionPool):
            self._timeouts = PgTimeouts.of(**limits)
            self._pool = dsn_or_pool
            conninfo = dsn_or_pool.conninfo
            self._conninfo = conninfo if isinstance(conninfo, str) else ""
            self._owns_pool = False
        else:
            raise ConfigError(
                f"expected a DSN or a psycopg_pool.AsyncConnectionPool, got {dsn_or_pool!r}",
                field="dsn_or_pool",
            )
        self._schema, self._prefix = schema, table_prefix
        self._q = _load_queries(schema, table_prefix)
        self._opened = not self._owns_pool
        self._closes_pool = self._owns_pool or close_pool
        self._migrated = False
        self._ready_lock = asyncio.Lock()
        # Keys whose snapshot rows met a stored row in a plain insert: their pages are
        # upserted from then on (see commit_poll).
        self._upserted_keys: set[PKey] = set()
        # The state document this store last wrote or read under a lease, by key: a commit
        # sends it to the fence instead of reading it (see _patch).
        self._states: dict[PKey, _KnownState] = {}

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self._schema!r}, table_prefix={self._prefix!r})"

    @property
    def capabilities(self) -> StoreCapabilities:
        """Transactions, the event log and streaming are all supported."""
        return StoreCapabilities(transactions=True, log=True, streaming=True)

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        """The connection pool the store uses (its own or the injected one)."""
        return self._pool

    # --- lifecycle ----------------------------------------------------------------------

    async def migrate(self) -> None:
        """Create the schema and apply the DDL versions not applied yet. Idempotent."""
        async with bounded("migrate", self._timeouts) as guard:
            try:
                with store_errors("migrate"):
                    await self._open()
                    async with self._pool.connection() as conn:
                        guard.conn = conn
                        await self._apply_migrations(conn)
            except StoreError as error:
                better = await self._explained("migrate", guard, error)
                if better is None:
                    raise
                raise better from error.__cause__ or error
        self._migrated = True

    async def close(self) -> None:
        """Close the pool if the store created it or was given ``close_pool=True`` (the
        store cannot be used afterwards); any other injected pool is left open."""
        with store_errors("close"):
            if self._closes_pool and self._opened:
                await self._pool.close()
        self._opened = not self._owns_pool
        self._migrated = False

    async def _open(self) -> None:
        if not self._opened:
            async with self._ready_lock:
                if not self._opened:
                    await self._pool.open()
                    self._opened = True

    async def _apply_migrations(self, conn: psycopg.AsyncConnection[Any]) -> None:
        schema, prefix = self._schema, self._prefix
        versions = f'"{schema}"."{prefix}migrations"'
        # The common case, a schema already at the newest version: read it without the
        # lock, the catalog checks or the migration files. Versions only ever go up.
        cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (versions,))
        if (await cur.fetchone() or (False,))[0]:
            cur = await conn.execute(f"SELECT max(version) FROM {versions}")
            newest = (await cur.fetchone() or (None,))[0]
            if newest is not None and newest >= SCHEMA_VERSION:
                return
        # One lock per schema: concurrent CREATE SCHEMA / CREATE TABLE IF NOT EXISTS still
        # collide on the catalog's unique indexes without it.
        digest = hashlib.sha256(f"watukuy:migrate:{schema}".encode()).digest()
        async with conn.transaction():
            lock_key = int.from_bytes(digest[:8], "big", signed=True)
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
            # Look before creating: CREATE ... IF NOT EXISTS still needs the privilege.
            cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
            if await cur.fetchone() is None:
                await conn.execute(f'CREATE SCHEMA "{schema}"')
            cur = await conn.execute("SELECT to_regclass(%s) IS NULL", (versions,))
            if (await cur.fetchone() or (True,))[0]:
                await conn.execute(
                    f"CREATE TABLE {versions} (version integer PRIMARY KEY, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
            cur = await conn.execute(f"SELECT version FROM {versions}")
            applied = {version for (version,) in await cur.fetchall()}
            for version, name, text in _migration_files():
                if version not in applied:
                    await conn.execute(
                        text.replace("{{schema}}", schema).replace("{{prefix}}", prefix)
                    )
                    await conn.execute(
                        f"INSERT INTO {versions} (version, name) VALUES (%s, %s)", (version, name)
                    )

    @asynccontextmanager
    async def _connection(self, what: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection of a ready store; driver errors become ``StoreError``, and
        the whole call is bounded by the store's ``timeout`` (see ``_pg_timeouts``)."""
        async with bounded(what, self._timeouts) as guard:
            try:
                with store_errors(what):
                    if not self._migrated:
                        await self._open()
                        async with self._ready_lock:
                            if not self._migrated:
                                async with self._pool.connection() as conn:
                                    guard.conn = conn
                                    await self._apply_migrations(conn)
                                guard.conn = None
                                self._migrated = True
                    async with self._pool.connection() as conn:
                        guard.conn = conn
                        try:
                            yield conn
                        except BaseException as error:
                            if not isinstance(error, Exception):
                                # Cancelled (or the process is going down) half way through
                                # a call: the connection may sit inside a transaction or a
                                # pipeline, and the pool must never lend it again. Closing
                                # is synchronous, so it works even while the task is being
                                # cancelled; the pool replaces it.
                                conn.pgconn.finish()
                            raise
            except StoreError as error:
                better = await self._explained(what, guard, error)
                if better is None:
                    raise
                raise better from error.__cause__ or error

    async def _explained(self, what: str, guard: Guard, error: StoreError) -> StoreError | None:
        """A clearer ``StoreError`` for a call that timed out or got no connection."""
        if guard.expired:
            return expired_error(what, self._timeouts, error)
        if isinstance(error.__cause__, PoolTimeout):
            reason = await diagnose(self._conninfo, self._timeouts)
            if reason is not None:
                return StoreError(f"{what}: {reason}")
        return None

    async def _fetch(self, what: str, query: str, params: Sequence[Any]) -> list[Any]:
        async with self._connection(what) as conn:
            cur = await conn.execute(self._q[query], params)
            return await cur.fetchall()

    async def _count(self, what: str, query: str, params: Sequence[Any]) -> int:
        """Run ``query``; the first column of its row when it returns one, else its rowcount."""
        async with self._connection(what) as conn:
            cur = await conn.execute(self._q[query], params)
            if cur.description is None:
                return cur.rowcount
            row = await cur.fetchone()
            return int(row[0]) if row is not None else 0

    async def _patch(
        self,
        what: str,
        key: PKey,
        lease: Lease,
        statements: Sequence[tuple[str, tuple[Any, ...]]],
        patch: dict[str, Any],
    ) -> None:
        """One fenced transaction: ``statements``, then ``patch`` over the key's state.

        When the store knows the stored state (it wrote or read it last, under this lease),
        the new document is made here and the fence compares the stored one with the known
        one (``fence_state``): the whole transaction is one round trip. Otherwise, or when
        the stored state moved (an administrative write), the state is read under the row
        lock first: two round trips.
        """
        known = self._states.pop(key, None)
        if known is not None and (known.lease.owner, known.lease.epoch) == (
            lease.owner,
            lease.epoch,
        ):
            fields = _patched(known.fields, patch)
            written = json.dumps(fields) if patch else None
            try:
                async with self._fenced(what, key, lease, known.text) as conn:
                    await self._run(conn, key, statements)
                    await self._write_state(conn, key, written, fields.get("wake_at"))
            except StoreError as error:
                cause = error.__cause__
                if not (isinstance(cause, psycopg.Error) and cause.sqlstate == _STATE_MOVED):
                    raise
            else:
                self._know(key, _KnownState(lease, written or known.text, fields))
                return
        async with self._fenced_state(what, key, lease) as (conn, stored, text):
            await self._run(conn, key, statements)
            fields = _patched(stored, patch)
            written = json.dumps(fields) if patch else None
            await self._write_state(conn, key, written, fields.get("wake_at"))
        self._know(key, _KnownState(lease, written or text, fields))

    async def _run(
        self,
        conn: psycopg.AsyncConnection[Any],
        key: PKey,
        statements: Sequence[tuple[str, tuple[Any, ...]]],
    ) -> None:
        for name, params in statements:
            await conn.execute(self._q[name], (*_k(key), *params))

    def _know(self, key: PKey, known: _KnownState) -> None:
        self._states[key] = known
        if len(self._states) > _KNOWN_STATES:
            del self._states[next(iter(self._states))]

    @asynccontextmanager
    async def _fenced(
        self, what: str, key: PKey, lease: Lease, state: str | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A transaction that starts with the fence: it takes the key's row lock while
        ``lease`` is current and fails before any write otherwise (``LeaseLostError``).

        Nothing in it waits for an answer, so in pipeline mode ``BEGIN``, the fence, the
        statements of the block and ``COMMIT`` travel together: one round trip, and the
        row lock is held only while the server runs them.
        """
        async with self._connection(what) as conn:
            try:
                async with _pipeline(conn), conn.transaction():
                    if state is None:
                        params: tuple[Any, ...] = (*_k(key), lease.owner, lease.epoch)
                        await conn.execute(self._q["fence"], params)
                    else:
                        params = (*_k(key), lease.owner, lease.epoch, state)
                        await conn.execute(self._q["fence_state"], params)
                    yield conn
            except psycopg.Error as error:
                if error.sqlstate == _LEASE_LOST:
                    raise LeaseLostError(key.poller, key.partition, lease.epoch) from None
                raise

    @asynccontextmanager
    async def _fenced_state(
        self, what: str, key: PKey, lease: Lease
    ) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], dict[str, Any], str]]:
        """A transaction holding the key's row lock, entered only while ``lease`` is current,
        for a write that patches the state: yields the connection, the key's state fields
        and the stored document. The lock's answer is read before the block runs: two round
        trips."""
        async with self._connection(what) as conn, _pipeline(conn), conn.transaction():
            cur = await conn.execute(self._q["lock"], _k(key))
            row = await cur.fetchone()
            if row is None or row[0] != lease.owner or row[1] != lease.epoch:
                raise LeaseLostError(key.poller, key.partition, lease.epoch)
            yield conn, json.loads(row[2]), row[2]

    async def _write_state(
        self,
        conn: psycopg.AsyncConnection[Any],
        key: PKey,
        text: str | None,
        wake_at: int | None,
    ) -> None:
        """Write the key's state document (nothing for ``None``: no patch) and its
        ``wake_at`` copy, inside the caller's transaction."""
        if text is not None:
            await conn.execute(self._q["write_state"], (text, wake_at, *_k(key)))

    @staticmethod
    def _encoded_patch(patch: StatePatch) -> dict[str, Any]:
        fields = patch_to_fields(patch)
        json.dumps(fields)  # fail on a value JSON cannot hold before any I/O
        return fields

    async def server_time(self) -> int:
        """The database server's clock, epoch milliseconds (``clock_timestamp()``); the
        engine compares it with its own at start (see
        https://watukuy.readthedocs.io/en/latest/stores/#clocks-and-leases)."""
        rows = await self._fetch("server_time", "server_time", ())
        return int(rows[0][0])

    # --- leases -------------------------------------------------------------------------

    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        """Take the key's lease when it is free or expired (creating the key if needed)."""
        state, wake_at = _initial_state(now)
        k = _k(key)
        params = (*k, state, wake_at, owner, now + ttl_ms, now)
        async with self._connection("acquire_lease") as conn, conn.transaction():
            cur = await conn.execute(self._q["acquire"], params)
            row = await cur.fetchone()
            if row is None:
                return None
            # A key deleted and created again continues from its epoch floor.
            cur = await conn.execute(self._q["raise_epoch"], (*k, owner))
            raised = await cur.fetchone()
        return Lease(owner, (raised or row)[0], now + ttl_ms)

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        """Extend the lease to ``now + ttl_ms`` while owner and epoch still match."""
        params = (now + ttl_ms, *_k(key), lease.owner, lease.epoch)
        return await self._count("renew_lease", "renew", params) == 1

    async def release_lease(self, key: PKey, lease: Lease) -> None:
        """Clear the owner when the lease is still ours; the epoch is kept."""
        params = (*_k(key), lease.owner, lease.epoch)
        await self._count("release_lease", "release", params)

    async def get_lease(self, key: PKey) -> Lease | None:
        """The stored lease (expired or not), or ``None`` when nobody holds it."""
        rows = await self._fetch("get_lease", "get_lease", _k(key))
        if not rows or rows[0][0] is None:
            return None
        owner, epoch, expires_at = rows[0]
        return Lease(owner, epoch, expires_at if expires_at is not None else 0)

    # --- state --------------------------------------------------------------------------

    async def load_state(self, key: PKey) -> PollerState | None:
        """The key's state, or ``None`` for a key never seen."""
        rows = await self._fetch("load_state", "load_state", _k(key))
        return state_from_fields(json.loads(rows[0][0])) if rows else None

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        """Fenced partial update of the key's state."""
        fields = self._encoded_patch(patch)
        await self._patch("save_state", key, lease, (), fields)

    async def save_state_unfenced(self, key: PKey, patch: StatePatch, now: int) -> None:
        """Administrative partial update; creates the key first when needed."""
        fields = self._encoded_patch(patch)
        self._states.pop(key, None)  # the commit after it reads the state again
        initial = _initial_state(now)
        k = _k(key)
        async with self._connection("save_state_unfenced") as conn, conn.transaction():
            await conn.execute(self._q["create"], (*k, *initial))
            cur = await conn.execute(self._q["lock"], k)
            row = await cur.fetchone()
            stored = json.loads(row[2]) if row is not None else {}
            stored.update(fields)
            text = json.dumps(stored) if fields else None
            await self._write_state(conn, key, text, stored.get("wake_at"))

    async def list_keys(self, poller: str | None = None) -> list[PKey]:
        """Every key, optionally of one poller, sorted by (poller, partition)."""
        if poller is None:
            rows = await self._fetch("list_keys", "list_keys", ())
        else:
            rows = await self._fetch("list_keys", "list_keys_of", (poller,))
        return [PKey(name, _dec(partition)) for name, partition in rows]

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """``(partition, wake_at)`` of the keys of ``poller`` due at ``until``, ordered by
        ``(wake_at, partition)``; read from the partial index on ``wake_at``."""
        if limit is not None and limit <= 0:
            return []
        rows = await self._fetch("due_keys", "due_keys", (poller, until, limit))
        return [(_dec(partition), wake_at) for partition, wake_at in rows]

    async def delete_key(self, key: PKey) -> None:
        """Remove every row of the key in every table, in one transaction that first takes
        the key's row lock, so a commit in flight lands entirely before the delete and
        leaves nothing behind. The key's last epoch is kept (see ``0003_epoch_floors``)."""
        k = _k(key)
        async with self._connection("delete_key") as conn, _pipeline(conn), conn.transaction():
            await (await conn.execute(self._q["lock_key"], k)).fetchall()
            await self._delete_rows(conn, k)

    async def _delete_rows(self, conn: psycopg.AsyncConnection[Any], k: tuple[str, str]) -> None:
        await conn.execute(self._q["keep_epoch"], k)
        for name in _CHILD_DELETES:
            await conn.execute(self._q[name], k)
        await conn.execute(self._q["delete_poller"], k)

    async def clear_items(self, key: PKey) -> None:
        """Drop the key's snapshot only, leaving a ``"cleared"`` tombstone for each row
        (after the key's row lock, like ``delete_key``)."""
        k = _k(key)
        async with self._connection("clear_items") as conn, _pipeline(conn), conn.transaction():
            await conn.execute(self._q["lock_key"], k)
            await conn.execute(self._q["clear_items"], k)

    async def clear_validators(self, key: PKey) -> None:
        """Forget every validator of the key (unfenced, after the key's row lock)."""
        k = _k(key)
        async with (
            self._connection("clear_validators") as conn,
            _pipeline(conn),
            conn.transaction(),
        ):
            await conn.execute(self._q["lock_key"], k)
            await conn.execute(self._q["delete_validators_of"], k)

    async def load_tombstones(self, key: PKey, identities: Sequence[str]) -> dict[str, Tombstone]:
        """The tombstones of those identities that have one."""
        if not identities:
            return {}
        params = (*_k(key), _encoded(identities))
        rows = await self._fetch("load_tombstones", "load_tombstones", params)
        return {
            _dec(row[0]): Tombstone(_dec(row[0]), _dec_or_none(row[1]), *row[2:]) for row in rows
        }

    async def prune_tombstones(self, key: PKey, older_than: int) -> int:
        """Delete tombstones removed before ``older_than``; returns how many."""
        return await self._count("prune_tombstones", "prune_tombstones", (*_k(key), older_than))

    # --- items --------------------------------------------------------------------------

    async def load_versions(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemRow]:
        """The stored rows of those identities that exist."""
        if not identities:
            return {}
        params = (*_k(key), _encoded(identities))
        rows = await self._fetch("load_versions", "load_versions", params)
        return {_dec(row[0]): ItemRow(_dec(row[0]), _dec_or_none(row[1]), *row[2:]) for row in rows}

    async def load_marks(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemMark]:
        """The seen mark and listing link of each stored identity among ``identities``:
        one primary-key probe per identity, up to 1,000 identities per statement."""
        wanted = list(dict.fromkeys(identities))
        if not wanted:
            return {}
        out: dict[str, ItemMark] = {}
        async with self._connection("load_marks") as conn:
            for start in range(0, len(wanted), _MARKS_CHUNK):
                chunk = _encoded(wanted[start : start + _MARKS_CHUNK])
                cur = await conn.execute(self._q["load_marks"], (*_k(key), chunk))
                for identity, seen, read, prev, next_ in await cur.fetchall():
                    link = (
                        None
                        if read is None
                        else ListingLink(read, _dec_or_none(prev), _dec_or_none(next_))
                    )
                    out[_dec(identity)] = ItemMark(seen, link)
        return out

    async def stream_identities(
        self, key: PKey, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """Every identity of the key in code-point order, one keyset-paginated batch at a
        time; a connection is held only while a batch is read."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"must be at least 1, got {batch_size!r}", field="batch_size")
        pages = self._keyset_pages(
            "stream_identities", "stream_first", "stream_next", _k(key), batch_size
        )
        async for chunk in pages:
            yield chunk

    async def stream_unseen(
        self, key: PKey, before: int, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """The identities whose seen mark is below ``before``, in code-point order, one
        keyset-paginated batch at a time."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"must be at least 1, got {batch_size!r}", field="batch_size")
        pages = self._keyset_pages(
            "stream_unseen", "unseen_first", "unseen_next", (*_k(key), before), batch_size
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
        """Identities ``batch_size`` at a time, decoded: ``first`` opens the range,
        ``after_query`` continues it after the last stored identity returned."""
        after: str | None = None
        while True:
            if after is None:
                rows = await self._fetch(operation, first, (*params, batch_size))
            else:
                rows = await self._fetch(operation, after_query, (*params, after, batch_size))
            stored = [row[0] for row in rows]
            if stored:
                yield [_dec(identity) for identity in stored]
            if len(stored) < batch_size:
                return
            after = stored[-1]

    async def count_items(self, key: PKey) -> int:
        """Size of the key's snapshot."""
        return await self._count("count_items", "count_items", _k(key))

    # --- commit and outbox --------------------------------------------------------------

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """Write a page (state, snapshot delta, events, log, parked rows) in one transaction."""
        # Everything is encoded before the transaction opens, so a bad value costs no I/O.
        # Postgres refuses to touch a row twice in one statement: the last row of an id
        # wins, and a delete wins over an upsert in the same batch (deletes apply last).
        deleted = list(dict.fromkeys(batch.deletes))
        gone = set(deleted)
        items = [
            r for r in {r.identity: r for r in batch.upserts}.values() if r.identity not in gone
        ]
        events = list({r.event_id: r for r in batch.events}.values())
        logged = list({r.sequence: r for r in batch.events}.values()) if batch.log else []
        parked = _parked_columns({r.id: r for r in batch.parked}.values())
        fields = self._encoded_patch(batch.state_patch)
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if items:
            # A page whose rows are all at revision 0 is, nearly always, a page of items
            # never seen: their rows go in with a plain insert, which costs the server 40%
            # less than the upsert. A row that exists all the same (a version that moved
            # while the hash did not) fails the insert; the page is then written again with
            # the upsert, and so are the key's pages after it.
            plain = key not in self._upserted_keys and all(r.revision == 0 for r in items)
            statements.append(_item_statement(items, plain=plain))
        revived = list(dict.fromkeys(batch.revived))
        if revived:
            statements.append(("revive", (_encoded(revived),)))
        marked = [identity for identity in dict.fromkeys(batch.seen) if identity not in gone]
        if marked and not batch.links:
            statements.append(("mark_items", (int(batch.seen_pass), _encoded(marked))))
        if deleted:
            statements.append(("delete_items", (_encoded(deleted), batch.now)))
        if batch.links:
            links = link_rows(batch.links)
            statements.append(_mark_and_link_statement(int(batch.seen_pass), marked, links))
        if events:
            statements.append(_event_statement(events))
        if logged:
            seqs, texts = [r.sequence for r in logged], [r.event for r in logged]
            statements.append(("upsert_log", (batch.now, seqs, texts)))
        if parked[0]:
            statements.append(("upsert_parked", parked))
        try:
            await self._commit_page(key, lease, statements, fields)
        except StoreError as error:
            table = self._row_taken(error, statements)
            if table is None:
                raise
            # A snapshot row of the page exists already, or an event id of the page is
            # still pending (an item that flipped back while its old event waited):
            # nothing was written; write the page again, replacing the rows it names.
            if table == "items":
                self._upserted_keys.add(key)
            again = [(_REPLACING.get(name, name), params) for name, params in statements]
            await self._commit_page(key, lease, again, fields)

    async def _commit_page(
        self,
        key: PKey,
        lease: Lease,
        statements: Sequence[tuple[str, tuple[Any, ...]]],
        fields: dict[str, Any],
    ) -> None:
        """One fenced transaction: the page's statements, then the state patch."""
        await self._patch("commit_poll", key, lease, statements, fields)

    def _row_taken(
        self, error: StoreError, statements: Sequence[tuple[str, tuple[Any, ...]]]
    ) -> str | None:
        """The table (``"items"`` or ``"outbox"``) when ``error`` is a plain insert of the
        page meeting a row already stored, else ``None``."""
        cause = error.__cause__
        if not isinstance(cause, psycopg.errors.UniqueViolation):
            return None
        for name, _ in statements:
            table = _PLAIN_TABLE.get(name)
            if table is not None and cause.diag.table_name == f"{self._prefix}{table}":
                return table
        return None

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        """Up to ``limit`` pending rows in sequence order (never filtered by retry time),
        only those after ``after_sequence`` when it is given."""
        if limit <= 0:
            return []
        after = _MIN_BIGINT if after_sequence is None else after_sequence
        rows = await self._fetch("load_pending", "load_pending", (*_k(key), after, limit))
        return [
            OutboxRow(
                event_id=event_id,
                sequence=seq,
                event=event,
                attempts=attempts,
                next_attempt_at=next_attempt_at,
                last_error=json.loads(error) if error is not None else None,
                created_at=created_at,
            )
            for event_id, seq, event, attempts, next_attempt_at, error, created_at in rows
        ]

    async def count_pending(self, key: PKey) -> int:
        """Number of pending outbox rows."""
        return await self._count("count_pending", "count_pending", _k(key))

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        """Delete delivered rows (fenced); unknown ids are ignored."""
        async with self._fenced("ack_events", key, lease) as conn:
            if event_ids:
                await conn.execute(self._q["ack"], (*_k(key), list(event_ids)))

    async def record_attempt(
        self,
        key: PKey,
        lease: Lease,
        event_id: str,
        error: SerializedError,
        next_attempt_at: int | None,
    ) -> None:
        """Count a failed delivery of ``event_id`` (fenced)."""
        params = (json.dumps(error), next_attempt_at, *_k(key), event_id)
        async with self._fenced("record_attempt", key, lease) as conn:
            await conn.execute(self._q["record_attempt"], params)

    async def park_event(self, key: PKey, lease: Lease, row: ParkedRow) -> None:
        """Insert the parked row and delete the outbox row of the same id, atomically."""
        columns = _parked_columns([row])
        async with self._fenced("park_event", key, lease) as conn:
            await conn.execute(self._q["upsert_parked"], (*_k(key), *columns))
            await conn.execute(self._q["ack"], (*_k(key), [row.id]))

    async def list_parked(
        self, key: PKey, kind: ParkedKind | None = None, limit: int | None = None
    ) -> list[ParkedRow]:
        """Parked rows ordered by (parked_at, id), optionally of one kind, at most ``limit``."""
        bound = None if limit is None else max(limit, 0)
        rows = await self._fetch("list_parked", "list_parked", (*_k(key), kind, kind, bound))
        return [
            ParkedRow(
                id_, kind_, event, item, json.loads(error), attempts, at, _dec_or_none(hold), seq
            )
            for id_, kind_, event, item, error, attempts, at, hold, seq in rows
        ]

    async def count_parked(self, key: PKey) -> int:
        """Number of parked rows of either kind."""
        return await self._count("count_parked", "count_parked", _k(key))

    async def retry_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Move parked poison rows back to the outbox at their sequence; returns the count."""
        if not ids:
            return 0
        async with self._connection("retry_parked") as conn, conn.transaction():
            # The key's row lock first: a concurrent delete_key then waits for these rows.
            await conn.execute(self._q["lock_key"], _k(key))
            cur = await conn.execute(self._q["lock_poison"], (*_k(key), list(ids)))
            rows = [
                ParkedRow(id_, "poison", event, None, {}, 0, parked_at, None, seq)
                for id_, seq, event, parked_at in await cur.fetchall()
            ]
            if rows:
                moved = [r.id for r in rows]
                params = (
                    moved,
                    [_envelope_sequence(r) for r in rows],
                    [r.event for r in rows],
                    [0] * len(rows),
                    [None] * len(rows),
                    [None] * len(rows),
                    [r.parked_at for r in rows],
                )
                await conn.execute(self._q["upsert_outbox"], (*_k(key), *params))
                await conn.execute(self._q["discard_parked"], (*_k(key), moved))
            return len(rows)

    async def discard_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Delete parked rows of either kind; returns the count."""
        if not ids:
            return 0
        return await self._count("discard_parked", "discard_parked", (*_k(key), list(ids)))

    async def held_keys(self, key: PKey) -> set[str]:
        """Ordering keys held back by parked rows."""
        return {_dec(row[0]) for row in await self._fetch("held_keys", "held_keys", _k(key))}

    # --- validators ---------------------------------------------------------------------

    async def get_validator(self, key: PKey, url_hash: str) -> Validator | None:
        """The stored validators of a URL hash."""
        rows = await self._fetch("get_validator", "get_validator", (*_k(key), url_hash))
        return Validator(*rows[0]) if rows else None

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        """Store validators of a URL hash (fenced)."""
        v = validator
        params = (*_k(key), url_hash, v.etag, v.last_modified, v.stored_at)
        async with self._fenced("set_validator", key, lease) as conn:
            await conn.execute(self._q["set_validator"], params)

    # --- log ----------------------------------------------------------------------------

    async def read_log(
        self,
        key: PKey,
        *,
        after_sequence: int | None = None,
        from_time: int | None = None,
        to_time: int | None = None,
        limit: int = 1000,
    ) -> list[LoggedEvent]:
        """Logged events in sequence order within the given sequence and time bounds."""
        if limit <= 0:
            return []
        params = (
            *_k(key),
            _MIN_BIGINT if after_sequence is None else after_sequence,
            _MIN_BIGINT if from_time is None else from_time,
            _MAX_BIGINT if to_time is None else to_time,
            limit,
        )
        return [LoggedEvent(*row) for row in await self._fetch("read_log", "read_log", params)]

    async def prune_log(self, key: PKey, older_than: int) -> int:
        """Delete log entries created before ``older_than``; returns the count."""
        return await self._count("prune_log", "prune_log", (*_k(key), older_than))


class _KnownState(NamedTuple):
    """A state document as this store last wrote or read it, and the lease it did so under."""

    lease: Lease
    text: str
    fields: dict[str, Any]


def _patched(stored: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` over a copy of ``stored``; a patch that sets ``wake_at`` but not ``paused``
    (a run that began before a pause) leaves a paused key asleep."""
    if "wake_at" in patch and "paused" not in patch and stored.get("paused"):
        patch = {**patch, "wake_at": None}
    return {**stored, **patch}


def _k(key: PKey) -> tuple[str, str]:
    """A key as its two column values (the partition encoded, see :func:`_enc`)."""
    return (key.poller, _enc(key.partition))


_NUL, _ESC = "\x00", "\x01"


def _item_statement(items: Sequence[ItemRow], *, plain: bool) -> tuple[str, tuple[Any, ...]]:
    """The upsert of a commit's snapshot rows (a plain insert with ``plain``): one array
    per column, except the schema version and ``seen_at`` when every row has the same (a
    page's rows do), bound once. Arrays cost the driver a dump per element; these are 2,000
    fewer per 1,000 rows."""
    verb = "insert" if plain else "upsert"
    identities = [_enc(r.identity) for r in items]
    versions = [None if r.version is None else _enc(r.version) for r in items]
    hashes = [r.hash for r in items]
    payloads = [r.payload for r in items]
    revisions = [r.revision for r in items]
    shared = shared_item_fields(items)
    if shared is not None:
        return f"{verb}_items_shared", (*shared, identities, versions, hashes, payloads, revisions)
    return (
        f"{verb}_items",
        (
            identities,
            versions,
            hashes,
            [r.schema_version for r in items],
            payloads,
            [r.seen_at for r in items],
            revisions,
        ),
    )


def _mark_and_link_statement(
    seen_pass: int, marked: Sequence[str], links: Sequence[LinkRow]
) -> tuple[str, tuple[Any, ...]]:
    """The seen marks and listing links of a commit as one update: one array per column,
    a row per identity, ``None`` where the identity has no mark or no link to write
    (identities and neighbours encoded like every key column, see :func:`_enc`)."""
    rows: dict[str, list[Any]] = {identity: [seen_pass, None, None, None] for identity in marked}
    for identity, read, prev, next_ in links:
        if not _MIN_BIGINT <= read <= _MAX_BIGINT:
            raise ValueError(f"a listing link's read must fit in 64 bits, got {read!r}")
        rows.setdefault(identity, [None, None, None, None])[1:] = (read, prev, next_)
    return (
        "mark_and_link_items",
        (
            [_enc(identity) for identity in rows],
            [row[0] for row in rows.values()],
            [row[1] for row in rows.values()],
            [_enc_or_none(row[2]) for row in rows.values()],
            [_enc_or_none(row[3]) for row in rows.values()],
        ),
    )


def _event_statement(events: Sequence[OutboxRow]) -> tuple[str, tuple[Any, ...]]:
    """The write of a commit's outbox rows: new events (no attempt, retry time nor error
    yet, one creation time) bind those once and three arrays, in a plain insert (see
    ``insert_outbox_new``); others are upserted with one array per column."""
    ids = [r.event_id for r in events]
    sequences = [r.sequence for r in events]
    texts = [r.event for r in events]
    shared = shared_event_fields(events)
    if shared is not None:
        return "insert_outbox_new", (*shared, ids, sequences, texts)
    return (
        "upsert_outbox",
        (
            ids,
            sequences,
            texts,
            [r.attempts for r in events],
            [r.next_attempt_at for r in events],
            [_json_or_none(r.last_error) for r in events],
            [r.created_at for r in events],
        ),
    )


def _enc(text: str) -> str:
    """``text`` as a ``text`` column can hold it: ``U+0001`` is written ``U+0001 U+0002``
    and ``U+0000`` (which PostgreSQL refuses) ``U+0001 U+0001``. Every other string is
    itself. The code is prefix-free and keeps code-point order, so ``ORDER BY`` and keyset
    pagination over encoded values follow the order of the strings themselves."""
    if _NUL in text or _ESC in text:
        return text.replace(_ESC, "\x01\x02").replace(_NUL, "\x01\x01")
    return text


def _dec(text: str) -> str:
    """The inverse of :func:`_enc`."""
    if _ESC in text:
        return text.replace("\x01\x01", _NUL).replace("\x01\x02", _ESC)
    return text


def _dec_or_none(text: str | None) -> str | None:
    return None if text is None else _dec(text)


def _enc_or_none(text: str | None) -> str | None:
    return None if text is None else _enc(text)


def _encoded(texts: Iterable[str]) -> list[str]:
    return [_enc(text) for text in texts]
