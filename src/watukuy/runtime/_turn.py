"""One turn of the event loop, for long stretches of work that never wait.

A handler that returns at once, or a page of items being hashed, gives the loop no point
at which to run anything else: not a lease heartbeat, not another key. Nor the thread of a
store that works on one (:class:`~watukuy.model.ports.StoreThread`): between two
statements of a commit that thread needs the GIL back, and while the loop computes it
would wait out the interpreter's switch interval (5 ms) at every one of them. A turn first
lets such a store hand its thread the GIL, then lets the loop poll.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Generator

from watukuy.model.ports import StoreThread

__all__ = ["HandOver", "hand_over_of", "turn"]

HandOver = Callable[[], None] | None
"""A store's :meth:`~watukuy.model.ports.StoreThread.hand_over`, or ``None``."""


def hand_over_of(store: object) -> HandOver:
    """``store.hand_over`` when the store works on a thread of its own, else ``None``."""
    return store.hand_over if isinstance(store, StoreThread) else None


@types.coroutine
def turn(hand_over: HandOver = None) -> Generator[None, None, None]:
    """Let the event loop run once, as ``asyncio.sleep(0)`` does, without a clock; first
    let ``hand_over`` give a store's thread the GIL."""
    if hand_over is not None:
        hand_over()
    yield
