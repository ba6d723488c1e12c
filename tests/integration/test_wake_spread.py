"""The replicas' wake-up spread never takes a poll past the top of its jitter band.

The daemon adds a random delay (``fair_share_spread``) to each poll wake-up so replicas
reading the same ``next_due_at`` take turns. Added on top of a jittered interval it could
push a poll past ``interval x (1 + jitter)``, the longest wait the schedule promises; the
spread is drawn from the room left under that top (less the planning allowance), and kept
whole for a wake-up that is already later (a paced one).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

import watukuy as wk
from support.vendors import ArrivalsVendor
from watukuy.scheduler import PLANNING_ALLOWANCE_MS
from watukuy.testing import VirtualClock

from .conftest import listing_poller


class Fixed:
    """Every draw the same: ``0.999999`` is the longest jitter and the longest spread."""

    def __init__(self, draw: float) -> None:
        self.draw = draw

    def random(self) -> float:
        return self.draw


@pytest.mark.parametrize("draw", [0.999_999, 0.5])
async def test_a_poll_wakes_no_later_than_the_top_of_its_jitter_band(draw: float) -> None:
    clock = VirtualClock()
    vendor = ArrivalsVendor(clock)

    poller = listing_poller(wk.Schedule(min="10s", max="10s", jitter=0.1))
    engine = wk.Engine(
        store=wk.MemoryStore(),
        pollers=[poller],
        clock=clock,
        random=Fixed(draw),
        fair_share_spread="5s",
        http_client=httpx.AsyncClient(transport=vendor),
    )
    engine.on("orders", lambda event, ctx: None)
    await engine.start()
    for _ in range(400):  # 40 s in steps of 100 ms
        await clock.advance("100ms")
    stopping = asyncio.ensure_future(engine.stop())
    while not stopping.done():
        await clock.advance("100ms")
    await stopping

    gaps = [b - a for a, b in zip(vendor.arrivals, vendor.arrivals[1:], strict=False)]
    assert len(gaps) >= 3
    # 10 s + 10% jitter = 11 s, never the 16 s (or 12.5 s) the whole spread would make it;
    # a wake-up in the middle of the band draws its spread from the room that is left.
    assert all(gap <= 11_000 - PLANNING_ALLOWANCE_MS for gap in gaps), gaps
    # At the top of the band (less the allowance) no room is left for a spread; in the
    # middle (10 s) the draw is taken from the 500 ms left: 250 ms. (Later wake-ups may
    # lose their spread to the resync's rolling audit, which only brings them forward.)
    assert gaps[0] == (10_500 if draw > 0.9 else 10_250), gaps
