"""Plain result records returned by engine operations."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from enum import StrEnum
from typing import Any

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, SerializedError
from watukuy.model.records import dataclass
from watukuy.model.rows import Lane

__all__ = ["EngineStatus", "LeaseOptions", "ReplayResult", "TickPollResult", "TickResult"]


class EngineStatus(StrEnum):
    """Lifecycle of an engine: idle -> running -> stopping -> stopped."""

    IDLE = "idle"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class TickPollResult:
    """One lane cycle that ran during a tick.

    Attributes:
        poller: Poller name.
        partition: Partition key.
        lane: Which lane ran.
        items: Items fetched (after the lag filter).
        events: Events committed.
        delivered: Events delivered during the cycle.
        duration_ms: Wall time of the cycle.
        error: The failure, serialised; ``None`` on success. Failures are reported here,
            never raised.
        throttled: The cycle was throttled (``429``, ``503`` with ``Retry-After``, an
            exhausted budget): ``error`` says why, but the cycle did not fail; the key waits
            without counting a failure.
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one ``tick()`` pass did.

    Attributes:
        polled: One entry per (poller, partition, lane) cycle that ran.
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "polled": [result.to_dict() for result in self.polled],
            "skipped_leased": self.skipped_leased,
            "skipped_not_due": self.skipped_not_due,
            "duration_ms": self.duration_ms,
            "timed_out": self.timed_out,
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
