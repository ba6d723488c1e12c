"""G9 with real processes: SIGKILL an engine 30 times at seeded moments, lose nothing.

A child process runs the engine (real clock, lease TTL 2 s, schedule from 100 ms) against a
real store, polling a ``FakeApi`` served over HTTP by this test, and writes every event it
handles to a consumer log (its own SQLite file) before the engine acks it. Meanwhile the
test mutates the API and kills the child with SIGKILL at seeded moments, starting a new one
each time. After 30 kills a last child runs until everything has been delivered and is
stopped gracefully. Then the consumer log must show every item in its final state (and
every observed removal as ``deleted``), per-item order, duplicates only as exact copies
under one id and sequence, and the outbox must be empty.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import pytest
from _children.supervisor import Child, Dataset, create_consumer_log, read_deliveries

from watukuy.model.ports import StateStore
from watukuy.model.rows import PKey
from watukuy.stores.sqlite import SqliteStore
from watukuy.testing import FakeApi
from watukuy.testing.chaos._checks import convergence, evaluate

pytestmark = pytest.mark.slow

KILLS = 30
KEY = PKey("orders")


async def crash_and_recover(
    tmp_path: Path, store: StateStore, store_args: list[str], strategy: str, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    api = FakeApi(page_size=20)
    data = Dataset(api, seed, initial=15)
    consumer_log = tmp_path / "consumer.db"
    create_consumer_log(consumer_log)
    server = await api.serve()
    args = [
        "--api",
        server.url,
        "--consumer-log",
        str(consumer_log),
        "--strategy",
        strategy,
        "--ttl",
        "2s",
        *store_args,
    ]
    mutating = True

    async def mutator() -> None:
        while mutating:
            await asyncio.sleep(rng.uniform(0.01, 0.06))
            data.mutate()

    mutations = asyncio.create_task(mutator())
    exits: list[int] = []
    try:
        for n in range(1, KILLS + 1):
            child = await Child.start(tmp_path, f"child-{n}", [*args, "--seed", str(n)])
            await child.wait_for("ready")
            await asyncio.sleep(rng.uniform(0.05, 0.7))
            exits.append(await child.kill())
        mutating = False
        await mutations
        last = await Child.start(tmp_path, "last", [*args, "--seed", "0"])
        await last.wait_for("ready")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            converged = not convergence(
                read_deliveries(consumer_log), data.final(), data.removed, deletes_observable=True
            )
            if converged and await store.count_pending(KEY) == 0:
                break
            await asyncio.sleep(0.1)
        assert await last.stop() == 0
        assert last.lines()[-1] == "stopped"
    finally:
        mutating = False
        await asyncio.gather(mutations, return_exceptions=True)
        await server.close()

    assert exits == [-9] * KILLS
    deliveries = read_deliveries(consumer_log)
    violations, unique = evaluate(
        deliveries,
        data.served,
        data.final(),
        data.removed,
        deletes_observable=True,
        retain_payload=False,
    )
    assert violations == []
    assert await store.count_pending(KEY) == 0
    assert await store.count_parked(KEY) == 0
    return {
        "mutations": data.counts,
        "delivered": len(deliveries),
        "unique": unique,
        "duplicates": len(deliveries) - unique,
    }


async def test_sqlite_survives_30_sigkills(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "engine.db")
    await store.migrate()
    try:
        figures = await crash_and_recover(
            tmp_path, store, ["--sqlite", str(tmp_path / "engine.db")], "timestamp", seed=11
        )
    finally:
        await store.close()
    print(f"sqlite, timestamp + reconcile: {KILLS} kills, {figures}")


@pytest.mark.postgres
async def test_postgres_survives_30_sigkills(
    tmp_path: Path, postgres_url: str, pg_schema: str, postgres_store: Any
) -> None:
    figures = await crash_and_recover(
        tmp_path,
        postgres_store,
        ["--postgres", postgres_url, "--schema", pg_schema],
        "snapshot_diff",
        seed=12,
    )
    print(f"postgres, snapshot_diff: {KILLS} kills, {figures}")
