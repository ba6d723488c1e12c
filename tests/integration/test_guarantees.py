"""G1, G2, G3, G5, G7, G10 end to end, on MemoryStore and SqliteStore, on a VirtualClock."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.model.rows import CommitBatch, Lease, PKey
from watukuy.testing import FakeApi, VirtualClock, fake_items

from .conftest import Recorder, World, item, page_fetch, timestamp_fetch

EARLY = "2025-12-31T00:00:00.000Z"


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("fetch", timestamp_fetch(limit=10))
    options.setdefault("cursor", wk.TimestampCursor(field="updated_at", tie_break="id"))
    return wk.define_poller(
        name="orders", identity=lambda o: o["id"], version=lambda o: o["version"], **options
    )


def seed(world: World, n: int) -> None:
    for i in range(1, n + 1):
        world.api.add(item(i, f"2025-12-31T00:00:{i:02d}.000Z"))


class Crash(BaseException):
    """A simulated process death: not an Exception, so nothing in the engine handles it."""


class CrashAfterCommit:
    """Wraps a store: the first commit_poll persists, then the process 'dies' (every later
    call fails too, so no cleanup reaches the store)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.crashed = False

    def __getattr__(self, name: str) -> Any:
        if self.crashed:
            raise Crash("the process is dead")
        return getattr(self._inner, name)

    @property
    def capabilities(self) -> Any:
        return self._inner.capabilities

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        await self._inner.commit_poll(key, lease, batch)
        self.crashed = True
        raise Crash("simulated crash right after commit_poll")


async def test_g1_a_fresh_engine_delivers_what_a_crash_left_in_the_outbox(world: World) -> None:
    seed(world, 8)
    crashing = CrashAfterCommit(world.store)
    first = wk.Engine(
        store=crashing,  # type: ignore[arg-type]
        pollers=[orders()],
        clock=world.clock,
        random=wk.SystemRandom(1),
        http_client=httpx.AsyncClient(transport=world.api.transport()),
        instance_id="first",
    )
    lost = Recorder()
    first.on("orders", lost)
    with pytest.raises(Crash):
        await first.tick()
    assert lost.events == []  # it died before delivering anything
    assert await world.store.count_pending(PKey("orders")) == 8

    await world.clock.advance("31s")  # the dead engine's lease expires
    second = world.engine(orders(), instance_id="second")
    recorder = Recorder()
    second.on("orders", recorder)
    result = await second.tick()
    assert [e.subject for e in recorder.events] == [f"item-{i:03d}" for i in range(1, 9)]
    assert {r.lane for r in result.polled} == {"live"}
    assert await world.store.count_pending(PKey("orders")) == 0


async def test_g2_two_worlds_agree_on_every_id() -> None:
    ids: list[list[str]] = []
    for instance in ("a", "b"):
        clock = VirtualClock()
        other = World(clock=clock, api=FakeApi(clock), store=wk.MemoryStore())
        seed(other, 12)
        other.api.update(
            "item-004", status="paid", version=2, updated_at="2025-12-31T00:01:00.000Z"
        )
        engine = other.engine(orders(), instance_id=instance)
        recorder = Recorder()
        engine.on("orders", recorder)
        await engine.tick()
        ids.append(recorder.ids)
    assert len(ids[0]) == 12
    assert ids[0] == ids[1]


async def test_g2_replay_and_reset_reproduce_the_original_ids(world: World) -> None:
    seed(world, 5)
    engine = world.engine(orders(log=wk.EventLog(retention="7d")))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    original = recorder.ids
    assert len(original) == 5

    replayed = await engine.replay("orders", from_=0)
    assert replayed.replayed == 5
    await engine.tick()
    assert recorder.ids[5:] == original
    assert {e.lane for e in recorder.events[5:]} == {"replay"}
    assert [e.sequence for e in recorder.events[5:]] == [6, 7, 8, 9, 10]

    await engine.reset_cursor("orders", to=None, clear_snapshot=True)
    await engine.tick()
    assert recorder.ids[10:] == original
    assert {e.type for e in recorder.events[10:]} == {"created"}


async def test_g3_a_parked_created_holds_the_later_updated_until_retry(world: World) -> None:
    for i in range(1, 21):
        world.api.add(item(i, EARLY.replace("00:00.000", f"00:{i:02d}.000")))
    poller = orders(
        delivery=wk.Delivery(concurrency=32, retry=wk.Retry(attempts=1)),
        fetch=timestamp_fetch(limit=50),
    )
    engine = world.engine(poller)
    broken = {"item-007"}
    recorder = Recorder(fail=lambda event: event.subject in broken)
    engine.on("orders", recorder)
    await engine.tick()
    assert len(recorder.events) == 19
    parked = await engine.parked.list("orders")
    assert [(row.kind, row.hold_key) for row in parked] == [("poison", "item-007")]

    world.api.update("item-007", status="paid", version=2, updated_at="2025-12-31T00:05:00.000Z")
    await world.clock.advance("10m")
    await engine.tick()
    assert recorder.by_subject("item-007") == []  # the updated waits behind the parked created
    assert await world.store.count_pending(PKey("orders")) == 1

    broken.clear()
    assert await engine.parked.retry("orders", [row.id for row in parked]) == 1
    await engine.tick()
    assert recorder.by_subject("item-007") == ["created", "updated"]
    created, updated = (e for e in recorder.events if e.subject == "item-007")
    assert created.sequence < updated.sequence
    assert await world.store.count_pending(PKey("orders")) == 0


async def test_g5_a_second_engine_skips_a_leased_key_and_receives_nothing(world: World) -> None:
    seed(world, 3)
    gate = asyncio.Event()
    inner = timestamp_fetch()

    async def slow_fetch(ctx: Any) -> Any:
        await gate.wait()
        return await inner(ctx)

    first = world.engine(orders(fetch=slow_fetch), instance_id="first")
    first_seen = Recorder()
    first.on("orders", first_seen)
    running = asyncio.create_task(first.tick())
    await world.clock.flush()

    second = world.engine(orders(), instance_id="second")
    second_seen = Recorder()
    second.on("orders", second_seen)
    result = await second.tick()
    assert result.skipped_leased == 1
    assert result.polled == []
    assert second_seen.events == []

    gate.set()
    await running
    assert len(first_seen.events) == 3


async def test_g5_an_expired_holder_cannot_write(world: World) -> None:
    key = PKey("orders")
    now = world.clock.now()
    stale = await world.store.acquire_lease(key, "a", 30_000, now)
    assert stale is not None
    fresh = await world.store.acquire_lease(key, "b", 30_000, now + 30_001)
    assert fresh is not None
    assert fresh.epoch == stale.epoch + 1
    with pytest.raises(wk.LeaseLostError) as caught:
        await world.store.commit_poll(key, stale, CommitBatch(state_patch={"sequence": 99}))
    assert (caught.value.poller, caught.value.epoch) == ("orders", stale.epoch)
    state = await world.store.load_state(key)
    assert state is not None
    assert state.sequence == 0


async def test_g7_one_poison_item_is_parked_while_the_others_flow(world: World) -> None:
    seed(world, 10)
    poller = orders(delivery=wk.Delivery(retry=wk.Retry(attempts=3)))
    engine = world.engine(poller)
    recorder = Recorder(fail=lambda event: event.subject == "item-004")
    engine.on("orders", recorder)
    await engine.tick()
    assert sorted(e.subject for e in recorder.events) == [
        f"item-{i:03d}" for i in range(1, 11) if i != 4
    ]
    for _ in range(2):  # two retries, each woken exactly at its retry time
        report = await engine.inspect()
        retry_at = report["pollers"][0]["schedule"]["next_retry_at"]
        assert retry_at is not None
        await world.clock.advance_to(retry_at)
        await engine.tick()
    assert [a for e, a in recorder.attempts if e == recorder.attempts[3][0]] == [1, 2, 3]
    parked = await engine.parked.list("orders")
    assert len(parked) == 1
    assert parked[0].attempts == 3
    assert parked[0].hold_key == "item-004"
    assert [h["attempt"] for h in parked[0].error["history"]] == [1, 2, 3]
    report = await engine.inspect()
    assert report["pollers"][0]["parked"] == 1
    assert report["pollers"][0]["outbox_pending"] == 0


async def test_g10_subscribe_acks_only_what_the_consumer_pulled(world: World) -> None:
    for entry in fake_items(6):
        world.api.add({**entry, "updated_at": EARLY})
    engine = world.engine(orders())
    events = engine.subscribe("orders")
    key = PKey("orders")
    tick = asyncio.create_task(engine.tick())
    pulled = []
    async for event in events:
        pulled.append(event.subject)
        assert await world.store.count_pending(key) == 6 - (len(pulled) - 1)
        if len(pulled) == 6:
            events.ack()
            break
    await tick
    assert pulled == [f"item-{i:03d}" for i in range(1, 7)]
    assert await world.store.count_pending(key) == 0


async def test_a_subscriber_that_raises_leaves_its_event_pending(world: World) -> None:
    seed(world, 2)
    engine = world.engine(orders())
    tick = asyncio.create_task(engine.tick())

    async def consume() -> None:
        async with engine.subscribe("orders") as events:
            async for _event in events:
                raise RuntimeError("consumer crashed")

    with pytest.raises(RuntimeError):
        await consume()
    await tick
    assert await world.store.count_pending(PKey("orders")) == 2


async def test_stop_with_drain_leaves_no_timer_behind(world: World) -> None:
    seed(world, 4)
    engine = world.engine(orders(schedule=wk.Schedule(min="5s", max="1m")))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.start()
    try:
        await world.clock.advance("1s")
        assert len(recorder.events) == 4
        world.api.add(item(50, "2025-12-31T00:10:00.000Z"))
        await world.clock.advance("10s")
        assert recorder.events[-1].subject == "item-050"
    finally:
        await engine.stop(drain=True)
    assert engine.status is wk.EngineStatus.STOPPED
    assert world.clock.pending_timers() == 0


async def test_tick_after_stop_is_refused(world: World) -> None:
    engine = world.engine(orders())
    await engine.stop()
    with pytest.raises(wk.WatukuyError) as caught:
        await engine.tick()
    assert caught.value.code == "NOT_RUNNING"


async def test_page_strategy_resets_after_the_last_page(world: World) -> None:
    seed(world, 25)
    poller = wk.define_poller(
        name="pages", identity=lambda o: o["id"], cursor=wk.PageCursor(), fetch=page_fetch(10)
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("pages", recorder)
    result = await engine.tick()
    assert result.polled[0].items == 25
    assert len(recorder.events) == 25
    report = await engine.inspect()
    assert report["pollers"][0]["cursors"]["live"] == {"page": 1}


async def test_a_trigger_during_a_run_runs_the_key_again_and_its_schedule_goes_on(
    world: World,
) -> None:
    seed(world, 2)
    release = asyncio.Event()
    entered = asyncio.Event()
    plain = timestamp_fetch(limit=10)
    calls = 0

    async def slow_fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            entered.set()
            await release.wait()  # the first run is still going when the trigger comes
        page: wk.Page[Any] = await plain(ctx)
        return page

    engine = world.engine(
        orders(fetch=slow_fetch, schedule=wk.Schedule(min="1m", max="1m", jitter=0))
    )
    engine.on("orders", Recorder())
    await engine.start()
    try:
        await entered.wait()
        await engine.trigger("orders")
        await world.clock.advance("1s")  # the triggered wake-up comes due while the key runs
        release.set()
        await world.clock.advance("1s")
        assert calls == 2  # the trigger was honoured once the first run ended
        await world.clock.advance("2m")
        assert calls >= 4  # and the key's schedule goes on: polls at every minute
    finally:
        await engine.stop()
