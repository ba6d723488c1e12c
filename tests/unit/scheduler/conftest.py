"""Factories for the scheduler tests: options, states and scripted randomness."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from watukuy.model.errors import SerializedError
from watukuy.model.options import Backoff, Circuit, Schedule

NOW = 1_700_000_000_000
"""A fixed 'now' (epoch ms) for the tests."""

ERROR: SerializedError = {
    "name": "HttpError",
    "message": "GET /orders responded 500",
    "status": 500,
}


class ScriptedRandom:
    """A ``Random`` that returns the given values in order and fails when they run out,
    so a test also proves how many draws a function makes."""

    def __init__(self, values: Sequence[float]) -> None:
        self._values = list(values)
        self.draws = 0

    def random(self) -> float:
        if self.draws >= len(self._values):
            raise AssertionError(f"unexpected draw #{self.draws + 1} from ScriptedRandom")
        value = self._values[self.draws]
        self.draws += 1
        return value


@pytest.fixture
def scripted() -> Callable[..., ScriptedRandom]:
    """``scripted(0.5, 0.0)`` builds a random source returning 0.5, then 0.0, then failing."""
    return lambda *values: ScriptedRandom(values)


@pytest.fixture
def now() -> int:
    return NOW


@pytest.fixture
def error() -> SerializedError:
    return ERROR.copy()


@pytest.fixture
def plain() -> Schedule:
    """1s..60s, adaptive, no jitter, backoff 1s x2 up to 10s."""
    return Schedule(min="1s", max="60s", jitter=0, backoff=Backoff(base="1s", factor=2, max="10s"))


@pytest.fixture
def circuit() -> Circuit:
    """Three failures open the circuit; probes every 30s."""
    return Circuit(failures=3, probe_every="30s")
