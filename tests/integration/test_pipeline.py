"""Pages overlap by one step: the next page is asked for while the current one commits.

What must not change: every page reads the rows the page before it wrote, commits in
order, is delivered before the next page commits, and whatever fails first in that order
is what the cycle reports, with the cursor where the last landed page left it. A poller
with ``prefetch=False`` asks for a page only once the page before it is landed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.model.errors import StoreError
from watukuy.model.rows import CommitBatch, Lease, PKey
from watukuy.testing import SeededRandom
from watukuy.testing.faulty import ForwardingStore

from .conftest import BASE, World, orders, seed, timestamp_fetch

KEY = PKey("orders")


class Timeline(ForwardingStore):
    """Records when each page's commit starts and lands, and can refuse one."""

    def __init__(self, inner: Any, marks: list[str], fail_commit: int | None = None) -> None:
        super().__init__(inner)
        self.marks = marks
        self.commits = 0
        self.fail_commit = fail_commit

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        if not batch.events and not batch.upserts:
            return await super().commit_poll(key, lease, batch)
        self.commits += 1
        number = self.commits
        self.marks.append(f"commit {number}")
        # A few turns of the loop, as a commit written by another thread takes.
        for _ in range(5):
            await _turn()
        if number == self.fail_commit:
            self.marks.append(f"commit {number} failed")
            raise StoreError("commit_poll failed: the disk is full")
        await super().commit_poll(key, lease, batch)
        self.marks.append(f"landed {number}")
        return None


async def _turn() -> None:
    await asyncio.sleep(0)  # a turn of the event loop, not a wait: no time passes


def engine_on(world: World, store: Any, poller: wk.PollerDefinition[Any]) -> wk.Engine:
    return wk.Engine(
        store=store,
        pollers=[poller],
        clock=world.clock,
        random=SeededRandom(7),
        http_client=httpx.AsyncClient(transport=world.api.transport()),
    )


def recording_fetch(marks: list[str], limit: int = 10) -> Any:
    inner = timestamp_fetch(limit=limit)

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        marks.append(f"fetch {ctx.page}")
        return await inner(ctx)  # type: ignore[no-any-return]

    return fetch


def handler(marks: list[str]) -> Any:
    async def on_event(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        marks.append(f"deliver {event.sequence}")

    return on_event


def first(marks: list[str], *names: str) -> list[int]:
    return [marks.index(name) for name in names]


async def test_the_next_page_is_asked_for_before_the_page_before_it_lands(world: World) -> None:
    seed(world, 25)
    marks: list[str] = []
    engine = engine_on(world, Timeline(world.store, marks), orders(fetch=recording_fetch(marks)))
    engine.on("orders", handler(marks))
    (result,) = (await engine.tick()).polled
    assert result.error is None
    assert result.events == 25
    fetch_2, landed_1, deliver_1, commit_2 = first(
        marks, "fetch 2", "landed 1", "deliver 1", "commit 2"
    )
    assert fetch_2 < landed_1
    # The order that matters is kept: page 1 lands and is delivered before page 2 commits.
    assert landed_1 < deliver_1 < commit_2
    assert [m for m in marks if m.startswith("deliver")] == [f"deliver {n}" for n in range(1, 26)]


class SlowValidators(Timeline):
    """Reads stored validators in a few turns of the loop, as a store's own thread does."""

    async def get_validator(self, key: PKey, url_hash: str) -> Any:
        for _ in range(5):
            await _turn()
        return await super().get_validator(key, url_hash)


class MarkedTransport(httpx.AsyncBaseTransport):
    """Marks each request as it reaches the transport (``sent 1``, ``sent 2``...)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, marks: list[str]) -> None:
        self.inner = inner
        self.marks = marks
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        self.marks.append(f"sent {self.sent}")
        return await self.inner.handle_async_request(request)


async def test_the_page_asked_for_ahead_is_sent_before_the_page_before_it_is_built(
    world: World,
) -> None:
    # Reading its validators takes the request a few turns of the loop: the lane waits for
    # it to go out before it builds (and commits) the page before, rather than delaying
    # each of those turns by a stretch of its own work.
    seed(world, 25)
    marks: list[str] = []
    engine = wk.Engine(
        store=SlowValidators(world.store, marks),
        pollers=[orders(fetch=recording_fetch(marks))],
        clock=world.clock,
        random=SeededRandom(7),
        http_client=httpx.AsyncClient(transport=MarkedTransport(world.api.transport(), marks)),
    )
    engine.on("orders", handler(marks))
    (result,) = (await engine.tick()).polled
    assert result.error is None
    assert result.events == 25
    for page in (1, 2):
        sent, committed = first(marks, f"sent {page + 1}", f"commit {page}")
        assert sent < committed
    # What the prefetch keeps stays kept: page 1 lands and is delivered before page 2 commits.
    landed_1, deliver_1, commit_2 = first(marks, "landed 1", "deliver 1", "commit 2")
    assert landed_1 < deliver_1 < commit_2
    assert [m for m in marks if m.startswith("deliver")] == [f"deliver {n}" for n in range(1, 26)]


async def test_a_fetch_that_does_not_say_when_it_sends_still_overlaps(world: World) -> None:
    # Its own client, not ctx.http: nothing tells when its request goes out, so the lane
    # does not wait for it, and the page still travels while the page before commits.
    seed(world, 25)
    marks: list[str] = []
    own = httpx.AsyncClient(transport=world.api.transport())

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        marks.append(f"fetch {ctx.page}")
        response = await own.get(
            f"{BASE}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 10},
        )
        await asyncio.sleep(0)  # the answer arrives a turn later than the request left
        body = response.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    engine = engine_on(world, Timeline(world.store, marks), orders(fetch=fetch))
    engine.on("orders", handler(marks))
    (result,) = (await engine.tick()).polled
    await own.aclose()
    assert result.error is None
    assert result.events == 25
    fetch_2, landed_1 = first(marks, "fetch 2", "landed 1")
    assert fetch_2 < landed_1


async def test_a_fetch_waiting_for_an_earlier_page_s_delivery_is_not_waited_for_forever(
    world: World,
) -> None:
    # Page n is asked for while page n - 1 is built and page n - 2 lands (is delivered).
    # Before its request, each fetch waits until page n - 2 was delivered: the lane waits for
    # that request to go out only for a while (SENDING_PATIENCE_MS), then lands page n - 2,
    # which lets the fetch go on. A real clock: the patience is a sleep on the engine's clock.
    seed(world, 45)
    delivered = {page: asyncio.Event() for page in range(-1, 6)}
    delivered[-1].set()
    delivered[0].set()
    inner = timestamp_fetch(limit=10)

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        await delivered[ctx.page - 2].wait()
        return await inner(ctx)  # type: ignore[no-any-return]

    async def on_event(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.sequence % 10 == 0 or event.sequence == 45:
            delivered[(event.sequence + 9) // 10].set()

    engine = wk.Engine(
        store=world.store,
        pollers=[orders(fetch=fetch)],
        clock=wk.SystemClock(),
        random=SeededRandom(7),
        http_client=httpx.AsyncClient(transport=world.api.transport()),
    )
    engine.on("orders", on_event)
    result = await asyncio.wait_for(engine.tick(), timeout=60)
    (polled,) = result.polled
    assert polled.error is None
    assert polled.events == 45
    assert all(delivered[page].is_set() for page in range(1, 6))


async def test_without_prefetch_a_page_is_asked_for_once_the_page_before_it_landed(
    world: World,
) -> None:
    seed(world, 25)
    marks: list[str] = []
    engine = engine_on(
        world, Timeline(world.store, marks), orders(fetch=recording_fetch(marks), prefetch=False)
    )
    engine.on("orders", handler(marks))
    (result,) = (await engine.tick()).polled
    assert result.error is None
    assert result.events == 25
    for page in (1, 2):
        landed, delivered, asked = first(
            marks, f"landed {page}", f"deliver {page * 10}", f"fetch {page + 1}"
        )
        assert landed < delivered < asked


@pytest.mark.parametrize("prefetch", [True, False])
async def test_a_failed_fetch_after_a_page_keeps_that_page(world: World, prefetch: bool) -> None:
    seed(world, 25)
    marks: list[str] = []
    answered = 0
    inner = timestamp_fetch(limit=10)

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        nonlocal answered
        marks.append(f"fetch {ctx.page}")
        if ctx.page == 2:
            raise RuntimeError("the API dropped the connection")
        answered += 1
        return await inner(ctx)  # type: ignore[no-any-return]

    engine = engine_on(world, Timeline(world.store, marks), orders(fetch=fetch, prefetch=prefetch))
    engine.on("orders", handler(marks))
    (result,) = (await engine.tick()).polled
    assert result.error is not None
    assert "dropped the connection" in result.error["message"]
    # Page 1 committed and was delivered before the failure was reported.
    assert [m for m in marks if m.startswith("deliver")] == [f"deliver {n}" for n in range(1, 11)]
    state = await world.store.load_state(KEY)
    assert state is not None
    assert state.sequence == 10
    assert "item-010" in (state.cursors["live"] or "")
    assert await world.store.count_pending(KEY) == 0


async def test_a_failed_commit_is_reported_and_nothing_after_it_commits(world: World) -> None:
    seed(world, 25)
    marks: list[str] = []
    store = Timeline(world.store, marks, fail_commit=1)
    engine = engine_on(world, store, orders(fetch=recording_fetch(marks)))
    engine.on("orders", handler(marks))
    (result,) = (await engine.tick()).polled
    assert result.error is not None
    assert result.error["name"] == "StoreError"
    # Page 2 was asked for and hashed while page 1 committed, and is dropped with it.
    assert "fetch 2" in marks
    assert store.commits == 1
    assert not [m for m in marks if m.startswith("deliver")]
    state = await world.store.load_state(KEY)
    assert state is not None
    assert state.sequence == 0
    assert state.cursors.get("live") is None
    # The next run starts over from page 1 and gets everything.
    store.fail_commit = None
    marks.clear()
    await world.clock.advance_to(state.schedule.next_due_at or 0)
    await engine.trigger("orders")
    await engine.tick()
    assert [m for m in marks if m.startswith("deliver")] == [f"deliver {n}" for n in range(1, 26)]


async def test_a_deadline_reached_while_a_page_commits_drops_the_page_asked_for(
    world: World,
) -> None:
    seed(world, 25)
    marks: list[str] = []

    class Slow(Timeline):
        async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
            await super().commit_poll(key, lease, batch)
            if self.commits == 1:
                await world.clock.advance("6s")  # past the deadline, within its grace

    engine = engine_on(world, Slow(world.store, marks), orders(fetch=recording_fetch(marks)))
    engine.on("orders", handler(marks))
    (result,) = (await engine.tick(max_duration="5s")).polled
    assert result.error is None
    assert "fetch 2" in marks  # asked for ahead
    assert "commit 2" not in marks  # and left for the next run
    state = await world.store.load_state(KEY)
    assert state is not None
    assert state.sequence == 10
    assert state.schedule.next_due_at is not None
    assert state.schedule.next_due_at <= world.clock.now()  # due again: catch-up
    marks.clear()
    await engine.tick()
    assert [m for m in marks if m.startswith("deliver")] == [f"deliver {n}" for n in range(11, 26)]


async def test_a_poison_halt_commits_no_page_after_it(world: World) -> None:
    seed(world, 25)
    marks: list[str] = []
    store = Timeline(world.store, marks)
    poller = orders(
        fetch=recording_fetch(marks),
        delivery=wk.Delivery(retry=wk.Retry(attempts=1), poison=wk.Poison(action="halt")),
    )
    engine = engine_on(world, store, poller)

    async def refuse(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        if event.sequence == 3:
            raise RuntimeError("cannot take item 3")
        marks.append(f"deliver {event.sequence}")

    engine.on("orders", refuse)
    await engine.tick()
    # Page 2 was asked for while page 1 committed, but never committed.
    assert "fetch 2" in marks
    assert store.commits == 1
    state = await world.store.load_state(KEY)
    assert state is not None
    assert state.sequence == 10


def test_prefetch_takes_a_bool_and_names_itself_otherwise() -> None:
    assert orders().prefetch is True
    assert orders(prefetch=False).prefetch is False
    with pytest.raises(wk.ConfigError) as raised:
        orders(prefetch="no")
    assert raised.value.field == "prefetch"
    assert "'no'" in str(raised.value)
