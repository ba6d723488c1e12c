"""Handlers, acks, retries, halts, hooks and operations through the whole engine."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import watukuy as wk
from watukuy.model.rows import PKey

from .conftest import Recorder, World, item, orders, seed

T = "2025-12-31T12:00:00.000Z"


async def test_sync_handlers_run_in_a_worker_thread(world: World) -> None:
    seed(world, 3)
    engine = world.engine(orders())
    threads: list[str] = []

    def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        threads.append(threading.current_thread().name)

    engine.on("orders", handler)
    await engine.tick()
    assert len(threads) == 3
    assert threading.main_thread().name not in threads


async def test_a_plain_def_fetch_runs_in_a_worker_thread(world: World) -> None:
    threads: list[str] = []

    def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        threads.append(threading.current_thread().name)
        return wk.Page(items=[item(1, T)], has_more=False)

    engine = world.engine(orders(fetch=fetch))
    result = await engine.tick()
    assert [r.items for r in result.polled] == [1]
    assert threads
    assert threading.main_thread().name not in threads


async def test_manual_ack_mode_requires_ctx_ack(world: World) -> None:
    seed(world, 2)
    engine = world.engine(orders(delivery=wk.Delivery(ack_mode="manual")))
    calls: list[tuple[str, int]] = []

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        calls.append((event.subject, event.attempt))
        if event.subject == "item-001" or event.attempt > 1:
            ctx.ack()

    engine.on("orders", handler)
    await engine.tick()
    assert await world.store.count_pending(PKey("orders")) == 1
    report = (await engine.inspect())["pollers"][0]
    await world.clock.advance_to(report["schedule"]["next_retry_at"])
    await engine.tick()
    assert calls == [("item-001", 1), ("item-002", 1), ("item-002", 2)]
    assert await world.store.count_pending(PKey("orders")) == 0


async def test_poison_halt_opens_the_circuit(world: World) -> None:
    seed(world, 3)
    poller = orders(
        delivery=wk.Delivery(retry=wk.Retry(attempts=1), poison=wk.Poison(action="halt")),
        schedule=wk.Schedule(min="10s", max="5m"),
    )
    engine = world.engine(poller)
    opened: list[Any] = []

    class Hooks:
        def on_circuit_open(self, details: Any) -> None:
            opened.append(details)

    engine = world.engine(poller, hooks=Hooks())
    engine.on("orders", Recorder(fail=lambda event: event.subject == "item-002"))
    await engine.tick()
    report = (await engine.inspect())["pollers"][0]
    assert report["schedule"]["circuit"] == "open"
    assert report["schedule"]["last_error"]["name"] == "PoisonHalt"
    assert report["parked"] == 1
    assert len(opened) == 1
    assert opened[0].probe_at == world.clock.now() + 300_000


async def test_events_wait_for_a_handler_and_flow_once_it_is_attached(world: World) -> None:
    seed(world, 4)
    engine = world.engine(orders())
    await engine.tick()
    assert await world.store.count_pending(PKey("orders")) == 4
    recorder = Recorder()
    engine.on("orders", recorder)
    result = await engine.tick()  # not due, but the outbox has work for the new handler
    # No cycle ran; what the run delivered is reported all the same.
    assert [(r.lane, r.cycles, r.items, r.delivered) for r in result.polled] == [("live", 0, 0, 4)]
    assert len(recorder.events) == 4


async def test_handlers_without_a_name_take_the_first_free_default_name(world: World) -> None:
    seed(world, 2)
    engine = world.engine(orders())
    names: list[tuple[str, str]] = []

    def named(tag: str) -> Any:
        def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
            names.append((tag, ctx.consumer))

        return handler

    engine.on("orders", named("first"))
    engine.on("orders", named("second"))
    engine.on("orders", named("third"), consumer="default-3")
    engine.on("orders", named("fourth"))
    # A subscription without a name is "default", which a handler already has.
    with pytest.raises(wk.ConfigError) as taken:
        engine.subscribe("orders")
    assert taken.value.field == "consumer"
    await engine.tick()
    assert sorted(set(names)) == [
        ("first", "default"),
        ("fourth", "default-4"),
        ("second", "default-2"),
        ("third", "default-3"),
    ]
    assert len(names) == 8  # each of the four got both events


async def test_hooks_fire_in_the_documented_order(world: World) -> None:
    seed(world, 2)
    seen: list[str] = []

    class Hooks:
        def __getattr__(self, name: str) -> Any:
            if not name.startswith("on_"):
                raise AttributeError(name)
            return lambda details: seen.append(name)

    class Broken:
        def on_fetch(self, details: Any) -> None:
            raise RuntimeError("a broken hook never breaks the engine")

    engine = world.engine(orders(), hooks=[Hooks(), Broken()])
    engine.on("orders", Recorder())
    await engine.tick()
    assert seen == [
        "on_lease_acquired",
        "on_poll_start",
        "on_fetch",
        "on_commit",
        "on_event",
        "on_event",
        "on_delivered",
        "on_delivered",
        "on_schedule_change",
        "on_poll_end",
    ]


async def test_async_generator_and_plain_fetch_functions(world: World) -> None:
    seed(world, 5)

    async def generator(ctx: Any) -> Any:
        yield {"items": world.api.list_page(1, 3).data, "has_more": True}
        yield {"items": world.api.list_page(2, 3).data}

    def plain(ctx: Any) -> Any:
        return world.api.list_page(ctx.page, 5).data

    engine = world.engine(
        wk.define_poller(
            name="gen", identity=lambda o: o["id"], cursor=wk.SnapshotDiff(), fetch=generator
        ),
        wk.define_poller(
            name="plain", identity=lambda o: o["id"], cursor=wk.SnapshotDiff(), fetch=plain
        ),
    )
    gen, flat = Recorder(), Recorder()
    engine.on("gen", gen)
    engine.on("plain", flat)
    await engine.tick()
    assert len(gen.events) == 5
    assert len(flat.events) == 5


async def test_fetch_failures_back_off_then_open_the_circuit_and_a_probe_closes_it(
    world: World,
) -> None:
    seed(world, 1)
    poller = orders(schedule=wk.Schedule(min="10s", max="1m"), circuit=wk.Circuit(failures=5))
    closed: list[Any] = []

    class Hooks:
        def on_circuit_close(self, details: Any) -> None:
            closed.append(details)

    engine = world.engine(poller, hooks=Hooks())
    recorder = Recorder()
    engine.on("orders", recorder)
    world.api.fail_next(500, times=5)
    for attempt in range(1, 6):
        result = await engine.tick()
        assert result.polled[0].error is not None
        report = (await engine.inspect())["pollers"][0]["schedule"]
        assert report["consecutive_failures"] == attempt
        await world.clock.advance_to(report["next_due_at"])
    assert report["circuit"] == "open"
    assert report["next_due_at"] == report["circuit_opened_at"] + 60_000
    result = await engine.tick()  # the half-open probe succeeds
    assert result.polled[0].error is None
    report = (await engine.inspect())["pollers"][0]["schedule"]
    assert report["circuit"] == "closed"
    assert report["consecutive_failures"] == 0
    assert len(closed) == 1
    assert len(recorder.events) == 1


async def test_a_429_sleeps_exactly_retry_after_and_leaves_the_circuit_closed(world: World) -> None:
    seed(world, 1)
    engine = world.engine(orders(circuit=wk.Circuit(failures=1)))
    engine.on("orders", Recorder())
    world.api.fail_next(429, retry_after=7)
    result = await engine.tick()
    assert result.polled[0].error is not None
    schedule = (await engine.inspect())["pollers"][0]["schedule"]
    assert schedule["circuit"] == "closed"
    assert schedule["consecutive_failures"] == 0
    assert schedule["throttled_until"] == world.clock.now() + 7_000
    assert schedule["next_due_at"] == world.clock.now() + 7_000


async def test_trigger_pause_and_resume(world: World) -> None:
    seed(world, 1)
    engine = world.engine(orders())
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    world.api.add(item(2, T))
    assert (await engine.tick()).polled == []  # not due yet
    await engine.trigger("orders")
    assert len((await engine.tick()).polled) == 1
    assert len(recorder.events) == 2

    await engine.pause("orders")
    await world.clock.advance("1h")
    paused = await engine.tick()
    assert (paused.polled, paused.skipped_not_due) == ([], 1)
    await engine.resume("orders")
    assert len((await engine.tick()).polled) == 1


async def test_the_daemon_wakes_exactly_when_a_retry_is_due(world: World) -> None:
    seed(world, 1)
    engine = world.engine(orders(schedule=wk.Schedule(min="5m", max="10m")))
    failures = [True]
    recorder = Recorder(fail=lambda event: failures.pop() if failures else False)
    engine.on("orders", recorder)
    await engine.start()
    try:
        await world.clock.advance("1ms")
        retry_at = (await engine.inspect())["pollers"][0]["schedule"]["next_retry_at"]
        assert recorder.events == []
        assert retry_at is not None
        assert retry_at - world.clock.now() <= 1_000
        await world.clock.advance_to(retry_at - 1)
        assert recorder.events == []
        await world.clock.advance_to(retry_at)
        assert len(recorder.events) == 1
    finally:
        await engine.stop()
    assert world.clock.pending_timers() == 0


async def test_config_errors_name_the_field() -> None:
    with pytest.raises(wk.ConfigError) as caught:
        wk.define_poller(name="bad name", identity=str, cursor=wk.SnapshotDiff(), fetch=print)
    assert caught.value.field == "name"
    with pytest.raises(wk.ConfigError) as caught:
        wk.define_poller(
            name="x",
            identity=str,
            cursor=wk.SnapshotDiff(),
            fetch=print,
            schedule=wk.Schedule(min="soon"),
        )
    assert "schedule.min" in str(caught.value)
    assert "'soon'" in str(caught.value)
    with pytest.raises(wk.ConfigError) as caught:
        wk.define_poller(
            name="x",
            identity=str,
            cursor=wk.SnapshotDiff(),
            fetch=print,
            reconcile=wk.Reconcile(every="1h", fetch=print),
        )
    assert caught.value.field == "reconcile"
    poller = wk.define_poller(
        name="x", identity=str, cursor=wk.SnapshotDiff(), fetch=print, budget="erp"
    )
    with pytest.raises(wk.ConfigError) as caught:
        wk.Engine(store=wk.MemoryStore(), pollers=[poller])
    assert caught.value.field == "budgets"


async def test_the_event_log_keeps_only_its_retention(world: World) -> None:
    seed(world, 3)
    engine = world.engine(orders(log=wk.EventLog(retention="1h")))
    engine.on("orders", Recorder())
    await engine.tick()
    key = PKey("orders")
    assert len(await world.store.read_log(key)) == 3
    await world.clock.advance("2h")
    await engine.trigger("orders")
    await engine.tick()
    assert await world.store.read_log(key) == []
    assert (await engine.replay("orders", from_=0)).replayed == 0


async def test_a_failing_partitions_function_does_not_stop_the_daemon(world: World) -> None:
    world.api.tenant("a").add(item(1, T))
    calls = {"n": 0}

    def partitions() -> list[str]:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise RuntimeError("tenant directory unavailable")
        return ["a"]

    poller = orders(partitions=partitions, partitions_refresh="10s")
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.start()
    try:
        for _ in range(5):
            await world.clock.advance("15s")
        assert [e.subject for e in recorder.events] == ["item-001"]
    finally:
        await engine.stop()


class AckLog:
    """Delegates to a store and writes every ack_events call into ``log``."""

    def __init__(self, store: Any, log: list[tuple[str, tuple[str, ...]]]) -> None:
        self._store = store
        self._log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def ack_events(self, key: PKey, lease: Any, event_ids: Any) -> None:
        await self._store.ack_events(key, lease, event_ids)
        self._log.append(("ack", tuple(event_ids)))


@pytest.mark.parametrize("constant_key", [True, False])
async def test_a_constant_ordering_key_acks_each_event_before_the_next(
    world: World, constant_key: bool
) -> None:
    seed(world, 5)
    log: list[tuple[str, tuple[str, ...]]] = []
    world.store = AckLog(world.store, log)
    delivery = wk.Delivery(ordering_key=lambda event: "all") if constant_key else wk.Delivery()
    engine = world.engine(orders(delivery=delivery))

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        log.append(("handle", (event.id,)))

    engine.on("orders", handler)
    await engine.tick()
    handled = [ids[0] for kind, ids in log if kind == "handle"]
    assert len(handled) == 5
    if constant_key:
        # handle e1, ack e1, handle e2, ack e2, ...: a crash can only repeat the last one.
        assert log == [entry for eid in handled for entry in (("handle", (eid,)), ("ack", (eid,)))]
    else:
        # The default key with concurrency=1: acks are written behind the handler.
        assert log[:5] == [("handle", (eid,)) for eid in handled]
        assert [eid for kind, ids in log if kind == "ack" for eid in ids] == handled
    assert await world.store.count_pending(PKey("orders")) == 0


async def test_on_delivered_reports_how_long_the_handler_took(world: World) -> None:
    seed(world, 2)
    durations: list[int] = []

    class Timings:
        def on_delivered(self, details: Any) -> None:
            durations.append(details.duration_ms)

    engine = world.engine(orders(), hooks=[Timings()])

    async def handler(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        await world.clock.advance_ms(250)

    engine.on("orders", handler)
    await engine.tick()
    assert durations == [250, 250]
