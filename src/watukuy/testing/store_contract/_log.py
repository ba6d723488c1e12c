"""Store contract tests of the event log."""

from __future__ import annotations

from watukuy.model.ports import StateStore
from watukuy.model.rows import Lease, LoggedEvent

from ._support import (
    KEY,
    KEY_B,
    T0,
    _acquire,
    _assert_unsupported,
    _everything,
    _seqs,
    batch,
    event_json,
    outbox_row,
)


class EventLogContract:
    """The event log: written only when asked, read by sequence or time, pruned."""

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
