"""The store-only operations (``--store`` without ``--app``) and their argument checks."""

from __future__ import annotations

import pytest
from cli_fakes import Polled

from watukuy.cli._errors import CliError
from watukuy.cli._operators import EngineOperator, StoreOperator
from watukuy.model import json as wkjson
from watukuy.model.rows import (
    CircuitState,
    HeldDeletes,
    ListingPass,
    ListingState,
    PKey,
    Validator,
)
from watukuy.scheduler import trigger as trigger_schedule

ORDERS = PKey("orders")
LAST = {"value": "2026-01-01T00:00:04.000Z", "tie_break": "item-005"}


def operator(polled: Polled) -> StoreOperator:
    return StoreOperator(polled.store, polled.clock)


async def test_inspect_matches_the_engine_report_key_by_key(polled: Polled) -> None:
    by_store = await operator(polled).inspect()
    by_engine = await polled.engine.inspect()
    assert by_store["instance_id"] is None
    assert by_store["status"] == "store-only"
    assert by_store["generated_at"] == polled.clock.now()
    keys = [(p["poller"], p["partition"]) for p in by_store["pollers"]]
    assert keys == [("orders", ""), ("poison", ""), ("tenants", "t1"), ("tenants", "t2")]
    engine_keys = {(p["poller"], p["partition"]): p for p in by_engine["pollers"]}
    for entry in by_store["pollers"]:
        twin = engine_keys[(entry["poller"], entry["partition"])]
        # `filtered` and `consumers` belong to this engine's consumers, `queued` to its
        # daemon: no store holds them.
        assert set(entry) == set(twin) - {"filtered", "consumers", "queued"}
        for name in (
            "paused",
            "lease",
            "schedule",
            "outbox_pending",
            "parked",
            "items",
            "waiting_ms",
            "overdue",
        ):
            assert entry[name] == twin[name], name
    orders = by_store["pollers"][0]
    assert orders["cursors"] == {"live": LAST}
    assert orders["lag_ms"] == polled.clock.now() - 1_767_225_604_000
    assert orders["lag_ms"] == engine_keys[("orders", "")]["lag_ms"]
    assert by_store["pollers"][1]["parked"] == 2


async def test_key_checks_name_the_option(polled: Polled) -> None:
    op = operator(polled)
    with pytest.raises(
        CliError,
        match=r"--poller: the store has no poller 'nope' \(it has: orders, poison, tenants\)",
    ):
        await op.key("nope", None)
    with pytest.raises(CliError, match=r"--partition: poller 'tenants' is partitioned.*t1, t2"):
        await op.key("tenants", None)
    with pytest.raises(CliError, match=r"--partition: poller 'orders' is not partitioned"):
        await op.key("orders", "t1")
    with pytest.raises(CliError, match=r"no stored partition 't9'"):
        await op.key("tenants", "t9")
    assert await op.key("tenants", "t2") == PKey("tenants", "t2")
    assert await op.key("orders", None) == ORDERS


async def test_key_checks_on_an_empty_store() -> None:
    import watukuy as wk
    from watukuy.testing import VirtualClock

    op = StoreOperator(wk.MemoryStore(), VirtualClock())
    with pytest.raises(CliError, match="it has: no pollers yet"):
        await op.key("orders", None)


async def test_pause_resume_write_what_the_engine_writes(polled: Polled) -> None:
    op = operator(polled)
    await polled.clock.advance("10s")
    now = polled.clock.now()
    assert await op.pause("orders", None) == ORDERS
    state = await polled.store.load_state(ORDERS)
    assert state is not None
    assert state.paused is True
    assert state.updated_at == now
    assert (await polled.engine.tick(only="orders")).skipped_not_due == 1

    await polled.clock.advance("1s")
    await op.resume("orders", None)
    state = await polled.store.load_state(ORDERS)
    assert state is not None
    assert state.paused is False
    assert state.schedule.next_due_at == now + 1_000
    assert state.schedule.drain_blocked is False


async def test_trigger_makes_a_key_due_and_an_open_circuit_half_open(polled: Polled) -> None:
    store = polled.store
    key = PKey("tenants", "t1")
    state = await store.load_state(key)
    assert state is not None
    opened = state.schedule.__class__(
        next_due_at=polled.clock.now() + 60_000,
        circuit=CircuitState.OPEN,
        throttled_until=polled.clock.now() + 60_000,
    )
    await store.save_state_unfenced(key, {"schedule": opened}, polled.clock.now())
    await operator(polled).trigger("tenants", "t1")
    state = await store.load_state(key)
    assert state is not None
    assert state.schedule == trigger_schedule(opened, polled.clock.now())
    assert state.schedule.circuit is CircuitState.HALF_OPEN
    assert state.schedule.throttled_until is None


async def test_reset_cursor_to_null_drops_the_live_cursor(polled: Polled) -> None:
    await operator(polled).reset_cursor("orders", None, clear_snapshot=True, partition=None)
    state = await polled.store.load_state(ORDERS)
    assert state is not None
    assert "live" not in state.cursors
    assert state.schedule.next_due_at == polled.clock.now()
    assert await polled.store.count_items(ORDERS) == 0
    # The engine starts over from its initial cursor: everything is created again.
    result = await polled.engine.tick(only="orders")
    assert [r.events for r in result.polled] == [5]


async def test_reset_cursor_makes_the_engines_reset_on_a_store_alone(polled: Polled) -> None:
    store = polled.store
    lease = await store.acquire_lease(ORDERS, "test", 30_000, polled.clock.now())
    assert lease is not None
    await store.set_validator(ORDERS, lease, "page", Validator("etag", None, 0))
    await store.release_lease(ORDERS, lease)
    held = HeldDeletes(lane="live", below=1, count=5, snapshot=5, held_at=0)
    listing = ListingState(counter=1, lanes={"live": ListingPass(pass_id=1, pages=1)})
    await store.save_state_unfenced(
        ORDERS, {"held_deletes": held, "listing": listing}, polled.clock.now()
    )
    await operator(polled).reset_cursor("orders", None, clear_snapshot=True, partition=None)
    state = await store.load_state(ORDERS)
    assert state is not None
    # Nothing read before the reset is answered 304, the pass starts over, and the hold
    # naming the cleared rows goes with them.
    assert await store.get_validator(ORDERS, "page") is None
    assert state.listing.lanes["live"].pass_id is None
    assert state.held_deletes is None


async def test_reset_cursor_writes_the_stored_form_verbatim(polled: Polled) -> None:
    op = operator(polled)
    target = '{"value": "2026-01-01T00:00:01.000Z", "tie_break": "item-002"}'
    await op.reset_cursor("orders", target, clear_snapshot=False, partition=None)
    state = await polled.store.load_state(ORDERS)
    assert state is not None
    assert state.cursors["live"] == wkjson.dumps(wkjson.loads(target))
    assert await polled.store.count_items(ORDERS) == 5
    result = await polled.engine.tick(only="orders")
    assert [(r.items, r.events) for r in result.polled] == [(3, 0)]

    with pytest.raises(CliError, match=r"--to: without --app .* got '2026-01-01'"):
        await op.reset_cursor("orders", "2026-01-01", clear_snapshot=False, partition=None)
    with pytest.raises(CliError, match="not shaped like the stored cursor"):
        await op.reset_cursor("orders", '{"value": "x"}', clear_snapshot=False, partition=None)
    with pytest.raises(CliError, match="not shaped like the stored cursor"):
        await op.reset_cursor("orders", '"just text"', clear_snapshot=False, partition=None)


async def test_reset_cursor_shape_check_needs_a_stored_cursor(polled: Polled) -> None:
    op = operator(polled)
    # A snapshot diff stores "null": nothing but null fits it.
    with pytest.raises(CliError, match="not shaped like the stored cursor 'null'"):
        await op.reset_cursor("tenants", '{"page": 2}', clear_snapshot=False, partition="t1")
    # Without a stored cursor there is nothing to compare with: any JSON is written as is
    # (the store cannot know the strategy; --app can).
    await op.reset_cursor("orders", None, clear_snapshot=False, partition=None)
    await op.reset_cursor("orders", '{"page": 2}', clear_snapshot=False, partition=None)
    state = await polled.store.load_state(ORDERS)
    assert state is not None
    assert state.cursors["live"] == '{"page":2}'


async def test_parked_retry_and_discard_unblock_the_key(polled: Polled) -> None:
    op = operator(polled)
    key = PKey("poison")
    rows = await op.parked_list("poison", partition=None, kind=None, limit=None)
    assert [r.kind for r in rows] == ["poison", "poison"]
    assert await op.parked_list("poison", partition=None, kind="invalid", limit=None) == []
    assert len(await op.parked_list("poison", partition=None, kind=None, limit=1)) == 1

    await polled.clock.advance("3s")
    assert await op.parked_retry("poison", [rows[0].id], partition=None) == 1
    state = await polled.store.load_state(key)
    assert state is not None
    assert state.schedule.next_retry_at == polled.clock.now()
    assert state.schedule.drain_blocked is False
    assert await polled.store.count_pending(key) == 1
    assert await op.parked_discard("poison", [rows[1].id], partition=None) == 1
    assert await polled.store.count_parked(key) == 0
    assert await op.parked_discard("poison", ["0" * 64], partition=None) == 0


async def test_engine_operator_words_its_checks_for_the_command_line(polled: Polled) -> None:
    op = EngineOperator(polled.engine)
    with pytest.raises(
        CliError,
        match=r"--poller: unknown poller 'nope' \(the application has: orders, poison, tenants\)",
    ):
        op.key("nope", None)
    with pytest.raises(CliError, match="--partition: poller 'tenants' is partitioned"):
        await op.pause("tenants", None)
    with pytest.raises(CliError, match="--partition: poller 'orders' is not partitioned"):
        await op.trigger("orders", "x")
    assert await op.pause("tenants", "t1") == PKey("tenants", "t1")
    state = await polled.store.load_state(PKey("tenants", "t1"))
    assert state is not None
    assert state.paused is True
    assert await op.resume("tenants", "t1") == PKey("tenants", "t1")
    assert await op.reset_cursor("orders", None, clear_snapshot=True, partition=None) == ORDERS
    assert await polled.store.count_items(ORDERS) == 0
    rows = await op.parked_list("poison", partition=None, kind="poison", limit=None)
    assert await op.parked_retry("poison", [rows[0].id], partition=None) == 1
    assert await op.parked_discard("poison", [rows[1].id], partition=None) == 1
    assert (await op.inspect())["status"] == "idle"
