"""One turn of the event loop, for long stretches of work that never wait.

A handler that returns at once, or a page of items being hashed, gives the loop no point
at which to run anything else: not a lease heartbeat, not another key. :func:`turn` is
that point.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Generator

__all__ = ["hand_over_of", "turn"]


def hand_over_of(store: object) -> Callable[[], None] | None:
    """Always ``None``: nothing is handed over at a turn any more.

    Only ``runtime/lane.py`` still asks (``hand_over_of(deps.store)`` and
    ``turn(self._hand_over)``); its calls go with this function once that module is edited.
    """
    return None


@types.coroutine
def turn(_: object = None) -> Generator[None, None, None]:
    """Let the event loop run once, as ``asyncio.sleep(0)`` does, without a clock."""
    yield
