"""Health verdicts from ``engine.inspect()``, independent of any web framework.

A verdict is made of :class:`Finding` records, each with a short public ``summary`` (no
partition key, no error text: safe for an unauthenticated probe) and a ``detail`` for
operators. The checks are small functions of one key's inspect entry (see
``HealthCheck._judge_key``); a new check is one more function returning findings.

Each finding has a ``kind``, and each probe judges some kinds only:

- ``progress``: the engine itself is not doing its work (its daemon loop stalled or ended,
  a key overdue with nobody working on it, ``inspect()`` failing, the daemon not running
  when it must). A restart may cure it: this is all that :meth:`HealthCheck.liveness`
  judges.
- ``attention``: the engine works, and something needs an operator or the vendor (an open
  circuit, parked events, held deletes, an outbox over its limit or growing, a key overdue
  because its budget cannot keep up). A restart cures none of it.
  :meth:`HealthCheck.readiness` judges these and ``progress``.
- ``freshness``: how recent the data is (``max_lag``). A quiet vendor has nothing new, so
  lag says nothing about the engine: only the full report (:meth:`HealthCheck.check`)
  judges it, never a liveness probe.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from watukuy.model.durations import Duration, format_duration, parse_duration
from watukuy.model.errors import ConfigError, StoreError
from watukuy.model.redact import RedactingLogger
from watukuy.model.rows import PKey
from watukuy.runtime.deadline import finish_by
from watukuy.runtime.engine import EngineCore
from watukuy.runtime.operations import InspectReport, PollerInspect
from watukuy.runtime.results import EngineStatus
from watukuy.scheduler import OVERDUE_GRACE_MS, is_overdue

__all__ = ["Finding", "FindingKind", "HealthCheck", "HealthResult", "KeyHealth", "Probe"]

_log = logging.getLogger("watukuy")


FindingKind = Literal["progress", "attention", "freshness"]
"""What a finding is about: the engine's own progress, something for an operator, or how
fresh the data is (see the module docstring)."""

Probe = Literal["liveness", "readiness", "report"]
"""Which verdict is asked for: ``liveness`` (progress only), ``readiness`` (progress and
attention) or ``report`` (everything)."""

PROBE_KINDS: dict[str, frozenset[str]] = {
    "liveness": frozenset({"progress"}),
    "readiness": frozenset({"progress", "attention"}),
    "report": frozenset({"progress", "attention", "freshness"}),
}
"""The kinds of finding each probe judges."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One cause of concern.

    Attributes:
        code: Stable identifier: ``overdue``, ``loop_stalled``, ``loop_ended``,
            ``not_running``, ``inspect_failed`` (progress); ``circuit_open``, ``parked``,
            ``outbox_over``, ``outbox_growing``, ``deletes_held``, ``budget_behind``
            (attention); ``lag``, ``late_arrivals`` (freshness: the live lane lost changes
            that a later re-read found).
        summary: Short text without partition keys or error messages (the public body).
        detail: The full text for operators; may quote the key's last error (already
            cleaned of secrets when it was stored).
        kind: ``progress``, ``attention`` or ``freshness``: which probes count it.
    """

    code: str
    summary: str
    detail: str
    kind: FindingKind = "attention"


@dataclass(frozen=True, slots=True)
class KeyHealth:
    """The verdict on one (poller, partition).

    Attributes:
        poller: Poller name.
        partition: Partition key (``""`` for single-partition pollers).
        findings: Why the key is unhealthy; empty when it is healthy.
        paused: The key is paused.
        circuit: ``"closed"``, ``"half-open"`` or ``"open"``.
        lag_ms: How far the cursor trails the clock (timestamp pollers), else ``None``.
        outbox_pending: Events waiting for their handler.
        parked: Poison events and quarantined items waiting for a human.
        lease_owner: The instance holding the key's lease, if any.
    """

    poller: str
    partition: str
    findings: list[Finding]
    paused: bool
    circuit: str
    lag_ms: int | None
    outbox_pending: int
    parked: int
    lease_owner: str | None

    @property
    def reasons(self) -> list[str]:
        """The detailed text of every finding."""
        return [finding.detail for finding in self.findings]

    @property
    def healthy(self) -> bool:
        """No reason to worry about this key."""
        return not self.findings

    @property
    def label(self) -> str:
        """``poller/partition``, or the poller name alone when it is not partitioned."""
        return f"{self.poller}/{self.partition}" if self.partition else self.poller

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (detailed: names the partition and the lease owner)."""
        return {
            "poller": self.poller,
            "partition": self.partition,
            "status": "ok" if self.healthy else "unhealthy",
            "reasons": self.reasons,
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
        findings: Engine-wide causes of concern (not running, the daemon loop stalled,
            ``inspect()`` failed).
        keys: One verdict per (poller, partition) in the report.
        engine_status: The engine's lifecycle state.
        instance_id: The engine's instance id.
        generated_at: When the underlying report was made (epoch ms); ``None`` when
            ``inspect()`` itself failed.
        probe: The verdict asked for; its findings are of the kinds that probe judges.
    """

    findings: list[Finding] = field(default_factory=list)
    keys: list[KeyHealth] = field(default_factory=list)
    engine_status: str = ""
    instance_id: str = ""
    generated_at: int | None = None
    probe: Probe = "report"

    @property
    def healthy(self) -> bool:
        """Nothing to worry about."""
        return not self.findings and all(key.healthy for key in self.keys)

    @property
    def reasons(self) -> list[str]:
        """Every cause of concern in detail, each key's prefixed with its label."""
        out = [finding.detail for finding in self.findings]
        out += [f"{key.label}: {reason}" for key in self.keys for reason in key.reasons]
        return out

    @property
    def summary(self) -> list[str]:
        """Short reasons, per poller and kind, naming no partition and quoting no error:
        ``"orders: circuit open (3 keys)"``."""
        out = [finding.summary for finding in self.findings]
        counts: Counter[tuple[str, str]] = Counter()
        for key in self.keys:
            for finding in key.findings:
                counts[(key.poller, finding.summary)] += 1
        for (poller, text), n in counts.items():
            out.append(f"{poller}: {text}" + (f" ({n} keys)" if n > 1 else ""))
        return out

    def to_dict(self, *, detail: bool = False) -> dict[str, Any]:
        """JSON-ready form: ``status`` (``"ok"`` or ``"unhealthy"``) and short ``reasons``.

        With ``detail=True`` also the engine's status and instance id, the report's time,
        and one entry per key (partition keys, lease owners, detailed reasons): for
        operators only.
        """
        if not detail:
            return {"status": "ok" if self.healthy else "unhealthy", "reasons": self.summary}
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "reasons": self.reasons,
            "engine_status": self.engine_status,
            "instance_id": self.instance_id,
            "generated_at": self.generated_at,
            "pollers": [key.to_dict() for key in self.keys],
        }


def _optional_count(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"expected an integer >= 0 or None, got {value!r}", field=name)
    return value


class HealthCheck:
    """Judges an engine from its ``inspect()`` report.

    Three verdicts, each judging some kinds of finding (see :class:`Finding`):

    - :meth:`liveness`: the engine's own progress. Unhealthy when the daemon's loop has
      stalled or ended, when a key is overdue (due for longer than the engine's grace with
      nobody working on it: see ``watukuy.scheduler.waiting_ms``), when ``inspect()``
      fails, and, with ``require_running``, when the daemon is not running. A vendor with
      nothing new, an open circuit or a lagging cursor never makes it unhealthy: a restart
      cures none of them.
    - :meth:`readiness`: the same, and what needs an operator: an open circuit (unless
      ``allow_open_circuit``), more than ``max_parked`` rows parked (only poison events
      with ``ignore_invalid``), more than ``max_outbox`` events in an outbox, an outbox
      larger than at the previous check (a failing, slow or missing handler), deletes held
      by the mass-delete guard, and keys overdue only because their budget cannot keep up
      with their schedules.
    - :meth:`check`: everything above, and freshness: a cursor lagging more than
      ``max_lag`` (timestamp pollers that are not paused).

    The outbox sizes of the previous check are kept in memory, so the first check never
    reports growth; keep one ``HealthCheck`` per endpoint.

    Args:
        engine: The engine to judge.
        max_lag: Longest acceptable lag (``"10m"``); ``None`` disables the lag check.
            Judged by :meth:`check` only.
        max_parked: Parked rows a key may hold and stay healthy (default ``0``); ``None``
            disables the check.
        ignore_invalid: Count only poison events toward ``max_parked``, not quarantined
            invalid items (one bad vendor record then does not fail a probe).
        max_outbox: Pending events a key may hold and stay healthy; ``None`` (default)
            disables the check.
        allow_open_circuit: Do not count an open circuit (the engine probes it itself).
        require_running: Also require the engine's daemon to be running (for apps that
            start it, e.g. with ``watukuy_lifespan(engine, mode="daemon")``).
        overdue_grace: How long a key may be due with nobody working on it before it is
            overdue (default: the engine's own grace, ``overdue_grace_ms`` of its report:
            at least a minute).
        timeout: A check answers within this long: a store that does not answer in time
            makes the verdict unhealthy (``inspect_failed``) instead of hanging the probe.

    Raises:
        ConfigError: An option is invalid.
    """

    def __init__(
        self,
        engine: EngineCore,
        *,
        max_lag: Duration | None = None,
        max_parked: int | None = 0,
        ignore_invalid: bool = False,
        max_outbox: int | None = None,
        allow_open_circuit: bool = False,
        require_running: bool = False,
        overdue_grace: Duration | None = None,
        timeout: Duration = "5s",
    ) -> None:
        self._engine = engine
        self._timeout_ms = parse_duration(timeout, "timeout")
        self._max_lag_ms = None if max_lag is None else parse_duration(max_lag, "max_lag")
        self._max_parked = _optional_count(max_parked, "max_parked")
        self._max_outbox = _optional_count(max_outbox, "max_outbox")
        self._overdue_grace_ms = (
            None if overdue_grace is None else parse_duration(overdue_grace, "overdue_grace")
        )
        for name, value in (
            ("ignore_invalid", ignore_invalid),
            ("allow_open_circuit", allow_open_circuit),
            ("require_running", require_running),
        ):
            if not isinstance(value, bool):
                raise ConfigError(f"expected a bool, got {value!r}", field=name)
        self._ignore_invalid = ignore_invalid
        self._allow_open_circuit = allow_open_circuit
        self._require_running = require_running
        self._previous_outbox: dict[tuple[str, str], int] = {}
        self._log = RedactingLogger(_log, engine.redaction)

    async def check(self) -> HealthResult:
        """The full report: progress, attention and freshness (``max_lag``)."""
        return await self._verdict("report")

    async def liveness(self) -> HealthResult:
        """The engine's own progress only: what a Kubernetes liveness probe should see."""
        return await self._verdict("liveness")

    async def readiness(self) -> HealthResult:
        """Progress, and what needs an operator (no freshness)."""
        return await self._verdict("readiness")

    async def _verdict(self, probe: Probe) -> HealthResult:
        """Inspect the engine and judge it; a failing ``inspect()`` is itself unhealthy."""
        try:
            report, poison = await self._bounded_inspect(probe)
        except Exception as error:
            self._log.warning("health check: inspect() failed: %s", error)
            message = self._engine.redaction.text(str(error))
            return HealthResult(
                findings=[
                    Finding(
                        "inspect_failed",
                        "inspect() failed",
                        f"inspect() failed: {type(error).__name__}: {message}",
                        "progress",
                    )
                ],
                engine_status=self._engine.status.value,
                instance_id=self._engine.instance_id,
                probe=probe,
            )
        return self.judge(report, poison=poison, probe=probe)

    async def _bounded_inspect(
        self, probe: Probe
    ) -> tuple[InspectReport, dict[tuple[str, str], int] | None]:
        async def both() -> tuple[InspectReport, dict[tuple[str, str], int] | None]:
            report = await self._engine.inspect(timeout=None)
            if "attention" not in PROBE_KINDS[probe]:
                return report, None  # parked rows are not judged: no need to list them
            return report, await self._poison_counts(report)

        clock = self._engine.clock
        work = asyncio.ensure_future(both())
        if not await finish_by(clock, work, clock.now() + self._timeout_ms):
            raise StoreError(f"the store did not answer within {self._timeout_ms} ms")
        return work.result()

    async def _poison_counts(self, report: InspectReport) -> dict[tuple[str, str], int] | None:
        """With ``ignore_invalid``, the poison events of each key that has parked rows."""
        if not self._ignore_invalid or self._max_parked is None:
            return None
        store = self._engine.store
        limit = self._max_parked + 1  # enough to tell "over the limit"
        counts: dict[tuple[str, str], int] = {}
        for entry in report["pollers"]:
            if entry["parked"] > self._max_parked:
                key = PKey(entry["poller"], entry["partition"])
                rows = await store.list_parked(key, kind="poison", limit=limit)
                counts[(entry["poller"], entry["partition"])] = len(rows)
        return counts

    def judge(
        self,
        report: InspectReport,
        *,
        poison: Mapping[tuple[str, str], int] | None = None,
        probe: Probe = "report",
    ) -> HealthResult:
        """Judge a report, and remember its outbox sizes for the next call (when the
        probe judges outboxes).

        Args:
            report: What ``engine.inspect()`` returned.
            poison: Poison events per (poller, partition), for ``ignore_invalid``; a key
                not in it counts all its parked rows.
            probe: Which verdict: ``liveness``, ``readiness`` or ``report`` (everything).

        Raises:
            ConfigError: ``probe`` is not one of the three.
        """
        kinds = PROBE_KINDS.get(probe)
        if kinds is None:
            raise ConfigError(
                f"expected 'liveness', 'readiness' or 'report', got {probe!r}", field="probe"
            )
        findings = [*self._running(report), *_loop(report)]
        grace = self._overdue_grace_ms
        if grace is None:
            grace = report.get("overdue_grace_ms", OVERDUE_GRACE_MS)
        keys = [self._judge_key(entry, poison, grace, kinds) for entry in report["pollers"]]
        if "attention" in kinds:
            self._previous_outbox = {
                (key.poller, key.partition): key.outbox_pending for key in keys
            }
        return HealthResult(
            findings=[finding for finding in findings if finding.kind in kinds],
            keys=keys,
            engine_status=report["status"],
            instance_id=report["instance_id"],
            generated_at=report["generated_at"],
            probe=probe,
        )

    def _running(self, report: InspectReport) -> list[Finding]:
        if not self._require_running or report["status"] == EngineStatus.RUNNING.value:
            return []
        text = f"engine is {report['status']}, not running"
        return [Finding("not_running", text, text, "progress")]

    def _judge_key(
        self,
        entry: PollerInspect,
        poison: Mapping[tuple[str, str], int] | None,
        grace_ms: int,
        kinds: frozenset[str],
    ) -> KeyHealth:
        findings = [
            *_overdue(entry, grace_ms),
            *self._circuit(entry),
            *self._lag(entry),
            *self._parked(entry, poison),
            *self._outbox(entry),
            *self._held_deletes(entry),
            *_late_arrivals(entry),
        ]
        lease = entry["lease"]
        return KeyHealth(
            poller=entry["poller"],
            partition=entry["partition"],
            findings=[finding for finding in findings if finding.kind in kinds],
            paused=entry["paused"],
            circuit=str(entry["schedule"].get("circuit", "closed")),
            lag_ms=entry["lag_ms"],
            outbox_pending=entry["outbox_pending"],
            parked=entry["parked"],
            lease_owner=None if lease is None else lease.get("owner"),
        )

    # --- the checks: one key's entry in, findings out ----------------------------------------

    def _circuit(self, entry: PollerInspect) -> list[Finding]:
        schedule = entry["schedule"]
        if schedule.get("circuit", "closed") != "open" or self._allow_open_circuit:
            return []
        message = (schedule.get("last_error") or {}).get("message")
        detail = f"circuit open: {message}" if message else "circuit open"
        return [Finding("circuit_open", "circuit open", detail)]

    def _lag(self, entry: PollerInspect) -> list[Finding]:
        lag_ms, limit = entry["lag_ms"], self._max_lag_ms
        # A paused key lags by design; its lag says nothing about the API or the engine.
        if limit is None or lag_ms is None or lag_ms <= limit or entry["paused"]:
            return []
        over = f"lag {_seconds(lag_ms)} is over max_lag {format_duration(limit)}"
        return [Finding("lag", "lag over max_lag", over, "freshness")]

    def _parked(
        self, entry: PollerInspect, poison: Mapping[tuple[str, str], int] | None
    ) -> list[Finding]:
        limit = self._max_parked
        if limit is None:
            return []
        parked = entry["parked"]
        counted = parked
        if poison is not None:
            counted = poison.get((entry["poller"], entry["partition"]), parked)
        if counted <= limit:
            return []
        if poison is not None:
            detail = f"{counted} poison event(s) parked"
        else:
            detail = f"{parked} parked (poison events or invalid items)"
        if limit:
            detail += f", over max_parked {limit}"
        return [Finding("parked", "parked events", detail)]

    def _held_deletes(self, entry: PollerInspect) -> list[Finding]:
        held = entry.get("held_deletes")
        if held is None:
            return []
        if held.get("reason") == "unproven":
            detail = (
                f"{held['count']} deletes held: no pass could prove them "
                "(confirm or discard them: watukuy deletes)"
            )
            return [Finding("deletes_held", "deletes no pass could prove", detail)]
        detail = (
            f"{held['count']} deletes held by the mass-delete guard "
            "(confirm or discard them: watukuy deletes)"
        )
        return [Finding("deletes_held", "deletes held by the mass-delete guard", detail)]

    def _outbox(self, entry: PollerInspect) -> list[Finding]:
        pending = entry["outbox_pending"]
        out: list[Finding] = []
        if self._max_outbox is not None and pending > self._max_outbox:
            out.append(
                Finding(
                    "outbox_over",
                    "outbox over max_outbox",
                    f"outbox holds {pending} pending, over max_outbox {self._max_outbox}",
                )
            )
        previous = self._previous_outbox.get((entry["poller"], entry["partition"]))
        if previous is not None and pending > previous:
            out.append(
                Finding(
                    "outbox_growing",
                    "outbox growing",
                    f"outbox growing: {previous} -> {pending} pending",
                )
            )
        return out


def _loop(report: InspectReport) -> list[Finding]:
    """The daemon's loop (only while the engine runs: ``tick()`` mode has none)."""
    loop = report.get("loop")
    if loop is None:
        return []
    if not loop["alive"]:
        text = "daemon loop ended while the engine runs"
        return [Finding("loop_ended", text, text, "progress")]
    if not loop["stalled"]:
        return []
    detail = (
        f"daemon loop stalled: {_seconds(loop['late_ms'])} past the wake-up it planned "
        f"(grace {format_duration(loop['grace_ms'])})"
    )
    return [Finding("loop_stalled", "daemon loop stalled", detail, "progress")]


def _overdue(entry: PollerInspect, grace_ms: int) -> list[Finding]:
    """A key due for longer than the grace with nobody working on it. A key this engine
    holds back for its budget (or ``max_concurrent_keys``) is behind, not stuck: the fix is
    a larger budget or a longer schedule, which a restart is not."""
    waiting = entry.get("waiting_ms")
    if not is_overdue(waiting, grace_ms):
        return []
    assert waiting is not None
    if entry.get("queued"):
        detail = (
            f"due {_seconds(waiting)} ago and waiting for room on its budget or under "
            "max_concurrent_keys: the budget does not keep up with the schedule"
        )
        return [Finding("budget_behind", "overdue, waiting for its budget", detail)]
    detail = (
        f"overdue: due {_seconds(waiting)} ago with nobody working on it "
        f"(grace {format_duration(grace_ms)})"
    )
    return [Finding("overdue", "overdue", detail, "progress")]


LATE_RECENT_MS = 3_600_000
"""How long a loss of the live lane (an arrival later than its lookback, a miss a reconcile
found) keeps a key's ``late_arrivals`` finding."""


def _late_arrivals(entry: PollerInspect) -> list[Finding]:
    """A data-freshness finding, never a liveness one: in the hour before the key's last
    poll a re-read found versions the live lane could not have caught (later than its
    lookback window), or a reconcile found changes the live lane missed. The poller runs;
    its data came late."""
    late = entry.get("late_arrivals") or {}
    lost_at = late.get("lost_at")
    polled = entry["schedule"].get("last_poll_at") or 0
    if lost_at is None or polled - lost_at > LATE_RECENT_MS:
        return []
    parts = []
    if late.get("beyond_window"):
        window = late.get("window_ms")
        parts.append(
            f"{late['beyond_window']} late arrival(s) exceeded the lookback window (latest "
            f"{_seconds(late.get('max_ms') or 0)} behind the watermark; the lookback is now "
            f"{_seconds(window or 0)})"
        )
    if late.get("missed"):
        parts.append(f"{late['missed']} change(s) missed by the live lane, found by reconcile")
    detail = "; ".join(parts) + ": widen overlap or add reconcile"
    return [Finding("late_arrivals", "late arrivals beyond the lookback", detail, "freshness")]


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.0f}s" if ms >= 10_000 else f"{ms}ms"
