"""Test tools: a virtual clock, seeded randomness, a scriptable vendor API.

Everything here is public and meant for your own tests as much as ours:

- :class:`VirtualClock`: time moves only when the test says so (``await clock.advance("5s")``).
- :class:`SeededRandom`: the same jitter on every run.
- :class:`CapturingLogger`: a logger that keeps its records for assertions
  (``Engine(logger=CapturingLogger())``, then ``log.for_poller("orders").messages``).
- :class:`FakeApi`: an in-memory vendor API with listings, faults, rate-limit headers, ETags
  and latency, in process (``api.transport()`` for httpx) or over real HTTP (``api.serve()``).
- :func:`run_chaos`: a seeded crash simulation (random mutations, kill points K1..K7,
  restarts) that checks the guarantees afterwards; :class:`FaultyStore` is the store wrapper
  it kills through, reusable in your own crash tests.
- ``watukuy.testing.conformance``: a model-based run against a vendor that changes between
  any two requests of a cycle, checked against the vendor's own history (imported on its
  own: ``from watukuy.testing.conformance import run_conformance``).
- ``watukuy.testing.store_contract``: the conformance suite for ``StateStore`` implementations
  (a separate module because it imports pytest).
"""

from __future__ import annotations

from .chaos import (
    KILL_POINTS,
    STRATEGIES,
    ChaosOptions,
    ChaosReport,
    ChaosStrategy,
    KillPoint,
    assert_chaos_report,
    describe_chaos,
    replay_command,
    run_chaos,
)
from .clock import VirtualClock
from .fake_api import FakeApi, FakeApiClient, FakeServer, FakeTenant, fake_items
from .faulty import FaultyStore, ForwardingStore, LeaseAudit, SimulatedCrash
from .logs import CapturingLogger
from .random import SeededRandom

__all__ = [
    "KILL_POINTS",
    "STRATEGIES",
    "CapturingLogger",
    "ChaosOptions",
    "ChaosReport",
    "ChaosStrategy",
    "FakeApi",
    "FakeApiClient",
    "FakeServer",
    "FakeTenant",
    "FaultyStore",
    "ForwardingStore",
    "KillPoint",
    "LeaseAudit",
    "SeededRandom",
    "SimulatedCrash",
    "VirtualClock",
    "assert_chaos_report",
    "describe_chaos",
    "fake_items",
    "replay_command",
    "run_chaos",
]
