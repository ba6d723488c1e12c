"""Store contract tests of the parked rows."""

from __future__ import annotations

import dataclasses

from watukuy.model.ports import StateStore

from ._support import (
    KEY,
    KEY_B,
    T0,
    _acquire,
    _ids,
    batch,
    event_json,
    outbox_row,
    parked_invalid,
    parked_poison,
)


class ParkedContract:
    """Parked poison events and invalid items: listed, held, retried, discarded."""

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

    async def test_retry_of_a_row_parked_without_a_sequence_uses_the_envelope(
        self, store: StateStore
    ) -> None:
        # A row parked with no sequence of its own is requeued at the sequence and creation
        # time its event envelope carries.
        lease = await _acquire(store)
        row = dataclasses.replace(parked_poison("e4", 4), sequence=None)
        await store.park_event(KEY, lease, row)
        assert await store.list_parked(KEY) == [row]
        assert await store.retry_parked(KEY, ["e4"]) == 1
        pending = await store.load_pending(KEY, 10)
        assert [(r.event_id, r.sequence, r.created_at) for r in pending] == [("e4", 4, T0 + 100)]

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
