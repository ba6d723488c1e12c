"""The poller under test, one per cursor strategy, reading the fake API over ``ctx.http``.

Every strategy sees the same dataset: items ``{"id", "value", "version", "updated_at"}``
whose ids only ever grow (a deleted id is never reused), so the harness can hold each id to
a simple life: ``created``, ``updated``..., at most one ``deleted``, then silence.

- ``timestamp`` follows the keyset listing with ``lag="1s"``: the fake stamps
  ``updated_at`` with the virtual clock, and a mutation may land on the very millisecond of
  a poll, after it. The lag is what keeps that late row from falling behind the watermark.
  ``version`` is the item's own counter.
- ``token`` follows the opaque-token listing (a full pass per cycle); ``version`` is the
  item's counter.
- ``page`` walks numbered pages of the id-ordered listing with the cursor's page number,
  and reuses that same fetch for its reconcile listing. The content hash decides.
- ``snapshot_diff`` lists everything with ``ctx.page`` and compares it with the snapshot,
  which is also how it sees deletes. The content hash decides.
- ``custom`` keeps its own ``{"since", "after_id"}`` keyset in a ``CustomCursor`` and holds
  back items younger than one second itself. The content hash decides.

The incremental strategies cannot see deletes. With ``reconcile`` they get a reconcile
listing (``ctx.page`` over the page route, or the live fetch for ``page``) every 30 virtual
seconds, and deletes become observable; without it, deletes are simply not observable.
``snapshot_diff`` sees deletes by itself and never gets one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from watukuy.cursor import (
    AdvanceContext,
    CursorConfig,
    CustomCursor,
    PageCursor,
    SnapshotDiff,
    TimestampCursor,
    TokenCursor,
)
from watukuy.model.options import Backoff, Delivery, Reconcile, Retry, Schedule
from watukuy.model.page import Page
from watukuy.runtime.context import FetchContext
from watukuy.runtime.poller import PollerDefinition, define_poller
from watukuy.testing.fake_api._items import parse_instant

__all__ = ["POLLER_NAME", "STRATEGIES", "ChaosStrategy", "build_poller"]

ChaosStrategy = Literal["timestamp", "token", "page", "snapshot_diff", "custom"]
"""A cursor strategy the chaos harness can run its poller with."""

STRATEGIES: Final[tuple[ChaosStrategy, ...]] = (
    "timestamp",
    "token",
    "page",
    "snapshot_diff",
    "custom",
)
"""Every strategy of :data:`ChaosStrategy`, the ones a sweep runs by default."""

POLLER_NAME: Final = "chaos"
PAGE_SIZE: Final = 10
LAG_MS: Final = 1_000
SCHEDULE_MIN_MS: Final = 5_000
RECONCILE_EVERY_MS: Final = 30_000

_PageFn = Callable[[FetchContext[Any]], Any]


def _items_fetch(base: str) -> _PageFn:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        position = ctx.cursor
        response = await ctx.http.get(
            f"{base}/items",
            params={"since": position.value, "after_id": position.tie_break, "limit": PAGE_SIZE},
        )
        body = response.json()
        return Page(items=body["data"], has_more=body["has_more"])

    return fetch


def _token_fetch(base: str) -> _PageFn:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        response = await ctx.http.get(
            f"{base}/items/token", params={"cursor": ctx.cursor.value, "limit": PAGE_SIZE}
        )
        body = response.json()
        return Page(items=body["data"], cursor=body["next"])

    return fetch


def _page_fetch(base: str, *, by_cursor: bool) -> _PageFn:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        number = ctx.cursor.page if by_cursor else ctx.page
        response = await ctx.http.get(
            f"{base}/items/page", params={"page": number, "page_size": PAGE_SIZE}
        )
        body = response.json()
        return Page(items=body["data"], has_more=body["has_more"])

    return fetch


def _custom_fetch(base: str, now: Callable[[], int]) -> _PageFn:
    async def fetch(ctx: FetchContext[Any]) -> Page[Any]:
        position: dict[str, Any] = ctx.cursor
        response = await ctx.http.get(
            f"{base}/items",
            params={
                "since": position.get("since"),
                "after_id": position.get("after_id"),
                "limit": PAGE_SIZE,
            },
        )
        body = response.json()
        items: list[dict[str, Any]] = body["data"]
        # Hold back what is younger than the lag, like TimestampCursor(lag=...) does: the
        # listing is sorted by time, so what is held back is a tail, fetched next cycle.
        horizon = (now() - LAG_MS) * 1000
        settled = [item for item in items if (parse_instant(item["updated_at"]) or 0) <= horizon]
        more = bool(body["has_more"]) and len(settled) == len(items)
        return Page(items=settled, has_more=more)

    return fetch


def _custom_advance(ctx: AdvanceContext[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    if not ctx.items:
        return ctx.cursor, True
    last = ctx.items[-1]
    return {"since": last["updated_at"], "after_id": last["id"]}, ctx.has_more is not True


def build_poller(
    strategy: ChaosStrategy,
    *,
    base_url: str,
    now: Callable[[], int],
    concurrency: int,
    retain_payload: bool,
    reconcile: bool,
) -> PollerDefinition[Any]:
    """The poller the harness drives for ``strategy``.

    Args:
        strategy: Which cursor strategy.
        base_url: Where the fake API answers (its in-process transport).
        now: The virtual clock (the custom strategy holds back young items itself).
        concurrency: ``delivery.concurrency``.
        retain_payload: ``retain="payload"`` instead of ``"hash"``.
        reconcile: Give an incremental strategy a reconcile listing (ignored for
            ``snapshot_diff``).
    """
    cursor: CursorConfig
    version: Callable[[Any], Any] | None = None
    listing = _page_fetch(base_url, by_cursor=False)
    if strategy == "timestamp":
        cursor = TimestampCursor(field="updated_at", tie_break="id", lag=f"{LAG_MS}ms")
        fetch = _items_fetch(base_url)
        version = _version
    elif strategy == "token":
        cursor = TokenCursor()
        fetch = _token_fetch(base_url)
        version = _version
    elif strategy == "page":
        cursor = PageCursor(initial=1)
        fetch = _page_fetch(base_url, by_cursor=True)
        # Reuse the live fetch, which reads ctx.cursor: a reconcile listing must start
        # from page 1 every time, even after a crash interrupted the previous one.
        listing = fetch
    elif strategy == "snapshot_diff":
        cursor = SnapshotDiff()
        fetch = _page_fetch(base_url, by_cursor=False)
        reconcile = False
    else:
        cursor = CustomCursor(initial={"since": None, "after_id": None}, advance=_custom_advance)
        fetch = _custom_fetch(base_url, now)
    return define_poller(
        name=POLLER_NAME,
        identity=_identity,
        version=version,
        cursor=cursor,
        fetch=fetch,
        schedule=Schedule(min=f"{SCHEDULE_MIN_MS}ms", max="30s"),
        delivery=Delivery(
            concurrency=concurrency,
            retry=Retry(attempts=3, backoff=Backoff(base="1s", factor=2, max="4s")),
        ),
        retain="payload" if retain_payload else "hash",
        reconcile=Reconcile(every=f"{RECONCILE_EVERY_MS}ms", fetch=listing) if reconcile else None,
    )


def _identity(item: Any) -> str:
    return str(item["id"])


def _version(item: Any) -> Any:
    return item["version"]
