"""The poller under test, written the way our docs tell a user to write it.

Each ``fetch`` goes through ``ctx.http`` (so validators and ``304`` are the engine's) and
answers a ``304`` with ``wk.Page(items=[])``, as the docs say
(https://watukuy.readthedocs.io/en/latest/http/#conditional-requests-and-304-not-modified).
The reconcile listing pages by number with ``ctx.page``, as in the example of
https://watukuy.readthedocs.io/en/latest/cursors/#reconcile-deletes-for-incremental-strategies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from watukuy.cursor import (
    AdvanceContext,
    CursorConfig,
    CustomCursor,
    PageCursor,
    SnapshotDiff,
    TimestampCursor,
    TokenCursor,
)
from watukuy.model.options import Backoff, Deletes, Delivery, Reconcile, Retry, Schedule
from watukuy.model.page import Page
from watukuy.runtime.context import FetchContext
from watukuy.runtime.poller import PollerDefinition, define_poller

from ._config import ConformanceConfig
from ._vendor import BASE_URL

__all__ = ["POLLER_NAME", "RECONCILE_EVERY_MS", "SCHEDULE_MAX_MS", "build_poller"]

POLLER_NAME: Final = "conformance"
SCHEDULE_MIN_MS: Final = 1_000
SCHEDULE_MAX_MS: Final = 3_000
BACKOFF_MAX_MS: Final = 4_000
RECONCILE_EVERY_MS: Final = 5_000
GUARD_RELEASE_PASSES: Final = 2

_Fetch = Callable[[FetchContext[Any]], Any]


def _since_fetch(config: ConformanceConfig) -> _Fetch:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        position = ctx.cursor
        params: dict[str, Any] = {"since": position.value, "limit": config.page_size}
        if config.tie_break:
            params["after_id"] = position.tie_break
        response = await ctx.http.get(f"{BASE_URL}/items", params=params)
        if response.not_modified:
            return Page(items=[])
        body = response.json()
        return Page(items=body["data"], has_more=body["has_more"])

    return fetch


def _token_fetch(config: ConformanceConfig) -> _Fetch:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        response = await ctx.http.get(
            f"{BASE_URL}/items/token",
            params={"cursor": ctx.cursor.value, "limit": config.page_size},
        )
        if response.not_modified:
            return Page(items=[])
        body = response.json()
        return Page(items=body["data"], cursor=body["next"])

    return fetch


def _page_fetch(config: ConformanceConfig, *, by_cursor: bool) -> _Fetch:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        number = ctx.cursor.page if by_cursor else ctx.page
        response = await ctx.http.get(
            f"{BASE_URL}/items/page", params={"page": number, "page_size": config.page_size}
        )
        if response.not_modified:
            return Page(items=[])
        body = response.json()
        return Page(items=body["data"], has_more=body["has_more"])

    return fetch


def _custom_fetch(config: ConformanceConfig) -> _Fetch:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        position: dict[str, Any] = ctx.cursor
        response = await ctx.http.get(
            f"{BASE_URL}/items",
            params={
                "since": position.get("since"),
                "after_id": position.get("after_id"),
                "limit": config.page_size,
            },
        )
        if response.not_modified:
            return Page(items=[])
        body = response.json()
        return Page(items=body["data"], has_more=body["has_more"])

    return fetch


def _custom_advance(ctx: AdvanceContext[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    if not ctx.items:
        return ctx.cursor, True
    last = ctx.items[-1]
    return {"since": last["updated_at"], "after_id": last["id"]}, ctx.has_more is not True


async def _still_there(identity: str, ctx: FetchContext[Any]) -> bool:
    response = await ctx.http.get(
        f"{BASE_URL}/items/one", params={"id": identity}, raise_for_status=False
    )
    status: int = response.status
    if status not in (200, 404):
        raise RuntimeError(f"verify: the vendor answered {status}")
    return status == 200


def _identity(item: Any) -> str:
    return str(item["id"])


def _counter(item: Any) -> Any:
    return item["version"]


def _value(item: Any) -> Any:
    return {"value": item["value"]}


def build_poller(config: ConformanceConfig, *, start_iso: str) -> PollerDefinition[Any]:
    """The poller for ``config``.

    Args:
        config: The configuration under test.
        start_iso: The run's start time (``initial`` of an ``initial_now`` timestamp cursor).
    """
    cursor: CursorConfig
    if config.strategy == "timestamp":
        cursor = TimestampCursor(
            field="updated_at",
            tie_break="id" if config.tie_break else None,
            initial=start_iso if config.initial_now else None,
            lag=f"{config.lag_ms}ms",
            overlap=None if config.lookback else f"{config.overlap_ms}ms",
        )
        fetch = _since_fetch(config)
    elif config.strategy == "token":
        cursor = TokenCursor()
        fetch = _token_fetch(config)
    elif config.strategy == "page":
        cursor = PageCursor(initial=1)
        fetch = _page_fetch(config, by_cursor=True)
    elif config.strategy == "snapshot_diff":
        cursor = SnapshotDiff()
        fetch = _page_fetch(config, by_cursor=False)
    else:
        cursor = CustomCursor(initial={"since": None, "after_id": None}, advance=_custom_advance)
        fetch = _custom_fetch(config)
    reconcile = None
    if config.reconcile and not config.full_listing:
        reconcile = Reconcile(
            every=f"{RECONCILE_EVERY_MS}ms", fetch=_page_fetch(config, by_cursor=False)
        )
    return define_poller(
        name=POLLER_NAME,
        identity=_identity,
        version=_counter if config.change_key == "counter" else None,
        fingerprint=_value if config.change_key == "value" else None,
        cursor=cursor,
        fetch=fetch,
        schedule=Schedule(
            min=f"{SCHEDULE_MIN_MS}ms",
            max=f"{SCHEDULE_MAX_MS}ms",
            backoff=Backoff(base="500ms", factor=2, max=f"{BACKOFF_MAX_MS}ms"),
        ),
        delivery=Delivery(
            concurrency=config.concurrency,
            retry=Retry(attempts=5, backoff=Backoff(base="200ms", factor=2, max="1s")),
        ),
        reconcile=reconcile,
        # No operator answers the mass-delete guard here: held deletes go out once the
        # passes after them still want them (deletes that pile up while the listing keeps
        # changing are released together, and checked like any other).
        deletes=Deletes(
            verify=_still_there if config.verify and config.deletes_observable else None,
            guard_release_passes=GUARD_RELEASE_PASSES,
        ),
        max_pages_per_cycle=config.page_cap,
    )
