"""Store contract tests of ``commit_poll``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

import pytest

from watukuy.model.errors import SerializedError, StoreError
from watukuy.model.ports import StateStore
from watukuy.model.rows import ItemRow, OutboxRow, ParkedRow, StatePatch, empty_poller_state

from ._support import (
    _BATCH_FAILURES,
    KEY,
    T0,
    _acquire,
    _everything,
    _ids,
    _seed,
    _Unreadable,
    batch,
    item_row,
    outbox_row,
    parked_invalid,
)


class CommitContract:
    """``commit_poll`` writes every part of a batch, or nothing at all."""

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
