"""Jitter, backoff and pacing: exact values under scripted randomness."""

from __future__ import annotations

import pytest

from watukuy.model.errors import ConfigError
from watukuy.model.options import Backoff
from watukuy.model.rows import RateLimitInfo
from watukuy.scheduler import apply_jitter, backoff_ceiling, backoff_delay, pacing_delay

ALMOST_ONE = 0.999_999_999


class TestApplyJitter:
    @pytest.mark.parametrize(
        ("draw", "expected"),
        [(0.0, 9_000), (0.25, 9_500), (0.5, 10_000), (0.75, 10_500), (ALMOST_ONE, 11_000)],
    )
    def test_is_uniform_over_the_symmetric_range(self, scripted, draw, expected):
        random = scripted(draw)
        assert apply_jitter(10_000, 0.1, random) == expected
        assert random.draws == 1

    def test_rounds_halves_up_not_to_even(self, scripted):
        # 10 * (1 + (2 * 0.75 - 1) * 0.5) = 12.5, which round() would turn into 12
        assert apply_jitter(10, 0.5, scripted(0.75)) == 13
        # 5 * (1 + 0.5 * 0.1) = 5.25
        assert apply_jitter(5, 0.1, scripted(0.75)) == 5

    def test_fraction_zero_returns_the_wait_exactly_without_drawing(self, scripted):
        random = scripted()
        assert apply_jitter(12_345, 0, random) == 12_345
        assert random.draws == 0

    def test_zero_wait_stays_zero(self, scripted):
        assert apply_jitter(0, 0.5, scripted()) == 0

    def test_full_fraction_spans_zero_to_double(self, scripted):
        assert apply_jitter(1_000, 1, scripted(0.0)) == 0
        assert apply_jitter(1_000, 1, scripted(ALMOST_ONE)) == 2_000

    @pytest.mark.parametrize("fraction", [-0.1, 1.5])
    def test_rejects_a_fraction_outside_zero_one(self, scripted, fraction):
        with pytest.raises(ConfigError, match=r"^jitter: .*got " + str(fraction)):
            apply_jitter(1_000, fraction, scripted(0.5))

    def test_rejects_a_negative_wait(self, scripted):
        with pytest.raises(ConfigError, match=r"^ms: .*got -1"):
            apply_jitter(-1, 0.1, scripted(0.5))


class TestBackoff:
    backoff = Backoff(base="1s", factor=2, max="10s")

    @pytest.mark.parametrize(
        ("attempt", "ceiling"),
        [(1, 1_000), (2, 2_000), (3, 4_000), (4, 8_000), (5, 10_000), (6, 10_000), (60, 10_000)],
    )
    def test_ceiling_grows_exponentially_and_caps_at_max(self, attempt, ceiling):
        assert backoff_ceiling(attempt, self.backoff) == ceiling

    def test_ceiling_survives_an_exponent_too_large_for_a_float(self):
        assert backoff_ceiling(100_000, self.backoff) == 10_000

    def test_ceiling_with_a_fractional_factor(self):
        backoff = Backoff(base="1s", factor=1.5, max="1m")
        assert [backoff_ceiling(n, backoff) for n in (1, 2, 3, 4)] == [1_000, 1_500, 2_250, 3_375]

    def test_ceiling_of_a_zero_base_is_zero(self):
        assert backoff_ceiling(1_000_000, Backoff(base=0, factor=3, max="1s")) == 0

    @pytest.mark.parametrize(
        ("attempt", "draw", "expected"),
        [
            (1, 0.0, 0),
            (1, 0.5, 500),
            (1, ALMOST_ONE, 1_000),
            (3, 0.0, 0),
            (3, 0.5, 2_000),
            (3, ALMOST_ONE, 4_000),
            (5, 0.5, 5_000),
            (5, ALMOST_ONE, 10_000),
            (40, 0.25, 2_500),
        ],
    )
    def test_delay_is_full_jitter_up_to_the_ceiling(self, scripted, attempt, draw, expected):
        random = scripted(draw)
        assert backoff_delay(attempt, self.backoff, random) == expected
        assert random.draws == 1

    @pytest.mark.parametrize("attempt", [0, -3])
    def test_rejects_attempts_below_one(self, scripted, attempt):
        with pytest.raises(ConfigError, match=rf"^attempt: .*got {attempt}"):
            backoff_delay(attempt, self.backoff, scripted(0.5))


class TestPacingDelay:
    def test_spreads_the_remaining_requests_over_the_window(self, now):
        assert pacing_delay(RateLimitInfo(remaining=10, reset_at=now + 60_000), now) == 6_000

    def test_rounds_up(self, now):
        # 60000 / 7 = 8571.43
        assert pacing_delay(RateLimitInfo(remaining=7, reset_at=now + 60_000), now) == 8_572

    @pytest.mark.parametrize("remaining", [0, -3, 1])
    def test_nothing_or_one_remaining_waits_for_the_reset(self, now, remaining):
        assert (
            pacing_delay(RateLimitInfo(remaining=remaining, reset_at=now + 60_000), now) == 60_000
        )

    @pytest.mark.parametrize(
        "rate_limit",
        [
            None,
            RateLimitInfo(),
            RateLimitInfo(remaining=5),
            RateLimitInfo(reset_at=1_700_000_060_000),
            RateLimitInfo(remaining=0, reset_at=1_700_000_000_000),
            RateLimitInfo(remaining=0, reset_at=1_699_999_999_999),
        ],
    )
    def test_unknown_or_past_windows_do_not_pace(self, now, rate_limit):
        assert pacing_delay(rate_limit, now) is None
