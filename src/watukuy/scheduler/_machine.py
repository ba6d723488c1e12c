"""Transitions of the persisted :class:`~watukuy.model.rows.ScheduleState`.

A key's schedule moves only through the functions below. Each takes the current state, the
poller's :class:`~watukuy.model.options.Schedule` and :class:`~watukuy.model.options.Circuit`,
what the cycle observed, the time and (where a wait is randomised) the injected
:class:`~watukuy.model.ports.Random`, and returns a new state; nothing is mutated and nothing
is read from the outside world. Because the result is persisted, a daemon, a one-shot
``tick()`` and every other instance sharing the store plan the same next run.

Rounding: the AIMD interval is kept in whole milliseconds and both steps round down with
integer arithmetic (``interval // 2`` after events, ``interval * 3 // 2`` when idle), so a
sequence of cycles is exact and reproducible: 5000, 7500, 11250, 16875, 25312, ...

Start to start: after a successful cycle the next run is planned from the moment its run
started (``started_at``), not from its end, so the time the run itself took (the store's
round trips, the vendor's answer) does not add up on top of the interval. The wait is also
kept :data:`PLANNING_ALLOWANCE_MS` under the top of its jitter band, because what a run
does before its first request leaves takes longer in some runs than in others.

Retry-After windows: a throttle sets ``next_due_at`` to the end of its window. Later
transitions never plan a run before a window that is still open (only :func:`trigger`
clears it), so :func:`is_due` needs to look at ``next_due_at`` alone.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from watukuy.model.errors import SerializedError
from watukuy.model.options import Circuit, Schedule
from watukuy.model.ports import Random
from watukuy.model.records import dataclass
from watukuy.model.rows import CircuitState, PollSummary, RateLimitInfo, ScheduleState

from ._timing import apply_jitter, backoff_delay, pacing_delay, throttle_wait

__all__ = [
    "PLANNING_ALLOWANCE_MS",
    "Reason",
    "Transition",
    "band_top",
    "begin_cycle",
    "initial_schedule",
    "is_due",
    "on_failure",
    "on_poison_halt",
    "on_success",
    "planned_top",
    "trigger",
]

PLANNING_ALLOWANCE_MS = 500
"""How far under the top of its jitter band a successful cycle plans the next run, in ms.

Between the start of a run and its first request the engine reads the key's state, takes
its lease, looks at its outbox and waits for a budget grant and a connection. Counting
intervals start to start cancels what that takes when it takes the same time in every run,
but not how much it varies from one run of a key to the next: on a busy SQLite file, with
thousands of tenants sharing a budget, the store's round trips alone vary a lot from one
run to the next, and when many tenants come due together the budget's grants, spaced
``per / requests`` apart, keep the last of them waiting longer still (with a smaller
allowance, a few requests still arrived past the band's top). A run planned exactly at
``interval * (1 + jitter)`` after the previous start could reach the vendor that much later
than the schedule promises; planned this much earlier it reaches it in time. Only the part
of the band above the nominal interval is shortened.
"""


def band_top(interval_ms: int, jitter: float) -> int:
    """The longest wait of an interval's jitter band, ``interval * (1 + jitter)``, in ms.

    Args:
        interval_ms: The nominal interval.
        jitter: The schedule's jitter fraction.

    Returns:
        The top of the band, rounded half up like :func:`~watukuy.scheduler.apply_jitter`.
    """
    return math.floor(interval_ms * (1 + jitter) + 0.5)


def planned_top(interval_ms: int, jitter: float) -> int:
    """The latest a run is planned after the previous start: the top of the jitter band
    less :data:`PLANNING_ALLOWANCE_MS`, never under the nominal interval.

    Args:
        interval_ms: The nominal interval.
        jitter: The schedule's jitter fraction.

    Returns:
        The latest planned wait in ms.
    """
    return max(interval_ms, band_top(interval_ms, jitter) - PLANNING_ALLOWANCE_MS)


Reason = Literal[
    "events:speed-up",
    "held",
    "idle:back-off",
    "not-modified",
    "fixed",
    "catch-up",
    "paced",
    "throttled",
    "backoff",
    "circuit-open",
    "probe-failed",
]
"""Why the schedule changed, as reported to ``on_schedule_change``.

- ``events:speed-up``: the cycle emitted events; the interval halved (not below ``min``).
- ``held``: the cycle held items back (``lag``, or stamped ahead of our clock); the interval
  stays, and the next run is when the first of them becomes deliverable (not before
  ``min`` after the cycle's start), unless the interval comes first.
- ``idle:back-off``: no events; the interval grew by half (not above ``max``).
- ``not-modified``: the API answered 304; idle, like ``idle:back-off``.
- ``fixed``: ``adaptive=False``; the interval stays at ``min``.
- ``catch-up``: the page cap stopped a cycle with more data waiting; due again now.
- ``paced``: rate-limit headers stretched the wait so the remaining requests last.
- ``throttled``: a throttle (``429``, ``503`` with ``Retry-After``, an exhausted budget)
  decides the wait: the ``Retry-After`` window within a growing floor and a ceiling.
- ``backoff``: a fetch failed; exponential backoff with full jitter.
- ``circuit-open``: too many consecutive failures (or a poison halt) opened the circuit.
- ``probe-failed``: a half-open probe failed; the circuit stays open until the next probe.
"""


@dataclass(frozen=True, slots=True)
class Transition:
    """The outcome of one scheduling decision.

    Attributes:
        state: The state to persist.
        reason: Why the next run is when it is.
        wait_ms: Milliseconds from the decision to the next run
            (``state.next_due_at - now``).
        circuit_opened: The circuit has just opened (fire ``on_circuit_open``).
        circuit_closed: An open or half-open circuit has just closed (fire
            ``on_circuit_close``).
    """

    state: ScheduleState
    reason: Reason
    wait_ms: int
    circuit_opened: bool = False
    circuit_closed: bool = False


def initial_schedule(schedule: Schedule, now: int) -> ScheduleState:
    """The schedule of a key seen for the first time: interval at ``min``, due now.

    Args:
        schedule: The poller's schedule options.
        now: Current time (epoch ms).

    Returns:
        A closed-circuit state with no history.
    """
    return ScheduleState(next_due_at=now, interval_ms=schedule.min_ms)


def on_success(
    state: ScheduleState,
    *,
    schedule: Schedule,
    circuit: Circuit,
    events: int,
    not_modified: bool,
    truncated: bool,
    rate_limit: RateLimitInfo | None,
    now: int,
    random: Random,
    summary: PollSummary | None = None,
    started_at: int | None = None,
    held_until: int | None = None,
) -> Transition:
    """Plan the next run after a live cycle that completed.

    The interval follows AIMD: events halve it (floored at ``min``), an idle or 304 cycle
    multiplies it by 1.5 (capped at ``max``), and ``adaptive=False`` pins it at ``min``. The
    wait is the jittered interval, or zero when the page cap truncated the cycle (catch-up,
    which leaves the interval as it was because a cut-short cycle says little about how
    often the data changes). Rate-limit pacing then stretches the wait when it asks for more,
    catch-up included, so draining a backlog never runs into a 429.

    With ``started_at`` the jittered interval counts from the start of the cycle, not from
    ``now``: the next run is due at ``max(now, started_at + wait)``, where ``wait`` is kept
    at most :func:`planned_top` (the top of the jitter band less
    :data:`PLANNING_ALLOWANCE_MS`). The interval is then the spacing of the cycles' starts,
    whatever each cycle took. ``wait_ms`` stays relative to ``now``.

    A cycle that held items back (``held_until``) is not idle: a change is waiting. Without
    events it keeps its interval, and the next run comes when the first held item becomes
    deliverable, never sooner than ``min`` after the cycle's start, if that is before the
    jittered interval (reason ``held``).

    A success also resets the failure count, closes the circuit, clears ``last_error`` and
    stores ``rate_limit``; a ``Retry-After`` window survives only while it is still open.

    Args:
        state: The current schedule.
        schedule: The poller's schedule options.
        circuit: The poller's circuit options (accepted for symmetry with
            :func:`on_failure`; a success closes the circuit whatever its options).
        events: Events the cycle emitted.
        not_modified: The API answered 304 Not Modified.
        truncated: The page cap stopped the cycle with more data available.
        rate_limit: Rate-limit headers of the last response, if any.
        now: Current time (epoch ms).
        random: Source of jitter.
        summary: The cycle's summary; when given it becomes ``last_poll`` and its
            ``started_at`` becomes ``last_poll_at``.
        started_at: When the cycle started (epoch ms); the interval counts from there.
            ``None`` counts it from ``now``.
        held_until: When the first item the cycle held back becomes deliverable (epoch
            ms), if it held any.

    Returns:
        The new state and why it waits as long as it does.
    """
    del circuit  # a success closes the circuit whatever its options say
    previous = _clamp(state.interval_ms, schedule)
    interval: int
    reason: Reason
    if not schedule.adaptive:
        interval, reason = schedule.min_ms, "fixed"
    elif truncated:
        interval, reason = previous, "catch-up"
    elif events > 0:
        interval, reason = max(schedule.min_ms, previous // 2), "events:speed-up"
    elif held_until is not None:
        interval, reason = previous, "held"
    else:
        interval = min(schedule.max_ms, previous * 3 // 2)
        reason = "not-modified" if not_modified else "idle:back-off"

    if truncated:
        wait, reason = 0, "catch-up"
    else:
        wait = apply_jitter(interval, schedule.jitter, random)
        if started_at is not None:
            # Start to start: what the cycle took since started_at is already waited.
            wait = min(wait, planned_top(interval, schedule.jitter))
            wait = max(0, min(started_at, now) + wait - now)
        if held_until is not None:
            start = now if started_at is None else min(started_at, now)
            held = max(held_until, start + schedule.min_ms) - now
            if held < wait:
                wait, reason = max(0, held), "held"
    pacing = pacing_delay(rate_limit, now)
    if pacing is not None:
        pacing = min(pacing, schedule.throttle_max_ms)
    if pacing is not None and pacing > wait:
        wait, reason = pacing, "paced"
    throttled_until = _open_window(state.throttled_until, now)
    if throttled_until is not None and now + wait < throttled_until:
        wait, reason = throttled_until - now, "throttled"

    next_state = dataclasses.replace(
        state,
        next_due_at=now + wait,
        interval_ms=interval,
        consecutive_failures=0,
        consecutive_throttles=0,
        circuit=CircuitState.CLOSED,
        circuit_opened_at=None,
        throttled_until=throttled_until,
        rate_limit=rate_limit,
        last_error=None,
    )
    if summary is not None:
        next_state = dataclasses.replace(
            next_state, last_poll=summary, last_poll_at=summary.started_at
        )
    return Transition(
        state=next_state,
        reason=reason,
        wait_ms=wait,
        circuit_closed=state.circuit is not CircuitState.CLOSED,
    )


def on_failure(
    state: ScheduleState,
    *,
    schedule: Schedule,
    circuit: Circuit,
    error: SerializedError,
    error_status: int | None = None,
    retry_after_ms: int | None = None,
    is_throttle: bool = False,
    now: int,
    random: Random,
) -> Transition:
    """Plan the next run after a live cycle that failed.

    A throttle (a 429, or a 503 with ``Retry-After``) is the API asking for time, not a
    failure: the key sleeps what :func:`~watukuy.scheduler.throttle_wait` allows, that is
    ``retry_after_ms`` raised to a floor that grows with every throttle in a row (so
    ``Retry-After: 0`` or no header at all cannot make a request loop) and capped by
    ``schedule.throttle_max``; the failure count and circuit are left alone.

    Any other error counts a failure. A failed probe (the circuit was not closed) reopens the
    circuit and waits for the next probe; reaching ``circuit.failures`` opens it; below that
    the key backs off exponentially with full jitter. The error is kept as ``last_error``.

    Args:
        state: The current schedule.
        schedule: The poller's schedule options (backoff, and ``max`` as the default
            probe interval).
        circuit: The poller's circuit options.
        error: The failure, serialised.
        error_status: HTTP status of the failure, when it was an HTTP answer; a 429, or a
            503 together with ``retry_after_ms``, is a throttle even if ``is_throttle`` is
            not set.
        retry_after_ms: The server's ``Retry-After``, in milliseconds.
        is_throttle: The failure is a throttle (see ``HttpError.is_throttle``).
        now: Current time (epoch ms).
        random: Source of backoff jitter.

    Returns:
        The new state, why it waits, and whether the circuit just opened.
    """
    throttled = (
        is_throttle or error_status == 429 or (error_status == 503 and retry_after_ms is not None)
    )
    if throttled:
        throttles = state.consecutive_throttles + 1
        wait = throttle_wait(throttles, retry_after_ms, schedule, random)
        until = now + wait
        next_state = dataclasses.replace(
            state,
            next_due_at=until,
            throttled_until=until,
            consecutive_throttles=throttles,
            last_error=error,
        )
        return Transition(state=next_state, reason="throttled", wait_ms=wait)

    failures = state.consecutive_failures + 1
    base = dataclasses.replace(
        state,
        consecutive_failures=failures,
        throttled_until=_open_window(state.throttled_until, now),
        last_error=error,
    )
    if state.circuit is not CircuitState.CLOSED:
        return _open(base, schedule, circuit, now, reason="probe-failed", opened=False)
    if failures >= circuit.failures:
        return _open(base, schedule, circuit, now, reason="circuit-open", opened=True)
    wait = _not_before(base, now, backoff_delay(failures, schedule.backoff, random))
    return Transition(
        state=dataclasses.replace(base, next_due_at=now + wait), reason="backoff", wait_ms=wait
    )


def on_poison_halt(
    state: ScheduleState,
    *,
    schedule: Schedule,
    circuit: Circuit,
    error: SerializedError,
    now: int,
) -> Transition:
    """Open the circuit because a poison event halted the poller.

    With ``delivery.poison.action="halt"`` a poison event stops the key until a probe: the
    circuit opens directly (the failure count is untouched) and ``last_error`` records why.

    Args:
        state: The current schedule.
        schedule: The poller's schedule options (``max`` is the default probe interval).
        circuit: The poller's circuit options.
        error: The halt, serialised; its ``name`` is ``"PoisonHalt"``.
        now: Current time (epoch ms).

    Returns:
        An open-circuit state due at the next probe. ``circuit_opened`` is set unless the
        circuit was already open or half-open.
    """
    base = dataclasses.replace(
        state,
        throttled_until=_open_window(state.throttled_until, now),
        last_error=error,
    )
    return _open(
        base,
        schedule,
        circuit,
        now,
        reason="circuit-open",
        opened=state.circuit is CircuitState.CLOSED,
    )


def is_due(state: ScheduleState, now: int) -> bool:
    """Whether the live lane should run now.

    Args:
        state: The current schedule.
        now: Current time (epoch ms).

    Returns:
        ``True`` when ``next_due_at`` is unset or has passed.
    """
    return state.next_due_at is None or state.next_due_at <= now


def begin_cycle(state: ScheduleState, now: int) -> ScheduleState:
    """Mark the start of a live run: an open circuit whose probe time has come goes
    half-open, making this run the probe.

    Args:
        state: The current schedule.
        now: Current time (epoch ms).

    Returns:
        The half-open state, or ``state`` itself when nothing changes.
    """
    if state.circuit is CircuitState.OPEN and is_due(state, now):
        return dataclasses.replace(state, circuit=CircuitState.HALF_OPEN)
    return state


def trigger(state: ScheduleState, now: int) -> ScheduleState:
    """Make the key due now (``engine.trigger()``).

    A pending ``Retry-After`` window is dropped, and an open circuit goes half-open so the
    forced run is a probe.

    Args:
        state: The current schedule.
        now: Current time (epoch ms).

    Returns:
        The new state.
    """
    circuit = CircuitState.HALF_OPEN if state.circuit is CircuitState.OPEN else state.circuit
    return dataclasses.replace(state, next_due_at=now, throttled_until=None, circuit=circuit)


def _clamp(interval_ms: int | None, schedule: Schedule) -> int:
    # A missing interval, or one stored under older options, restarts inside the new range.
    if interval_ms is None:
        return schedule.min_ms
    return min(schedule.max_ms, max(schedule.min_ms, interval_ms))


def _open_window(throttled_until: int | None, now: int) -> int | None:
    return throttled_until if throttled_until is not None and throttled_until > now else None


def _not_before(state: ScheduleState, now: int, wait: int) -> int:
    # Keeps the invariant that lets is_due ignore throttled_until.
    if state.throttled_until is not None:
        return max(wait, state.throttled_until - now)
    return wait


def _open(
    state: ScheduleState,
    schedule: Schedule,
    circuit: Circuit,
    now: int,
    *,
    reason: Reason,
    opened: bool,
) -> Transition:
    probe_every = circuit.probe_every_ms if circuit.probe_every_ms is not None else schedule.max_ms
    wait = _not_before(state, now, probe_every)
    next_state = dataclasses.replace(
        state, circuit=CircuitState.OPEN, circuit_opened_at=now, next_due_at=now + wait
    )
    return Transition(state=next_state, reason=reason, wait_ms=wait, circuit_opened=opened)
