"""Engine bugs found by the chaos harness, pinned one test each (MemoryStore and SqliteStore).

Each test names the chaos run that found the bug; ``tests/chaos/test_chaos_regression_seeds.py``
replays that run itself.
"""

from __future__ import annotations

from typing import Any

import watukuy as wk
from watukuy.core.rows import PKey

from .conftest import BASE, Recorder, World, item, timestamp_fetch


def numbered_listing(page_size: int, fail_on_page: int | None) -> Any:
    """A reconcile listing that pages by ``ctx.cursor`` (as a page poller's own fetch does)
    and breaks off once at ``fail_on_page``."""
    broken = {"left": 1 if fail_on_page is not None else 0}

    async def listing(ctx: wk.FetchContext[wk.PagePosition]) -> wk.Page[Any]:
        number = ctx.cursor.page
        if number == fail_on_page and broken["left"]:
            broken["left"] -= 1
            raise RuntimeError(f"the listing broke off at page {number}")
        res = await ctx.http.get(
            f"{BASE}/items/page", params={"page": number, "page_size": page_size}
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return listing


async def test_an_interrupted_reconcile_listing_starts_over_from_page_one(world: World) -> None:
    """Found by ``run_chaos(seed=6, strategy="page")``: a reconcile listing cut short (by a
    crash or a failed fetch) resumed at its persisted page with an empty set of seen
    identities, so every item of the earlier pages was reported ``deleted`` (and
    ``created`` again by the next listing)."""
    for n in range(1, 7):
        world.api.add(item(n, f"2025-12-31T00:00:{n:02d}.000Z"))
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        version=lambda o: o["version"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=timestamp_fetch(limit=10),
        reconcile=wk.Reconcile(every="1h", fetch=numbered_listing(2, fail_on_page=2)),
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)

    first = await engine.tick()
    assert [(r.lane, r.events) for r in first.polled] == [("live", 6), ("reconcile", 0)]
    reconcile_error = first.polled[1].error
    assert reconcile_error is not None
    assert reconcile_error["message"] == "the listing broke off at page 2"

    await world.clock.advance("1s")
    second = await engine.tick()
    assert [(r.lane, r.items, r.events, r.error) for r in second.polled] == [
        ("reconcile", 6, 0, None)
    ]
    assert [event.type for event in recorder.events] == ["created"] * 6
    state = await world.store.load_state(PKey("orders"))
    assert state is not None
    assert state.last_reconcile_at == world.clock.now()
