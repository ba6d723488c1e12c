"""``watukuy demo``'s moving parts: the seeded vendor, its journal, the consumer log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import watukuy as wk
from watukuy.demo import (
    CATALOG,
    ORDERS,
    TENANTS,
    ConsumerLog,
    DemoPaths,
    Fault,
    Journal,
    VendorWorld,
)
from watukuy.demo._output import summarize
from watukuy.model.errors import ConfigError

T0 = 1_767_225_600_000


def snapshot(world: VendorWorld) -> dict[str, list[dict[str, Any]]]:
    return {name: world.api.tenant(name).all() for name in (ORDERS, CATALOG, *TENANTS)}


def steps(n: int) -> list[int]:
    return [T0 + 500 * k for k in range(1, n + 1)]


def test_populate() -> None:
    world = VendorWorld(7)
    world.populate(T0)
    data = snapshot(world)
    assert [len(data[name]) for name in (ORDERS, CATALOG, *TENANTS)] == [12, 10, 4, 4, 4]
    orders = data[ORDERS]
    assert [o["id"] for o in orders[:3]] == ["ord-0001", "ord-0002", "ord-0003"]
    # Four orders per updated_at: ties the keyset cursor must break by id.
    assert [o["updated_at"] for o in orders] == [
        *["2025-12-31T23:59:00.000Z"] * 4,
        *["2025-12-31T23:59:01.000Z"] * 4,
        *["2025-12-31T23:59:02.000Z"] * 4,
    ]
    assert {o["status"] for o in orders} == {"open"}
    assert {o["version"] for o in orders} == {1}
    assert data["acme"][0]["id"] == "inv-acme-0001"
    assert {i["status"] for i in data["globex"]} == {"issued"}


def test_same_seed_same_story_other_seed_other_story() -> None:
    one = VendorWorld.replay(7, T0, steps(30))
    two = VendorWorld.replay(7, T0, steps(30))
    other = VendorWorld.replay(8, T0, steps(30))
    assert snapshot(one) == snapshot(two)
    assert snapshot(one) != snapshot(other)
    assert one.steps == 30


def test_steps_change_orders_with_ties_and_delete() -> None:
    world = VendorWorld(5)
    world.populate(T0)
    ever: set[str] = set()
    faults: list[Fault] = []
    for at in steps(40):
        faults += world.step(at)
        ever |= {o["id"] for o in world.api.tenant(ORDERS).all()}
    after = world.api.tenant(ORDERS).all()
    assert sorted(ever - {o["id"] for o in after}) == [
        "ord-0002",
        "ord-0004",
        "ord-0005",
        "ord-0006",
    ]
    assert len(after) == 19
    stamps: dict[str, int] = {}
    for order in after:
        stamps[order["updated_at"]] = stamps.get(order["updated_at"], 0) + 1
    # One step changed three orders at the same instant.
    assert stamps["2026-01-01T00:00:16.000Z"] == 3
    assert faults == [Fault(429, "/t/orders/items", retry_after=1)] * 3


def test_fault_description() -> None:
    assert Fault(429, "/t/orders/items", 1).describe() == (
        "vendor answers the next GET /t/orders/items with 429 (Retry-After: 1s)"
    )
    assert Fault(503, "/t/catalog/items/all").describe() == (
        "vendor answers the next GET /t/catalog/items/all with 503"
    )


def test_journal_round_trip_and_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    journal = Journal(path)
    journal.open(seed=3, now=T0)
    assert journal.started_at == T0
    assert [journal.append(at) for at in steps(3)] == [1, 2, 3]
    journal.close()
    # A kill in the middle of a write leaves a torn line: it never happened.
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"step": 4, "at"')
    header, times = Journal.read(path)
    assert header == {"watukuy_demo_vendor": 1, "seed": 3, "started_at": T0}
    assert times == steps(3)
    reopened = Journal(path)
    reopened.open(seed=3, now=T0 + 99_999)
    assert reopened.started_at == T0
    assert reopened.steps == steps(3)
    assert reopened.append(T0 + 10_000) == 4
    reopened.close()
    assert Journal.read(path)[1] == [*steps(3), T0 + 10_000]
    world = VendorWorld.from_journal(path)
    assert snapshot(world) == snapshot(VendorWorld.replay(3, T0, [*steps(3), T0 + 10_000]))


def test_journal_refuses_another_seed_and_damage(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    journal = Journal(path)
    journal.open(seed=3, now=T0)
    journal.close()
    with pytest.raises(ConfigError, match=r"--seed: .* was started with --seed 3"):
        Journal(path).open(seed=4, now=T0)
    path.write_text(
        '{"watukuy_demo_vendor": 1, "seed": 3, "started_at": 1}\n{"step": 2, "at": 5}\n'
    )
    with pytest.raises(ConfigError, match="damaged at step 1"):
        Journal.read(path)
    path.write_text('{"something": "else"}\n')
    with pytest.raises(ConfigError, match="is not a demo vendor journal"):
        Journal.read(path)


def test_consumer_log_counts_deliveries(tmp_path: Path) -> None:
    log = ConsumerLog(tmp_path / "c.db")
    event: wk.Event[Any] = wk.Event(
        id="e1",
        type="created",
        source="urn:watukuy:orders",
        subject="ord-1",
        time="2026-01-01T00:00:00.000Z",
        poller="orders",
        partition="",
        lane="live",
        sequence=1,
        data={"id": "ord-1", "total_cents": 100},
    )
    assert log.record(event, T0) == 1
    assert log.record(event, T0 + 5) == 2
    assert log.count() == 1
    log.close()
    rows = ConsumerLog.read(tmp_path / "c.db")
    assert rows == [
        {
            "event_id": "e1",
            "poller": "orders",
            "partition": "",
            "subject": "ord-1",
            "type": "created",
            "lane": "live",
            "sequence": 1,
            "data": {"id": "ord-1", "total_cents": 100},
            "first_at": T0,
            "last_at": T0 + 5,
            "deliveries": 2,
        }
    ]


def test_demo_paths() -> None:
    paths = DemoPaths.for_db(Path("data/watukuy-demo.db"))
    assert paths.journal == Path("data/watukuy-demo.vendor.jsonl")
    assert paths.consumer_log == Path("data/watukuy-demo.consumer.db")
    assert paths.lock == Path("data/watukuy-demo.lock")
    assert DemoPaths.for_db(Path("x"), Path("log.db")).consumer_log == Path("log.db")


def test_summaries() -> None:
    assert summarize("orders", {"status": "paid", "total_cents": 12050, "customer": "Ada"}) == (
        "paid $120.50 for Ada"
    )
    assert summarize("catalog", {"name": "oak mug", "price_cents": 999, "stock": 3}) == (
        "oak mug $9.99, 3 in stock"
    )
    assert summarize("invoices", {"status": "issued", "amount_cents": 100000}) == (
        "issued $1,000.00"
    )
    assert summarize("orders", None) == "(no payload)"
