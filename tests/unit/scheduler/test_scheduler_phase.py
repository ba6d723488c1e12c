"""The state-machine phase derived from a schedule."""

from __future__ import annotations

import pytest

from watukuy.model.rows import CircuitState, ScheduleState
from watukuy.scheduler import PollerPhase, phase_of

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("state", "paused", "polling", "phase"),
    [
        (ScheduleState(next_due_at=NOW), False, False, PollerPhase.IDLE),
        (ScheduleState(next_due_at=None), False, False, PollerPhase.IDLE),
        (ScheduleState(next_due_at=NOW + 5_000), False, False, PollerPhase.IDLE),
        (ScheduleState(next_due_at=NOW), False, True, PollerPhase.POLLING),
        (
            ScheduleState(next_due_at=NOW + 7_000, throttled_until=NOW + 7_000),
            False,
            False,
            PollerPhase.THROTTLED,
        ),
        (
            ScheduleState(next_due_at=NOW, throttled_until=NOW),
            False,
            False,
            PollerPhase.IDLE,
        ),
        (
            ScheduleState(next_due_at=NOW + 500, consecutive_failures=2),
            False,
            False,
            PollerPhase.BACKING_OFF,
        ),
        (
            ScheduleState(next_due_at=NOW, consecutive_failures=2),
            False,
            False,
            PollerPhase.IDLE,
        ),
        (
            ScheduleState(next_due_at=NOW + 30_000, circuit=CircuitState.OPEN),
            False,
            False,
            PollerPhase.CIRCUIT_OPEN,
        ),
        (
            ScheduleState(next_due_at=NOW, circuit=CircuitState.HALF_OPEN),
            False,
            False,
            PollerPhase.HALF_OPEN,
        ),
        (
            ScheduleState(next_due_at=NOW, circuit=CircuitState.HALF_OPEN),
            False,
            True,
            PollerPhase.HALF_OPEN,
        ),
        (
            ScheduleState(
                next_due_at=NOW + 3_000,
                throttled_until=NOW + 3_000,
                circuit=CircuitState.HALF_OPEN,
            ),
            False,
            False,
            PollerPhase.THROTTLED,
        ),
        (
            ScheduleState(next_due_at=NOW + 30_000, circuit=CircuitState.OPEN),
            True,
            False,
            PollerPhase.PAUSED,
        ),
        (ScheduleState(next_due_at=NOW), True, True, PollerPhase.PAUSED),
    ],
)
def test_phase_of(state, paused, polling, phase):
    assert phase_of(state, paused=paused, polling=polling, now=NOW) is phase


def test_phases_have_stable_string_values():
    assert [p.value for p in PollerPhase] == [
        "idle",
        "polling",
        "throttled",
        "backing-off",
        "circuit-open",
        "half-open",
        "paused",
    ]
