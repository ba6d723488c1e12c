"""Store contract tests of the setup, leases, epochs and fencing."""

from __future__ import annotations

import dataclasses

import pytest

from watukuy.model.errors import LeaseLostError
from watukuy.model.ports import StateStore
from watukuy.model.rows import Lease, empty_poller_state

from ._support import (
    _FAR,
    _FENCED,
    _LISTED,
    _URL,
    KEY,
    KEY_B,
    KEY_OTHER,
    T0,
    TTL,
    _acquire,
    _everything,
    _seed,
    batch,
    item_row,
    outbox_row,
)


class LeaseContract:
    """Who may write a key, and when: leases, epochs that never repeat, fenced writes."""

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
