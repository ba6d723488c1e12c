"""Fixtures for the CLI unit tests: an engine that has polled once, so the store holds
real keys, cursors, items and parked rows."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from cli_fakes import Polled, build_engine

import watukuy as wk
from watukuy.testing import VirtualClock

START = 1_767_225_600_000 + 3_600_000  # an hour after the fake items were stamped


@pytest.fixture
async def polled() -> AsyncIterator[Polled]:
    """An engine that has ticked once: 5 orders, tenants t1/t2, 2 parked poison events."""
    store = wk.MemoryStore()
    clock = VirtualClock(START)
    engine = build_engine(store, clock)
    await engine.tick()
    yield Polled(engine, store, clock)
    await engine.stop()
