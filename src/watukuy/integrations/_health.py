"""Health verdicts from ``engine.inspect()``, independent of any web framework."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from watukuy.core.durations import Duration, format_duration, parse_duration
from watukuy.core.engine import EngineCore
from watukuy.core.errors import ConfigError
from watukuy.core.operations import InspectReport, PollerInspect
from watukuy.core.results import EngineStatus

__all__ = ["HealthCheck", "HealthResult", "KeyHealth"]

_log = logging.getLogger("watukuy")


@dataclass(frozen=True, slots=True)
class KeyHealth:
    """The verdict on one (poller, partition).

    Attributes:
        poller: Poller name.
        partition: Partition key (``""`` for single-partition pollers).
        reasons: Why the key is unhealthy; empty when it is healthy.
        paused: The key is paused.
        circuit: ``"closed"``, ``"half-open"`` or ``"open"``.
        lag_ms: How far the cursor trails the clock (timestamp pollers), else ``None``.
        outbox_pending: Events waiting for their handler.
        parked: Poison events and quarantined items waiting for a human.
        lease_owner: The instance holding the key's lease, if any.
    """

    poller: str
    partition: str
    reasons: list[str]
    paused: bool
    circuit: str
    lag_ms: int | None
    outbox_pending: int
    parked: int
    lease_owner: str | None

    @property
    def healthy(self) -> bool:
        """No reason to worry about this key."""
        return not self.reasons

    @property
    def label(self) -> str:
        """``poller/partition``, or the poller name alone when it is not partitioned."""
        return f"{self.poller}/{self.partition}" if self.partition else self.poller

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "poller": self.poller,
            "partition": self.partition,
            "status": "ok" if self.healthy else "unhealthy",
            "reasons": list(self.reasons),
            "paused": self.paused,
            "circuit": self.circuit,
            "lag_ms": self.lag_ms,
            "outbox_pending": self.outbox_pending,
            "parked": self.parked,
            "lease_owner": self.lease_owner,
        }


@dataclass(frozen=True, slots=True)
class HealthResult:
    """The verdict on a whole engine.

    Attributes:
        reasons: Every cause of concern, each key's prefixed with its label.
        keys: One verdict per (poller, partition) in the report.
        engine_status: The engine's lifecycle state.
        instance_id: The engine's instance id.
        generated_at: When the underlying report was made (epoch ms); ``None`` when
            ``inspect()`` itself failed.
    """

    reasons: list[str]
    keys: list[KeyHealth] = field(default_factory=list)
    engine_status: str = ""
    instance_id: str = ""
    generated_at: int | None = None

    @property
    def healthy(self) -> bool:
        """Nothing to worry about."""
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``status`` is ``"ok"`` or ``"unhealthy"``."""
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "reasons": list(self.reasons),
            "engine_status": self.engine_status,
            "instance_id": self.instance_id,
            "generated_at": self.generated_at,
            "pollers": [key.to_dict() for key in self.keys],
        }


class HealthCheck:
    """Judges an engine from its ``inspect()`` report.

    A key is unhealthy when its circuit is open (unless ``allow_open_circuit``), when its
    cursor lags more than ``max_lag`` (timestamp pollers that are not paused), when anything
    is parked, or when its outbox holds more events than at the previous check (a failing,
    slow or missing handler). The outbox sizes of the previous check are kept in memory, so
    the first check never reports growth; keep one ``HealthCheck`` per endpoint.

    Args:
        engine: The engine to judge.
        max_lag: Longest acceptable lag (``"10m"``); ``None`` disables the lag check.
        allow_open_circuit: Do not count an open circuit (the engine probes it itself).
        require_running: Also require the engine's daemon to be running (for apps that
            start it, e.g. with ``watukuy_lifespan(engine, mode="daemon")``).

    Raises:
        ConfigError: ``max_lag`` is not a duration.
    """

    def __init__(
        self,
        engine: EngineCore,
        *,
        max_lag: Duration | None = None,
        allow_open_circuit: bool = False,
        require_running: bool = False,
    ) -> None:
        self._engine = engine
        self._max_lag_ms = None if max_lag is None else parse_duration(max_lag, "max_lag")
        for name, value in (
            ("allow_open_circuit", allow_open_circuit),
            ("require_running", require_running),
        ):
            if not isinstance(value, bool):
                raise ConfigError(f"expected a bool, got {value!r}", field=name)
        self._allow_open_circuit = allow_open_circuit
        self._require_running = require_running
        self._previous_outbox: dict[tuple[str, str], int] = {}

    async def check(self) -> HealthResult:
        """Inspect the engine and judge it; a failing ``inspect()`` is itself unhealthy."""
        try:
            report = await self._engine.inspect()
        except Exception as error:
            _log.warning("health check: inspect() failed: %s", error)
            return HealthResult(
                reasons=[f"inspect() failed: {type(error).__name__}: {error}"],
                engine_status=self._engine.status.value,
                instance_id=self._engine.instance_id,
            )
        return self.judge(report)

    def judge(self, report: InspectReport) -> HealthResult:
        """Judge a report, and remember its outbox sizes for the next call."""
        reasons: list[str] = []
        if self._require_running and report["status"] != EngineStatus.RUNNING.value:
            reasons.append(f"engine is {report['status']}, not running")
        keys = [self._judge_key(entry) for entry in report["pollers"]]
        self._previous_outbox = {(key.poller, key.partition): key.outbox_pending for key in keys}
        reasons.extend(f"{key.label}: {reason}" for key in keys for reason in key.reasons)
        return HealthResult(
            reasons=reasons,
            keys=keys,
            engine_status=report["status"],
            instance_id=report["instance_id"],
            generated_at=report["generated_at"],
        )

    def _judge_key(self, entry: PollerInspect) -> KeyHealth:
        schedule = entry["schedule"]
        circuit = str(schedule.get("circuit", "closed"))
        reasons: list[str] = []
        if circuit == "open" and not self._allow_open_circuit:
            last_error = schedule.get("last_error") or {}
            message = last_error.get("message")
            reasons.append(f"circuit open: {message}" if message else "circuit open")
        lag_ms = entry["lag_ms"]
        limit = self._max_lag_ms
        # A paused key lags by design; its lag says nothing about the API or the engine.
        if limit is not None and lag_ms is not None and lag_ms > limit and not entry["paused"]:
            reasons.append(f"lag {_seconds(lag_ms)} is over max_lag {format_duration(limit)}")
        if entry["parked"] > 0:
            reasons.append(f"{entry['parked']} parked (poison events or invalid items)")
        pending = entry["outbox_pending"]
        previous = self._previous_outbox.get((entry["poller"], entry["partition"]))
        if previous is not None and pending > previous:
            reasons.append(f"outbox growing: {previous} -> {pending} pending")
        lease = entry["lease"]
        return KeyHealth(
            poller=entry["poller"],
            partition=entry["partition"],
            reasons=reasons,
            paused=entry["paused"],
            circuit=circuit,
            lag_ms=lag_ms,
            outbox_pending=pending,
            parked=entry["parked"],
            lease_owner=None if lease is None else lease.get("owner"),
        )


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.0f}s" if ms >= 10_000 else f"{ms}ms"
