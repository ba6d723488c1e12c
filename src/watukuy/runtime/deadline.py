"""Waiting for work no longer than a deadline on the engine's clock, whatever the work does.

A store that stopped answering may not let go of a call for a long while (a driver trying
to cancel a query on a frozen server, a client without timeouts). The operations that
promise an answer in time (``tick(max_duration=...)``, ``inspect()``) wait for their work
through :func:`finish_by`, and give up on it when the clock says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from watukuy.model.ports import Clock

__all__ = ["finish_by"]


async def finish_by(
    clock: Clock,
    work: asyncio.Future[Any],
    at: int,
    *,
    before_cancel: Callable[[], object] | None = None,
) -> bool:
    """Wait for ``work`` until ``at`` (epoch ms on ``clock``).

    Args:
        clock: The engine's clock.
        work: What to wait for.
        at: The deadline.
        before_cancel: Called when the deadline passed, before ``work`` is cancelled: the
            moment to look at what it was still waiting for.

    Returns:
        ``True`` when it finished in time (its own error, if any, is raised), ``False``
        when it did not: it is then cancelled and left to end on its own, its outcome
        retrieved whenever that happens.
    """
    sleeper = asyncio.ensure_future(clock.sleep(max(0, at - clock.now())))
    try:
        await asyncio.wait((work, sleeper), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        raise
    finally:
        sleeper.cancel()
    if work.done():
        work.result()
        return True
    if before_cancel is not None:
        before_cancel()
    work.cancel()
    work.add_done_callback(lambda done: done.cancelled() or done.exception())
    return False
