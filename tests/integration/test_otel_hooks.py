"""OtelHooks on a real engine: MemoryStore, VirtualClock, FakeApi over ctx.http.

Spans go to the SDK's in-memory exporter and metrics to its in-memory reader; neither is
registered globally, so tests stay independent. The API serves five items in pages of two,
so one cycle is three pages, five ``created`` events and five deliveries.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import watukuy as wk
from watukuy.model.rows import EventCounts, PKey, PollSummary
from watukuy.otel import DURATION_BUCKETS_MS, INSTRUMENT_NAMES, OtelHooks
from watukuy.runtime import hooks as wk_hooks
from watukuy.runtime.hooks import PollEndDetails, PollStartDetails
from watukuy.testing import FakeApi, SeededRandom, VirtualClock, fake_items

from .conftest import Deployed

T0 = 1_767_225_600_000  # the VirtualClock's default start, 2026-01-01T00:00:00Z
MS = 1_000_000  # nanoseconds per millisecond


# --- the in-memory SDK ------------------------------------------------------------------


class Telemetry:
    """An SDK tracer and meter whose output the test can read back."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")
        self.meter = self.meter_provider.get_meter("test")

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    def spans(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.exporter.get_finished_spans() if span.name == name]

    def span(self, name: str) -> ReadableSpan:
        (span,) = self.spans(name)
        return span

    def metrics(self) -> dict[str, Any]:
        data = self.reader.get_metrics_data()
        found: dict[str, Any] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = metric
        return found

    def points(self, name: str, **attributes: Any) -> list[Any]:
        metric = self.metrics().get(name)
        if metric is None:
            return []
        wanted = {f"watukuy.{key.replace('_', '.')}": value for key, value in attributes.items()}
        return [
            point
            for point in metric.data.data_points
            if all(point.attributes.get(key) == value for key, value in wanted.items())
        ]

    def value(self, name: str, **attributes: Any) -> Any:
        """The one data point's value; ``None`` when there is no such point."""
        points = self.points(name, **attributes)
        assert len(points) <= 1, points
        return points[0].value if points else None

    def histogram(self, name: str, **attributes: Any) -> Any:
        (point,) = self.points(name, **attributes)
        return point


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    sdk = Telemetry()
    yield sdk
    sdk.shutdown()


# --- the engine -------------------------------------------------------------------------


def listing(api: FakeApi) -> Callable[[wk.FetchContext[Any]], Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{api.base_url}/items/page", params={"page": ctx.page, "page_size": 2}
        )
        body = response.json()
        return wk.Page(body["data"], has_more=body["has_more"])

    return fetch


@pytest.fixture
async def deploy(telemetry: Telemetry) -> AsyncIterator[Callable[..., Deployed]]:
    clients: list[httpx.AsyncClient] = []

    def make(
        *,
        handler: Callable[[wk.Event[Any], wk.HandlerContext], Any] | None = None,
        fetch: Callable[[FakeApi], Callable[[wk.FetchContext[Any]], Any]] = listing,
        record_event_ids: bool = False,
        **poller: Any,
    ) -> Deployed:
        clock = VirtualClock()
        api = FakeApi(clock, items=fake_items(5))
        http = httpx.AsyncClient(transport=api.transport())
        clients.append(http)
        poller.setdefault("cursor", wk.SnapshotDiff())
        orders = wk.define_poller(
            name="orders", fetch=fetch(api), identity=lambda item: item["id"], **poller
        )
        hooks = OtelHooks(
            tracer=telemetry.tracer,
            meter=telemetry.meter,
            attributes={"service.name": "erp-sync"},
            record_event_ids=record_event_ids,
            clock=clock,
        )
        engine = wk.Engine(
            store=wk.MemoryStore(),
            pollers=[orders],
            clock=clock,
            random=SeededRandom(7),
            hooks=hooks,
            http_client=http,
            instance_id="i-1",
        )
        deployed = Deployed(clock=clock, api=api, engine=engine, hooks=hooks)

        def record(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
            deployed.delivered.append(event)

        engine.on("orders", handler or record)
        return deployed

    yield make
    for client in clients:
        await client.aclose()


KEY = {"watukuy.poller": "orders", "watukuy.partition": "", "watukuy.lane": "live"}


# --- spans ------------------------------------------------------------------------------


async def test_a_cycle_is_a_poll_span_with_fetch_commit_and_deliver_children(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy()

    result = await deployed.tick()

    assert [(r.items, r.events, r.delivered, r.error) for r in result.polled] == [(5, 5, 5, None)]
    poll = telemetry.span("watukuy.poll")
    assert dict(poll.attributes or {}) == {
        "service.name": "erp-sync",
        **KEY,
        "watukuy.instance_id": "i-1",
        "watukuy.pages": 3,
        "watukuy.items": 5,
        "watukuy.events.created": 5,
        "watukuy.events.updated": 0,
        "watukuy.events.deleted": 0,
        "watukuy.not_modified": False,
        "watukuy.truncated": False,
    }
    assert poll.status.status_code is StatusCode.UNSET
    assert poll.parent is None
    poll_id = poll.context.span_id

    fetches = telemetry.spans("watukuy.fetch")
    assert [(s.attributes or {}).get("watukuy.page") for s in fetches] == [1, 2, 3]
    assert [(s.attributes or {}).get("watukuy.items") for s in fetches] == [2, 2, 1]
    assert {(s.attributes or {}).get("watukuy.not_modified") for s in fetches} == {False}
    commits = telemetry.spans("watukuy.commit")
    assert [
        tuple((s.attributes or {}).get(f"watukuy.{n}") for n in ("events", "upserts", "deletes"))
        for s in commits
    ] == [(2, 2, 0), (2, 2, 0), (1, 1, 0)]
    delivers = telemetry.spans("watukuy.deliver")
    assert len(delivers) == 5
    assert {(s.attributes or {}).get("watukuy.event.type") for s in delivers} == {"created"}
    assert {(s.attributes or {}).get("watukuy.attempt") for s in delivers} == {1}
    assert all("watukuy.event.id" not in (s.attributes or {}) for s in delivers)
    for child in fetches + commits + delivers:
        assert child.parent is not None
        assert child.parent.span_id == poll_id
        assert child.context.trace_id == poll.context.trace_id
        assert (child.attributes or {}).get("watukuy.instance_id") == "i-1"
        assert (child.attributes or {}).get("service.name") == "erp-sync"


async def test_span_times_come_from_the_engine_clock(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy()
    deployed.api.set_latency("120ms")

    await deployed.tick()

    poll = telemetry.span("watukuy.poll")
    assert poll.start_time == T0 * MS
    assert poll.end_time == (T0 + 360) * MS
    fetches = telemetry.spans("watukuy.fetch")
    assert [(s.start_time, s.end_time) for s in fetches] == [
        ((T0 + 120 * i) * MS, (T0 + 120 * (i + 1)) * MS) for i in range(3)
    ]


async def test_deliver_spans_carry_event_ids_only_when_asked(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy(record_event_ids=True)

    await deployed.tick()

    ids = [(s.attributes or {}).get("watukuy.event.id") for s in telemetry.spans("watukuy.deliver")]
    assert ids == [event.id for event in deployed.delivered]
    assert len(set(ids)) == 5


async def test_a_failing_fetch_marks_the_poll_span_as_error(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy()
    deployed.api.fail_next(500)

    result = await deployed.tick()

    (polled,) = result.polled
    assert polled.error is not None
    poll = telemetry.span("watukuy.poll")
    assert poll.status.status_code is StatusCode.ERROR
    assert poll.status.description == polled.error["message"]
    assert "responded 500" in (poll.status.description or "")
    (event,) = poll.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "HttpError"
    assert (event.attributes or {})["watukuy.error.code"] == "HTTP"
    assert (event.attributes or {})["watukuy.phase"] == "fetch"
    assert "Traceback" in str((event.attributes or {})["exception.stacktrace"])
    assert dict(poll.attributes or {})["watukuy.pages"] == 0
    assert telemetry.spans("watukuy.fetch") == []
    assert telemetry.value("watukuy.errors", phase="fetch") == 1
    assert telemetry.histogram("watukuy.poll.duration", outcome="error").count == 1
    assert telemetry.points("watukuy.poll.duration", outcome="ok") == []
    assert telemetry.points("watukuy.items.fetched") == []


async def test_a_handler_failure_does_not_fail_the_poll_span(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    def flaky(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        raise RuntimeError("downstream is down")

    deployed = deploy(handler=flaky)

    await deployed.tick()

    assert telemetry.span("watukuy.poll").status.status_code is StatusCode.UNSET
    assert telemetry.spans("watukuy.deliver") == []
    assert telemetry.value("watukuy.events.retried", **_key()) == 5
    assert telemetry.histogram("watukuy.poll.duration", outcome="ok").count == 1


async def test_a_lost_lease_ends_the_poll_span_with_error(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed: Deployed

    def stealing(api: FakeApi) -> Callable[[wk.FetchContext[Any]], Any]:
        inner = listing(api)

        async def fetch(ctx: wk.FetchContext[Any]) -> Any:
            if ctx.page == 2:
                # Another instance takes the key over, as if this one had paused too long.
                store = deployed.engine.store
                now = deployed.clock.now() + 3_600_000
                assert await store.acquire_lease(PKey("orders"), "thief", 30_000, now)
            return await inner(ctx)

        return fetch

    deployed = deploy(fetch=stealing)

    result = await deployed.tick()

    assert result.polled == []
    poll = telemetry.span("watukuy.poll")
    assert poll.status.status_code is StatusCode.ERROR
    assert poll.status.description == "lease lost"
    assert poll.end_time == T0 * MS
    assert [(s.attributes or {}).get("watukuy.page") for s in telemetry.spans("watukuy.fetch")] == [
        1,
        2,
    ]
    assert telemetry.value("watukuy.lease.lost", **_key()) == 1


# --- metrics ----------------------------------------------------------------------------


def _key(**extra: Any) -> dict[str, Any]:
    return {"poller": "orders", "partition": "", "lane": "live", **extra}


async def test_metrics_count_what_a_tick_did(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy(deletes=wk.Deletes(confirm_passes=1))  # a delete on its first miss

    await deployed.tick()

    assert telemetry.value("watukuy.items.fetched", **_key()) == 5
    assert telemetry.value("watukuy.events.emitted", **_key(event_type="created")) == 5
    assert telemetry.value("watukuy.events.delivered", **_key()) == 5
    deliver = telemetry.histogram("watukuy.deliver.duration", **_key())
    assert (deliver.count, deliver.sum) == (5, 0)
    poll = telemetry.histogram("watukuy.poll.duration", **_key(outcome="ok"))
    assert (poll.count, poll.sum) == (1, 0)
    assert tuple(poll.explicit_bounds) == DURATION_BUCKETS_MS
    assert dict(poll.attributes) == {
        "service.name": "erp-sync",
        **KEY,
        "watukuy.outcome": "ok",
    }
    assert telemetry.value("watukuy.circuit.state", poller="orders") == 0
    assert telemetry.value("watukuy.schedule.interval", poller="orders") == 30_000
    (interval,) = telemetry.points("watukuy.schedule.interval")
    assert dict(interval.attributes) == {
        "service.name": "erp-sync",
        "watukuy.poller": "orders",
        "watukuy.partition": "",
    }

    deployed.api.update("item-002", status="cancelled")
    deployed.api.remove("item-005")
    deployed.api.add({"id": "item-006", "name": "Item 6", "status": "pending", "total": 600})
    await deployed.poll_now()

    assert telemetry.value("watukuy.items.fetched", **_key()) == 10
    assert telemetry.value("watukuy.events.emitted", **_key(event_type="created")) == 6
    assert telemetry.value("watukuy.events.emitted", **_key(event_type="updated")) == 1
    assert telemetry.value("watukuy.events.emitted", **_key(event_type="deleted")) == 1
    assert telemetry.value("watukuy.events.delivered", **_key()) == 8
    assert telemetry.histogram("watukuy.poll.duration", **_key(outcome="ok")).count == 2
    assert telemetry.value("watukuy.schedule.interval", poller="orders") == 30_000
    second = telemetry.spans("watukuy.poll")[1]
    assert (second.attributes or {})["watukuy.events.updated"] == 1
    assert (second.attributes or {})["watukuy.events.deleted"] == 1
    assert telemetry.points("watukuy.errors") == []


async def test_every_instrument_has_a_unit_and_a_description(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy()
    deployed.hooks.on_retry(_retry_details())
    retry = _retry_details()
    deployed.hooks.on_filtered(wk_hooks.FilteredDetails(**_context(), event=retry.event, attempt=1))
    deployed.hooks.on_budget_wait(
        wk_hooks.BudgetWaitDetails(**_context(), budget="erp", wait_ms=40)
    )
    deployed.hooks.on_circuit_open(
        wk_hooks.CircuitOpenDetails(**_context(), failures=5, probe_at=T0)
    )
    deployed.hooks.on_lease_lost(wk_hooks.LeaseLostDetails(**_context(), epoch=1))
    deployed.api.fail_next(500)
    await deployed.tick()
    await deployed.poll_now()
    deployed.hooks.on_invalid(wk_hooks.InvalidDetails(**_context(), item={}, issues=[]))
    deployed.hooks.on_late_arrivals(
        wk_hooks.LateArrivalsDetails(
            **_context(), lateness_ms=(4_100, 300), missed=1, window_ms=10_000
        )
    )

    metrics = telemetry.metrics()

    assert sorted(metrics) == sorted(INSTRUMENT_NAMES)
    for name in INSTRUMENT_NAMES:
        assert metrics[name].unit, name
        assert metrics[name].description, name
    assert metrics["watukuy.poll.duration"].unit == "ms"
    assert metrics["watukuy.schedule.interval"].unit == "ms"
    wait = telemetry.histogram("watukuy.budget.wait", budget="erp")
    assert (wait.count, wait.sum) == (1, 40)
    assert telemetry.value("watukuy.budget.waits", budget="erp") == 1
    assert telemetry.value("watukuy.events.filtered", **_key(event_type="created")) == 1
    assert telemetry.value("watukuy.late.arrivals", **_key()) == 2
    lateness = telemetry.histogram("watukuy.late.lateness", **_key())
    assert (lateness.count, lateness.sum) == (2, 4_400)
    assert telemetry.value("watukuy.late.missed", **_key()) == 1


def keyset(api: FakeApi) -> Callable[[wk.FetchContext[Any]], Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        cursor = ctx.cursor
        response = await ctx.http.get(
            f"{api.base_url}/items",
            params={"since": cursor.value, "after_id": cursor.tie_break, "limit": 10},
        )
        body = response.json()
        return wk.Page(body["data"], has_more=body["has_more"])

    return fetch


async def test_late_arrivals_are_counted_with_how_late_they_were(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy(fetch=keyset, cursor=wk.TimestampCursor(field="updated_at", tie_break="id"))
    await deployed.clock.advance("10s")
    await deployed.tick()  # the five items, the last one stamped T0 + 4 s
    # A row stamped 1.5 s before the watermark, committed only now.
    deployed.api.add({"id": "item-late", "updated_at": "2026-01-01T00:00:02.500Z"})
    await deployed.poll_now()
    assert [e.subject for e in deployed.delivered][-1] == "item-late"
    assert telemetry.value("watukuy.late.arrivals", **_key()) == 1
    lateness = telemetry.histogram("watukuy.late.lateness", **_key())
    assert (lateness.count, lateness.sum) == (1, 1_500)
    assert telemetry.points("watukuy.late.missed") == []


async def test_parked_and_retried_events_are_counted_by_kind(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    def refuse_item_2(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.subject == "item-002":
            raise RuntimeError("cannot ship item 2")

    def schema(raw: Any) -> Any:
        if raw["id"] == "item-004":
            raise ValueError("item 4 is malformed")
        return raw

    deployed = deploy(
        handler=refuse_item_2,
        schema=schema,
        delivery=wk.Delivery(retry=wk.Retry(attempts=2)),
    )

    await deployed.tick()

    assert telemetry.value("watukuy.events.retried", **_key()) == 1
    assert telemetry.value("watukuy.events.delivered", **_key()) == 3
    assert telemetry.value("watukuy.items.invalid", **_key()) == 1
    assert telemetry.value("watukuy.events.parked", **_key(kind="invalid")) == 1
    assert telemetry.value("watukuy.events.parked", **_key(kind="poison")) is None

    # Past the retry delay, before the next poll: only the retry runs.
    await deployed.clock.advance("5s")
    result = await deployed.tick()

    assert result.polled == []
    assert telemetry.value("watukuy.events.retried", **_key()) == 1
    assert telemetry.value("watukuy.events.parked", **_key(kind="poison")) == 1
    assert telemetry.value("watukuy.events.parked", **_key(kind="invalid")) == 1
    assert [row.kind for row in await deployed.engine.parked.list("orders")] == [
        "invalid",
        "poison",
    ]


async def test_a_named_consumer_has_series_and_spans_of_its_own(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    deployed = deploy()  # the "default" consumer records every event

    def audit(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.subject == "item-003" and ctx.attempt == 1:
            raise RuntimeError("the audit log is busy")

    deployed.engine.on("orders", audit, consumer="audit")
    await deployed.tick()

    by_consumer = {
        point.attributes.get("watukuy.consumer"): point.value
        for point in telemetry.points("watukuy.events.delivered", **_key())
    }
    assert by_consumer == {None: 5, "audit": 4}  # the default one's series has no consumer
    assert telemetry.value("watukuy.events.retried", **_key(consumer="audit")) == 1
    retried = telemetry.points("watukuy.events.retried", **_key())
    assert [p.attributes.get("watukuy.consumer") for p in retried] == ["audit"]
    consumers = sorted(
        str(span.attributes.get("watukuy.consumer")) for span in telemetry.spans("watukuy.deliver")
    )
    assert consumers == ["None"] * 5 + ["audit"] * 4


async def test_the_circuit_gauge_follows_open_probe_and_close(
    deploy: Callable[..., Deployed], telemetry: Telemetry
) -> None:
    seen_during_fetch: list[Any] = []

    def observing(api: FakeApi) -> Callable[[wk.FetchContext[Any]], Any]:
        inner = listing(api)

        async def fetch(ctx: wk.FetchContext[Any]) -> Any:
            if ctx.page == 1:
                seen_during_fetch.append(telemetry.value("watukuy.circuit.state", poller="orders"))
            return await inner(ctx)

        return fetch

    deployed = deploy(fetch=observing, circuit=wk.Circuit(failures=2, probe_every="1m"))

    await deployed.tick()
    assert telemetry.value("watukuy.circuit.state", poller="orders") == 0

    deployed.api.fail_next(500, times=3)
    await deployed.poll_now()  # failure 1: backoff, still closed
    assert telemetry.value("watukuy.circuit.state", poller="orders") == 0
    assert telemetry.value("watukuy.circuit.opened", **_key()) is None
    await deployed.poll_now()  # failure 2: the circuit opens
    assert telemetry.value("watukuy.circuit.state", poller="orders") == 2
    assert telemetry.value("watukuy.circuit.opened", **_key()) == 1
    assert (await deployed.engine.inspect())["pollers"][0]["schedule"]["circuit"] == "open"

    await deployed.poll_now()  # the probe fails: open again, without a new opening
    assert telemetry.value("watukuy.circuit.state", poller="orders") == 2
    assert telemetry.value("watukuy.circuit.opened", **_key()) == 1

    await deployed.poll_now()  # the probe succeeds
    assert telemetry.value("watukuy.circuit.state", poller="orders") == 0
    assert telemetry.value("watukuy.errors", **_key(phase="fetch")) == 3
    # Inside each probe the gauge read half-open.
    assert seen_during_fetch == [None, 0, 0, 1, 1]


async def test_gauges_report_each_partition_without_a_lane(telemetry: Telemetry) -> None:
    clock = VirtualClock()
    api = FakeApi(clock, tenants={"acme": fake_items(3), "beta": fake_items(1)})
    hooks = OtelHooks(tracer=telemetry.tracer, meter=telemetry.meter, clock=clock)

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        if ctx.partition.key == "beta":
            raise RuntimeError("beta is down")
        return wk.Page(api.tenant(ctx.partition.key).list_all(), has_more=False)

    orders = wk.define_poller(
        name="orders",
        fetch=fetch,
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        partitions=lambda: ["acme", "beta"],
        circuit=wk.Circuit(failures=1),
        schedule=wk.Schedule(min="10s", max="2m"),
    )
    engine = wk.Engine(
        store=wk.MemoryStore(), pollers=[orders], clock=clock, random=SeededRandom(1), hooks=hooks
    )
    engine.on("orders", lambda event, ctx: None)

    await engine.tick()

    states = {
        p.attributes["watukuy.partition"]: p.value
        for p in telemetry.points("watukuy.circuit.state")
    }
    assert states == {"acme": 0, "beta": 2}
    intervals = {
        p.attributes["watukuy.partition"]: p.value
        for p in telemetry.points("watukuy.schedule.interval")
    }
    assert intervals == {"acme": 10_000, "beta": 10_000}
    for point in telemetry.points("watukuy.circuit.state"):
        assert "watukuy.lane" not in point.attributes
    assert telemetry.value("watukuy.errors", partition="beta", phase="fetch") == 1
    assert telemetry.value("watukuy.circuit.opened", partition="beta") == 1
    assert telemetry.value("watukuy.circuit.opened", partition="acme") is None


# --- behaviour at the edges ---------------------------------------------------------------


def _context(lane: str = "live", partition: str = "") -> dict[str, Any]:
    return {"poller": "orders", "partition": partition, "lane": lane, "instance_id": "i-1"}


def _retry_details() -> Any:
    event: wk.Event[Any] = wk.Event(
        id="e1",
        type="created",
        source="urn:watukuy:orders",
        subject="o1",
        time="2026-01-01T00:00:00.000Z",
        poller="orders",
        partition="",
        lane="live",
        sequence=1,
    )
    return wk_hooks.RetryDetails(
        **_context(),
        event=event,
        attempt=1,
        error={"name": "RuntimeError", "message": "x"},
        delay_ms=1_000,
    )


def _summary(lane: str, started_at: int, duration_ms: int, items: int) -> PollSummary:
    return PollSummary(
        lane=lane,
        started_at=started_at,
        duration_ms=duration_ms,
        pages=1,
        items=items,
        events=EventCounts(),
    )


def test_a_poll_left_open_is_ended_when_its_lane_starts_again(telemetry: Telemetry) -> None:
    hooks = OtelHooks(tracer=telemetry.tracer, meter=telemetry.meter, clock=VirtualClock())

    hooks.on_poll_start(PollStartDetails(**_context(), started_at=T0))
    hooks.on_poll_start(PollStartDetails(**_context("backfill"), started_at=T0 + 1))
    hooks.on_poll_start(PollStartDetails(**_context(), started_at=T0 + 500))

    (stale,) = telemetry.spans("watukuy.poll")
    assert stale.status.status_code is StatusCode.ERROR
    assert stale.status.description == "superseded by a new cycle"
    assert (stale.start_time, stale.end_time) == (T0 * MS, (T0 + 500) * MS)

    hooks.on_poll_end(
        PollEndDetails(**_context("backfill"), summary=_summary("backfill", T0 + 1, 9, 3))
    )
    hooks.on_poll_end(PollEndDetails(**_context(), summary=_summary("live", T0 + 500, 20, 7)))

    ended = {
        ((s.attributes or {})["watukuy.lane"], (s.attributes or {}).get("watukuy.items")): (
            s.status.status_code,
            s.end_time,
        )
        for s in telemetry.spans("watukuy.poll")
    }
    assert ended == {
        ("live", None): (StatusCode.ERROR, (T0 + 500) * MS),
        ("backfill", 3): (StatusCode.UNSET, (T0 + 10) * MS),
        ("live", 7): (StatusCode.UNSET, (T0 + 520) * MS),
    }


def test_a_poll_end_without_a_start_only_records_the_duration(telemetry: Telemetry) -> None:
    hooks = OtelHooks(tracer=telemetry.tracer, meter=telemetry.meter)

    hooks.on_poll_end(PollEndDetails(**_context(), summary=_summary("live", T0, 40, 1)))

    assert telemetry.exporter.get_finished_spans() == ()
    point = telemetry.histogram("watukuy.poll.duration", outcome="ok")
    assert (point.count, point.sum) == (1, 40)


class _ExplodingTracer:
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exporter exploded")


async def test_a_broken_tracer_never_disturbs_the_engine(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock()
    api = FakeApi(clock, items=fake_items(5))
    hooks = OtelHooks(tracer=_ExplodingTracer(), meter=telemetry.meter, clock=clock)
    delivered: list[str] = []
    async with httpx.AsyncClient(transport=api.transport()) as http:
        orders = wk.define_poller(
            name="orders",
            fetch=listing(api),
            identity=lambda item: item["id"],
            cursor=wk.SnapshotDiff(),
        )
        engine = wk.Engine(
            store=wk.MemoryStore(),
            pollers=[orders],
            clock=clock,
            random=SeededRandom(1),
            hooks=hooks,
            http_client=http,
        )
        engine.on("orders", lambda event, ctx: delivered.append(event.subject))
        with caplog.at_level(logging.DEBUG, logger="watukuy.otel"):
            result = await engine.tick()

    assert result.polled[0].error is None
    assert len(delivered) == 5
    # The metrics of the hooks whose spans failed still arrive.
    assert telemetry.value("watukuy.items.fetched", **_key()) == 5
    assert telemetry.value("watukuy.events.delivered", **_key()) == 5
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(r.getMessage().split(" failed")[0] for r in warnings) == [
        "OtelHooks.on_commit",
        "OtelHooks.on_delivered",
        "OtelHooks.on_fetch",
        "OtelHooks.on_poll_start",
    ]
    assert all("exporter exploded" in r.getMessage() for r in warnings)
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 2 + 2 + 4


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(wk.ConfigError, match=r"attributes\.team: .*got \[1\]"):
        OtelHooks(attributes={"team": [1]})
    with pytest.raises(wk.ConfigError, match=r"attributes: .*got 'x'"):
        OtelHooks(attributes="x")
    with pytest.raises(wk.ConfigError, match=r"record_event_ids: expected a bool, got 'yes'"):
        OtelHooks(record_event_ids="yes")


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_defaults_use_the_global_providers_with_the_package_scope() -> None:
    # A child process: global providers can be set only once per process.
    done = _run_python(
        """
        from importlib import metadata
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from watukuy.runtime.hooks import PollStartDetails, PollEndDetails
        from watukuy.model.rows import PollSummary
        from watukuy.otel import OtelHooks

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

        hooks = OtelHooks()
        ctx = dict(poller="p", partition="", lane="live", instance_id="i")
        hooks.on_poll_start(PollStartDetails(**ctx, started_at=5))
        hooks.on_poll_end(PollEndDetails(**ctx, summary=PollSummary(lane="live", started_at=5)))
        (span,) = exporter.get_finished_spans()
        scope = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].scope
        version = metadata.version("watukuy")
        assert (span.instrumentation_scope.name, span.instrumentation_scope.version) == (
            "watukuy", version), span.instrumentation_scope
        assert (scope.name, scope.version) == ("watukuy", version), scope
        print("ok", version)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


def test_without_opentelemetry_the_module_imports_and_the_hooks_ask_for_the_extra() -> None:
    done = _run_python(
        """
        import sys
        for name in ("opentelemetry", "opentelemetry.trace", "opentelemetry.metrics"):
            sys.modules[name] = None  # as if the package were not installed
        import watukuy
        from watukuy.otel import OtelHooks
        try:
            OtelHooks()
        except ImportError as error:
            print(error)
        else:
            raise SystemExit("no ImportError")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'watukuy[otel]'" in done.stdout


async def test_with_no_sdk_the_default_hooks_are_silent_no_ops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    api = FakeApi(clock, items=fake_items(5))
    delivered: list[str] = []
    async with httpx.AsyncClient(transport=api.transport()) as http:
        orders = wk.define_poller(
            name="orders", fetch=listing(api), identity=lambda i: i["id"], cursor=wk.SnapshotDiff()
        )
        engine = wk.Engine(
            store=wk.MemoryStore(),
            pollers=[orders],
            clock=clock,
            random=SeededRandom(1),
            hooks=OtelHooks(),
            http_client=http,
        )
        engine.on("orders", lambda event, ctx: delivered.append(event.subject))
        with caplog.at_level(logging.DEBUG, logger="watukuy"):
            result = await engine.tick()

    assert result.polled[0].error is None
    assert len(delivered) == 5
    assert [r.getMessage() for r in caplog.records if r.name == "watukuy.otel"] == []
    assert [r.getMessage() for r in caplog.records if "hook" in r.getMessage()] == []
