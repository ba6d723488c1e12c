"""The store contract suite: one set of tests every :class:`~watukuy.model.ports.StateStore`
must pass, shipped so that a third-party store can certify itself.

Subclass :class:`StoreContract` in a test module and override the ``store`` fixture with one
that yields a fresh, empty, migrated store and closes it afterwards::

    import pytest
    from watukuy.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        async def store(self):
            s = MyStore(...)
            await s.migrate()
            yield s
            await s.close()

What your pytest configuration needs: `pytest-asyncio <https://pypi.org/project/pytest-asyncio/>`_
and `hypothesis <https://pypi.org/project/hypothesis/>`_ installed, and ``asyncio_mode = "auto"`` under ``[tool.pytest.ini_options]`` (watukuy's own
configuration). In strict mode the tests still run (the class carries the ``asyncio`` mark),
but your fixture must then be declared with ``@pytest_asyncio.fixture``.

The suite adapts to :attr:`StateStore.capabilities` instead of skipping: when a store says
``log=False`` (or ``streaming=False``), the log (streaming) tests assert that the store
raises a :class:`~watukuy.WatukuyError` with code ``"UNSUPPORTED"``; with
``transactions=False`` the atomicity tests only assert that the failure surfaces and that
the lease survives it.

**How atomicity is tested.** ``commit_poll`` must write everything or nothing, so the suite
seeds a key, then commits a batch whose *last* element cannot be written, and checks that
the key reads back exactly as it was (state, lease, items, outbox, parked rows, held keys,
validators, log) and that the store is still usable. Two levers work on any store without
knowing how it is built:

* a JSON-typed field the store has to encode holds a value no JSON codec accepts (an error
  dictionary containing ``object()`` on the last outbox or parked row, or a cursor in the
  state patch), so the failure happens wherever the store encodes; and
* one of the batch's sequences raises when its last element is read, so a store that
  streams rows into an open transaction fails half-way through it.

The store may raise :class:`~watukuy.StoreError`, ``TypeError``/``ValueError`` (codec
errors) or let the injected exception through; never ``LeaseLostError``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar, cast, overload

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watukuy.model import json as wkjson
from watukuy.model.errors import LeaseLostError, SerializedError, StoreError, WatukuyError
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
    Tombstone,
    Validator,
    empty_poller_state,
)

__all__ = [
    "KEY",
    "KEY_B",
    "KEY_OTHER",
    "T0",
    "TTL",
    "StoreContract",
    "batch",
    "event_json",
    "item_row",
    "outbox_row",
    "parked_invalid",
    "parked_poison",
]

T = TypeVar("T")

T0 = 1_767_225_600_000
"""2026-01-01T00:00:00Z in epoch milliseconds: the suite's "now"."""
TTL = 30_000
KEY = PKey("orders")
KEY_B = PKey("orders", "tenant-b")
KEY_OTHER = PKey("invoices")

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
                ),
                "reconcile": ListingPass(clean=(5,), completed=1),
            },
        ),
        held_deletes=HeldDeletes(
            lane="live", below=6, count=120, snapshot=200, held_at=T0 + 6, passes=2
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


class StoreContract:
    """Base class of the contract suite; subclass it and override the ``store`` fixture.

    Every test receives a fresh, empty, migrated store. The suite never sleeps and uses
    fixed times around :data:`T0`.
    """

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.asyncio]

    @pytest.fixture
    async def store(self) -> StateStore:
        """Override me: yield a fresh, empty, migrated store and close it afterwards."""
        pytest.fail(f"{type(self).__name__} must override the `store` fixture")

    # --- setup -------------------------------------------------------------------------

    async def test_capabilities_are_booleans(self, store: StateStore) -> None:
        caps = store.capabilities
        assert {type(caps.transactions), type(caps.log), type(caps.streaming)} == {bool}

    async def test_migrate_again_is_a_no_op(self, store: StateStore) -> None:
        lease = await _seed(store)
        before = await _everything(store, KEY)
        await store.migrate()
        await store.migrate()
        assert await _everything(store, KEY) == before
        assert await store.get_lease(KEY) == lease

    async def test_an_empty_store_knows_nothing(self, store: StateStore) -> None:
        assert await store.load_state(KEY) is None
        assert await store.get_lease(KEY) is None
        assert await store.list_keys() == []
        assert await store.count_items(KEY) == 0
        assert await store.count_pending(KEY) == 0
        assert await store.count_parked(KEY) == 0
        assert await store.load_pending(KEY, 10) == []
        assert await store.list_parked(KEY) == []
        assert await store.held_keys(KEY) == set()
        assert await store.load_versions(KEY, ["a"]) == {}
        assert await store.get_validator(KEY, _URL) is None
        assert await store.due_keys(KEY.poller, _FAR) == []

    # --- leases ------------------------------------------------------------------------

    async def test_first_acquisition_creates_the_key_at_epoch_1(self, store: StateStore) -> None:
        lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
        assert lease == Lease("node-a", 1, T0 + TTL)
        assert await store.get_lease(KEY) == lease
        assert await store.load_state(KEY) == empty_poller_state(T0)
        assert await store.list_keys() == [KEY]

    async def test_a_held_lease_cannot_be_taken(self, store: StateStore) -> None:
        lease = await _acquire(store)
        assert await store.acquire_lease(KEY, "node-b", TTL, T0 + 1) is None
        assert await store.acquire_lease(KEY, "node-b", TTL, T0 + TTL - 1) is None
        assert await store.acquire_lease(KEY, "node-a", TTL, T0 + TTL - 1) is None
        assert await store.get_lease(KEY) == lease

    async def test_an_expired_lease_is_taken_with_the_next_epoch(self, store: StateStore) -> None:
        await _acquire(store)
        stolen = await store.acquire_lease(KEY, "node-b", TTL, T0 + TTL)
        assert stolen == Lease("node-b", 2, T0 + 2 * TTL)
        assert await store.get_lease(KEY) == stolen
        again = await store.acquire_lease(KEY, "node-a", 5, T0 + 2 * TTL + 7)
        assert again == Lease("node-a", 3, T0 + 2 * TTL + 12)

    async def test_acquisition_keeps_the_state(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.save_state(KEY, lease, {"sequence": 9, "updated_at": T0 + 1})
        await store.acquire_lease(KEY, "node-b", TTL, T0 + TTL)
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.sequence, state.created_at, state.updated_at) == (9, T0, T0 + 1)

    async def test_renew_extends_only_the_current_lease(self, store: StateStore) -> None:
        lease = await _acquire(store)
        assert await store.renew_lease(KEY, lease, TTL, T0 + 10_000) is True
        renewed = Lease("node-a", 1, T0 + 10_000 + TTL)
        assert await store.get_lease(KEY) == renewed
        assert await store.renew_lease(KEY, dataclasses.replace(lease, epoch=2), TTL, T0) is False
        stranger = dataclasses.replace(lease, owner="node-b")
        assert await store.renew_lease(KEY, stranger, TTL, T0) is False
        assert await store.renew_lease(KEY_B, lease, TTL, T0) is False
        assert await store.get_lease(KEY) == renewed
        assert await store.get_lease(KEY_B) is None

    async def test_renew_after_expiry_succeeds_while_nobody_took_over(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        assert await store.renew_lease(KEY, lease, TTL, T0 + 5 * TTL) is True
        assert await store.get_lease(KEY) == Lease("node-a", 1, T0 + 6 * TTL)
        stolen = await store.acquire_lease(KEY, "node-b", TTL, T0 + 6 * TTL)
        assert stolen is not None
        assert await store.renew_lease(KEY, lease, TTL, T0 + 6 * TTL) is False

    async def test_release_frees_the_key_and_the_epoch_keeps_growing(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.release_lease(KEY, lease)
        assert await store.get_lease(KEY) is None
        assert await store.load_state(KEY) == empty_poller_state(T0)
        second = await store.acquire_lease(KEY, "node-a", TTL, T0 + 1)
        assert second == Lease("node-a", 2, T0 + 1 + TTL)
        await store.release_lease(KEY, second)
        await store.release_lease(KEY, second)
        third = await store.acquire_lease(KEY, "node-b", TTL, T0 + 2)
        assert third == Lease("node-b", 3, T0 + 2 + TTL)

    async def test_release_with_a_stale_lease_is_a_no_op(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.release_lease(KEY, dataclasses.replace(lease, epoch=99))
        await store.release_lease(KEY, dataclasses.replace(lease, owner="node-z"))
        await store.release_lease(KEY_B, lease)
        assert await store.get_lease(KEY) == lease
        assert await store.get_lease(KEY_B) is None

    async def test_get_lease_returns_an_expired_lease(self, store: StateStore) -> None:
        lease = await _acquire(store)
        assert await store.get_lease(KEY) == lease  # the store has no clock; expiry is data

    async def test_an_expired_but_untaken_lease_still_passes_the_fence(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.save_state(KEY, lease, {"sequence": 4})
        await store.commit_poll(KEY, lease, batch(events=[outbox_row("e1", 1)], now=T0 + TTL))
        assert await store.count_pending(KEY) == 1

    # --- epochs across deletes and the known keys --------------------------------------

    async def test_epochs_never_repeat_after_delete_key(self, store: StateStore) -> None:
        # The engine's runners (and replay) share one owner name, so only the epoch tells
        # a lease issued before delete_key from one issued after it.
        first = await _acquire(store)
        await store.release_lease(KEY, first)
        second = await _acquire(store, now=T0 + 1)
        await store.delete_key(KEY)
        third = await _acquire(store, now=T0 + 2)
        assert first.epoch < second.epoch < third.epoch
        for stale in (first, second):
            with pytest.raises(LeaseLostError):
                await store.commit_poll(
                    KEY, stale, batch(upserts=[item_row("a")], events=[outbox_row("e1", 1)])
                )
            with pytest.raises(LeaseLostError):
                await store.save_state(KEY, stale, {"sequence": 9})
            assert await store.renew_lease(KEY, stale, TTL, T0 + 3) is False
        assert await store.count_items(KEY) == 0
        assert await store.count_pending(KEY) == 0
        # Created again by an administrative write, then leased: still after the floor.
        await store.delete_key(KEY)
        await store.save_state_unfenced(KEY, {"paused": False}, T0 + 4)
        fourth = await _acquire(store, now=T0 + 5)
        assert fourth.epoch > third.epoch
        with pytest.raises(LeaseLostError):
            await store.save_state(KEY, third, {"sequence": 9})
        # Other keys keep their own epochs.
        assert (await _acquire(store, KEY_B)).epoch == 1

    async def test_list_keys_always_matches_the_states(self, store: StateStore) -> None:
        async def check() -> None:
            keys = await store.list_keys()
            with_state = [k for k in _LISTED if await store.load_state(k) is not None]
            assert keys == with_state
            assert await store.list_keys("orders") == [k for k in keys if k.poller == "orders"]

        await check()
        lease = await _acquire(store)
        await check()
        await store.save_state_unfenced(KEY_B, {"paused": True}, T0)
        await check()
        await store.save_state_unfenced(KEY_OTHER, {"paused": False}, T0)
        await check()
        await store.delete_key(KEY)
        await check()
        with pytest.raises(LeaseLostError):
            await store.save_state(KEY, lease, {"sequence": 1})
        await check()
        await _acquire(store, now=T0 + 1)
        await check()
        await store.clear_items(KEY_B)
        await store.delete_key(KEY_OTHER)
        await store.delete_key(KEY_OTHER)
        await check()
        assert await store.list_keys() == [KEY, KEY_B]

    # --- fencing -----------------------------------------------------------------------

    @pytest.mark.parametrize("method", sorted(_FENCED))
    async def test_fenced_writes_reject_stale_leases(self, store: StateStore, method: str) -> None:
        stale = await _seed(store)
        current = await store.acquire_lease(KEY, "node-b", TTL, T0 + TTL)
        assert current is not None
        before = await _everything(store, KEY)
        write = _FENCED[method]
        for lease in (
            stale,
            dataclasses.replace(current, owner="node-a"),
            dataclasses.replace(current, epoch=current.epoch + 1),
            dataclasses.replace(current, epoch=current.epoch - 1),
        ):
            with pytest.raises(LeaseLostError) as info:
                await write(store, KEY, lease)
            assert (info.value.poller, info.value.partition) == (KEY.poller, KEY.partition)
            assert info.value.epoch == lease.epoch
            assert info.value.code == "LEASE_LOST"
        assert await _everything(store, KEY) == before
        await write(store, KEY, current)  # the holder's write goes through
        assert await _everything(store, KEY) != before

    @pytest.mark.parametrize("method", sorted(_FENCED))
    async def test_fenced_writes_on_a_missing_key_create_nothing(
        self, store: StateStore, method: str
    ) -> None:
        ghost = Lease("ghost", 1, T0 + TTL)
        with pytest.raises(LeaseLostError) as info:
            await _FENCED[method](store, KEY_B, ghost)
        assert (info.value.poller, info.value.partition, info.value.epoch) == (
            "orders",
            "tenant-b",
            1,
        )
        assert await store.load_state(KEY_B) is None
        assert await store.get_lease(KEY_B) is None
        assert await store.list_keys() == []
        assert await store.count_pending(KEY_B) == 0
        assert await store.count_parked(KEY_B) == 0
        assert await store.get_validator(KEY_B, _URL) is None

    @pytest.mark.parametrize("method", sorted(_FENCED))
    async def test_a_released_lease_no_longer_passes_the_fence(
        self, store: StateStore, method: str
    ) -> None:
        lease = await _seed(store)
        await store.release_lease(KEY, lease)
        before = await _everything(store, KEY)
        with pytest.raises(LeaseLostError):
            await _FENCED[method](store, KEY, lease)
        assert await _everything(store, KEY) == before

    async def test_a_lease_of_one_key_does_not_fence_another(self, store: StateStore) -> None:
        lease_a = await _acquire(store, KEY)
        lease_b = await _acquire(store, KEY_B, "node-a")
        assert lease_a == lease_b  # same owner, same epoch, same expiry: only the key differs
        await store.release_lease(KEY_B, lease_b)
        with pytest.raises(LeaseLostError):
            await store.save_state(KEY_B, lease_a, {"paused": True})
        await store.save_state(KEY, lease_a, {"paused": True})
        state_b = await store.load_state(KEY_B)
        assert state_b is not None
        assert state_b.paused is False

    # --- state -------------------------------------------------------------------------

    async def test_save_state_round_trips_every_field(self, store: StateStore) -> None:
        lease = await _acquire(store)
        state = _full_state(created_at=T0)
        await store.save_state(KEY, lease, _patch_of(state))
        assert await store.load_state(KEY) == state

    async def test_patches_replace_only_the_fields_they_carry(self, store: StateStore) -> None:
        lease = await _acquire(store)
        state = _full_state(created_at=T0)
        await store.save_state(KEY, lease, _patch_of(state))
        await store.save_state(
            KEY, lease, {"cursors": {"live": '"c2"'}, "sequence": 18, "backfill": None}
        )
        expected = dataclasses.replace(state, cursors={"live": '"c2"'}, sequence=18, backfill=None)
        assert await store.load_state(KEY) == expected
        await store.save_state(KEY, lease, {})
        assert await store.load_state(KEY) == expected

    async def test_unfenced_save_creates_the_key_without_a_lease(self, store: StateStore) -> None:
        await store.save_state_unfenced(KEY, {"paused": True}, T0 + 5)
        assert await store.load_state(KEY) == dataclasses.replace(
            empty_poller_state(T0 + 5), paused=True
        )
        assert await store.get_lease(KEY) is None
        assert await store.list_keys() == [KEY]
        first = await store.acquire_lease(KEY, "node-a", TTL, T0 + 6)
        assert first == Lease("node-a", 1, T0 + 6 + TTL)

    async def test_unfenced_save_never_touches_the_lease(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.save_state_unfenced(KEY, {"paused": True, "updated_at": T0 + 7}, T0 + 7)
        assert await store.get_lease(KEY) == lease
        await store.save_state(KEY, lease, {"sequence": 3})
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.paused, state.sequence, state.created_at, state.updated_at) == (
            True,
            3,
            T0,
            T0 + 7,
        )
        await store.release_lease(KEY, lease)
        await store.save_state_unfenced(KEY, {"paused": False}, T0 + 8)
        assert await store.get_lease(KEY) is None
        assert await store.acquire_lease(KEY, "node-b", TTL, T0 + 9) == Lease(
            "node-b", 2, T0 + 9 + TTL
        )

    async def test_list_keys_is_sorted_and_filtered(self, store: StateStore) -> None:
        keys = [PKey("b"), PKey("a", "z"), PKey("a.b"), PKey("a"), PKey("a", "y"), PKey("a", "Z")]
        for key in keys:
            await store.save_state_unfenced(key, {}, T0)
        assert await store.list_keys() == sorted(keys)
        assert await store.list_keys() == [
            PKey("a"),
            PKey("a", "Z"),
            PKey("a", "y"),
            PKey("a", "z"),
            PKey("a.b"),
            PKey("b"),
        ]
        assert await store.list_keys("a") == [
            PKey("a"),
            PKey("a", "Z"),
            PKey("a", "y"),
            PKey("a", "z"),
        ]
        assert await store.list_keys("unknown") == []

    async def test_delete_key_removes_every_row_of_the_key(self, store: StateStore) -> None:
        await _seed(store, KEY)
        lease_b = await _seed(store, KEY_B)
        other_before = await _everything(store, KEY_B)
        await store.delete_key(KEY)
        assert await _everything(store, KEY) == await _everything(store, PKey("never-seen"))
        if store.capabilities.log:
            assert await store.read_log(KEY) == []
        assert await store.list_keys() == [KEY_B]
        assert await _everything(store, KEY_B) == other_before
        assert await store.get_lease(KEY_B) == lease_b
        await store.delete_key(KEY)  # deleting twice is fine

    async def test_clear_items_drops_the_snapshot_only(self, store: StateStore) -> None:
        lease = await _seed(store, KEY)
        await _seed(store, KEY_B)
        before = await _everything(store, KEY)
        other_before = await _everything(store, KEY_B)
        await store.clear_items(KEY)
        after = await _everything(store, KEY)
        assert (after["items"], after["count_items"]) == ({}, 0)
        for field in ("state", "pending", "parked", "held", "validator", "log"):
            assert after.get(field) == before.get(field), field
        assert await store.get_lease(KEY) == lease
        assert await _everything(store, KEY_B) == other_before

    # --- items -------------------------------------------------------------------------

    async def test_load_versions_returns_the_rows_that_exist(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [
            item_row("a"),
            item_row("b", payload='{"name":"B"}', version=None, schema_version=2, seen_at=T0 + 1),
            item_row("c", payload=None),
        ]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        found = await store.load_versions(KEY, ["a", "b", "c", "missing", "a"])
        assert found == {row.identity: row for row in rows}
        assert await store.load_versions(KEY, []) == {}
        assert await store.load_versions(KEY_B, ["a"]) == {}

    async def test_load_versions_handles_many_identities(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [item_row(f"id-{n:05d}", hash=f"h{n}") for n in range(1_200)]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        wanted = [f"id-{n:05d}" for n in range(0, 2_400, 2)]
        found = await store.load_versions(KEY, wanted)
        assert sorted(found) == [f"id-{n:05d}" for n in range(0, 1_200, 2)]
        assert found["id-00998"].hash == "h998"

    async def test_load_versions_of_sorted_runs_dense_or_sparse(self, store: StateStore) -> None:
        # Pages listed in identity order ask for sorted runs; whatever a store does with
        # them, the answer is exactly the asked rows of this key.
        numbered = [f"id-{n:05d}" for n in range(1_000)]
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row(i, hash=f"h-{i}") for i in numbered])
        )
        other = await _acquire(store, KEY_B)
        await store.commit_poll(KEY_B, other, batch(upserts=[item_row(i) for i in numbered]))
        dense = [f"id-{n:05d}" for n in range(100, 300)] + ["id-00300x"]  # one unknown
        found = await store.load_versions(KEY, dense)
        assert sorted(found) == dense[:-1]
        assert found["id-00150"].hash == "h-id-00150"
        sparse = [f"id-{n:05d}" for n in range(0, 1_000, 10)]
        assert sorted(await store.load_versions(KEY, sparse)) == sparse

        names = [chr(0x4E00 + n) for n in range(70)] + ["Z", "a", "\u00e9", "\uff5a", "\U0001f600"]
        key_u = PKey("orders", "tenant-u")
        await store.commit_poll(
            key_u, await _acquire(store, key_u), batch(upserts=[item_row(i) for i in names])
        )
        asked = sorted([*names, "b", "\u00ff"])  # code point order, two unknown
        assert set(await store.load_versions(key_u, asked)) == set(names)

    async def test_upserts_replace_whole_rows_and_deletes_remove_them(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a", payload='{"v":1}'), item_row("b")])
        )
        replacement = item_row("a", hash="hash-a2", version=None, seen_at=T0 + 5)
        await store.commit_poll(
            KEY,
            lease,
            batch(upserts=[replacement, item_row("c")], deletes=["b", "never-existed"]),
        )
        assert await store.load_versions(KEY, ["a", "b", "c"]) == {
            "a": replacement,
            "c": item_row("c"),
        }
        assert await store.count_items(KEY) == 2

    async def test_stream_identities_walks_the_snapshot_in_batches(self, store: StateStore) -> None:
        lease = await _acquire(store)
        # Inserted in a scrambled order so that insertion order is not identity order.
        identities = [f"id-{(n * 7_919) % 2_500:05d}" for n in range(2_500)]
        await store.commit_poll(KEY, lease, batch(upserts=[item_row(i) for i in identities]))
        if not store.capabilities.streaming:
            await _assert_unsupported(_collect(store, KEY, 1000))
            return
        batches = await _collect(store, KEY, 1000)
        assert [len(b) for b in batches] == [1000, 1000, 500]
        assert [i for b in batches for i in b] == sorted(identities)
        default = [chunk async for chunk in store.stream_identities(KEY)]
        assert default == batches  # the default batch size is 1000
        exact = await _collect(store, KEY, 1250)
        assert [len(b) for b in exact] == [1250, 1250]
        assert await _collect(store, KEY_B, 1000) == []

    async def test_stream_identities_orders_by_code_point(self, store: StateStore) -> None:
        if not store.capabilities.streaming:
            await _assert_unsupported(_collect(store, KEY, 3))
            return
        lease = await _acquire(store)
        identities = ["b", "B", "a", "\u00e9", "\U0001f600", "\uffff", "a:b", "a|b", "a/b", "Z", ""]
        await store.commit_poll(KEY, lease, batch(upserts=[item_row(i) for i in identities]))
        batches = await _collect(store, KEY, 3)
        assert [len(b) for b in batches] == [3, 3, 3, 2]
        assert [i for b in batches for i in b] == sorted(identities)

    async def test_count_items_follows_the_snapshot(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a"), item_row("b")]))
        assert await store.count_items(KEY) == 2
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")], deletes=["b"]))
        assert await store.count_items(KEY) == 1
        assert await store.count_items(KEY_B) == 0

    # --- revisions and tombstones -----------------------------------------------------

    async def test_revisions_round_trip(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [item_row("a", revision=3), item_row("b"), item_row("c", revision=2**40)]
        await store.commit_poll(KEY, lease, batch(upserts=rows))
        assert await store.load_versions(KEY, ["a", "b", "c"]) == {r.identity: r for r in rows}

    async def test_a_deleted_row_leaves_a_tombstone_in_the_same_commit(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a", revision=2), item_row("b")])
        )
        assert await store.load_tombstones(KEY, ["a", "b"]) == {}
        await store.commit_poll(KEY, lease, batch(deletes=["a", "never"], now=T0 + 5))
        # The row is gone from every view of the snapshot...
        assert await store.load_versions(KEY, ["a"]) == {}
        assert await store.count_items(KEY) == 1
        if store.capabilities.streaming:
            assert await _collect(store, KEY, 10) == [["b"]]
        # ...and its tombstone keeps what the row held; nothing for an unknown identity.
        assert await store.load_tombstones(KEY, ["a", "b", "never"]) == {
            "a": Tombstone("a", "v1", "hash-a", 1, 2, "deleted", T0 + 5)
        }
        assert await store.load_tombstones(KEY_B, ["a"]) == {}
        assert await store.load_tombstones(KEY, []) == {}

    async def test_revived_identities_lose_their_tombstone(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a"), item_row("b")]))
        await store.commit_poll(KEY, lease, batch(deletes=["a", "b"], now=T0 + 1))
        # An upsert alone leaves the tombstone (the store does not guess); `revived` drops it.
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a", revision=2), item_row("b")], revived=["a"])
        )
        assert sorted(await store.load_versions(KEY, ["a", "b"])) == ["a", "b"]
        assert sorted(await store.load_tombstones(KEY, ["a", "b"])) == ["b"]
        # Deleted again: the newer row replaces the old tombstone.
        await store.commit_poll(KEY, lease, batch(deletes=["a", "b"], now=T0 + 7))
        tombstones = await store.load_tombstones(KEY, ["a", "b"])
        assert tombstones["a"] == Tombstone("a", "v1", "hash-a", 1, 2, "deleted", T0 + 7)
        assert tombstones["b"].removed_at == T0 + 7

    async def test_clear_items_leaves_cleared_tombstones(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY,
            lease,
            batch(
                upserts=[
                    item_row("a", revision=1, seen_at=T0 + 3),
                    item_row("b", version=None),
                    item_row("c"),
                ]
            ),
        )
        await store.commit_poll(KEY, lease, batch(deletes=["c"], now=T0 + 4))
        await store.commit_poll(KEY_B, await _acquire(store, KEY_B), batch(upserts=[item_row("a")]))
        await store.clear_items(KEY)
        assert await store.count_items(KEY) == 0
        assert await store.load_tombstones(KEY, ["a", "b", "c"]) == {
            "a": Tombstone("a", "v1", "hash-a", 1, 1, "cleared", T0 + 3),
            "b": Tombstone("b", None, "hash-b", 1, 0, "cleared", T0),
            "c": Tombstone("c", "v1", "hash-c", 1, 0, "deleted", T0 + 4),
        }
        assert await store.load_tombstones(KEY_B, ["a"]) == {}
        assert await store.count_items(KEY_B) == 1

    async def test_prune_tombstones_by_age(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row(n) for n in ("a", "b", "c", "d")])
        )
        for n, identity in enumerate(("a", "b", "c")):
            await store.commit_poll(KEY, lease, batch(deletes=[identity], now=T0 + n))
        lease_b = await _acquire(store, KEY_B)
        await store.commit_poll(KEY_B, lease_b, batch(upserts=[item_row("a")]))
        await store.commit_poll(KEY_B, lease_b, batch(deletes=["a"], now=T0))
        assert await store.prune_tombstones(KEY, T0 + 2) == 2
        assert sorted(await store.load_tombstones(KEY, ["a", "b", "c", "d"])) == ["c"]
        assert await store.prune_tombstones(KEY, T0 + 2) == 0
        assert await store.prune_tombstones(PKey("never-seen"), T0 + 9) == 0
        assert sorted(await store.load_tombstones(KEY_B, ["a"])) == ["a"]

    async def test_delete_key_removes_tombstones(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")]))
        await store.commit_poll(KEY, lease, batch(deletes=["a"]))
        await store.delete_key(KEY)
        assert await store.load_tombstones(KEY, ["a"]) == {}

    # --- seen marks (resumable full listings) ---------------------------------------

    async def test_new_rows_start_unseen_and_marks_move_them(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [item_row(i) for i in ("a", "b", "c", "d")]
        await store.commit_poll(KEY, lease, batch(upserts=rows, seen=["a"], seen_pass=3))
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        assert await _unseen(store, KEY, 1) == ["b", "c", "d"]
        assert await _unseen(store, KEY, 3) == ["b", "c", "d"]
        assert await _unseen(store, KEY, 4) == ["a", "b", "c", "d"]
        # Marks without upserts (an unchanged page); an unknown identity creates nothing.
        await store.commit_poll(KEY, lease, batch(seen=["b", "c", "ghost"], seen_pass=5))
        assert await _unseen(store, KEY, 5) == ["a", "d"]
        assert await _unseen(store, KEY, 6) == ["a", "b", "c", "d"]
        assert await store.count_items(KEY) == 4
        assert await store.load_versions(KEY, ["ghost"]) == {}
        assert await _unseen(store, KEY_B, 10) == []

    async def test_an_upsert_keeps_the_mark_and_a_delete_drops_it(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row("a"), item_row("b")], seen=["a", "b"], seen_pass=4)
        )
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        changed = item_row("a", hash="hash-a2", seen_at=T0 + 9)
        await store.commit_poll(KEY, lease, batch(upserts=[changed]))
        assert await _unseen(store, KEY, 4) == []
        assert (await store.load_versions(KEY, ["a"]))["a"] == changed
        # Deleted, then created again: the new row starts unseen.
        await store.commit_poll(KEY, lease, batch(deletes=["b"]))
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("b")]))
        assert await _unseen(store, KEY, 1) == ["b"]
        # clear_items drops the marks with the rows.
        await store.clear_items(KEY)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")]))
        assert await _unseen(store, KEY, 1) == ["a"]

    async def test_stream_unseen_pages_in_code_point_order(self, store: StateStore) -> None:
        lease = await _acquire(store)
        identities = [f"id-{(n * 7_919) % 2_500:05d}" for n in range(2_500)]
        marked = [i for n, i in enumerate(sorted(identities)) if n % 3 == 0]
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        await store.commit_poll(
            KEY, lease, batch(upserts=[item_row(i) for i in identities], seen=marked, seen_pass=2)
        )
        expected = sorted(set(identities) - set(marked))
        assert await _unseen(store, KEY, 2, batch_size=250) == expected
        assert await _unseen(store, KEY, 2, batch_size=7) == expected
        assert await _unseen(store, KEY, 3) == sorted(identities)
        odd = ["b", "B", "\u00e9", "\U0001f600", "a|b", ""]
        await store.commit_poll(
            KEY_B, await _acquire(store, KEY_B), batch(upserts=[item_row(i) for i in odd])
        )
        assert await _unseen(store, KEY_B, 1, batch_size=2) == sorted(odd)

    async def test_a_mark_and_a_delete_of_one_identity_in_one_batch(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a"), item_row("b")]))
        await store.commit_poll(KEY, lease, batch(seen=["a", "b"], seen_pass=2, deletes=["b"]))
        if not store.capabilities.streaming:
            await _assert_unsupported(_unseen(store, KEY, 1))
            return
        assert await _unseen(store, KEY, 3) == ["a"]
        assert await store.count_items(KEY) == 1

    async def test_listing_progress_and_held_deletes_survive_patches(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        state = _full_state(created_at=T0)
        await store.commit_poll(KEY, lease, batch(state_patch=_patch_of(state)))
        assert await store.load_state(KEY) == state
        # An operator's unfenced write of the hold leaves the listing alone, and back.
        assert state.held_deletes is not None
        confirmed = dataclasses.replace(state.held_deletes, confirmed=True)
        await store.save_state_unfenced(KEY, {"held_deletes": confirmed}, T0 + 20)
        progress = ListingState(counter=8, lanes={"live": ListingPass(pass_id=8, cursor="null")})
        await store.save_state(KEY, lease, {"listing": progress})
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert (loaded.listing, loaded.held_deletes) == (progress, confirmed)
        await store.save_state_unfenced(KEY, {"held_deletes": None}, T0 + 21)
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert (loaded.listing, loaded.held_deletes) == (progress, None)

    # --- commit_poll -------------------------------------------------------------------

    async def test_commit_writes_every_part_of_the_batch(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a"), item_row("b")]))
        invalid = parked_invalid("inv-1", hold_key="k-9")
        await store.commit_poll(
            KEY,
            lease,
            batch(
                state_patch={
                    "sequence": 2,
                    "cursors": {"live": '"c2"'},
                    "schema_version": 1,
                    "updated_at": T0 + 1,
                },
                upserts=[item_row("c"), item_row("a", hash="hash-a2", version="v2")],
                deletes=["b"],
                events=[outbox_row("e1", 1), outbox_row("e2", 2)],
                parked=[invalid],
            ),
        )
        assert await store.load_versions(KEY, ["a", "b", "c"]) == {
            "a": item_row("a", hash="hash-a2", version="v2"),
            "c": item_row("c"),
        }
        assert await store.load_pending(KEY, 10) == [outbox_row("e1", 1), outbox_row("e2", 2)]
        assert await store.list_parked(KEY) == [invalid]
        assert await store.held_keys(KEY) == {"k-9"}
        assert await store.load_state(KEY) == dataclasses.replace(
            empty_poller_state(T0),
            sequence=2,
            cursors={"live": '"c2"'},
            schema_version=1,
            updated_at=T0 + 1,
        )
        assert await store.get_lease(KEY) == lease

    async def test_an_empty_batch_still_applies_the_state_patch(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(state_patch={"sequence": 5, "updated_at": T0 + 3})
        )
        assert await store.load_state(KEY) == dataclasses.replace(
            empty_poller_state(T0), sequence=5, updated_at=T0 + 3
        )
        await store.commit_poll(KEY, lease, batch())
        assert (await _everything(store, KEY))["count_items"] == 0

    async def test_recommitting_an_event_id_replaces_the_outbox_row(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(events=[outbox_row("e1", 1), outbox_row("e2", 2)])
        )
        await store.record_attempt(KEY, lease, "e1", {"name": "Error", "message": "x"}, T0 + 500)
        # The item flipped back: the same event id is observed again, later in the stream.
        again = outbox_row("e1", 3, created_at=T0 + 50)
        await store.commit_poll(KEY, lease, batch(events=[again]))
        assert await store.load_pending(KEY, 10) == [outbox_row("e2", 2), again]
        assert await store.count_pending(KEY) == 2

    async def test_parked_rows_in_a_batch_replace_rows_with_the_same_id(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(parked=[parked_invalid("x", hold_key="h1")]))
        newer = parked_invalid("x", item='{"raw":2}', parked_at=T0 + 200)
        await store.commit_poll(KEY, lease, batch(parked=[newer]))
        assert await store.list_parked(KEY) == [newer]
        assert await store.held_keys(KEY) == set()

    @pytest.mark.parametrize(
        "failure",
        [
            "state_patch_codec",
            "event_error_codec",
            "parked_error_codec",
            "upserts_unreadable",
            "events_unreadable",
            "parked_unreadable",
        ],
    )
    async def test_a_failed_commit_persists_nothing(self, store: StateStore, failure: str) -> None:
        lease = await _seed(store)
        before = await _everything(store, KEY)
        bad_error = cast(SerializedError, {"name": "Error", "message": "x", "history": [object()]})
        patch: dict[str, Any] = {
            "sequence": 9,
            "cursors": {"live": '"c9"'},
            "updated_at": T0 + 9,
            "wake_at": T0 + 9,
        }
        upserts: Sequence[ItemRow] = [item_row("i1", hash="changed"), item_row("i2")]
        events: Sequence[OutboxRow] = [outbox_row("e1", 4), outbox_row("e2", 5)]
        parked: Sequence[ParkedRow] = [parked_invalid("bad-1", hold_key="h"), parked_invalid("b2")]
        if failure == "state_patch_codec":
            patch["cursors"] = {"live": object()}
        elif failure == "event_error_codec":
            events = [events[0], dataclasses.replace(events[1], last_error=bad_error)]
        elif failure == "parked_error_codec":
            parked = [parked[0], dataclasses.replace(parked[1], error=bad_error)]
        elif failure == "upserts_unreadable":
            upserts = _Unreadable(upserts)
        elif failure == "events_unreadable":
            events = _Unreadable(events)
        else:
            parked = _Unreadable(parked)
        doomed = batch(
            state_patch=cast(StatePatch, patch),
            upserts=upserts,
            seen=["i0", "i1", "i2"],
            seen_pass=9,
            deletes=["i0"],
            events=events,
            parked=parked,
            log=store.capabilities.log,
            now=T0 + 9,
        )
        with pytest.raises(_BATCH_FAILURES):
            await store.commit_poll(KEY, lease, doomed)
        assert await store.get_lease(KEY) == lease
        if store.capabilities.transactions:
            assert await _everything(store, KEY) == before
        # The store is still usable: the failed transaction did not linger.
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("after")]))
        assert await store.load_versions(KEY, ["after"]) == {"after": item_row("after")}
        if store.capabilities.transactions:
            assert await store.count_items(KEY) == before["count_items"] + 1

    @pytest.mark.parametrize("where", ["item_seen_at", "event_sequence", "parked_at"])
    async def test_a_commit_refused_after_its_first_write_is_all_or_nothing(
        self, store: StateStore, where: str
    ) -> None:
        # Unlike the failures above, which every store can see before it writes anything,
        # a value beyond 64 bits on the last row of one table passes every codec and is
        # refused (if at all) only when the database binds that row, after the state, the
        # items or the outbox went in. A store that is not one transaction then keeps half
        # of the page; a store that accepts the value must keep all of it.
        lease = await _seed(store)
        before = await _everything(store, KEY)
        huge = 2**63
        upserts = [item_row("i1", hash="changed"), item_row("i2")]
        events = [outbox_row("e2", 5), outbox_row("e3", 6)]
        parked = [parked_invalid("bad-1", hold_key="h"), parked_invalid("bad-2")]
        if where == "item_seen_at":
            upserts[-1] = item_row("i2", seen_at=huge)
        elif where == "event_sequence":
            events[-1] = outbox_row("e3", huge)
        else:
            parked[-1] = parked_invalid("bad-2", parked_at=huge)
        doomed = batch(
            state_patch={"sequence": huge, "cursors": {"live": '"c9"'}, "updated_at": T0 + 9},
            upserts=upserts,
            deletes=["i0"],
            events=events,
            parked=parked,
            log=store.capabilities.log,
            now=T0 + 9,
        )
        try:
            await store.commit_poll(KEY, lease, doomed)
        except (StoreError, OverflowError, TypeError, ValueError):
            assert await store.get_lease(KEY) == lease
            if store.capabilities.transactions:
                assert await _everything(store, KEY) == before, (
                    "a commit that failed half way left some of its writes behind"
                )
        else:
            state = await store.load_state(KEY)
            assert state is not None
            assert state.sequence == huge
            assert state.cursors["live"] == '"c9"'
            assert await store.load_versions(KEY, ["i0", "i1", "i2"]) == {
                row.identity: row for row in upserts
            }
            assert _ids(await store.load_pending(KEY, 10)) == ["e1", "e2", "e3"]
            assert sorted(row.id for row in await store.list_parked(KEY)) == [
                "bad-1",
                "bad-2",
                "p1",
            ]
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("after")]))
        assert await store.load_versions(KEY, ["after"]) == {"after": item_row("after")}

    # --- outbox ------------------------------------------------------------------------

    async def test_load_pending_is_in_sequence_order_and_ignores_next_attempt_at(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        failed = outbox_row("e2", 2, attempts=4, last_error={"name": "Error", "message": "x"})
        later = outbox_row("e3", 3, next_attempt_at=T0 + 999_999_999)
        await store.commit_poll(
            KEY, lease, batch(events=[later, outbox_row("e10", 10), outbox_row("e1", 1), failed])
        )
        assert await store.load_pending(KEY, 10) == [
            outbox_row("e1", 1),
            failed,
            later,
            outbox_row("e10", 10),
        ]
        assert _ids(await store.load_pending(KEY, 2)) == ["e1", "e2"]
        assert await store.load_pending(KEY, 0) == []
        assert await store.load_pending(KEY_B, 10) == []
        assert await store.count_pending(KEY) == 4

    async def test_load_pending_pages_by_sequence(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [outbox_row(f"e{n}", n) for n in (9, 3, 12, 5, 1)]
        await store.commit_poll(KEY, lease, batch(events=rows))
        assert _ids(await store.load_pending(KEY, 10, after_sequence=3)) == ["e5", "e9", "e12"]
        assert _ids(await store.load_pending(KEY, 2, after_sequence=3)) == ["e5", "e9"]
        assert _ids(await store.load_pending(KEY, 10, after_sequence=0)) == [
            "e1",
            "e3",
            "e5",
            "e9",
            "e12",
        ]
        assert await store.load_pending(KEY, 10, after_sequence=12) == []
        assert _ids(await store.load_pending(KEY, 10, None)) == ["e1", "e3", "e5", "e9", "e12"]

    async def test_ack_removes_rows_and_ignores_unknown_ids(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [outbox_row("e1", 1), outbox_row("e2", 2), outbox_row("e3", 3)]
        await store.commit_poll(KEY, lease, batch(events=rows))
        await store.ack_events(KEY, lease, ["e1", "e3", "unknown", "e1"])
        assert _ids(await store.load_pending(KEY, 10)) == ["e2"]
        await store.ack_events(KEY, lease, [])
        assert await store.count_pending(KEY) == 1

    async def test_record_attempt_counts_failures(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(KEY, lease, batch(events=[outbox_row("e1", 1)]))
        error: SerializedError = {
            "name": "HandlerError",
            "message": "boom \U0001f4a5",
            "code": "HANDLER",
            "cause": {"name": "TypeError", "message": "x is not callable"},
        }
        await store.record_attempt(KEY, lease, "e1", error, T0 + 5_000)
        assert await store.load_pending(KEY, 10) == [
            outbox_row("e1", 1, attempts=1, last_error=error, next_attempt_at=T0 + 5_000)
        ]
        await store.record_attempt(KEY, lease, "e1", {"name": "Error", "message": "again"}, None)
        assert await store.load_pending(KEY, 10) == [
            outbox_row("e1", 1, attempts=2, last_error={"name": "Error", "message": "again"})
        ]
        await store.record_attempt(KEY, lease, "unknown", error, T0)
        assert await store.count_pending(KEY) == 1

    # --- parked ------------------------------------------------------------------------

    async def test_park_event_moves_the_outbox_row(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(events=[outbox_row("e1", 1), outbox_row("e2", 2)])
        )
        poison = parked_poison("e1", 1, hold_key="item-1")
        await store.park_event(KEY, lease, poison)
        assert _ids(await store.load_pending(KEY, 10)) == ["e2"]
        assert await store.list_parked(KEY) == [poison]
        assert await store.held_keys(KEY) == {"item-1"}
        orphan = parked_poison("e9", 9, hold_key="item-9", parked_at=T0 + 300)
        await store.park_event(KEY, lease, orphan)  # no outbox row to remove: still parked
        assert await store.list_parked(KEY) == [poison, orphan]
        replaced = dataclasses.replace(poison, attempts=9, hold_key=None)
        await store.park_event(KEY, lease, replaced)
        assert await store.list_parked(KEY) == [replaced, orphan]
        assert await store.held_keys(KEY) == {"item-9"}
        assert await store.count_parked(KEY) == 2

    async def test_list_parked_orders_filters_and_limits(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [
            parked_poison("p3", 3, parked_at=T0 + 30),
            parked_invalid("p1", parked_at=T0 + 10),
            parked_poison("p2b", 2, parked_at=T0 + 20),
            parked_poison("p2a", 1, parked_at=T0 + 20),
        ]
        await store.commit_poll(KEY, lease, batch(parked=rows))
        ids = [row.id for row in await store.list_parked(KEY)]
        assert ids == ["p1", "p2a", "p2b", "p3"]
        assert [r.id for r in await store.list_parked(KEY, "poison")] == ["p2a", "p2b", "p3"]
        assert [r.id for r in await store.list_parked(KEY, "invalid")] == ["p1"]
        assert [r.id for r in await store.list_parked(KEY, limit=2)] == ["p1", "p2a"]
        assert [r.id for r in await store.list_parked(KEY, "poison", limit=1)] == ["p2a"]
        assert await store.list_parked(KEY, limit=0) == []
        assert await store.list_parked(KEY_B) == []
        assert await store.count_parked(KEY) == 4

    async def test_held_keys_collects_hold_keys_of_every_kind(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [
            parked_poison("p1", 1, hold_key="k1"),
            parked_poison("p2", 2, hold_key="k1"),
            parked_poison("p3", 3),
            parked_invalid("p4", hold_key="k4"),
        ]
        await store.commit_poll(KEY, lease, batch(parked=rows))
        assert await store.held_keys(KEY) == {"k1", "k4"}
        assert await store.held_keys(KEY_B) == set()

    async def test_retry_parked_requeues_poison_at_its_original_sequence(
        self, store: StateStore
    ) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(events=[outbox_row("e5", 5), outbox_row("e8", 8)])
        )
        await store.park_event(KEY, lease, parked_poison("e7", 7, hold_key="k1"))
        await store.park_event(KEY, lease, parked_invalid("bad", hold_key="k2"))
        await store.release_lease(KEY, lease)  # retry is an administrative, unfenced write
        assert await store.retry_parked(KEY, ["e7", "bad", "unknown", "e7"]) == 1
        pending = await store.load_pending(KEY, 10)
        assert _ids(pending) == ["e5", "e7", "e8"]
        requeued = pending[1]
        assert (requeued.sequence, requeued.event, requeued.attempts) == (7, event_json("e7", 7), 0)
        assert (requeued.last_error, requeued.next_attempt_at) == (None, None)
        assert [row.id for row in await store.list_parked(KEY)] == ["bad"]
        assert await store.held_keys(KEY) == {"k2"}
        assert await store.get_lease(KEY) is None
        assert await store.retry_parked(KEY, ["e7"]) == 0
        assert await store.retry_parked(KEY, []) == 0
        assert await store.retry_parked(KEY_B, ["bad"]) == 0

    async def test_discard_parked_deletes_either_kind(self, store: StateStore) -> None:
        lease = await _acquire(store)
        rows = [
            parked_poison("p1", 1),
            parked_poison("p2", 2, hold_key="k2"),
            parked_invalid("p3", hold_key="k3"),
        ]
        await store.commit_poll(KEY, lease, batch(parked=rows))
        assert await store.discard_parked(KEY_B, ["p1"]) == 0
        assert await store.discard_parked(KEY, ["p1", "unknown"]) == 1
        assert await store.held_keys(KEY) == {"k2", "k3"}
        assert await store.discard_parked(KEY, ["p3", "p2", "p2"]) == 2
        assert await store.count_parked(KEY) == 0
        assert await store.held_keys(KEY) == set()
        assert await store.discard_parked(KEY, []) == 0
        assert await store.get_lease(KEY) == lease

    # --- validators --------------------------------------------------------------------

    async def test_validators_round_trip_and_overwrite(self, store: StateStore) -> None:
        lease = await _acquire(store)
        assert await store.get_validator(KEY, "u-1") is None
        first = Validator('"abc"', "Wed, 21 Oct 2015 07:28:00 GMT", T0)
        await store.set_validator(KEY, lease, "u-1", first)
        assert await store.get_validator(KEY, "u-1") == first
        cleared = Validator(None, None, T0 + 1)
        await store.set_validator(KEY, lease, "u-1", cleared)
        assert await store.get_validator(KEY, "u-1") == cleared
        await store.set_validator(KEY, lease, "u-2", first)
        assert await store.get_validator(KEY, "u-2") == first
        assert await store.get_validator(KEY, "u-3") is None
        assert await store.get_validator(KEY_B, "u-2") is None

    async def test_clear_validators_forgets_the_validators_of_the_key_only(
        self, store: StateStore
    ) -> None:
        lease = await _seed(store, KEY)
        await store.set_validator(KEY, lease, "u-2", Validator(None, "Thu, 01 Jan 2026", T0))
        await _seed(store, KEY_B)
        before = await _everything(store, KEY)
        other_before = await _everything(store, KEY_B)
        # An admin write: unfenced, and it works while another instance holds the lease.
        await store.clear_validators(KEY)
        assert await store.get_validator(KEY, _URL) is None
        assert await store.get_validator(KEY, "u-2") is None
        after = await _everything(store, KEY)
        for field in ("state", "items", "count_items", "pending", "parked", "held", "log"):
            assert after.get(field) == before.get(field), field
        assert await store.get_lease(KEY) == lease
        assert await _everything(store, KEY_B) == other_before
        # The key's lease still fences: validators stored afterwards are kept as usual.
        fresh = Validator('"etag-2"', None, T0 + 1)
        await store.set_validator(KEY, lease, _URL, fresh)
        assert await store.get_validator(KEY, _URL) == fresh
        await store.clear_validators(PKey("never-seen"))  # a key without any: a no-op
        assert await store.list_keys() == [KEY, KEY_B]

    # --- event log ---------------------------------------------------------------------

    async def _seed_log(self, store: StateStore) -> Lease:
        lease = await _acquire(store)
        for n in range(1, 6):
            await store.commit_poll(
                KEY, lease, batch(events=[outbox_row(f"e{n}", n)], log=True, now=T0 + n * 1_000)
            )
        return lease

    async def test_the_log_is_written_only_when_asked(self, store: StateStore) -> None:
        lease = await _acquire(store)
        if not store.capabilities.log:
            before = await _everything(store, KEY)
            await _assert_unsupported(
                store.commit_poll(KEY, lease, batch(events=[outbox_row("e1", 1)], log=True))
            )
            assert await _everything(store, KEY) == before
            await _assert_unsupported(store.read_log(KEY))
            await _assert_unsupported(store.prune_log(KEY, T0))
            return
        await store.commit_poll(KEY, lease, batch(events=[outbox_row("e1", 1)]))
        assert await store.read_log(KEY) == []
        rows = [outbox_row("e2", 2, created_at=1), outbox_row("e3", 3, created_at=2)]
        await store.commit_poll(KEY, lease, batch(events=rows, log=True, now=T0 + 77))
        assert await store.read_log(KEY) == [
            LoggedEvent(2, event_json("e2", 2), T0 + 77),
            LoggedEvent(3, event_json("e3", 3), T0 + 77),
        ]
        await store.ack_events(KEY, lease, ["e2", "e3"])
        assert _seqs(await store.read_log(KEY)) == [2, 3]  # acks leave the log alone

    async def test_read_log_by_sequence(self, store: StateStore) -> None:
        if not store.capabilities.log:
            await _assert_unsupported(store.read_log(KEY, after_sequence=1))
            return
        await self._seed_log(store)
        assert _seqs(await store.read_log(KEY)) == [1, 2, 3, 4, 5]
        assert _seqs(await store.read_log(KEY, after_sequence=3)) == [4, 5]
        assert await store.read_log(KEY, after_sequence=5) == []
        assert (await store.read_log(KEY))[0] == LoggedEvent(1, event_json("e1", 1), T0 + 1_000)
        assert await store.read_log(KEY_B) == []

    async def test_read_log_by_time_is_inclusive_and_limited(self, store: StateStore) -> None:
        if not store.capabilities.log:
            await _assert_unsupported(store.read_log(KEY, from_time=T0, to_time=T0))
            return
        await self._seed_log(store)
        assert _seqs(await store.read_log(KEY, from_time=T0 + 2_000)) == [2, 3, 4, 5]
        assert _seqs(await store.read_log(KEY, to_time=T0 + 3_000)) == [1, 2, 3]
        both = await store.read_log(KEY, from_time=T0 + 2_000, to_time=T0 + 4_000)
        assert _seqs(both) == [2, 3, 4]
        assert _seqs(await store.read_log(KEY, limit=2)) == [1, 2]
        combined = await store.read_log(
            KEY, after_sequence=2, from_time=T0 + 2_000, to_time=T0 + 5_000, limit=2
        )
        assert _seqs(combined) == [3, 4]
        assert await store.read_log(KEY, limit=0) == []

    async def test_prune_log_deletes_older_entries(self, store: StateStore) -> None:
        if not store.capabilities.log:
            await _assert_unsupported(store.prune_log(KEY, T0))
            return
        await self._seed_log(store)
        assert await store.prune_log(KEY, T0 + 3_000) == 2
        assert _seqs(await store.read_log(KEY)) == [3, 4, 5]
        assert await store.prune_log(KEY, T0 + 3_000) == 0
        assert await store.prune_log(KEY_B, T0 + 999_999) == 0
        assert await store.prune_log(KEY, T0 + 999_999) == 3
        assert await store.read_log(KEY) == []

    # --- due index ---------------------------------------------------------------------

    async def _wake(self, store: StateStore, key: PKey) -> int | None:
        state = await store.load_state(key)
        assert state is not None, f"expected {key} to exist"
        return state.wake_at

    async def test_due_keys_are_ordered_by_wake_time_then_partition(
        self, store: StateStore
    ) -> None:
        wakes = {"b": T0 + 20, "a": T0 + 20, "": T0 + 10, "c": T0 + 30, "paused": None}
        for partition, wake_at in wakes.items():
            await store.save_state_unfenced(PKey("orders", partition), {"wake_at": wake_at}, T0)
        await store.save_state_unfenced(PKey("invoices"), {"wake_at": T0 + 1}, T0)
        everything = [("", T0 + 10), ("a", T0 + 20), ("b", T0 + 20), ("c", T0 + 30)]
        assert await store.due_keys("orders", _FAR) == everything
        assert await store.due_keys("orders", T0 + 30) == everything
        assert await store.due_keys("orders", T0 + 29) == everything[:3]
        assert await store.due_keys("orders", T0 + 20) == everything[:3]
        assert await store.due_keys("orders", T0 + 19) == everything[:1]
        assert await store.due_keys("orders", T0 + 10) == everything[:1]
        assert await store.due_keys("orders", T0 + 9) == []
        assert await store.due_keys("invoices", _FAR) == [("", T0 + 1)]
        assert await store.due_keys("unknown", _FAR) == []
        assert await store.load_state(PKey("orders", "paused")) is not None

    async def test_due_keys_limit(self, store: StateStore) -> None:
        for n in range(5):
            await store.save_state_unfenced(PKey("orders", f"p{n}"), {"wake_at": T0 - n}, T0)
        newest_first = [(f"p{n}", T0 - n) for n in range(4, -1, -1)]
        assert await store.due_keys("orders", T0, limit=2) == newest_first[:2]
        assert await store.due_keys("orders", T0 - 2, limit=2) == newest_first[:2]
        assert await store.due_keys("orders", T0 - 3, limit=5) == newest_first[:2]
        assert await store.due_keys("orders", T0, limit=5) == newest_first
        assert await store.due_keys("orders", T0, limit=50) == newest_first
        assert await store.due_keys("orders", T0, limit=None) == newest_first
        assert await store.due_keys("orders", T0, limit=0) == []
        assert await store.due_keys("orders", T0, limit=-1) == []

    async def test_due_keys_sorts_many_keys_written_out_of_order(self, store: StateStore) -> None:
        # 61 partitions written in partition order, whose wake times (n * 17 mod 61, rounded
        # down to a multiple of 3) jump around and mostly come three to a value.
        expected: list[tuple[str, int]] = []
        for n in range(61):
            wake_at = T0 + (n * 17 % 61) // 3 * 3
            expected.append((f"k{n:02d}", wake_at))
            await store.save_state_unfenced(PKey("orders", f"k{n:02d}"), {"wake_at": wake_at}, T0)
        expected.sort(key=lambda due: (due[1], due[0]))
        assert await store.due_keys("orders", _FAR) == expected
        assert await store.due_keys("orders", T0 + 30, limit=7) == expected[:7]
        assert await store.due_keys("orders", T0 + 30) == [e for e in expected if e[1] <= T0 + 30]

    async def test_acquisition_creates_a_key_due_at_once(self, store: StateStore) -> None:
        # A key is born due (empty_poller_state): a process that dies before the key's first
        # commit leaves it where every engine's due_keys() finds it.
        await _acquire(store)
        assert await self._wake(store, KEY) == T0
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0)]

    async def test_only_creation_makes_a_key_due(self, store: StateStore) -> None:
        # Born due at the creation `now` of either creating write; later acquisitions and
        # administrative writes that leave wake_at out never bring a paused key back.
        lease = await _acquire(store, KEY, now=T0 + 3)
        await store.save_state_unfenced(KEY_B, {"paused": False}, T0 + 4)
        await store.save_state_unfenced(PKey("orders", "off"), {"wake_at": None}, T0 + 5)
        assert await store.due_keys("orders", _FAR) == [("", T0 + 3), ("tenant-b", T0 + 4)]
        assert await self._wake(store, KEY_B) == T0 + 4
        assert await self._wake(store, PKey("orders", "off")) is None
        await store.save_state(KEY, lease, {"wake_at": None, "paused": True})
        await store.release_lease(KEY, lease)
        again = await _acquire(store, KEY, owner="node-b", now=T0 + 9)
        assert again.epoch == lease.epoch + 1
        await store.save_state_unfenced(PKey("orders", "off"), {"paused": True}, T0 + 9)
        assert await store.due_keys("orders", _FAR) == [("tenant-b", T0 + 4)]
        assert await self._wake(store, KEY) is None
        assert await self._wake(store, PKey("orders", "off")) is None

    async def test_a_pause_during_a_run_survives_the_runs_final_writes(
        self, store: StateStore
    ) -> None:
        # An operator pauses the key while a run holds it; the run then writes its schedule
        # with the wake time it computed before the pause, without a word about `paused`.
        lease = await _acquire(store)
        await store.save_state_unfenced(KEY, {"paused": True, "wake_at": None}, T0 + 1)
        await store.save_state(KEY, lease, {"wake_at": T0 + 60, "sequence": 3})
        assert await store.due_keys(KEY.poller, _FAR) == []
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.paused, state.wake_at, state.sequence) == (True, None, 3)
        await store.commit_poll(KEY, lease, batch(state_patch={"wake_at": T0 + 70}))
        assert await store.due_keys(KEY.poller, _FAR) == []
        assert await self._wake(store, KEY) is None
        # A write that says what it wants of both is taken as it is (resume, say).
        await store.save_state_unfenced(KEY, {"paused": False, "wake_at": T0 + 5}, T0 + 3)
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0 + 5)]

    async def test_save_state_moves_the_key_in_the_index(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.save_state(KEY, lease, {"wake_at": T0 + 60})
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0 + 60)]
        await store.save_state(KEY, lease, {"sequence": 4})  # no wake_at: the entry stays
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0 + 60)]
        await store.save_state(KEY, lease, {"wake_at": T0 + 5, "paused": False})
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0 + 5)]
        assert await self._wake(store, KEY) == T0 + 5
        await store.save_state(KEY, lease, {"wake_at": None, "paused": True})
        assert await store.due_keys(KEY.poller, _FAR) == []
        assert await self._wake(store, KEY) is None
        stale = dataclasses.replace(lease, epoch=lease.epoch + 1)
        with pytest.raises(LeaseLostError):
            await store.save_state(KEY, stale, {"wake_at": T0})
        assert await store.due_keys(KEY.poller, _FAR) == []

    async def test_commit_poll_moves_the_key_in_the_index(self, store: StateStore) -> None:
        lease = await _acquire(store)
        await store.commit_poll(
            KEY, lease, batch(state_patch={"wake_at": T0 + 60}, events=[outbox_row("e1", 1)])
        )
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0 + 60)]
        await store.commit_poll(KEY, lease, batch(upserts=[item_row("a")]))
        await store.commit_poll(KEY, lease, batch(state_patch={"sequence": 2}))
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0 + 60)]
        await store.commit_poll(KEY, lease, batch(state_patch={"wake_at": T0 + 30}))
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0 + 30)]
        assert await self._wake(store, KEY) == T0 + 30
        await store.commit_poll(KEY, lease, batch(state_patch={"wake_at": None}))
        assert await store.due_keys(KEY.poller, _FAR) == []
        assert await self._wake(store, KEY) is None
        stale = dataclasses.replace(lease, owner="node-z")
        with pytest.raises(LeaseLostError):
            await store.commit_poll(KEY, stale, batch(state_patch={"wake_at": T0}))
        assert await store.due_keys(KEY.poller, _FAR) == []

    async def test_unfenced_saves_create_move_and_drop_the_entry(self, store: StateStore) -> None:
        await store.save_state_unfenced(KEY_B, {"wake_at": T0 + 40}, T0)
        assert await store.due_keys(KEY_B.poller, _FAR) == [("tenant-b", T0 + 40)]
        assert await store.get_lease(KEY_B) is None
        lease = await _acquire(store, KEY_B)  # acquiring an existing key keeps its entry
        assert await store.due_keys(KEY_B.poller, _FAR) == [("tenant-b", T0 + 40)]
        await store.save_state_unfenced(KEY_B, {"paused": True}, T0 + 1)
        assert await store.due_keys(KEY_B.poller, _FAR) == [("tenant-b", T0 + 40)]
        await store.save_state_unfenced(KEY_B, {"paused": True, "wake_at": None}, T0 + 1)
        assert await store.due_keys(KEY_B.poller, _FAR) == []
        await store.save_state_unfenced(KEY_B, {"paused": False, "wake_at": T0 + 2}, T0 + 2)
        assert await store.due_keys(KEY_B.poller, _FAR) == [("tenant-b", T0 + 2)]
        assert await store.get_lease(KEY_B) == lease
        await store.save_state_unfenced(KEY, {}, T0)  # a new key is due at once
        assert await store.due_keys(KEY.poller, _FAR) == [("", T0), ("tenant-b", T0 + 2)]

    async def test_delete_key_removes_the_entry(self, store: StateStore) -> None:
        await _seed(store, KEY)
        await _seed(store, KEY_B)
        await store.save_state_unfenced(KEY_OTHER, {"wake_at": T0}, T0)
        assert await store.due_keys("orders", _FAR) == [("", T0 + 500), ("tenant-b", T0 + 500)]
        await store.delete_key(KEY)
        assert await store.due_keys("orders", _FAR) == [("tenant-b", T0 + 500)]
        await store.delete_key(KEY)
        await store.delete_key(KEY_B)
        assert await store.due_keys("orders", _FAR) == []
        assert await store.due_keys("invoices", _FAR) == [("", T0)]
        await store.save_state_unfenced(KEY, {}, T0 + 7)  # recreated: due at once
        assert await store.due_keys("orders", _FAR) == [("", T0 + 7)]

    async def test_due_keys_with_awkward_partitions_and_pollers(self, store: StateStore) -> None:
        partitions = [
            "tenant:\u03b1|\u03b2/\U0001f600",
            "tenant:\u03b1",
            "tenant",
            "a:b",
            "{x}",
            "|",
        ]
        for partition in partitions:
            await store.save_state_unfenced(PKey("orders", partition), {"wake_at": T0}, T0)
        # Poller names that a naive key layout would confuse with "orders".
        for key in (PKey("orders:a", "b"), PKey("orders.a", "b"), PKey("orders|a"), PKey("o")):
            await store.save_state_unfenced(key, {"wake_at": T0 - 1}, T0)
        lease = await _acquire(store, PKey("orders", "\u00e9:{y}"))
        await store.commit_poll(
            PKey("orders", "\u00e9:{y}"), lease, batch(state_patch={"wake_at": T0})
        )
        expected = [(p, T0) for p in sorted([*partitions, "\u00e9:{y}"])]
        assert await store.due_keys("orders", T0) == expected
        assert await store.due_keys("orders:a", T0) == [("b", T0 - 1)]
        assert await store.due_keys("orders|a", T0) == [("", T0 - 1)]
        await store.delete_key(PKey("orders", "tenant:\u03b1|\u03b2/\U0001f600"))
        assert await store.due_keys("orders", T0, limit=3) == [
            ("a:b", T0),
            ("tenant", T0),
            ("tenant:\u03b1", T0),
        ]

    async def test_a_wake_time_beyond_64_bits_is_refused(self, store: StateStore) -> None:
        lease = await _seed(store)
        before = await _everything(store, KEY)
        failures = (StoreError, OverflowError, TypeError, ValueError)
        with pytest.raises(failures):
            await store.save_state(KEY, lease, {"sequence": 5, "wake_at": 2**63})
        with pytest.raises(failures):
            await store.commit_poll(
                KEY, lease, batch(state_patch={"wake_at": 2**63}, upserts=[item_row("z")])
            )
        with pytest.raises(failures):
            await store.save_state_unfenced(KEY, {"sequence": 5, "wake_at": 2**63}, T0)
        assert await _everything(store, KEY) == before
        await store.save_state(KEY, lease, {"wake_at": 2**53})
        assert await store.due_keys(KEY.poller, _FAR) == [("", 2**53)]

    # --- copies, not references --------------------------------------------------------

    async def test_state_is_copied_in_and_out(self, store: StateStore) -> None:
        lease = await _acquire(store)
        cursors = {"live": '"c1"'}
        state = _full_state(created_at=T0)
        await store.save_state(KEY, lease, {**_patch_of(state), "cursors": cursors})
        cursors["live"] = '"mutated"'
        cast(dict[str, Any], state.schedule.last_error)["message"] = "mutated"
        loaded = await store.load_state(KEY)
        assert loaded is not None
        assert loaded.cursors == {"live": '"c1"'}
        assert loaded.schedule.last_error is not None
        assert loaded.schedule.last_error["message"] == "GET /orders responded 503 \U0001f600"
        cast(dict[str, Any], loaded.cursors)["live"] = '"mutated"'
        cast(dict[str, Any], loaded.schedule.last_error)["message"] = "mutated"
        reloaded = await store.load_state(KEY)
        assert reloaded is not None
        assert reloaded.cursors == {"live": '"c1"'}
        assert reloaded.schedule.last_error is not None
        assert reloaded.schedule.last_error["message"] == "GET /orders responded 503 \U0001f600"

    async def test_rows_are_copied_in_and_out(self, store: StateStore) -> None:
        lease = await _acquire(store)
        error: dict[str, Any] = {"name": "Error", "message": "original"}
        row = outbox_row("e1", 1, last_error=cast(SerializedError, error))
        poison = parked_poison("p1", 0, hold_key="k")
        upserts = [item_row("a")]
        await store.commit_poll(KEY, lease, batch(upserts=upserts, events=[row], parked=[poison]))
        error["message"] = "mutated"
        cast(dict[str, Any], poison.error)["message"] = "mutated"
        upserts.clear()
        pending = await store.load_pending(KEY, 10)
        assert pending[0].last_error == {"name": "Error", "message": "original"}
        cast(dict[str, Any], pending[0].last_error)["message"] = "mutated"
        pending.clear()
        assert (await store.load_pending(KEY, 10))[0].last_error == {
            "name": "Error",
            "message": "original",
        }
        parked = await store.list_parked(KEY)
        assert parked[0].error["message"] == "handler failed for p1"
        cast(dict[str, Any], parked[0].error)["message"] = "mutated"
        assert (await store.list_parked(KEY))[0].error["message"] == "handler failed for p1"
        held = await store.held_keys(KEY)
        held.add("extra")
        assert await store.held_keys(KEY) == {"k"}
        versions = await store.load_versions(KEY, ["a"])
        versions.clear()
        assert await store.load_versions(KEY, ["a"]) == {"a": item_row("a")}
        keys = await store.list_keys()
        keys.append(KEY_OTHER)
        assert await store.list_keys() == [KEY]

    # --- awkward keys and payloads -----------------------------------------------------

    async def test_partitions_and_identities_may_hold_any_character(
        self, store: StateStore
    ) -> None:
        keys = [
            PKey("orders", "tenant:\u03b1|\u03b2/\U0001f600"),
            PKey("orders", "tenant:\u03b1"),
            PKey("orders", "tenant"),
            PKey("orders", "a:b"),
            PKey("orders.a", "b"),
            PKey("orders", "{x}"),
        ]
        identities = ["a:b|c", "\u043a\u043b\u044e\u0447", "\U0001f600/x", "a\\b", "{tag}"]
        for n, key in enumerate(keys):
            lease = await _acquire(store, key, owner=f"node-{n}")
            await store.commit_poll(
                key,
                lease,
                batch(
                    state_patch={"sequence": n},
                    upserts=[item_row(f"{i}#{n}") for i in identities],
                    events=[outbox_row(f"e|{n}", n + 1)],
                ),
            )
        assert await store.list_keys() == sorted(keys)
        for n, key in enumerate(keys):
            wanted = [f"{i}#{n}" for i in identities]
            assert sorted(await store.load_versions(key, [*wanted, "a:b|c"])) == sorted(wanted)
            state = await store.load_state(key)
            assert state is not None
            assert state.sequence == n
            assert _ids(await store.load_pending(key, 10)) == [f"e|{n}"]
            held = await store.get_lease(key)
            assert held is not None
            assert held.owner == f"node-{n}"
            if store.capabilities.streaming:
                assert [i for b in await _collect(store, key, 2) for i in b] == sorted(wanted)
        await store.delete_key(keys[1])
        assert await store.list_keys() == sorted(keys[:1] + keys[2:])
        assert await store.count_items(keys[0]) == len(identities)

    @_UNICODE
    @given(identities=st.lists(_ANY_TEXT, min_size=1, max_size=8, unique=True))
    async def test_any_unicode_identity_round_trips(
        self, store: StateStore, identities: list[str]
    ) -> None:
        key = PKey("unicode-identities", f"example-{next(_EXAMPLES)}")
        lease = await _acquire(store, key)
        # Hashes are hex digests, whatever the identity: only identity and version vary.
        rows = [item_row(i, version=i, hash=f"h{n}", revision=n) for n, i in enumerate(identities)]
        parked = [parked_poison(f"p{n}", n, hold_key=i) for n, i in enumerate(identities)]
        await store.commit_poll(key, lease, batch(upserts=rows, parked=parked))
        assert await store.load_versions(key, identities) == {r.identity: r for r in rows}
        assert await store.count_items(key) == len(identities)
        if store.capabilities.streaming:
            streamed = [i for chunk in await _collect(store, key, 3) for i in chunk]
            assert streamed == sorted(identities)
        assert await store.held_keys(key) == set(identities)
        assert {row.hold_key for row in await store.list_parked(key)} == set(identities)
        # Deleted, they leave tombstones under the same strings; revived, they lose them.
        gone, kept = identities[::2], identities[1::2]
        await store.commit_poll(key, lease, batch(deletes=gone))
        assert sorted(await store.load_versions(key, identities)) == sorted(kept)
        tombstones = await store.load_tombstones(key, identities)
        assert {i: (t.identity, t.version) for i, t in tombstones.items()} == {
            i: (i, i) for i in gone
        }
        await store.commit_poll(key, lease, batch(upserts=rows[::2], revived=gone))
        assert await store.load_tombstones(key, identities) == {}
        await store.delete_key(key)

    @_UNICODE
    @given(partitions=st.lists(_ANY_TEXT, min_size=1, max_size=5, unique=True))
    async def test_any_unicode_partition_key_round_trips(
        self, store: StateStore, partitions: list[str]
    ) -> None:
        poller = f"unicode-partitions-{next(_EXAMPLES)}"
        keys = [PKey(poller, partition) for partition in partitions]
        for n, key in enumerate(keys):
            lease = await _acquire(store, key)
            await store.commit_poll(
                key,
                lease,
                batch(
                    state_patch={"sequence": n, "wake_at": T0 + n},
                    upserts=[item_row(key.partition, hash=f"h{n}")],
                    events=[outbox_row(f"e{n}", n + 1)],
                    parked=[parked_invalid(f"bad-{n}")],
                ),
            )
            await store.set_validator(key, lease, _URL, Validator(None, None, T0))
        assert await store.list_keys(poller) == sorted(keys)
        assert await store.due_keys(poller, _FAR) == [(p, T0 + n) for n, p in enumerate(partitions)]
        for n, key in enumerate(keys):
            state = await store.load_state(key)
            assert state is not None
            assert state.sequence == n
            assert sorted(await store.load_versions(key, [key.partition])) == [key.partition]
            assert _ids(await store.load_pending(key, 10)) == [f"e{n}"]
            assert await store.count_parked(key) == 1
            assert await store.get_validator(key, _URL) == Validator(None, None, T0)
            lease_now = await store.get_lease(key)
            assert lease_now is not None
            await store.release_lease(key, lease_now)
        await store.delete_key(keys[0])
        assert await store.list_keys(poller) == sorted(keys[1:])
        for key in keys[1:]:
            await store.delete_key(key)
        assert await store.list_keys(poller) == []

    async def test_payload_text_round_trips_byte_for_byte(self, store: StateStore) -> None:
        lease = await _acquire(store)
        text = TRICKY_JSON
        await store.commit_poll(
            KEY,
            lease,
            batch(
                state_patch={"cursors": {"live": text}},
                upserts=[item_row("a", payload=text, version=text)],
                events=[outbox_row("e1", 1, event=text)],
                parked=[
                    parked_poison("p1", 2, event=text),
                    parked_invalid("p2", item=text),
                ],
                log=store.capabilities.log,
            ),
        )
        item = (await store.load_versions(KEY, ["a"]))["a"]
        assert (item.payload, item.version) == (text, text)
        assert (await store.load_pending(KEY, 10))[0].event == text
        parked = {row.id: row for row in await store.list_parked(KEY)}
        assert (parked["p1"].event, parked["p2"].item) == (text, text)
        state = await store.load_state(KEY)
        assert state is not None
        assert state.cursors["live"] == text
        if store.capabilities.log:
            assert (await store.read_log(KEY))[0].event == text
        assert await store.retry_parked(KEY, ["p1"]) == 1
        assert [row.event for row in await store.load_pending(KEY, 10)] == [text, text]

    async def test_big_numbers_survive_in_rows(self, store: StateStore) -> None:
        lease = await _acquire(store)
        big = 2**53 + 1
        await store.commit_poll(
            KEY,
            lease,
            batch(
                state_patch={"sequence": big, "updated_at": big},
                upserts=[item_row("a", seen_at=big, schema_version=2**31)],
                events=[outbox_row("e1", big, created_at=big, next_attempt_at=big)],
            ),
        )
        state = await store.load_state(KEY)
        assert state is not None
        assert (state.sequence, state.updated_at) == (big, big)
        item = (await store.load_versions(KEY, ["a"]))["a"]
        assert (item.seen_at, item.schema_version) == (big, 2**31)
        row = (await store.load_pending(KEY, 1))[0]
        assert (row.sequence, row.created_at, row.next_attempt_at) == (big, big, big)
