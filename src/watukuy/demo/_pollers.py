"""The demo's three pollers, one per cursor style a vendor API tends to force on you.

- ``orders``: ``GET /t/orders/items?since=&after_id=&limit=5``, a keyset listing by
  ``(updated_at, id)``: a timestamp cursor with a tie-break (small pages, so ties cross page
  boundaries; no ``overlap``, which a tie-break makes unnecessary and which would re-list
  more than a page here), plus a reconcile every 5s over the numbered pages to find
  archived orders (an incremental listing never shows deletions).
- ``catalog``: ``GET /t/catalog/items/all``, everything at once with an ``ETag``: a snapshot
  diff that finds removed products, and a ``304`` when nothing changed.
- ``invoices``: ``GET /t/{tenant}/items/token?cursor=``, opaque tokens, one partition per
  tenant (``acme``, ``globex``, ``initech``).

Every request goes through ``ctx.http``, so budgets, rate-limit headers, ``Retry-After``
and ETags are handled the way they would be against a real vendor.
"""

from __future__ import annotations

from typing import Any, Final

from watukuy.cursor import SnapshotDiff, TimestampCursor, TokenCursor
from watukuy.model.options import Backoff, Delivery, EventLog, Reconcile, Schedule
from watukuy.model.page import Page
from watukuy.runtime.context import FetchContext
from watukuy.runtime.poller import PollerDefinition, define_poller

from ._world import CATALOG, ORDERS, TENANTS

__all__ = ["BUDGET", "DELIVERY_CONCURRENCY", "demo_pollers"]

BUDGET: Final = "vendor"
"""The rate budget every demo poller shares."""

DELIVERY_CONCURRENCY: Final = {"orders": 4, "catalog": 1, "invoices": 1}
"""Ordering keys in flight at once per poller (an upper bound on redeliveries per key after
a crash: only events in flight can be delivered twice)."""

_ORDERS_PAGE: Final = 5


def _identity(item: dict[str, Any]) -> str:
    return str(item["id"])


def _version(item: dict[str, Any]) -> int:
    return int(item["version"])


def demo_pollers(base_url: str) -> list[PollerDefinition[Any]]:
    """The three demo pollers against the simulated vendor at ``base_url``."""

    async def fetch_orders(ctx: FetchContext[Any]) -> Page[Any]:
        cursor = ctx.cursor
        response = await ctx.http.get(
            f"{base_url}/t/{ORDERS}/items",
            params={"since": cursor.value, "after_id": cursor.tie_break, "limit": _ORDERS_PAGE},
        )
        if response.not_modified:  # same cursor, same answer: nothing new
            return Page(items=[], has_more=False)
        body = response.json()
        return Page(items=body["data"], has_more=body["has_more"])

    async def list_orders(ctx: FetchContext[Any]) -> Page[Any]:
        # A full listing must see every page, so no conditional requests here: a 304 on
        # page 1 says nothing about page 2.
        response = await ctx.http.get(
            f"{base_url}/t/{ORDERS}/items/page",
            params={"page": ctx.page, "page_size": 20},
            validators=False,
        )
        body = response.json()
        return Page(items=body["data"], has_more=body["has_more"])

    async def fetch_catalog(ctx: FetchContext[Any]) -> Page[Any]:
        response = await ctx.http.get(f"{base_url}/t/{CATALOG}/items/all")
        if response.not_modified:
            return Page(items=[], has_more=False)
        return Page(items=response.json()["data"], has_more=False)

    async def fetch_invoices(ctx: FetchContext[Any]) -> Page[Any]:
        # Tokens resume after the last id seen, so an unchanged first page says nothing
        # about later ones: no conditional requests. A token in id order never sees an
        # invoice paid after it was read, so the last page (no token) leaves has_more
        # unset: the next cycle starts over from the first page.
        response = await ctx.http.get(
            f"{base_url}/t/{ctx.partition.key}/items/token",
            params={"cursor": ctx.cursor.value, "limit": 3},
            validators=False,
        )
        body = response.json()
        return Page(items=body["data"], cursor=body["next"])

    backoff = Backoff(base="500ms", max="4s")
    orders = define_poller(
        name=ORDERS,
        fetch=fetch_orders,
        identity=_identity,
        version=_version,
        cursor=TimestampCursor(field="updated_at", tie_break="id"),
        schedule=Schedule(min="1s", max="4s", backoff=backoff),
        reconcile=Reconcile(every="5s", fetch=list_orders),
        budget=BUDGET,
        delivery=Delivery(concurrency=DELIVERY_CONCURRENCY["orders"]),
        log=EventLog(retention="1d"),
    )
    catalog = define_poller(
        name=CATALOG,
        fetch=fetch_catalog,
        identity=_identity,
        version=_version,
        cursor=SnapshotDiff(),
        schedule=Schedule(min="2s", max="6s", backoff=backoff),
        budget=BUDGET,
        retain="payload",
        delivery=Delivery(concurrency=DELIVERY_CONCURRENCY["catalog"]),
    )
    invoices = define_poller(
        name="invoices",
        fetch=fetch_invoices,
        identity=_identity,
        version=_version,
        cursor=TokenCursor(),
        partitions=lambda: list(TENANTS),
        schedule=Schedule(min="1500ms", max="6s", backoff=backoff),
        budget=BUDGET,
        delivery=Delivery(concurrency=DELIVERY_CONCURRENCY["invoices"]),
    )
    return [orders, catalog, invoices]
