"""The key operations on a store and a clock, with no engine: what each one writes."""

from __future__ import annotations

import pytest

import watukuy as wk
from watukuy.model import json as wkjson
from watukuy.model.errors import WatukuyError
from watukuy.model.late import Lookback
from watukuy.model.rows import (
    CommitBatch,
    HeldDeletes,
    ItemRow,
    ListingPass,
    ListingState,
    ParkedRow,
    PKey,
    PollerState,
    Validator,
)
from watukuy.runtime.key_operations import (
    KeyOperations,
    listing_report,
    stored_lag_ms,
    stored_view,
)
from watukuy.testing import VirtualClock

KEY = PKey("orders")
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
LIVE = {"value": "2026-01-01T00:00:00.000Z", "tie_break": "a"}


def build() -> tuple[KeyOperations, wk.MemoryStore, VirtualClock]:
    store = wk.MemoryStore()
    clock = VirtualClock(START)
    return KeyOperations(store, clock), store, clock


async def stored(store: wk.MemoryStore, key: PKey = KEY) -> PollerState:
    state = await store.load_state(key)
    assert state is not None
    return state


async def seed(store: wk.MemoryStore, clock: VirtualClock) -> None:
    """A key with a live cursor, two items, a validator, a pass in progress and a hold."""
    lease = await store.acquire_lease(KEY, "seeder", 30_000, clock.now())
    assert lease is not None
    rows = [ItemRow(identity=i, version="1", hash=i, schema_version=1) for i in ("a", "b")]
    await store.commit_poll(
        KEY,
        lease,
        CommitBatch(
            state_patch={"cursors": {"live": wkjson.dumps(LIVE)}, "updated_at": clock.now()},
            upserts=rows,
            now=clock.now(),
        ),
    )
    await store.set_validator(KEY, lease, "page-1", Validator("etag", None, clock.now()))
    await store.release_lease(KEY, lease)
    listing = ListingState(counter=3, lanes={"live": ListingPass(pass_id=3, pages=2)})
    held = HeldDeletes(lane="live", below=3, count=2, snapshot=2, held_at=clock.now())
    await store.save_state_unfenced(
        KEY,
        {"listing": listing, "held_deletes": held, "lookback": Lookback(), "updated_at": 0},
        clock.now(),
    )


async def park(store: wk.MemoryStore, clock: VirtualClock, *ids: str) -> None:
    lease = await store.acquire_lease(KEY, "seeder", 30_000, clock.now())
    assert lease is not None
    for row_id in ids:
        row = ParkedRow(
            id=row_id,
            kind="poison",
            event="{}",
            item=None,
            error={"type": "Boom", "message": "boom"},
            attempts=3,
            parked_at=clock.now(),
            sequence=1,
        )
        await store.park_event(KEY, lease, row)
    await store.release_lease(KEY, lease)


# --- scheduling -------------------------------------------------------------------------------


async def test_trigger_makes_a_key_that_never_ran_due_now() -> None:
    ops, store, clock = build()
    await clock.advance("1m")
    await ops.trigger(KEY)
    state = await stored(store)
    assert state.schedule.next_due_at == clock.now()
    assert state.wake_at == clock.now()
    assert state.updated_at == clock.now()


async def test_pause_then_resume() -> None:
    ops, store, clock = build()
    await ops.pause(KEY)
    paused = await stored(store)
    assert paused.paused is True
    assert paused.wake_at is None
    await clock.advance("5s")
    await ops.resume(KEY)
    resumed = await stored(store)
    assert resumed.paused is False
    assert resumed.wake_at == resumed.schedule.next_due_at == clock.now()
    assert resumed.schedule.drain_blocked is False


# --- reset -----------------------------------------------------------------------------------


async def test_reset_cursor_rewinds_forgets_validators_and_restarts_the_pass() -> None:
    ops, store, clock = build()
    await seed(store, clock)
    seen: list[str | None] = []

    def live(current: str | None) -> str | None:
        seen.append(current)
        return '"rewound"'

    await clock.advance("1s")
    await ops.reset_cursor(KEY, live, clear_snapshot=False)
    state = await stored(store)
    assert seen == [wkjson.dumps(LIVE)]
    assert state.cursors["live"] == '"rewound"'
    assert state.schedule.next_due_at == state.wake_at == clock.now()
    assert await store.get_validator(KEY, "page-1") is None
    assert state.listing.lanes["live"].pass_id is None
    assert state.listing.lanes["live"].pages == 2  # the pass's figures stay for inspect()
    assert await store.count_items(KEY) == 2
    assert state.held_deletes is not None  # the rows it names are still there


async def test_reset_cursor_to_none_removes_the_live_cursor_and_clears_the_snapshot() -> None:
    ops, store, clock = build()
    await seed(store, clock)
    await ops.reset_cursor(KEY, lambda _current: None, clear_snapshot=True)
    state = await stored(store)
    assert "live" not in state.cursors
    assert await store.count_items(KEY) == 0
    assert state.held_deletes is None


# --- parked ------------------------------------------------------------------------------------


async def test_parked_retry_moves_rows_back_and_unblocks_the_key() -> None:
    ops, store, clock = build()
    await park(store, clock, "e1", "e2")
    assert [row.id for row in await ops.parked_list(KEY)] == ["e1", "e2"]
    assert await ops.parked_list(KEY, kind="invalid") == []
    await clock.advance("2s")
    assert await ops.parked_retry(KEY, ["e1", "nope"]) == 1
    state = await stored(store)
    assert state.schedule.next_retry_at == state.wake_at == clock.now()
    assert await store.count_pending(KEY) == 1
    assert await ops.parked_discard(KEY, ["e2"]) == 1
    assert await store.count_parked(KEY) == 0


async def test_parked_changes_that_match_nothing_write_nothing() -> None:
    ops, store, _ = build()
    assert await ops.parked_retry(KEY, ["nope"]) == 0
    assert await ops.parked_discard(KEY, ["nope"]) == 0
    assert await store.load_state(KEY) is None


# --- held deletes ------------------------------------------------------------------------------


async def test_held_deletes_confirm_then_discard() -> None:
    ops, store, clock = build()
    assert await ops.deletes_held(KEY) is None
    assert await ops.deletes_confirm(KEY) is None
    assert await ops.deletes_discard(KEY) is None
    assert await store.load_state(KEY) is None  # nothing held, nothing written
    await seed(store, clock)
    await clock.advance("3s")
    held = await ops.deletes_confirm(KEY)
    assert held is not None
    assert held.count == 2
    assert held.confirmed is False
    state = await stored(store)
    assert state.held_deletes is not None
    assert state.held_deletes.confirmed is True
    assert state.wake_at == clock.now()
    dropped = await ops.deletes_discard(KEY)
    assert dropped is not None
    assert dropped.confirmed is True
    assert await ops.deletes_held(KEY) is None
    assert await store.count_items(KEY) == 2  # the rows stay in the snapshot


async def test_a_surface_can_refuse_a_key_without_state() -> None:
    class Strict(KeyOperations):
        async def stored(self, key: PKey) -> PollerState:
            state = await self.store.load_state(key)
            if state is None:
                raise WatukuyError(f"{key} is gone", code="INVALID_STATE")
            return state

    store = wk.MemoryStore()
    ops = Strict(store, VirtualClock(START))
    for write in (ops.trigger(KEY), ops.resume(KEY), ops.deletes_held(KEY)):
        with pytest.raises(WatukuyError, match="is gone"):
            await write
    assert await store.load_state(KEY) is None


# --- inspect -----------------------------------------------------------------------------------


async def test_inspect_key_of_a_stored_key_reads_cursors_as_stored() -> None:
    ops, store, clock = build()
    await seed(store, clock)
    await clock.advance("10s")
    report = await ops.inspect_key(KEY, clock.now(), grace_ms=60_000)
    assert report["cursors"] == {"live": LIVE}
    assert report["lag_ms"] == 10_000
    assert report["items"] == 2
    assert report["held_deletes"] is not None
    assert report["held_deletes"]["count"] == 2
    assert report["listing"] == listing_report(await store.load_state(KEY))
    assert "queued" not in report
    assert "filtered" not in report
    assert "consumers" not in report


async def test_inspect_key_adds_the_facts_of_a_process_in_report_order() -> None:
    ops, _, clock = build()
    report = await ops.inspect_key(
        KEY,
        clock.now(),
        grace_ms=60_000,
        late_window=lambda _late: 5_000,
        queued=False,
        filtered=3,
        consumers=["a"],
    )
    assert report["paused"] is False
    assert report["cursors"] == {}
    assert report["lag_ms"] is None
    assert report["waiting_ms"] is None
    assert report["overdue"] is False
    assert list(report)[-5:] == ["overdue", "queued", "late_arrivals", "filtered", "consumers"]
    assert (report["filtered"], report["consumers"]) == (3, ["a"])


def test_stored_view_and_lag() -> None:
    assert stored_view("live", wkjson.dumps(LIVE), START + 1_000) == (LIVE, 1_000)
    assert stored_view("backfill", wkjson.dumps(LIVE), START) == (LIVE, None)
    assert stored_view("live", "not json", START) == ("not json", None)
    assert stored_lag_ms({"value": None, "tie_break": None}, START) is None
    assert stored_lag_ms({"page": 3}, START) is None
