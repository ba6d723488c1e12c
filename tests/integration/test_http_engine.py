"""``ctx.http`` as the engine uses it: pacing, throttling, Problem Details, redaction, 304s.

The unit tests in ``tests/unit/http`` pin the parsers; these run the whole loop (fetch,
scheduler, store, hooks) against the FakeApi on a VirtualClock and check what the engine
does with what the API said.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

import watukuy as wk
from watukuy.model.rows import PKey
from watukuy.runtime.hooks import ScheduleChangeDetails
from watukuy.testing import SeededRandom

from .conftest import BASE, Recorder, World, item, page_fetch, timestamp_fetch

T = "2025-12-31T12:00:00.000Z"
SECRET = "Bearer s3cr3t-t0ken"


def seed(world: World, n: int) -> None:
    for i in range(1, n + 1):
        world.api.add(item(i, T))


def orders(**options: Any) -> wk.PollerDefinition[Any]:
    options.setdefault("fetch", timestamp_fetch(limit=10))
    options.setdefault("cursor", wk.TimestampCursor(field="updated_at", tie_break="id"))
    return wk.define_poller(name="orders", identity=lambda o: o["id"], **options)


@dataclass
class Schedules:
    """Records every ``on_schedule_change``."""

    seen: list[ScheduleChangeDetails] = field(default_factory=list)

    def on_schedule_change(self, details: ScheduleChangeDetails) -> None:
        self.seen.append(details)

    @property
    def reasons(self) -> list[str]:
        return [d.reason for d in self.seen]


async def test_rate_limit_headers_pace_the_poller_before_any_429(world: World) -> None:
    seed(world, 3)
    # 10 requests per 60 s window; every answer says how many remain and when it resets.
    world.api.set_rate_limit("ietf", limit=10, window="60s")
    schedules = Schedules()
    engine = world.engine(
        orders(schedule=wk.Schedule(min="1s", max="5m", adaptive=False, jitter=0)),
        hooks=schedules,
    )
    engine.on("orders", Recorder())
    start = world.clock.now()
    for _ in range(10):
        result = await engine.tick()
        assert len(result.polled) == 1
        assert result.errors == []
        await world.clock.advance_to(schedules.seen[-1].next_due_at)

    # Each wait is ceil((reset_at - now) / max(remaining, 1)), with reset_at = now + the
    # whole seconds the header announces: 60 s / 9 left, then 54 s / 8, 47 s / 7, ...,
    # 7 s / 1 left; the tenth call opens a new window (9 left of 60 s again).
    waits = [6_667, 6_750, 6_715, 6_667, 6_800, 6_750, 6_667, 6_500, 7_000, 6_667]
    due = [start + sum(waits[: n + 1]) for n in range(10)]
    assert [d.next_due_at for d in schedules.seen] == due
    assert schedules.reasons == ["paced"] * 10  # a fixed 1 s schedule, stretched by pacing
    assert {d.interval_ms for d in schedules.seen} == {1_000}
    assert [r.at - start for r in world.api.log] == [0, *(d - start for d in due[:9])]
    assert {r.status for r in world.api.log} == {200}  # never a 429
    report = (await engine.inspect())["pollers"][0]["schedule"]
    assert report["next_due_at"] == due[-1]
    assert report["rate_limit"]["remaining"] == 9


@pytest.mark.parametrize("offset_ms", [0, 250])
async def test_a_429_with_an_http_date_retry_after_sleeps_exactly_until_then(
    world: World, offset_ms: int
) -> None:
    seed(world, 2)
    await world.clock.advance_ms(offset_ms)
    schedules = Schedules()
    engine = world.engine(orders(circuit=wk.Circuit(failures=1)), hooks=schedules)
    recorder = Recorder()
    engine.on("orders", recorder)
    # The clock starts at 2026-01-01T00:00:00.000Z: the API asks for 90 s, as a date.
    world.api.fail_next(429, retry_after="Thu, 01 Jan 2026 00:01:30 GMT")
    now = world.clock.now()
    until = now - offset_ms + 90_000

    result = await engine.tick()
    [cycle] = result.polled
    assert cycle.error is not None
    assert cycle.error["status"] == 429
    assert cycle.error["message"] == (
        "GET https://fake.api/items?limit=10 responded 429: Too Many Requests"
    )
    schedule = (await engine.inspect())["pollers"][0]["schedule"]
    assert schedule["throttled_until"] == until
    assert schedule["next_due_at"] == until
    assert schedule["circuit"] == "closed"  # a throttle is not a failure
    assert schedule["consecutive_failures"] == 0
    assert [(d.reason, d.next_due_at) for d in schedules.seen] == [("throttled", until)]

    await world.clock.advance_to(until - 1)
    early = await engine.tick()
    assert (early.polled, early.skipped_not_due) == ([], 1)
    await world.clock.advance_to(until)
    late = await engine.tick()
    assert late.errors == []
    assert [e.subject for e in recorder.events] == ["item-001", "item-002"]
    assert [r.at for r in world.api.log] == [now, until]


@pytest.mark.parametrize(
    ("problem", "summary"),
    [
        (
            {
                "type": "https://errors.example/invalid-cursor",
                "title": "Invalid cursor",
                "status": 422,
                "detail": "since must not be in the future",
            },
            "Invalid cursor",
        ),
        (
            {"status": 422, "detail": "since must not be in the future"},
            "since must not be in the future",
        ),
    ],
)
async def test_problem_details_reach_the_error_in_the_tick_result(
    world: World, problem: dict[str, Any], summary: str
) -> None:
    seed(world, 1)
    engine = world.engine(orders())
    engine.on("orders", Recorder())
    world.api.fail_next(422, problem=problem)
    result = await engine.tick()
    [cycle] = result.errors
    assert cycle.error is not None
    assert cycle.error["name"] == "HttpError"
    assert cycle.error["code"] == "HTTP"
    assert cycle.error["status"] == 422
    assert cycle.error["message"] == (
        f"GET https://fake.api/items?limit=10 responded 422: {summary}"
    )
    report = (await engine.inspect())["pollers"][0]["schedule"]
    assert report["last_error"]["message"] == cycle.error["message"]
    assert report["consecutive_failures"] == 1


async def test_a_credential_header_is_redacted_in_every_log_record(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    seed(world, 2)
    inner = world.api.transport()
    on_the_wire: list[str | None] = []

    async def spy(request: httpx.Request) -> httpx.Response:
        on_the_wire.append(request.headers.get("authorization"))
        return await inner.handle_async_request(request)

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{BASE}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 10},
            headers={"authorization": SECRET},
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    engine = wk.Engine(
        store=world.store,
        pollers=[orders(fetch=fetch, schedule=wk.Schedule(min="10s", max="1m", jitter=0))],
        clock=world.clock,
        random=SeededRandom(7),
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(spy)),
    )
    engine.on("orders", Recorder())
    caplog.set_level(logging.DEBUG, logger="watukuy")
    world.api.fail_next("network")  # the failure path logs the request too
    failed = await engine.tick()
    assert [r.error["name"] for r in failed.errors if r.error] == ["ConnectError"]
    await world.clock.advance("1m")
    assert (await engine.tick()).errors == []

    assert on_the_wire == [SECRET, SECRET]  # sent as given
    logged = [r for r in caplog.records if hasattr(r, "request_headers")]
    assert [(r.levelno, r.getMessage()) for r in logged] == [
        (
            logging.DEBUG,
            "[orders] GET https://fake.api/items?limit=10 failed: connection dropped "
            "(scripted fault)",
        ),
        (logging.DEBUG, "[orders] GET https://fake.api/items?limit=10 -> 200"),
    ]
    for record in logged:
        headers = vars(record)["request_headers"]
        assert headers["authorization"] == "***"
        assert headers["user-agent"].startswith("watukuy/")
        assert (vars(record)["poller"], vars(record)["partition"]) == ("orders", "")
    assert "s3cr3t" not in caplog.text
    for record in caplog.records:
        assert "s3cr3t" not in repr(vars(record))


async def test_a_304_grows_the_interval_and_never_deletes_on_a_timestamp_poller(
    world: World,
) -> None:
    seed(world, 3)
    world.api.set_etags(True)
    schedules = Schedules()
    engine = world.engine(
        orders(
            # overlap=0: every live request is the stored cursor, so the same URL comes back.
            cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap=0),
            schedule=wk.Schedule(min="10s", max="10m", jitter=0),
            reconcile=wk.Reconcile(every="25s", fetch=page_fetch(page_size=10)),
        ),
        hooks=schedules,
    )
    recorder = Recorder()
    engine.on("orders", recorder)
    start = world.clock.now()

    first = await engine.tick()  # live and reconcile listings: 200 with an ETag each
    assert [(r.lane, r.events) for r in first.polled] == [("live", 3), ("reconcile", 0)]
    await world.clock.advance_to(start + 10_000)
    second = await engine.tick()  # the live URL moved with the cursor: 200, no items
    assert [(r.lane, r.items) for r in second.polled] == [("live", 0)]
    await world.clock.advance_to(start + 25_000)
    # The same URLs as before: the live lane, which stood still, is answered 304 Not
    # Modified; the reconcile listing is never conditional, so it is read in full again.
    third = await engine.tick()
    assert [(r.lane, r.items, r.events, r.error) for r in third.polled] == [
        ("live", 0, 0, None),
        ("reconcile", 3, 0, None),
    ]

    assert [(r.route, r.status) for r in world.api.log] == [
        ("since", 200),
        ("page", 200),
        ("since", 200),
        ("since", 304),
        ("page", 200),
    ]
    assert [(d.reason, d.interval_ms, d.next_due_at - start) for d in schedules.seen] == [
        ("events:speed-up", 10_000, 10_000),
        ("idle:back-off", 15_000, 25_000),
        ("not-modified", 22_500, 47_500),
    ]
    # Nothing was deleted.
    assert [(e.type, e.subject) for e in recorder.events] == [
        ("created", "item-001"),
        ("created", "item-002"),
        ("created", "item-003"),
    ]
    assert await world.store.count_items(PKey("orders")) == 3
    report = (await engine.inspect())["pollers"][0]
    assert report["last_poll"] is not None
    assert report["last_poll"]["not_modified"] is True
    state = await world.store.load_state(PKey("orders"))
    assert state is not None
    assert state.last_reconcile_at == start + 25_000  # a complete (if unchanged) listing


# --- a fetch that reads the body of a 304 -----------------------------------------------


def unchecked_timestamp_fetch(limit: int) -> Any:
    """The README quickstart's fetch: it reads the body without checking `not_modified`."""

    async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{BASE}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": limit},
        )
        body = response.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    return fetch


def unchecked_token_fetch(limit: int) -> Any:
    """A next-token fetch that keeps the last token and never checks `not_modified`."""

    async def fetch(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
        response = await ctx.http.get(
            f"{BASE}/items/token", params={"cursor": ctx.cursor.value, "limit": limit}
        )
        body = response.json()
        return wk.Page(items=body["data"], cursor=body["next"], has_more=body["next"] is not None)

    return fetch


async def test_a_fetch_that_reads_a_304_body_gets_an_unchanged_page_not_a_failure(
    world: World,
) -> None:
    seed(world, 3)
    world.api.set_etags(True)
    schedules = Schedules()
    engine = world.engine(
        orders(
            fetch=unchecked_timestamp_fetch(limit=10),
            cursor=wk.TimestampCursor(field="updated_at", tie_break="id", overlap=0),
            schedule=wk.Schedule(min="10s", max="10m", jitter=0),
        ),
        hooks=schedules,
    )
    recorder = Recorder()
    engine.on("orders", recorder)
    start = world.clock.now()
    for offset in (0, 10_000, 25_000):
        await world.clock.advance_to(start + offset)
        result = await engine.tick()
        assert [r.error for r in result.polled] == [None]
    world.api.update("item-002", status="paid")
    await world.clock.advance_to(schedules.seen[-1].next_due_at)
    last = await engine.tick()

    assert [r.status for r in world.api.log] == [200, 200, 304, 200]
    assert [r.error for r in last.polled] == [None]
    # The 304 was read as an idle cycle (not a failure), and the change after it arrived.
    assert schedules.reasons[2] == "not-modified"
    report = (await engine.inspect())["pollers"][0]
    assert report["schedule"]["consecutive_failures"] == 0
    assert [(e.type, e.subject) for e in recorder.events][-1] == ("updated", "item-002")


async def test_a_token_fetch_that_reads_a_304_body_keeps_its_token(world: World) -> None:
    seed(world, 3)
    world.api.set_etags(True)
    schedules = Schedules()
    engine = world.engine(
        wk.define_poller(
            name="orders",
            identity=lambda o: o["id"],
            cursor=wk.TokenCursor(),
            fetch=unchecked_token_fetch(limit=2),
            schedule=wk.Schedule(min="10s", max="10m", jitter=0),
        ),
        hooks=schedules,
    )
    engine.on("orders", Recorder())
    for _ in range(4):
        result = await engine.tick()
        assert [r.error for r in result.polled] == [None]
        await world.clock.advance_to(schedules.seen[-1].next_due_at)

    asked = [(r.query.get("cursor"), r.status) for r in world.api.log]
    last_token = asked[1][0]
    assert last_token is not None
    # Cycle 1 reads both pages and keeps the last page's token; the same request in cycles
    # 2-4 is answered 304, read as unchanged, and keeps that token: never the first page.
    assert asked == [(None, 200), *[(last_token, 200)], *[(last_token, 304)] * 3]
