"""Engine bugs found by the chaos harness, pinned one test each (MemoryStore and SqliteStore).

Each test names the chaos run that found the bug; ``tests/chaos/test_chaos_regression_seeds.py``
replays that run itself.
"""

from __future__ import annotations

from typing import Any

import watukuy as wk
from watukuy.model.rows import PKey

from .conftest import BASE, Recorder, World, item, page_fetch, timestamp_fetch


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


async def test_an_interrupted_reconcile_listing_resumes_without_phantom_deletes(
    world: World,
) -> None:
    """Found by ``run_chaos(seed=6, strategy="page")``: a reconcile listing cut short (by a
    crash or a failed fetch) resumed at its persisted page with an empty set of seen
    identities, so every item of the earlier pages was reported ``deleted`` (and
    ``created`` again by the next listing). The identities a pass has seen are now marked
    in the store, page by page, so it resumes at the page that failed."""
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
        ("reconcile", 4, 0, None)  # pages 2 and 3
    ]
    assert [event.type for event in recorder.events] == ["created"] * 6
    state = await world.store.load_state(PKey("orders"))
    assert state is not None
    assert state.last_reconcile_at == world.clock.now()


async def test_validators_are_not_stored_for_a_page_lag_held_back(world: World) -> None:
    """ETags stored for a page whose newest items ``lag`` held back made the next identical
    request a 304, so those items stayed hidden until the listing changed."""
    from watukuy.model.events import iso_time

    now = world.clock.now()
    world.api.add(item(1, iso_time(now - 60_000)))
    world.api.add(item(2, iso_time(now - 1_000)))
    world.api.set_etags(True)
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id", lag="30s"),
        fetch=timestamp_fetch(limit=10),
        schedule=wk.Schedule(min="10s", max="10s", adaptive=False),
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick()
    assert [e.subject for e in recorder.events] == ["item-001"]
    for _ in range(6):
        await world.clock.advance("10s")
        await engine.tick()
    assert [e.subject for e in recorder.events] == ["item-001", "item-002"]


async def test_validators_of_a_page_lost_in_a_crash_are_not_kept(world: World) -> None:
    """A validator stored before the page's commit survived a crash between fetch and
    commit; the re-fetch then answered 304 and the page's changes were skipped."""
    world.api.add(item(1, "2025-12-31T00:00:01.000Z"))
    world.api.set_etags(True)

    class Crash(BaseException):
        pass

    class CrashOnCommit:
        def __init__(self, inner: Any) -> None:
            self._inner, self.dead = inner, False

        def __getattr__(self, name: str) -> Any:
            if self.dead:
                raise Crash
            return getattr(self._inner, name)

        @property
        def capabilities(self) -> Any:
            return self._inner.capabilities

        async def commit_poll(self, *args: Any) -> None:
            self.dead = True
            raise Crash

    poller = wk.define_poller(
        name="catalog",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=page_fetch(page_size=10),
    )
    crashing = World(clock=world.clock, api=world.api, store=CrashOnCommit(world.store))  # type: ignore[arg-type]
    dying = crashing.engine(poller, instance_id="dying")
    dying.on("catalog", Recorder())
    try:
        await dying.tick()
    except Crash:
        pass
    await world.clock.advance("1m")
    engine = world.engine(poller, instance_id="fresh")
    recorder = Recorder()
    engine.on("catalog", recorder)
    await engine.tick()
    assert [e.subject for e in recorder.events] == ["item-001"]
