"""Plain result records returned by engine operations."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import field
from enum import StrEnum
from typing import Any

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, SerializedError
from watukuy.model.records import dataclass
from watukuy.model.rows import Lane, PKey

__all__ = ["EngineStatus", "LeaseOptions", "ReplayResult", "TickPollResult", "TickResult"]


class EngineStatus(StrEnum):
    """Lifecycle of an engine: idle -> running -> stopping -> stopped."""

    IDLE = "idle"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class TickPollResult:
    """What one lane of one key did during a tick: the totals of its cycles.

    A tick runs a key again while its cycles are cut short with more to fetch (see
    :meth:`EngineCore.tick`), so one lane may run several cycles in one tick; they are
    reported together, in one entry per (poller, partition, lane).

    Attributes:
        poller: Poller name.
        partition: Partition key.
        lane: Which lane ran.
        items: Items fetched (after the lag filter), over the lane's cycles.
        events: Events committed, over the lane's cycles.
        delivered: Events delivered while the key ran: those of its cycles, and those the
            outbox held before them (a retried parked event, say). A run that only
            delivered is reported on the ``live`` lane with ``cycles=0``.
        duration_ms: Wall time of the lane's cycles, together.
        error: The failure of the lane's last cycle, serialised; ``None`` on success.
            Failures are reported here, never raised.
        throttled: The last cycle was throttled (``429``, ``503`` with ``Retry-After``, an
            exhausted budget): ``error`` says why, but the cycle did not fail; the key waits
            without counting a failure.
        cycles: How many cycles of the lane ran in the tick.
        pending: The lane's last cycle stopped with more to fetch (the page cap or the
            tick's deadline cut it): the key is not caught up, and another ``tick()`` (or a
            longer ``max_duration``) picks up where it stopped.
    """

    poller: str
    partition: str
    lane: Lane
    items: int
    events: int
    delivered: int
    duration_ms: int
    error: SerializedError | None = None
    throttled: bool = False
    cycles: int = 1
    pending: bool = False

    def then(self, later: TickPollResult) -> TickPollResult:
        """This entry followed by ``later``, what the same lane did next: the counts add
        up, and ``error``, ``throttled`` and ``pending`` are those of the later cycle (of
        this entry when ``later`` ran none: it only delivered)."""
        last = later if later.cycles else self
        return dataclasses.replace(
            last,
            items=self.items + later.items,
            events=self.events + later.events,
            delivered=self.delivered + later.delivered,
            duration_ms=self.duration_ms + later.duration_ms,
            cycles=self.cycles + later.cycles,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one ``tick()`` pass did.

    Attributes:
        polled: One entry per (poller, partition, lane) that ran, with the totals of its
            cycles (see :class:`TickPollResult`).
        skipped_leased: Due keys another instance (or run) was working on.
        skipped_not_due: Keys not due yet, or paused.
        duration_ms: Wall time of the pass (clock time).
        timed_out: The deadline stopped the pass before every key was visited.
    """

    polled: list[TickPollResult] = field(default_factory=list)
    skipped_leased: int = 0
    skipped_not_due: int = 0
    duration_ms: int = 0
    timed_out: bool = False

    @property
    def errors(self) -> list[TickPollResult]:
        """The cycles that failed (throttled cycles are not failures: see :attr:`throttled`)."""
        return [
            result for result in self.polled if result.error is not None and not result.throttled
        ]

    @property
    def throttled(self) -> list[TickPollResult]:
        """The cycles the API (or an exhausted budget) throttled; their keys wait it out."""
        return [result for result in self.polled if result.throttled]

    @property
    def pending_keys(self) -> list[tuple[str, str]]:
        """The (poller, partition) keys with more to fetch when the pass ended: a lane of
        theirs stopped short, and the deadline (or the tick's limit on runs of one key)
        came first. Empty when every visited key caught up."""
        keys = (PKey(result.poller, result.partition) for result in self.polled if result.pending)
        return [(key.poller, key.partition) for key in dict.fromkeys(keys)]

    @property
    def caught_up(self) -> bool:
        """No visited key has more to fetch (see :attr:`pending_keys`)."""
        return not self.pending_keys

    @classmethod
    def combine(cls, results: Sequence[TickResult], *, duration_ms: int) -> TickResult:
        """Several passes, run side by side, as one result lasting ``duration_ms``."""
        return cls(
            polled=[row for result in results for row in result.polled],
            skipped_leased=sum(result.skipped_leased for result in results),
            skipped_not_due=sum(result.skipped_not_due for result in results),
            duration_ms=duration_ms,
            timed_out=any(result.timed_out for result in results),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (with ``pending_keys`` as ``{"poller", "partition"}`` objects,
        and ``caught_up``)."""
        return {
            "polled": [result.to_dict() for result in self.polled],
            "skipped_leased": self.skipped_leased,
            "skipped_not_due": self.skipped_not_due,
            "duration_ms": self.duration_ms,
            "timed_out": self.timed_out,
            "pending_keys": [
                {"poller": poller, "partition": partition}
                for poller, partition in self.pending_keys
            ],
            "caught_up": self.caught_up,
        }


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What ``replay()`` did: how many logged events went back to the outbox."""

    replayed: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class LeaseOptions:
    """Lease timing.

    Args:
        ttl: How long a lease lives without renewal. Keep it above the slowest page fetch.
        renew_every: Heartbeat period; default ``ttl / 3``.
        safety_margin: When renewals fail, the holder stops delivering and fetching this
            long before its lease expires by its own clock, since another instance may
            take the key once it expires by that one's clock. Keep it above the clock
            skew between hosts (see
            https://watukuy.readthedocs.io/en/latest/stores/#clocks-and-leases);
            default ``ttl / 6``, at most
            ``ttl - renew_every``.
    """

    ttl: Duration = "30s"
    renew_every: Duration | None = None
    safety_margin: Duration | None = None
    ttl_ms: int = field(init=False, repr=False, compare=False)
    renew_every_ms: int = field(init=False, repr=False, compare=False)
    safety_margin_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ttl_ms = parse_duration(self.ttl, "lease.ttl")
        if ttl_ms <= 0:
            raise ConfigError(f"must be greater than zero, got {self.ttl!r}", field="lease.ttl")
        renew_ms = (
            max(1, ttl_ms // 3)
            if self.renew_every is None
            else parse_duration(self.renew_every, "lease.renew_every")
        )
        if not 0 < renew_ms < ttl_ms:
            raise ConfigError(
                f"must be between 0 and lease.ttl, got {self.renew_every!r}",
                field="lease.renew_every",
            )
        margin_ms = (
            min(ttl_ms // 6, ttl_ms - renew_ms)
            if self.safety_margin is None
            else parse_duration(self.safety_margin, "lease.safety_margin")
        )
        if not 0 <= margin_ms <= ttl_ms - renew_ms:
            raise ConfigError(
                f"must be between 0 and lease.ttl - lease.renew_every, got {self.safety_margin!r}",
                field="lease.safety_margin",
            )
        object.__setattr__(self, "ttl_ms", ttl_ms)
        object.__setattr__(self, "renew_every_ms", renew_ms)
        object.__setattr__(self, "safety_margin_ms", margin_ms)
