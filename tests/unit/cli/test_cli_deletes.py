"""``watukuy deletes show|confirm|discard``: the mass-delete guard from the shell, with only
``--store`` (store-only) and through the engine's own operations."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import watukuy as wk
from watukuy.cli import main
from watukuy.cli._operators import EngineOperator, StoreOperator
from watukuy.model.rows import PKey
from watukuy.testing import VirtualClock

KEY = PKey("catalog")


def catalog(items: list[dict[str, Any]]) -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[dict(i) for i in items])

    return wk.define_poller(
        name="catalog",
        identity=lambda o: o["id"],
        cursor=wk.SnapshotDiff(),
        fetch=fetch,
        schedule=wk.Schedule(min="1m", max="1m", jitter=0),
    )


async def held_engine(store: wk.MemoryStore | wk.SqliteStore) -> tuple[wk.Engine, VirtualClock]:
    """An engine whose 12 items were listed twice, then the vendor answered empty twice:
    the guard holds 12 deletes."""
    items = [{"id": f"i{n:02d}"} for n in range(12)]
    clock = VirtualClock()
    engine = wk.Engine(store=store, pollers=[catalog(items)], clock=clock)
    engine.on("catalog", lambda event, ctx: None)
    for n in range(4):
        if n == 2:
            items.clear()
        await engine.tick()
        await clock.advance("1m")
    return engine, clock


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert err == ""
    return code, json.loads(out)


def test_store_only_show_confirm_discard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "w.db"
    url = f"sqlite:///{path}"

    async def setup() -> None:
        store = wk.SqliteStore(path)
        engine, _ = await held_engine(store)
        await engine.stop()
        await store.close()

    asyncio.run(setup())
    target = ["--store", url, "--poller", "catalog", "--json"]
    code, shown = run(["deletes", "show", *target], capsys)
    assert code == 0
    assert shown["held"]["count"] == 12
    assert shown["held"]["confirmed"] is False
    code, report = run(["inspect", "--store", url, "--json"], capsys)
    assert report["pollers"][0]["held_deletes"]["count"] == 12
    assert report["pollers"][0]["listing"]["live"]["last_outcome"].startswith("held 12")
    code, confirmed = run(["deletes", "confirm", *target], capsys)
    assert (code, confirmed["count"]) == (0, 12)
    code, shown = run(["deletes", "show", *target], capsys)
    assert shown["held"]["confirmed"] is True
    code, discarded = run(["deletes", "discard", *target], capsys)
    assert (code, discarded["count"]) == (0, 12)
    code, shown = run(["deletes", "show", *target], capsys)
    assert shown["held"] is None
    code, again = run(["deletes", "discard", *target], capsys)
    assert (code, again["count"]) == (0, 0)


def test_a_missing_poller_is_a_one_line_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(wk.SqliteStore(tmp_path / "x.db").migrate())
    code = main(["deletes", "confirm", "--store", f"sqlite:///{tmp_path}/x.db", "--poller", "x"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1
    assert "--poller" in err


async def test_a_store_only_confirm_is_emitted_by_the_next_engine_run() -> None:
    store = wk.MemoryStore()
    engine, clock = await held_engine(store)
    assert await StoreOperator(store, clock).deletes_confirm("catalog", partition=None) == 12
    await engine.tick()  # due at once
    assert await store.count_items(KEY) == 0
    assert (await engine.deletes.held("catalog")) is None
    await engine.stop()


async def test_the_engine_operator_uses_the_engine_methods() -> None:
    store = wk.MemoryStore()
    engine, _ = await held_engine(store)
    op = EngineOperator(engine)
    held = await op.deletes_held("catalog", partition=None)
    assert held is not None
    assert held.count == 12
    assert await op.deletes_discard("catalog", partition=None) == 12
    assert await op.deletes_confirm("catalog", partition=None) == 0
    assert await store.count_items(KEY) == 12
    await engine.stop()
