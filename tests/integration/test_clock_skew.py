"""An engine on the system clock compares its clock with the store server's at start."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import watukuy as wk
from watukuy.testing import VirtualClock


class _SkewedStore(wk.MemoryStore):
    """A MemoryStore whose "server" clock runs ``skew_ms`` ahead of this host's."""

    def __init__(self, skew_ms: int) -> None:
        super().__init__()
        self.skew_ms = skew_ms
        self.asked = 0

    async def server_time(self) -> int:
        self.asked += 1
        return time.time_ns() // 1_000_000 + self.skew_ms


def _orders() -> wk.PollerDefinition[Any]:
    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        return wk.Page(items=[])

    return wk.define_poller(
        name="orders", identity=lambda item: item["id"], cursor=wk.SnapshotDiff(), fetch=fetch
    )


@pytest.mark.parametrize("skew_ms", [45_000, -45_000])
async def test_a_skewed_store_clock_is_reported_once(
    skew_ms: int, caplog: pytest.LogCaptureFixture
) -> None:
    store = _SkewedStore(skew_ms)
    engine = wk.Engine(store=store, pollers=[_orders()])
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        await engine.tick()
        await engine.tick()
    warnings = [r.getMessage() for r in caplog.records if "the store's clock" in r.getMessage()]
    side = "ahead of" if skew_ms > 0 else "behind"
    assert len(warnings) == 1
    assert f" ms {side} this process's clock" in warnings[0]
    assert "lease.safety_margin (5000 ms)" in warnings[0]
    assert store.asked == 1


async def test_clocks_within_the_bound_say_nothing(caplog: pytest.LogCaptureFixture) -> None:
    store = _SkewedStore(0)
    engine = wk.Engine(store=store, pollers=[_orders()])
    with caplog.at_level(logging.WARNING, logger="watukuy"):
        await engine.tick()
    assert store.asked == 1
    assert not [r for r in caplog.records if "the store's clock" in r.getMessage()]


async def test_a_virtual_clock_is_never_compared() -> None:
    store = _SkewedStore(10**9)
    engine = wk.Engine(store=store, pollers=[_orders()], clock=VirtualClock())
    await engine.tick()
    assert store.asked == 0
