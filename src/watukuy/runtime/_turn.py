"""One turn of the event loop, for long stretches of work that never wait.

A handler that returns at once, or a page of items being hashed, gives the loop no point
at which to run anything else: not a lease heartbeat, not another key. :func:`turn` is
that point.
"""

from __future__ import annotations

import types
from collections.abc import Generator

__all__ = ["turn"]


@types.coroutine
def turn() -> Generator[None, None, None]:
    """Let the event loop run once, as ``asyncio.sleep(0)`` does, without a clock."""
    yield
