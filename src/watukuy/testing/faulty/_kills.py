"""Kill points, and the exception a simulated process death raises."""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = ["KILL_POINTS", "KillPoint", "SimulatedCrash"]

KillPoint = Literal[
    "before-acquire",
    "after-fetch",
    "after-commit",
    "mid-dispatch",
    "before-ack",
    "after-ack-before-schedule",
    "during-release",
    "handler",
]
"""Where a simulated process dies:

- ``before-acquire`` (K1): ``acquire_lease`` fails before reaching the store.
- ``after-fetch`` (K2): ``commit_poll`` fails before reaching the store: the page was
  fetched and diffed, nothing was persisted.
- ``after-commit`` (K3): ``commit_poll`` persists, then the process dies before dispatch.
- ``mid-dispatch`` (K4): an ``ack_events`` persists, then the process dies with the rest of
  the batch unacknowledged.
- ``before-ack`` (K4): the handler ran, its ``ack_events`` fails before reaching the store.
- ``after-ack-before-schedule`` (K5/K6): ``save_state`` fails: the schedule is not saved.
- ``during-release`` (K7): ``release_lease`` fails: the lease lingers until it expires.
- ``handler``: the consumer raises once; not a process death (the dispatcher retries).
"""

KILL_POINTS: Final[tuple[KillPoint, ...]] = get_args(KillPoint)
"""Every kill point, K1..K7 in poll-cycle order, then ``handler``."""


class SimulatedCrash(BaseException):
    """The simulated death of a process (a :class:`BaseException`, so nothing catches it).

    Attributes:
        kill_point: The kill point that fired, or ``"dead"`` for a call made by a process
            that had already died.
        detail: What was in flight.
    """

    def __init__(self, kill_point: KillPoint | Literal["dead"], detail: str = "") -> None:
        self.kill_point = kill_point
        self.detail = detail
        suffix = f" ({detail})" if detail else ""
        super().__init__(f"simulated crash at {kill_point}{suffix}")
