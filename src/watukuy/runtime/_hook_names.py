"""The names of the hooks, in the order they fire within a lane cycle, and the context every
hook record carries.

Its own module so that the engine's hook bus knows them, and holds a context per key and
lane, without importing the detail records of :mod:`watukuy.runtime.hooks`.
"""

from __future__ import annotations

from typing import Final

from watukuy.model.records import dataclass
from watukuy.model.rows import Lane

__all__ = ["HOOK_NAMES", "HookContext"]

HOOK_NAMES: Final = (
    "on_lease_acquired",
    "on_poll_start",
    "on_fetch",
    "on_commit",
    "on_event",
    "on_delivered",
    "on_filtered",
    "on_retry",
    "on_parked",
    "on_invalid",
    "on_error",
    "on_lease_lost",
    "on_circuit_open",
    "on_circuit_close",
    "on_budget_wait",
    "on_schedule_change",
    "on_poll_end",
    "on_deletes_held",
    "on_late_arrivals",
)
"""The name of every hook the engine calls; a hook object may define any of them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HookContext:
    """Fields every hook record carries."""

    poller: str
    partition: str
    lane: Lane
    instance_id: str
