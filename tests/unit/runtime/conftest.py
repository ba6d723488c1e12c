"""What the runtime's unit tests share: a key leased in a MemoryStore, on a VirtualClock."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable

import pytest

import watukuy as wk
from watukuy.model.rows import PKey
from watukuy.runtime.lease import LeaseKeeper
from watukuy.testing import VirtualClock

LOGGER = logging.getLogger("tests.unit.runtime")


@dataclasses.dataclass
class Leased:
    """A key leased by ``"me"`` in a migrated store, and the keeper of that lease."""

    store: wk.MemoryStore
    clock: VirtualClock
    keeper: LeaseKeeper


@pytest.fixture
def lease_key() -> Callable[[PKey], Awaitable[Leased]]:
    """``await lease_key(key)``: a fresh store and clock with ``key`` leased for a minute."""

    async def lease(key: PKey) -> Leased:
        clock = VirtualClock()
        store = wk.MemoryStore()
        await store.migrate()
        lease = await store.acquire_lease(key, "me", 60_000, clock.now())
        assert lease is not None
        keeper = LeaseKeeper(
            store,
            key,
            lease,
            ttl_ms=60_000,
            renew_every_ms=20_000,
            clock=clock,
            logger=LOGGER,
            on_lost=lambda: None,
        )
        return Leased(store, clock, keeper)

    return lease
