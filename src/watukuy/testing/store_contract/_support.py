"""What the contract modules share: the suite's constants, row builders, seeding and
comparison helpers, the failure levers of the atomicity tests and the fenced-method table.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, overload

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from watukuy.diff import MAX_IDENTITY_BYTES
from watukuy.model import json as wkjson
from watukuy.model.errors import SerializedError, StoreError, WatukuyError
from watukuy.model.late import Following, LateArrivals, Lookback
from watukuy.model.ports import StateStore
from watukuy.model.rows import (
    BackfillState,
    CircuitState,
    CommitBatch,
    EventCounts,
    HeldDeletes,
    ItemRow,
    Lease,
    ListingPass,
    ListingState,
    LoggedEvent,
    OutboxRow,
    ParkedRow,
    PKey,
    PollerState,
    PollSummary,
    RateLimitInfo,
    ScheduleState,
    StatePatch,
    Validator,
)

T = TypeVar("T")

T0 = 1_767_225_600_000
"""2026-01-01T00:00:00Z in epoch milliseconds: the suite's "now"."""
TTL = 30_000
"""The lease time to live the suite takes leases with, in milliseconds."""
KEY = PKey("orders")
"""The key most contract tests use: poller ``orders``, no partition."""
KEY_B = PKey("orders", "tenant-b")
"""A second partition of :data:`KEY`'s poller, to show keys do not leak into each other."""
KEY_OTHER = PKey("invoices")
"""A key of another poller, to show pollers do not leak into each other."""

# JSON text that a lossy store would damage: key order that is not sorted, integers beyond
# 64 bits, non-BMP characters both raw and escaped, an escaped NUL, a float at the edge of
# double precision. Stores keep payloads as text, so it must come back byte for byte.
TRICKY_JSON = (
    '{"z":1,"big":123456789012345678901234567890,"neg":-98765432109876543210,'
    '"emoji":"\U0001f600\U0001d11e","escaped":"\\ud83d\\ude00","nul":"\\u0000",'
    '"f":1.0000000000000002,"a":[],"o":{}}'
)

# Any string of Unicode characters (a lone surrogate is not one: it has no UTF-8 form, and
# the engine refuses it before a store sees it), with the characters that need care in some
# store (NUL, the escape PostgresStore uses, separators of key layouts) drawn often.
_AWKWARD = "\x00\x01\x02|:{}%\\/\u00e9\u043a\U0001f600\U0010ffff"
_ANY_TEXT = st.text(st.one_of(st.sampled_from(_AWKWARD), st.characters(codec="utf-8")), max_size=10)
_UNICODE = settings(
    max_examples=25,
    deadline=None,
    # The store fixture outlives an example (keys are per example instead), and each store's
    # subclass runs the same method: neither shares anything between examples.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
)
# Each hypothesis example writes under keys of its own: the store fixture is shared by the
# examples of one test.
_EXAMPLES = itertools.count()

_URL = "u-1"
_FAR = 2**62  # a due_keys bound later than any wake time the suite writes
# Every identity the comparisons below may meet; used when a store cannot stream identities.
_KNOWN_IDENTITIES = ("i0", "i1", "i2", "a", "b", "c", "after")
# Every key test_list_keys_always_matches_the_states may create, in list_keys order.
_LISTED = (KEY_OTHER, KEY, KEY_B)


def incompressible_text(size: int, seed: int) -> str:
    """Exactly ``size`` bytes of UTF-8 that no store can shrink: random characters of every
    UTF-8 width, with U+0000 and U+0001 (which PostgresStore writes escaped, two characters
    each) mixed in."""
    chance = random.Random(seed)
    parts: list[str] = []
    used = 0
    while True:
        kind = chance.randrange(5)
        if kind == 0:
            char = chance.choice("\x00\x01")
        elif kind == 1:
            char = chr(chance.randint(0x10000, 0x10FFFF))
        elif kind == 2:
            char = chr(chance.randint(0x800, 0xD7FF))
        elif kind == 3:
            char = chr(chance.randint(0x80, 0x7FF))
        else:
            char = chr(chance.randint(0x21, 0x7E))
        width = len(char.encode())
        if used + width > size:
            break
        parts.append(char)
        used += width
    return "".join(parts) + "z" * (size - used)


def longest_identity(seed: int) -> str:
    """An identity of exactly :data:`~watukuy.diff.MAX_IDENTITY_BYTES` (see
    :func:`incompressible_text`)."""
    return incompressible_text(MAX_IDENTITY_BYTES, seed)


# The longest poller name there is, and a partition key of 256 bytes: they share the key of
# a snapshot row with its identity.
KEY_LONG = PKey("p" * 128, incompressible_text(256, 99))


def event_json(event_id: str, sequence: int, *, key: PKey = KEY) -> str:
    """A realistic event envelope as JSON text, for outbox, log and parked rows."""
    return wkjson.dumps(
        {
            "id": event_id,
            "type": "created",
            "source": f"urn:watukuy:{key.poller}",
            "subject": f"item-{sequence}",
            "time": "2026-01-01T00:00:00.000Z",
            "poller": key.poller,
            "partition": key.partition,
            "lane": "live",
            "sequence": sequence,
            "cursor": None,
            "data": {"id": f"item-{sequence}", "amount": sequence * 1.5, "tags": ["a"]},
            "previous": None,
            "attempt": 1,
        }
    )


def item_row(identity: str, **changes: Any) -> ItemRow:
    """A snapshot row; keyword arguments replace fields."""
    row = ItemRow(
        identity=identity, version="v1", hash=f"hash-{identity}", schema_version=1, seen_at=T0
    )
    return dataclasses.replace(row, **changes)


def outbox_row(event_id: str, sequence: int, **changes: Any) -> OutboxRow:
    """A pending outbox row; keyword arguments replace fields."""
    row = OutboxRow(
        event_id=event_id,
        sequence=sequence,
        event=event_json(event_id, sequence),
        created_at=T0 + sequence,
    )
    return dataclasses.replace(row, **changes)


def parked_poison(row_id: str, sequence: int, **changes: Any) -> ParkedRow:
    """A parked poison event; keyword arguments replace fields."""
    error: SerializedError = {
        "name": "HandlerError",
        "message": f"handler failed for {row_id}",
        "code": "HANDLER",
        "history": [{"at": T0, "message": "first"}, {"at": T0 + 1, "message": "second"}],
    }
    row = ParkedRow(
        id=row_id,
        kind="poison",
        event=event_json(row_id, sequence),
        item=None,
        error=error,
        attempts=3,
        parked_at=T0 + 100,
        sequence=sequence,
    )
    return dataclasses.replace(row, **changes)


def parked_invalid(row_id: str, **changes: Any) -> ParkedRow:
    """A quarantined invalid item; keyword arguments replace fields."""
    error: SerializedError = {
        "name": "ValidationError",
        "message": "bad item",
        "code": "VALIDATION",
        "issues": [{"message": "required", "path": ["id", 0]}],
    }
    row = ParkedRow(
        id=row_id,
        kind="invalid",
        event=None,
        item='{"raw":true,"id":7}',
        error=error,
        attempts=0,
        parked_at=T0 + 100,
    )
    return dataclasses.replace(row, **changes)


def batch(**changes: Any) -> CommitBatch:
    """A commit batch with ``now = T0``; keyword arguments replace fields."""
    return dataclasses.replace(CommitBatch(now=T0), **changes)


def _full_state(created_at: int) -> PollerState:
    """A state with every field away from its default, nested JSON included."""
    return PollerState(
        cursors={"live": '{"since":1767225600000,"ids":["a","b"]}', "backfill": None},
        schedule=ScheduleState(
            next_due_at=T0 + 60_000,
            interval_ms=60_000,
            consecutive_failures=2,
            circuit=CircuitState.HALF_OPEN,
            circuit_opened_at=T0 + 1,
            throttled_until=T0 + 2,
            rate_limit=RateLimitInfo(100, 42, T0 + 3, "100;w=60", "ietf"),
            last_poll_at=T0 + 4,
            last_poll=PollSummary(
                lane="live",
                started_at=T0,
                duration_ms=120,
                pages=2,
                items=30,
                events=EventCounts(1, 2, 3),
                not_modified=False,
                truncated=True,
            ),
            last_error={
                "name": "HttpError",
                "message": "GET /orders responded 503 \U0001f600",
                "code": "HTTP",
                "status": 503,
                "cause": {"name": "OSError", "message": "upstream unavailable"},
            },
            next_retry_at=T0 + 5,
            drain_blocked=True,
        ),
        paused=True,
        schema_version=3,
        sequence=17,
        last_reconcile_at=T0 + 6,
        backfill=BackfillState(from_cursor='"page-3"', to_cursor=None, force=True, started_at=T0),
        created_at=created_at,
        updated_at=T0 + 10,
        wake_at=T0 + 11,
        listing=ListingState(
            counter=7,
            lanes={
                "live": ListingPass(
                    pass_id=7,
                    started_at=T0 + 7,
                    cursor='{"page":3}',
                    token="https://api.example.com/orders?after=o%7C2&q=\u00e9|\U0001f600",
                    pages=2,
                    items=200,
                    invalid=1,
                    not_modified=True,
                    listed=True,
                    clean=(4, 6),
                    last_clean=True,
                    completed=5,
                    last_completed_at=T0 + 6,
                    last_outcome="held 120 deletes (mass-delete guard)",
                    failed_page=3,
                    page_failures=1,
                    abandoned=2,
                    last_abandoned_at=T0 + 5,
                    last_abandoned="page 4 is gone (Page(gone=True))",
                ),
                "reconcile": ListingPass(clean=(5,), completed=1),
            },
        ),
        held_deletes=HeldDeletes(
            lane="live", below=6, count=120, snapshot=200, held_at=T0 + 6, passes=2
        ),
        late=LateArrivals(
            count=3,
            max_ms=61_000,
            buckets=(0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0),
            beyond=1,
            missed=2,
            by_lane={"live": 2, "reconcile": 1},
            last_at=T0 + 9,
            lost_at=T0 + 9,
            window_ms=120_000,
            following=(Following("o|1\u00e9", "v2", T0 + 8), Following("o2", "h", T0 + 9, True)),
            warned_at=T0 + 9,
            warned="beyond",
        ),
        lookback=Lookback(
            since='{"value":null,"tie_break":null}',
            started=T0 + 10,
            marks=((T0 + 3, '{"value":"2026-01-01T00:00:03Z","tie_break":"o9"}'),),
        ),
    )


def _patch_of(state: PollerState) -> StatePatch:
    return {
        "cursors": state.cursors,
        "schedule": state.schedule,
        "paused": state.paused,
        "schema_version": state.schema_version,
        "sequence": state.sequence,
        "last_reconcile_at": state.last_reconcile_at,
        "backfill": state.backfill,
        "updated_at": state.updated_at,
        "wake_at": state.wake_at,
        "listing": state.listing,
        "held_deletes": state.held_deletes,
        "late": state.late,
        "lookback": state.lookback,
    }


class _InjectedFailure(Exception):
    """Raised by :class:`_Unreadable` when its last element is read."""


class _Unreadable(Sequence[T]):
    """A sequence whose last element cannot be read, to break a commit half-way."""

    def __init__(self, rows: Sequence[T]) -> None:
        self._rows = list(rows)

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return _Unreadable(self._rows[index])
        if index in (len(self._rows) - 1, -1):
            raise _InjectedFailure("the last row of this batch cannot be read")
        return self._rows[index]


_BATCH_FAILURES = (StoreError, TypeError, ValueError, _InjectedFailure)


async def _acquire(
    store: StateStore, key: PKey = KEY, owner: str = "node-a", now: int = T0
) -> Lease:
    lease = await store.acquire_lease(key, owner, TTL, now)
    assert lease is not None, f"expected to acquire {key} as {owner}"
    return lease


async def _collect(store: StateStore, key: PKey, batch_size: int) -> list[list[str]]:
    return [chunk async for chunk in store.stream_identities(key, batch_size)]


async def _unseen(store: StateStore, key: PKey, before: int, batch_size: int = 1000) -> list[str]:
    return [i for chunk in await _unseen_batches(store, key, before, batch_size) for i in chunk]


async def _unseen_batches(
    store: StateStore, key: PKey, before: int, batch_size: int
) -> list[list[str]]:
    batches = [chunk async for chunk in store.stream_unseen(key, before, batch_size)]
    assert all(0 < len(chunk) <= batch_size for chunk in batches), batches
    return batches


async def _assert_unsupported(call: Awaitable[Any]) -> None:
    with pytest.raises(WatukuyError) as info:
        await call
    assert info.value.code == "UNSUPPORTED", f"expected code UNSUPPORTED, got {info.value!r}"


async def _everything(store: StateStore, key: PKey) -> dict[str, Any]:
    """All that a key holds, read through the public API, for before/after comparisons."""
    if store.capabilities.streaming:
        identities = [i for chunk in await _collect(store, key, 1000) for i in chunk]
    else:
        identities = list(_KNOWN_IDENTITIES)
    snapshot: dict[str, Any] = {
        "state": await store.load_state(key),
        "lease": await store.get_lease(key),
        "items": await store.load_versions(key, identities),
        "tombstones": await store.load_tombstones(key, sorted({*identities, *_KNOWN_IDENTITIES})),
        "count_items": await store.count_items(key),
        "pending": await store.load_pending(key, 100_000),
        "count_pending": await store.count_pending(key),
        "parked": await store.list_parked(key),
        "count_parked": await store.count_parked(key),
        "held": await store.held_keys(key),
        "validator": await store.get_validator(key, _URL),
        "due": [due for due in await store.due_keys(key.poller, _FAR) if due[0] == key.partition],
    }
    if store.capabilities.streaming:
        snapshot["unseen"] = {before: await _unseen(store, key, before) for before in (1, 2, 3)}
    if store.capabilities.log:
        snapshot["log"] = await store.read_log(key, limit=100_000)
    return snapshot


async def _seed(store: StateStore, key: PKey = KEY) -> Lease:
    """A key holding one of everything: state, item, pending event, parked row, validator,
    and a log entry when the store keeps a log."""
    lease = await _acquire(store, key)
    await store.commit_poll(
        key,
        lease,
        batch(
            state_patch={
                "sequence": 1,
                "cursors": {"live": '"c1"'},
                "updated_at": T0,
                "wake_at": T0 + 500,
            },
            upserts=[item_row("i1"), item_row("i0", payload='{"n":0}')],
            seen=["i1"],
            seen_pass=2,
            events=[outbox_row("e1", 1)],
            parked=[parked_poison("p1", 0, hold_key="held")],
            log=store.capabilities.log,
        ),
    )
    await store.set_validator(key, lease, _URL, Validator('"etag-1"', None, T0))
    return lease


def _ids(rows: Sequence[OutboxRow]) -> list[str]:
    return [row.event_id for row in rows]


def _seqs(rows: Sequence[LoggedEvent]) -> list[int]:
    return [row.sequence for row in rows]


# Every fenced method, called with a given lease, doing something visible on a seeded key.
_FENCED: dict[str, Callable[[StateStore, PKey, Lease], Awaitable[None]]] = {
    "save_state": lambda s, k, lease: s.save_state(
        k, lease, {"paused": True, "updated_at": T0 + 9, "wake_at": None}
    ),
    "commit_poll": lambda s, k, lease: s.commit_poll(
        k,
        lease,
        batch(
            state_patch={"sequence": 2, "updated_at": T0 + 9, "wake_at": T0 + 900},
            upserts=[item_row("i2")],
            deletes=["i1"],
            events=[outbox_row("e2", 2), outbox_row("e1", 3)],
            parked=[parked_invalid("bad-1", hold_key="held-2")],
            log=s.capabilities.log,
        ),
    ),
    "ack_events": lambda s, k, lease: s.ack_events(k, lease, ["e1"]),
    "record_attempt": lambda s, k, lease: s.record_attempt(
        k, lease, "e1", {"name": "Error", "message": "boom"}, T0 + 1_000
    ),
    "park_event": lambda s, k, lease: s.park_event(k, lease, parked_poison("e1", 1)),
    "set_validator": lambda s, k, lease: s.set_validator(
        k, lease, _URL, Validator('"etag-2"', "Wed, 21 Oct 2015 07:28:00 GMT", T0 + 9)
    ),
}
