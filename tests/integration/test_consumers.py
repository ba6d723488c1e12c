"""Several consumers of one poller: each gets every event, with its own attempts, retries,
parking and holds, on every store.

A poller with one consumer named ``"default"`` keeps one outbox row per event. Any other set
of consumers splits each row, before delivery, into one row per consumer
(``<event id>@<consumer>``): what happens to one consumer's row never touches another's.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import watukuy as wk
from watukuy.model.rows import CommitBatch, Lease, PKey, delivery_consumer, delivery_id
from watukuy.testing import SeededRandom

from .conftest import Recorder, World, item, orders, seed

T = "2025-12-31T12:00:00.000Z"
KEY = PKey("orders")


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def poll_now(engine: wk.Engine) -> None:
    await engine.trigger("orders")
    await engine.tick()


def once_each(recorder: Recorder) -> Counter[str]:
    return Counter(recorder.ids)


async def settle(world: World, engine: wk.Engine, *, rounds: int = 8) -> None:
    """Tick until every retry that is due has run (the virtual clock jumps to each)."""
    for _ in range(rounds):
        await engine.tick()
        report = (await engine.inspect())["pollers"][0]
        retry_at = report["schedule"]["next_retry_at"]
        if retry_at is None:
            return
        await world.clock.advance_to(retry_at)


async def test_every_consumer_gets_every_event_once(world: World) -> None:
    seed(world, 5)
    engine = world.engine(orders())
    billing, crm = Recorder(), Recorder()
    engine.on("orders", billing, consumer="billing")
    engine.on("orders", crm, consumer="crm")
    await engine.tick()
    assert sorted(e.subject for e in billing.events) == [f"item-{i:03d}" for i in range(1, 6)]
    assert billing.ids == crm.ids  # the same events, in the same order
    assert set(once_each(billing).values()) == {1}
    assert await world.store.count_pending(KEY) == 0

    world.api.update("item-002", status="paid", updated_at="2025-12-31T12:00:01.000Z")
    await poll_now(engine)
    assert billing.ids == crm.ids
    assert [e.type for e in billing.events].count("updated") == 1


async def test_a_consumer_that_parks_never_redelivers_to_the_others(world: World) -> None:
    seed(world, 4)
    poller = orders(delivery=wk.Delivery(retry=wk.Retry(attempts=3)))
    engine = world.engine(poller)
    flaky = Recorder(fail=lambda event: event.subject == "item-002")
    steady = Recorder()
    engine.on("orders", flaky, consumer="flaky")
    engine.on("orders", steady, consumer="steady")
    await settle(world, engine)

    # The failing consumer tried item-002 three times and parked it; the other saw each
    # event exactly once, item-002 included.
    assert once_each(steady) == {event.id: 1 for event in steady.events}
    assert len(steady.events) == 4
    failed_id = next(e.id for e in steady.events if e.subject == "item-002")
    assert [attempt for eid, attempt in flaky.attempts if eid == failed_id] == [1, 2, 3]
    parked = await engine.parked.list("orders")
    assert [row.id for row in parked] == [delivery_id(failed_id, "flaky")]
    assert delivery_consumer(parked[0].id) == "flaky"
    assert await world.store.count_pending(KEY) == 0

    # A retry of the parked row goes to its consumer alone.
    flaky.fail = lambda event: False
    assert await engine.parked.retry("orders", [parked[0].id]) == 1
    await settle(world, engine)
    assert [e.subject for e in flaky.events].count("item-002") == 1
    assert len(steady.events) == 4


async def test_two_handlers_without_names_are_two_consumers(world: World) -> None:
    seed(world, 3)
    engine = world.engine(orders(delivery=wk.Delivery(retry=wk.Retry(attempts=2))))
    failing = Recorder(fail=lambda event: True)
    steady = Recorder()
    engine.on("orders", failing)
    engine.on("orders", steady)
    await settle(world, engine)
    assert len(steady.events) == 3
    assert set(once_each(steady).values()) == {1}
    parked = await engine.parked.list("orders")
    assert sorted(delivery_consumer(row.id) or "" for row in parked) == ["default"] * 3
    assert await world.store.count_pending(KEY) == 0


async def test_a_hold_holds_only_its_own_consumer(world: World) -> None:
    seed(world, 2)
    poller = orders(
        delivery=wk.Delivery(
            retry=wk.Retry(attempts=1),
            ordering_key=lambda event: "one-key",  # every event shares one ordering key
            poison=wk.Poison(hold_key=True),
        )
    )
    engine = world.engine(poller)
    blocked = Recorder(fail=lambda event: event.subject == "item-001")
    free = Recorder()
    engine.on("orders", blocked, consumer="blocked")
    engine.on("orders", free, consumer="free")
    await engine.tick()
    assert [e.subject for e in free.events] == ["item-001", "item-002"]
    assert blocked.events == []  # item-002 waits behind the parked item-001
    assert await world.store.held_keys(KEY) == {"one-key@blocked"}

    world.api.add(item(3, "2025-12-31T12:00:05.000Z"))
    await poll_now(engine)
    assert [e.subject for e in free.events] == ["item-001", "item-002", "item-003"]
    assert blocked.events == []

    blocked.fail = lambda event: False
    parked = await engine.parked.list("orders")
    await engine.parked.retry("orders", [row.id for row in parked])
    await engine.tick()
    assert [e.subject for e in blocked.events] == ["item-001", "item-002", "item-003"]
    assert len(free.events) == 3


async def test_filters_retries_and_contexts_are_per_consumer(world: World) -> None:
    seed(world, 3)
    engine = world.engine(orders(delivery=wk.Delivery(retry=wk.Retry(attempts=5))))
    seen: list[tuple[str, str, int]] = []

    async def audit(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        seen.append((ctx.consumer, event.subject, ctx.attempt))

    async def picky(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        seen.append((ctx.consumer, event.subject, ctx.attempt))
        if event.subject == "item-003" and ctx.attempt == 1:
            raise RuntimeError("not yet")

    engine.on("orders", audit)  # the "default" consumer, beside a named one
    engine.on("orders", picky, consumer="picky", when=lambda e: e.subject != "item-001")
    await settle(world, engine)
    assert sorted(s for s in seen if s[0] == "default") == [
        ("default", "item-001", 1),
        ("default", "item-002", 1),
        ("default", "item-003", 1),
    ]
    assert sorted(s for s in seen if s[0] == "picky") == [
        ("picky", "item-002", 1),
        ("picky", "item-003", 1),
        ("picky", "item-003", 2),
    ]
    report = (await engine.inspect())["pollers"][0]
    assert report["filtered"] == 1
    assert report["outbox_pending"] == 0
    assert report["consumers"] == ["default", "picky"]


async def test_a_subscription_and_a_handler_share_a_poller(world: World) -> None:
    seed(world, 3)
    engine = world.engine(orders())
    handler = Recorder()
    engine.on("orders", handler, consumer="handler")
    subscription = engine.subscribe("orders", consumer="stream")
    pulled: list[str] = []

    async def pull() -> None:
        async with subscription as events:
            async for event in events:
                pulled.append(event.subject)
                if len(pulled) == 3:
                    break

    puller = asyncio.create_task(pull())
    await engine.tick()
    await asyncio.wait_for(puller, 5)
    assert pulled == ["item-001", "item-002", "item-003"]
    assert [e.subject for e in handler.events] == pulled
    assert await world.store.count_pending(KEY) == 0


async def test_a_consumer_this_engine_lacks_keeps_its_rows_until_it_comes(world: World) -> None:
    seed(world, 2)
    first = world.engine(orders())
    early = Recorder()
    first.on("orders", early, consumer="early")
    first.on("orders", Recorder(), consumer="late")
    await first.tick()
    first.off("orders", "late")  # "late" goes away; its rows stay
    world.api.add(item(3, "2025-12-31T12:00:05.000Z"))
    await poll_now(first)
    # item-003's shared row is split for "early" alone: "late" never sees it.
    assert [e.subject for e in early.events] == ["item-001", "item-002", "item-003"]
    assert await world.store.count_pending(KEY) == 0

    # Rows already split for a consumer that is gone wait for it, and are not delivered
    # to anyone else.
    ids = [e.id for e in early.events]
    lease = await world.store.acquire_lease(KEY, "test", 60_000, world.clock.now())
    assert lease is not None
    await world.store.commit_poll(
        KEY,
        lease,
        CommitBatch(
            events=[_row(early.events[0], delivery_id(ids[0], "late"))], now=world.clock.now()
        ),
    )
    await world.store.release_lease(KEY, lease)
    await poll_now(first)
    assert await world.store.count_pending(KEY) == 1
    assert len(early.events) == 3
    late = Recorder()
    first.on("orders", late, consumer="late")
    await poll_now(first)
    assert late.ids == [ids[0]]
    assert await world.store.count_pending(KEY) == 0


async def test_going_from_one_consumer_to_two_splits_what_waits(world: World) -> None:
    seed(world, 3)
    engine = world.engine(orders())
    await engine.tick()  # no consumer yet: three shared rows wait
    assert await world.store.count_pending(KEY) == 3
    a, b = Recorder(), Recorder()
    engine.on("orders", a)
    engine.on("orders", b, consumer="b")
    await engine.tick()
    assert a.ids == b.ids
    assert len(a.ids) == 3
    assert await world.store.count_pending(KEY) == 0


async def test_a_crash_between_the_split_and_its_ack_delivers_once(world: World) -> None:
    seed(world, 3)
    engine = world.engine(orders())
    await engine.tick()  # three shared rows wait

    store = world.store
    acks: list[list[str]] = []
    original_ack = store.ack_events

    async def failing_ack(key: PKey, lease: Lease, ids: Any) -> None:
        acks.append(list(ids))
        if all(delivery_consumer(i) is None for i in ids):
            raise ConnectionError("the store went away after the split's rows were written")
        await original_ack(key, lease, ids)

    store.ack_events = failing_ack  # type: ignore[method-assign]
    a, b = Recorder(), Recorder()
    crashing = world.engine(orders(), random=SeededRandom(3))
    crashing.on("orders", a, consumer="a")
    crashing.on("orders", b, consumer="b")
    await crashing.tick()
    assert a.events == []
    assert b.events == []
    pending = await store.load_pending(KEY, 100)
    assert len(pending) == 9  # three shared rows and their six split copies

    store.ack_events = original_ack  # type: ignore[method-assign]
    await world.clock.advance("2s")  # past the in-memory back-off of a store failure
    await poll_now(crashing)
    assert once_each(a) == once_each(b)
    assert sorted(once_each(a).values()) == [1, 1, 1]
    assert await store.count_pending(KEY) == 0


async def test_replay_reaches_every_consumer(world: World) -> None:
    seed(world, 2)
    engine = world.engine(orders(log=wk.EventLog(retention="1h")))
    a, b = Recorder(), Recorder()
    engine.on("orders", a, consumer="a")
    engine.on("orders", b, consumer="b")
    await engine.tick()
    result = await engine.replay("orders", from_=0)
    assert result.replayed == 2
    await engine.tick()
    assert [e.lane for e in a.events] == ["live", "live", "replay", "replay"]
    assert a.ids == b.ids


async def test_consumer_names_are_checked(world: World) -> None:
    engine = world.engine(orders())
    engine.on("orders", Recorder(), consumer="billing")
    with pytest.raises(wk.ConfigError) as taken:
        engine.on("orders", Recorder(), consumer="billing")
    assert taken.value.field == "consumer"
    with pytest.raises(wk.ConfigError):
        engine.subscribe("orders", consumer="billing")
    for bad in ["", "a@b", "has space", "x" * 65]:
        with pytest.raises(wk.ConfigError) as invalid:
            engine.on("orders", Recorder(), consumer=bad)
        assert invalid.value.field == "consumer"
    engine.on("orders", Recorder())  # "default" is free
    engine.on("orders", Recorder())  # and then "default-2"
    assert (await engine.inspect())["pollers"][0]["consumers"] == [
        "billing",
        "default",
        "default-2",
    ]
    engine.off("orders", "billing")
    engine.on("orders", Recorder(), consumer="billing")  # free again
    engine.off("orders")
    engine.on("orders", Recorder(), consumer="billing")  # every one was detached


def _row(event: wk.Event[Any], outbox_id: str) -> Any:
    from watukuy.model.events import event_to_json
    from watukuy.model.rows import OutboxRow

    return OutboxRow(
        event_id=outbox_id, sequence=event.sequence, event=event_to_json(event), created_at=1
    )
