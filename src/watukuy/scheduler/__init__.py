"""When each key polls next: AIMD intervals, jitter, pacing, throttling, backoff, circuit.

Every function here is pure and synchronous. It takes the persisted
:class:`~watukuy.model.rows.ScheduleState` of one (poller, partition) key, the poller's
:class:`~watukuy.model.options.Schedule` and :class:`~watukuy.model.options.Circuit`, the
time ``now`` in epoch milliseconds and, where a wait is randomised, the injected
:class:`~watukuy.model.ports.Random`; it returns a new state to persist. The runner calls:

- :func:`initial_schedule` for a key seen for the first time;
- :func:`is_due` and :func:`begin_cycle` before a live cycle (an open circuit whose probe
  time has come turns half-open: the run is a probe);
- :func:`on_success` (given the cycle's ``started_at``: intervals run start to start),
  :func:`on_failure` or :func:`on_poison_halt` after it, and reports the
  returned :class:`Transition` (``reason``, ``circuit_opened``, ``circuit_closed``) to hooks;
- :func:`trigger` for ``engine.trigger()``.

:func:`phase_of` names the state-machine phase of a key for ``inspect()`` and the CLI, and
:func:`waiting_ms` / :func:`is_overdue` say whether a key is overdue (due, and left without
the engine's attention for longer than a grace) for ``inspect()``, the CLI, the admin page
and the health check.
"""

from __future__ import annotations

from ._machine import (
    PLANNING_ALLOWANCE_MS,
    Reason,
    Transition,
    band_top,
    begin_cycle,
    initial_schedule,
    is_due,
    on_failure,
    on_poison_halt,
    on_success,
    planned_top,
    trigger,
)
from ._overdue import (
    LOOP_GRACE_MS,
    OVERDUE_GRACE_MS,
    is_overdue,
    loop_grace,
    overdue_grace,
    waiting_ms,
)
from ._phase import PollerPhase, phase_of
from ._timing import apply_jitter, backoff_ceiling, backoff_delay, pacing_delay, throttle_wait

__all__ = [
    "LOOP_GRACE_MS",
    "OVERDUE_GRACE_MS",
    "PLANNING_ALLOWANCE_MS",
    "PollerPhase",
    "Reason",
    "Transition",
    "apply_jitter",
    "backoff_ceiling",
    "backoff_delay",
    "band_top",
    "begin_cycle",
    "initial_schedule",
    "is_due",
    "is_overdue",
    "loop_grace",
    "on_failure",
    "on_poison_halt",
    "on_success",
    "overdue_grace",
    "pacing_delay",
    "phase_of",
    "planned_top",
    "throttle_wait",
    "trigger",
    "waiting_ms",
]
