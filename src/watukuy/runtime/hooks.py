"""Lifecycle hooks: what happened, as frozen detail records.

A hook set is any object with some of the methods below (sync or async); pass one or a list
to ``Engine(hooks=...)``. Every method receives one frozen record carrying ``poller``,
``partition``, ``lane`` and ``instance_id`` plus its own fields. A hook that raises is logged
at WARNING and never affects the engine.

Within one lane cycle hooks fire in this order::

    on_lease_acquired -> on_poll_start
      -> (on_fetch -> on_commit -> on_event* -> on_invalid*
          -> on_delivered*/on_filtered*/on_retry*/on_parked*)*
      -> on_schedule_change -> on_poll_end
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from watukuy.model.errors import SerializedError, ValidationIssue
from watukuy.model.events import Event
from watukuy.model.records import fast_init
from watukuy.model.rows import Lane, Lease, ParkedRow, PollSummary

__all__ = [
    "HOOK_NAMES",
    "BudgetWaitDetails",
    "CircuitCloseDetails",
    "CircuitOpenDetails",
    "CommitDetails",
    "DeletesHeldDetails",
    "DeliveredDetails",
    "ErrorDetails",
    "ErrorPhase",
    "EventDetails",
    "FetchDetails",
    "FilteredDetails",
    "HookBus",
    "HookContext",
    "InvalidDetails",
    "LeaseAcquiredDetails",
    "LeaseLostDetails",
    "ParkedDetails",
    "PollEndDetails",
    "PollStartDetails",
    "RetryDetails",
    "ScheduleChangeDetails",
]

ErrorPhase = Literal["fetch", "commit", "dispatch", "lease", "schedule"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HookContext:
    """Fields every hook record carries."""

    poller: str
    partition: str
    lane: Lane
    instance_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseAcquiredDetails(HookContext):
    """``on_lease_acquired``: once per key run, after the lease was taken."""

    lease: Lease


@dataclass(frozen=True, slots=True, kw_only=True)
class PollStartDetails(HookContext):
    """``on_poll_start``: a lane cycle begins."""

    started_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchDetails(HookContext):
    """``on_fetch``: after each fetched page."""

    page: int
    duration_ms: int
    items: int
    not_modified: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitDetails(HookContext):
    """``on_commit``: after each ``commit_poll``."""

    events: int
    upserts: int
    deletes: int
    duration_ms: int


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class EventDetails(HookContext):
    """``on_event``: once per event committed to the outbox."""

    event: Event[Any]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveredDetails(HookContext):
    """``on_delivered``: the handler succeeded and the event was acked."""

    event: Event[Any]
    attempt: int
    duration_ms: int


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class FilteredDetails(HookContext):
    """``on_filtered``: the consumer's ``when=`` filter turned the event down, and the
    event was acked without reaching it."""

    event: Event[Any]
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDetails(HookContext):
    """``on_retry``: the handler failed and will be retried after ``delay_ms``."""

    event: Event[Any]
    attempt: int
    error: SerializedError
    delay_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedDetails(HookContext):
    """``on_parked``: a poison event was parked."""

    row: ParkedRow


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidDetails(HookContext):
    """``on_invalid``: an item failed the schema and was quarantined."""

    item: Any
    issues: list[ValidationIssue]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorDetails(HookContext):
    """``on_error``: a lane cycle failed in ``phase``."""

    error: SerializedError
    phase: ErrorPhase


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseLostDetails(HookContext):
    """``on_lease_lost``: a write met a newer epoch, or a renewal failed."""

    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitOpenDetails(HookContext):
    """``on_circuit_open``: consecutive failures (or a poison halt) opened the circuit."""

    failures: int
    probe_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitCloseDetails(HookContext):
    """``on_circuit_close``: a successful cycle closed an open circuit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetWaitDetails(HookContext):
    """``on_budget_wait``: a request waited ``wait_ms`` for budget tokens."""

    budget: str
    wait_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleChangeDetails(HookContext):
    """``on_schedule_change``: after every live cycle, with why the next wait was chosen."""

    interval_ms: int
    next_due_at: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletesHeldDetails(HookContext):
    """``on_deletes_held``: the mass-delete guard held a complete pass's deletes back.

    Attributes:
        count: Deletes held (identities the pass, and the ones before it, did not list).
        snapshot: Size of the snapshot they would be deleted from.
        passes: Complete passes in a row that wanted to delete them.
    """

    count: int
    snapshot: int
    passes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PollEndDetails(HookContext):
    """``on_poll_end``: a lane cycle ended, successfully or not."""

    summary: PollSummary


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
)


class HookBus:
    """Calls every registered hook of a name, in registration order, isolating failures.

    Args:
        hooks: Hook sets (objects with any of the ``on_*`` methods).
        logger: Where a failing hook is reported.
    """

    def __init__(
        self,
        hooks: Iterable[object],
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self._logger = logger
        self._table: dict[str, list[Any]] = {name: [] for name in HOOK_NAMES}
        for hook_set in hooks:
            for name in HOOK_NAMES:
                method = getattr(hook_set, name, None)
                if method is not None and callable(method):
                    self._table[name].append(method)

    def has(self, name: str) -> bool:
        """True when at least one hook set implements ``name``."""
        return bool(self._table[name])

    async def emit(self, name: str, details: HookContext) -> None:
        """Call every ``name`` hook with ``details``; errors are logged, never raised."""
        for method in self._table[name]:
            try:
                result = method(details)
                if inspect.isawaitable(result):
                    await result
            except Exception as error:  # a hook must never break the engine
                self._logger.warning(
                    "hook %s raised %s: %s",
                    name,
                    type(error).__name__,
                    error,
                    extra={"hook": name, "poller": details.poller, "partition": details.partition},
                )


def as_hook_list(hooks: object | Sequence[object] | None) -> list[object]:
    """Normalise the ``hooks`` engine option into a list of hook sets."""
    if hooks is None:
        return []
    if isinstance(hooks, list | tuple):
        return list(hooks)
    return [hooks]
