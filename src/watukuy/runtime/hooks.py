"""Lifecycle hooks: what happened, as frozen detail records.

A hook set is any object with some of the methods of :class:`Hooks` (sync or async); pass
one or a list to ``Engine(hooks=...)``. Every method receives one frozen record carrying
``poller``, ``partition``, ``lane`` and ``instance_id`` plus its own fields. A hook that
raises is logged at WARNING and never affects the engine. Subclass :class:`Hooks` to have a
type checker hold each method to its record.

Within one lane cycle hooks fire in this order::

    on_lease_acquired -> on_poll_start
      -> (on_fetch -> on_commit -> on_event* -> [on_late_arrivals] -> on_invalid*
          -> on_delivered*/on_filtered*/on_retry*/on_parked*)*
      -> [on_late_arrivals] -> on_schedule_change -> on_poll_end
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

from watukuy.model.errors import SerializedError, ValidationIssue
from watukuy.model.events import Event
from watukuy.model.records import dataclass, fast_init
from watukuy.model.rows import DEFAULT_CONSUMER, Lease, ParkedRow, PollSummary

from ._hook_names import HOOK_NAMES, HookContext

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
    "HookContext",
    "Hooks",
    "InvalidDetails",
    "LateArrivalsDetails",
    "LeaseAcquiredDetails",
    "LeaseLostDetails",
    "ParkedDetails",
    "PollEndDetails",
    "PollStartDetails",
    "RECORD_TYPES",
    "RetryDetails",
    "ScheduleChangeDetails",
]

ErrorPhase = Literal["fetch", "commit", "dispatch", "lease", "schedule"]
"""Where in the cycle an ``on_error`` happened."""


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
    consumer: str = DEFAULT_CONSUMER
    """The consumer the event was delivered to (``on(..., consumer=)``)."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class FilteredDetails(HookContext):
    """``on_filtered``: the consumer's ``when=`` filter turned the event down, and the
    event was acked without reaching it."""

    event: Event[Any]
    attempt: int
    consumer: str = DEFAULT_CONSUMER
    """The consumer whose filter turned the event down."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDetails(HookContext):
    """``on_retry``: the handler failed and will be retried after ``delay_ms``."""

    event: Event[Any]
    attempt: int
    error: SerializedError
    delay_ms: int
    consumer: str = DEFAULT_CONSUMER
    """The consumer whose handler failed."""


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
    """``on_deletes_held``: the mass-delete guard held a complete pass's deletes back, or
    deletes that no pass could prove were held for an operator (see ``HeldDeletes``).

    Attributes:
        count: Deletes held (identities the pass, and the ones before it, did not list).
        snapshot: Size of the snapshot they would be deleted from.
        passes: Complete passes in a row that wanted to delete them.
    """

    count: int
    snapshot: int
    passes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LateArrivalsDetails(HookContext):
    """``on_late_arrivals``: a re-read found versions the live lane should already have
    seen (after the commit that delivers them), or a complete live cycle settled reconcile
    findings it did not return (see
    https://watukuy.readthedocs.io/en/latest/cursors/#late-arrivals-how-late-and-what-to-do).

    Attributes:
        lateness_ms: How far behind the live watermark each late arrival was (its stamp
            to the watermark), in ms; empty for a report of misses alone.
        missed: Changes a reconcile found that the live lane's next complete cycle did
            not return.
        window_ms: The lookback window in force (``None``: the cursor cannot look back).
    """

    lateness_ms: tuple[int, ...]
    missed: int
    window_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PollEndDetails(HookContext):
    """``on_poll_end``: a lane cycle ended, successfully or not."""

    summary: PollSummary


RECORD_TYPES: Final[Mapping[str, type[HookContext]]] = {
    "on_lease_acquired": LeaseAcquiredDetails,
    "on_poll_start": PollStartDetails,
    "on_fetch": FetchDetails,
    "on_commit": CommitDetails,
    "on_event": EventDetails,
    "on_delivered": DeliveredDetails,
    "on_filtered": FilteredDetails,
    "on_retry": RetryDetails,
    "on_parked": ParkedDetails,
    "on_invalid": InvalidDetails,
    "on_error": ErrorDetails,
    "on_lease_lost": LeaseLostDetails,
    "on_circuit_open": CircuitOpenDetails,
    "on_circuit_close": CircuitCloseDetails,
    "on_budget_wait": BudgetWaitDetails,
    "on_schedule_change": ScheduleChangeDetails,
    "on_poll_end": PollEndDetails,
    "on_deletes_held": DeletesHeldDetails,
    "on_late_arrivals": LateArrivalsDetails,
}
"""The record each hook receives, by hook name (the keys are :data:`HOOK_NAMES`)."""


class Hooks:
    """Base class of a typed hook set: subclass it and define the hooks you want.

    A method may be sync or async. Its record is the one of the table below, and a type
    checker holds every method a subclass defines to it: a method given another record, or
    reading a field its record does not have, fails ``mypy --strict``::

        class Alerts(Hooks):
            async def on_parked(self, details: ParkedDetails) -> None:
                await pager.send(f"{details.poller}: parked {details.row.id}")

    The methods are declared for type checkers only: at run time the class is empty, so a
    subclass listens to the hooks it defines and no others (an engine builds no record for
    a hook nobody listens to).
    """

    __slots__ = ()

    if TYPE_CHECKING:

        def on_lease_acquired(self, details: LeaseAcquiredDetails) -> Awaitable[None] | None:
            """Once per key run, after the lease was taken."""

        def on_poll_start(self, details: PollStartDetails) -> Awaitable[None] | None:
            """A lane cycle begins."""

        def on_fetch(self, details: FetchDetails) -> Awaitable[None] | None:
            """After each fetched page."""

        def on_commit(self, details: CommitDetails) -> Awaitable[None] | None:
            """After each ``commit_poll``."""

        def on_event(self, details: EventDetails) -> Awaitable[None] | None:
            """Once per event committed to the outbox."""

        def on_delivered(self, details: DeliveredDetails) -> Awaitable[None] | None:
            """The handler succeeded and the event was acked."""

        def on_filtered(self, details: FilteredDetails) -> Awaitable[None] | None:
            """The consumer's ``when=`` filter turned the event down; it was acked unseen."""

        def on_retry(self, details: RetryDetails) -> Awaitable[None] | None:
            """The handler failed and will be retried."""

        def on_parked(self, details: ParkedDetails) -> Awaitable[None] | None:
            """A poison event was parked."""

        def on_invalid(self, details: InvalidDetails) -> Awaitable[None] | None:
            """An item failed the schema and was quarantined."""

        def on_error(self, details: ErrorDetails) -> Awaitable[None] | None:
            """A lane cycle failed."""

        def on_lease_lost(self, details: LeaseLostDetails) -> Awaitable[None] | None:
            """A write met a newer epoch, or a renewal failed."""

        def on_circuit_open(self, details: CircuitOpenDetails) -> Awaitable[None] | None:
            """Consecutive failures (or a poison halt) opened the circuit."""

        def on_circuit_close(self, details: CircuitCloseDetails) -> Awaitable[None] | None:
            """A successful cycle closed an open circuit."""

        def on_budget_wait(self, details: BudgetWaitDetails) -> Awaitable[None] | None:
            """A request waited for budget tokens."""

        def on_schedule_change(self, details: ScheduleChangeDetails) -> Awaitable[None] | None:
            """After every live cycle, with why the next wait was chosen."""

        def on_poll_end(self, details: PollEndDetails) -> Awaitable[None] | None:
            """A lane cycle ended, successfully or not."""

        def on_deletes_held(self, details: DeletesHeldDetails) -> Awaitable[None] | None:
            """The mass-delete guard held deletes back."""

        def on_late_arrivals(self, details: LateArrivalsDetails) -> Awaitable[None] | None:
            """A re-read found late arrivals, or a live cycle settled reconcile findings."""
