"""Store contract tests of the due index."""

from __future__ import annotations

import dataclasses

import pytest

from watukuy.model.errors import LeaseLostError, StoreError
from watukuy.model.ports import StateStore
from watukuy.model.rows import PKey

from ._support import (
    _FAR,
    KEY,
    KEY_B,
    KEY_OTHER,
    T0,
    _acquire,
    _everything,
    _seed,
    batch,
    item_row,
    outbox_row,
)


class DueIndexContract:
    """The due index: which keys are due, in which order, and what moves them."""

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
