"""Transitions of the schedule state: AIMD, catch-up, pacing, throttle, backoff, circuit."""

from __future__ import annotations

import dataclasses

import pytest

from watukuy.model.errors import ConfigError, SerializedError
from watukuy.model.options import Circuit, Schedule
from watukuy.model.rows import CircuitState, EventCounts, PollSummary, RateLimitInfo, ScheduleState
from watukuy.scheduler import (
    PLANNING_ALLOWANCE_MS,
    Transition,
    begin_cycle,
    initial_schedule,
    is_due,
    on_failure,
    on_poison_halt,
    on_success,
    planned_top,
    trigger,
)

FIVE_SECONDS_TO_FIVE_MINUTES = Schedule(min="5s", max="5m", jitter=0)


def succeed(
    state,
    schedule,
    now,
    random,
    *,
    circuit=None,
    events=0,
    not_modified=False,
    truncated=False,
    rate_limit=None,
    summary=None,
    started_at=None,
    held_until=None,
) -> Transition:
    return on_success(
        state,
        schedule=schedule,
        circuit=circuit or Circuit(),
        events=events,
        not_modified=not_modified,
        truncated=truncated,
        rate_limit=rate_limit,
        now=now,
        random=random,
        summary=summary,
        started_at=started_at,
        held_until=held_until,
    )


def fail(state, schedule, circuit, now, random, error, **kwargs) -> Transition:
    return on_failure(
        state, schedule=schedule, circuit=circuit, error=error, now=now, random=random, **kwargs
    )


def test_initial_schedule_starts_at_min_and_is_due_now(plain, now):
    state = initial_schedule(plain, now)
    assert state == ScheduleState(next_due_at=now, interval_ms=1_000)
    assert state.circuit is CircuitState.CLOSED
    assert state.consecutive_failures == 0
    assert is_due(state, now)
    assert not is_due(state, now - 1)


class TestAimd:
    def test_idle_cycles_grow_by_half_rounding_down_and_cap_at_max(self, scripted, now):
        state = initial_schedule(FIVE_SECONDS_TO_FIVE_MINUTES, now)
        intervals, waits, reasons = [state.interval_ms], [], set()
        for _ in range(12):
            t = succeed(state, FIVE_SECONDS_TO_FIVE_MINUTES, now, scripted())
            state = t.state
            intervals.append(state.interval_ms)
            waits.append(t.wait_ms)
            reasons.add(t.reason)
        assert intervals == [
            5_000, 7_500, 11_250, 16_875, 25_312, 37_968, 56_952,
            85_428, 128_142, 192_213, 288_319, 300_000, 300_000,
        ]  # fmt: skip
        assert waits == intervals[1:]
        assert reasons == {"idle:back-off"}

    def test_events_halve_toward_min_and_floor_there(self, scripted, now):
        state = ScheduleState(interval_ms=300_000)
        intervals = []
        for _ in range(7):
            t = succeed(state, FIVE_SECONDS_TO_FIVE_MINUTES, now, scripted(), events=3)
            assert t.reason == "events:speed-up"
            state = t.state
            intervals.append(state.interval_ms)
        assert intervals == [150_000, 75_000, 37_500, 18_750, 9_375, 5_000, 5_000]
        assert state.next_due_at == now + 5_000

    def test_not_modified_is_idle_with_its_own_reason(self, scripted, now):
        t = succeed(
            ScheduleState(interval_ms=2_000),
            FIVE_SECONDS_TO_FIVE_MINUTES,
            now,
            scripted(),
            not_modified=True,
        )
        assert (t.state.interval_ms, t.reason, t.wait_ms) == (7_500, "not-modified", 7_500)
        t = succeed(
            ScheduleState(interval_ms=10_000),
            FIVE_SECONDS_TO_FIVE_MINUTES,
            now,
            scripted(),
            not_modified=True,
        )
        assert (t.state.interval_ms, t.reason) == (15_000, "not-modified")

    def test_a_cycle_that_held_items_is_not_idle_and_plans_for_the_first_of_them(
        self, scripted, now
    ):
        def held(state, *, held_until, at=now):
            default = Schedule(jitter=0)  # 30 s .. 5 min
            return succeed(state, default, at, scripted(), started_at=now, held_until=held_until)

        after_three_idle = ScheduleState(interval_ms=101_250)
        t = held(after_three_idle, held_until=now + 42_000, at=now + 200)
        assert (t.reason, t.state.interval_ms) == ("held", 101_250)  # no back-off
        assert t.state.next_due_at == now + 42_000
        # Never sooner than min after the cycle's start...
        t = held(after_three_idle, held_until=now + 1_000)
        assert (t.reason, t.state.next_due_at) == ("held", now + 30_000)
        # ...and never later than the interval would have come anyway.
        t = held(ScheduleState(interval_ms=30_000), held_until=now + 400_000)
        assert (t.reason, t.state.interval_ms, t.wait_ms) == ("held", 30_000, 30_000)

    def test_adaptive_false_pins_min(self, scripted, now):
        fixed = Schedule(min="5s", max="5m", jitter=0, adaptive=False)
        state = ScheduleState(interval_ms=40_000)
        for events in (0, 5, 0):
            t = succeed(state, fixed, now, scripted(), events=events)
            assert (t.state.interval_ms, t.wait_ms, t.reason) == (5_000, 5_000, "fixed")
            state = t.state

    def test_missing_or_out_of_range_interval_restarts_inside_the_range(self, plain, scripted, now):
        assert succeed(ScheduleState(), plain, now, scripted()).state.interval_ms == 1_500
        assert (
            succeed(ScheduleState(interval_ms=10), plain, now, scripted()).state.interval_ms
            == 1_500
        )
        huge = succeed(ScheduleState(interval_ms=500_000), plain, now, scripted(), events=1)
        assert huge.state.interval_ms == 30_000

    def test_jitter_applies_to_the_wait_not_the_interval(self, scripted, now):
        jittery = Schedule(min="1s", max="1m", jitter=0.1)
        state = ScheduleState(interval_ms=4_000)
        low = succeed(state, jittery, now, scripted(0.0))
        high = succeed(state, jittery, now, scripted(0.999_999_999))
        middle = succeed(state, jittery, now, scripted(0.5))
        assert [low.wait_ms, middle.wait_ms, high.wait_ms] == [5_400, 6_000, 6_600]
        assert {low.state.interval_ms, middle.state.interval_ms, high.state.interval_ms} == {6_000}
        assert low.state.next_due_at == now + 5_400


class TestStartToStart:
    """With ``started_at`` the interval counts from the start of the cycle."""

    def test_what_the_cycle_took_is_not_added_to_the_interval(self, plain, scripted, now):
        # 1 s grows to 1.5 s; the cycle started 400 ms ago, so 1.1 s are left to wait.
        t = succeed(ScheduleState(interval_ms=1_000), plain, now, scripted(), started_at=now - 400)
        assert (t.state.interval_ms, t.reason) == (1_500, "idle:back-off")
        assert (t.wait_ms, t.state.next_due_at) == (1_100, now + 1_100)

    def test_a_cycle_longer_than_the_interval_is_due_again_at_once(self, plain, scripted, now):
        t = succeed(
            ScheduleState(interval_ms=1_000), plain, now, scripted(), started_at=now - 9_000
        )
        assert (t.wait_ms, t.state.next_due_at) == (0, now)

    def test_the_top_of_the_band_keeps_the_planning_allowance(self, scripted, now):
        band = Schedule(min="10s", max="30s", jitter=0.1)
        started = now - 100
        top = succeed(
            ScheduleState(interval_ms=30_000),
            band,
            now,
            scripted(0.999_999_999),
            started_at=started,
        )
        # 30 s x 1.1 = 33 s after the start, less the allowance, so that the store round
        # trips of the next run before its request still fit under 33 s.
        assert PLANNING_ALLOWANCE_MS == 500
        assert top.state.next_due_at == started + 33_000 - PLANNING_ALLOWANCE_MS
        assert top.wait_ms == 33_000 - PLANNING_ALLOWANCE_MS - 100
        # The rest of the band is not touched: the bottom and the middle draw as before.
        low = succeed(ScheduleState(interval_ms=30_000), band, now, scripted(0.0), started_at=now)
        mid = succeed(ScheduleState(interval_ms=30_000), band, now, scripted(0.5), started_at=now)
        assert (low.wait_ms, mid.wait_ms) == (27_000, 30_000)

    def test_the_allowance_never_cuts_under_the_nominal_interval(self, scripted, now):
        narrow = Schedule(min="100ms", max="100ms", jitter=0.2)
        t = succeed(ScheduleState(), narrow, now, scripted(0.999_999_999), started_at=now)
        assert t.wait_ms == 100
        assert planned_top(100, 0.2) == 100
        assert planned_top(30_000, 0.1) == 32_500
        assert planned_top(30_000, 0) == 30_000

    def test_pacing_and_catch_up_still_count_from_now(self, plain, scripted, now):
        rate_limit = RateLimitInfo(remaining=0, reset_at=now + 5_000, source="ietf")
        paced = succeed(
            ScheduleState(interval_ms=1_000),
            plain,
            now,
            scripted(),
            rate_limit=rate_limit,
            started_at=now - 3_000,
        )
        assert (paced.reason, paced.wait_ms, paced.state.next_due_at) == (
            "paced",
            5_000,
            now + 5_000,
        )
        caught = succeed(
            ScheduleState(interval_ms=1_000),
            plain,
            now,
            scripted(),
            truncated=True,
            started_at=now - 3_000,
        )
        assert (caught.reason, caught.state.next_due_at) == ("catch-up", now)


class TestCatchUp:
    def test_truncated_cycle_is_due_now_and_keeps_the_interval(self, scripted, now):
        jittery = Schedule(min="1s", max="1m", jitter=0.1)
        random = scripted()
        t = succeed(
            ScheduleState(interval_ms=8_000), jittery, now, random, events=40, truncated=True
        )
        assert (t.reason, t.wait_ms, t.state.next_due_at) == ("catch-up", 0, now)
        assert t.state.interval_ms == 8_000
        assert random.draws == 0
        assert is_due(t.state, now)

    def test_truncated_without_adaptive_keeps_min(self, scripted, now):
        fixed = Schedule(min="2s", max="1m", adaptive=False)
        t = succeed(ScheduleState(interval_ms=8_000), fixed, now, scripted(), truncated=True)
        assert (t.reason, t.wait_ms, t.state.interval_ms) == ("catch-up", 0, 2_000)

    def test_catch_up_still_honours_pacing(self, plain, scripted, now):
        rate_limit = RateLimitInfo(remaining=0, reset_at=now + 5_000, source="ietf")
        t = succeed(
            ScheduleState(interval_ms=8_000),
            plain,
            now,
            scripted(),
            truncated=True,
            rate_limit=rate_limit,
        )
        assert (t.reason, t.wait_ms, t.state.next_due_at) == ("paced", 5_000, now + 5_000)
        assert t.state.interval_ms == 8_000
        assert t.state.rate_limit == rate_limit

    def test_catch_up_with_ample_budget_is_not_paced(self, plain, scripted, now):
        rate_limit = RateLimitInfo(remaining=60, reset_at=now + 60_000)
        t = succeed(
            ScheduleState(interval_ms=8_000),
            plain,
            now,
            scripted(),
            truncated=True,
            rate_limit=rate_limit,
        )
        # pacing asks for 1000ms between requests: catch-up waits exactly that
        assert (t.reason, t.wait_ms) == ("paced", 1_000)


class TestPacingOnSuccess:
    def test_pacing_stretches_the_wait_without_jitter(self, scripted, now):
        jittery = Schedule(min="1s", max="1m", jitter=0.1)
        random = scripted(0.999_999_999)
        rate_limit = RateLimitInfo(remaining=10, reset_at=now + 60_000)
        t = succeed(ScheduleState(interval_ms=1_000), jittery, now, random, rate_limit=rate_limit)
        assert (t.reason, t.wait_ms, t.state.interval_ms) == ("paced", 6_000, 1_500)

    def test_pacing_shorter_than_the_wait_changes_nothing(self, plain, scripted, now):
        rate_limit = RateLimitInfo(remaining=100, reset_at=now + 60_000)
        t = succeed(ScheduleState(interval_ms=1_000), plain, now, scripted(), rate_limit=rate_limit)
        assert (t.reason, t.wait_ms) == ("idle:back-off", 1_500)

    def test_a_past_reset_does_not_pace(self, plain, scripted, now):
        rate_limit = RateLimitInfo(remaining=0, reset_at=now - 1)
        t = succeed(
            ScheduleState(interval_ms=1_000),
            plain,
            now,
            scripted(),
            events=2,
            rate_limit=rate_limit,
        )
        assert (t.reason, t.wait_ms) == ("events:speed-up", 1_000)


class TestSuccessBookkeeping:
    def test_resets_failures_closes_the_circuit_and_clears_the_error(
        self, plain, scripted, now, error
    ):
        before = ScheduleState(
            interval_ms=2_000,
            consecutive_failures=4,
            circuit=CircuitState.HALF_OPEN,
            circuit_opened_at=now - 90_000,
            throttled_until=now - 1,
            last_error=error,
        )
        t = succeed(before, plain, now, scripted(), events=1)
        assert t.circuit_closed is True
        assert t.circuit_opened is False
        assert t.state.consecutive_failures == 0
        assert t.state.circuit is CircuitState.CLOSED
        assert t.state.circuit_opened_at is None
        assert t.state.throttled_until is None
        assert t.state.last_error is None
        assert t.state.next_due_at == now + 1_000

    def test_circuit_closed_is_false_when_it_was_closed(self, plain, scripted, now):
        t = succeed(ScheduleState(interval_ms=2_000), plain, now, scripted())
        assert t.circuit_closed is False

    def test_an_open_retry_after_window_survives_and_bounds_the_wait(self, plain, scripted, now):
        before = ScheduleState(interval_ms=1_000, throttled_until=now + 20_000)
        t = succeed(before, plain, now, scripted())
        assert t.state.throttled_until == now + 20_000
        assert (t.reason, t.wait_ms, t.state.next_due_at) == ("throttled", 20_000, now + 20_000)

    def test_a_retry_after_window_shorter_than_the_wait_is_kept_but_moot(
        self, plain, scripted, now
    ):
        before = ScheduleState(interval_ms=4_000, throttled_until=now + 100)
        t = succeed(before, plain, now, scripted())
        assert t.state.throttled_until == now + 100
        assert (t.reason, t.wait_ms) == ("idle:back-off", 6_000)

    def test_records_the_summary_and_the_rate_limit(self, plain, scripted, now):
        summary = PollSummary(
            lane="live",
            started_at=now - 250,
            duration_ms=250,
            pages=2,
            items=7,
            events=EventCounts(created=2, updated=1),
        )
        rate_limit = RateLimitInfo(limit=100, remaining=90, reset_at=now - 1, source="legacy")
        t = succeed(
            ScheduleState(interval_ms=1_000),
            plain,
            now,
            scripted(),
            events=3,
            summary=summary,
            rate_limit=rate_limit,
        )
        assert t.state.last_poll == summary
        assert t.state.last_poll_at == now - 250
        assert t.state.rate_limit == rate_limit

    def test_without_a_summary_the_last_poll_is_kept(self, plain, scripted, now):
        summary = PollSummary(lane="live", started_at=now - 10_000)
        before = ScheduleState(
            interval_ms=1_000,
            last_poll=summary,
            last_poll_at=now - 10_000,
            rate_limit=RateLimitInfo(remaining=1),
        )
        t = succeed(before, plain, now, scripted())
        assert (t.state.last_poll, t.state.last_poll_at) == (summary, now - 10_000)
        assert t.state.rate_limit is None


class TestThrottle:
    def test_waits_exactly_retry_after_without_counting_a_failure(
        self, plain, circuit, scripted, now, error
    ):
        before = ScheduleState(interval_ms=2_000, consecutive_failures=2, next_due_at=now)
        random = scripted()
        t = fail(
            before,
            plain,
            circuit,
            now,
            random,
            error,
            error_status=429,
            retry_after_ms=7_000,
            is_throttle=True,
        )
        assert (t.reason, t.wait_ms) == ("throttled", 7_000)
        assert t.state.next_due_at == now + 7_000
        assert t.state.throttled_until == now + 7_000
        assert t.state.consecutive_failures == 2
        assert t.state.circuit is CircuitState.CLOSED
        assert t.state.interval_ms == 2_000
        assert t.state.last_error == error
        assert (t.circuit_opened, t.circuit_closed) == (False, False)
        assert random.draws == 0
        assert not is_due(t.state, now + 6_999)
        assert is_due(t.state, now + 7_000)

    def test_a_throttle_never_opens_the_circuit(self, plain, circuit, scripted, now, error):
        state = ScheduleState(interval_ms=1_000)
        for _ in range(circuit.failures * 3):
            t = fail(
                state,
                plain,
                circuit,
                now,
                scripted(),
                error,
                is_throttle=True,
                retry_after_ms=1_000,
            )
            state = t.state
        assert state.circuit is CircuitState.CLOSED
        assert state.consecutive_failures == 0

    def test_leaves_a_half_open_circuit_alone(self, plain, circuit, scripted, now, error):
        before = ScheduleState(
            interval_ms=2_000,
            circuit=CircuitState.HALF_OPEN,
            circuit_opened_at=now - 30_000,
            consecutive_failures=3,
        )
        t = fail(
            before, plain, circuit, now, scripted(), error, is_throttle=True, retry_after_ms=3_000
        )
        assert t.state.circuit is CircuitState.HALF_OPEN
        assert t.state.circuit_opened_at == now - 30_000
        assert t.state.consecutive_failures == 3

    def test_status_429_is_a_throttle_even_unflagged(self, plain, circuit, scripted, now, error):
        t = fail(
            ScheduleState(),
            plain,
            circuit,
            now,
            scripted(),
            error,
            error_status=429,
            retry_after_ms=2_500,
        )
        assert (t.reason, t.wait_ms, t.state.consecutive_failures) == ("throttled", 2_500, 0)

    def test_503_is_a_throttle_only_with_retry_after(self, plain, circuit, scripted, now, error):
        with_header = fail(
            ScheduleState(),
            plain,
            circuit,
            now,
            scripted(),
            error,
            error_status=503,
            retry_after_ms=4_000,
        )
        assert (with_header.reason, with_header.wait_ms) == ("throttled", 4_000)
        without = fail(ScheduleState(), plain, circuit, now, scripted(0.5), error, error_status=503)
        assert (without.reason, without.wait_ms) == ("backoff", 500)
        assert without.state.consecutive_failures == 1

    def test_missing_retry_after_waits_the_floor_of_the_throttles_in_a_row(
        self, plain, circuit, scripted, now, error
    ):
        before = ScheduleState(interval_ms=2_000, consecutive_failures=2, consecutive_throttles=2)
        random = scripted()
        t = fail(before, plain, circuit, now, random, error, error_status=429)
        # throttle 3 in a row, backoff 1s x2: 4000ms (plain has no jitter: no draw)
        assert (t.reason, t.wait_ms, t.state.throttled_until) == ("throttled", 4_000, now + 4_000)
        assert t.state.consecutive_throttles == 3
        assert t.state.consecutive_failures == 2
        assert random.draws == 0

    def test_negative_retry_after_waits_the_floor(self, plain, circuit, scripted, now, error):
        t = fail(
            ScheduleState(),
            plain,
            circuit,
            now,
            scripted(),
            error,
            is_throttle=True,
            retry_after_ms=-50,
        )
        assert (t.wait_ms, t.state.next_due_at, t.state.throttled_until) == (
            1_000,
            now + 1_000,
            now + 1_000,
        )

    def test_retry_after_zero_again_and_again_grows_the_wait(
        self, plain, circuit, scripted, now, error
    ):
        state, waits = ScheduleState(interval_ms=1_000), []
        for _ in range(7):
            t = fail(
                state, plain, circuit, now, scripted(), error, error_status=429, retry_after_ms=0
            )
            waits.append(t.wait_ms)
            state = t.state
        # the backoff ceiling of each throttle in a row: 1s, 2s, 4s, 8s, then backoff.max
        assert waits == [1_000, 2_000, 4_000, 8_000, 10_000, 10_000, 10_000]
        assert (state.consecutive_failures, state.circuit) == (0, CircuitState.CLOSED)
        after = succeed(state, plain, now + 10_000, scripted())
        assert after.state.consecutive_throttles == 0

    def test_the_floor_is_jittered(self, circuit, scripted, now, error):
        jittery = Schedule(min="1s", max="60s", jitter=0.1)
        low = fail(ScheduleState(), jittery, circuit, now, scripted(0.0), error, error_status=429)
        high = fail(
            ScheduleState(), jittery, circuit, now, scripted(0.999), error, error_status=429
        )
        assert (low.wait_ms, high.wait_ms) == (900, 1_100)

    def test_a_far_future_retry_after_is_capped_at_schedule_max(
        self, plain, circuit, scripted, now, error
    ):
        year_9999 = 253_402_300_799_000 - now
        t = fail(
            ScheduleState(),
            plain,
            circuit,
            now,
            scripted(),
            error,
            error_status=429,
            retry_after_ms=year_9999,
        )
        assert (t.reason, t.wait_ms, t.state.next_due_at) == ("throttled", 60_000, now + 60_000)
        huge = fail(
            ScheduleState(),
            plain,
            circuit,
            now,
            scripted(),
            error,
            error_status=429,
            retry_after_ms=2**80,
        )
        assert huge.wait_ms == 60_000

    def test_throttle_max_sets_the_ceiling(self, circuit, scripted, now, error):
        schedule = Schedule(min="1s", max="1m", jitter=0, throttle_max="10m")
        t = fail(
            ScheduleState(),
            schedule,
            circuit,
            now,
            scripted(),
            error,
            error_status=429,
            retry_after_ms=3_600_000,
        )
        assert t.wait_ms == 600_000
        assert Schedule(max="3d").throttle_max_ms == 86_400_000
        assert Schedule(max="1m").throttle_max_ms == 60_000
        for bad in ("2d", "0s"):
            with pytest.raises(ConfigError) as caught:
                Schedule(throttle_max=bad)
            assert caught.value.field == "schedule.throttle_max"

    def test_pacing_is_capped_at_the_ceiling(self, plain, scripted, now):
        far = RateLimitInfo(remaining=0, reset_at=now + 10 * 86_400_000, source="ietf")
        t = on_success(
            ScheduleState(interval_ms=1_000),
            schedule=plain,
            circuit=Circuit(),
            events=0,
            not_modified=False,
            truncated=False,
            rate_limit=far,
            now=now,
            random=scripted(),
        )
        assert (t.reason, t.wait_ms) == ("paced", 60_000)


class TestFailuresAndCircuit:
    def test_backoff_grows_per_failure_with_full_jitter(self, plain, circuit, scripted, now, error):
        first = fail(
            ScheduleState(interval_ms=2_000),
            plain,
            circuit,
            now,
            scripted(0.5),
            error,
            error_status=500,
        )
        assert (first.reason, first.wait_ms, first.state.consecutive_failures) == (
            "backoff",
            500,
            1,
        )
        assert first.state.next_due_at == now + 500
        assert first.state.last_error == error
        assert first.state.interval_ms == 2_000
        second = fail(first.state, plain, circuit, now, scripted(0.999_999_999), error)
        assert (second.reason, second.wait_ms) == ("backoff", 2_000)
        assert second.circuit_opened is False
        assert second.state.circuit is CircuitState.CLOSED

    def test_five_failures_open_the_default_circuit(self, scripted, now, error):
        schedule = Schedule(min="5s", max="5m", jitter=0)
        default = Circuit()
        state = initial_schedule(schedule, now)
        waits = []
        for _ in range(4):
            t = fail(state, schedule, default, now, scripted(0.5), error)
            assert (t.reason, t.circuit_opened) == ("backoff", False)
            waits.append(t.wait_ms)
            state = t.state
        assert waits == [500, 1_000, 2_000, 4_000]
        t = fail(state, schedule, default, now, scripted(), error)
        assert (t.reason, t.circuit_opened, t.circuit_closed) == ("circuit-open", True, False)
        assert t.state.circuit is CircuitState.OPEN
        assert t.state.circuit_opened_at == now
        assert t.state.consecutive_failures == 5
        # probe_every defaults to schedule.max
        assert (t.wait_ms, t.state.next_due_at) == (300_000, now + 300_000)

    def test_probe_every_sets_the_probe_time(self, plain, circuit, scripted, now, error):
        state = ScheduleState(interval_ms=1_000, consecutive_failures=2)
        t = fail(state, plain, circuit, now, scripted(), error)
        assert (t.reason, t.wait_ms) == ("circuit-open", 30_000)
        assert not is_due(t.state, now + 29_999)
        assert is_due(t.state, now + 30_000)

    def test_probe_success_closes_the_circuit(self, plain, circuit, scripted, now, error):
        opened = ScheduleState(
            interval_ms=4_000,
            consecutive_failures=3,
            circuit=CircuitState.OPEN,
            circuit_opened_at=now,
            next_due_at=now + 30_000,
            last_error=error,
        )
        probing = begin_cycle(opened, now + 30_000)
        assert probing.circuit is CircuitState.HALF_OPEN
        t = succeed(probing, plain, now + 30_000, scripted())
        assert (t.circuit_closed, t.circuit_opened) == (True, False)
        assert t.state.circuit is CircuitState.CLOSED
        assert t.state.circuit_opened_at is None
        assert t.state.consecutive_failures == 0
        assert t.state.last_error is None
        assert (t.reason, t.wait_ms) == ("idle:back-off", 6_000)

    def test_probe_failure_reopens_until_the_next_probe(self, plain, circuit, scripted, now, error):
        opened = ScheduleState(
            interval_ms=4_000,
            consecutive_failures=3,
            circuit=CircuitState.OPEN,
            circuit_opened_at=now,
            next_due_at=now + 30_000,
        )
        later = now + 30_000
        probing = begin_cycle(opened, later)
        random = scripted()
        t = fail(probing, plain, circuit, later, random, error, error_status=502)
        assert (t.reason, t.circuit_opened, t.circuit_closed) == ("probe-failed", False, False)
        assert t.state.circuit is CircuitState.OPEN
        assert t.state.circuit_opened_at == later
        assert t.state.consecutive_failures == 4
        assert (t.wait_ms, t.state.next_due_at) == (30_000, later + 30_000)
        assert random.draws == 0

    def test_a_failure_keeps_an_open_retry_after_window(self, plain, circuit, scripted, now, error):
        future = ScheduleState(interval_ms=1_000, throttled_until=now + 60_000)
        t = fail(future, plain, circuit, now, scripted(0.5), error)
        assert t.state.throttled_until == now + 60_000
        assert (t.reason, t.wait_ms) == ("backoff", 60_000)
        stale = ScheduleState(interval_ms=1_000, throttled_until=now - 1)
        t = fail(stale, plain, circuit, now, scripted(0.5), error)
        assert t.state.throttled_until is None
        assert (t.reason, t.wait_ms) == ("backoff", 500)


HALT: SerializedError = {"name": "PoisonHalt", "message": "event abc parked after 5 attempts"}


class TestPoisonHalt:
    def test_opens_the_circuit_directly(self, plain, circuit, now):
        before = ScheduleState(interval_ms=2_000, next_due_at=now + 2_000)
        t = on_poison_halt(before, schedule=plain, circuit=circuit, error=HALT, now=now)
        assert (t.reason, t.circuit_opened, t.circuit_closed) == ("circuit-open", True, False)
        assert t.state.circuit is CircuitState.OPEN
        assert t.state.circuit_opened_at == now
        assert t.state.last_error == HALT
        assert t.state.last_error is not None
        assert t.state.last_error["name"] == "PoisonHalt"
        assert t.state.consecutive_failures == 0
        assert (t.wait_ms, t.state.next_due_at) == (30_000, now + 30_000)

    def test_probe_every_defaults_to_schedule_max(self, plain, now):
        t = on_poison_halt(ScheduleState(), schedule=plain, circuit=Circuit(), error=HALT, now=now)
        assert t.wait_ms == 60_000

    def test_during_a_probe_it_does_not_report_a_new_opening(self, plain, circuit, now):
        before = ScheduleState(circuit=CircuitState.HALF_OPEN, circuit_opened_at=now - 30_000)
        t = on_poison_halt(before, schedule=plain, circuit=circuit, error=HALT, now=now)
        assert t.circuit_opened is False
        assert t.state.circuit is CircuitState.OPEN
        assert t.state.circuit_opened_at == now


class TestDueAndTrigger:
    @pytest.mark.parametrize(
        ("next_due_at", "due"),
        [(None, True), (-5, True), (0, True), (1, False), (60_000, False)],
    )
    def test_is_due_follows_next_due_at(self, now, next_due_at, due):
        offset = None if next_due_at is None else now + next_due_at
        assert is_due(ScheduleState(next_due_at=offset), now) is due

    def test_begin_cycle_turns_a_due_open_circuit_half_open(self, now):
        opened = ScheduleState(circuit=CircuitState.OPEN, next_due_at=now + 10)
        assert begin_cycle(opened, now + 9) is opened
        assert begin_cycle(opened, now + 10) == dataclasses.replace(
            opened, circuit=CircuitState.HALF_OPEN
        )

    @pytest.mark.parametrize("circuit", [CircuitState.CLOSED, CircuitState.HALF_OPEN])
    def test_begin_cycle_leaves_other_circuits_unchanged(self, now, circuit):
        state = ScheduleState(circuit=circuit, next_due_at=now)
        assert begin_cycle(state, now) is state

    def test_trigger_on_an_open_circuit_forces_a_probe(self, now):
        opened = ScheduleState(
            circuit=CircuitState.OPEN,
            circuit_opened_at=now - 5,
            next_due_at=now + 300_000,
            throttled_until=now + 100_000,
            consecutive_failures=5,
        )
        forced = trigger(opened, now)
        assert forced.circuit is CircuitState.HALF_OPEN
        assert forced.next_due_at == now
        assert forced.throttled_until is None
        assert forced.consecutive_failures == 5
        assert forced.circuit_opened_at == now - 5
        assert is_due(forced, now)
        assert begin_cycle(forced, now) is forced

    def test_trigger_on_a_closed_circuit_makes_it_due_now(self, now):
        state = ScheduleState(
            interval_ms=9_000, next_due_at=now + 9_000, throttled_until=now + 9_000
        )
        forced = trigger(state, now)
        assert forced == ScheduleState(interval_ms=9_000, next_due_at=now)


def test_inputs_are_never_mutated(plain, circuit, scripted, now, error):
    state = ScheduleState(
        interval_ms=4_000,
        next_due_at=now + 1_000,
        throttled_until=now + 500,
        circuit=CircuitState.OPEN,
        consecutive_failures=2,
    )
    snapshot = dataclasses.replace(state)
    outputs = [
        succeed(state, plain, now, scripted(), events=1).state,
        fail(state, plain, circuit, now, scripted(0.5), error).state,
        fail(
            state, plain, circuit, now, scripted(), error, is_throttle=True, retry_after_ms=10
        ).state,
        on_poison_halt(state, schedule=plain, circuit=circuit, error=error, now=now).state,
        trigger(state, now),
        begin_cycle(state, now + 1_000),
    ]
    assert state == snapshot
    assert all(output is not state for output in outputs)
