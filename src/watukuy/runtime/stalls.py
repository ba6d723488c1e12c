"""What a run that missed its deadline was waiting for: the store, the API or a handler.

``tick(max_duration=...)`` gives up on runs still going ``TICK_GRACE_MS`` after its
deadline. "The store or the API" is not an answer an operator can act on, so before the
runs are cancelled each one is asked where it is suspended: the chain of coroutines its
task awaits (``cr_await``, and through the tasks it awaits, their coroutines) is walked,
and the innermost frame that belongs to the engine's store, to a ``fetch`` call or to the
dispatcher names the culprit. Nothing is recorded while runs go well: the walk happens
only for a run that is already late.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from watukuy.model.errors import StoreError
from watukuy.model.ports import StateStore
from watukuy.model.records import dataclass

from .consumers import HandlerConsumer, Subscription
from .dispatcher import Dispatcher
from .fetching import Fetch
from .lane import LaneCycle
from .pass_end import PassEnd

if TYPE_CHECKING:
    from .hooks import ErrorPhase  # an engine without hooks never loads their records

__all__ = ["Stall", "diagnose"]

_MAX_DEPTH = 200
_LEASE_CALLS = frozenset({"acquire_lease", "renew_lease", "release_lease", "get_lease"})


@dataclass(frozen=True, slots=True)
class Stall:
    """Where a late run was suspended.

    Attributes:
        what: The late run (or pass) in words: ``orders/eu``.
        waiting_for: In words: ``the store (MemoryStore.load_state)``, ``the API (fetch of
            page 2)``, ``the handler on_order()``, or the innermost function otherwise.
        phase: The ``on_error`` phase it is reported in.
        lane: The lane that was running (``live`` when none had started).
        error: The error it is reported with: a ``StoreError`` when the store did not
            answer, a ``TimeoutError`` otherwise.
    """

    what: str
    waiting_for: str
    phase: ErrorPhase
    lane: str
    error: BaseException


def _frames(task: asyncio.Future[Any]) -> Iterator[FrameType]:
    """The frames ``task`` is suspended in, outermost first, through the tasks it awaits.

    A task's coroutine awaits coroutines (``cr_await``) down to a future; the future a
    task is blocked on is its ``_fut_waiter`` (what asyncio shows as ``wait_for=`` in a
    task's repr). When that future is itself a task, or a ``gather()`` of tasks, the walk
    goes on in the first of them still running.
    """
    seen: set[int] = set()
    current: Any = task
    while isinstance(current, asyncio.Future) and id(current) not in seen:
        seen.add(id(current))
        awaited: Any = current.get_coro() if isinstance(current, asyncio.Task) else None
        while awaited is not None and len(seen) < _MAX_DEPTH:
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
            if frame is None:
                break
            seen.add(id(awaited))
            yield frame
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)
        waiter = getattr(current, "_fut_waiter", None)
        children = getattr(waiter, "_children", None)
        if children is not None:  # gather(): follow the first child still running
            waiter = next((child for child in children if not child.done()), None)
        current = waiter


def diagnose(task: asyncio.Future[Any], store: StateStore, what: str, late_ms: int) -> Stall:
    """Say what ``task`` is suspended on.

    Args:
        task: The task of the late run (or of the pass, before any run started).
        store: The engine's store: a frame of a method of this object is a store call.
        what: The run in words, for the message (``orders/eu``).
        late_ms: How long after the deadline the pass gave up.

    Returns:
        The stall, with an error whose message says all of it.
    """
    lane = "live"
    found: tuple[str, ErrorPhase] | None = None
    delivering = handler = False
    innermost = ""
    for frame in _frames(task):
        owner = frame.f_locals.get("self")
        innermost = frame.f_code.co_qualname
        # A release of held deletes runs in a PassEnd of its own, outside any cycle.
        if isinstance(owner, LaneCycle | PassEnd):
            lane = str(getattr(owner, "_lane", lane))
        if owner is store:
            method = frame.f_code.co_name
            phase: ErrorPhase = "commit"
            if method in _LEASE_CALLS:
                phase = "lease"
            elif method == "save_state":
                phase = "schedule"
            elif delivering:
                phase = "dispatch"
            found = (f"the store ({type(store).__name__}.{method})", phase)
            break  # what the store does inside its own methods is the store's
        if isinstance(owner, Fetch):
            found = (f"the API (fetch of page {owner.ctx.page})", "fetch")
            break  # fetch is the user's code: whatever it awaits is the API to us
        if isinstance(owner, Dispatcher):
            delivering = True
            found = ("a handler or an ack (delivery)", "dispatch")
        elif isinstance(owner, HandlerConsumer):
            found = ("a handler", "dispatch")
            handler = True
        elif isinstance(owner, Subscription):
            found = ("a subscriber to take the event (subscribe())", "dispatch")
            break
        elif handler:
            found = (f"the handler {frame.f_code.co_qualname}()", "dispatch")
            break  # the user's code: whatever it awaits is the handler's wait
    waiting_for, phase = found or (innermost or "nothing it could name", "commit")
    message = (
        f"tick(): {what} was still waiting for {waiting_for} {late_ms} ms after max_duration; "
        "the run was cancelled"
    )
    error: BaseException = (
        StoreError(message) if waiting_for.startswith("the store") else TimeoutError(message)
    )
    return Stall(what=what, waiting_for=waiting_for, phase=phase, lane=lane, error=error)
