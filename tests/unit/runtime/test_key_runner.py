"""KeyRunner: one run of one key returns what it did, built once, with its next wake-up."""

from __future__ import annotations

import logging
import random
from typing import Any

import watukuy as wk
from watukuy.cursor import PageCursor, make_strategy
from watukuy.model.partition import Partition
from watukuy.model.rows import PKey
from watukuy.runtime._hookbus import HookBus
from watukuy.runtime.runner import EngineDeps, KeyRunner
from watukuy.testing import VirtualClock

_KEY = PKey("orders", "")


def _poller() -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[{"id": "a"}, {"id": "b"}])

    return wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=wk.Schedule(min="10s", max="10s", jitter=0),
    )


def _runner(store: wk.MemoryStore, clock: VirtualClock) -> KeyRunner:
    deps = EngineDeps(
        store=store,
        clock=clock,
        random=random.Random(7),
        hooks=HookBus([], logging.getLogger("test")),
        instance_id="test",
        lease_ttl_ms=30_000,
        lease_renew_ms=10_000,
        batch_size=100,
        http=None,
        budgets=None,
        reconcile_strategy=make_strategy(PageCursor(initial=1)),
    )
    return KeyRunner(deps, _poller(), Partition(""), None)


async def test_a_run_returns_its_cycles_and_the_wake_up_it_saved() -> None:
    store, clock = wk.MemoryStore(), VirtualClock()

    result = await _runner(store, clock).run()

    assert result.outcome == "ran"
    assert [(r.lane, r.items, r.events, r.error) for r in result.results] == [("live", 2, 2, None)]
    saved = await store.load_state(_KEY)
    assert saved is not None
    assert result.state is not None
    assert result.wake_at is not None
    assert result.wake_at == saved.wake_at == result.state.wake_at
    assert result.wake_at == saved.schedule.next_due_at


async def test_a_key_not_due_says_when_it_will_be() -> None:
    store, clock = wk.MemoryStore(), VirtualClock()
    first = await _runner(store, clock).run()

    second = await _runner(store, clock).run()

    assert second.outcome == "not-due"
    assert second.results == []
    assert second.wake_at == first.wake_at


async def test_a_paused_key_wakes_only_on_demand() -> None:
    store, clock = wk.MemoryStore(), VirtualClock()
    await _runner(store, clock).run()
    lease = await store.acquire_lease(_KEY, "operator", 1_000, clock.now())
    assert lease is not None
    await store.save_state(_KEY, lease, {"paused": True})
    await store.release_lease(_KEY, lease)

    result = await _runner(store, clock).run()

    assert result.outcome == "paused"
    assert result.wake_at is None
