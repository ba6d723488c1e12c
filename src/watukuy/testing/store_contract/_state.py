"""Store contract tests of the poller state and of the keys."""

from __future__ import annotations

import dataclasses

from watukuy.model.ports import StateStore
from watukuy.model.rows import Lease, PKey, empty_poller_state

from ._support import KEY, KEY_B, T0, TTL, _acquire, _everything, _full_state, _patch_of, _seed


class StateContract:
    """State saves and patches, fenced or not; listing, deleting and clearing keys."""

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
