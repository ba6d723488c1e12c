"""Test tools: a virtual clock, seeded randomness, a scriptable vendor API.

Everything here is public and meant for your own tests as much as ours:

- :class:`VirtualClock`: time moves only when the test says so (``await clock.advance("5s")``).
- :class:`SeededRandom`: the same jitter on every run.
- :class:`FakeApi`: an in-memory vendor API with listings, faults, rate-limit headers, ETags
  and latency, in process (``api.transport()`` for httpx) or over real HTTP (``api.serve()``).
- ``watukuy.testing.store_contract``: the conformance suite for ``StateStore`` implementations
  (a separate module because it imports pytest).
"""

from __future__ import annotations

from .clock import VirtualClock
from .fake_api import FakeApi, FakeApiClient, FakeServer, FakeTenant, fake_items
from .random import SeededRandom

__all__ = [
    "FakeApi",
    "FakeApiClient",
    "FakeServer",
    "FakeTenant",
    "SeededRandom",
    "VirtualClock",
    "fake_items",
]
