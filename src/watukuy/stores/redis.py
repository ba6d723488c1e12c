"""The Redis store and the Redis budget store: shared state and shared rate budgets.

Built on ``redis.asyncio``. Give either class a client you own (it is never closed by the
store), or build one with :meth:`RedisStore.from_url` (no I/O until first use; closed by
``close()``).

How :class:`RedisStore` keeps the contract:

- **One script per write.** Every fenced write is one Lua script (``stores/lua/*.lua``)
  that compares the lease owner and epoch and then performs the whole mutation, so a stale
  holder changes nothing and ``commit_poll`` is all or nothing.
- **Opaque payloads.** Scripts never decode JSON: events, payloads and items travel and
  rest as the exact strings watukuy wrote, so big integers and unicode round-trip byte for
  byte.
- **Cluster-safe keys.** Every key of one (poller, partition) carries the same hash tag,
  ``{<poller>:<partition>}`` with both parts percent-encoded (``:``, ``{``, ``}``, ``%`` and
  non-ASCII included), so each script touches a single slot. A prefix holding ``{`` or
  ``}`` would break that and is refused.
- **The known keys.** ``<prefix>keys``, the set ``list_keys`` reads, lives outside the
  tags. On a standalone server the scripts that create (``acquire``,
  ``save_state_unfenced``) or delete a key update it in the same atomic step. In a
  cluster it is updated right after the script, and a crash in between is repaired by the
  engine's rolling audit: ``load_state`` (called for a few listed keys every resync) adds
  a missing entry of the key it reads, and ``due_keys`` (called for every poller every
  resync) walks the set a few entries at a time and drops entries whose key is gone.
- **Epochs never repeat.** ``delete_key`` keeps the key's last epoch in
  ``<prefix>{<tag>}:epoch`` (never deleted, one small string per deleted key) and
  ``acquire`` continues after it.
- **The due index.** ``<prefix>{<poller>}:due`` (poller percent-encoded) is a sorted set of
  the poller's partitions scored by the ``wake_at`` field of their state, for
  :meth:`~RedisStore.due_keys`. On a standalone server every script that writes a state
  also updates it, in the same atomic step. Redis Cluster does not let one script touch
  two slots, and the set cannot share every partition's slot, so there the store updates
  it with one ``ZADD``/``ZREM`` right after a script that creates a key (a new key is due
  at once) or whose patch carries ``wake_at``.
  Between the two a concurrent writer's update of the same key can land out of order, and
  a crash can skip the second step, leaving the index stale for that key until its next
  state write. Callers treat ``due_keys`` as a hint and re-read the state before acting.

Layout under ``<prefix>{<tag>}:``::

    meta        hash   lease_owner, lease_epoch, lease_expires_at
    state       hash   one JSON value per top-level PollerState field
    items       hash   identity -> JSON [version, hash, schema_version, payload, seen_at,
                                        revision] (revision left out when it is 0)
    ids         zset   identity (score 0): code-point order for stream_identities
    outbox      zset   event id by sequence (pending rows)
    rows        hash   event id -> "<sequence>:<created_at>:<event>"
    attempts    hash   event id -> failed attempts
    errors      hash   event id -> JSON [last_error, next_attempt_at]
    parked      hash   id -> JSON [id, kind, event, item, error, attempts, parked_at,
                                  hold_key, sequence]
    retry       hash   poison id -> the outbox form of the event, for retry_parked
    hold        hash   id -> held ordering key
    validators  hash   url hash -> JSON [etag, last_modified, stored_at]
    log         zset   sequence by sequence
    logrows     hash   sequence -> "<created_at>:<event>"
    logtime     zset   sequence by created_at (for prune_log)
    epoch       string the last epoch of a deleted key (kept by delete_key)
    tombs       hash   identity -> "<reason>:<removed_at>:<the items row it was>"
    tombtime    zset   identity by removed_at (for prune_tombstones)
    seen        hash   identity -> seen mark of a full-listing pass (absent: 0)
    links       hash   identity -> JSON [read, prev, next], its listing link (absent: none)
    parkpoison  zset   poison id by parked_at  } the parked-row indexes list_parked reads
    parkinvalid zset   invalid id by parked_at }  (kept in step with ``parked`` by every script)

plus ``<prefix>keys`` (a set of JSON ``[poller, partition]``), ``<prefix>{<poller>}:due``
(sorted set: partition by ``wake_at``, keys with a ``None`` wake time left out) and, for
:class:`RedisBudgetStore`, ``<prefix>budget:<name>`` (sorted set: the grants of the last
window, score = grant time, member ``<time>:<seq>:<cost>``; it expires with its newest grant).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from typing import Any, NamedTuple, cast
from urllib.parse import quote

from watukuy.model import json
from watukuy.model.errors import ConfigError, LeaseLostError, SerializedError
from watukuy.model.ports import BudgetPolicy, check_budget_args
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
    TombstoneReason,
    Validator,
    empty_poller_state,
    patch_to_fields,
    state_from_fields,
    state_to_fields,
)
from watukuy.stores._commit_rows import link_rows
from watukuy.stores._errors import store_errors
from watukuy.stores._redis_durability import warn_if_not_persistent

try:
    import redis.asyncio as aioredis
except ImportError as _error:  # pragma: no cover - exercised only without the extra
    _MISSING: ImportError | None = _error
else:
    _MISSING = None

__all__ = ["RedisBudgetStore", "RedisStore"]

_STORE_SCRIPTS = (
    "acquire",
    "renew",
    "release",
    "save_state",
    "save_state_unfenced",
    "commit",
    "ack",
    "record_attempt",
    "park",
    "retry_parked",
    "discard_parked",
    "set_validator",
    "delete_key",
    "load_pending",
    "read_log",
    "prune_log",
    "clear_items",
    "load_marks",
    "prune_tombstones",
    "list_parked",
)
_PRUNE_BATCH = 1000
# load_marks: identities per script call, so a long list never holds the server for long.
_MARKS_BATCH = 1000
# Cluster: how many known-keys entries each due_keys call checks (the rolling audit).
_AUDIT_COUNT = 16
# read_log: a time window of at most _WINDOW_MAX entries is read from the time index in one
# call; a larger one is walked in sequence order, at most _SCAN_MAX entries per call.
_WINDOW_MAX = 10_000
_SCAN_MAX = 5_000
# Sane bounds for a client the store builds itself (seconds; the URL's own values win).
_DEFAULT_TIMEOUTS: dict[str, float] = {"socket_timeout": 10.0, "socket_connect_timeout": 5.0}
_MIN_WAKE, _MAX_WAKE = -(2**63), 2**63 - 1


@functools.cache
def _script_source(name: str) -> str:
    folder = resources.files("watukuy.stores").joinpath("lua")
    body = folder.joinpath(f"{name}.lua").read_text("utf-8")
    if name.startswith("budget_"):
        return body
    return folder.joinpath("_prelude.lua").read_text("utf-8") + "\n" + body


def _require_redis(what: str) -> None:
    if _MISSING is not None:
        raise ImportError(f"{what} needs redis-py: pip install 'watukuy[redis]'") from _MISSING


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise ConfigError(f"expected a string, got {prefix!r}", field="prefix")
    if "{" in prefix or "}" in prefix:
        # Redis Cluster hashes the first {...} of a key name: a brace in the prefix would
        # move the store's keys out of the per-key hash tag and split a script across slots.
        raise ConfigError(f"must not contain '{{' or '}}', got {prefix!r}", field="prefix")
    return prefix


def _text(value: bytes | str) -> str:
    # The client may or may not decode responses; the store works either way.
    return value.decode() if isinstance(value, bytes) else value


def _pairs(fields: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name, value in fields.items():
        out += (name, json.dumps(value))
    return out


def _wake_of(fields: dict[str, Any]) -> int | None:
    """The ``wake_at`` of encoded state fields, refused (``OverflowError``) outside the
    64-bit range the SQL stores keep: a score Redis cannot parse would fail a script half
    way through its writes."""
    wake_at: int | None = fields.get("wake_at")
    if wake_at is not None and not _MIN_WAKE <= wake_at <= _MAX_WAKE:
        raise OverflowError(f"wake_at {wake_at} does not fit in 64 bits")
    return wake_at


def _item_fields(value: bytes | str) -> tuple[Any, ...]:
    """``(version, hash, schema_version, payload, seen_at, revision)`` of an ``items`` value;
    a row of revision ``0`` is written without it (five fields, see :meth:`commit_poll`)."""
    fields = json.loads(value)
    if len(fields) == 5:
        fields.append(0)
    return tuple(fields)


def _link_of(value: bytes | str) -> ListingLink:
    """A ``links`` value (JSON ``[read, prev, next]``) as a :class:`ListingLink`."""
    read, prev, next_ = json.loads(value)
    return ListingLink(read, prev, next_)


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


def _outbox_form(row: OutboxRow) -> str:
    """How an outbox row rests in Redis: ``<sequence>:<created_at>:<event>``."""
    return f"{row.sequence}:{row.created_at}:{row.event}"


def _retry_form(row: ParkedRow) -> str:
    """The outbox form ``retry_parked`` moves back, for a poison row with an event."""
    if row.kind != "poison" or row.event is None:
        return ""
    return f"{_envelope_sequence(row)}:{row.parked_at}:{row.event}"


def _parked_args(row: ParkedRow) -> list[str]:
    encoded = json.dumps(
        [
            row.id,
            row.kind,
            row.event,
            row.item,
            row.error,
            row.attempts,
            row.parked_at,
            row.hold_key,
            row.sequence,
        ]
    )
    hold = "" if row.hold_key is None else "+" + row.hold_key
    return [row.id, encoded, hold, _retry_form(row), row.kind, str(row.parked_at)]


def _parked_from(text: bytes | str) -> ParkedRow:
    id_, kind, event, item, error, attempts, parked_at, hold_key, sequence = json.loads(text)
    return ParkedRow(
        id=id_,
        kind=kind,
        event=event,
        item=item,
        error=error,
        attempts=attempts,
        parked_at=parked_at,
        hold_key=hold_key,
        sequence=sequence,
    )


class _Keys(NamedTuple):
    """The Redis keys of one (poller, partition), all in one hash slot."""

    meta: str
    state: str
    items: str
    ids: str
    outbox: str
    rows: str
    attempts: str
    errors: str
    parked: str
    retry: str
    hold: str
    validators: str
    log: str
    logrows: str
    logtime: str
    tombs: str
    tombtime: str
    seen: str
    links: str
    parkpoison: str
    parkinvalid: str

    @property
    def epoch(self) -> str:
        """The key's epoch floor: written by ``delete_key``, never deleted, same slot."""
        return self.meta[: -len("meta")] + "epoch"

    @classmethod
    def of(cls, prefix: str, key: PKey) -> _Keys:
        # Percent-encoding keeps ':' inside the parts unambiguous and '{' '}' out of the tag.
        base = f"{prefix}{{{quote(key.poller, safe='')}:{quote(key.partition, safe='')}}}:"
        return cls(*(base + part for part in cls._fields))


class RedisStore:
    """A :class:`~watukuy.model.ports.StateStore` on Redis (standalone or cluster).

    Args:
        client: A ``redis.asyncio.Redis`` (or ``RedisCluster``) client; the store never
            closes it.
        prefix: Prefix of every key the store writes.

    Raises:
        ImportError: redis-py is not installed (``pip install 'watukuy[redis]'``).
        ConfigError: A prefix that is not a string.

    Example::

        store = RedisStore.from_url("redis://localhost:6379/0")
    """

    def __init__(
        self, client: aioredis.Redis | aioredis.RedisCluster, prefix: str = "watukuy:"
    ) -> None:
        _require_redis("RedisStore")
        self._prefix = _check_prefix(prefix)
        # redis-py's annotations cover its sync and async clients at once; Any keeps the
        # awaits below readable.
        self._redis: Any = client
        self._owns_client = False
        self._scripts = {
            name: client.register_script(_script_source(name)) for name in _STORE_SCRIPTS
        }
        self._known = f"{self._prefix}keys"
        # Scripts may only touch the slots of their KEYS; in a cluster the due index lives
        # in another slot than the state it mirrors, so it is updated outside the script.
        self._due_in_script = not isinstance(client, aioredis.RedisCluster)
        self._audit_cursor = 0  # cluster: where the known-keys audit goes on (SSCAN)

    @classmethod
    def from_url(cls, url: str, prefix: str = "watukuy:", **options: Any) -> RedisStore:
        """A store with its own client for ``url`` (connected lazily, closed by ``close()``).

        Every call is bounded in time: connecting by ``socket_connect_timeout`` (default
        5 s) and waiting for an answer by ``socket_timeout`` (default 10 s); past them the
        call fails with ``StoreError``. Both may be passed here or in the URL
        (``redis://host/0?socket_timeout=2&socket_connect_timeout=1``, seconds), which wins.
        A client you build yourself for ``RedisStore(client)`` should set them too: without
        ``socket_timeout`` a server that stops answering is waited for forever.

        Args:
            url: A ``redis://`` or ``rediss://`` URL.
            prefix: Prefix of every key the store writes.
            **options: Passed to ``redis.asyncio.from_url``.
        """
        _require_redis("RedisStore")
        options = {**_DEFAULT_TIMEOUTS, **options}
        store = cls(aioredis.from_url(url, **options), prefix)
        store._owns_client = True
        return store

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self._prefix!r})"

    @property
    def capabilities(self) -> StoreCapabilities:
        """Transactions (one script per write), the event log and streaming."""
        return StoreCapabilities(transactions=True, log=True, streaming=True)

    @property
    def client(self) -> Any:
        """The Redis client the store uses."""
        return self._redis

    def _keys(self, key: PKey) -> _Keys:
        return _Keys.of(self._prefix, key)

    def _member(self, key: PKey) -> str:
        return json.dumps([key.poller, key.partition])

    def _due_key(self, poller: str) -> str:
        return f"{self._prefix}{{{quote(poller, safe='')}}}:due"

    def _script_due(self, key: PKey) -> list[str]:
        """The due index as the optional last KEYS entry of a state-writing script."""
        return [self._due_key(key.poller)] if self._due_in_script else []

    def _script_indexes(self, key: PKey) -> list[str]:
        """The due index and the known-keys set, the optional last KEYS entries of a script
        that may create a key (standalone Redis: one atomic step with the state)."""
        return [self._due_key(key.poller), self._known] if self._due_in_script else []

    async def _sync_due(
        self, what: str, key: PKey, fields: dict[str, Any], *, paused: bool = False
    ) -> None:
        """Cluster mode: mirror a written ``wake_at`` in the due index, after the script;
        ``fields`` are the state fields the script wrote (a paused key has no wake time)."""
        if self._due_in_script or "wake_at" not in fields:
            return
        wake_at = None if paused and "paused" not in fields else fields["wake_at"]
        with store_errors(what):
            if wake_at is None:
                await self._redis.zrem(self._due_key(key.poller), key.partition)
            else:
                await self._redis.zadd(self._due_key(key.poller), {key.partition: wake_at})

    async def _eval(self, what: str, script: str, keys: list[str], args: Sequence[Any]) -> Any:
        with store_errors(what):
            return await self._scripts[script](keys=keys, args=args)

    async def _fenced(
        self, what: str, script: str, key: PKey, lease: Lease, keys: list[str], args: list[Any]
    ) -> bool:
        """Run a fenced script; True when the key is paused after it (the script says 2)."""
        reply = await self._eval(what, script, keys, [lease.owner, lease.epoch, *args])
        if reply == 0:
            raise LeaseLostError(key.poller, key.partition, lease.epoch)
        return bool(reply == 2)

    async def _repair_known(self, key: PKey, exists: bool) -> None:
        """Cluster: bring the known-keys entry of a key whose state was just read in step
        with it (the rolling audit reads a few keys every resync). A ghost is removed, then
        the state is looked at again, so a key created meanwhile keeps its entry."""
        member = self._member(key)
        if not exists:
            if not await self._redis.srem(self._known, member):
                return  # no entry, no state: nothing to repair
            exists = bool(await self._redis.exists(self._keys(key).state))
        if exists:
            await self._redis.sadd(self._known, member)

    async def _audit_known(self) -> None:
        """Cluster: check one ``SSCAN`` step (about ``_AUDIT_COUNT`` entries) of the
        known-keys set and drop the entries whose key has no state any more (a crash
        between ``delete_key``'s script and its ``SREM`` leaves one). ``due_keys`` calls it,
        and the engine's resync calls ``due_keys`` for every poller: the rolling audit goes
        through the whole set, listed partitions or not, a few entries per resync."""
        cursor, members = await self._redis.sscan(
            self._known, self._audit_cursor, count=_AUDIT_COUNT
        )
        self._audit_cursor = int(cursor)
        found = [PKey(*json.loads(member)) for member in members]
        if not found:
            return
        pipe = self._redis.pipeline(transaction=False)
        for key in found:
            pipe.exists(self._keys(key).state)
        present = await pipe.execute()
        for key, exists in zip(found, present, strict=True):
            if not exists:
                await self._repair_known(key, False)

    async def _remember(self, what: str, key: PKey) -> None:
        with store_errors(what):
            await self._redis.sadd(self._known, self._member(key))

    # --- lifecycle ----------------------------------------------------------------------

    async def migrate(self) -> None:
        """Nothing to create in Redis; loads the scripts so first calls need no retry.

        Also asks the server (``CONFIG GET appendonly`` / ``save``, where it is allowed)
        whether it persists anything, and logs a WARNING once if it does not.
        """
        with store_errors("migrate"):
            for script in self._scripts.values():
                script.sha = await self._redis.script_load(script.script)
        await warn_if_not_persistent(self._redis)

    async def close(self) -> None:
        """Close the client if :meth:`from_url` created it; an injected one stays open."""
        if self._owns_client:
            with store_errors("close"):
                await self._redis.aclose()

    async def server_time(self) -> int:
        """The Redis server's clock (``TIME``), epoch milliseconds; the engine compares it
        with its own at start (see
        https://watukuy.readthedocs.io/en/latest/stores/#clocks-and-leases).
        """
        with store_errors("server_time"):
            seconds, micros = await self._redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # --- leases -------------------------------------------------------------------------

    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        """Take the key's lease when it is free or expired (creating the key if needed)."""
        keys = self._keys(key)
        initial = state_to_fields(empty_poller_state(now))
        args = [owner, now, now + ttl_ms, key.partition, self._member(key), *_pairs(initial)]
        script_keys = [keys.meta, keys.state, keys.epoch, *self._script_indexes(key)]
        reply = await self._eval("acquire_lease", "acquire", script_keys, args)
        if reply is None:
            return None
        epoch, created = reply
        if not self._due_in_script:
            # Cluster: the index entry of a new key (born due) and the known-keys entry
            # follow the script; load_state repairs what a crash in between leaves out.
            if created:
                await self._sync_due("acquire_lease", key, initial)
            await self._remember("acquire_lease", key)
        return Lease(owner=owner, epoch=int(epoch), expires_at=now + ttl_ms)

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        """Extend the lease to ``now + ttl_ms`` while owner and epoch still match."""
        args = [lease.owner, lease.epoch, now + ttl_ms]
        reply = await self._eval("renew_lease", "renew", [self._keys(key).meta], args)
        return bool(reply == 1)

    async def release_lease(self, key: PKey, lease: Lease) -> None:
        """Clear the owner when the lease is still ours; the epoch is kept."""
        args = [lease.owner, lease.epoch]
        await self._eval("release_lease", "release", [self._keys(key).meta], args)

    async def get_lease(self, key: PKey) -> Lease | None:
        """The stored lease (expired or not), or ``None`` when nobody holds it."""
        with store_errors("get_lease"):
            owner, epoch, expires = await self._redis.hmget(
                self._keys(key).meta, ["lease_owner", "lease_epoch", "lease_expires_at"]
            )
        if owner is None:
            return None
        return Lease(
            owner=_text(owner),
            epoch=int(epoch or 0),
            expires_at=int(expires) if expires is not None else 0,
        )

    # --- state --------------------------------------------------------------------------

    async def load_state(self, key: PKey) -> PollerState | None:
        """The key's state, or ``None`` for a key never seen."""
        with store_errors("load_state"):
            raw = await self._redis.hgetall(self._keys(key).state)
            if not self._due_in_script:
                await self._repair_known(key, bool(raw))
        if not raw:
            return None
        return state_from_fields({_text(name): json.loads(value) for name, value in raw.items()})

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        """Fenced partial update of the key's state."""
        keys = self._keys(key)
        fields = patch_to_fields(patch)
        with store_errors("save_state"):
            _wake_of(fields)
        args = [key.partition, *_pairs(fields)]
        script_keys = [keys.meta, keys.state, *self._script_due(key)]
        paused = await self._fenced("save_state", "save_state", key, lease, script_keys, args)
        await self._sync_due("save_state", key, fields, paused=paused)

    async def save_state_unfenced(self, key: PKey, patch: StatePatch, now: int) -> None:
        """Administrative partial update; creates the key first when needed."""
        initial = state_to_fields(empty_poller_state(now))
        fields = patch_to_fields(patch)
        with store_errors("save_state_unfenced"):
            _wake_of(fields)
        member = self._member(key)
        args = [key.partition, member, len(initial), *_pairs(initial), *_pairs(fields)]
        script_keys = [self._keys(key).state, *self._script_indexes(key)]
        reply = int(
            await self._eval("save_state_unfenced", "save_state_unfenced", script_keys, args)
        )
        created = reply % 2 == 1  # (+ 2 when paused: only fenced writes care)
        if not self._due_in_script:
            # A key created here carries the empty state's wake time unless the patch sets one.
            written = {**initial, **fields} if created else fields
            await self._sync_due("save_state_unfenced", key, written)
            await self._remember("save_state_unfenced", key)

    async def list_keys(self, poller: str | None = None) -> list[PKey]:
        """Every key, optionally of one poller, sorted by (poller, partition)."""
        with store_errors("list_keys"):
            members = await self._redis.smembers(self._known)
        found = (PKey(*json.loads(member)) for member in members)
        return sorted(k for k in found if poller is None or k.poller == poller)

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """``(partition, wake_at)`` of the keys of ``poller`` due at ``until``, ordered by
        ``(wake_at, partition)``: one ``ZRANGEBYSCORE`` on the poller's due index (members
        of one score come in byte order, which for UTF-8 is code-point order). Scores are
        doubles, exact for every wake time up to 2**53 ms (the year 287396).

        In a cluster each call also takes one step of the known-keys audit
        (:meth:`_audit_known`)."""
        if limit is not None and limit <= 0:
            return []
        page = {} if limit is None else {"start": 0, "num": limit}
        with store_errors("due_keys"):
            found = await self._redis.zrangebyscore(
                self._due_key(poller), "-inf", until, withscores=True, **page
            )
            if not self._due_in_script:
                await self._audit_known()
        return [(_text(partition), int(score)) for partition, score in found]

    async def delete_key(self, key: PKey) -> None:
        """Remove every Redis key of the key (``UNLINK``: big hashes are freed off the main
        thread), its due index entry and its known-keys entry, keeping its last epoch; one
        script on a standalone server, the two entries right after it in a cluster."""
        keys, member = self._keys(key), self._member(key)
        script_keys = [keys.epoch, *keys, *self._script_indexes(key)]
        args = [len(keys), key.partition, member]
        await self._eval("delete_key", "delete_key", script_keys, args)
        if not self._due_in_script:
            with store_errors("delete_key"):
                await self._redis.zrem(self._due_key(key.poller), key.partition)
                await self._redis.srem(self._known, member)

    async def clear_items(self, key: PKey) -> None:
        """Drop the key's snapshot only, leaving a ``"cleared"`` tombstone for each row.

        Rows move in batches of 1,000, one script each, so a large snapshot never holds
        the server for long; a commit between two batches is kept or moved whole.
        """
        k = self._keys(key)
        keys = [k.items, k.ids, k.tombs, k.tombtime, k.seen, k.links]
        while True:
            with store_errors("clear_items"):
                batch = await self._redis.zrange(k.ids, 0, _PRUNE_BATCH - 1)
            if not batch:
                # Rows without an ids entry cannot exist; a leftover hash goes anyway.
                with store_errors("clear_items"):
                    await self._redis.unlink(k.items, k.seen, k.links)
                return
            await self._eval("clear_items", "clear_items", keys, [_text(i) for i in batch])

    async def load_tombstones(self, key: PKey, identities: Sequence[str]) -> dict[str, Tombstone]:
        """The tombstones of those identities that have one."""
        if not identities:
            return {}
        with store_errors("load_tombstones"):
            values = await self._redis.hmget(self._keys(key).tombs, list(identities))
        out: dict[str, Tombstone] = {}
        for identity, value in zip(identities, values, strict=True):
            if value is not None:
                reason, removed_at, row = _text(value).split(":", 2)
                version, hash_, schema_version, *_, revision = _item_fields(row)
                out[identity] = Tombstone(
                    identity,
                    version,
                    hash_,
                    schema_version,
                    revision,
                    cast(TombstoneReason, reason),
                    int(removed_at),
                )
        return out

    async def prune_tombstones(self, key: PKey, older_than: int) -> int:
        """Delete tombstones removed before ``older_than``; returns the count."""
        k = self._keys(key)
        keys, total = [k.tombs, k.tombtime], 0
        while True:
            removed = int(
                await self._eval(
                    "prune_tombstones", "prune_tombstones", keys, [older_than, _PRUNE_BATCH]
                )
            )
            total += removed
            if removed < _PRUNE_BATCH:
                return total

    async def clear_validators(self, key: PKey) -> None:
        """Forget every validator of the key (unfenced)."""
        with store_errors("clear_validators"):
            await self._redis.unlink(self._keys(key).validators)

    # --- items --------------------------------------------------------------------------

    async def load_versions(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemRow]:
        """The stored rows of those identities that exist."""
        if not identities:
            return {}
        with store_errors("load_versions"):
            values = await self._redis.hmget(self._keys(key).items, list(identities))
        out: dict[str, ItemRow] = {}
        for identity, value in zip(identities, values, strict=True):
            if value is not None:
                out[identity] = ItemRow(identity, *_item_fields(value))
        return out

    async def load_marks(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemMark]:
        """The seen mark and listing link of each stored identity among ``identities``:
        one script per 1,000 identities, which reads neither payloads nor rows."""
        wanted = list(dict.fromkeys(identities))
        k = self._keys(key)
        keys = [k.items, k.seen, k.links]
        out: dict[str, ItemMark] = {}
        for start in range(0, len(wanted), _MARKS_BATCH):
            chunk = wanted[start : start + _MARKS_BATCH]
            reply = await self._eval("load_marks", "load_marks", keys, chunk)
            for identity, line in zip(chunk, _text(reply).split("\n"), strict=True):
                if line:
                    mark, _, link = line.partition(" ")
                    out[identity] = ItemMark(int(mark), _link_of(link) if link else None)
        return out

    async def stream_identities(
        self, key: PKey, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """Every identity of the key in code-point order, in keyset-paginated batches."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"must be at least 1, got {batch_size!r}", field="batch_size")
        ids, low = self._keys(key).ids, "-"
        while True:
            with store_errors("stream_identities"):
                raw = await self._redis.zrangebylex(ids, low, "+", start=0, num=batch_size)
            batch = [_text(identity) for identity in raw]
            if batch:
                yield batch
            if len(batch) < batch_size:
                return
            low = "(" + batch[-1]

    async def stream_unseen(
        self, key: PKey, before: int, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """The identities whose seen mark is below ``before``, in code-point order: the
        walk of :meth:`stream_identities` with one ``HMGET`` of the marks per batch."""
        seen = self._keys(key).seen
        async for batch in self.stream_identities(key, batch_size):
            with store_errors("stream_unseen"):
                marks = await self._redis.hmget(seen, batch)
            unseen = [
                identity
                for identity, mark in zip(batch, marks, strict=True)
                if mark is None or int(mark) < before
            ]
            if unseen:
                yield unseen

    async def count_items(self, key: PKey) -> int:
        """Size of the key's snapshot."""
        with store_errors("count_items"):
            return int(await self._redis.hlen(self._keys(key).items))

    # --- commit and outbox --------------------------------------------------------------

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """Write a page (state, snapshot delta, events, log, parked rows) in one script."""
        k = self._keys(key)
        # Rows go in batch order and the script applies them in that order, so a repeated
        # id ends with its last row and a delete wins over an upsert, as in one transaction.
        # Delivery data (attempts, errors) is rare at commit time, so it has its own section.
        fields = patch_to_fields(batch.state_patch)
        with store_errors("commit_poll"):
            _wake_of(fields)
        state = _pairs(fields)
        args: list[Any] = [batch.now, key.partition, len(state) // 2, *state, len(batch.upserts)]
        for row in batch.upserts:
            item = [row.version, row.hash, row.schema_version, row.payload, row.seen_at]
            if row.revision:
                item.append(row.revision)
            args += (row.identity, json.dumps(item))
        args += (len(batch.revived), *batch.revived)
        args += (int(batch.seen_pass), len(batch.seen), *batch.seen)
        args += (len(batch.deletes), *batch.deletes)
        if batch.links:
            links = link_rows(batch.links)
            args.append(len(links))
            for identity, read, prev, next_ in links:
                args += (identity, json.dumps([read, prev, next_]))
        else:
            args.append(0)
        args.append(len(batch.events))
        extras: list[Any] = []
        for event in batch.events:
            args += (event.event_id, event.sequence, _outbox_form(event))
            if event.attempts or event.last_error is not None or event.next_attempt_at is not None:
                error = (
                    ""
                    if event.last_error is None and event.next_attempt_at is None
                    else json.dumps([event.last_error, event.next_attempt_at])
                )
                extras += (event.event_id, event.attempts, error)
        args += (len(extras) // 3, *extras)
        if batch.log:
            args.append(len(batch.events))
            for event in batch.events:
                args += (event.sequence, f"{batch.now}:{event.event}")
        else:
            args.append(0)
        args.append(len(batch.parked))
        for parked in batch.parked:
            args += _parked_args(parked)
        keys = [
            k.meta,
            k.state,
            k.items,
            k.ids,
            k.outbox,
            k.rows,
            k.attempts,
            k.errors,
            k.parked,
            k.retry,
            k.hold,
            k.log,
            k.logrows,
            k.logtime,
            k.tombs,
            k.tombtime,
            k.seen,
            k.parkpoison,
            k.parkinvalid,
            k.links,
            *self._script_due(key),
        ]
        paused = await self._fenced("commit_poll", "commit", key, lease, keys, args)
        await self._sync_due("commit_poll", key, fields, paused=paused)

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        """Up to ``limit`` pending rows in sequence order (never filtered by retry time),
        only those after ``after_sequence`` when it is given."""
        if limit <= 0:
            return []
        k = self._keys(key)
        keys = [k.outbox, k.rows, k.attempts, k.errors]
        low = "-inf" if after_sequence is None else f"({after_sequence}"
        flat = await self._eval("load_pending", "load_pending", keys, [limit, low])
        out: list[OutboxRow] = []
        for at in range(0, len(flat), 4):
            event_id, row, attempts, error = flat[at : at + 4]
            sequence, created_at, event = _text(row).split(":", 2)
            last_error, next_attempt_at = json.loads(error) if error else (None, None)
            out.append(
                OutboxRow(
                    event_id=_text(event_id),
                    sequence=int(sequence),
                    event=event,
                    attempts=int(attempts) if attempts else 0,
                    next_attempt_at=next_attempt_at,
                    last_error=last_error,
                    created_at=int(created_at),
                )
            )
        return out

    async def count_pending(self, key: PKey) -> int:
        """Number of pending outbox rows."""
        with store_errors("count_pending"):
            return int(await self._redis.zcard(self._keys(key).outbox))

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        """Delete delivered rows (fenced); unknown ids are ignored."""
        k = self._keys(key)
        keys = [k.meta, k.outbox, k.rows, k.attempts, k.errors]
        await self._fenced("ack_events", "ack", key, lease, keys, list(event_ids))

    async def record_attempt(
        self,
        key: PKey,
        lease: Lease,
        event_id: str,
        error: SerializedError,
        next_attempt_at: int | None,
    ) -> None:
        """Count a failed delivery of ``event_id`` (fenced)."""
        k = self._keys(key)
        keys = [k.meta, k.rows, k.attempts, k.errors]
        args = [event_id, json.dumps([error, next_attempt_at])]
        await self._fenced("record_attempt", "record_attempt", key, lease, keys, args)

    async def park_event(self, key: PKey, lease: Lease, row: ParkedRow) -> None:
        """Insert the parked row and delete the outbox row of the same id, atomically."""
        k = self._keys(key)
        keys = [
            k.meta,
            k.parked,
            k.retry,
            k.hold,
            k.outbox,
            k.rows,
            k.attempts,
            k.errors,
            k.parkpoison,
            k.parkinvalid,
        ]
        await self._fenced("park_event", "park", key, lease, keys, _parked_args(row))

    async def list_parked(
        self, key: PKey, kind: ParkedKind | None = None, limit: int | None = None
    ) -> list[ParkedRow]:
        """Parked rows ordered by (parked_at, id), optionally of one kind, at most ``limit``.

        Reads ``limit`` entries of each kind's index (sorted sets by ``parked_at``; members
        of one score come in byte order, code-point order for UTF-8), never the whole hash.
        """
        if limit is not None and limit <= 0:
            return []
        k = self._keys(key)
        keys = [k.parked, k.parkpoison, k.parkinvalid]
        args = [kind or "", limit or 0]
        values = await self._eval("list_parked", "list_parked", keys, args)
        rows = sorted(
            (row for row in map(_parked_from, values) if kind is None or row.kind == kind),
            key=lambda row: (row.parked_at, row.id),
        )
        return rows if limit is None else rows[:limit]

    async def count_parked(self, key: PKey) -> int:
        """Number of parked rows of either kind."""
        with store_errors("count_parked"):
            return int(await self._redis.hlen(self._keys(key).parked))

    async def retry_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Move parked poison rows back to the outbox at their sequence; returns the count."""
        if not ids:
            return 0
        k = self._keys(key)
        keys = [
            k.parked,
            k.retry,
            k.hold,
            k.outbox,
            k.rows,
            k.attempts,
            k.errors,
            k.parkpoison,
            k.parkinvalid,
        ]
        return int(await self._eval("retry_parked", "retry_parked", keys, list(ids)))

    async def discard_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Delete parked rows of either kind; returns the count."""
        if not ids:
            return 0
        k = self._keys(key)
        keys = [k.parked, k.retry, k.hold, k.parkpoison, k.parkinvalid]
        return int(await self._eval("discard_parked", "discard_parked", keys, list(ids)))

    async def held_keys(self, key: PKey) -> set[str]:
        """Ordering keys held back by parked rows: the whole set (the dispatcher needs
        every one), read from the ``hold`` hash, which holds one entry per parked row with
        a held key (about one per held key: a held key's later events wait in the outbox,
        they are not parked)."""
        with store_errors("held_keys"):
            values = await self._redis.hvals(self._keys(key).hold)
        return {_text(value) for value in values}

    # --- validators ---------------------------------------------------------------------

    async def get_validator(self, key: PKey, url_hash: str) -> Validator | None:
        """The stored validators of a URL hash."""
        with store_errors("get_validator"):
            value = await self._redis.hget(self._keys(key).validators, url_hash)
        if value is None:
            return None
        etag, last_modified, stored_at = json.loads(value)
        return Validator(etag=etag, last_modified=last_modified, stored_at=stored_at)

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        """Store validators of a URL hash (fenced)."""
        k = self._keys(key)
        value = json.dumps([validator.etag, validator.last_modified, validator.stored_at])
        keys = [k.meta, k.validators]
        await self._fenced("set_validator", "set_validator", key, lease, keys, [url_hash, value])

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
        k = self._keys(key)
        keys = [k.log, k.logrows, k.logtime]
        bounds = ["" if from_time is None else from_time, "" if to_time is None else to_time]
        after: Any = "" if after_sequence is None else after_sequence
        out: list[LoggedEvent] = []
        while True:
            args = [after, *bounds, limit - len(out), _WINDOW_MAX, _SCAN_MAX]
            more, *flat = await self._eval("read_log", "read_log", keys, args)
            for at in range(0, len(flat), 2):
                created_at, event = _text(flat[at + 1]).split(":", 1)
                out.append(LoggedEvent(int(flat[at]), event, int(created_at)))
            # A long walk stops after _SCAN_MAX entries; the next call continues after them.
            if not more or len(out) >= limit:
                return out
            after = _text(more)

    async def prune_log(self, key: PKey, older_than: int) -> int:
        """Delete log entries created before ``older_than``; returns the count."""
        k = self._keys(key)
        keys, total = [k.log, k.logrows, k.logtime], 0
        while True:
            removed = int(
                await self._eval("prune_log", "prune_log", keys, [older_than, _PRUNE_BATCH])
            )
            total += removed
            if removed < _PRUNE_BATCH:
                return total


class RedisBudgetStore:
    """Sliding-window budget logs in Redis, shared by every process using the same prefix.

    The arithmetic is :func:`watukuy.budget.window.take`, mirrored in one Lua script per
    take over the sorted set ``<prefix>budget:<name>`` and driven by the caller's ``now``
    (never Redis ``TIME``), so it agrees exactly with ``InMemoryBudgetStore`` and stays
    deterministic under a virtual clock. The cap holds across processes as long as their
    clocks agree (keep hosts on NTP). A key expires ``per`` after its newest grant, in
    Redis time: an idle budget leaves nothing behind, and a missing key is an empty window.
    That expiry assumes the callers' clock runs no slower than real time.

    Args:
        client: A ``redis.asyncio.Redis`` (or ``RedisCluster``) client; never closed here.
        prefix: Prefix of the budget keys (``<prefix>budget:<name>``).
    """

    def __init__(
        self, client: aioredis.Redis | aioredis.RedisCluster, prefix: str = "watukuy:"
    ) -> None:
        _require_redis("RedisBudgetStore")
        self._prefix = _check_prefix(prefix)
        self._redis: Any = client
        self._script = client.register_script(_script_source("budget_take"))
        self._settle = client.register_script(_script_source("budget_settle"))
        self._bucket = client.register_script(_script_source("budget_bucket"))

    def __repr__(self) -> str:
        return f"RedisBudgetStore(prefix={self._prefix!r})"

    async def try_take(self, budget: str, policy: BudgetPolicy, cost: float, now: int) -> int:
        """Grant ``cost`` of the budget named ``budget`` at ``now``, if it fits.

        Returns:
            ``0`` when granted; otherwise the milliseconds to wait, having taken nothing.

        Raises:
            ConfigError: An invalid policy, cost (negative, not finite, or more than
                ``requests``) or time.
            StoreError: Redis failed.
        """
        check_budget_args(policy, cost, now)
        if cost == 0:
            return 0  # granted and recorded nowhere: no need to ask Redis
        if policy.burst is not None:
            bucket: list[str | int] = [
                policy.requests,
                policy.per_ms,
                policy.burst,
                repr(float(cost)),
                now,
            ]
            with store_errors("try_take"):
                wait = await self._bucket(
                    keys=[f"{self._prefix}budget:{budget}:bucket"], args=bucket
                )
            return int(wait)
        # repr() of a float is the shortest text that reads back as the same double.
        args: list[str | int] = [policy.requests, policy.per_ms, repr(float(cost)), now]
        with store_errors("try_take"):
            wait = await self._script(keys=[f"{self._prefix}budget:{budget}"], args=args)
        return int(wait)

    async def try_hold(
        self, budget: str, policy: BudgetPolicy, cost: float, now: int, *, stamp: int, ticket: str
    ) -> int:
        """Like :meth:`try_take`, the grant held at ``stamp`` until :meth:`settle`.

        A token-bucket budget (``burst``) is not held: it is taken like :meth:`try_take`.

        Raises:
            ConfigError: See :meth:`try_take`; also a ticket with ``:`` in it.
            StoreError: Redis failed.
        """
        if policy.burst is not None:
            return await self.try_take(budget, policy, cost, now)
        check_budget_args(policy, cost, now)
        if ":" in ticket:
            raise ConfigError(f"a ticket has no ':', got {ticket!r}", field="ticket")
        if cost == 0:
            return 0
        args: list[str | int] = [
            policy.requests,
            policy.per_ms,
            repr(float(cost)),
            now,
            max(now, stamp),
            ticket,
        ]
        with store_errors("try_hold"):
            wait = await self._script(keys=[f"{self._prefix}budget:{budget}"], args=args)
        return int(wait)

    async def usage(self, budget: str, policy: BudgetPolicy, now: int) -> float:
        """How much of the budget is in use at ``now`` (a read; nothing changes).

        The costs still counting in the window (``watukuy.budget.window.window_used``), or
        for a token bucket the tokens not yet refilled (``watukuy.budget.bucket.bucket_used``).

        Raises:
            StoreError: Redis failed.
        """
        check_budget_args(policy, 0, now)
        if policy.burst is not None:
            with store_errors("usage"):
                raw = await self._redis.get(f"{self._prefix}budget:{budget}:bucket")
            # The arithmetic of watukuy.budget.bucket.bucket_used, as the Lua scripts
            # mirror the rest (an adapter does not import the budget package).
            tat = None if raw is None else float(raw)
            if tat is None or tat <= now:
                return 0.0
            burst = policy.burst
            return min(float(burst), (tat - now) / (policy.per_ms / policy.requests))
        with store_errors("usage"):
            members = await self._redis.zrangebyscore(
                f"{self._prefix}budget:{budget}", f"({now - policy.per_ms}", "+inf"
            )
        total = 0.0
        for member in reversed(members):  # newest first, as the take sums
            text = member.decode() if isinstance(member, bytes) else member
            total += float(text.rpartition(":")[2])
        return total

    async def settle(
        self, budget: str, policy: BudgetPolicy, ticket: str, *, stamp: int, at: int, now: int
    ) -> None:
        """Move the held grant ``ticket``, logged at ``stamp``, to ``at``.

        Raises:
            StoreError: Redis failed.
        """
        if policy.burst is not None:
            return
        args: list[str | int] = [ticket, stamp, at, policy.per_ms, now]
        with store_errors("settle"):
            await self._settle(keys=[f"{self._prefix}budget:{budget}"], args=args)
