"""MemoryStore: the reference :class:`~watukuy.model.ports.StateStore`, kept in dictionaries.

It is a real backend, not a mock: leases are fenced by epoch exactly like the durable
stores, ``commit_poll`` is all-or-nothing, and nothing a caller passes in or gets back
aliases the store's own data. State and error dictionaries are kept as JSON text, so a value
a durable store could not encode is rejected here too, with the same ``StoreError``. Everything is lost when the process
exits, which makes it the store for tests, demos and ``tick()`` prototypes.

It doubles as a test tool: :meth:`MemoryStore.snapshot` shows everything one key holds,
:meth:`MemoryStore.keys` lists the keys, and :meth:`MemoryStore.reset` empties the store
between scenarios. The store does no I/O at all and is meant for one event loop; its
methods never await, so each one is atomic with respect to other tasks.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, TypeVar, cast

from watukuy.model import json as wkjson
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
    TombstoneReason,
    Validator,
    empty_poller_state,
    patch_to_fields,
    state_from_fields,
    state_to_fields,
)
from watukuy.stores._errors import store_errors

__all__ = ["MemoryKeySnapshot", "MemoryStore"]

_last_error = attrgetter("last_error")
_wake_of = itemgetter(0)
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class MemoryKeySnapshot:
    """Everything a :class:`MemoryStore` holds for one key, copied out (a test tool).

    Attributes:
        state: The poller state.
        lease: The lease when an owner is set.
        epoch: The last epoch handed out (kept after release).
        items: Snapshot rows by identity, in identity order.
        outbox: Pending rows in sequence order.
        parked: Parked rows ordered by ``(parked_at, id)``.
        validators: Validators by URL hash.
        log: Logged events in sequence order.
        tombstones: Tombstones by identity, in identity order.
    """

    state: PollerState
    lease: Lease | None
    epoch: int
    items: dict[str, ItemRow]
    outbox: list[OutboxRow]
    parked: list[ParkedRow]
    validators: dict[str, Validator]
    log: list[LoggedEvent]
    tombstones: dict[str, Tombstone] = field(default_factory=dict)


@dataclass(slots=True)
class _Key:
    """The mutable record of one key. Rows are frozen dataclasses whose only mutable
    parts (error dictionaries) are stored as JSON text, so rows can be shared safely."""

    state: dict[str, Any]
    owner: str | None = None
    epoch: int = 0
    expires_at: int | None = None
    items: dict[str, ItemRow] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)  # seen mark by identity (0: absent)
    links: dict[str, ListingLink] = field(default_factory=dict)  # listing link by identity
    items_written: int = 0  # bumped by every upsert, so walks know when to re-sort
    tombstones: dict[str, Tombstone] = field(default_factory=dict)
    outbox: dict[str, OutboxRow] = field(default_factory=dict)
    # (sequence, event_id) of the outbox, sorted; rebuilt after inserts, while deletes only
    # leave stale entries behind (skipped on read), so a drain pages without re-sorting.
    outbox_order: list[tuple[int, str]] | None = None
    outbox_errors: dict[str, str] = field(default_factory=dict)
    parked: dict[str, ParkedRow] = field(default_factory=dict)
    parked_errors: dict[str, str] = field(default_factory=dict)
    validators: dict[str, Validator] = field(default_factory=dict)
    log: dict[int, LoggedEvent] = field(default_factory=dict)


@dataclass(slots=True)
class _DueIndex:
    """The wake times of one poller's keys, kept sorted so that a due query costs a binary
    search plus the entries it returns, whatever the number of keys."""

    wake_at: dict[str, int] = field(default_factory=dict)
    order: list[tuple[int, str]] = field(default_factory=list)  # (wake_at, partition)

    def set(self, partition: str, wake_at: int | None) -> None:
        old = self.wake_at.get(partition)
        if old == wake_at:
            return
        if old is not None:
            del self.order[bisect.bisect_left(self.order, (old, partition))]
            del self.wake_at[partition]
        if wake_at is not None:
            bisect.insort(self.order, (wake_at, partition))
            self.wake_at[partition] = wake_at

    def due(self, until: int, limit: int | None) -> list[tuple[str, int]]:
        end = bisect.bisect_right(self.order, until, key=_wake_of)
        if limit is not None:
            end = min(end, max(limit, 0))
        return [(partition, wake_at) for wake_at, partition in self.order[:end]]


def _decode_error(text: str) -> SerializedError:
    return cast(SerializedError, wkjson.loads(text))


def _new_key(now: int) -> _Key:
    return _Key(state=wkjson.loads(wkjson.dumps(state_to_fields(empty_poller_state(now)))))


class MemoryStore:
    """A :class:`~watukuy.model.ports.StateStore` in process memory.

    Example:
        >>> store = MemoryStore()
        >>> # engine = wk.Engine(store=store, pollers=[orders])
    """

    def __init__(self) -> None:
        self._keys: dict[PKey, _Key] = {}
        self._due: dict[str, _DueIndex] = {}
        # The last epoch of every deleted key: a key created again continues from it, so a
        # lease issued before the delete can never match a later one.
        self._epoch_floors: dict[PKey, int] = {}

    @property
    def capabilities(self) -> StoreCapabilities:
        """Transactions, log and streaming are all supported."""
        return StoreCapabilities(transactions=True, log=True, streaming=True)

    async def migrate(self) -> None:
        """Nothing to create."""

    async def close(self) -> None:
        """Nothing to release; the data stays until :meth:`reset` or the process exits."""

    # --- test tools ----------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every key, as if the store had just been created."""
        self._keys.clear()
        self._due.clear()
        self._epoch_floors.clear()

    def keys(self) -> list[PKey]:
        """Every key the store holds, sorted (the same as ``await list_keys()``)."""
        return sorted(self._keys)

    def snapshot(self, key: PKey) -> MemoryKeySnapshot | None:
        """A copy of everything held for ``key``, or ``None`` when the key is unknown."""
        record = self._keys.get(key)
        if record is None:
            return None
        return MemoryKeySnapshot(
            state=state_from_fields(wkjson.loads(wkjson.dumps(record.state))),
            lease=self._lease_of(record),
            epoch=record.epoch,
            items={i: record.items[i] for i in sorted(record.items)},
            outbox=self._pending(record),
            parked=self._parked(record, None),
            validators=dict(record.validators),
            log=[record.log[s] for s in sorted(record.log)],
            tombstones={i: record.tombstones[i] for i in sorted(record.tombstones)},
        )

    # --- leases --------------------------------------------------------------------------

    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        """Take the key's lease if it is free or expired; ``None`` when someone holds it."""
        record = self._keys.get(key)
        if record is None:
            record = self._keys[key] = self._created(key, now)
            self._index(key, record.state)
        elif record.owner is not None and (record.expires_at or 0) > now:
            return None
        record.owner = owner
        record.epoch += 1
        record.expires_at = now + ttl_ms
        return Lease(owner, record.epoch, now + ttl_ms)

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        """Extend a held lease to ``now + ttl_ms``; ``False`` when it is no longer ours."""
        record = self._keys.get(key)
        if record is None or record.owner != lease.owner or record.epoch != lease.epoch:
            return False
        record.expires_at = now + ttl_ms
        return True

    async def release_lease(self, key: PKey, lease: Lease) -> None:
        """Give the lease up; a no-op when it is no longer ours. The epoch is kept."""
        record = self._keys.get(key)
        if record is not None and record.owner == lease.owner and record.epoch == lease.epoch:
            record.owner = None
            record.expires_at = None

    async def get_lease(self, key: PKey) -> Lease | None:
        """The stored lease when an owner is set, expired or not."""
        record = self._keys.get(key)
        return None if record is None else self._lease_of(record)

    @staticmethod
    def _lease_of(record: _Key) -> Lease | None:
        if record.owner is None:
            return None
        return Lease(record.owner, record.epoch, record.expires_at or 0)

    def _fenced(self, key: PKey, lease: Lease) -> _Key:
        record = self._keys.get(key)
        if record is None or record.owner != lease.owner or record.epoch != lease.epoch:
            raise LeaseLostError(key.poller, key.partition, lease.epoch)
        return record

    # --- state ---------------------------------------------------------------------------

    def _index(self, key: PKey, fields: dict[str, Any] | None) -> None:
        """Bring the due index in step with the key's state fields (``None``: key gone)."""
        wake_at = None if fields is None else fields.get("wake_at")
        index = self._due.get(key.poller)
        if index is None:
            if wake_at is None:
                return
            index = self._due[key.poller] = _DueIndex()
        index.set(key.partition, wake_at)
        if not index.wake_at:
            del self._due[key.poller]

    async def load_state(self, key: PKey) -> PollerState | None:
        """The key's state, or ``None`` when the key has never been seen."""
        record = self._keys.get(key)
        if record is None:
            return None
        return state_from_fields(wkjson.loads(wkjson.dumps(record.state)))

    @staticmethod
    def _patched(record: _Key, patch: StatePatch, *, admin: bool = False) -> dict[str, Any]:
        # Encoding and decoding copies the values and rejects what a durable store could not
        # keep, before anything is changed.
        fields = dict(record.state)
        changes = wkjson.loads(wkjson.dumps(patch_to_fields(patch)))
        if not admin and "wake_at" in changes and "paused" not in changes and fields.get("paused"):
            changes["wake_at"] = None  # a run that began before the pause: its wake is void
        fields.update(changes)
        wake_at = fields.get("wake_at")
        if wake_at is not None and not -(2**63) <= wake_at < 2**63:
            raise OverflowError(f"wake_at {wake_at} does not fit in 64 bits")
        return fields

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        """Fenced partial update of the key's state."""
        record = self._fenced(key, lease)
        if patch:
            with store_errors("save_state"):
                record.state = self._patched(record, patch)
            self._index(key, record.state)

    async def save_state_unfenced(self, key: PKey, patch: StatePatch, now: int) -> None:
        """Administrative partial update; creates the key when it does not exist yet."""
        record = self._keys.get(key) or self._created(key, now)
        with store_errors("save_state_unfenced"):
            new_state = self._patched(record, patch, admin=True)
        self._keys[key] = record
        record.state = new_state
        self._index(key, new_state)

    async def list_keys(self, poller: str | None = None) -> list[PKey]:
        """Every key with state, optionally of one poller, sorted."""
        return sorted(k for k in self._keys if poller is None or k.poller == poller)

    async def delete_key(self, key: PKey) -> None:
        """Remove every row of the key, its lease included; its last epoch is kept."""
        record = self._keys.pop(key, None)
        if record is not None:
            self._epoch_floors[key] = record.epoch
            self._index(key, None)

    def _created(self, key: PKey, now: int) -> _Key:
        """A new record for ``key``, its epoch continuing from a deleted predecessor's."""
        record = _new_key(now)
        record.epoch = self._epoch_floors.get(key, 0)
        return record

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """``(partition, wake_at)`` of the keys of ``poller`` due at ``until``, ordered by
        ``(wake_at, partition)``; a binary search in a per-poller sorted list."""
        index = self._due.get(poller)
        return [] if index is None else index.due(until, limit)

    async def clear_items(self, key: PKey) -> None:
        """Drop the key's snapshot rows only, leaving a ``"cleared"`` tombstone for each."""
        record = self._keys.get(key)
        if record is not None:
            for row in record.items.values():
                record.tombstones[row.identity] = _tombstone(row, "cleared", row.seen_at)
            record.items.clear()
            record.seen.clear()
            record.links.clear()

    async def load_tombstones(self, key: PKey, identities: Sequence[str]) -> dict[str, Tombstone]:
        """The tombstones of those identities that have one."""
        record = self._keys.get(key)
        if record is None or not record.tombstones:
            return {}
        tombstones = record.tombstones
        return {i: tombstones[i] for i in identities if i in tombstones}

    async def prune_tombstones(self, key: PKey, older_than: int) -> int:
        """Delete tombstones removed before ``older_than``; returns how many."""
        record = self._keys.get(key)
        if record is None:
            return 0
        old = [i for i, t in record.tombstones.items() if t.removed_at < older_than]
        for identity in old:
            del record.tombstones[identity]
        return len(old)

    # --- items ---------------------------------------------------------------------------

    async def load_versions(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemRow]:
        """The stored rows of those identities that exist."""
        record = self._keys.get(key)
        if record is None:
            return {}
        items = record.items
        return {i: items[i] for i in identities if i in items}

    async def stream_identities(
        self, key: PKey, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """Every stored identity of the key in code point order, ``batch_size`` at a time.

        Like the durable stores it pages by the last identity seen, so identities written
        while the walk is in progress are seen when they sort after the current position.
        """
        if batch_size < 1:
            raise ConfigError(f"must be at least 1, got {batch_size!r}", field="batch_size")
        after: str | None = None
        order: list[str] = []
        known = -1
        while True:
            record = self._keys.get(key)
            if record is None:
                return
            if record.items_written != known:  # written since the last sort: sort again
                known = record.items_written
                order = sorted(record.items)
            start = 0 if after is None else bisect.bisect_right(order, after)
            chunk: list[str] = []
            for identity in itertools.islice(order, start, None):
                if identity in record.items:  # deleted since the sort: skip it
                    chunk.append(identity)
                    if len(chunk) == batch_size:
                        break
            if not chunk:
                return
            yield chunk
            if len(chunk) < batch_size:
                return
            after = chunk[-1]

    async def stream_unseen(
        self, key: PKey, before: int, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """The identities whose seen mark is below ``before``, in code point order, paged
        by the last identity like :meth:`stream_identities`."""
        if batch_size < 1:
            raise ConfigError(f"must be at least 1, got {batch_size!r}", field="batch_size")
        async for chunk in self.stream_identities(key, batch_size):
            record = self._keys.get(key)
            if record is None:
                return
            seen = record.seen
            unseen = [identity for identity in chunk if seen.get(identity, 0) < before]
            if unseen:
                yield unseen

    async def load_marks(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemMark]:
        """The seen mark and listing link of each stored identity among ``identities``."""
        record = self._keys.get(key)
        if record is None:
            return {}
        items, seen, links = record.items, record.seen, record.links
        return {
            identity: ItemMark(seen.get(identity, 0), links.get(identity))
            for identity in identities
            if identity in items
        }

    async def count_items(self, key: PKey) -> int:
        """Size of the key's snapshot."""
        record = self._keys.get(key)
        return 0 if record is None else len(record.items)

    # --- commit and outbox ---------------------------------------------------------------

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """Write the whole batch, fenced by ``lease``: everything is prepared (copied and
        encoded) first, so a bad value anywhere leaves the store untouched."""
        with store_errors("commit_poll"):
            self._commit(key, lease, batch)

    def _commit(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        record = self._fenced(key, lease)
        # Everything that could fail happens before the first change: reading the rows,
        # checking their types, encoding state and error dictionaries. The checks run as
        # C-level passes (map, set, count) so they add little to the dictionary writes.
        new_state = self._patched(record, batch.state_patch) if batch.state_patch else None
        upserts = _rows(batch.upserts, ItemRow)
        deletes = list(batch.deletes)
        revived = list(batch.revived)
        seen_list = list(batch.seen)
        seen_pass = int(batch.seen_pass)
        new_links = {str(identity): _link(link) for identity, link in batch.links.items()}
        events = batch.events if type(batch.events) in (list, tuple) else list(batch.events)
        # One pass over the events both finds error dictionaries to encode and fails early
        # on anything that is not an outbox row.
        has_errors = list(map(_last_error, events)).count(None) != len(events)
        event_errors = {
            row.event_id: wkjson.dumps(row.last_error)
            for row in (events if has_errors else ())
            if row.last_error is not None
        }
        parked = _rows(batch.parked, ParkedRow)
        parked_errors = [wkjson.dumps(row.error) for row in parked]
        now = batch.now
        logged = [LoggedEvent(row.sequence, row.event, now) for row in events] if batch.log else ()

        # Nothing below can fail.
        if new_state is not None:
            record.state = new_state
            self._index(key, new_state)
        items = record.items
        if upserts:
            record.items_written += 1
        for item_row in upserts:
            items[item_row.identity] = item_row
        seen = record.seen
        for identity in seen_list:
            if identity in items:
                seen[identity] = seen_pass
        tombstones = record.tombstones
        for identity in revived:
            tombstones.pop(identity, None)
        links = record.links
        for identity in deletes:
            gone = items.pop(identity, None)
            seen.pop(identity, None)
            links.pop(identity, None)
            if gone is not None:
                tombstones[identity] = _tombstone(gone, "deleted", now)
        for identity, link in new_links.items():
            if identity in items:
                links[identity] = link
        outbox, outbox_errors = record.outbox, record.outbox_errors
        if events:
            record.outbox_order = None
        if not has_errors and not outbox_errors:
            for event in events:
                outbox[event.event_id] = event
        else:
            for row in events:
                if row.last_error is None:
                    outbox[row.event_id] = row
                    outbox_errors.pop(row.event_id, None)
                else:
                    outbox[row.event_id] = dataclasses.replace(row, last_error=None)
                    outbox_errors[row.event_id] = event_errors[row.event_id]
        for entry in logged:
            record.log[entry.sequence] = entry
        for parked_row, error in zip(parked, parked_errors, strict=True):
            record.parked[parked_row.id] = parked_row
            record.parked_errors[parked_row.id] = error

    def _pending(
        self, record: _Key, limit: int | None = None, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        order = record.outbox_order
        if order is None:
            order = record.outbox_order = sorted(
                (row.sequence, row.event_id) for row in record.outbox.values()
            )
        outbox = record.outbox
        start = (
            0
            if after_sequence is None
            else bisect.bisect_right(order, (after_sequence, "\U0010ffff"))
        )
        wanted = len(outbox) if limit is None else max(limit, 0)
        rows: list[OutboxRow] = []
        for sequence, event_id in itertools.islice(order, start, None):
            if len(rows) >= wanted:
                break
            row = outbox.get(event_id)
            if row is not None and row.sequence == sequence:
                rows.append(row)
        errors = record.outbox_errors
        return [
            dataclasses.replace(row, last_error=_decode_error(errors[row.event_id]))
            if row.event_id in errors
            else row
            for row in rows
        ]

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        """Up to ``limit`` pending rows in sequence order, regardless of ``next_attempt_at``;
        only those after ``after_sequence`` when it is given."""
        record = self._keys.get(key)
        return [] if record is None else self._pending(record, limit, after_sequence)

    async def count_pending(self, key: PKey) -> int:
        """Number of pending outbox rows."""
        record = self._keys.get(key)
        return 0 if record is None else len(record.outbox)

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        """Remove delivered rows (fenced); unknown ids are ignored."""
        record = self._fenced(key, lease)
        for event_id in event_ids:
            record.outbox.pop(event_id, None)
            record.outbox_errors.pop(event_id, None)

    async def record_attempt(
        self,
        key: PKey,
        lease: Lease,
        event_id: str,
        error: SerializedError,
        next_attempt_at: int | None,
    ) -> None:
        """Count a failed attempt (fenced); unknown ids are ignored."""
        record = self._fenced(key, lease)
        with store_errors("record_attempt"):
            encoded = wkjson.dumps(error)
        row = record.outbox.get(event_id)
        if row is None:
            return
        record.outbox[event_id] = dataclasses.replace(
            row, attempts=row.attempts + 1, next_attempt_at=next_attempt_at
        )
        record.outbox_errors[event_id] = encoded

    async def park_event(self, key: PKey, lease: Lease, row: ParkedRow) -> None:
        """Insert the parked row and drop the outbox row with the same id (fenced)."""
        record = self._fenced(key, lease)
        with store_errors("park_event"):
            encoded = wkjson.dumps(row.error)
        record.parked[row.id] = row
        record.parked_errors[row.id] = encoded
        record.outbox.pop(row.id, None)
        record.outbox_errors.pop(row.id, None)

    def _parked(
        self, record: _Key, kind: ParkedKind | None, limit: int | None = None
    ) -> list[ParkedRow]:
        rows = sorted(
            (row for row in record.parked.values() if kind is None or row.kind == kind),
            key=lambda row: (row.parked_at, row.id),
        )
        if limit is not None:
            rows = rows[: max(limit, 0)]
        errors = record.parked_errors
        return [dataclasses.replace(row, error=_decode_error(errors[row.id])) for row in rows]

    async def list_parked(
        self, key: PKey, kind: ParkedKind | None = None, limit: int | None = None
    ) -> list[ParkedRow]:
        """Parked rows ordered by ``(parked_at, id)``, optionally of one kind."""
        record = self._keys.get(key)
        return [] if record is None else self._parked(record, kind, limit)

    async def count_parked(self, key: PKey) -> int:
        """Number of parked rows of either kind."""
        record = self._keys.get(key)
        return 0 if record is None else len(record.parked)

    async def retry_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Move parked poison events back to the outbox at their original sequence."""
        record = self._keys.get(key)
        if record is None:
            return 0
        moved = 0
        for row_id in dict.fromkeys(ids):
            row = record.parked.get(row_id)
            if row is None or row.kind != "poison" or row.event is None:
                continue
            record.outbox_order = None
            record.outbox[row.id] = OutboxRow(
                event_id=row.id,
                sequence=_original_sequence(row),
                event=row.event,
                created_at=row.parked_at,
            )
            record.outbox_errors.pop(row.id, None)
            del record.parked[row_id]
            del record.parked_errors[row_id]
            moved += 1
        return moved

    async def discard_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Delete parked rows of either kind; returns how many were deleted."""
        record = self._keys.get(key)
        if record is None:
            return 0
        deleted = 0
        for row_id in dict.fromkeys(ids):
            if record.parked.pop(row_id, None) is not None:
                del record.parked_errors[row_id]
                deleted += 1
        return deleted

    async def held_keys(self, key: PKey) -> set[str]:
        """Ordering keys held back by parked rows."""
        record = self._keys.get(key)
        if record is None:
            return set()
        return {row.hold_key for row in record.parked.values() if row.hold_key is not None}

    # --- validators ----------------------------------------------------------------------

    async def get_validator(self, key: PKey, url_hash: str) -> Validator | None:
        """The stored ETag / Last-Modified for a URL hash."""
        record = self._keys.get(key)
        return None if record is None else record.validators.get(url_hash)

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        """Store validators for a URL hash (fenced)."""
        self._fenced(key, lease).validators[url_hash] = validator

    async def clear_validators(self, key: PKey) -> None:
        """Forget every validator of the key (unfenced)."""
        record = self._keys.get(key)
        if record is not None:
            record.validators.clear()

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
        record = self._keys.get(key)
        if record is None or limit <= 0:
            return []
        out: list[LoggedEvent] = []
        for sequence in sorted(record.log):
            entry = record.log[sequence]
            if after_sequence is not None and sequence <= after_sequence:
                continue
            if from_time is not None and entry.created_at < from_time:
                continue
            if to_time is not None and entry.created_at > to_time:
                continue
            out.append(entry)
            if len(out) == limit:
                break
        return out

    async def prune_log(self, key: PKey, older_than: int) -> int:
        """Delete log entries created before ``older_than``; returns how many."""
        record = self._keys.get(key)
        if record is None:
            return 0
        old = [s for s, entry in record.log.items() if entry.created_at < older_than]
        for sequence in old:
            del record.log[sequence]
        return len(old)


def _tombstone(row: ItemRow, reason: TombstoneReason, removed_at: int) -> Tombstone:
    return Tombstone(
        row.identity, row.version, row.hash, row.schema_version, row.revision, reason, removed_at
    )


def _link(link: ListingLink) -> ListingLink:
    """``link`` checked: a :class:`ListingLink` with an int read and str-or-None
    neighbours, or ``TypeError`` (before anything is written)."""
    if type(link) is not ListingLink or type(link.read) is not int:
        raise TypeError(f"expected a ListingLink, got {link!r}")
    if not all(n is None or type(n) is str for n in (link.prev, link.next)):
        raise TypeError(f"expected str or None neighbours, got {link!r}")
    return link


def _rows(rows: Sequence[R], kind: type[R]) -> Sequence[R]:
    """``rows`` as a list or tuple whose elements are all ``kind``, or ``TypeError``."""
    out = rows if type(rows) in (list, tuple) else list(rows)
    if not all(issubclass(cls, kind) for cls in set(map(type, out))):
        raise TypeError(
            f"expected {kind.__name__} rows, got {sorted(set(map(type, out)), key=str)}"
        )
    return out


def _original_sequence(row: ParkedRow) -> int:
    """The sequence a retried poison event goes back to: its own, or, for a row parked
    without one, the ``sequence`` of its event envelope."""
    if row.sequence is not None:
        return row.sequence
    try:
        envelope = wkjson.loads(row.event or "null")
    except ValueError:
        return 0
    value = envelope.get("sequence") if isinstance(envelope, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
