"""The engine's side of the hooks: who listens to what, and the calls.

The detail records live in :mod:`watukuy.runtime.hooks`; that module is imported the first
time a hook that someone listens to fires, so an engine without hooks never builds the
record classes, nor a record per event.

The engine fires hooks through a :class:`HookEmitter`, one per key and lane, which holds the
:class:`HookContext` every record of that key and lane carries and has one method per hook,
taking that hook's own fields: the type checker holds every call to the record's fields,
and a record is built only when a hook set listens.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from watukuy.model.errors import ConfigError
from watukuy.model.rows import DEFAULT_CONSUMER, Lane, PKey

from ._hook_names import HOOK_NAMES, HookContext

if TYPE_CHECKING:
    from watukuy.model.errors import SerializedError, ValidationIssue
    from watukuy.model.events import Event
    from watukuy.model.rows import Lease, ParkedRow, PollSummary

    from .hooks import ErrorPhase

__all__ = ["HookBus", "HookContext", "HookEmitter", "as_hook_list"]


class _ContextFields(TypedDict):
    """A :class:`HookContext` as keyword arguments of a record's constructor."""

    poller: str
    partition: str
    lane: Lane
    instance_id: str


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

    def add(self, hook_set: object) -> Callable[[], None]:
        """Listen with ``hook_set`` as well, from the next hook that fires.

        Each name's list is replaced, not appended to: a :meth:`fire` in progress goes on
        with the listeners it started with.

        Args:
            hook_set: An object with some of the ``on_*`` methods.

        Returns:
            A function that removes ``hook_set`` again; calling it twice does nothing.

        Raises:
            ConfigError: ``hooks``: the object has none of the hook methods.
        """
        methods: dict[str, Any] = {}
        for name in HOOK_NAMES:
            method = getattr(hook_set, name, None)
            if method is not None and callable(method):
                methods[name] = method
        if not methods:
            raise ConfigError(
                "expected a hook set (an object with hook methods such as on_fetch or "
                f"on_poll_end), got {hook_set!r}",
                field="hooks",
            )
        for name, method in methods.items():
            self._table[name] = [*self._table[name], method]

        def remove() -> None:
            for name, method in methods.items():
                self._table[name] = [m for m in self._table[name] if m is not method]

        return remove

    def has(self, name: str) -> bool:
        """True when at least one hook set implements ``name``."""
        return bool(self._table[name])

    def emitter(self, context: HookContext) -> HookEmitter:
        """The typed way to fire the hooks of one key and lane (see :class:`HookEmitter`)."""
        return HookEmitter(self, context)

    async def fire(self, name: str, details: HookContext) -> None:
        """Call every ``name`` hook with ``details``, in registration order; errors of the
        hooks are logged, never raised."""
        for method in self._table[name]:
            try:
                result = method(details)
                if inspect.isawaitable(result):
                    await result
            except Exception as error:  # a hook must never break the engine
                self._failed(name, details, error)

    def _failed(self, name: str, details: HookContext, error: Exception) -> None:
        # Named like every other line about a key: "[orders/acme] hook on_fetch raised ...".
        self._logger.warning(
            "[%s] hook %s raised %s: %s",
            PKey(details.poller, details.partition),
            name,
            type(error).__name__,
            error,
            extra={"hook": name, "poller": details.poller, "partition": details.partition},
        )


class HookEmitter:
    """Fires the hooks of one key and lane: one method per hook, named after it.

    Each method takes the own fields of its hook's record (``on_fetch``: those of
    :class:`~watukuy.runtime.hooks.FetchDetails` besides the context) and, when a hook set
    listens, builds the record from them and :attr:`context`, then calls every listener as
    :meth:`HookBus.fire` does. With no listener a call builds nothing and imports nothing.
    Build one per key and lane (:meth:`HookBus.emitter`) and keep it.

    Args:
        bus: The engine's hook bus.
        context: The poller, partition, lane and instance every record carries.
    """

    __slots__ = ("_bus", "_fields", "context")

    def __init__(self, bus: HookBus, context: HookContext) -> None:
        self._bus = bus
        self.context = context
        self._fields: _ContextFields = {
            "poller": context.poller,
            "partition": context.partition,
            "lane": context.lane,
            "instance_id": context.instance_id,
        }

    def has(self, name: str) -> bool:
        """True when at least one hook set implements ``name``."""
        return self._bus.has(name)

    async def on_lease_acquired(self, *, lease: Lease) -> None:
        """Fire ``on_lease_acquired``."""
        if self._bus.has("on_lease_acquired"):
            from .hooks import LeaseAcquiredDetails

            details = LeaseAcquiredDetails(**self._fields, lease=lease)
            await self._bus.fire("on_lease_acquired", details)

    async def on_poll_start(self, *, started_at: int) -> None:
        """Fire ``on_poll_start``."""
        if self._bus.has("on_poll_start"):
            from .hooks import PollStartDetails

            details = PollStartDetails(**self._fields, started_at=started_at)
            await self._bus.fire("on_poll_start", details)

    async def on_fetch(
        self, *, page: int, duration_ms: int, items: int, not_modified: bool
    ) -> None:
        """Fire ``on_fetch``."""
        if self._bus.has("on_fetch"):
            from .hooks import FetchDetails

            details = FetchDetails(
                **self._fields,
                page=page,
                duration_ms=duration_ms,
                items=items,
                not_modified=not_modified,
            )
            await self._bus.fire("on_fetch", details)

    async def on_commit(self, *, events: int, upserts: int, deletes: int, duration_ms: int) -> None:
        """Fire ``on_commit``."""
        if self._bus.has("on_commit"):
            from .hooks import CommitDetails

            details = CommitDetails(
                **self._fields,
                events=events,
                upserts=upserts,
                deletes=deletes,
                duration_ms=duration_ms,
            )
            await self._bus.fire("on_commit", details)

    async def on_event(self, *, event: Event[Any]) -> None:
        """Fire ``on_event`` (once per event: callers skip the loop when :meth:`has` is
        false)."""
        if self._bus.has("on_event"):
            from .hooks import EventDetails

            await self._bus.fire("on_event", EventDetails(**self._fields, event=event))

    async def on_delivered(
        self,
        *,
        event: Event[Any],
        attempt: int,
        duration_ms: int,
        consumer: str = DEFAULT_CONSUMER,
    ) -> None:
        """Fire ``on_delivered``."""
        if self._bus.has("on_delivered"):
            from .hooks import DeliveredDetails

            details = DeliveredDetails(
                **self._fields,
                event=event,
                attempt=attempt,
                duration_ms=duration_ms,
                consumer=consumer,
            )
            await self._bus.fire("on_delivered", details)

    async def on_filtered(
        self, *, event: Event[Any], attempt: int, consumer: str = DEFAULT_CONSUMER
    ) -> None:
        """Fire ``on_filtered``."""
        if self._bus.has("on_filtered"):
            from .hooks import FilteredDetails

            details = FilteredDetails(
                **self._fields, event=event, attempt=attempt, consumer=consumer
            )
            await self._bus.fire("on_filtered", details)

    async def on_retry(
        self,
        *,
        event: Event[Any],
        attempt: int,
        error: SerializedError,
        delay_ms: int,
        consumer: str = DEFAULT_CONSUMER,
    ) -> None:
        """Fire ``on_retry``."""
        if self._bus.has("on_retry"):
            from .hooks import RetryDetails

            details = RetryDetails(
                **self._fields,
                event=event,
                attempt=attempt,
                error=error,
                delay_ms=delay_ms,
                consumer=consumer,
            )
            await self._bus.fire("on_retry", details)

    async def on_parked(self, *, row: ParkedRow) -> None:
        """Fire ``on_parked``."""
        if self._bus.has("on_parked"):
            from .hooks import ParkedDetails

            await self._bus.fire("on_parked", ParkedDetails(**self._fields, row=row))

    async def on_invalid(self, *, item: Any, issues: list[ValidationIssue]) -> None:
        """Fire ``on_invalid``."""
        if self._bus.has("on_invalid"):
            from .hooks import InvalidDetails

            details = InvalidDetails(**self._fields, item=item, issues=issues)
            await self._bus.fire("on_invalid", details)

    async def on_error(self, *, error: SerializedError, phase: ErrorPhase) -> None:
        """Fire ``on_error``."""
        if self._bus.has("on_error"):
            from .hooks import ErrorDetails

            details = ErrorDetails(**self._fields, error=error, phase=phase)
            await self._bus.fire("on_error", details)

    async def on_lease_lost(self, *, epoch: int) -> None:
        """Fire ``on_lease_lost``."""
        if self._bus.has("on_lease_lost"):
            from .hooks import LeaseLostDetails

            await self._bus.fire("on_lease_lost", LeaseLostDetails(**self._fields, epoch=epoch))

    async def on_circuit_open(self, *, failures: int, probe_at: int) -> None:
        """Fire ``on_circuit_open``."""
        if self._bus.has("on_circuit_open"):
            from .hooks import CircuitOpenDetails

            details = CircuitOpenDetails(**self._fields, failures=failures, probe_at=probe_at)
            await self._bus.fire("on_circuit_open", details)

    async def on_circuit_close(self) -> None:
        """Fire ``on_circuit_close``."""
        if self._bus.has("on_circuit_close"):
            from .hooks import CircuitCloseDetails

            await self._bus.fire("on_circuit_close", CircuitCloseDetails(**self._fields))

    async def on_budget_wait(self, *, budget: str, wait_ms: int) -> None:
        """Fire ``on_budget_wait``."""
        if self._bus.has("on_budget_wait"):
            from .hooks import BudgetWaitDetails

            details = BudgetWaitDetails(**self._fields, budget=budget, wait_ms=wait_ms)
            await self._bus.fire("on_budget_wait", details)

    async def on_schedule_change(self, *, interval_ms: int, next_due_at: int, reason: str) -> None:
        """Fire ``on_schedule_change``."""
        if self._bus.has("on_schedule_change"):
            from .hooks import ScheduleChangeDetails

            details = ScheduleChangeDetails(
                **self._fields, interval_ms=interval_ms, next_due_at=next_due_at, reason=reason
            )
            await self._bus.fire("on_schedule_change", details)

    async def on_poll_end(self, *, summary: PollSummary) -> None:
        """Fire ``on_poll_end``."""
        if self._bus.has("on_poll_end"):
            from .hooks import PollEndDetails

            await self._bus.fire("on_poll_end", PollEndDetails(**self._fields, summary=summary))

    async def on_deletes_held(self, *, count: int, snapshot: int, passes: int) -> None:
        """Fire ``on_deletes_held``."""
        if self._bus.has("on_deletes_held"):
            from .hooks import DeletesHeldDetails

            details = DeletesHeldDetails(
                **self._fields, count=count, snapshot=snapshot, passes=passes
            )
            await self._bus.fire("on_deletes_held", details)

    async def on_late_arrivals(
        self, *, lateness_ms: tuple[int, ...], missed: int, window_ms: int | None
    ) -> None:
        """Fire ``on_late_arrivals``."""
        if self._bus.has("on_late_arrivals"):
            from .hooks import LateArrivalsDetails

            details = LateArrivalsDetails(
                **self._fields, lateness_ms=lateness_ms, missed=missed, window_ms=window_ms
            )
            await self._bus.fire("on_late_arrivals", details)


def as_hook_list(hooks: object | Sequence[object] | None) -> list[object]:
    """Normalise the ``hooks`` engine option into a list of hook sets."""
    if hooks is None:
        return []
    if isinstance(hooks, list | tuple):
        return list(hooks)
    return [hooks]
