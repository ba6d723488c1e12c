"""Must NOT type-check: a fetch written for one cursor's position, given another cursor.

Each ``# case:`` region (up to the next one) must draw at least one error from mypy --strict
and from pyright --strict, and the code before the first case none
(``tests/e2e/test_typing.py``).
"""

from __future__ import annotations

from typing import Any

import watukuy as wk


async def fetch_since(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
    return wk.Page(items=[], has_more=False)


async def fetch_pages(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
    return wk.Page(items=[], has_more=False)


def advance(ctx: wk.AdvanceContext[int]) -> tuple[int, bool]:
    return ctx.cursor + 1, True


# case: a timestamp fetch given a token cursor
wk.define_poller(
    name="orders",
    identity=lambda order: order["id"],
    cursor=wk.TokenCursor(),
    fetch=fetch_since,
)
# case: a page fetch given a snapshot diff (whose position is None)
wk.define_poller(
    name="pages",
    identity=lambda order: order["id"],
    cursor=wk.SnapshotDiff(),
    fetch=fetch_pages,
)
# case: a timestamp fetch given a custom cursor of int positions
wk.define_poller(
    name="custom",
    identity=lambda order: order["id"],
    cursor=wk.CustomCursor(initial=0, advance=advance),
    fetch=fetch_since,
)
