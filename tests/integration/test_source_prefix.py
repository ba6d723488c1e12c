"""``Engine(source_prefix=...)``: every event's ``source`` (and with it its id) for pollers
without a ``source`` of their own."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.diff.canonical import content_hash
from watukuy.diff.ids import event_id
from watukuy.testing import SeededRandom, VirtualClock

ITEMS = [{"id": "a1", "v": 1}]


def listing(name: str, **options: Any) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=ITEMS, has_more=False)

    return wk.define_poller(
        name=name,
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        **options,
    )


async def events_of(engine: wk.Engine, name: str) -> list[wk.Event[Any]]:
    seen: list[wk.Event[Any]] = []
    engine.on(name, lambda event, ctx: seen.append(event))
    await engine.tick(only=name)
    return seen


def engine_for(*pollers: wk.PollerDefinition[Any], **options: Any) -> wk.Engine:
    return wk.Engine(
        store=wk.MemoryStore(),
        pollers=list(pollers),
        clock=VirtualClock(),
        random=SeededRandom(1),
        **options,
    )


async def test_the_prefix_names_the_source_and_the_id_of_every_event() -> None:
    engine = engine_for(listing("orders"), source_prefix="urn:acme:crm:")
    [event] = await events_of(engine, "orders")
    assert event.source == "urn:acme:crm:orders"
    assert event.to_cloudevent()["source"] == "urn:acme:crm:orders"
    plain = engine_for(listing("orders"))
    [default] = await events_of(plain, "orders")
    assert default.source == "urn:watukuy:orders"
    assert event.id != default.id  # the source is part of the id material
    version = content_hash(ITEMS[0])
    for seen in (event, default):
        assert seen.id == event_id(seen.source, "", "a1", version, 1, "created")


async def test_a_pollers_own_source_wins_over_the_prefix() -> None:
    own = listing("billing", source="https://billing.acme.test")
    engine = engine_for(own, listing("orders"), source_prefix="acme.")
    assert engine.pollers["billing"].source == "https://billing.acme.test"
    assert engine.pollers["orders"].source == "acme.orders"
    [event] = await events_of(engine, "billing")
    assert event.source == "https://billing.acme.test"
    assert own.source == "https://billing.acme.test"  # the definition itself is untouched


@pytest.mark.parametrize("bad", ["", "urn:acme crm:", "urn:\nacme:", 7, b"urn:"])
def test_a_bad_prefix_is_a_config_error(bad: object) -> None:
    with pytest.raises(wk.ConfigError) as caught:
        engine_for(listing("orders"), source_prefix=bad)
    assert caught.value.field == "source_prefix"
