"""``engine.add_poller()``: a poller added to a running engine is polled without a restart,
``tick()`` sees one added to an idle engine, and what the engine cannot take is refused."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.testing import SeededRandom, VirtualClock


def listing(name: str, items: list[dict[str, Any]], **options: Any) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[dict(item) for item in items], has_more=False)

    return wk.define_poller(
        name=name,
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=wk.Schedule(min="10s", max="10s", jitter=0),
        **options,
    )


def engine_on(clock: VirtualClock, *pollers: wk.PollerDefinition[Any], **options: Any) -> wk.Engine:
    return wk.Engine(
        store=wk.MemoryStore(),
        pollers=list(pollers),
        clock=clock,
        random=SeededRandom(4),
        fair_share_spread=0,
        **options,
    )


async def test_a_running_daemon_polls_a_poller_added_to_it() -> None:
    clock = VirtualClock()
    engine = engine_on(clock, listing("orders", [{"id": "o1"}]), source_prefix="urn:acme:")
    seen: list[tuple[str, str]] = []
    engine.on("orders", lambda event, ctx: seen.append((event.poller, event.subject)))
    await engine.start()
    await clock.advance("1s")
    assert seen == [("orders", "o1")]

    added = await engine.add_poller(listing("invoices", [{"id": "i1"}, {"id": "i2"}]))
    assert added.source == "urn:acme:invoices"  # the engine's prefix applies to it too
    assert engine.pollers["invoices"] is added
    engine.on("invoices", lambda event, ctx: seen.append((event.poller, event.subject)))
    await clock.advance("1s")
    assert ("invoices", "i1") in seen
    assert ("invoices", "i2") in seen
    await clock.advance("30s")  # it keeps its schedule like the others: no event twice
    assert sorted(seen) == [("invoices", "i1"), ("invoices", "i2"), ("orders", "o1")]
    assert {entry["poller"] for entry in (await engine.inspect())["pollers"]} == {
        "orders",
        "invoices",
    }
    await engine.stop()


async def test_tick_visits_a_poller_added_before_it() -> None:
    engine = engine_on(VirtualClock(), listing("orders", []))
    await engine.add_poller(listing("invoices", [{"id": "i1"}]))
    seen: list[str] = []
    engine.on("invoices", lambda event, ctx: seen.append(event.subject))
    result = await engine.tick()
    assert {polled.poller for polled in result.polled} == {"orders", "invoices"}
    assert seen == ["i1"]


async def test_a_duplicate_name_or_an_unknown_budget_is_refused() -> None:
    engine = engine_on(VirtualClock(), listing("orders", []))
    with pytest.raises(wk.ConfigError, match="duplicate poller name 'orders'") as caught:
        await engine.add_poller(listing("orders", []))
    assert caught.value.field == "poller"
    with pytest.raises(wk.ConfigError, match="erp"):
        await engine.add_poller(listing("invoices", [], budget="erp"))
    with pytest.raises(wk.ConfigError) as caught:
        await engine.add_poller("invoices")  # type: ignore[arg-type]
    assert caught.value.field == "poller"
    assert list(engine.pollers) == ["orders"]


async def test_a_poller_whose_partitions_fail_is_not_added_to_a_running_engine() -> None:
    clock = VirtualClock()
    engine = engine_on(clock, listing("orders", []))
    await engine.start()

    def partitions() -> list[str]:
        raise RuntimeError("tenant directory down")

    with pytest.raises(RuntimeError, match="tenant directory down"):
        await engine.add_poller(listing("tenants", [], partitions=partitions))
    assert list(engine.pollers) == ["orders"]
    await clock.advance("20s")  # the daemon carries on
    await engine.stop()


async def test_a_stopped_engine_takes_no_poller() -> None:
    engine = engine_on(VirtualClock(), listing("orders", []))
    await engine.start()
    await engine.stop()
    with pytest.raises(wk.WatukuyError) as caught:
        await engine.add_poller(listing("invoices", []))
    assert caught.value.code == "NOT_RUNNING"
