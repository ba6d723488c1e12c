"""Never executed: type-checked with mypy --strict to pin how the public API infers types.

If a change breaks inference (``Event[Order]`` from the schema, the handler's argument
types, the result types of operations), ``make test`` fails at the type-check step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, assert_type

from pydantic import BaseModel

import watukuy as wk
from watukuy.model.errors import SerializedError
from watukuy.runtime.hooks import (
    DeliveredDetails,
    ErrorDetails,
    FetchDetails,
    Hooks,
    PollEndDetails,
)
from watukuy.testing import CapturingLogger, VirtualClock


class Order(BaseModel):
    id: str
    status: str
    updated_at: str


async def fetch_orders(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
    assert_type(ctx.cursor.value, "str | int | float | None")
    response = await ctx.http.get("https://erp.example.com/orders")
    return wk.Page(items=response.json()["data"], has_more=False)


orders = wk.define_poller(
    name="orders",
    schema=Order,
    identity=lambda o: o.id,
    version=lambda o: o.updated_at,
    cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
    fetch=fetch_orders,
    schedule=wk.Schedule(min="5s", max="5m"),
    delivery=wk.Delivery(concurrency=8),
)
assert_type(orders, wk.PollerDefinition[Order])

engine = wk.Engine(store=wk.MemoryStore(), pollers=[orders])
guarded = wk.Engine(
    store=wk.MemoryStore(),
    pollers=[orders],
    redact=wk.Redaction(names=["x-tenant"], allow=["key"], values=["s3cret"]),
)
assert_type(guarded.redaction, wk.Redaction)
assert_type(guarded.redaction.url("https://u:p@h/?token=t"), str)
also_guarded = wk.Engine(store=wk.MemoryStore(), pollers=[orders], redact=["x-tenant"])
slow_vendor = wk.Engine(store=wk.MemoryStore(), pollers=[orders], http_max_in_flight=150)


@engine.on(orders)
async def on_order(event: wk.Event[Order], ctx: wk.HandlerContext) -> None:
    assert_type(event.data, Order | None)
    if event.data is not None:
        assert_type(event.data.status, str)
    assert_type(ctx.partition, wk.Partition)


@engine.on("orders")
def on_order_sync(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
    assert_type(event.id, str)


async def operate() -> None:
    result = await engine.tick(max_duration="50s")
    assert_type(result, wk.TickResult)
    assert_type(result.polled[0].error, SerializedError | None)
    assert_type(result.polled[0].pending, bool)
    assert_type(result.polled[0].cycles, int)
    assert_type(result.pending_keys, list[tuple[str, str]])
    assert_type(result.caught_up, bool)
    stepped = await engine.tick(only="orders", catch_up=False)
    assert_type(stepped, wk.TickResult)
    report = await engine.inspect()
    assert_type(report["pollers"][0]["lag_ms"], int | None)
    replayed = await engine.replay("orders", from_="2026-01-01T00:00:00Z")
    assert_type(replayed.replayed, int)
    async for event in engine.subscribe(orders):
        assert_type(event, wk.Event[Order])
    parked = await engine.parked.list("orders", kind="poison")
    assert_type(parked[0].attempts, int)
    await engine.stop(drain=True, timeout="30s")


async def fetch_plain(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    response: wk.FetchResponse = await ctx.http.get(
        "https://erp.example.com/customers", raise_for_status=False
    )
    if response.status == 410:  # an expired token: start over
        return wk.Page(gone=True)
    response.raise_for_status()
    assert_type(response.status_code, int)
    assert_type(response.text, str)
    assert_type(wk.Page(gone=True).gone, bool)
    return wk.Page(items=response.json()["data"], cursor=None, has_more=False)


# Without a schema, items are JSON objects.
customers = wk.define_poller(
    name="customers",
    identity=lambda customer: customer["id"],
    version=lambda customer: customer["version"],
    cursor=wk.TokenCursor(),
    fetch=fetch_plain,
    # An API whose next request acknowledges the page before it: ask only once it landed.
    prefetch=False,
)
assert_type(customers, wk.PollerDefinition[dict[str, Any]])
assert_type(customers, wk.PollerDefinition[wk.JsonObject])

# Event ids: the original watukuy's for every event, or one per observation with tombstones
# kept for a while.
handed_over = wk.define_poller(
    name="legacy",
    identity=lambda c: c["id"],
    cursor=wk.TokenCursor(),
    fetch=fetch_plain,
    ids="compat",
)
assert_type(handed_over.ids, wk.EventIds)
bounded = wk.define_poller(
    name="bounded",
    identity=lambda c: c["id"],
    cursor=wk.TokenCursor(),
    fetch=fetch_plain,
    ids=wk.EventIds(tombstones="90d"),
)
assert_type(bounded.ids.tombstones_ms, int | None)


@engine.on(customers)
async def on_customer(event: wk.Event[wk.JsonObject], ctx: wk.HandlerContext) -> None:
    if event.data is not None:
        assert_type(event.data["name"], Any)


async def in_context() -> None:
    async with wk.Engine(store=wk.MemoryStore(), pollers=[customers]) as running:
        assert_type(running, wk.Engine)


class Metrics(Hooks):
    """A typed hook set: each method receives its own record, sync or async."""

    def on_fetch(self, details: FetchDetails) -> None:
        assert_type(details.page, int)
        assert_type(details.not_modified, bool)
        assert_type(details.lane, wk.Lane)

    async def on_delivered(self, details: DeliveredDetails) -> None:
        assert_type(details.event, wk.Event[Any])
        assert_type(details.consumer, str)

    def on_error(self, details: ErrorDetails) -> None:
        assert_type(details.error, SerializedError)

    async def on_poll_end(self, details: PollEndDetails) -> None:
        print(details.summary.items, details.instance_id)


hooked = wk.Engine(store=wk.MemoryStore(), pollers=[customers], hooks=[Metrics()])
remove_metrics = hooked.add_hooks(Metrics())  # a hook set added later, and its remover
assert_type(remove_metrics, Callable[[], None])


# The parity rows with the TypeScript original: an injected logger, an engine-wide source
# prefix, a subscription stopped from outside, a poller added to a running engine, and a
# virtual clock started from ISO text.
logged = wk.Engine(
    store=wk.MemoryStore(),
    pollers=[orders],
    logger=wk.child_logger(wk.silent_logger(), "sync", tenant="acme"),
    source_prefix="urn:acme:crm:",
)
assert_type(wk.serialize_error(RuntimeError("boom")), SerializedError)


async def parity(stop: asyncio.Event) -> None:
    async for event in logged.subscribe(orders, stop=stop):
        assert_type(event, wk.Event[Order])
    added = await logged.add_poller(customers)
    assert_type(added, wk.PollerDefinition[wk.JsonObject])
    clock = VirtualClock("2026-01-01T00:00:00Z")
    await clock.advance_to(datetime(2026, 1, 2, tzinfo=UTC))
    captured = CapturingLogger()
    assert_type(captured.for_poller("orders").at("WARNING").messages, list[str])
