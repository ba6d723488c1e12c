"""The conformance harness on every configuration that is not known to be open.

Seeded examples on MemoryStore (several seeds per configuration) and SQLite (fewer, it is
slower per call); the long sweep on all four stores is ``make conformance``. A
configuration listed in ``KNOWN_OPEN`` still finds an unfixed defect: it is left to the
sweep (not skipped here) until the fix lands, and then it joins this list. A failure is
shrunk before it is reported: the message carries the seed, the smallest plan found that
fails the same way, and the command that replays it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from watukuy.model.ports import StateStore
from watukuy.stores.sqlite import SqliteStore
from watukuy.testing.conformance import (
    CONFIGS,
    KNOWN_OPEN,
    ConformanceConfig,
    assert_conformance,
    known_open,
    run_conformance,
)

from .conftest import record

ON_MEMORY = [config for config in CONFIGS if not known_open(config.name, "memory")]
ON_SQLITE = [config for config in CONFIGS if not known_open(config.name, "sqlite")]
MEMORY_SEEDS = (1, 2, 3, 4)
SQLITE_SEEDS = (1,)


def _id(config: ConformanceConfig) -> str:
    return config.name


@pytest.mark.parametrize("seed", MEMORY_SEEDS)
@pytest.mark.parametrize("config", ON_MEMORY, ids=_id)
async def test_memory(config: ConformanceConfig, seed: int) -> None:
    report = await run_conformance(config, seed=seed, shrink=True)
    record(report)
    assert_conformance(report)
    assert report.delivered > 0


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[StateStore]:
    store = SqliteStore(tmp_path / "conformance.db")
    yield store
    await store.close()


@pytest.mark.parametrize("seed", SQLITE_SEEDS)
@pytest.mark.parametrize("config", ON_SQLITE, ids=_id)
async def test_sqlite(config: ConformanceConfig, seed: int, sqlite_store: StateStore) -> None:
    report = await run_conformance(config, seed=seed + 100, store=sqlite_store, shrink=True)
    record(report)
    assert_conformance(report)
    assert report.delivered > 0


def test_known_open_names_exist() -> None:
    from watukuy.testing.conformance import OPEN_DEFECTS

    names = {config.name for config in CONFIGS}
    assert set(KNOWN_OPEN) <= names
    assert {entry.partition("@")[0] for entry in KNOWN_OPEN.values()} <= set(OPEN_DEFECTS)
