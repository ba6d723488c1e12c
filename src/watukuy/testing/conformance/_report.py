"""The report of a conformance run, and the ways to read one."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ConformanceReport", "assert_conformance", "describe", "replay_command"]

TRACE_TAIL: Final = 40


@dataclass(slots=True)
class ConformanceReport:
    """What one run did and what broke.

    Attributes:
        config: The configuration's name.
        store: The store class the run used.
        plan: The executed plan, in its text form (replayable).
        seed: The seed the plan came from (``None`` for a given plan).
        steps: Steps in the plan.
        rounds: The rounds the seeded plan was generated with.
        ticks: ``tick()`` calls, quiescence included.
        requests: Requests the vendor answered.
        writes: Inserts and updates the vendor made; ``deletes`` its deletes.
        kills: Process deaths by where they happened (store kill points, ``request``).
        restarts: New engines started on the same store after a death.
        delivered: Handler calls; ``unique`` distinct ids among them.
        obligations: Versions the ``[seen]`` check required the handler to hear (each
            stayed visible through a whole cycle able to read it).
        violations: What the oracle found (empty: the run conforms).
        shrunk: A shorter plan that still fails the same way, when one was looked for.
        trace: The last lines of the run's timeline.
    """

    config: str
    store: str
    plan: str
    seed: int | None
    steps: int
    rounds: int | None = None
    ticks: int = 0
    requests: int = 0
    writes: int = 0
    deletes: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    kills: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    delivered: int = 0
    obligations: int = 0
    unique: int = 0
    violations: list[str] = field(default_factory=list)
    shrunk: str | None = None
    trace: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.violations

    @property
    def total_kills(self) -> int:
        """Process deaths of every kind (a failing handler is not one)."""
        return sum(count for point, count in self.kills.items() if point != "handler")

    @property
    def kind(self) -> str | None:
        """The tag of the first violation (``"[seen]"``, ``"[phantom]"``...)."""
        if not self.violations:
            return None
        first = self.violations[0]
        return first[: first.index("]") + 1] if first.startswith("[") else first


def replay_command(report: ConformanceReport, *, shrunk: bool = True) -> str:
    """The shell command that replays this run (its shrunk plan when there is one)."""
    plan = report.shrunk if shrunk and report.shrunk is not None else report.plan
    store = "" if report.store == "MemoryStore" else f" --store {_store_flag(report.store)}"
    return (
        f"python -m watukuy.testing.conformance --config {report.config}{store} "
        f"--plan {shlex.quote(plan)}"
    )


def _store_flag(store: str) -> str:
    return store.removesuffix("Store").lower()


def describe(report: ConformanceReport) -> str:
    """One line for logs."""
    seed = f" seed={report.seed}" if report.seed is not None else ""
    kills = report.total_kills
    verdict = "ok" if report.ok else f"{len(report.violations)} violation(s), {report.kind}"
    return (
        f"conformance {report.config}{seed} on {report.store}: {report.steps} steps, "
        f"{report.ticks} ticks, {report.requests} requests, {report.writes} writes, "
        f"{report.deletes} deletes, {kills} kills, {report.delivered} deliveries "
        f"({report.delivered - report.unique} duplicates), {report.obligations} versions "
        f"held to [seen]: {verdict}"
    )


def assert_conformance(report: ConformanceReport) -> None:
    """Raise ``AssertionError`` with the violations, the replay command and the trace tail.

    Raises:
        AssertionError: The run found a violation.
    """
    if report.ok:
        return
    lines = [describe(report), *(f"  {v}" for v in report.violations[:20])]
    if len(report.violations) > 20:
        lines.append(f"  ... and {len(report.violations) - 20} more")
    if report.seed is not None:
        lines.append(
            f"seed: python -m watukuy.testing.conformance --config {report.config} "
            f"--seed {report.seed} --rounds {report.rounds}"
        )
    lines.append(f"replay: {replay_command(report)}")
    lines.append("trace (last lines):")
    lines.extend(f"  {line}" for line in report.trace[-TRACE_TAIL:])
    raise AssertionError("\n".join(lines))
