"""The options of a chaos run, its report, and the ways to read one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from watukuy.model.errors import ConfigError
from watukuy.testing.faulty import KILL_POINTS, KillPoint

from ._pollers import STRATEGIES, ChaosStrategy

__all__ = [
    "ChaosOptions",
    "auto_reconcile",
    "ChaosReport",
    "assert_chaos_report",
    "describe_chaos",
    "replay_command",
    "resolve_options",
]

TRACE_TAIL: Final = 30
"""Trace lines shown by :func:`assert_chaos_report`."""


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    """The options of one run, validated, with every default applied.

    See :func:`~watukuy.testing.chaos.run_chaos` for what each one means.
    """

    seed: int
    steps: int = 150
    strategy: ChaosStrategy = "timestamp"
    kill_points: tuple[KillPoint, ...] = KILL_POINTS
    kill_probability: float = 0.3
    max_mutations_per_step: int = 3
    initial_items: int = 20
    concurrency: int = 3
    retain_payload: bool = False
    reconcile: bool = False

    @property
    def deletes_observable(self) -> bool:
        """Whether the poller can see deletes (a full scan, or a reconcile listing)."""
        return self.strategy == "snapshot_diff" or self.reconcile


_DEFAULTS: Final = ChaosOptions(seed=0)


def auto_reconcile(seed: int, strategy: ChaosStrategy) -> bool:
    """The default of ``reconcile``: on for odd seeds, off for even ones (never for a
    snapshot diff), so a sweep covers both halves without doubling its runs."""
    return strategy != "snapshot_diff" and seed % 2 == 1


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"expected an integer >= {minimum}, got {value!r}", field=name)
    return value


def resolve_options(
    *,
    seed: Any,
    steps: Any,
    strategy: Any,
    kill_points: Any,
    kill_probability: Any,
    max_mutations_per_step: Any,
    initial_items: Any,
    concurrency: Any,
    retain_payload: Any,
    reconcile: Any,
) -> ChaosOptions:
    """Validate the arguments of ``run_chaos``.

    Raises:
        ConfigError: An argument is invalid; the message names it and the value.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"expected an integer, got {seed!r}", field="seed")
    if strategy not in STRATEGIES:
        raise ConfigError(f"expected one of {list(STRATEGIES)}, got {strategy!r}", field="strategy")
    points: tuple[KillPoint, ...]
    if kill_points == "all":
        points = KILL_POINTS
    elif isinstance(kill_points, str) or not isinstance(kill_points, Sequence):
        raise ConfigError(
            f"expected 'all' or a list of kill points, got {kill_points!r}", field="kill_points"
        )
    else:
        for point in kill_points:
            if point not in KILL_POINTS:
                raise ConfigError(
                    f"unknown kill point {point!r}; expected some of {list(KILL_POINTS)}",
                    field="kill_points",
                )
        points = tuple(point for point in KILL_POINTS if point in kill_points)
    if (
        isinstance(kill_probability, bool)
        or not isinstance(kill_probability, int | float)
        or not math.isfinite(kill_probability)
        or not 0 <= kill_probability <= 1
    ):
        raise ConfigError(
            f"expected a number between 0 and 1, got {kill_probability!r}",
            field="kill_probability",
        )
    if not isinstance(retain_payload, bool):
        raise ConfigError(f"expected a bool, got {retain_payload!r}", field="retain_payload")
    if reconcile is not None and not isinstance(reconcile, bool):
        raise ConfigError(f"expected a bool or None, got {reconcile!r}", field="reconcile")
    if reconcile is None:
        reconcile = auto_reconcile(seed, strategy)
    return ChaosOptions(
        seed=seed,
        steps=_int("steps", steps, 1),
        strategy=strategy,
        kill_points=points,
        kill_probability=float(kill_probability),
        max_mutations_per_step=_int("max_mutations_per_step", max_mutations_per_step, 0),
        initial_items=_int("initial_items", initial_items, 0),
        concurrency=_int("concurrency", concurrency, 1),
        retain_payload=retain_payload,
        reconcile=reconcile and strategy != "snapshot_diff",
    )


Mutation = Literal["created", "updated", "deleted"]


@dataclass(frozen=True, slots=True)
class ChaosReport:
    """What one chaos run did and found. An empty ``violations`` means every guarantee held.

    Attributes:
        seed: The seed.
        strategy: The cursor strategy under test.
        steps: Simulation steps (mutations, clock advance, one tick each).
        options: Every option of the run, for an exact replay.
        store: The class name of the store the run used.
        kills: How many times each kill point fired.
        restarts: Simulated process restarts (one per process death).
        mutations: Mutations applied to the fake API, by kind.
        delivered: Handler invocations that completed.
        unique_events: Distinct event ids delivered.
        duplicates: ``delivered - unique_events``: redeliveries of an event already seen.
        lost: Changes that never reached the handler: items whose final state was never
            delivered, and observed removals never delivered as ``deleted`` (must be 0).
        held: Observed removals not delivered as ``deleted`` because the engine holds
            them back for an operator and says so (the key's ``held_deletes``, from the
            mass-delete guard or deletes no pass could prove): announced, so not lost.
        parked: Parked rows left after quiescence (a violation when not 0).
        pending: Outbox rows left after quiescence (a violation when not 0).
        quiescence_ticks: Ticks it took to converge once the mutations stopped.
        in_flight_at_kills: Deliveries not acked yet when their process died or lost its
            lease, summed over the run: the most ``duplicates`` may be.
        violations: Every broken guarantee, one readable line each.
        trace: The tail of the run's timeline.
    """

    seed: int
    strategy: ChaosStrategy
    steps: int
    options: ChaosOptions
    store: str
    kills: dict[KillPoint, int]
    restarts: int
    mutations: dict[Mutation, int]
    delivered: int
    unique_events: int
    duplicates: int
    lost: int
    parked: int
    pending: int
    quiescence_ticks: int
    in_flight_at_kills: int = 0
    held: int = 0
    violations: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)

    @property
    def total_kills(self) -> int:
        """Kills of every kill point together (handler failures included)."""
        return sum(self.kills.values())

    @property
    def ok(self) -> bool:
        """True when no guarantee was broken."""
        return not self.violations


def replay_command(report: ChaosReport, *, trace: bool = True) -> str:
    """The command line that replays ``report`` (``python -m watukuy.testing.chaos ...``)."""
    o = report.options
    parts = [
        "python -m watukuy.testing.chaos",
        f"--seed {o.seed}",
        f"--strategy {o.strategy}",
        f"--steps {o.steps}",
    ]
    if o.kill_points != _DEFAULTS.kill_points:
        parts.append(f"--kill-points {','.join(o.kill_points) or 'none'}")
    if o.kill_probability != _DEFAULTS.kill_probability:
        parts.append(f"--kill-probability {o.kill_probability:g}")
    if o.max_mutations_per_step != _DEFAULTS.max_mutations_per_step:
        parts.append(f"--max-mutations {o.max_mutations_per_step}")
    if o.initial_items != _DEFAULTS.initial_items:
        parts.append(f"--initial-items {o.initial_items}")
    if o.concurrency != _DEFAULTS.concurrency:
        parts.append(f"--concurrency {o.concurrency}")
    if o.retain_payload:
        parts.append("--retain-payload")
    if o.reconcile != auto_reconcile(o.seed, o.strategy):
        parts.append(f"--reconcile {'on' if o.reconcile else 'off'}")
    store = {"SqliteStore": "sqlite", "PostgresStore": "postgres", "RedisStore": "redis"}
    if report.store in store:
        parts.append(f"--store {store[report.store]}")
    if trace:
        parts.append("--trace")
    return " ".join(parts)


def describe_chaos(report: ChaosReport) -> str:
    """One line for CI logs: seed, strategy, kills, restarts, deliveries, violations."""
    m = report.mutations
    return (
        f"chaos seed={report.seed} strategy={report.strategy} "
        f"reconcile={'on' if report.options.reconcile else 'off'} store={report.store} "
        f"steps={report.steps} kills={report.total_kills} restarts={report.restarts} "
        f"mutations=+{m['created']}/~{m['updated']}/-{m['deleted']} "
        f"delivered={report.delivered} unique={report.unique_events} "
        f"duplicates={report.duplicates} in_flight_at_kills={report.in_flight_at_kills} "
        f"lost={report.lost} held={report.held} parked={report.parked} "
        f"pending={report.pending} "
        f"violations={len(report.violations)}"
    )


def assert_chaos_report(report: ChaosReport) -> None:
    """Raise ``AssertionError`` when the run broke a guarantee.

    The message lists every violation, the seed, the one-line command that replays the run
    with its trace, and the tail of the trace. A clean report passes silently.
    """
    if report.ok:
        return
    tail = report.trace[-TRACE_TAIL:]
    lines = [
        f"{len(report.violations)} chaos violation(s) for seed {report.seed} "
        f"(strategy {report.strategy}, {report.steps} steps, {report.store}):",
        *(f"  - {violation}" for violation in report.violations),
        f"Replay: {replay_command(report)}",
        f"Summary: {describe_chaos(report)}",
        f"Trace tail ({len(tail)} of {len(report.trace)} kept lines):",
        *(f"  {line}" for line in tail),
    ]
    raise AssertionError("\n".join(lines))
