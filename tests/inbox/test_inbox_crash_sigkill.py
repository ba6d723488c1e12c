"""The inbox under real SIGKILLs (``crash_loop``), short: ``make chaos`` runs it long.

A child engine is killed at the three points it announces (before the effect, between the
effect and the commit, between the commit and the engine's ack) and restarted; at the end
the counter equals the distinct ids delivered and the versions the vendor produced, with
nothing applied twice and nothing missing. The control runs the same loop with a consumer
that skips the inbox, and must apply something twice: the loop can see what it checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crash_loop import POINTS, crash_loop

pytestmark = pytest.mark.slow

RUNS = 10


async def test_sqlite_consumer_counts_every_event_once_across_sigkills(tmp_path: Path) -> None:
    figures = await crash_loop("sqlite", RUNS, seed=3, folder=tmp_path)
    print(figures.summary())
    assert figures.ok, figures.summary()
    assert all(figures.kills[point] >= 1 for point in POINTS), figures.summary()


@pytest.mark.postgres
async def test_postgres_consumer_counts_every_event_once_across_sigkills(
    tmp_path: Path, postgres_url: str
) -> None:
    figures = await crash_loop("postgres", RUNS, seed=4, folder=tmp_path)
    print(figures.summary())
    assert figures.ok, figures.summary()
    assert all(figures.kills[point] >= 1 for point in POINTS), figures.summary()


async def test_without_the_inbox_the_same_loop_applies_events_twice(tmp_path: Path) -> None:
    figures = await crash_loop("sqlite", 3, seed=5, folder=tmp_path, with_inbox=False)
    print(figures.summary())
    assert figures.kills["after-commit"] >= 1, figures.summary()
    assert figures.double_applied >= figures.kills["after-commit"], figures.summary()
    assert not figures.ok
