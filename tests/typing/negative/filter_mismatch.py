"""Must NOT type-check: ``when=`` filters written for another item type than the poller's.

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
    status: str


class Invoice(BaseModel):
    number: int


async def fetch(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    return wk.Page(items=[], has_more=False)


orders = wk.define_poller(
    name="orders",
    schema=Order,
    identity=lambda o: o.id,
    cursor=wk.TokenCursor(),
    fetch=fetch,
    retain="payload",
)
engine = wk.Engine(store=wk.MemoryStore(), pollers=[orders])


async def on_order(event: wk.Event[Order], ctx: wk.HandlerContext) -> None:
    print(event.id)


def is_big_invoice(event: wk.Event[Invoice]) -> bool:
    return event.data is not None and event.data.number > 100


# case: a filter of Invoice events on a poller of orders
engine.on(orders, on_order, when=is_big_invoice)

# case: a lambda filter reading a field the schema does not have
engine.on(orders, on_order, when=lambda event: event.data is not None and event.data.total > 1)

# case: a filter on a subscription of another item type
engine.subscribe(orders, when=is_big_invoice)
