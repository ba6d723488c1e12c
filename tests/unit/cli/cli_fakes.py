"""Helpers for the CLI unit tests: an engine on a ``MemoryStore`` and a ``VirtualClock``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import watukuy as wk
from watukuy.testing import FakeApi, SeededRandom, VirtualClock, fake_items


@dataclass
class Polled:
    """An engine, its store and clock, after one ``tick()``."""

    engine: wk.Engine
    store: wk.MemoryStore
    clock: VirtualClock


def build_engine(store: wk.MemoryStore, clock: VirtualClock) -> wk.Engine:
    """Three pollers: ``orders`` (timestamp), ``tenants`` (partitioned snapshot) and
    ``poison`` (a handler that always fails, one attempt)."""
    api = FakeApi(clock, items=fake_items(5))
    api.tenant("t1").seed(fake_items(2))
    api.tenant("t2").seed(fake_items(3))

    async def fetch_orders(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        page = api.list_since(ctx.cursor.value, ctx.cursor.tie_break, limit=2)
        return wk.Page(items=page.data, has_more=page.has_more)

    async def fetch_tenant(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=api.tenant(ctx.partition.key).list_all(), has_more=False)

    async def fetch_poison(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=api.list_all()[:2], has_more=False)

    def identity(item: dict[str, Any]) -> str:
        return str(item["id"])

    engine = wk.Engine(
        store=store,
        clock=clock,
        random=SeededRandom(1),
        pollers=[
            wk.define_poller(
                name="orders",
                identity=identity,
                cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
                fetch=fetch_orders,
            ),
            wk.define_poller(
                name="tenants",
                identity=identity,
                cursor=wk.SnapshotDiff(),
                fetch=fetch_tenant,
                partitions=lambda: ["t1", "t2"],
            ),
            wk.define_poller(
                name="poison",
                identity=identity,
                cursor=wk.SnapshotDiff(),
                fetch=fetch_poison,
                delivery=wk.Delivery(retry=wk.Retry(attempts=1)),
            ),
        ],
    )

    async def accept(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        return None

    async def refuse(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        raise RuntimeError(f"cannot handle {event.subject}")

    engine.on("orders", accept)
    engine.on("tenants", accept)
    engine.on("poison", refuse)
    return engine
