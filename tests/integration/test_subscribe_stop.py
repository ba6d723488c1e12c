"""Ending a ``subscribe()`` loop from outside: ``stop=`` (an ``asyncio.Event``) and
``close()``/``aclose()`` from another task end the ``async for`` cleanly, and nothing is
lost: what was not finished or not offered goes to the next subscription."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import watukuy as wk
from watukuy.testing import SeededRandom, VirtualClock

ITEMS = [{"id": f"i{n}"} for n in (1, 2, 3)]


def listing() -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=ITEMS, has_more=False)

    return wk.define_poller(
        name="items", identity=lambda item: item["id"], cursor=wk.SnapshotDiff(), fetch=fetch
    )


@pytest.fixture
def engine() -> wk.Engine:
    return wk.Engine(
        store=wk.MemoryStore(), pollers=[listing()], clock=VirtualClock(), random=SeededRandom(3)
    )


async def drain_rest(engine: wk.Engine) -> list[str]:
    """What a fresh subscription of the same consumer receives from the next tick."""
    seen: list[str] = []
    events = engine.subscribe("items")

    async def consume() -> None:
        async for event in events:
            seen.append(event.subject)

    task = asyncio.create_task(consume())
    await engine.tick()
    events.close()
    await task
    return seen


async def test_setting_stop_while_the_loop_waits_ends_it(engine: wk.Engine) -> None:
    stop = asyncio.Event()
    events = engine.subscribe("items", stop=stop)
    seen: list[str] = []

    async def consume() -> None:
        async for event in events:
            seen.append(event.subject)

    task = asyncio.create_task(consume())
    await engine.tick()
    assert seen == ["i1", "i2", "i3"]
    assert not task.done()  # waiting for a fourth event
    stop.set()
    await asyncio.wait_for(task, timeout=30)
    assert events.closed
    assert await drain_rest(engine) == []  # all three were acknowledged


async def test_stop_set_during_the_body_acks_the_event_in_hand_and_leaves_the_rest(
    engine: wk.Engine,
) -> None:
    stop = asyncio.Event()
    events = engine.subscribe("items", stop=stop)
    seen: list[str] = []

    async def consume() -> None:
        async for event in events:
            seen.append(event.subject)
            stop.set()  # as another task would: the body still finishes this event

    task = asyncio.create_task(consume())
    await engine.tick()
    await asyncio.wait_for(task, timeout=30)
    assert seen == ["i1"]
    assert await drain_rest(engine) == ["i2", "i3"]


async def test_close_from_another_task_redelivers_the_unfinished_event(
    engine: wk.Engine,
) -> None:
    events = engine.subscribe("items")
    started = asyncio.Event()
    seen: list[str] = []

    async def consume() -> None:
        async for event in events:
            seen.append(event.subject)
            started.set()
            await asyncio.Event().wait()  # never finishes this one

    task = asyncio.create_task(consume())
    tick = asyncio.create_task(engine.tick())
    await asyncio.wait_for(started.wait(), timeout=30)
    events.close()
    await asyncio.wait_for(tick, timeout=30)
    assert seen == ["i1"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await drain_rest(engine) == ["i1", "i2", "i3"]


async def test_aclose_from_another_task_ends_a_waiting_loop(engine: wk.Engine) -> None:
    events = engine.subscribe("items")
    seen: list[str] = []

    async def consume() -> None:
        async for event in events:
            seen.append(event.subject)

    task = asyncio.create_task(consume())
    await engine.tick()
    await events.aclose()
    await asyncio.wait_for(task, timeout=30)
    assert seen == ["i1", "i2", "i3"]
    assert await drain_rest(engine) == []


async def test_a_stop_that_is_set_already_offers_nothing(engine: wk.Engine) -> None:
    stop = asyncio.Event()
    stop.set()
    events = engine.subscribe("items", stop=stop)
    assert [event async for event in events] == []
    assert await drain_rest(engine) == ["i1", "i2", "i3"]


def test_stop_must_be_an_asyncio_event(engine: wk.Engine) -> None:
    with pytest.raises(wk.ConfigError) as caught:
        engine.subscribe("items", stop=True)  # type: ignore[call-overload]
    assert caught.value.field == "stop"
