"""FaultyStore and LeaseAudit: each kill point fires at its exact call, then the process is dead."""

from __future__ import annotations

import pytest

from watukuy.model.rows import CommitBatch, Lease, OutboxRow, PKey, PollerState
from watukuy.stores.memory import MemoryStore
from watukuy.testing.faulty import (
    KILL_POINTS,
    FaultyStore,
    ForwardingStore,
    LeaseAudit,
    SimulatedCrash,
)

KEY = PKey("orders")
T0 = 1_767_225_600_000


def row(sequence: int) -> OutboxRow:
    return OutboxRow(event_id=f"e{sequence}", sequence=sequence, event="{}", created_at=T0)


def batch(*sequences: int) -> CommitBatch:
    return CommitBatch(
        state_patch={"sequence": max(sequences, default=0)},
        events=[row(s) for s in sequences],
        now=T0,
    )


async def leased(store: FaultyStore, owner: str = "a") -> Lease:
    lease = await store.acquire_lease(KEY, owner, 10_000, T0)
    assert lease is not None
    return lease


def test_a_simulated_crash_is_not_an_exception() -> None:
    crash = SimulatedCrash("after-commit", "2 event(s) committed")
    assert not isinstance(crash, Exception)
    assert str(crash) == "simulated crash at after-commit (2 event(s) committed)"
    assert KILL_POINTS[-1] == "handler"
    assert len(KILL_POINTS) == 8


async def test_after_fetch_persists_nothing_and_after_commit_persists_everything() -> None:
    inner = MemoryStore()
    first = FaultyStore(inner, owner="a")
    lease = await leased(first)
    first.arm("after-fetch")
    with pytest.raises(SimulatedCrash) as crash:
        await first.commit_poll(KEY, lease, batch(1, 2))
    assert crash.value.kill_point == "after-fetch"
    assert (first.dead, first.killed_by, first.armed) == (True, "after-fetch", None)
    assert await inner.count_pending(KEY) == 0

    second = FaultyStore(inner, owner="b")
    lease = await second.acquire_lease(KEY, "b", 10_000, T0 + 10_000)
    assert lease is not None
    second.arm("after-commit")
    with pytest.raises(SimulatedCrash):
        await second.commit_poll(KEY, lease, batch(1, 2))
    assert await inner.count_pending(KEY) == 2
    assert second.kills["after-commit"] == 1


async def test_a_dead_process_reaches_the_store_no_more() -> None:
    inner = MemoryStore()
    store = FaultyStore(inner, owner="a")
    lease = await leased(store)
    await store.commit_poll(KEY, lease, batch(1, 2, 3))
    store.arm("mid-dispatch")
    with pytest.raises(SimulatedCrash):
        await store.ack_events(KEY, lease, ["e1"])
    assert [r.event_id for r in await inner.load_pending(KEY, 10)] == ["e2", "e3"]
    for call in (
        store.ack_events(KEY, lease, ["e2"]),
        store.release_lease(KEY, lease),
        store.save_state(KEY, lease, {"paused": True}),
        store.load_state(KEY),
    ):
        with pytest.raises(SimulatedCrash) as crash:
            await call
        assert crash.value.kill_point == "dead"
    assert [r.event_id for r in await inner.load_pending(KEY, 10)] == ["e2", "e3"]
    held = await inner.get_lease(KEY)
    assert held == Lease("a", 1, T0 + 10_000)  # never released: it lingers until it expires


@pytest.mark.parametrize(
    ("point", "expected_pending"),
    [("before-ack", ["e1", "e2"]), ("mid-dispatch", ["e2"])],
)
async def test_the_two_dispatch_kills(point: str, expected_pending: list[str]) -> None:
    inner = MemoryStore()
    store = FaultyStore(inner, owner="a")
    lease = await leased(store)
    await store.commit_poll(KEY, lease, batch(1, 2))
    store.arm(point)  # type: ignore[arg-type]
    with pytest.raises(SimulatedCrash):
        await store.ack_events(KEY, lease, ["e1"])
    assert [r.event_id for r in await inner.load_pending(KEY, 10)] == expected_pending


async def test_before_acquire_schedule_and_release_kills() -> None:
    inner = MemoryStore()
    store = FaultyStore(inner, owner="a")
    store.arm("before-acquire")
    with pytest.raises(SimulatedCrash):
        await store.acquire_lease(KEY, "a", 10_000, T0)
    assert await inner.get_lease(KEY) is None

    store = FaultyStore(inner, owner="b")
    lease = await leased(store, "b")
    store.arm("after-ack-before-schedule")
    with pytest.raises(SimulatedCrash):
        await store.save_state(KEY, lease, {"paused": True})
    state = await inner.load_state(KEY)
    assert state is not None
    assert state.paused is False

    store = FaultyStore(inner, owner="c")
    lease = await store.acquire_lease(KEY, "c", 10_000, T0 + 10_000)
    assert lease is not None
    store.arm("during-release")
    with pytest.raises(SimulatedCrash):
        await store.release_lease(KEY, lease)
    assert await inner.get_lease(KEY) == lease


async def test_the_handler_kill_fires_once_and_kills_nobody() -> None:
    store = FaultyStore(MemoryStore(), owner="a")
    assert store.take_handler_kill() is False
    store.arm("handler")
    assert store.take_handler_kill("created o1") is True
    assert store.take_handler_kill("created o1") is False
    assert (store.dead, store.kills["handler"]) == (False, 1)
    with pytest.raises(ValueError, match="unknown kill point 'nope'"):
        store.arm("nope")  # type: ignore[arg-type]


async def test_the_lease_audit_flags_two_holders_and_stale_writes() -> None:
    class CarelessStore(ForwardingStore):
        """Hands out the lease even while another holder's is unexpired."""

        async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease:
            return Lease(owner, 1 if owner == "a" else 2, now + ttl_ms)

        async def load_state(self, key: PKey) -> PollerState | None:
            return None

        async def save_state(self, key: PKey, lease: Lease, patch: object) -> None:
            return None

    audit = LeaseAudit()
    careless = CarelessStore(MemoryStore())
    first = FaultyStore(careless, owner="a", audit=audit)  # type: ignore[arg-type]
    second = FaultyStore(careless, owner="b", audit=audit)  # type: ignore[arg-type]
    lease_a = await first.acquire_lease(KEY, "a", 10_000, T0)
    lease_b = await second.acquire_lease(KEY, "b", 10_000, T0 + 4_000)
    assert lease_a is not None
    assert lease_b is not None
    await first.save_state(KEY, lease_a, {"paused": True})
    assert audit.violations == [
        "G5: b acquired orders (epoch 2) at 2026-01-01T00:00:04.000Z while a held an "
        "unexpired lease (epoch 1) until 2026-01-01T00:00:10.000Z",
        "G5: save_state by a on orders with stale epoch 1 was accepted (current epoch 2)",
    ]
    assert [lease.owner for _, lease in audit.acquisitions] == ["a", "b"]


async def test_a_proper_store_passes_the_audit() -> None:
    inner = MemoryStore()
    audit = LeaseAudit()
    first = FaultyStore(inner, owner="a", audit=audit)
    lease = await leased(first)
    assert await first.renew_lease(KEY, lease, 10_000, T0 + 5_000) is True
    second = FaultyStore(inner, owner="b", audit=audit)
    assert await second.acquire_lease(KEY, "b", 10_000, T0 + 14_999) is None
    taken = await second.acquire_lease(KEY, "b", 10_000, T0 + 15_000)
    assert taken == Lease("b", 2, T0 + 25_000)
    await second.release_lease(KEY, taken)
    assert audit.violations == []
