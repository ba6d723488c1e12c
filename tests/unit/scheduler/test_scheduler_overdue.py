"""The overdue rule, on plain data: when a key has waited too long for the engine."""

from __future__ import annotations

from watukuy import scheduler
from watukuy.model.rows import Lease, PollerState, ScheduleState

NOW = 1_000_000_000


def state(*, wake_at: int | None, updated_at: int = 0, **fields: object) -> PollerState:
    return PollerState(wake_at=wake_at, updated_at=updated_at, **fields)  # type: ignore[arg-type]


def test_a_key_not_due_yet_waits_for_nobody() -> None:
    assert scheduler.waiting_ms(state(wake_at=NOW + 5_000), None, NOW) == 0
    assert scheduler.waiting_ms(state(wake_at=NOW), None, NOW) == 0


def test_a_due_key_waits_from_its_due_time() -> None:
    assert (
        scheduler.waiting_ms(state(wake_at=NOW - 90_000, updated_at=NOW - 400_000), None, NOW)
        == 90_000
    )


def test_a_write_after_the_due_time_is_the_engine_at_work() -> None:
    # A run that committed a page 10 s ago, after the key came due 5 minutes ago.
    due = state(wake_at=NOW - 300_000, updated_at=NOW - 10_000)
    assert scheduler.waiting_ms(due, None, NOW) == 10_000


def test_a_held_lease_is_the_engine_at_work_and_an_expired_one_is_not() -> None:
    due = state(wake_at=NOW - 300_000, updated_at=NOW - 400_000)
    assert scheduler.waiting_ms(due, Lease("replica-a", 3, NOW + 1), NOW) == 0
    assert scheduler.waiting_ms(due, Lease("replica-a", 3, NOW), NOW) == 300_000


def test_paused_unknown_and_unplanned_keys_wait_for_nobody() -> None:
    assert scheduler.waiting_ms(None, None, NOW) is None
    assert scheduler.waiting_ms(state(wake_at=NOW - 300_000, paused=True), None, NOW) is None
    assert scheduler.waiting_ms(state(wake_at=None), None, NOW) is None


def test_a_row_without_wake_at_uses_the_live_lanes_due_time() -> None:
    old = state(wake_at=None, schedule=ScheduleState(next_due_at=NOW - 70_000))
    assert scheduler.waiting_ms(old, None, NOW) == 70_000


def test_overdue_is_waiting_longer_than_the_grace() -> None:
    assert not scheduler.is_overdue(None, scheduler.OVERDUE_GRACE_MS)
    assert not scheduler.is_overdue(0, scheduler.OVERDUE_GRACE_MS)
    assert not scheduler.is_overdue(scheduler.OVERDUE_GRACE_MS, scheduler.OVERDUE_GRACE_MS)
    assert scheduler.is_overdue(scheduler.OVERDUE_GRACE_MS + 1, scheduler.OVERDUE_GRACE_MS)


def test_the_graces() -> None:
    assert (
        scheduler.overdue_grace(resync_ms=15_000, lease_ttl_ms=30_000) == scheduler.OVERDUE_GRACE_MS
    )
    assert scheduler.overdue_grace(resync_ms=60_000, lease_ttl_ms=90_000) == 150_000
    assert scheduler.loop_grace(15_000) == scheduler.LOOP_GRACE_MS == 30_000
    assert scheduler.loop_grace(120_000) == 120_000
