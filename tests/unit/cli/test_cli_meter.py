"""The meter behind the progress line: totals, and rates over a sliding window, on a fake
clock."""

from __future__ import annotations

import pytest

from watukuy.cli._meter import Counts, Meter, Rates


class FakeClock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def now(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


def test_totals_add_up_and_rates_wait_for_time_to_pass() -> None:
    clock = FakeClock()
    meter = Meter(clock.now)
    meter.add_page(50)
    meter.add_page(0)  # a 304, or an empty last page: a page all the same
    meter.add_events(7)
    reading = meter.read()
    assert reading.totals == Counts(pages=2, items=50, events=7)
    assert reading.per_second is None  # no time has passed: no rate yet
    assert reading.elapsed_ms == 0


def test_a_young_meter_measures_since_the_start() -> None:
    clock = FakeClock()
    meter = Meter(clock.now, window_ms=5_000)
    clock.advance(1_000)
    for _ in range(3):
        meter.add_page(100)
    meter.add_events(40)
    clock.advance(1_000)
    meter.add_page(100)
    reading = meter.read()
    assert reading.elapsed_ms == 2_000
    assert reading.per_second == Rates(pages=2.0, items=200.0, events=20.0)


def test_rates_follow_the_last_window_and_fall_to_zero_when_work_stops() -> None:
    clock = FakeClock()
    meter = Meter(clock.now, window_ms=2_000)
    # Ten seconds at 10 pages a second, read once a second as a display would.
    for _ in range(10):
        clock.advance(1_000)
        for _ in range(10):
            meter.add_page(5)
        meter.read()
    # Then one second at 2 pages a second: the window holds one fast and one slow second.
    clock.advance(1_000)
    meter.add_page(5)
    meter.add_page(5)
    reading = meter.read()
    assert reading.totals.pages == 102
    assert reading.per_second is not None
    assert reading.per_second.pages == pytest.approx(6.0)
    assert reading.per_second.items == pytest.approx(30.0)
    # Nothing more: once the window has passed, the rates are zero and the totals stay.
    clock.advance(1_000)
    meter.read()
    clock.advance(1_000)
    idle = meter.read()
    assert idle.per_second == Rates(pages=0.0, items=0.0, events=0.0)
    assert idle.totals.pages == 102
    assert idle.elapsed_ms == 13_000


def test_readings_far_apart_measure_from_the_previous_reading() -> None:
    clock = FakeClock()
    meter = Meter(clock.now, window_ms=1_000)
    clock.advance(10_000)
    meter.add_page(1)
    first = meter.read()
    assert first.per_second == Rates(pages=0.1, items=0.1, events=0.0)
    clock.advance(4_000)
    meter.add_page(1)
    meter.add_page(1)
    assert meter.read().per_second == Rates(pages=0.5, items=0.5, events=0.0)


def test_the_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_ms"):
        Meter(FakeClock().now, window_ms=0)
