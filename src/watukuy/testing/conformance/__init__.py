"""The model-based conformance harness: a vendor that changes while it is read.

:func:`run_conformance` drives a real engine (``tick()`` mode, a :class:`VirtualClock`, a
:class:`FaultyStore`) against a reference vendor built on :class:`FakeApi`. The run follows
a *plan*, a list of text steps generated from a seed (or given): between any two requests
of a cycle the vendor may insert, update (several writes in one gap share a timestamp),
delete, make a change visible late (inside ``lag`` or ``overlap``), shift offset pages (ids
land anywhere in the id order and are reused after a delete), answer ``429``/``500``, a
``200`` with an empty list, or an item without its id; ``304`` answers an unchanged
listing when ETags are on. The process may die at any store kill point, in the middle of
a request, or idle; a new engine then continues on the same store. Operator actions
(``reset_cursor``, with and without ``clear_snapshot``, and ``backfill``, with and without
``force``) run between ticks. After the plan, quiescence: no more changes, faults or
kills, ticks until the handler has heard the vendor's final state, then a few ticks in
which nothing may be requested beyond one listing per lane and nothing may be emitted.

The oracle is the vendor's own history (:mod:`._oracle` lists every check and what each
strategy is held to): every version that stayed visible through a whole cycle able to
read it reaches the handler; the newest event of every item is the vendor's final state
(deleted included, where deletes are observable); an item that never changed gets only
its ``created``; per-item order holds; one observation has one id and one id one
observation; no ``deleted`` for an item the vendor held throughout the pass; a consumer
that deduplicates by ``event.id`` ends with exactly the vendor's final state; and the run
converges and then goes quiet in a bounded number of requests.

A failing run can be shrunk (:func:`run_conformance` with ``shrink=True``): steps are
removed while it keeps failing with the same kind of violation, and
:func:`assert_conformance` prints the seed, the shrunk plan and the one command that
replays it::

    report = await run_conformance("ts-overlap", seed=7, shrink=True)
    assert_conformance(report)

From a shell: ``python -m watukuy.testing.conformance --list``, ``--sweep --examples 50``
(every configuration, seeds 1..50), ``--config ts-overlap --seed 7 --trace``, or
``--config ts-overlap --plan '+k01=1 t900 p ~k01=2 p'``.
"""

from __future__ import annotations

from collections.abc import Sequence

from watukuy.model.ports import StateStore
from watukuy.stores.memory import MemoryStore

from ._config import (
    CONFIGS,
    KNOWN_OPEN,
    OPEN_DEFECTS,
    ChangeKey,
    ConformanceConfig,
    Fault,
    Op,
    Strategy,
    config_named,
    known_open,
)
from ._plan import Step, format_plan, generate_plan, parse_plan
from ._report import ConformanceReport, assert_conformance, describe, replay_command
from ._run import ConformanceRun
from ._shrink import shrink as _shrink

__all__ = [
    "CONFIGS",
    "KNOWN_OPEN",
    "OPEN_DEFECTS",
    "ChangeKey",
    "ConformanceConfig",
    "ConformanceReport",
    "Fault",
    "Op",
    "Step",
    "Strategy",
    "assert_conformance",
    "config_named",
    "describe",
    "format_plan",
    "generate_plan",
    "known_open",
    "parse_plan",
    "replay_command",
    "run_conformance",
]

DEFAULT_ROUNDS = 30


async def run_conformance(
    config: ConformanceConfig | str,
    *,
    seed: int | None = None,
    plan: str | Sequence[str] | None = None,
    rounds: int = DEFAULT_ROUNDS,
    store: StateStore | None = None,
    shrink: bool = False,
    shrink_budget: int = 150,
    trace: bool = False,
) -> ConformanceReport:
    """Run one conformance example and check it (see the module docstring).

    Args:
        config: A :class:`ConformanceConfig` or the name of one of :data:`CONFIGS`.
        seed: Generate the plan from this seed (exactly one of ``seed`` and ``plan``).
        plan: The plan to execute, in its text form or as a list of steps.
        rounds: Ticks of a generated plan.
        store: An empty store to run on (default a fresh ``MemoryStore``); it is migrated
            and never closed. Shrinking always replays on fresh ``MemoryStore`` instances.
        shrink: When the run fails, look for a shorter plan that fails the same way
            (``report.shrunk``).
        shrink_budget: At most this many runs while shrinking.
        trace: Print the timeline as it happens.

    Returns:
        The report; check it with :func:`assert_conformance`.

    Raises:
        ValueError: Neither or both of ``seed`` and ``plan``, or a plan step is invalid.
        KeyError: ``config`` names no configuration.
    """
    chosen = config_named(config) if isinstance(config, str) else config
    if (seed is None) == (plan is None):
        raise ValueError("give exactly one of seed= and plan=")
    steps = generate_plan(chosen, seed, rounds) if seed is not None else parse_plan(plan or "")
    run = ConformanceRun(
        chosen,
        steps,
        store=store,
        seed=seed,
        rounds=rounds if seed is not None else None,
        echo=trace,
    )
    report = await run.run()
    if shrink and report.kind is not None:
        kind = report.kind

        async def attempt(candidate: list[Step]) -> ConformanceReport:
            return await ConformanceRun(chosen, candidate, store=MemoryStore()).run()

        smaller, _ = await _shrink(steps, kind, attempt, budget=shrink_budget)
        report.shrunk = format_plan(smaller)
    return report
