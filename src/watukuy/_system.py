"""The real clock, randomness and threads: the adapters behind the ``Clock``, ``Random`` and
``Offload`` ports."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["SystemClock", "SystemRandom", "ThreadOffload"]

T = TypeVar("T")


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


class ThreadOffload:
    """Runs blocking user code (a sync handler, a sync ``fetch``) on a worker thread with
    :func:`asyncio.to_thread`, so the event loop keeps running meanwhile."""

    async def run(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Call ``fn(*args)`` on a worker thread and return what it returns."""
        return await asyncio.to_thread(fn, *args)

    def __repr__(self) -> str:
        return "ThreadOffload()"
