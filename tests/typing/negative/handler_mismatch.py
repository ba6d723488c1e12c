"""Must NOT type-check: handlers written for another item type than the poller's.

Each ``# case:`` region (up to the next one) must draw at least one error from mypy --strict
and from pyright --strict, and the code before the first case none
(``tests/e2e/test_typing.py``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import watukuy as wk


class Order(BaseModel):
    id: str


class Invoice(BaseModel):
    number: int


async def fetch(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    return wk.Page(items=[], has_more=False)


orders = wk.define_poller(
    name="orders", schema=Order, identity=lambda o: o.id, cursor=wk.TokenCursor(), fetch=fetch
)
plain = wk.define_poller(
    name="plain", identity=lambda o: o["id"], cursor=wk.TokenCursor(), fetch=fetch
)
engine = wk.Engine(store=wk.MemoryStore(), pollers=[orders, plain])


async def on_invoice(event: wk.Event[Invoice], ctx: wk.HandlerContext) -> None:
    print(event.id)


async def on_order(event: wk.Event[Order], ctx: wk.HandlerContext) -> None:
    print(event.id)


# case: a handler of Invoice events on a poller of orders
engine.on(orders, on_invoice)

# case: a handler of Order events on a poller without a schema (JSON objects)
engine.on(plain, on_order)

# case: an identity reading a field the schema does not have
wk.define_poller(
    name="typo",
    schema=Order,
    identity=lambda o: o.number,
    cursor=wk.TokenCursor(),
    fetch=fetch,
)
