"""Full listings paged by tokens: each page's token is committed with the pass, so a pass
cut by the page cap resumes at its next page in a new engine, on every store, and a gone
page at a token abandons the pass and forgets the token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import watukuy as wk
from watukuy.model.ports import StateStore
from watukuy.model.rows import ListingPass, PKey
from watukuy.testing import SeededRandom, VirtualClock

from .conftest import Recorder, item, open_store

T = "2025-12-31T12:00:00.000Z"
KEY = PKey("catalog")
SCHEDULE = wk.Schedule(min="1m", max="10m", jitter=0)


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@dataclass
class TokenListing:
    """A vendor listing in id order, paged by an opaque token (the last id of the page
    before), that answers ``Page(gone=True)`` for a token it has let expire."""

    size: int
    items: list[dict[str, Any]] = field(default_factory=list)
    expired: set[str] = field(default_factory=set)
    calls: list[tuple[str, int, str | None]] = field(default_factory=list)

    def answer(self, token: str | None) -> wk.Page[Any]:
        if token in self.expired:
            return wk.Page(gone=True)
        after = None if token is None else token.removeprefix("after:")
        rest = [dict(i) for i in sorted(self.items, key=lambda i: i["id"])]
        rest = [i for i in rest if after is None or i["id"] > after]
        chunk = rest[: self.size]
        if len(rest) > self.size:
            return wk.Page(items=chunk, cursor=f"after:{chunk[-1]['id']}", has_more=True)
        return wk.Page(items=chunk, has_more=False)

    async def fetch(self, ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        self.calls.append((ctx.lane, ctx.page, ctx.page_token))
        return self.answer(ctx.page_token)

    def remove(self, identity: str) -> None:
        self.items = [i for i in self.items if i["id"] != identity]


def listing_of(count: int, size: int) -> TokenListing:
    return TokenListing(size=size, items=[item(n, T) for n in range(1, count + 1)])


def catalog(fetch: Any, **options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("max_pages_per_cycle", 2)
    return wk.define_poller(
        name="catalog",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=SCHEDULE,
        **options,
    )


@dataclass
class Replicas:
    """Engines that share one store and clock, one new engine per tick (a restart, another
    replica, a serverless ``tick()`` per process)."""

    store: StateStore
    clock: VirtualClock
    recorder: Recorder = field(default_factory=Recorder)
    started: int = 0

    async def tick(self, poller: wk.PollerDefinition[Any]) -> None:
        await self.clock.advance("10m")  # past the schedule, and past a dead lease
        engine = wk.Engine(
            store=self.store,
            pollers=[poller],
            clock=self.clock,
            random=SeededRandom(7),
            instance_id=f"engine-{self.started}",
        )
        self.started += 1
        engine.on(poller.name, self.recorder)
        try:
            result = await engine.tick(catch_up=False)
        finally:
            await engine.stop()
        assert [polled.error for polled in result.polled] == [None] * len(result.polled)

    async def progress(self, lane: str = "live") -> ListingPass:
        state = await self.store.load_state(KEY)
        assert state is not None
        return state.listing.lanes[lane]

    def deleted(self) -> list[str]:
        return [e.subject for e in self.recorder.events if e.type == "deleted"]


@pytest.fixture
async def store(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[StateStore]:
    created = await open_store(store_kind, tmp_path, request)
    yield created
    await created.close()


@pytest.fixture
def replicas(store: StateStore) -> Replicas:
    return Replicas(store, VirtualClock())


async def test_a_token_paged_pass_resumes_in_a_new_engine(replicas: Replicas) -> None:
    listing = listing_of(7, size=2)  # pages [1,2] [3,4] [5,6] [7]
    poller = catalog(listing.fetch)

    await replicas.tick(poller)  # pages 1 and 2, then this engine is gone
    assert (await replicas.progress()).token == "after:item-004"
    await replicas.tick(poller)  # another engine reads pages 3 and 4 with their tokens
    assert listing.calls == [
        ("live", 1, None),
        ("live", 2, "after:item-002"),
        ("live", 3, "after:item-004"),
        ("live", 4, "after:item-006"),
    ]
    progress = await replicas.progress()
    assert (progress.completed, progress.abandoned, progress.pass_id) == (1, 0, None)
    assert progress.token is None
    assert len(replicas.recorder.events) == 7

    listing.remove("item-003")
    for _ in range(4):  # two more passes of two engines each
        await replicas.tick(poller)
    assert replicas.deleted() == ["item-003"]
    progress = await replicas.progress()
    assert (progress.completed, progress.abandoned) == (3, 0)
    assert len(replicas.recorder.events) == 8


async def test_a_gone_page_at_a_token_abandons_the_pass_and_forgets_the_token(
    replicas: Replicas,
) -> None:
    listing = listing_of(7, size=2)
    poller = catalog(listing.fetch)
    await replicas.tick(poller)
    listing.expired.add("after:item-004")  # the vendor's token expired meanwhile

    await replicas.tick(poller)
    assert listing.calls[-1] == ("live", 3, "after:item-004")
    progress = await replicas.progress()
    assert (progress.abandoned, progress.completed, progress.pass_id) == (1, 0, None)
    assert progress.token is None
    assert progress.last_abandoned is not None
    assert "page 3 is gone" in progress.last_abandoned

    listing.expired.clear()
    await replicas.tick(poller)  # a new pass, from the first page and no token
    assert listing.calls[-2:] == [("live", 1, None), ("live", 2, "after:item-002")]
    assert replicas.deleted() == []


@pytest.mark.parametrize("store_kind", ["sqlite"])
async def test_a_new_process_on_the_same_sqlite_file_finishes_the_pass(
    tmp_path: Path, store_kind: str
) -> None:
    path = tmp_path / "tokens.db"
    clock = VirtualClock()
    listing = listing_of(9, size=2)  # five pages
    recorder = Recorder()

    async def one_process() -> None:
        # Each tick is a process of its own: a store opened afresh on the file.
        replicas = Replicas(wk.SqliteStore(path), clock, recorder)
        await replicas.store.migrate()
        try:
            await replicas.tick(catalog(listing.fetch))
        finally:
            await replicas.store.close()

    for _ in range(3):  # pages 1-2, 3-4, 5
        await one_process()
    assert [token for _, _, token in listing.calls] == [
        None,
        "after:item-002",
        "after:item-004",
        "after:item-006",
        "after:item-008",
    ]
    listing.remove("item-001")
    listing.remove("item-009")
    for _ in range(4):  # two more passes of two processes each (four pages now)
        await one_process()
    assert sorted(e.subject for e in recorder.events if e.type == "deleted") == [
        "item-001",
        "item-009",
    ]
    store = wk.SqliteStore(path)
    try:
        state = await store.load_state(KEY)
    finally:
        await store.close()
    assert state is not None
    progress = state.listing.lanes["live"]
    assert (progress.completed, progress.abandoned, progress.token) == (3, 0, None)


@pytest.mark.parametrize("store_kind", ["memory"])
async def test_a_reconcile_listing_paged_by_tokens_resumes_too(replicas: Replicas) -> None:
    listing = listing_of(5, size=2)

    async def feed(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        return wk.Page(items=[], has_more=False)  # nothing changes: deletes come from reconcile

    poller = wk.define_poller(
        name="catalog",
        identity=lambda o: o["id"],
        cursor=wk.TokenCursor(),
        fetch=feed,
        schedule=SCHEDULE,
        reconcile=wk.Reconcile(every="1m", fetch=listing.fetch),
        max_pages_per_cycle=2,
    )
    await replicas.tick(poller)
    assert (await replicas.progress("reconcile")).token == "after:item-004"
    await replicas.tick(poller)
    assert listing.calls == [
        ("reconcile", 1, None),
        ("reconcile", 2, "after:item-002"),
        ("reconcile", 3, "after:item-004"),
    ]
    progress = await replicas.progress("reconcile")
    assert (progress.completed, progress.abandoned, progress.token) == (1, 0, None)


@pytest.mark.parametrize("store_kind", ["memory"])
async def test_a_generator_starts_where_the_pass_stands(replicas: Replicas) -> None:
    listing = listing_of(5, size=2)  # pages [1,2] [3,4] [5]
    firsts: list[tuple[int, str | None]] = []

    async def pages(ctx: wk.FetchContext[None]) -> AsyncIterator[wk.Page[Any]]:
        firsts.append((ctx.page, ctx.page_token))  # a generator is handed one ctx
        token = ctx.page_token
        while True:
            page = listing.answer(token)
            yield page
            if not page.has_more:
                return
            token = page.cursor

    poller = catalog(pages)
    await replicas.tick(poller)
    await replicas.tick(poller)
    assert firsts == [(1, None), (3, "after:item-004")]
    progress = await replicas.progress()
    assert (progress.completed, progress.abandoned) == (1, 0)
    assert len(replicas.recorder.events) == 5


@pytest.mark.parametrize("store_kind", ["memory"])
async def test_a_cursor_that_is_not_a_str_is_not_a_token(replicas: Replicas) -> None:
    # A page-number listing that returns its next page number as the cursor goes on as it
    # always did: paged by ctx.page, with no token.
    seen: list[tuple[int, str | None]] = []

    async def fetch(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        seen.append((ctx.page, ctx.page_token))
        chunk = [item(n, T) for n in (2 * ctx.page - 1, 2 * ctx.page) if n <= 5]
        return wk.Page(items=chunk, cursor=ctx.page + 1, has_more=ctx.page < 3)

    poller = catalog(fetch)
    await replicas.tick(poller)
    assert (await replicas.progress()).token is None
    await replicas.tick(poller)
    assert seen == [(1, None), (2, None), (3, None)]
    progress = await replicas.progress()
    assert (progress.completed, progress.abandoned) == (1, 0)
    assert len(replicas.recorder.events) == 5


@pytest.mark.parametrize("store_kind", ["memory"])
async def test_a_page_number_listing_with_the_same_str_cursor_on_every_page(
    replicas: Replicas,
) -> None:
    # A listing paged by ctx.page whose pages all carry one marker (a snapshot id) as their
    # cursor: the marker comes back as ctx.page_token, and the listing goes on as before.
    seen: list[tuple[int, str | None]] = []

    async def fetch(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
        seen.append((ctx.page, ctx.page_token))
        chunk = [item(n, T) for n in (2 * ctx.page - 1, 2 * ctx.page) if n <= 5]
        return wk.Page(items=chunk, cursor="snapshot-7", has_more=ctx.page < 3)

    await replicas.tick(catalog(fetch, max_pages_per_cycle=5))
    assert seen == [(1, None), (2, "snapshot-7"), (3, "snapshot-7")]
    progress = await replicas.progress()
    assert (progress.completed, progress.abandoned, progress.token) == (1, 0, None)
    assert len(replicas.recorder.events) == 5
