"""G1-G5 and G9 under seeded chaos: fixed seeds for every strategy, on every store.

Each run is 150 steps of mutations, kills at every kill point and restarts (fewer steps on
the server-backed stores, which are slower per call), then quiescence and the checks of
``watukuy.testing.chaos``. Odd seeds give the incremental strategies a reconcile listing
(deletes checked), even seeds do not (live-lane losses cannot hide behind a reconcile).
The long sweep is ``make chaos``; a seed that ever fails there gets its own test in
``test_chaos_regression_seeds.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from watukuy.model.ports import StateStore
from watukuy.stores.sqlite import SqliteStore
from watukuy.testing.chaos import STRATEGIES, ChaosReport, assert_chaos_report, run_chaos

from .conftest import record

MEMORY_SEEDS = (1, 2, 3, 4, 5, 6, 7, 8)
SQLITE_SEEDS = (1, 2, 3, 4)
SERVER_SEEDS = (1, 2, 3)


def survived(report: ChaosReport) -> None:
    record(report)
    assert_chaos_report(report)
    assert report.total_kills > 0
    assert report.pending == 0
    assert report.parked == 0
    assert report.delivered >= report.unique_events > 0


@pytest.mark.parametrize("seed", MEMORY_SEEDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_memory(strategy: Any, seed: int) -> None:
    survived(await run_chaos(seed=seed, strategy=strategy))


@pytest.mark.parametrize("seed", [21, 22])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_memory_with_payloads(strategy: Any, seed: int) -> None:
    survived(await run_chaos(seed=seed, strategy=strategy, retain_payload=True))


@pytest.mark.parametrize("seed", [31, 32])
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_memory_under_heavy_fire(strategy: Any, seed: int) -> None:
    report = await run_chaos(
        seed=seed,
        strategy=strategy,
        concurrency=1,
        kill_probability=0.7,
        max_mutations_per_step=6,
    )
    survived(report)


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[StateStore]:
    store = SqliteStore(tmp_path / "chaos.db")
    yield store
    await store.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SQLITE_SEEDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_sqlite(strategy: Any, seed: int, sqlite_store: StateStore) -> None:
    survived(await run_chaos(seed=seed, strategy=strategy, store=sqlite_store))


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("seed", SERVER_SEEDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_postgres(strategy: Any, seed: int, postgres_store: Any) -> None:
    survived(await run_chaos(seed=seed, strategy=strategy, steps=80, store=postgres_store))


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.parametrize("seed", SERVER_SEEDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_redis(strategy: Any, seed: int, redis_store: Any) -> None:
    survived(await run_chaos(seed=seed, strategy=strategy, steps=120, store=redis_store))
