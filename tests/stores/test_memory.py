"""MemoryStore: the contract suite, the suite's capability branches, and the test tools."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from watukuy.model.errors import StoreError, WatukuyError
from watukuy.model.ports import StateStore
from watukuy.model.rows import (
    CommitBatch,
    Lease,
    LoggedEvent,
    PKey,
    StoreCapabilities,
    empty_poller_state,
)
from watukuy.stores.memory import MemoryStore
from watukuy.testing.store_contract import (
    KEY,
    T0,
    TTL,
    StoreContract,
    batch,
    item_row,
    outbox_row,
    parked_poison,
)


class TestMemoryStoreContract(StoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[StateStore]:
        store = MemoryStore()
        await store.migrate()
        yield store
        await store.close()


def _unsupported(what: str) -> WatukuyError:
    return WatukuyError(f"{what} is not supported by this store", code="UNSUPPORTED")


class _PlainMemoryStore(MemoryStore):
    """A store that declares no log and no streaming, to exercise the suite's branches."""

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(transactions=True, log=False, streaming=False)

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        if batch.log:
            raise _unsupported("the event log")
        await super().commit_poll(key, lease, batch)

    async def read_log(self, key: PKey, **kwargs: Any) -> list[LoggedEvent]:
        raise _unsupported("the event log")

    async def prune_log(self, key: PKey, older_than: int) -> int:
        raise _unsupported("the event log")

    def stream_identities(self, key: PKey, batch_size: int = 1000) -> AsyncIterator[list[str]]:
        return _UnsupportedStream()


class _UnsupportedStream:
    def __aiter__(self) -> _UnsupportedStream:
        return self

    async def __anext__(self) -> list[str]:
        raise _unsupported("streaming identities")


class TestContractOnAStoreWithoutLogOrStreaming(StoreContract):
    @pytest.fixture
    async def store(self) -> StateStore:
        return _PlainMemoryStore()


class _ForgetfulMemoryStore(MemoryStore):
    """Claims a log but silently drops it: the suite must catch this, not skip it."""

    async def read_log(self, key: PKey, **kwargs: Any) -> list[LoggedEvent]:
        return []


async def test_the_suite_catches_a_store_that_ignores_the_log() -> None:
    store = _ForgetfulMemoryStore()
    with pytest.raises(AssertionError):
        await StoreContract().test_read_log_by_sequence(store)


class _LeakyMemoryStore(MemoryStore):
    """Applies the item upserts before the rest of the batch is checked."""

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        self._fenced(key, lease).items.update({row.identity: row for row in batch.upserts})
        await super().commit_poll(key, lease, batch)


async def test_the_suite_catches_a_half_written_commit() -> None:
    with pytest.raises(AssertionError):
        await StoreContract().test_a_failed_commit_persists_nothing(
            _LeakyMemoryStore(), "parked_error_codec"
        )


async def test_snapshot_shows_everything_a_key_holds() -> None:
    store = MemoryStore()
    assert store.snapshot(KEY) is None
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    await store.commit_poll(
        KEY,
        lease,
        batch(
            upserts=[item_row("b"), item_row("a")],
            events=[outbox_row("e2", 2), outbox_row("e1", 1)],
            parked=[parked_poison("p1", 0)],
            log=True,
        ),
    )
    await store.release_lease(KEY, lease)
    snap = store.snapshot(KEY)
    assert snap is not None
    assert snap.state == empty_poller_state(T0)
    assert (snap.lease, snap.epoch) == (None, 1)
    assert list(snap.items) == ["a", "b"]
    assert [row.event_id for row in snap.outbox] == ["e1", "e2"]
    assert [row.id for row in snap.parked] == ["p1"]
    assert [entry.sequence for entry in snap.log] == [1, 2]
    assert snap.validators == {}
    snap.items.clear()
    assert await store.count_items(KEY) == 2


async def test_reset_forgets_every_key() -> None:
    store = MemoryStore()
    await store.save_state_unfenced(PKey("b"), {}, T0)
    await store.save_state_unfenced(PKey("a", "x"), {}, T0)
    assert store.keys() == [PKey("a", "x"), PKey("b")]
    store.reset()
    assert store.keys() == []
    assert await store.list_keys() == []
    assert await store.load_state(PKey("b")) is None


async def test_a_key_record_is_not_created_by_a_failed_unfenced_save() -> None:
    store = MemoryStore()
    bad: Any = {"cursors": {"live": object()}}
    with pytest.raises(StoreError, match=r"^save_state_unfenced: ") as info:
        await store.save_state_unfenced(KEY, bad, T0)
    assert isinstance(info.value.__cause__, TypeError)
    assert store.keys() == []


async def test_codec_failures_are_store_errors_like_in_durable_stores() -> None:
    store = MemoryStore()
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)
    assert lease is not None
    bad: Any = {"name": "Error", "message": object()}
    await store.commit_poll(KEY, lease, batch(events=[outbox_row("e1", 1)]))
    with pytest.raises(StoreError, match=r"^commit_poll: ") as info:
        await store.commit_poll(KEY, lease, batch(events=[outbox_row("e2", 2, last_error=bad)]))
    assert isinstance(info.value.__cause__, TypeError)
    with pytest.raises(StoreError, match=r"^record_attempt: "):
        await store.record_attempt(KEY, lease, "e1", bad, None)
    with pytest.raises(StoreError, match=r"^park_event: "):
        await store.park_event(KEY, lease, parked_poison("e1", 1, error=bad))
    assert [(row.event_id, row.attempts) for row in await store.load_pending(KEY, 10)] == [
        ("e1", 0)
    ]
    assert await store.count_parked(KEY) == 0


async def test_the_due_index_agrees_with_the_states_through_random_writes() -> None:
    """Thousands of seeded writes of every kind; after each, the index answers exactly what
    a scan of every state would."""
    rng = random.Random(20260101)
    store = MemoryStore()
    keys = [PKey(poller, f"p{n}") for poller in ("orders", "invoices") for n in range(12)]
    leases: dict[PKey, Lease] = {}

    async def scanned(poller: str, until: int) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for key in await store.list_keys(poller):
            state = await store.load_state(key)
            assert state is not None
            if state.wake_at is not None and state.wake_at <= until:
                found.append((key.partition, state.wake_at))
        return sorted(found, key=lambda due: (due[1], due[0]))

    for step in range(3_000):
        key = rng.choice(keys)
        wake_at = rng.choice([None, T0 + rng.randrange(20)])
        action = rng.randrange(5)
        if action == 0:
            await store.save_state_unfenced(key, {"wake_at": wake_at}, T0)
        elif action == 1:
            await store.delete_key(key)
            leases.pop(key, None)
        elif action == 2:
            await store.save_state_unfenced(key, {"sequence": step}, T0)  # wake_at untouched
        else:
            lease = leases.get(key) or await store.acquire_lease(key, "node-a", TTL, T0)
            assert lease is not None
            leases[key] = lease
            if action == 3:
                await store.save_state(key, lease, {"wake_at": wake_at})
            else:
                await store.commit_poll(key, lease, batch(state_patch={"wake_at": wake_at}))
        poller = key.poller
        until = T0 + rng.randrange(-1, 21)
        expected = await scanned(poller, until)
        assert await store.due_keys(poller, until) == expected, step
        assert await store.due_keys(poller, until, limit=3) == expected[:3], step
    assert await store.due_keys("orders", T0 + 20) != []  # the walk left some keys due
