"""Never executed: type-checked with mypy --strict and pyright strict to pin how change sets
and ``when=`` filters read in user code (a filter on ``Event[Order]`` sees ``Order``)."""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

import watukuy as wk


class Order(BaseModel):
    id: str
    status: str
    total: int


async def fetch_orders(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    return wk.Page(items=[], has_more=False)


orders = wk.define_poller(
    name="orders",
    schema=Order,
    identity=lambda o: o.id,
    cursor=wk.TokenCursor(),
    fetch=fetch_orders,
    retain="payload",
    array_key="sku",
)
engine = wk.Engine(store=wk.MemoryStore(), pollers=[orders])


def big(event: wk.Event[Order]) -> bool:
    return event.data is not None and event.data.total > 100


@engine.on(orders, when=wk.changed("status", to="paid") & ~wk.changed("/lines/*/qty"))
async def on_paid(event: wk.Event[Order], ctx: wk.HandlerContext) -> None:
    assert_type(event.changes, list[dict[str, Any]] | None)
    assert_type(event.changed_paths, tuple[str, ...] | None)
    if event.changes is not None and event.previous is not None:
        patch: wk.JsonPatch = event.changes
        after = wk.apply_patch(event.previous.model_dump(mode="json"), patch)
        assert_type(after, Any)


# A plain predicate sees the poller's item type.
engine.on(
    orders,
    lambda event, ctx: None,
    when=lambda event: event.data is not None and event.data.status == "paid",
)
engine.on(orders, on_paid, when=big)
engine.on("orders", on_paid, when=wk.created() | wk.deleted() | wk.updated())
# Several consumers of one poller, each under its own name.
engine.on(orders, on_paid, consumer="billing", when=wk.changed("status", to="paid"))
engine.on(orders, on_paid, consumer=None)  # the first free "default" name
engine.off(orders, "billing")
engine.off("orders")

combined: wk.EventFilter = wk.changed("status") | big
assert_type(combined, wk.EventFilter)
assert_type(wk.changed("/lines/*/qty", from_=1, to=2), wk.EventFilter)
assert_type(wk.json_patch({"a": 1}, {"a": 2}, array_key=None), wk.JsonPatch)


async def pull() -> None:
    async for event in engine.subscribe(orders, when=wk.changed("total")):
        assert_type(event, wk.Event[Order])
    async for event in engine.subscribe(orders, consumer="audit"):
        assert_type(event, wk.Event[Order])
