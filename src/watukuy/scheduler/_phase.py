"""The phase a key is in, derived from its schedule for ``inspect()`` and the CLI.

The phases are the states of the poller state machine::

    [start] --> IDLE                 state created, due now
    IDLE --> POLLING                 due and lease acquired
    POLLING --> IDLE                 success (AIMD adjusts the interval)
    POLLING --> THROTTLED            429, or 503 with Retry-After
    THROTTLED --> IDLE               the Retry-After window elapsed
    POLLING --> BACKING_OFF          fetch error, fewer than circuit.failures in a row
    BACKING_OFF --> POLLING          the backoff elapsed
    POLLING --> CIRCUIT_OPEN         circuit.failures reached, or a poison halt
    CIRCUIT_OPEN --> HALF_OPEN       probe_every elapsed (the next run is a probe)
    HALF_OPEN --> IDLE               the probe succeeded; the circuit closes
    HALF_OPEN --> CIRCUIT_OPEN       the probe failed
    IDLE --> PAUSED                  pause(), or the partition was removed
    PAUSED --> IDLE                  resume()

Only the schedule is persisted; the phase is computed from it on demand.
"""

from __future__ import annotations

from enum import StrEnum

from watukuy.model.rows import CircuitState, ScheduleState

__all__ = ["PollerPhase", "phase_of"]


class PollerPhase(StrEnum):
    """Where a key stands in the poller state machine."""

    IDLE = "idle"
    """Waiting for its next run (or due now)."""
    POLLING = "polling"
    """A live cycle is running."""
    THROTTLED = "throttled"
    """Sleeping out a ``Retry-After`` window."""
    BACKING_OFF = "backing-off"
    """Waiting after a failed fetch, before the circuit would open."""
    CIRCUIT_OPEN = "circuit-open"
    """Failing; no runs until the next probe."""
    HALF_OPEN = "half-open"
    """The next (or current) run is a probe of an open circuit."""
    PAUSED = "paused"
    """Paused by ``pause()`` or by partition removal."""


def phase_of(state: ScheduleState, *, paused: bool, polling: bool, now: int) -> PollerPhase:
    """Derive the phase of a key.

    Precedence, first match wins: paused; a running probe (half-open) or any other running
    cycle; an open circuit; an unexpired ``Retry-After`` window; a half-open circuit waiting
    for its probe; a backoff that has not elapsed; otherwise idle. A pause wins over a running
    cycle because it is the user's latest word: the cycle finishes, no other one starts.

    Args:
        state: The key's persisted schedule.
        paused: The key is paused.
        polling: This process is running a live cycle for the key right now.
        now: Current time (epoch ms).

    Returns:
        The phase.
    """
    if paused:
        return PollerPhase.PAUSED
    if polling:
        if state.circuit is CircuitState.HALF_OPEN:
            return PollerPhase.HALF_OPEN
        return PollerPhase.POLLING
    if state.circuit is CircuitState.OPEN:
        return PollerPhase.CIRCUIT_OPEN
    if state.throttled_until is not None and state.throttled_until > now:
        return PollerPhase.THROTTLED
    if state.circuit is CircuitState.HALF_OPEN:
        return PollerPhase.HALF_OPEN
    waiting = state.next_due_at is not None and state.next_due_at > now
    if state.consecutive_failures > 0 and waiting:
        return PollerPhase.BACKING_OFF
    return PollerPhase.IDLE
