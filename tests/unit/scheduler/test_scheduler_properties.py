"""Properties of the scheduler over arbitrary options, outcomes and randomness."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.model.errors import SerializedError
from watukuy.model.options import Backoff, Circuit, Schedule
from watukuy.model.rows import CircuitState, RateLimitInfo
from watukuy.scheduler import (
    apply_jitter,
    backoff_ceiling,
    backoff_delay,
    begin_cycle,
    initial_schedule,
    on_failure,
    on_poison_halt,
    on_success,
    pacing_delay,
    trigger,
)

START = 1_700_000_000_000
ERROR: SerializedError = {"name": "HttpError", "message": "boom", "status": 500}

unit_floats = st.floats(min_value=0, max_value=1, exclude_max=True)


@dataclass
class CyclingRandom:
    """Replays drawn floats in a loop."""

    values: list[float]
    index: int = field(default=0)

    def random(self) -> float:
        value = self.values[self.index % len(self.values)]
        self.index += 1
        return value


@st.composite
def options(draw: st.DrawFn) -> tuple[Schedule, Circuit]:
    min_ms = draw(st.integers(1, 120_000))
    max_ms = min_ms + draw(st.integers(0, 3_600_000))
    base_ms = draw(st.integers(0, 60_000))
    backoff = Backoff(
        base=f"{base_ms}ms",
        factor=draw(st.floats(1, 10)),
        max=f"{base_ms + draw(st.integers(0, 3_600_000))}ms",
    )
    schedule = Schedule(
        min=f"{min_ms}ms",
        max=f"{max_ms}ms",
        adaptive=draw(st.booleans()),
        jitter=draw(st.floats(0, 1)),
        backoff=backoff,
    )
    probe = draw(st.none() | st.integers(0, 3_600_000).map(lambda ms: f"{ms}ms"))
    circuit = Circuit(failures=draw(st.integers(1, 8)), probe_every=probe)
    return schedule, circuit


rate_limits = st.none() | st.builds(
    RateLimitInfo,
    remaining=st.none() | st.integers(-5, 1_000),
    reset_at=st.none() | st.integers(START - 60_000, START + 10_000_000),
)

steps = st.one_of(
    st.tuples(
        st.just("success"),
        st.integers(0, 50),
        st.booleans(),
        st.booleans(),
        rate_limits,
    ),
    st.tuples(
        st.just("failure"),
        st.sampled_from([None, 400, 429, 500, 503]),
        st.none() | st.integers(-1_000, 600_000),
        st.booleans(),
    ),
    st.tuples(st.just("halt")),
    st.tuples(st.just("trigger")),
)


@settings(max_examples=300, deadline=None)
@given(
    config=options(),
    draws=st.lists(unit_floats, min_size=1, max_size=20),
    plan=st.lists(st.tuples(steps, st.integers(0, 5_000_000), st.booleans()), max_size=40),
)
def test_waits_and_intervals_stay_in_bounds(config, draws, plan):
    schedule, circuit = config
    random = CyclingRandom(draws)
    probe_every = circuit.probe_every_ms if circuit.probe_every_ms is not None else schedule.max_ms
    jittered_max = math.ceil(schedule.max_ms * (1 + schedule.jitter))
    now = START
    state = initial_schedule(schedule, now)
    for step, advance, jump_to_due in plan:
        now += advance
        if jump_to_due and state.next_due_at is not None:
            now = max(now, state.next_due_at)
        state = begin_cycle(state, now)
        open_window = max(0, (state.throttled_until or 0) - now)
        extra = 0
        kind = step[0]
        if kind == "success":
            _, events, not_modified, truncated, rate_limit = step
            extra = pacing_delay(rate_limit, now) or 0
            t = on_success(
                state,
                schedule=schedule,
                circuit=circuit,
                events=events,
                not_modified=not_modified,
                truncated=truncated,
                rate_limit=rate_limit,
                now=now,
                random=random,
            )
            assert t.state.consecutive_failures == 0
            assert t.state.circuit is CircuitState.CLOSED
            assert t.state.last_error is None
            assert t.circuit_closed is (state.circuit is not CircuitState.CLOSED)
        elif kind == "failure":
            _, status, retry_after, flagged = step
            extra = max(0, retry_after or 0)
            t = on_failure(
                state,
                schedule=schedule,
                circuit=circuit,
                error=ERROR,
                error_status=status,
                retry_after_ms=retry_after,
                is_throttle=flagged,
                now=now,
                random=random,
            )
            if t.reason == "throttled":
                assert t.state.consecutive_failures == state.consecutive_failures
                assert t.state.circuit is state.circuit
            else:
                assert t.state.consecutive_failures == state.consecutive_failures + 1
                assert t.state.circuit is CircuitState.OPEN or t.reason == "backoff"
            assert t.state.last_error == ERROR
        elif kind == "halt":
            t = on_poison_halt(state, schedule=schedule, circuit=circuit, error=ERROR, now=now)
            assert t.state.circuit is CircuitState.OPEN
        else:
            state = trigger(state, now)
            assert state.next_due_at == now
            assert state.circuit is not CircuitState.OPEN
            continue

        bound = max(jittered_max, extra, probe_every, schedule.backoff.max_ms, open_window)
        assert t.wait_ms == t.state.next_due_at - now
        assert 0 <= t.wait_ms <= bound
        assert t.state.interval_ms is not None
        assert schedule.min_ms <= t.state.interval_ms <= schedule.max_ms
        if not schedule.adaptive:
            assert t.state.interval_ms == schedule.min_ms
        # a Retry-After window that is still open is never cut short
        if t.state.throttled_until is not None:
            assert t.state.next_due_at >= t.state.throttled_until
        state = t.state


@given(ms=st.integers(0, 10**9), fraction=st.floats(0, 1), draw=unit_floats)
def test_jitter_stays_within_the_symmetric_range(ms, fraction, draw):
    class Fixed:
        def random(self) -> float:
            return draw

    value = apply_jitter(ms, fraction, Fixed())
    assert math.floor(ms * (1 - fraction)) <= value <= math.ceil(ms * (1 + fraction))


@given(
    attempt=st.integers(1, 10_000),
    base_ms=st.integers(0, 100_000),
    extra_ms=st.integers(0, 10**7),
    factor=st.floats(1, 100),
    draw=unit_floats,
)
def test_backoff_delay_is_between_zero_and_a_capped_ceiling(
    attempt, base_ms, extra_ms, factor, draw
):
    backoff = Backoff(base=f"{base_ms}ms", factor=factor, max=f"{base_ms + extra_ms}ms")

    class Fixed:
        def random(self) -> float:
            return draw

    ceiling = backoff_ceiling(attempt, backoff)
    assert min(base_ms, backoff.max_ms) <= ceiling <= backoff.max_ms
    assert 0 <= backoff_delay(attempt, backoff, Fixed()) <= ceiling


@given(remaining=st.integers(-10, 10_000), window=st.integers(1, 10**8))
def test_pacing_spreads_the_window_over_the_remaining_requests(remaining, window):
    delay = pacing_delay(RateLimitInfo(remaining=remaining, reset_at=START + window), START)
    assert delay is not None
    share = max(remaining, 1)
    assert delay * share >= window
    assert (delay - 1) * share < window


def test_backoff_ceiling_caps_a_product_that_overflows_to_infinity():
    # 94.0 ** 156 is still a finite float; times the base it is not.
    backoff = Backoff(base="3ms", factor=94.0, max="3ms")
    assert backoff_ceiling(157, backoff) == 3
    assert backoff_ceiling(157, Backoff(base="3ms", factor=94.0, max="1h")) == 3_600_000
