"""``tick`` side by side per poller, and a backfill driven to completion."""

from __future__ import annotations

import io

from cli_fakes import Polled
from rich.console import Console

from watukuy.cli._progress import drive_backfill, tick_with_progress
from watukuy.model.rows import PKey


def quiet() -> Console:
    return Console(file=io.StringIO(), width=100)


async def test_tick_with_progress_combines_one_pass_per_poller(polled: Polled) -> None:
    await polled.clock.advance("1m")
    result = await tick_with_progress(
        polled.engine, ["orders", "tenants"], "50s", console=quiet(), show=True
    )
    assert sorted((r["poller"], r["partition"], r["events"]) for r in result["polled"]) == [
        ("orders", "", 0),
        ("tenants", "t1", 0),
        ("tenants", "t2", 0),
    ]
    assert result["skipped_leased"] == 0
    assert result["skipped_not_due"] == 0
    assert result["timed_out"] is False
    assert (result["caught_up"], result["pending_keys"]) == (True, [])
    assert set(result) == {
        "polled",
        "skipped_leased",
        "skipped_not_due",
        "duration_ms",
        "timed_out",
        "pending_keys",
        "caught_up",
    }


async def test_drive_backfill_runs_the_lane_to_completion(polled: Polled) -> None:
    key = PKey("orders")
    await polled.engine.backfill("orders", None, force=True)
    outcome = await drive_backfill(polled.engine, key, console=quiet(), show=True)
    assert outcome.to_dict() == {
        "poller": "orders",
        "partition": "",
        "cycles": 1,
        "items": 5,
        "events": 5,
        "done": True,
        "error": None,
    }
    state = await polled.store.load_state(key)
    assert state is not None
    assert state.backfill is None
    # Nothing left to drive: the lane is already gone.
    again = await drive_backfill(polled.engine, key, console=quiet(), show=False)
    assert (again.cycles, again.done) == (0, True)
