"""The real clock and randomness: the adapters behind the ``Clock`` and ``Random`` ports."""

from __future__ import annotations

import asyncio
import random
import time

__all__ = ["SystemClock", "SystemRandom"]


class SystemClock:
    """Wall-clock time in epoch milliseconds and real ``asyncio`` sleeps."""

    def now(self) -> int:
        """The current wall-clock time in epoch milliseconds."""
        return time.time_ns() // 1_000_000

    async def sleep(self, ms: int) -> None:
        """Sleep for ``ms`` milliseconds."""
        await asyncio.sleep(max(ms, 0) / 1000)

    def __repr__(self) -> str:
        return "SystemClock()"


class SystemRandom:
    """Randomness from :mod:`random`; optionally seeded."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def random(self) -> float:
        """A float uniformly distributed in ``[0, 1)``."""
        return self._random.random()
