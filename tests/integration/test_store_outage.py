"""A store that fails or stops answering, on a virtual clock: bounded passes, backoff, hooks."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.integrations import HealthCheck
from watukuy.model.rows import PKey, PollerState
from watukuy.testing import SeededRandom, VirtualClock


class Outage(wk.MemoryStore):
    """A MemoryStore that can fail every state read, or never answer one."""

    def __init__(self) -> None:
        super().__init__()
        self.mode: str | None = None
        self.reads = 0

    async def load_state(self, key: PKey) -> PollerState | None:
        self.reads += 1
        if self.mode == "fail":
            raise wk.StoreError("load_state: connection refused")
        if self.mode == "hang":
            await asyncio.Event().wait()
        return await super().load_state(key)


def vendor(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"data": [{"id": "a", "v": 1}], "has_more": False})


async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    response = await ctx.http.get("https://vendor.test/items")
    return wk.Page(items=response.json()["data"])


class Errors:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def on_error(self, details: Any) -> None:
        self.seen.append((details.error["name"], details.error["message"]))


def engine_on(store: wk.StateStore, clock: VirtualClock, hooks: Any = None) -> wk.Engine:
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=wk.Schedule(min="1s", max="1s", adaptive=False, jitter=0),
    )
    return wk.Engine(
        store=store,
        pollers=[poller],
        clock=clock,
        random=SeededRandom(1),
        hooks=hooks,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(vendor)),
    )


async def test_tick_returns_by_its_deadline_when_the_store_never_answers() -> None:
    clock, store = VirtualClock(), Outage()
    engine = engine_on(store, clock)
    await engine.tick()
    await clock.advance("1s")
    store.mode = "hang"
    started = clock.now()
    tick = asyncio.ensure_future(engine.tick(max_duration="5s"))
    await clock.advance("6999ms")
    assert not tick.done()
    await clock.advance("1ms")  # the deadline plus the 2 s grace
    assert tick.done()
    result = await tick
    assert result.timed_out
    assert clock.now() - started == 7_000


class Hang(wk.MemoryStore):
    """A MemoryStore whose ``hang`` method never answers once ``frozen``."""

    def __init__(self, hang: str) -> None:
        super().__init__()
        self.hang = hang
        self.frozen = False

    async def _maybe_hang(self, name: str) -> None:
        if self.frozen and name == self.hang:
            await asyncio.Event().wait()

    async def load_state(self, key: PKey) -> PollerState | None:
        await self._maybe_hang("load_state")
        return await super().load_state(key)

    async def commit_poll(self, key: PKey, lease: Any, batch: Any) -> None:
        await self._maybe_hang("commit_poll")
        await super().commit_poll(key, lease, batch)

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        await self._maybe_hang("due_keys")
        return await super().due_keys(poller, until, limit)


async def late_tick(engine: wk.Engine, clock: VirtualClock) -> wk.TickResult:
    tick = asyncio.ensure_future(engine.tick(max_duration="5s"))
    await clock.advance("7s")  # the deadline plus the 2 s grace
    assert tick.done()
    return await tick


@pytest.mark.parametrize(
    ("hang", "what", "waited_for", "phase"),
    [
        ("load_state", "orders", "the store (Hang.load_state)", "commit"),
        ("commit_poll", "orders", "the store (Hang.commit_poll)", "commit"),
        # Before any run: the pass asks the due index which keys to visit.
        (
            "due_keys",
            "the pass (choosing the keys of orders)",
            "the store (Hang.due_keys)",
            "commit",
        ),
    ],
)
async def test_a_tick_cut_short_by_a_frozen_store_says_which_call_and_reports_it(
    hang: str, what: str, waited_for: str, phase: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock, store = VirtualClock(), Hang(hang)
    failures: list[Any] = []

    class Hooks:
        def on_error(self, details: Any) -> None:
            failures.append(details)

    engine = engine_on(store, clock, Hooks())
    await engine.tick()
    await clock.advance("1s")
    store.frozen = True
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        result = await late_tick(engine, clock)
    assert result.timed_out
    message = (
        f"tick(): {what} was still waiting for {waited_for} 2000 ms after max_duration; "
        "the run was cancelled"
    )
    [failed] = result.errors
    assert failed.error is not None
    assert (failed.poller, failed.partition, failed.lane) == ("orders", "", "live")
    assert (failed.error["name"], failed.error["message"]) == ("StoreError", message)
    assert [(d.poller, d.phase, d.error["message"]) for d in failures] == [
        ("orders", phase, message)
    ]
    [warning] = [m for m in caplog.messages if m.startswith("tick(): still waiting")]
    assert f"{what} waited for {waited_for}" in warning
    assert "the store or the API" not in warning


async def test_a_tick_cut_short_by_a_frozen_api_says_so() -> None:
    clock = VirtualClock()
    answered = asyncio.Event()

    async def frozen_fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        await answered.wait()
        return wk.Page(items=[])

    poller = wk.define_poller(
        name="orders", identity=lambda o: o["id"], cursor=wk.SnapshotDiff(), fetch=frozen_fetch
    )
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[poller], clock=clock)
    result = await late_tick(engine, clock)
    [failed] = result.errors
    assert failed.error is not None
    assert failed.error["name"] == "TimeoutError"
    assert failed.error["message"] == (
        "tick(): orders was still waiting for the API (fetch of page 1) 2000 ms after "
        "max_duration; the run was cancelled"
    )


async def test_a_failing_store_reaches_on_error_and_a_warning_and_the_key_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, store, hooks = VirtualClock(), Outage(), Errors()
    engine = engine_on(store, clock, hooks)
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        async with engine:
            await clock.advance("1s")
            store.mode = "fail"
            await clock.advance("60s")
            store.mode = None
    failures = [r.getMessage() for r in caplog.records if "run of orders failed" in r.getMessage()]
    # 1 s, 2 s, 4 s, ... (half jittered) up to backoff.max: a handful in a minute, not 60.
    assert 3 <= len(failures) <= 8, failures
    assert "connection refused" in failures[0]
    assert "failure 1 in a row" in failures[0]
    assert f"failure {len(failures)} in a row" in failures[-1]
    assert hooks.seen
    assert set(hooks.seen) == {("StoreError", "load_state: connection refused")}


async def test_the_backoff_ends_with_the_outage() -> None:
    clock, store = VirtualClock(), Outage()
    engine = engine_on(store, clock)
    delivered: list[str] = []
    engine.on("orders", lambda event, ctx: delivered.append(event.subject))
    store.mode = "fail"
    failed = await engine.tick()
    assert failed.polled[0].error is not None
    assert failed.polled[0].error["name"] == "StoreError"
    reads = store.reads
    skipped = await engine.tick()  # within the backoff: not run
    assert (skipped.polled, skipped.skipped_not_due, store.reads) == ([], 1, reads)
    store.mode = None
    await clock.advance("2s")
    recovered = await engine.tick()
    assert recovered.errors == []
    assert delivered == ["a"]


async def test_inspect_answers_or_fails_within_its_timeout() -> None:
    clock, store = VirtualClock(), Outage()
    engine = engine_on(store, clock)
    await engine.tick()
    store.mode = "hang"
    inspect = asyncio.ensure_future(engine.inspect(timeout="3s"))
    await clock.advance("3s")
    with pytest.raises(wk.StoreError, match="did not answer within 3000 ms"):
        await inspect


async def test_the_health_check_has_its_own_timeout() -> None:
    clock, store = VirtualClock(), Outage()
    engine = engine_on(store, clock)
    await engine.tick()
    store.mode = "hang"
    check = asyncio.ensure_future(HealthCheck(engine, timeout="2s").check())
    await clock.advance("2s")
    result = await check
    assert [finding.code for finding in result.findings] == ["inspect_failed"]
    assert "did not answer within 2000 ms" in result.findings[0].detail


async def test_a_store_outage_shows_in_traces() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from watukuy.otel import OtelHooks

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock, store = VirtualClock(), Outage()
    hooks = OtelHooks(tracer=provider.get_tracer("test"), clock=clock)
    engine = engine_on(store, clock, hooks)
    store.mode = "fail"
    await engine.tick()
    provider.shutdown()
    [span] = [span for span in exporter.get_finished_spans() if span.name == "watukuy.run"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "load_state: connection refused"
    [event] = span.events
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "StoreError"


async def test_a_tick_cut_short_by_a_handler_names_it() -> None:
    clock = VirtualClock()

    async def fetch_one(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[{"id": "a"}])

    async def on_order(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        await asyncio.Event().wait()

    poller = wk.define_poller(
        name="orders", identity=lambda o: o["id"], cursor=wk.SnapshotDiff(), fetch=fetch_one
    )
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[poller], clock=clock)
    engine.on("orders", on_order)
    result = await late_tick(engine, clock)
    [failed] = result.errors
    assert failed.error is not None
    assert "was still waiting for the handler " in failed.error["message"]
    assert "on_order()" in failed.error["message"]


class FailingIndex(wk.MemoryStore):
    """A MemoryStore whose due index fails while ``failing`` (the daemon's resync reads it)."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.index_calls = 0

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        self.index_calls += 1
        if self.failing:
            raise wk.StoreError("due_keys: connection refused")
        return await super().due_keys(poller, until, limit)


async def test_a_failing_resync_backs_off_and_the_keys_are_still_polled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The daemon's resync reads the due index. When that failed, the loop tried again at
    # once, over and over: thousands of store calls and warnings a second.
    clock, store = VirtualClock(), FailingIndex()
    polls: list[int] = []

    async def counted(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        polls.append(clock.now())
        return wk.Page(items=[])

    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=counted,
        schedule=wk.Schedule(min="5s", max="5s", adaptive=False, jitter=0),
    )
    engine = wk.Engine(store=store, pollers=[poller], clock=clock, resync_every="15s")
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        async with engine:
            await clock.advance("1s")
            store.failing = True
            calls, polled = store.index_calls, len(polls)
            await clock.advance("60s")
            failed_calls = store.index_calls - calls
            store.failing = False
    # 1 s, 2 s, 4 s, 8 s, then every resync interval: a handful, not thousands.
    assert 3 <= failed_calls <= 10, failed_calls
    assert len(polls) - polled >= 10  # every 5 s, resync or not
    warnings = [m for m in caplog.messages if "due_keys: connection refused" in m]
    assert len(warnings) == failed_calls
