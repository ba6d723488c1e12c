"""Durations: one rule for what users write, whether in code, a URL or on the command line."""

from __future__ import annotations

from datetime import timedelta

import pytest

import watukuy as wk
from watukuy.model.durations import parse_duration


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("250ms", 250),
        ("5s", 5_000),
        ("2m", 120_000),
        ("1d", 86_400_000),
        (timedelta(seconds=1.5), 1_500),
        (5, 5_000),
        (1.5, 1_500),
        # A number written as text (a CLI option, an environment variable, a URL) is
        # seconds, as a number is.
        ("5", 5_000),
        (" 1.5 ", 1_500),
        (".25", 250),
    ],
)
def test_a_duration_in_milliseconds(value: wk.Duration, ms: int) -> None:
    assert parse_duration(value, "field") == ms


@pytest.mark.parametrize("value", ["soon", "5 sec", "-5", "-5s", "1e3", "", True, float("nan")])
def test_anything_else_is_a_config_error_naming_the_field(value: object) -> None:
    with pytest.raises(wk.ConfigError) as raised:
        parse_duration(value, "schedule.min")  # type: ignore[arg-type]
    assert raised.value.field == "schedule.min"


def test_a_schedule_takes_the_text_of_a_number_as_seconds() -> None:
    assert wk.Schedule(min="5", max="90").max_ms == 90_000


def test_a_store_url_reads_its_timeouts_by_the_same_rule() -> None:
    from watukuy.stores._pg_timeouts import PgTimeouts

    timeouts = PgTimeouts.of("5", "1.5", "250ms", None)
    assert (timeouts.connect_ms, timeouts.statement_ms, timeouts.lock_ms) == (5_000, 1_500, 250)
    with pytest.raises(wk.ConfigError, match="greater than zero"):
        PgTimeouts.of("0", "1s", "1s", None)
