"""The seeded chaos harness: crash the engine at every store boundary, check the guarantees.

:func:`run_chaos` drives a real engine (``tick()`` mode) against a :class:`FakeApi` on a
:class:`VirtualClock`. Every step it may arm one kill point in a :class:`FaultyStore`
(probability ``kill_probability``), applies up to ``max_mutations_per_step`` seeded
creates, updates and deletes to the API, advances the clock by a seeded 0-10 seconds, and
ticks. When a store-level kill fires the process is dead: the engine is dropped without
``stop()``, its lease lingers, the clock moves on, and a fresh engine with a new instance
id continues on the same store. At the end the harness stops mutating and killing, ticks
until everything has been delivered, and checks:

- **G1** every item in the API is what the handler last heard about it; every removed item
  that was observed got a ``deleted`` after its last ``created``/``updated``; no event
  carries a version the API never served; each id lives ``created``, ``updated``...,
  ``deleted`` in that order.
- **G2** duplicates share their id *and* their content and sequence.
- **G3** per subject, sequences strictly increase in delivery order (exact redeliveries
  aside, and those never come after a newer event).
- **G4/G7** the outbox is empty and nothing is parked.
- **G5** never two unexpired lease holders at once; fenced writes from a stale or
  released epoch are never accepted.

Deletes are observable where the poller can see them: ``snapshot_diff`` finds them
itself; the incremental strategies (``timestamp``, ``token``, ``page``, ``custom``) see them
only with a ``reconcile`` listing, which the harness gives them on odd seeds (every 30
virtual seconds). Even seeds run without one, and deletes are then not checked: a
reconcile listing re-emits whatever the live lane lost, so only runs without it can catch
a live lane that skips changes.

A run is deterministic: the same options give the same report, trace included (on
``MemoryStore``; on a real store concurrent deliveries may interleave differently). So a
failing seed is a regression test, and :func:`assert_chaos_report` prints the command
line that replays it::

    report = await run_chaos(seed=7, strategy="snapshot_diff")
    assert_chaos_report(report)     # AssertionError: violations, replay command, trace tail
    print(describe_chaos(report))   # one line for CI logs

From a shell: ``python -m watukuy.testing.chaos --seeds 200`` sweeps seeds 1..200 over
every strategy; ``python -m watukuy.testing.chaos --seed 7 --strategy page --trace``
replays one run and prints its timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from watukuy.model.ports import StateStore
from watukuy.testing.faulty import KILL_POINTS, KillPoint, SimulatedCrash

from ._pollers import STRATEGIES, ChaosStrategy
from ._report import (
    ChaosOptions,
    ChaosReport,
    assert_chaos_report,
    describe_chaos,
    replay_command,
    resolve_options,
)
from ._run import ChaosRun

__all__ = [
    "KILL_POINTS",
    "STRATEGIES",
    "ChaosOptions",
    "ChaosReport",
    "ChaosStrategy",
    "KillPoint",
    "SimulatedCrash",
    "assert_chaos_report",
    "describe_chaos",
    "replay_command",
    "run_chaos",
]


async def run_chaos(
    seed: int,
    steps: int = 150,
    strategy: ChaosStrategy = "timestamp",
    kill_points: Literal["all"] | Sequence[KillPoint] = "all",
    kill_probability: float = 0.3,
    max_mutations_per_step: int = 3,
    initial_items: int = 20,
    concurrency: int = 3,
    retain_payload: bool = False,
    reconcile: bool | None = None,
    store: StateStore | None = None,
    trace: bool = False,
) -> ChaosReport:
    """Run one seeded chaos simulation and check the guarantees (see the module doc).

    Args:
        seed: Seeds every random choice (mutations, kills, clock, engine jitter).
        steps: Simulation steps before quiescence.
        strategy: ``"timestamp"``, ``"token"``, ``"page"``, ``"snapshot_diff"`` or
            ``"custom"``.
        kill_points: ``"all"`` or the kill points that may be armed (``[]``: no crashes).
        kill_probability: Chance per step of arming a kill point (an armed point waits
            until its moment comes, or until another one replaces it).
        max_mutations_per_step: Up to this many API mutations per step.
        initial_items: Items in the API before the first step.
        concurrency: ``delivery.concurrency`` of the poller.
        retain_payload: Use ``retain="payload"`` and also check ``previous`` and the data
            of ``deleted`` events.
        reconcile: Give an incremental strategy a reconcile listing every 30 virtual
            seconds, which makes deletes observable (and checked). ``None``: on for odd
            seeds, off for even ones. Both halves matter: a reconcile listing re-emits a
            change the live lane lost, which hides live-lane bugs from the G1 check.
            Ignored for ``snapshot_diff``, which sees deletes by itself.
        store: The store to run on (default a fresh ``MemoryStore``). It must be empty; it
            is migrated, shared by every simulated process, and never closed.
        trace: Print the timeline as it happens.

    Returns:
        The report; check it with :func:`assert_chaos_report`.

    Raises:
        ConfigError: An option is invalid.
    """
    options = resolve_options(
        seed=seed,
        steps=steps,
        strategy=strategy,
        kill_points=kill_points,
        kill_probability=kill_probability,
        max_mutations_per_step=max_mutations_per_step,
        initial_items=initial_items,
        concurrency=concurrency,
        retain_payload=retain_payload,
        reconcile=reconcile,
    )
    return await ChaosRun(options, store, echo=trace).run()
