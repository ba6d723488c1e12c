"""An item the engine cannot encode is quarantined; the rest of its page is delivered.

An item nested 254 levels or more failed its whole page ("Recursion limit reached" from
orjson when its event was written; ``RecursionError`` deeper still): nothing of the page
was delivered, the failures opened the circuit, and the key stayed blocked. Such an item,
like one holding NaN or a value with no JSON form, is now handled like an item that fails
the schema: parked as ``invalid`` with the reason, in the page's own transaction, on every
lane; the page's other items are delivered and the cursor moves on.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import watukuy as wk
from watukuy.testing import VirtualClock

T = "2026-01-01T00:00:00.000Z"


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"x": value}
    return value


BAD = {
    "orjson's limit": (nested(300), "it is nested more than 254 levels deep"),
    "Python's recursion limit": (nested(5_000), "it is nested more than 254 levels deep"),
    "NaN": (math.nan, "nan is not a JSON number"),
}


def page(bad: Any) -> list[dict[str, Any]]:
    return [
        {"id": "a", "updated_at": T, "v": 1},
        {"id": "bad", "updated_at": T, "v": bad},
        {"id": "b", "updated_at": T, "v": 2},
    ]


def poller(lane: str, bad: Any, **options: Any) -> wk.PollerDefinition[Any]:
    """A poller whose ``lane`` lists the page with the bad item; its other lanes list
    nothing."""

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=page(bad) if ctx.lane == lane else [], has_more=False)

    return wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch,
        reconcile=wk.Reconcile(every="6h", fetch=fetch),
        **options,
    )


async def run_lane(
    lane: str, bad: Any, **options: Any
) -> tuple[wk.Engine, list[tuple[str, str, str]], wk.TickResult]:
    engine = wk.Engine(
        store=wk.MemoryStore(), pollers=[poller(lane, bad, **options)], clock=VirtualClock()
    )
    delivered: list[tuple[str, str, str]] = []
    engine.on(
        "orders", lambda event, ctx: delivered.append((event.type, event.subject, event.lane))
    )
    result = await engine.tick()
    if lane == "backfill":
        await engine.backfill("orders", from_=None)
        result = await engine.tick()
    return engine, delivered, result


@pytest.mark.parametrize("retain", ["hash", "payload"])
@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("lane", ["live", "reconcile", "backfill"])
async def test_the_item_is_quarantined_and_the_page_delivered_on_every_lane(
    lane: str, bad: str, retain: str
) -> None:
    value, reason = BAD[bad]
    engine, delivered, result = await run_lane(lane, value, retain=retain)
    assert result.errors == []
    assert delivered == [("created", "a", lane), ("created", "b", lane)]
    [parked] = await engine.parked.list("orders")
    assert parked.kind == "invalid"
    assert parked.error is not None
    assert parked.error["message"].startswith(f"the item cannot be encoded as JSON: {reason}")
    assert "'bad'" in (parked.item or "")  # kept, shortened, with its identity
    [entry] = (await engine.inspect())["pollers"]
    assert entry["items"] == 2  # no snapshot row for what could not be written
    assert entry["schedule"]["circuit"] == "closed"


async def test_on_invalid_fail_fails_the_page_instead() -> None:
    engine, delivered, result = await run_lane("live", nested(300), on_invalid="fail")
    assert delivered == []
    [failed] = result.errors
    assert failed.error is not None
    assert failed.error["name"] == "ValidationError"
    assert failed.error["message"] == (
        "1 item(s) cannot be encoded as JSON: the item cannot be encoded as JSON: it is "
        "nested more than 254 levels deep"
    )
    assert await engine.parked.list("orders") == []


async def test_on_invalid_skip_leaves_it_out() -> None:
    engine, delivered, result = await run_lane("live", nested(300), on_invalid="skip")
    assert result.errors == []
    assert delivered == [("created", "a", "live"), ("created", "b", "live")]
    assert await engine.parked.list("orders") == []


async def test_a_deep_part_the_fingerprint_leaves_out_still_cannot_be_written() -> None:
    # The hash covers the fingerprint only; the event carries the whole item.
    engine, delivered, result = await run_lane(
        "live", nested(300), fingerprint=lambda o: {"id": o["id"]}
    )
    assert result.errors == []
    assert delivered == [("created", "a", "live"), ("created", "b", "live")]
    assert len(await engine.parked.list("orders")) == 1
