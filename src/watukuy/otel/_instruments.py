"""The metric instruments :class:`~watukuy.otel.OtelHooks` records into.

Names, units and descriptions live here so that the hook logic reads as "what happened",
and so that dashboards have one place to look the instrument set up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from watukuy.model.late import LATENESS_BOUNDS_MS

if TYPE_CHECKING:
    from opentelemetry.metrics import (
        CallbackOptions,
        Counter,
        Histogram,
        Meter,
        ObservableGauge,
        Observation,
    )

__all__ = [
    "DURATION_BUCKETS_MS",
    "INSTRUMENT_NAMES",
    "LATENESS_BUCKETS_MS",
    "Instruments",
    "create_instruments",
]

DURATION_BUCKETS_MS: Final[tuple[float, ...]] = (
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
)
"""Bucket boundaries (milliseconds) advised for every duration histogram: 5 ms to 60 s."""

LATENESS_BUCKETS_MS: Final[tuple[float, ...]] = tuple(float(b) for b in LATENESS_BOUNDS_MS)
"""Bucket boundaries (milliseconds) of ``watukuy.late.lateness``: those of the histogram
each key keeps in its state, 250 ms to 10 minutes."""

INSTRUMENT_NAMES: Final = (
    "watukuy.poll.duration",
    "watukuy.items.fetched",
    "watukuy.events.emitted",
    "watukuy.events.delivered",
    "watukuy.events.filtered",
    "watukuy.events.retried",
    "watukuy.events.parked",
    "watukuy.items.invalid",
    "watukuy.errors",
    "watukuy.lease.lost",
    "watukuy.circuit.opened",
    "watukuy.budget.waits",
    "watukuy.budget.wait",
    "watukuy.deliver.duration",
    "watukuy.circuit.state",
    "watukuy.schedule.interval",
    "watukuy.late.arrivals",
    "watukuy.late.lateness",
    "watukuy.late.missed",
)
"""Every instrument the hooks create, in the order they are created."""

GaugeCallback = Callable[["CallbackOptions"], Iterable["Observation"]]


@dataclass(frozen=True, slots=True)
class Instruments:
    """The synchronous instruments (the two gauges report through their callbacks)."""

    poll_duration: Histogram
    items_fetched: Counter
    events_emitted: Counter
    events_delivered: Counter
    events_filtered: Counter
    events_retried: Counter
    events_parked: Counter
    items_invalid: Counter
    errors: Counter
    lease_lost: Counter
    circuit_opened: Counter
    budget_waits: Counter
    budget_wait: Histogram
    deliver_duration: Histogram
    circuit_state: ObservableGauge
    schedule_interval: ObservableGauge
    late_arrivals: Counter
    lateness: Histogram
    late_missed: Counter


def create_instruments(
    meter: Meter, *, circuit_state: GaugeCallback, schedule_interval: GaugeCallback
) -> Instruments:
    """Create every instrument on ``meter``.

    Args:
        meter: Where the instruments live.
        circuit_state: Reports ``watukuy.circuit.state`` per (poller, partition).
        schedule_interval: Reports ``watukuy.schedule.interval`` per (poller, partition).

    Returns:
        The instruments, ready to record.
    """

    def histogram(name: str, description: str) -> Histogram:
        return meter.create_histogram(
            name,
            unit="ms",
            description=description,
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS_MS),
        )

    return Instruments(
        poll_duration=histogram("watukuy.poll.duration", "Duration of one lane cycle."),
        items_fetched=meter.create_counter(
            "watukuy.items.fetched", unit="{item}", description="Items returned by fetch."
        ),
        events_emitted=meter.create_counter(
            "watukuy.events.emitted",
            unit="{event}",
            description="Events committed to the outbox, by type.",
        ),
        events_delivered=meter.create_counter(
            "watukuy.events.delivered",
            unit="{event}",
            description="Events a handler processed and the outbox acknowledged.",
        ),
        events_filtered=meter.create_counter(
            "watukuy.events.filtered",
            unit="{event}",
            description="Events a consumer's when= filter turned down, acknowledged unseen.",
        ),
        events_retried=meter.create_counter(
            "watukuy.events.retried",
            unit="{event}",
            description="Handler failures that scheduled another attempt.",
        ),
        events_parked=meter.create_counter(
            "watukuy.events.parked",
            unit="{event}",
            description="Poison events and quarantined items moved to the parked table, by kind.",
        ),
        items_invalid=meter.create_counter(
            "watukuy.items.invalid", unit="{item}", description="Items that failed the schema."
        ),
        errors=meter.create_counter(
            "watukuy.errors", unit="{error}", description="Failed lane cycles, by phase."
        ),
        lease_lost=meter.create_counter(
            "watukuy.lease.lost",
            unit="{lease}",
            description="Leases this instance lost while working on a key.",
        ),
        circuit_opened=meter.create_counter(
            "watukuy.circuit.opened",
            unit="{transition}",
            description="Times a circuit breaker opened.",
        ),
        budget_waits=meter.create_counter(
            "watukuy.budget.waits",
            unit="{wait}",
            description="Requests that waited for rate-budget tokens.",
        ),
        budget_wait=histogram("watukuy.budget.wait", "Time spent waiting for rate-budget tokens."),
        deliver_duration=histogram(
            "watukuy.deliver.duration", "Handler time of one successful delivery."
        ),
        circuit_state=meter.create_observable_gauge(
            "watukuy.circuit.state",
            callbacks=[circuit_state],
            unit="1",
            description="Circuit breaker per key: 0 closed, 1 half-open, 2 open.",
        ),
        schedule_interval=meter.create_observable_gauge(
            "watukuy.schedule.interval",
            callbacks=[schedule_interval],
            unit="ms",
            description="Current adaptive polling interval per key.",
        ),
        late_arrivals=meter.create_counter(
            "watukuy.late.arrivals",
            unit="{item}",
            description="Versions a re-read found behind the live watermark (late commits).",
        ),
        lateness=meter.create_histogram(
            "watukuy.late.lateness",
            unit="ms",
            description="How far behind the live watermark each late arrival was.",
            explicit_bucket_boundaries_advisory=list(LATENESS_BUCKETS_MS),
        ),
        late_missed=meter.create_counter(
            "watukuy.late.missed",
            unit="{change}",
            description="Changes a reconcile found that the live lane's next cycle missed.",
        ),
    )
