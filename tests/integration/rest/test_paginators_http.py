"""Each paginator against a real HTTP vendor on 127.0.0.1, through a real engine.

The engine ticks on a virtual clock (so schedules and reconcile intervals can be stepped
over) while every request travels over a real socket to :mod:`._vendor`, through the
engine's own HTTP client: created, updated and deleted must come out right for each
paginator, however its listing ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import watukuy as wk
from watukuy import rest
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


def full_listing(vendor: Vendor, route: str, paginator: Any, **options: Any) -> Any:
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
    options.setdefault("schedule", SCHEDULE)
    return rest.define_rest_poller(
        name=f"list-{route}",
        request=requests.get(route, rest.Request(url=f"{vendor.url}/{route}")),
        items=items[route],
        identity="id",
        version="version",
        paginator=paginator,
        **options,
    )


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
    engine = run.engine(full_listing(vendor, route, paginator))

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
    engine = run.engine(full_listing(vendor, "pages", rest.PageNumber(end="not_found")))
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
    engine = run.engine(full_listing(vendor, "pages", paginator, max_pages_per_cycle=2))
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


# --- the in-memory token chain of a full listing ---------------------------------------------


async def test_the_prefetch_finds_the_next_token(run: Run, vendor: Vendor) -> None:
    # The engine asks for page N+1 while page N commits: the token of page N+1 must be
    # known when page N's fetch returns, or the pass would be abandoned as gone.
    engine = run.engine(full_listing(vendor, "link", rest.LinkHeader()))
    await run.tick(engine)
    assert [line.split("page=")[-1] for line in vendor.requests("/link")] == ["/link", "2", "3"]
    report = (await engine.inspect())["pollers"][0]["listing"]["live"]
    assert (report["completed"], report["abandoned"]) == (1, 0)
    assert run.recorder.take() == {"created": ALL}


async def test_a_restart_mid_pass_abandons_it_and_deletes_nothing_wrongly(
    run: Run, vendor: Vendor
) -> None:
    def poller() -> Any:  # a restarted process builds its definitions again
        return full_listing(vendor, "stripe", rest.StartingAfter(limit=3), max_pages_per_cycle=2)

    first = run.engine(poller())
    await run.tick(first, catch_up=False)  # pages 1 and 2 of 3
    assert run.recorder.take() == {"created": ALL[:6]}
    await first.stop()

    restarted = run.engine(poller())
    asked = len(vendor.requests("/stripe"))
    await run.tick(restarted, catch_up=False)  # resumes at page 3, whose token it never saw
    assert len(vendor.requests("/stripe")) == asked  # gone without asking
    report = (await restarted.inspect())["pollers"][0]["listing"]["live"]
    assert (report["abandoned"], report["completed"]) == (1, 0)
    assert run.recorder.take() == {}

    vendor.delete("i03")
    await run.tick(restarted)  # a whole new pass from page 1
    assert run.recorder.take() == {"created": ["i07"]}
    await run.tick(restarted)
    assert run.recorder.take() == {"deleted": ["i03"]}
    report = (await restarted.inspect())["pollers"][0]["listing"]["live"]
    assert (report["abandoned"], report["completed"]) == (1, 2)


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
    poller = rest.define_rest_poller(
        name="drf",
        request=f"{vendor.url}/next",
        items="results",
        identity="id",
        version="version",
        paginator=rest.NextUrl(),
        mode="token",
        schedule=SCHEDULE,
    )
    engine = run.engine(poller)
    await run.tick(engine)
    assert run.recorder.take() == {"created": ALL}
    asked = len(vendor.requests("/next"))

    vendor.put("i08", second=50)  # lands on the last page
    await run.tick(engine)
    assert vendor.requests("/next")[asked:] == ["/next?page=3"]
    assert run.recorder.take() == {"created": ["i08"]}


async def test_token_mode_with_starting_after_continues_after_the_last_id(
    run: Run, vendor: Vendor
) -> None:
    poller = rest.define_rest_poller(
        name="stripe",
        request=f"{vendor.url}/stripe",
        items="data",
        identity="id",
        paginator=rest.StartingAfter(limit=3),
        mode="token",
        schedule=SCHEDULE,
    )
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
    engine = run.engine(full_listing(vendor, "link", rest.LinkHeader(), auth=auth))
    await run.tick(engine)
    assert auth.refreshes == 1
    assert len(vendor.requests("/link")) == 4  # page 1 twice, then pages 2 and 3
    assert run.recorder.take() == {"created": ALL}


async def test_a_second_401_fails_the_fetch(run: Run, vendor: Vendor) -> None:
    vendor.token = "other"
    auth = Renewing()
    engine = run.engine(full_listing(vendor, "link", rest.LinkHeader(), auth=auth))
    await run.clock.advance("10m")
    result = await engine.tick()
    [polled] = result.polled
    assert polled.error is not None
    assert "401" in polled.error["message"]
    assert auth.refreshes == 1
    assert len(vendor.requests("/link")) == 2
