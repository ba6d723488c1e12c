"""The pollers under test, written the way a user writes them from our docs.

Every ``fetch`` the tier runs is a copy of a ``fetch`` in the README or ``docs/*.md``, in a
factory of its own below. The docs block it copies is marked in the markdown with an HTML
comment on the line before its fence, ``<!-- recipe: NAME -->``, and :data:`FROM_THE_DOCS`
says, for each factory, which block and which function in it, and what the vendor
changes: expressions of the docs' code (its URL, its query parameters, where the items
and the "more" flag are in the answer) and the vendor's expressions that replace them.
``tests/real_vendors/test_recipes_follow_the_docs.py`` holds the two to each other: the
docs' function with those replacements made must be this module's function, statement
for statement (comments and formatting aside); each replacement must be used; every
marked block must have its copy here; and every poller :func:`build` makes must call
only fetches that are copies. A docs change that is not made here too (or the reverse)
fails that test, without any vendor running.

| recipe | cursor and options (from) | fetch (docs block) | vendor endpoint |
|---|---|---|---|
| ``quickstart`` | README quickstart: ``TimestampCursor(field, tie_break="id")`` | DRF: README ``quickstart``; json-server: cursors.md ``timestamp-only-filter`` | DRF limit/offset with ``updated_at__gte`` + ``after_id``; json-server ``updatedAt_gte`` |
| ``overlap`` | cursors.md ``TimestampCursor``: the same with ``overlap="2m"`` | the same | the same |
| ``lag`` | cursors.md ``TimestampCursor``: ``lag="30s"`` | cursors.md ``timestamp-cursor`` | DRF limit/offset |
| ``token`` | cursors.md ``TokenCursor`` + ``reconcile`` | cursors.md ``token-cursor``; reconcile ``reconcile-listing`` | DRF ``CursorPagination`` next links; ``PageNumberPagination`` |
| ``snapshot`` | cursors.md ``SnapshotDiff`` (deletes built in) | DRF: cursors.md ``gone-page``; json-server: ``snapshot-diff`` | DRF ``PageNumberPagination``; json-server ``_page`` |
| ``page-reconcile`` | cursors.md ``PageCursor`` + ``reconcile`` | cursors.md ``page-cursor``; reconcile ``reconcile-listing`` | DRF ``PageNumberPagination`` |
| ``ties`` | cursors.md "Pitfall: ties at a page boundary": ``tie_break=None`` | cursors.md ``timestamp-only-filter`` | json-server ``_limit`` smaller than a tie group |
| ``wedge-gone`` | the ``snapshot`` recipe, two pages a cycle | cursors.md ``gone-page`` | DRF pages of 50 (:func:`.scenario.run_wedge`) |
| ``wedge`` | the same, with a fetch that does *not* handle the end | none: :func:`drf_unhandled_end`, the engine's safety net | the same |

This module imports nothing but the public ``watukuy`` API and the standard library,
because :mod:`.engine_child` may run it with another checkout's interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class FromDocs:
    """Where a factory's ``fetch`` comes from, and what the vendor changes in it.

    Attributes:
        marker: The docs block, marked ``<!-- recipe: marker -->`` in the markdown.
        function: The name of the function in that block (and in the factory).
        vendor: ``(docs expression, vendor expression)`` pairs, as Python source.
    """

    marker: str
    function: str
    vendor: tuple[tuple[str, str], ...]


# The DRF answers: {"count", "next", "previous", "results"}; json-server: a bare list, the
# total in `X-Total-Count`.
_DRF_RESULTS = ('body["data"]', 'body["results"]')
_DRF_MORE = ('body["has_more"]', 'body["next"] is not None')

FROM_THE_DOCS: dict[str, FromDocs] = {
    "drf_quickstart": FromDocs(
        "quickstart",
        "fetch_orders",
        (
            ('"https://fake.api/items"', 'f"{base}/orders/offset/"'),
            (
                '{"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 100}',
                '{"updated_at__gte": ctx.cursor.value, "after_id": ctx.cursor.tie_break, '
                '"ordering": "updated_at,id", "limit": 100}',
            ),
            _DRF_RESULTS,
            _DRF_MORE,
        ),
    ),
    "drf_timestamp_cursor": FromDocs(
        "timestamp-cursor",
        "fetch_orders",
        (
            ('"https://erp.example.com/orders"', 'f"{base}/orders/offset/"'),
            ('"updated_since"', '"updated_at__gte"'),
            ('"sort"', '"ordering"'),
            ("500", "100"),
            _DRF_RESULTS,
            _DRF_MORE,
        ),
    ),
    "drf_token_cursor": FromDocs(
        "token-cursor", "fetch_changes", (("FIRST_PAGE", 'f"{base}/orders/cursor/"'),)
    ),
    "drf_page_cursor": FromDocs(
        "page-cursor",
        "fetch_products",
        (
            ('"https://vendor.example/products"', 'f"{base}/orders/pages/"'),
            ('{"page": ctx.cursor.page}', '{"page": ctx.cursor.page, "page_size": 100}'),
            ('body["items"]', 'body["results"]'),
            ('ctx.cursor.page < body["pages"]', 'body["next"] is not None'),
        ),
    ),
    "drf_gone_page": FromDocs(
        "gone-page",
        "fetch_shop_orders",
        (
            ('"https://vendor.example/api/orders/"', 'f"{base}/orders/pages/"'),
            ('{"page": ctx.page}', '{"page": ctx.page, "page_size": page_size}'),
        ),
    ),
    "drf_reconcile_listing": FromDocs(
        "reconcile-listing",
        "list_all_orders",
        (
            ('"https://erp.example.com/orders"', 'f"{base}/orders/pages/"'),
            # `ordering` first: the vendor's access log tells this listing from the live
            # lane's page requests by the start of the query string.
            (
                '{"page": ctx.page, "limit": 1000}',
                '{"ordering": "id", "page": ctx.page, "page_size": 200}',
            ),
            _DRF_RESULTS,
            _DRF_MORE,
        ),
    ),
    "json_timestamp_only_filter": FromDocs(
        "timestamp-only-filter",
        "fetch_orders",
        (
            ('"https://vendor.example/orders"', 'f"{base}/orders"'),
            ('"updated_at"', '"updatedAt"'),
            (
                '{"updated_since": since, "sort": "updated_at,id", "limit": 100}',
                '{"updatedAt_gte": since, "_sort": "updatedAt,id", "_order": "asc,asc", '
                '"_limit": limit}',
            ),
            ("100", "limit"),
        ),
    ),
    "json_snapshot_diff": FromDocs(
        "snapshot-diff",
        "fetch_catalog",
        (
            ('"https://vendor.example/catalog"', 'f"{base}/orders"'),
            (
                '{"page": ctx.page, "per_page": 500}',
                '{"_page": ctx.page, "_limit": 100, "_sort": "id"}',
            ),
            ('body["items"]', "body"),
            ('ctx.page < body["pages"]', 'ctx.page * 100 < int(response.headers["x-total-count"])'),
        ),
    ),
}
"""Each factory of this module whose ``fetch`` is a docs block's, by factory name."""


def _schedule(knobs: dict[str, str] | None) -> wk.Schedule:
    chosen = knobs or SCHEDULE
    return wk.Schedule(min=chosen["min"], max=chosen["max"])


def _order_id(order: Any) -> Any:
    return order["id"]


def _order_version(order: Any) -> Any:
    return order["version"]


def _poller(name: str, fetch: Any, cursor: Any, **options: Any) -> wk.PollerDefinition[Any]:
    return wk.define_poller(
        name=name,
        identity=_order_id,
        version=_order_version,
        cursor=cursor,
        fetch=fetch,
        **{"schedule": _schedule(None), **options},
    )


# --- Django REST Framework: the docs' fetches -----------------------------------------


def drf_quickstart(base: str) -> Callable[[wk.FetchContext[wk.TimestampPosition]], Any]:
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

    return fetch_orders


def drf_timestamp_cursor(base: str) -> Callable[[wk.FetchContext[wk.TimestampPosition]], Any]:
    async def fetch_orders(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        response: wk.FetchResponse = await ctx.http.get(
            f"{base}/orders/offset/",
            params={
                "updated_at__gte": ctx.cursor.value,
                "after_id": ctx.cursor.tie_break,
                "ordering": "updated_at,id",
                "limit": 100,
            },
        )
        if response.not_modified:
            return wk.Page(items=[])
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    return fetch_orders


def drf_token_cursor(base: str) -> Callable[[wk.FetchContext[wk.TokenPosition]], Any]:
    async def fetch_changes(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        response = await ctx.http.get(ctx.cursor.value or f"{base}/orders/cursor/")
        if response.not_modified:
            return wk.Page(items=[], has_more=False)
        body = response.json()
        return wk.Page(
            items=body["results"], cursor=body["next"], has_more=body["next"] is not None
        )

    return fetch_changes


def drf_page_cursor(base: str) -> Callable[[wk.FetchContext[wk.PagePosition]], Any]:
    async def fetch_products(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/pages/",
            params={"page": ctx.cursor.page, "page_size": 100},
            raise_for_status=False,
        )
        if response.status == 404 and ctx.cursor.page > 1:
            return wk.Page(gone=True)
        response.raise_for_status()
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    return fetch_products


def drf_gone_page(base: str, page_size: int) -> Callable[[wk.FetchContext[None]], Any]:
    async def fetch_shop_orders(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/pages/",
            params={"page": ctx.page, "page_size": page_size},
            raise_for_status=False,
        )
        if response.status == 404 and ctx.page > 1:
            return wk.Page(gone=True)
        response.raise_for_status()
        if response.not_modified:
            return wk.Page(items=[])
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    return fetch_shop_orders


def drf_reconcile_listing(base: str) -> Callable[[wk.FetchContext[wk.PagePosition]], Any]:
    async def list_all_orders(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/pages/",
            params={"ordering": "id", "page": ctx.page, "page_size": 200},
            raise_for_status=False,
        )
        if response.status == 404 and ctx.page > 1:
            return wk.Page(gone=True)
        response.raise_for_status()
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    return list_all_orders


def drf_unhandled_end(base: str, page_size: int) -> Callable[[wk.FetchContext[None]], Any]:
    """Not from the docs: a page-number fetch that raises on the ``404`` past the end.

    The ``wedge`` run holds the engine's safety net with it (a resumed pass that keeps
    failing at one page starts over): what a user gets who did not follow the docs.
    """

    async def fetch_pages(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders/pages/", params={"page": ctx.page, "page_size": page_size}
        )
        if response.not_modified:
            return wk.Page(items=[])
        body = response.json()
        return wk.Page(items=body["results"], has_more=body["next"] is not None)

    return fetch_pages


def drf_recipe(
    name: str, base: str, *, schedule: dict[str, str] | None = None, reconcile_every: str = "30s"
) -> wk.PollerDefinition[Any]:
    """The poller ``name`` against the DRF vendor at ``base``."""
    options: dict[str, Any] = {"schedule": _schedule(schedule)}
    reconcile = wk.Reconcile(every=reconcile_every, fetch=drf_reconcile_listing(base))
    quickstart = drf_quickstart(base)
    recipes: dict[str, Callable[[], wk.PollerDefinition[Any]]] = {
        "quickstart": lambda: _poller(
            name, quickstart, wk.TimestampCursor(field="updated_at", tie_break="id"), **options
        ),
        "overlap": lambda: _poller(
            name,
            quickstart,
            wk.TimestampCursor(field="updated_at", tie_break="id", overlap="2m"),
            **options,
        ),
        "lag": lambda: _poller(
            name,
            drf_timestamp_cursor(base),
            wk.TimestampCursor(field="updated_at", tie_break="id", lag="30s"),
            **options,
        ),
        "token": lambda: _poller(
            name, drf_token_cursor(base), wk.TokenCursor(), reconcile=reconcile, **options
        ),
        "snapshot": lambda: _poller(name, drf_gone_page(base, 100), wk.SnapshotDiff(), **options),
        "page-reconcile": lambda: _poller(
            name, drf_page_cursor(base), wk.PageCursor(initial=1), reconcile=reconcile, **options
        ),
        # A pass spanning cycles (as any pass cut by the page cap or a deadline does).
        "wedge-gone": lambda: _poller(
            name, drf_gone_page(base, 50), wk.SnapshotDiff(), max_pages_per_cycle=2, **options
        ),
        "wedge": lambda: _poller(
            name, drf_unhandled_end(base, 50), wk.SnapshotDiff(), max_pages_per_cycle=2, **options
        ),
    }
    if name not in recipes:
        raise ValueError(f"no DRF recipe {name!r}; known: {', '.join(recipes)}")
    return recipes[name]()


# --- json-server: the docs' fetches ---------------------------------------------------


def json_timestamp_only_filter(
    base: str, limit: int
) -> Callable[[wk.FetchContext[wk.TimestampPosition]], Any]:
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
        items = [
            row
            for row in rows
            if not (after_id is not None and row["updatedAt"] == since and row["id"] <= after_id)
        ]
        return wk.Page(items=items, has_more=len(rows) == limit)

    return fetch_orders


def json_snapshot_diff(base: str) -> Callable[[wk.FetchContext[None]], Any]:
    async def fetch_catalog(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{base}/orders",
            params={"_page": ctx.page, "_limit": 100, "_sort": "id"},
            raise_for_status=False,
        )
        if response.status in (404, 416) and ctx.page > 1:
            return wk.Page(gone=True)
        response.raise_for_status()
        if response.not_modified:
            return wk.Page(items=[])
        body = response.json()
        return wk.Page(items=body, has_more=ctx.page * 100 < int(response.headers["x-total-count"]))

    return fetch_catalog


def json_recipe(
    name: str, base: str, *, schedule: dict[str, str] | None = None, ties_limit: int = 20
) -> wk.PollerDefinition[Any]:
    """The poller ``name`` against json-server at ``base``."""
    options: dict[str, Any] = {"schedule": _schedule(schedule)}
    keyset = json_timestamp_only_filter(base, 100)
    recipes: dict[str, Callable[[], wk.PollerDefinition[Any]]] = {
        "quickstart": lambda: _poller(
            name, keyset, wk.TimestampCursor(field="updatedAt", tie_break="id"), **options
        ),
        "overlap": lambda: _poller(
            name,
            keyset,
            wk.TimestampCursor(field="updatedAt", tie_break="id", overlap="2m"),
            **options,
        ),
        "ties": lambda: _poller(
            name,
            json_timestamp_only_filter(base, ties_limit),
            wk.TimestampCursor(field="updatedAt"),
            **options,
        ),
        "snapshot": lambda: _poller(name, json_snapshot_diff(base), wk.SnapshotDiff(), **options),
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
