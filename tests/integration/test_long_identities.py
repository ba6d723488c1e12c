"""An identity longer than every store can key on is quarantined, never a blocked key.

PostgresStore refused identities of about 2,685 characters or more (a btree entry holds
2,704 bytes) and the key failed every cycle for good; the memory and SQLite stores took a
megabyte, after which the tie-break the next request sent failed forever with
``InvalidURL``. An identity holds at most ``MAX_IDENTITY_BYTES`` (1,024) bytes of UTF-8 on
every store; a longer one is quarantined with the reason, the rest of the page is
delivered, and the cursor never moves onto it.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import watukuy as wk
from support.vendors import KeysetVendor

from .conftest import World


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


AT = "2025-12-31T12:00:00.000Z"
LATER = "2025-12-31T12:00:01.000Z"
EDGE = "\u00e9" * 512  # 1,024 bytes (MAX_IDENTITY_BYTES): the longest that is kept
OVER = "x" * 2_700  # what PostgreSQL refused
HUGE = "y" * 1_000_000  # what the memory and SQLite stores took, and sent in the next URL


async def fetch(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
    params = {"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break}
    response = await ctx.http.get("https://vendor.test/items", params=params)
    return wk.Page(items=response.json()["data"])


def engine_for(world: World, vendor: KeysetVendor) -> tuple[wk.Engine, list[str]]:
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch,
        schedule=wk.Schedule(min="1s", max="1s", adaptive=False, jitter=0),
    )
    engine = wk.Engine(
        store=world.store,
        pollers=[poller],
        clock=world.clock,
        http_client=httpx.AsyncClient(transport=vendor.transport()),
    )
    delivered: list[str] = []
    engine.on("orders", lambda event, ctx: delivered.append(event.subject))
    return engine, delivered


@pytest.mark.parametrize("too_long", [OVER, HUGE], ids=["2700-chars", "1-MB"])
async def test_an_identity_over_the_limit_is_quarantined_and_the_key_polls_on(
    world: World, too_long: str
) -> None:
    vendor = KeysetVendor(
        [
            {"id": "a", "updated_at": AT},
            {"id": EDGE, "updated_at": AT},
            {"id": too_long, "updated_at": AT},
        ]
    )
    engine, delivered = engine_for(world, vendor)
    first = await engine.tick()
    assert first.errors == []
    assert delivered == ["a", EDGE]
    [parked] = await engine.parked.list("orders")
    assert parked.kind == "invalid"
    assert parked.error is not None
    assert parked.error["message"] == (
        f"identity() returned {len(too_long):,} bytes of UTF-8; an identity holds at most "
        "1,024 on every store "
        "(https://watukuy.readthedocs.io/en/latest/stores/#identities-at-most-1024-bytes)"
    )
    # The key is not blocked: the next cycles send a request the vendor can take, read the
    # over-long item again (the same parked row) and move on with the first newer item.
    vendor.items.append({"id": "b", "updated_at": LATER})
    for _ in range(3):
        await world.clock.advance("2s")
        result = await engine.tick()
        assert result.errors == []
    assert delivered == ["a", EDGE, "b"]
    assert len(await engine.parked.list("orders")) == 1
    [entry] = (await engine.inspect())["pollers"]
    assert entry["schedule"]["circuit"] == "closed"
    assert entry["items"] == 3
