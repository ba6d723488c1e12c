"""Each paginator against a real HTTP vendor on 127.0.0.1, through a real engine.

The engine ticks on a virtual clock (so schedules and reconcile intervals can be stepped
over) while every request travels over a real socket to :mod:`._vendor`, through the
engine's own HTTP client: created, updated and deleted must come out right for each
paginator, however its listing ends.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import watukuy as wk
from support.servers import engine_http
from watukuy import rest
from watukuy.http import HttpxFactory
from watukuy.testing import SeededRandom, VirtualClock

from ._vendor import Vendor, serving

SCHEDULE = wk.Schedule(min="1m", max="5m", jitter=0)


@dataclass
class Recorder:
    events: list[wk.Event[Any]] = field(default_factory=list)

    async def __call__(self, event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[str]:
        return sorted(str(event.subject) for event in self.events if event.type == kind)

    def take(self) -> dict[str, list[str]]:
        """The events since the last take, by type."""
        taken = {kind: self.of(kind) for kind in ("created", "updated", "deleted")}
        self.events.clear()
        return {kind: subjects for kind, subjects in taken.items() if subjects}


@dataclass
class Run:
    vendor: Vendor
    clock: VirtualClock
    store: wk.MemoryStore
    recorder: Recorder = field(default_factory=Recorder)
    engines: list[wk.Engine] = field(default_factory=list)

    def engine(self, poller: wk.PollerDefinition[Any]) -> wk.Engine:
        engine = wk.Engine(
            store=self.store,
            pollers=[poller],
            clock=self.clock,
            random=SeededRandom(5),
            instance_id=f"engine-{len(self.engines)}",
        )
        engine.on(poller.name, self.recorder)
        self.engines.append(engine)
        return engine

    async def tick(self, engine: wk.Engine, *, catch_up: bool = True) -> wk.TickResult:
        await self.clock.advance("10m")  # every key is due again
        result = await engine.tick(catch_up=catch_up)
        errors = [polled.error for polled in result.polled if polled.error is not None]
        assert errors == []
        return result


@pytest.fixture
def vendor() -> Iterator[Vendor]:
    with serving(size=3) as served:
        for n in range(1, 8):
            served.put(f"i{n:02d}", second=n)
        yield served


@pytest.fixture
async def run(vendor: Vendor) -> AsyncIterator[Run]:
    world = Run(vendor, VirtualClock(start="2026-01-01T00:10:00Z"), wk.MemoryStore())
    yield world
    for engine in world.engines:
        await engine.stop()


ALL = [f"i{n:02d}" for n in range(1, 8)]


def listing(vendor: Vendor, route: str, paginator: Any = None, **options: Any) -> Any:
    """The poller of the vendor's listing at ``route``: ``define_rest_poller`` with what
    the route needs (its request and items), the ids and versions of the vendor's items,
    and every other option as given (``options`` may replace any of those)."""
    requests: dict[str, rest.Request] = {
        "graphql": rest.Request(
            url=f"{vendor.url}/graphql",
            method="POST",
            json={"query": "query($after: String) { items(after: $after) { nodes { id } } }"},
        )
    }
    items = {
        "link": ".",
        "next": "results",
        "cursor": "items",
        "graphql": "data.items.nodes",
        "stripe": "data",
        "offset": "results",
        "pages": "items",
    }
    options.setdefault("name", f"list-{route}")
    options.setdefault("request", requests.get(route, rest.Request(url=f"{vendor.url}/{route}")))
    options.setdefault("items", items[route])
    options.setdefault("identity", "id")
    options.setdefault("version", "version")
    options.setdefault("schedule", SCHEDULE)
    if paginator is not None:
        options["paginator"] = paginator
    return rest.define_rest_poller(**options)


FULL_LISTINGS = [
    pytest.param("link", rest.LinkHeader(), id="link_header"),
    pytest.param("next", rest.NextUrl(), id="next_url"),
    pytest.param("cursor", rest.CursorParam(path="meta.next_cursor"), id="cursor"),
    pytest.param(
        "graphql",
        rest.CursorParam(
            path="data.items.pageInfo.endCursor",
            param="variables.after",
            has_more="data.items.pageInfo.hasNextPage",
            location="json",
        ),
        id="cursor_json",
    ),
    pytest.param("stripe", rest.StartingAfter(limit=3), id="starting_after"),
    pytest.param("offset", rest.OffsetLimit(limit=3), id="offset"),
    pytest.param("offset", rest.OffsetLimit(limit=3, total="count"), id="offset_total"),
    pytest.param("pages", rest.PageNumber(size_param="size", size=3), id="page_empty"),
    pytest.param("pages", rest.PageNumber(size=3, end="short"), id="page_short"),
    pytest.param("pages", rest.PageNumber(end="has_more", has_more="more"), id="page_has_more"),
    pytest.param("pages", rest.PageNumber(end="total", total_pages="total_pages"), id="page_total"),
    pytest.param("pages", rest.PageNumber(end="not_found"), id="page_not_found"),
]


@pytest.mark.parametrize(("route", "paginator"), FULL_LISTINGS)
async def test_a_full_listing_gives_created_updated_deleted(
    run: Run, vendor: Vendor, route: str, paginator: Any
) -> None:
    if route == "pages" and paginator.end == "empty":
        vendor.past_end = "empty"
    engine = run.engine(listing(vendor, route, paginator))

    await run.tick(engine)
    assert run.recorder.take() == {"created": ALL}

    vendor.put("i02", second=30)
    vendor.delete("i05")
    vendor.put("i08", second=31)
    await run.tick(engine)  # the first pass that misses i05: a delete needs two
    assert run.recorder.take() == {"created": ["i08"], "updated": ["i02"]}
    await run.tick(engine)
    assert run.recorder.take() == {"deleted": ["i05"]}

    # The listing shrinks by a whole page: it still ends, and loses nothing else.
    for identity in ("i01", "i03", "i04"):
        vendor.delete(identity)
    await run.tick(engine)
    await run.tick(engine)
    assert run.recorder.take() == {"deleted": ["i01", "i03", "i04"]}
    report = (await engine.inspect())["pollers"][0]["listing"]["live"]
    assert report["abandoned"] == 0


async def test_a_page_number_listing_ends_at_its_404(run: Run, vendor: Vendor) -> None:
    engine = run.engine(listing(vendor, "pages", rest.PageNumber(end="not_found")))
    await run.tick(engine)
    assert vendor.requests("/pages") == [
        "/pages?page=1",
        "/pages?page=2",
        "/pages?page=3",
        "/pages?page=4",
    ]
    report = (await engine.inspect())["pollers"][0]["listing"]["live"]
    assert (report["completed"], report["abandoned"]) == (1, 0)


async def test_a_404_past_the_end_of_a_shrunk_listing_abandons_the_pass(
    run: Run, vendor: Vendor
) -> None:
    paginator = rest.PageNumber(end="total", total_pages="total_pages")
    engine = run.engine(listing(vendor, "pages", paginator, max_pages_per_cycle=2))
    await run.tick(engine, catch_up=False)  # pages 1 and 2 of 3
    assert run.recorder.take() == {"created": ALL[:6]}
    for identity in ("i01", "i02", "i03"):
        vendor.delete(identity)  # two pages now: page 3 is past the end
    await run.tick(engine, catch_up=False)
    assert vendor.requests("/pages")[-1] == "/pages?page=3"
    report = (await engine.inspect())["pollers"][0]["listing"]["live"]
    assert (report["abandoned"], report["completed"]) == (1, 0)
    assert run.recorder.take() == {}

    await run.tick(engine)
    await run.tick(engine)
    assert run.recorder.take() == {"created": ["i07"], "deleted": ["i01", "i02", "i03"]}


# --- a full listing paged by tokens: the token of each page is the engine's ---------------------


def fetch_context(factory: HttpxFactory, page: int, token: str | None) -> wk.FetchContext[Any]:
    return wk.FetchContext(
        cursor=None,
        page=page,
        partition=wk.Partition(""),
        lane="live",
        http=engine_http(factory, "watukuy.tests.rest"),
        attempt=1,
        logger=logging.getLogger("watukuy.tests.rest"),
        page_token=token,
    )


async def test_each_page_hands_the_next_one_its_token(vendor: Vendor) -> None:
    # Page N returns the token of page N+1 as its cursor (the engine stores it with the
    # pass), and page N+1 is asked for with it as ctx.page_token. A page past the first
    # without a token (a pass stored before tokens were kept) is gone, without a request.
    poller = listing(vendor, "stripe", rest.StartingAfter(limit=3))
    factory = HttpxFactory()
    try:
        pages = [
            await poller.fetch(fetch_context(factory, n, token))
            for n, token in ((1, None), (2, "i03"), (3, "i06"), (2, None))
        ]
    finally:
        await factory.aclose()
    assert [[item["id"] for item in page.items] for page in pages[:3]] == [
        ALL[:3],
        ALL[3:6],
        ALL[6:],
    ]
    assert [(page.cursor, page.has_more) for page in pages[:3]] == [
        ("i03", True),
        ("i06", True),
        (None, False),
    ]
    assert pages[3].gone
    assert vendor.requests("/stripe") == [
        "/stripe?limit=3",
        "/stripe?limit=3&starting_after=i03",
        "/stripe?limit=3&starting_after=i06",
    ]


async def test_a_whole_pass_of_tokens_in_one_tick(run: Run, vendor: Vendor) -> None:
    engine = run.engine(listing(vendor, "link", rest.LinkHeader()))
    await run.tick(engine)
    assert [line.split("page=")[-1] for line in vendor.requests("/link")] == ["/link", "2", "3"]
    report = (await engine.inspect())["pollers"][0]["listing"]["live"]
    assert (report["completed"], report["abandoned"]) == (1, 0)
    assert run.recorder.take() == {"created": ALL}


async def test_a_restart_mid_pass_resumes_it_with_its_token(run: Run, vendor: Vendor) -> None:
    def poller() -> Any:  # a restarted process builds its definitions again
        return listing(vendor, "stripe", rest.StartingAfter(limit=3), max_pages_per_cycle=2)

    first = run.engine(poller())
    await run.tick(first, catch_up=False)  # pages 1 and 2 of 3
    assert run.recorder.take() == {"created": ALL[:6]}
    await first.stop()

    restarted = run.engine(poller())
    await run.tick(restarted, catch_up=False)  # page 3, with the token page 2 handed out
    assert vendor.requests("/stripe")[-1] == "/stripe?limit=3&starting_after=i06"
    report = (await restarted.inspect())["pollers"][0]["listing"]["live"]
    assert (report["abandoned"], report["completed"]) == (0, 1)
    assert run.recorder.take() == {"created": ["i07"]}

    vendor.delete("i03")
    for _ in range(2):  # two passes (of two pages now: one cycle each)
        await run.tick(restarted, catch_up=False)
    assert run.recorder.take() == {"deleted": ["i03"]}
    report = (await restarted.inspect())["pollers"][0]["listing"]["live"]
    assert (report["abandoned"], report["completed"]) == (0, 3)


async def test_a_link_header_listing_ticked_by_a_new_engine_each_time(
    run: Run, vendor: Vendor
) -> None:
    # A serverless deployment: every tick() runs in a process of its own, one page each.
    def tick_once() -> Any:
        engine = run.engine(listing(vendor, "link", rest.LinkHeader(), max_pages_per_cycle=1))
        return run.tick(engine, catch_up=False)

    for _ in range(3):
        await tick_once()
    assert [line.split("page=")[-1] for line in vendor.requests("/link")] == ["/link", "2", "3"]
    assert run.recorder.take() == {"created": ALL}

    vendor.delete("i02")
    vendor.delete("i07")
    vendor.put("i04", second=40)
    for _ in range(2):  # two more passes of two pages each, every page by another engine
        await tick_once()
    assert run.recorder.take() == {"updated": ["i04"]}  # one pass missed them: not yet
    for _ in range(2):
        await tick_once()
    assert run.recorder.take() == {"deleted": ["i02", "i07"]}
    report = (await run.engines[-1].inspect())["pollers"][0]["listing"]["live"]
    assert (report["abandoned"], report["completed"]) == (0, 3)


async def test_a_keyset_reconcile_listing_resumes_at_its_position(run: Run, vendor: Vendor) -> None:
    # The position of a keyset listing (a timestamp and a tie-break) is a token too.
    def poller() -> Any:
        return keyset_poller(vendor, reconcile=rest.Listing(every="1h"), max_pages_per_cycle=1)

    first = run.engine(poller())
    await run.tick(first, catch_up=False)  # live: the whole feed; reconcile: its page 1
    await first.stop()
    restarted = run.engine(poller())
    await run.tick(restarted, catch_up=False)
    report = (await restarted.inspect())["pollers"][0]["listing"]["reconcile"]
    assert report["pass"]["pages"] == 2
    assert vendor.requests("/keyset")[-1] == (  # after the last item of its page 1
        "/keyset?updated_since=2026-01-01T00%3A00%3A03.000Z&after_id=i03&limit=3"
    )


# --- keyset --------------------------------------------------------------------------------------


def keyset_poller(vendor: Vendor, **options: Any) -> Any:
    return rest.define_rest_poller(
        name="changes",
        request=f"{vendor.url}/keyset",
        items="data",
        identity="id",
        version="version",
        paginator=rest.Keyset(limit=3),
        schedule=SCHEDULE,
        **options,
    )


async def test_keyset_loses_nothing_at_ties_across_a_page_edge(run: Run, vendor: Vendor) -> None:
    # Five items share one stamp: pages of 3 cut the run of ties in the middle.
    for identity in ("t1", "t2", "t3", "t4", "t5"):
        vendor.put(identity, second=20)
    vendor.put("t6", second=21)
    engine = run.engine(keyset_poller(vendor))
    await run.tick(engine)
    assert run.recorder.take() == {"created": sorted([*ALL, "t1", "t2", "t3", "t4", "t5", "t6"])}
    assert "updated_since=2026-01-01T00%3A00%3A20.000Z&after_id=t2" in " ".join(
        vendor.requests("/keyset")
    )

    vendor.put("t7", second=21)
    vendor.put("i01", second=40)
    await run.tick(engine)
    assert run.recorder.take() == {"created": ["t7"], "updated": ["i01"]}
    cursor = (await engine.inspect())["pollers"][0]["cursors"]["live"]
    assert cursor == {"value": "2026-01-01T00:00:40.000Z", "tie_break": "i01"}


async def test_keyset_with_a_reconcile_listing_finds_deletes(run: Run, vendor: Vendor) -> None:
    engine = run.engine(keyset_poller(vendor, reconcile=rest.Listing(every="1h")))
    await run.tick(engine)
    assert run.recorder.take() == {"created": ALL}
    vendor.delete("i04")
    for _ in range(2):
        await run.clock.advance("1h")
        await run.tick(engine)
    assert run.recorder.take() == {"deleted": ["i04"]}
    reconcile = [event for event in run.recorder.events if event.lane == "reconcile"]
    assert reconcile == []


# --- token mode ----------------------------------------------------------------------------------


async def test_token_mode_keeps_its_place_after_the_last_page(run: Run, vendor: Vendor) -> None:
    poller = listing(vendor, "next", rest.NextUrl(), mode="token")
    engine = run.engine(poller)
    await run.tick(engine)
    assert run.recorder.take() == {"created": ALL}
    asked = len(vendor.requests("/next"))

    vendor.put("i08", second=50)  # lands on the last page
    await run.tick(engine)
    assert vendor.requests("/next")[asked:] == ["/next?page=3"]
    assert run.recorder.take() == {"created": ["i08"]}


async def test_a_credential_parameter_goes_with_the_pages_a_link_asks_for(
    run: Run, vendor: Vendor
) -> None:
    # The vendor's next links carry only the page number: the template's credential goes
    # back on each of them (its other parameters do not: a next link is the whole query).
    request = rest.Request(url=f"{vendor.url}/next", params={"access_token": "t0k", "x": "1"})
    poller = listing(vendor, "next", rest.NextUrl(), mode="token", request=request)
    engine = run.engine(poller)
    await run.tick(engine)
    assert run.recorder.take() == {"created": ALL}
    assert vendor.requests("/next") == [
        "/next?access_token=t0k&x=1",
        "/next?page=2&access_token=t0k",
        "/next?page=3&access_token=t0k",
    ]


async def test_token_mode_with_starting_after_continues_after_the_last_id(
    run: Run, vendor: Vendor
) -> None:
    poller = listing(vendor, "stripe", rest.StartingAfter(limit=3), mode="token", version=None)
    engine = run.engine(poller)
    await run.tick(engine)
    vendor.put("i09", second=50)
    asked = len(vendor.requests("/stripe"))
    await run.tick(engine)
    assert vendor.requests("/stripe")[asked:] == ["/stripe?limit=3&starting_after=i07"]
    assert run.recorder.take() == {"created": [*ALL, "i09"]}


# --- auth ----------------------------------------------------------------------------------------


@dataclass
class Renewing:
    """An auth whose token is stale until refreshed."""

    token: str = "stale"
    fresh: str = "fresh"
    refreshes: int = 0

    async def apply(self, call: rest.Call, ctx: wk.FetchContext[Any]) -> rest.Call:
        return call.with_headers(Authorization=f"Bearer {self.token}")

    async def refresh(self, call: rest.Call, ctx: wk.FetchContext[Any]) -> bool:
        self.refreshes += 1
        self.token = self.fresh
        return True


async def test_a_401_refreshes_the_credentials_once(run: Run, vendor: Vendor) -> None:
    vendor.token = "fresh"
    auth = Renewing()
    engine = run.engine(listing(vendor, "link", rest.LinkHeader(), auth=auth))
    await run.tick(engine)
    assert auth.refreshes == 1
    assert len(vendor.requests("/link")) == 4  # page 1 twice, then pages 2 and 3
    assert run.recorder.take() == {"created": ALL}


async def test_a_second_401_fails_the_fetch(run: Run, vendor: Vendor) -> None:
    vendor.token = "other"
    auth = Renewing()
    engine = run.engine(listing(vendor, "link", rest.LinkHeader(), auth=auth))
    await run.clock.advance("10m")
    result = await engine.tick()
    [polled] = result.polled
    assert polled.error is not None
    assert "401" in polled.error["message"]
    assert auth.refreshes == 1
    assert len(vendor.requests("/link")) == 2


# --- 304, 410 and page cursors ------------------------------------------------------------------


async def test_a_one_page_listing_answered_304_is_the_same_listing(
    run: Run, vendor: Vendor
) -> None:
    vendor.etags = True
    poller = listing(
        vendor, "link", request=rest.Request(url=f"{vendor.url}/link", params={"per_page": 50})
    )
    engine = run.engine(poller)
    await run.tick(engine)
    await run.tick(engine)
    assert vendor.statuses == [200, 304]
    assert run.recorder.take() == {"created": ALL}

    vendor.delete("i06")
    await run.tick(engine)  # a new listing: 200, the first pass without i06
    await run.tick(engine)  # the same again: 304 repeats that pass, the delete is confirmed
    assert vendor.statuses == [200, 304, 200, 304]
    assert run.recorder.take() == {"deleted": ["i06"]}


async def test_token_mode_keeps_its_token_on_a_304(run: Run, vendor: Vendor) -> None:
    vendor.etags = True
    poller = listing(vendor, "next", rest.NextUrl(), mode="token")
    engine = run.engine(poller)
    await run.tick(engine)
    await run.tick(engine)  # the last page again: unchanged, its validator is kept
    await run.tick(engine)  # answered 304
    assert vendor.requests("/next")[-2:] == ["/next?page=3", "/next?page=3"]
    assert vendor.statuses[-1] == 304
    vendor.put("i08", second=40)
    await run.tick(engine)
    assert vendor.requests("/next")[-1] == "/next?page=3"
    assert run.recorder.take() == {"created": [*ALL, "i08"]}


async def test_an_expired_token_starts_over(run: Run, vendor: Vendor) -> None:
    poller = listing(vendor, "cursor", rest.CursorParam(path="meta.next_cursor"), mode="token")
    engine = run.engine(poller)
    await run.tick(engine)
    assert vendor.requests("/cursor")[-1] == "/cursor?cursor=i06"
    vendor.expired.add("i06")
    await run.tick(engine)  # 410: gone, the cursor goes back to the start
    assert vendor.statuses[-1] == 410
    vendor.put("i02", second=40)
    await run.tick(engine)
    assert vendor.requests("/cursor")[-3:] == [
        "/cursor",
        "/cursor?cursor=i03",
        "/cursor?cursor=i06",
    ]
    assert run.recorder.take() == {"created": ALL, "updated": ["i02"]}


async def test_page_numbers_under_token_mode_with_a_reconcile(run: Run, vendor: Vendor) -> None:
    poller = listing(
        vendor,
        "pages",
        rest.PageNumber(end="not_found"),
        mode="token",
        reconcile=rest.Listing(every="1h"),
    )
    engine = run.engine(poller)
    await run.tick(engine)
    assert run.recorder.take() == {"created": ALL}
    cursor = (await engine.inspect())["pollers"][0]["cursors"]["live"]
    assert cursor == {"page": 1}  # a page cursor back at its start once the listing ended
    vendor.delete("i07")
    for _ in range(2):
        await run.clock.advance("1h")
        await run.tick(engine)
    assert run.recorder.take() == {"deleted": ["i07"]}


# --- partitions, transform, a paginator of one's own ------------------------------------------------


async def test_partition_placeholders_fill_each_request(run: Run, vendor: Vendor) -> None:
    tenants = [wk.Partition("p1", {"size": 2}), wk.Partition("p2", {"size": 4})]
    poller = rest.define_rest_poller(
        name="tenants",
        request=rest.Request(
            url=f"{vendor.url}/link",
            params={"tenant": "{partition}", "per_page": "{partition.size}"},
        ),
        identity="id",
        paginator=rest.LinkHeader(),
        partitions=lambda: tenants,
        schedule=SCHEDULE,
    )
    engine = run.engine(poller)
    await run.tick(engine)
    first = sorted(line for line in vendor.requests("/link") if "&page=" not in line)
    assert first == ["/link?tenant=p1&per_page=2", "/link?tenant=p2&per_page=4"]
    by_partition = {
        key: sorted(str(e.subject) for e in run.recorder.events if e.partition == key)
        for key in ("p1", "p2")
    }
    assert by_partition == {"p1": ALL, "p2": ALL}


async def test_transform_runs_before_identity(run: Run, vendor: Vendor) -> None:
    poller = rest.define_rest_poller(
        name="upper",
        request=f"{vendor.url}/pages",
        items="items",
        identity="key",
        transform=lambda item: {**item, "key": item["id"].upper()},
        paginator=rest.PageNumber(end="not_found"),
        schedule=SCHEDULE,
    )
    engine = run.engine(poller)
    await run.tick(engine)
    assert run.recorder.take() == {"created": [identity.upper() for identity in ALL]}


@dataclass(frozen=True)
class AfterLastId:
    """A paginator of one's own: ``?cursor=<last id>`` while pages are full."""

    limit: int = 3
    kind: str = "token"
    ends_on_not_found: bool = False

    def apply(self, call: rest.Call, position: rest.Position) -> rest.Call:
        call = call.with_params(limit=self.limit)
        return call if position.token is None else call.with_params(cursor=position.token)

    def step(self, reply: rest.Reply) -> rest.Step:
        full = len(reply.items) == self.limit
        return rest.Step(has_more=full, token=reply.items[-1]["id"] if full else None)


async def test_a_paginator_of_ones_own_pages_a_listing(run: Run, vendor: Vendor) -> None:
    poller = listing(vendor, "cursor", AfterLastId())
    engine = run.engine(poller)
    await run.tick(engine)
    vendor.delete("i01")
    await run.tick(engine)
    await run.tick(engine)
    assert vendor.requests("/cursor")[:3] == [
        "/cursor?limit=3",
        "/cursor?limit=3&cursor=i03",
        "/cursor?limit=3&cursor=i06",
    ]
    assert run.recorder.take() == {"created": ALL, "deleted": ["i01"]}


# --- churn: passes cut by the page cap, restarts, writes between every two pages ---------------------


@pytest.mark.parametrize(
    ("route", "paginator"),
    [
        pytest.param("link", rest.LinkHeader(), id="link_header"),
        pytest.param("stripe", rest.StartingAfter(limit=3), id="starting_after"),
        pytest.param("pages", rest.PageNumber(end="not_found"), id="page_not_found"),
    ],
)
async def test_churn_never_deletes_a_live_item(
    run: Run, vendor: Vendor, route: str, paginator: Any
) -> None:
    chance = random.Random(f"churn-{route}")
    alive = set(ALL)
    next_id = 8

    def poller() -> Any:
        return listing(vendor, route, paginator, max_pages_per_cycle=2)

    engine = run.engine(poller())
    for step in range(24):
        roll = chance.random()
        if roll < 0.35:
            vendor.put(f"i{next_id:02d}", second=next_id % 60)
            alive.add(f"i{next_id:02d}")
            next_id += 1
        elif roll < 0.6 and len(alive) > 2:
            gone = chance.choice(sorted(alive))
            vendor.delete(gone)
            alive.discard(gone)
        elif roll < 0.8 and alive:
            vendor.put(chance.choice(sorted(alive)), second=step)
        if chance.random() < 0.2:  # a restart: the next engine resumes the pass
            await engine.stop()
            engine = run.engine(poller())
        await run.tick(engine, catch_up=False)
        deleted = {str(e.subject) for e in run.recorder.events if e.type == "deleted"}
        assert deleted.isdisjoint(alive), f"step {step}: deleted a live item"

    for _ in range(8):  # quiet: the passes agree, and every delete comes out
        await run.tick(engine, catch_up=False)
    state: dict[str, bool] = {}
    for event in run.recorder.events:
        state[str(event.subject)] = event.type != "deleted"
    assert {subject for subject, live in state.items() if live} == alive


@dataclass(frozen=True)
class Tokenless:
    """A paginator of one's own with a bug: more pages, and no token to reach them."""

    kind: str = "token"
    ends_on_not_found: bool = False

    def apply(self, call: rest.Call, position: rest.Position) -> rest.Call:
        return call

    def step(self, reply: rest.Reply) -> rest.Step:
        return rest.Step(has_more=True)


async def test_more_pages_without_a_token_fail_the_fetch(run: Run, vendor: Vendor) -> None:
    poller = listing(vendor, "cursor", Tokenless(), version=None)
    engine = run.engine(poller)
    await run.clock.advance("10m")
    [polled] = (await engine.tick()).polled
    assert polled.error is not None
    assert "Tokenless.step() said there is more but gave no token" in polled.error["message"]
    assert vendor.requests("/cursor") == ["/cursor"]


@dataclass(frozen=True)
class Repeating:
    """A paginator of one's own with a bug: the next token is always the same."""

    kind: str = "token"
    ends_on_not_found: bool = False

    def apply(self, call: rest.Call, position: rest.Position) -> rest.Call:
        return call if position.token is None else call.with_params(cursor=position.token)

    def step(self, reply: rest.Reply) -> rest.Step:
        return rest.Step(has_more=True, token="i03")


async def test_a_page_that_hands_out_its_own_token_again_fails(run: Run, vendor: Vendor) -> None:
    poller = listing(vendor, "cursor", Repeating(), version=None)
    engine = run.engine(poller)
    for _ in range(2):  # twice at the same page abandons the pass
        await run.clock.advance("10m")
        [polled] = (await engine.tick()).polled
        assert polled.error is not None
        assert (
            "Repeating.step() handed out the token page 2 was asked with"
            in (polled.error["message"])
        )
    assert vendor.requests("/cursor") == ["/cursor", "/cursor?cursor=i03", "/cursor?cursor=i03"]
    report = (await engine.inspect())["pollers"][0]["listing"]["live"]
    assert (report["abandoned"], report["completed"]) == (1, 0)


async def test_a_reconcile_listing_of_its_own(run: Run, vendor: Vendor) -> None:
    # A cursor feed for changes, and a page-numbered listing of everything for deletes.
    poller = rest.define_rest_poller(
        name="feed",
        request=f"{vendor.url}/cursor",
        items="items",
        identity="id",
        version="version",
        paginator=rest.CursorParam(path="meta.next_cursor"),
        mode="token",
        reconcile=rest.Listing(
            every="1h",
            request=rest.Request(url=f"{vendor.url}/pages", params={"size": 2}),
            items="items",
            paginator=rest.PageNumber(end="not_found"),
        ),
        schedule=SCHEDULE,
    )
    engine = run.engine(poller)
    await run.tick(engine)
    assert run.recorder.take() == {"created": ALL}
    assert "/pages?size=2&page=5" in vendor.requests("/pages")  # 4 pages of 2, then the 404
    vendor.delete("i02")
    for _ in range(2):
        await run.clock.advance("1h")
        await run.tick(engine)
    deleted = [event for event in run.recorder.events if event.type == "deleted"]
    assert [(str(event.subject), event.lane) for event in deleted] == [("i02", "reconcile")]
