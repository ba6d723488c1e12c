"""Store contract tests of the outbox."""

from __future__ import annotations

from watukuy.model.errors import SerializedError
from watukuy.model.ports import StateStore

from ._support import KEY, KEY_B, T0, _acquire, _ids, batch, outbox_row


class OutboxContract:
    """Pending events: paged in sequence order, acked, their attempts counted."""

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

    async def test_a_page_of_new_events_reads_back_exactly(self, store: StateStore) -> None:
        # What a page writes: new events sharing their creation time, no attempt yet.
        lease = await _acquire(store)
        rows = [outbox_row(f"e{n}", n, created_at=T0) for n in (1, 2, 3)]
        await store.commit_poll(KEY, lease, batch(events=rows))
        assert await store.load_pending(KEY, 10) == rows
        mixed = [
            outbox_row("e4", 4, created_at=T0),
            outbox_row("e5", 5, created_at=T0, attempts=2),
        ]
        await store.commit_poll(KEY, lease, batch(events=mixed))
        assert await store.load_pending(KEY, 10) == rows + mixed

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
