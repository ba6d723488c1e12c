"""Listings that end early: a page that is gone past the end of a listing that shrank
while it was read (``Page(gone=True)``), a resumed pass that keeps failing at the same
page, and token cursors that keep their place once caught up.

The vendors here answer like Django REST Framework: ``PageNumberPagination`` answers
``404 {"detail": "Invalid page."}`` past its last page, and ``CursorPagination`` hands out
a ``next`` link that is ``null`` on the last page.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import pytest

import watukuy as wk
from watukuy.testing import SeededRandom

from .conftest import Recorder, World, item

BASE = "https://drf.example"
T = "2025-12-31T12:00:00.000Z"
Lane = Literal["live", "reconcile"]


@dataclass
class PageNumberVendor:
    """``GET /orders?page=N``: DRF's ``PageNumberPagination`` over ``items`` (``size`` a
    page). Page 1 always exists; a page past the last answers ``404``."""

    items: list[dict[str, Any]]
    size: int = 100
    calls: list[int] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        number = int(request.url.params.get("page", "1"))
        self.calls.append(number)
        pages = max(1, -(-len(self.items) // self.size))
        if number > pages:
            return httpx.Response(404, json={"detail": "Invalid page."})
        start = (number - 1) * self.size
        more = number < pages
        return httpx.Response(
            200,
            json={
                "count": len(self.items),
                "next": f"{BASE}/orders?page={number + 1}" if more else None,
                "results": self.items[start : start + self.size],
            },
        )

    def delete(self, count: int) -> None:
        """Another client deletes the first ``count`` items."""
        del self.items[:count]

    def update(self, identity: str) -> None:
        for row in self.items:
            if row["id"] == identity:
                row["version"] += 1


async def fetch_ending_with_gone(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    """The documented fetch: a 404 past the first page says the page is gone."""
    response = await ctx.http.get(
        f"{BASE}/orders", params={"page": ctx.page}, raise_for_status=False
    )
    if response.status == 404 and ctx.page > 1:
        return wk.Page(gone=True)
    response.raise_for_status()
    body = response.json()
    return wk.Page(items=body["results"], has_more=body["next"] is not None)


async def fetch_raising(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    """A fetch that knows nothing of the end: the 404 raises ``HttpError``."""
    response = await ctx.http.get(f"{BASE}/orders", params={"page": ctx.page})
    body = response.json()
    return wk.Page(items=body["results"], has_more=body["next"] is not None)


async def nothing_new(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
    return wk.Page(items=[], has_more=False)


def listing_poller(lane: Lane, fetch: Callable[..., Any]) -> wk.PollerDefinition[Any]:
    """A full listing of the vendor on ``lane``: ``SnapshotDiff`` for the live lane, or the
    ``reconcile`` of a timestamp poller; two pages a cycle."""
    common: dict[str, Any] = {
        "name": "orders",
        "identity": lambda order: order["id"],
        "version": lambda order: order["version"],
        "schedule": wk.Schedule(min="1m", max="10m", jitter=0),
        "max_pages_per_cycle": 2,
    }
    if lane == "live":
        return wk.define_poller(cursor=wk.SnapshotDiff(), fetch=fetch, **common)
    return wk.define_poller(
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=nothing_new,
        reconcile=wk.Reconcile(every="6h", fetch=fetch),
        **common,
    )


def engine_for(world: World, vendor: Any, poller: wk.PollerDefinition[Any]) -> wk.Engine:
    return wk.Engine(
        store=world.store,
        pollers=[poller],
        clock=world.clock,
        random=SeededRandom(7),
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(vendor.handle)),
    )


async def listing_of(engine: wk.Engine, lane: Lane) -> dict[str, Any]:
    return dict((await engine.inspect())["pollers"][0]["listing"][lane])


def lane_results(result: wk.TickResult, lane: Lane) -> list[wk.TickPollResult]:
    return [polled for polled in result.polled if polled.lane == lane]


async def read_two_pages_of_three(
    world: World, lane: Lane, fetch: Callable[..., Any]
) -> tuple[PageNumberVendor, wk.Engine, Recorder]:
    """The pass reads pages 1-2 of 3 (the page cap cuts the cycle there); then another
    client deletes 100 orders, so the listing has two pages and page 3 is gone."""
    vendor = PageNumberVendor([item(n, T) for n in range(1, 251)])
    engine = engine_for(world, vendor, listing_poller(lane, fetch))
    recorder = Recorder()
    engine.on("orders", recorder)
    await engine.tick(catch_up=False)
    assert vendor.calls == [1, 2]
    assert len(recorder.events) == 200
    assert (await listing_of(engine, lane))["pass"]["pages"] == 2
    vendor.delete(100)
    return vendor, engine, recorder


@pytest.mark.parametrize("lane", ["live", "reconcile"])
async def test_a_pass_whose_next_page_is_gone_is_abandoned_without_deletes(
    world: World, lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    vendor, engine, recorder = await read_two_pages_of_three(world, lane, fetch_ending_with_gone)

    with caplog.at_level(logging.INFO, logger="watukuy"):
        result = await engine.tick(catch_up=False)  # the pass resumes at page 3: gone
    assert vendor.calls == [1, 2, 3]
    assert [polled.error for polled in lane_results(result, lane)] == [None]
    report = await listing_of(engine, lane)
    assert report["pass"] is None
    assert (report["completed"], report["abandoned"]) == (0, 1)
    assert report["last_abandoned"] == (
        "page 3 is gone (Page(gone=True)): the listing shrank while it was read"
    )
    assert report["last_abandoned_at"] == world.clock.now()
    assert any("pass 1 abandoned, no deletes" in r.getMessage() for r in caplog.records)
    assert [e for e in recorder.events if e.type == "deleted"] == []

    # An update made afterwards is delivered by the next pass, which starts at page 1 and
    # is complete after page 2 (the listing has two pages now).
    vendor.update("item-200")
    await world.clock.advance("6h")
    await engine.tick(catch_up=False)
    assert vendor.calls == [1, 2, 3, 1, 2]
    assert recorder.by_subject("item-200") == ["created", "updated"]
    report = await listing_of(engine, lane)
    assert (report["completed"], report["abandoned"]) == (1, 1)
    assert report["last_outcome"] == "no deletes yet: 1 of 2 complete passes"

    # The abandoned pass confirmed nothing: the deletes wait for a second complete pass.
    await world.clock.advance("6h")
    await engine.tick(catch_up=False)
    deleted = [e.subject for e in recorder.events if e.type == "deleted"]
    assert deleted == [f"item-{n:03d}" for n in range(1, 101)]


@pytest.mark.parametrize("lane", ["live", "reconcile"])
async def test_a_pass_failing_again_at_the_same_page_starts_over(
    world: World, lane: Lane, caplog: pytest.LogCaptureFixture
) -> None:
    vendor, engine, recorder = await read_two_pages_of_three(world, lane, fetch_raising)

    first = await engine.tick(catch_up=False)  # resumes at page 3: 404, a failure like any other
    [failed] = lane_results(first, lane)
    assert failed.error is not None
    assert "responded 404" in failed.error["message"]
    report = await listing_of(engine, lane)
    assert report["pass"]["pages"] == 2  # still the same pass, to resume after the backoff
    assert report["abandoned"] == 0

    with caplog.at_level(logging.WARNING, logger="watukuy"):
        await world.clock.advance("10m")  # past the backoff
        second = await engine.tick(catch_up=False)  # page 3 fails again: the pass is abandoned
    [failed] = lane_results(second, lane)
    assert failed.error is not None  # it still counts as a failure (backoff, circuit)
    assert vendor.calls == [1, 2, 3, 3]
    report = await listing_of(engine, lane)
    assert report["pass"] is None
    assert report["abandoned"] == 1
    assert report["last_abandoned"].startswith("page 3 failed 2 times in a row: GET ")
    assert "responded 404" in report["last_abandoned"]
    [warning] = [r for r in caplog.records if "abandoned, no deletes" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert f"({lane} lane)" in warning.getMessage()
    assert "page 3 failed 2 times in a row" in warning.getMessage()
    state = (await engine.inspect())["pollers"][0]["schedule"]
    side = state if lane == "live" else state["lanes"][lane]
    assert side["circuit"] == "closed"

    vendor.update("item-150")
    await world.clock.advance("10m")
    third = await engine.tick(catch_up=False)  # a new pass from page 1, complete after page 2
    assert [polled.error for polled in lane_results(third, lane)] == [None]
    assert vendor.calls == [1, 2, 3, 3, 1, 2]
    assert recorder.by_subject("item-150") == ["created", "updated"]
    assert [e for e in recorder.events if e.type == "deleted"] == []
    assert (await listing_of(engine, lane))["completed"] == 1


async def test_a_failure_at_another_page_starts_the_count_again(world: World) -> None:
    vendor = PageNumberVendor([item(n, T) for n in range(1, 10)], size=2)  # five pages
    failing = {3, 4}
    asked: list[int] = []

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        asked.append(ctx.page)
        if ctx.page in failing:
            failing.discard(ctx.page)
            raise RuntimeError(f"page {ctx.page} timed out")
        return await fetch_ending_with_gone(ctx)

    engine = engine_for(world, vendor, listing_poller("live", fetch))
    recorder = Recorder()
    engine.on("orders", recorder)
    for _ in range(4):
        await engine.tick(catch_up=False)
        await world.clock.advance("10m")
    # Pages 1-2; 3 fails; 3, then 4 fails; 4 and 5: one failure at each page, never two
    # in a row at one page, so the pass is never abandoned.
    assert asked == [1, 2, 3, 3, 4, 4, 5]
    report = await listing_of(engine, "live")
    assert (report["completed"], report["abandoned"]) == (1, 0)
    assert len(recorder.events) == 9


async def test_a_gone_first_page_is_a_fetch_failure(world: World) -> None:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(gone=True)

    vendor = PageNumberVendor([])
    engine = engine_for(world, vendor, listing_poller("live", fetch))
    result = await engine.tick()
    [failed] = result.polled
    assert failed.error is not None
    assert failed.error["message"].startswith(
        "page 1 of a full listing answered Page(gone=True): a listing always has a first page"
    )
    assert (await engine.inspect())["pollers"][0]["listing"] == {}  # no pass began, none abandoned


# --- token cursors -------------------------------------------------------------------------


def _token(position: int) -> str:
    return base64.urlsafe_b64encode(f"p={position}".encode()).decode()


@dataclass
class CursorVendor:
    """``GET /orders?cursor=``: DRF's ``CursorPagination`` ordered by change: ``next`` is a
    link to the rows after the page's last one, ``null`` on the last page. A row that
    changes moves to the end. Tokens of ``expired`` answer ``410``."""

    rows: list[dict[str, Any]]
    size: int = 10
    tokens: list[str | None] = field(default_factory=list)
    expired: set[str] = field(default_factory=set)

    def handle(self, request: httpx.Request) -> httpx.Response:
        token = request.url.params.get("cursor")
        self.tokens.append(token)
        if token in self.expired:
            return httpx.Response(410, json={"detail": "This cursor has expired."})
        after = 0 if token is None else int(base64.urlsafe_b64decode(token).decode()[2:])
        chunk = self.rows[after : after + self.size]
        end = after + len(chunk)
        link = f"{BASE}/orders?cursor={_token(end)}" if end < len(self.rows) else None
        return httpx.Response(200, json={"next": link, "results": chunk})

    def update(self, identity: str) -> None:
        [row] = [row for row in self.rows if row["id"] == identity]
        self.rows.remove(row)
        self.rows.append({**row, "version": row["version"] + 1})


async def fetch_by_cursor(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    response = await ctx.http.get(
        f"{BASE}/orders", params={"cursor": ctx.cursor.value}, raise_for_status=False
    )
    if response.status == 410:  # an expired cursor: start over
        return wk.Page(gone=True)
    response.raise_for_status()
    body = response.json()
    following = body["next"]
    token = None if following is None else httpx.URL(following).params["cursor"]
    return wk.Page(items=body["results"], cursor=token, has_more=token is not None)


def token_engine(world: World, vendor: CursorVendor) -> tuple[wk.Engine, Recorder]:
    poller = wk.define_poller(
        name="orders",
        identity=lambda order: order["id"],
        version=lambda order: order["version"],
        cursor=wk.TokenCursor(),
        fetch=fetch_by_cursor,
        schedule=wk.Schedule(min="1m", max="1m", jitter=0),
    )
    engine = engine_for(world, vendor, poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    return engine, recorder


async def test_a_caught_up_token_cursor_asks_from_its_last_page(world: World) -> None:
    vendor = CursorVendor([item(n, T) for n in range(1, 26)])
    engine, recorder = token_engine(world, vendor)
    await engine.tick()
    assert vendor.tokens == [None, _token(10), _token(20)]
    assert len(recorder.events) == 25
    report = (await engine.inspect())["pollers"][0]
    assert report["cursors"]["live"] == {"value": _token(20)}

    for _ in range(3):  # idle: one request a cycle, for the last page again
        await world.clock.advance("1m")
        await engine.tick()
    assert vendor.tokens[3:] == [_token(20)] * 3
    assert len(recorder.events) == 25

    vendor.update("item-003")  # moves to the end of the change order
    await world.clock.advance("1m")
    await engine.tick()
    assert vendor.tokens[6:] == [_token(20)]
    assert recorder.by_subject("item-003") == ["created", "updated"]


async def test_an_expired_token_starts_over(world: World) -> None:
    vendor = CursorVendor([item(n, T) for n in range(1, 26)])
    engine, recorder = token_engine(world, vendor)
    await engine.tick()
    vendor.expired.add(_token(20))
    await world.clock.advance("1m")
    result = await engine.tick()
    assert [polled.error for polled in result.polled] == [None]
    report = (await engine.inspect())["pollers"][0]
    assert report["cursors"]["live"] == {"value": None}
    await world.clock.advance("1m")
    await engine.tick()
    assert vendor.tokens == [None, _token(10), _token(20), _token(20), None, _token(10), _token(20)]
    assert len(recorder.events) == 25  # read again, nothing new


async def test_a_generator_that_yields_a_gone_page_ends_the_cycle(world: World) -> None:
    async def fetch(ctx: wk.FetchContext[wk.TokenPosition]) -> Any:
        yield wk.Page(items=[item(1, T)], cursor="t1")
        yield wk.Page(gone=True)  # t1 expired before the next request
        yield wk.Page(items=[item(2, T)], cursor="t2", has_more=False)

    poller = wk.define_poller(
        name="orders", identity=lambda order: order["id"], cursor=wk.TokenCursor(), fetch=fetch
    )
    engine = world.engine(poller)
    recorder = Recorder()
    engine.on("orders", recorder)
    result = await engine.tick()
    assert [polled.error for polled in result.polled] == [None]
    assert [e.subject for e in recorder.events] == ["item-001"]
    assert (await engine.inspect())["pollers"][0]["cursors"]["live"] == {"value": None}
