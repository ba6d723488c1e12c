"""OpenTelemetry spans and metrics built on the engine's hooks."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from watukuy._system import SystemClock
from watukuy.model.errors import ConfigError
from watukuy.model.ports import Clock
from watukuy.model.redact import redact_text
from watukuy.model.rows import DEFAULT_CONSUMER
from watukuy.runtime.hooks import (
    BudgetWaitDetails,
    CircuitCloseDetails,
    CircuitOpenDetails,
    CommitDetails,
    DeliveredDetails,
    ErrorDetails,
    EventDetails,
    FetchDetails,
    FilteredDetails,
    HookContext,
    Hooks,
    InvalidDetails,
    LateArrivalsDetails,
    LeaseLostDetails,
    ParkedDetails,
    PollEndDetails,
    PollStartDetails,
    RetryDetails,
    ScheduleChangeDetails,
)

from ._gauges import CIRCUIT_CLOSED, CIRCUIT_OPEN, KeyGauges
from ._instruments import create_instruments

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter
    from opentelemetry.trace import Span, Tracer
    from opentelemetry.util.types import AttributeValue

__all__ = ["SCOPE_NAME", "AttributeScalar", "OtelHooks"]

SCOPE_NAME: Final = "watukuy"
"""Instrumentation scope of the default tracer and meter."""

AttributeScalar = str | bool | int | float
"""A value allowed in ``OtelHooks(attributes=...)``."""

_INSTALL_HINT: Final = (
    "watukuy.otel needs the OpenTelemetry API: pip install 'watukuy[otel]' (and an SDK, such "
    "as opentelemetry-sdk, to export anything)"
)

_log = logging.getLogger("watukuy.otel")

D = TypeVar("D", bound=HookContext)
PollKey = tuple[str, str, str]


def _package_version() -> str:
    from watukuy._version import __version__

    return __version__


def _ns(ms: int) -> int:
    return ms * 1_000_000


def _check_attributes(
    attributes: Mapping[str, AttributeScalar] | None,
) -> dict[str, AttributeValue]:
    if attributes is None:
        return {}
    if not isinstance(attributes, Mapping):
        raise ConfigError(f"expected a mapping, got {attributes!r}", field="attributes")
    checked: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"keys must be non-empty strings, got {key!r}", field="attributes")
        if not isinstance(value, str | bool | int | float):
            raise ConfigError(
                f"values must be str, bool, int or float, got {value!r}",
                field=f"attributes.{key}",
            )
        checked[key] = value
    return checked


def _guarded(method: Callable[[OtelHooks, D], None]) -> Callable[[OtelHooks, D], None]:
    """Observability must never disturb the engine: swallow and report SDK failures."""

    @functools.wraps(method)
    def wrapper(self: OtelHooks, details: D) -> None:
        try:
            method(self, details)
        except Exception as error:
            self._report_failure(method.__name__, error)

    return wrapper


@dataclass(slots=True)
class _OpenPoll:
    span: Span
    error: str | None = None


class OtelHooks(Hooks):
    """A hook set that turns the engine's lifecycle into OpenTelemetry spans and metrics.

    Pass it to the engine like any hook set::

        engine = wk.Engine(store=..., pollers=[orders],
                           hooks=OtelHooks(attributes={"service.name": "erp-sync"}))

    With no OpenTelemetry SDK configured the API hands out no-op tracers and meters, so the
    hooks cost a few dictionary operations per event and can stay on everywhere.

    **Spans** (each with ``watukuy.poller``, ``watukuy.partition``, ``watukuy.lane``,
    ``watukuy.instance_id`` and ``attributes``):

    - ``watukuy.poll``: one per lane cycle, with ``watukuy.pages``, ``watukuy.items``,
      ``watukuy.events.created`` / ``.updated`` / ``.deleted``, ``watukuy.not_modified``
      and ``watukuy.truncated``. Its status is ``ERROR`` (with an ``exception`` event per
      error) when ``on_error`` fired for a phase other than ``dispatch``; a handler failure
      belongs to the delivery, not to the poll. A cycle cut short by a lost lease, or left
      open when the same lane starts again, is ended with ``ERROR``. It joins the caller's
      current span, if any (``tick()`` called from a traced request handler).
    - ``watukuy.fetch`` (per page: ``watukuy.page``, ``watukuy.items``,
      ``watukuy.not_modified``) and ``watukuy.commit`` (per commit: ``watukuy.events``,
      ``watukuy.upserts``, ``watukuy.deletes``), children of the poll span.
    - ``watukuy.deliver``: per successful delivery, with ``watukuy.event.type``,
      ``watukuy.attempt`` and, when ``record_event_ids`` is set, ``watukuy.event.id``.
      A child of the poll span when delivered during a cycle; events left in the outbox by
      an earlier run are delivered before the cycle starts and get a root span.

    **Metrics** (each with ``watukuy.poller``, ``watukuy.partition``, ``watukuy.lane`` and
    ``attributes``; the instance id is left out to keep cardinality low): histograms in
    milliseconds ``watukuy.poll.duration`` (``watukuy.outcome`` = ``ok`` | ``error``),
    ``watukuy.deliver.duration`` and ``watukuy.budget.wait`` (``watukuy.budget``), all with
    bucket boundaries from 5 ms to 60 s; counters ``watukuy.items.fetched``,
    ``watukuy.events.emitted`` (``watukuy.event.type``), ``watukuy.events.delivered``,
    ``watukuy.events.filtered`` (``watukuy.event.type``), ``watukuy.events.retried``, ``watukuy.events.parked`` (``watukuy.kind`` = ``poison`` |
    ``invalid``), ``watukuy.items.invalid``, ``watukuy.errors`` (``watukuy.phase``),
    ``watukuy.lease.lost``, ``watukuy.circuit.opened``, ``watukuy.budget.waits``
    (``watukuy.budget``); and observable gauges per (poller, partition), without a lane:
    ``watukuy.circuit.state`` (0 closed, 1 half-open, 2 open) and
    ``watukuy.schedule.interval`` (ms). A key appears in the gauges after its first live
    cycle in this process. Late commits: ``watukuy.late.arrivals`` (versions a re-read found
    behind the live watermark), ``watukuy.late.lateness`` (a histogram of how far behind,
    ms, 250 ms to 10 minutes) and ``watukuy.late.missed`` (changes a reconcile found that
    the live lane missed); the lane is the one whose re-read found them.

    **Time.** Every duration comes from the engine's clock, as measured in the hook records.
    The poll span starts at the cycle's ``started_at`` and ends ``duration_ms`` later; the
    other spans end at ``clock.now()`` and start their ``duration_ms`` before it. With the
    default system clock that is wall-clock time, as exporters expect; an engine on another
    clock (a ``VirtualClock`` in tests) should be given the same clock here, so that child
    spans fall inside their poll span.

    Args:
        tracer: Where spans go (default: the global tracer named ``watukuy``, versioned
            with the package).
        meter: Where metrics go (default: the global meter named ``watukuy``).
        attributes: Added to every span and metric, e.g. ``{"service.name": "erp-sync"}``.
        record_event_ids: Put ``watukuy.event.id`` on deliver spans (off by default: one
            value per event).
        clock: Time for span timestamps (default: the system clock).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (``pip install 'watukuy[otel]'``).
        ConfigError: ``attributes`` or ``record_event_ids`` is not valid.
    """

    def __init__(
        self,
        tracer: Tracer | None = None,
        meter: Meter | None = None,
        attributes: Mapping[str, AttributeScalar] | None = None,
        record_event_ids: bool = False,
        *,
        clock: Clock | None = None,
    ) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError as error:
            raise ImportError(_INSTALL_HINT) from error
        if not isinstance(record_event_ids, bool):
            raise ConfigError(
                f"expected a bool, got {record_event_ids!r}", field="record_event_ids"
            )
        self._extra = _check_attributes(attributes)
        self._record_event_ids = record_event_ids
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._in_context = trace.set_span_in_context
        self._status = trace.Status
        self._error_code = trace.StatusCode.ERROR
        version = _package_version()
        self._tracer: Tracer = (
            tracer if tracer is not None else trace.get_tracer(SCOPE_NAME, version)
        )
        self._polls: dict[PollKey, _OpenPoll] = {}
        self._gauges = KeyGauges(metrics.Observation)
        self._failed_hooks: set[str] = set()
        self._instruments = create_instruments(
            meter if meter is not None else metrics.get_meter(SCOPE_NAME, version),
            circuit_state=self._gauges.observe_circuit,
            schedule_interval=self._gauges.observe_interval,
        )

    def __repr__(self) -> str:
        return (
            f"OtelHooks(open_polls={len(self._polls)}, record_event_ids={self._record_event_ids})"
        )

    # --- attribute sets -------------------------------------------------------------------

    def _span_attributes(self, details: HookContext) -> dict[str, AttributeValue]:
        return {
            **self._extra,
            "watukuy.poller": details.poller,
            "watukuy.partition": details.partition,
            "watukuy.lane": details.lane,
            "watukuy.instance_id": details.instance_id,
        }

    def _metric_attributes(
        self, details: HookContext, **extra: AttributeValue
    ) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            **self._extra,
            "watukuy.poller": details.poller,
            "watukuy.partition": details.partition,
            "watukuy.lane": details.lane,
        }
        for name, value in extra.items():
            attributes[f"watukuy.{name.replace('_', '.')}"] = value
        return attributes

    def _key_attributes(self, details: HookContext) -> dict[str, AttributeValue]:
        return {
            **self._extra,
            "watukuy.poller": details.poller,
            "watukuy.partition": details.partition,
        }

    # --- spans ----------------------------------------------------------------------------

    def _end_poll(self, poll: _OpenPoll, at_ms: int, message: str | None = None) -> None:
        if message is not None:
            poll.span.set_status(self._status(self._error_code, message))
        elif poll.error is not None:
            poll.span.set_status(self._status(self._error_code, poll.error))
        poll.span.end(end_time=_ns(at_ms))

    def _error_span(self, details: ErrorDetails, message: str) -> None:
        now = _ns(self._clock.now())
        error = details.error
        span = self._tracer.start_span(
            "watukuy.run",
            start_time=now,
            attributes={**self._span_attributes(details), "watukuy.phase": details.phase},
        )
        event: dict[str, AttributeValue] = {
            "exception.type": error.get("name", "Error"),
            "exception.message": message,
            "watukuy.phase": details.phase,
        }
        if "code" in error:
            event["watukuy.error.code"] = error["code"]
        span.add_event("exception", event, timestamp=now)
        span.set_status(self._status(self._error_code, message or error.get("name", "error")))
        span.end(end_time=now)

    def _finished_span(
        self, name: str, details: HookContext, duration_ms: int, attributes: dict[str, Any]
    ) -> None:
        end = self._clock.now()
        parent = self._polls.get((details.poller, details.partition, details.lane))
        context = self._in_context(parent.span) if parent is not None else None
        span = self._tracer.start_span(
            name,
            context=context,
            start_time=_ns(end - max(0, duration_ms)),
            attributes={**self._span_attributes(details), **attributes},
        )
        span.end(end_time=_ns(end))

    @_guarded
    def on_poll_start(self, details: PollStartDetails) -> None:
        """Open the ``watukuy.poll`` span of a lane cycle."""
        key = (details.poller, details.partition, details.lane)
        stale = self._polls.pop(key, None)
        if stale is not None:
            self._end_poll(stale, details.started_at, "superseded by a new cycle")
        span = self._tracer.start_span(
            "watukuy.poll",
            start_time=_ns(details.started_at),
            attributes=self._span_attributes(details),
        )
        self._polls[key] = _OpenPoll(span)
        if details.lane == "live":
            self._gauges.probe_started((details.poller, details.partition))

    @_guarded
    def on_poll_end(self, details: PollEndDetails) -> None:
        """Close the poll span with the cycle's summary and record its duration."""
        poll = self._polls.pop((details.poller, details.partition, details.lane), None)
        summary = details.summary
        outcome = "error" if poll is not None and poll.error is not None else "ok"
        self._instruments.poll_duration.record(
            summary.duration_ms, self._metric_attributes(details, outcome=outcome)
        )
        if poll is None:
            return
        poll.span.set_attributes(
            {
                "watukuy.pages": summary.pages,
                "watukuy.items": summary.items,
                "watukuy.events.created": summary.events.created,
                "watukuy.events.updated": summary.events.updated,
                "watukuy.events.deleted": summary.events.deleted,
                "watukuy.not_modified": summary.not_modified,
                "watukuy.truncated": summary.truncated,
            }
        )
        self._end_poll(poll, summary.started_at + summary.duration_ms)

    @_guarded
    def on_fetch(self, details: FetchDetails) -> None:
        """A ``watukuy.fetch`` span per page, and the items it returned."""
        # Metrics first: a failing tracer must not cost the counts.
        self._instruments.items_fetched.add(details.items, self._metric_attributes(details))
        self._finished_span(
            "watukuy.fetch",
            details,
            details.duration_ms,
            {
                "watukuy.page": details.page,
                "watukuy.items": details.items,
                "watukuy.not_modified": details.not_modified,
            },
        )

    @_guarded
    def on_commit(self, details: CommitDetails) -> None:
        """A ``watukuy.commit`` span per page commit."""
        self._finished_span(
            "watukuy.commit",
            details,
            details.duration_ms,
            {
                "watukuy.events": details.events,
                "watukuy.upserts": details.upserts,
                "watukuy.deletes": details.deletes,
            },
        )

    @_guarded
    def on_event(self, details: EventDetails) -> None:
        """Count a committed event by type."""
        self._instruments.events_emitted.add(
            1, self._metric_attributes(details, event_type=details.event.type)
        )

    @_guarded
    def on_delivered(self, details: DeliveredDetails) -> None:
        """A ``watukuy.deliver`` span, the delivered count and the handler's duration."""
        metric_attributes = self._metric_attributes(details, **_named(details.consumer))
        self._instruments.events_delivered.add(1, metric_attributes)
        self._instruments.deliver_duration.record(details.duration_ms, metric_attributes)
        attributes: dict[str, Any] = {
            "watukuy.event.type": details.event.type,
            "watukuy.attempt": details.attempt,
        }
        if details.consumer != DEFAULT_CONSUMER:
            attributes["watukuy.consumer"] = details.consumer
        if self._record_event_ids:
            attributes["watukuy.event.id"] = details.event.id
        self._finished_span("watukuy.deliver", details, details.duration_ms, attributes)

    @_guarded
    def on_filtered(self, details: FilteredDetails) -> None:
        """Count an event the consumer's filter turned down, by type."""
        self._instruments.events_filtered.add(
            1,
            self._metric_attributes(
                details, event_type=details.event.type, **_named(details.consumer)
            ),
        )

    @_guarded
    def on_retry(self, details: RetryDetails) -> None:
        """Count a handler failure that will be retried."""
        self._instruments.events_retried.add(
            1, self._metric_attributes(details, **_named(details.consumer))
        )

    @_guarded
    def on_parked(self, details: ParkedDetails) -> None:
        """Count a parked poison event."""
        # Quarantined items are counted by on_invalid, which fires once for each of them.
        if details.row.kind == "invalid":
            return
        self._instruments.events_parked.add(
            1, self._metric_attributes(details, kind=details.row.kind)
        )

    @_guarded
    def on_invalid(self, details: InvalidDetails) -> None:
        """Count an item that failed the schema and was quarantined."""
        attributes = self._metric_attributes(details)
        self._instruments.items_invalid.add(1, attributes)
        self._instruments.events_parked.add(1, {**attributes, "watukuy.kind": "invalid"})

    @_guarded
    def on_error(self, details: ErrorDetails) -> None:
        """Count the failure and, outside ``dispatch``, mark the poll span as failed."""
        self._instruments.errors.add(1, self._metric_attributes(details, phase=details.phase))
        if details.phase == "dispatch":
            return
        poll = self._polls.get((details.poller, details.partition, details.lane))
        error = details.error
        message = error.get("message", "")
        if poll is None:
            # A failure outside any cycle (the store failed before one could start): a
            # span of its own, so a store outage shows in traces and not only in counts.
            self._error_span(details, message)
            return
        if poll.error is None:
            poll.error = message or error.get("name", "error")
        event: dict[str, AttributeValue] = {
            "exception.type": error.get("name", "Error"),
            "exception.message": message,
            "watukuy.phase": details.phase,
        }
        if "stack" in error:
            event["exception.stacktrace"] = error["stack"]
        if "code" in error:
            event["watukuy.error.code"] = error["code"]
        poll.span.add_event("exception", event, timestamp=_ns(self._clock.now()))

    @_guarded
    def on_lease_lost(self, details: LeaseLostDetails) -> None:
        """Count the loss and end every open poll span of the key with ``ERROR``."""
        self._instruments.lease_lost.add(1, self._metric_attributes(details))
        now = self._clock.now()
        for key in [k for k in self._polls if k[:2] == (details.poller, details.partition)]:
            self._end_poll(self._polls.pop(key), now, "lease lost")

    @_guarded
    def on_circuit_open(self, details: CircuitOpenDetails) -> None:
        """Count the opening and report the key's circuit as open."""
        self._instruments.circuit_opened.add(1, self._metric_attributes(details))
        self._gauges.set_circuit(
            (details.poller, details.partition), CIRCUIT_OPEN, self._key_attributes(details)
        )

    @_guarded
    def on_circuit_close(self, details: CircuitCloseDetails) -> None:
        """Report the key's circuit as closed."""
        self._gauges.set_circuit(
            (details.poller, details.partition), CIRCUIT_CLOSED, self._key_attributes(details)
        )

    @_guarded
    def on_budget_wait(self, details: BudgetWaitDetails) -> None:
        """Count the wait for budget tokens and record how long it took."""
        attributes = self._metric_attributes(details, budget=details.budget)
        self._instruments.budget_waits.add(1, attributes)
        self._instruments.budget_wait.record(details.wait_ms, attributes)

    @_guarded
    def on_schedule_change(self, details: ScheduleChangeDetails) -> None:
        """Remember the key's interval, and the circuit state its reason implies."""
        self._gauges.schedule_changed(
            (details.poller, details.partition),
            details.interval_ms,
            details.reason,
            self._key_attributes(details),
        )

    @_guarded
    def on_late_arrivals(self, details: LateArrivalsDetails) -> None:
        """Count late arrivals (and record how late each was) and live-lane misses."""
        attributes = self._metric_attributes(details)
        if details.lateness_ms:
            self._instruments.late_arrivals.add(len(details.lateness_ms), attributes)
            for lateness in details.lateness_ms:
                self._instruments.lateness.record(lateness, attributes)
        if details.missed:
            self._instruments.late_missed.add(details.missed, attributes)

    # --- failures -----------------------------------------------------------------------------

    def _report_failure(self, hook: str, error: Exception) -> None:
        # Once per hook at WARNING; a broken exporter would otherwise flood the log.
        level = logging.DEBUG if hook in self._failed_hooks else logging.WARNING
        self._failed_hooks.add(hook)
        message = redact_text(str(error))  # an exporter's error may quote its endpoint URL
        _log.log(level, "OtelHooks.%s failed: %s: %s", hook, type(error).__name__, message)


def _named(consumer: str) -> dict[str, AttributeValue]:
    """``watukuy.consumer`` for a consumer with a name of its own; nothing for the
    ``"default"`` one, so a poller with one consumer keeps its attribute sets."""
    return {} if consumer == DEFAULT_CONSUMER else {"consumer": consumer}
