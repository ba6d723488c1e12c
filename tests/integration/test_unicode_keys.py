"""Identities and partition keys may be any string of Unicode characters, on every store.

PostgreSQL cannot keep U+0000 in a ``text`` column; the store escapes it, so an identity or a
partition key holding one is polled, diffed, delivered and inspected like any other. A
string with a lone surrogate is not Unicode text (it has no UTF-8 form): its item is
quarantined, and the rest of the page is delivered.
"""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.model.rows import PKey

from .conftest import Recorder, World


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


IDENTITIES = ["a\x00b", "\x00", "a\x01", "a\x01\x02", "a", "\x01\x01"]


def listing(items: dict[str, dict[str, dict[str, Any]]]) -> Any:
    """A full listing of ``items[partition]``, one page."""

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[dict(item) for item in items[ctx.partition.key].values()])

    return fetch


def poller(items: dict[str, dict[str, dict[str, Any]]], **options: Any) -> Any:
    # Keys, not delete timing: a delete on the first complete pass that misses the item.
    options.setdefault("deletes", wk.Deletes(confirm_passes=1))
    return wk.define_poller(
        name="things",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=listing(items),
        **options,
    )


async def cycle(world: World, engine: wk.Engine) -> wk.TickResult:
    await world.clock.advance("10m")
    return await engine.tick()


async def test_identities_with_nul_are_polled_diffed_and_deleted(world: World) -> None:
    items = {"": {i: {"id": i, "n": 0} for i in IDENTITIES}}
    engine = world.engine(poller(items))
    recorder = Recorder()
    engine.on("things", recorder)
    result = await cycle(world, engine)
    assert all(polled.error is None for polled in result.polled)
    assert sorted((e.type, e.subject) for e in recorder.events) == sorted(
        ("created", i) for i in IDENTITIES
    )
    items[""]["a\x00b"] = {"id": "a\x00b", "n": 1}
    del items[""]["\x00"]
    await cycle(world, engine)
    assert [(e.type, e.subject) for e in recorder.events[len(IDENTITIES) :]] == [
        ("updated", "a\x00b"),
        ("deleted", "\x00"),
    ]
    key = PKey("things")
    stored = await world.store.load_versions(key, IDENTITIES)
    assert sorted(stored) == sorted(i for i in IDENTITIES if i != "\x00")
    assert stored["a\x00b"].revision == 1
    assert set(await world.store.load_tombstones(key, IDENTITIES)) == {"\x00"}
    assert len(set(recorder.ids)) == len(recorder.ids)
    # Nothing left over: the next cycle has nothing to say, and the key is healthy.
    await cycle(world, engine)
    assert len(recorder.events) == len(IDENTITIES) + 2
    assert await world.store.count_pending(key) == 0


async def test_partition_keys_with_nul_are_polled_and_inspected(world: World) -> None:
    tenants = ["t\x00a", "t\x01", "plain"]
    items = {t: {f"{t}/1": {"id": f"{t}/1"}} for t in tenants}
    engine = world.engine(poller(items, partitions=lambda: tenants))
    recorder = Recorder()
    engine.on("things", recorder)
    result = await cycle(world, engine)
    assert sorted(polled.partition for polled in result.polled) == sorted(tenants)
    assert sorted((e.partition, e.subject) for e in recorder.events) == sorted(
        (t, f"{t}/1") for t in tenants
    )
    report = await engine.inspect()
    assert {entry["partition"]: entry["items"] for entry in report["pollers"]} == dict.fromkeys(
        tenants, 1
    )
    assert sorted(await world.store.list_keys("things")) == sorted(
        PKey("things", t) for t in tenants
    )


async def test_an_identity_with_a_lone_surrogate_is_quarantined_alone(world: World) -> None:
    bad = "x\ud800"
    items = {"": {i: {"id": i} for i in ("a", bad, "b")}}
    engine = world.engine(poller(items))
    recorder = Recorder()
    engine.on("things", recorder)
    result = await cycle(world, engine)
    assert all(polled.error is None for polled in result.polled)
    assert [(e.type, e.subject) for e in recorder.events] == [("created", "a"), ("created", "b")]
    parked = await engine.parked.list("things")
    assert [row.kind for row in parked] == ["invalid"]
    assert "lone surrogate" in parked[0].error["message"]
    # The next cycle is quiet: the quarantined item does not jam the key.
    result = await cycle(world, engine)
    assert all(polled.error is None for polled in result.polled)
    assert len(recorder.events) == 2


async def test_a_partition_key_with_a_lone_surrogate_is_a_config_error(world: World) -> None:
    items = {"ok": {"x": {"id": "x"}}}
    engine = world.engine(poller(items, partitions=lambda: ["ok", "b\ud800"]))
    engine.on("things", Recorder())
    with pytest.raises(wk.ConfigError, match="lone surrogate") as info:
        await engine.tick()
    assert info.value.field == "partitions"
