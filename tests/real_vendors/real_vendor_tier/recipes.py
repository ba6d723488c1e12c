"""The pollers under test, written the way a user writes them from our docs.

Each recipe is the docs' code with only what a vendor dictates changed: the URL, the names
of its query parameters and where its items are. This module imports nothing but the
public ``watukuy`` API and the standard library, because :mod:`.engine_child` may run it
with another checkout's interpreter.

| recipe | from | vendor endpoint |
|---|---|---|
| ``quickstart`` | README quickstart: ``TimestampCursor(field, tie_break="id")``, nothing else | DRF limit/offset with ``updated_at__gte`` + ``after_id``; json-server ``updatedAt_gte`` |
| ``overlap`` | docs/recipes.md "Epoch timestamps": the same with ``overlap="2m"`` | the same |
| ``lag`` | docs/cursors.md ``TimestampCursor``: ``lag="30s"`` | DRF |
| ``token`` | docs/cursors.md ``TokenCursor`` (``cursor=body["next"]``, ``has_more`` as the GraphQL recipe sets it) + ``reconcile`` | DRF ``CursorPagination`` next links |
| ``snapshot`` | docs/cursors.md ``SnapshotDiff`` (deletes built in) | DRF ``PageNumberPagination``; json-server ``_page`` |
| ``page-reconcile`` | docs/cursors.md ``PageCursor`` + ``reconcile`` | DRF ``PageNumberPagination`` |
| ``ties`` | docs/cursors.md "Pitfall: ties at a page boundary": ``tie_break=None`` | json-server ``_limit`` smaller than a tie group |
| ``wedge`` | the ``snapshot`` recipe, two pages a cycle | DRF pages of 50 (:func:`.scenario.run_wedge`) |

When the docs change one of these examples, change its recipe here the same way: the tier
holds the engine to what a user of the docs would write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import watukuy as wk

# The README quickstart's schedule; every recipe uses it unless its docs section sets one.
SCHEDULE = {"min": "5s", "max": "5m"}
RECIPES: dict[str, tuple[str, ...]] = {
    "drf": ("quickstart", "overlap", "lag", "token", "snapshot", "page-reconcile"),
    "json": ("quickstart", "overlap", "snapshot", "ties"),
}
FULL_LISTING = frozenset({"snapshot", "token", "page-reconcile"})
"""Recipes that read a full listing (live or reconcile), so deletes are observable."""


def _schedule(knobs: dict[str, str] | None) -> wk.Schedule:
    chosen = knobs or SCHEDULE
    return wk.Schedule(min=chosen["min"], max=chosen["max"])


def _order_id(order: Any) -> Any:
    return order["id"]


def _order_version(order: Any) -> Any:
    return order["version"]


# --- Django REST Framework ------------------------------------------------------------


def _poller(name: str, fetch: Any, cursor: Any, **options: Any) -> wk.PollerDefinition[Any]:
    return wk.define_poller(
        name=name,
        identity=_order_id,
        version=_order_version,
        cursor=cursor,
        fetch=fetch,
        **{"schedule": _schedule(None), **options},
    )


def drf_pages(base: str, page_size: int) -> Callable[[wk.FetchContext[None]], Any]:
    """docs/cursors.md's ``SnapshotDiff`` fetch over DRF's ``PageNumberPagination``."""

    async def fetch_catalog(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/pages/", params={"page": ctx.page, "page_size": page_size}
        )
        if response.not_modified:
            return wk.Page(items=[])
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    return fetch_catalog


def drf_recipe(
    name: str, base: str, *, schedule: dict[str, str] | None = None, reconcile_every: str = "30s"
) -> wk.PollerDefinition[Any]:
    """The poller ``name`` against the DRF vendor at ``base``."""
    options: dict[str, Any] = {"schedule": _schedule(schedule)}

    async def fetch_orders(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/offset/",
            params={
                "updated_at__gte": ctx.cursor.value,
                "after_id": ctx.cursor.tie_break,
                "ordering": "updated_at,id",
                "limit": 100,
            },
        )
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    async def list_all_orders(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/offset/",
            params={"offset": (ctx.page - 1) * 200, "limit": 200, "ordering": "id"},
        )
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    async def fetch_by_token(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        # A next-link API: the token is the whole `next` URL. `has_more` says where the
        # listing ends, as the GraphQL recipe of docs/recipes.md teaches.
        response = await ctx.http.get(ctx.cursor.value or f"{base}/orders/cursor/")
        body = response.json()
        return wk.Page(
            items=body["results"], cursor=body["next"], has_more=body["next"] is not None
        )

    async def fetch_products(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/pages/", params={"page": ctx.cursor.page, "page_size": 100}
        )
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    reconcile = wk.Reconcile(every=reconcile_every, fetch=list_all_orders)
    recipes: dict[str, Callable[[], wk.PollerDefinition[Any]]] = {
        "quickstart": lambda: _poller(
            name, fetch_orders, wk.TimestampCursor(field="updated_at", tie_break="id"), **options
        ),
        "overlap": lambda: _poller(
            name,
            fetch_orders,
            wk.TimestampCursor(field="updated_at", tie_break="id", overlap="2m"),
            **options,
        ),
        "lag": lambda: _poller(
            name,
            fetch_orders,
            wk.TimestampCursor(field="updated_at", tie_break="id", lag="30s"),
            **options,
        ),
        "token": lambda: _poller(
            name, fetch_by_token, wk.TokenCursor(), reconcile=reconcile, **options
        ),
        "snapshot": lambda: _poller(name, drf_pages(base, 100), wk.SnapshotDiff(), **options),
        "page-reconcile": lambda: _poller(
            name, fetch_products, wk.PageCursor(initial=1), reconcile=reconcile, **options
        ),
        # A pass spanning cycles (as any pass cut by the page cap or a deadline does).
        "wedge": lambda: _poller(
            name, drf_pages(base, 50), wk.SnapshotDiff(), max_pages_per_cycle=2, **options
        ),
    }
    if name not in recipes:
        raise ValueError(f"no DRF recipe {name!r}; known: {', '.join(recipes)}")
    return recipes[name]()


# --- json-server ----------------------------------------------------------------------


def json_recipe(
    name: str, base: str, *, schedule: dict[str, str] | None = None, ties_limit: int = 20
) -> wk.PollerDefinition[Any]:
    """The poller ``name`` against json-server at ``base``."""
    options: dict[str, Any] = {"schedule": _schedule(schedule)}

    def keyset(limit: int) -> Callable[[wk.FetchContext[wk.TimestampPosition]], Any]:
        async def fetch_orders(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
            since, after_id = ctx.cursor.value, ctx.cursor.tie_break
            response = await ctx.http.get(
                f"{base}/orders",
                params={
                    "updatedAt_gte": since,
                    "_sort": "updatedAt,id",
                    "_order": "asc,asc",
                    "_limit": limit,
                },
            )
            rows = response.json()
            # json-server cannot filter on the tie-break: skip, as docs/cursors.md asks,
            # the orders at exactly the watermark whose id is not greater than it.
            items = [
                row
                for row in rows
                if not (
                    after_id is not None and row["updatedAt"] == since and row["id"] <= after_id
                )
            ]
            return wk.Page(items=items, has_more=len(rows) == limit)

        return fetch_orders

    async def fetch_catalog(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders", params={"_page": ctx.page, "_limit": 100, "_sort": "id"}
        )
        if response.not_modified:
            return wk.Page(items=[])
        total = int(response.headers["x-total-count"])
        return wk.Page(items=response.json(), has_more=ctx.page * 100 < total)

    recipes: dict[str, Callable[[], wk.PollerDefinition[Any]]] = {
        "quickstart": lambda: _poller(
            name, keyset(100), wk.TimestampCursor(field="updatedAt", tie_break="id"), **options
        ),
        "overlap": lambda: _poller(
            name,
            keyset(100),
            wk.TimestampCursor(field="updatedAt", tie_break="id", overlap="2m"),
            **options,
        ),
        "ties": lambda: _poller(
            name, keyset(ties_limit), wk.TimestampCursor(field="updatedAt"), **options
        ),
        "snapshot": lambda: _poller(name, fetch_catalog, wk.SnapshotDiff(), **options),
    }
    if name not in recipes:
        raise ValueError(f"no json-server recipe {name!r}; known: {', '.join(recipes)}")
    return recipes[name]()


def build(vendor: str, recipe: str, base: str, **knobs: Any) -> wk.PollerDefinition[Any]:
    """The poller of ``recipe`` for ``vendor`` (``"drf"`` or ``"json"``) at ``base``."""
    if vendor == "drf":
        return drf_recipe(recipe, base, **knobs)
    if vendor == "json":
        return json_recipe(recipe, base, **knobs)
    raise ValueError(f"unknown vendor {vendor!r}")
