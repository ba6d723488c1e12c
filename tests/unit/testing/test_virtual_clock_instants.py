"""``VirtualClock`` takes ISO 8601 text and aware datetimes for ``start`` and ``advance_to``;
a naive time is refused."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest

from watukuy import ConfigError
from watukuy.testing import VirtualClock

NEW_YEAR_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(
    "start",
    [
        NEW_YEAR_MS,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00.000+00:00",
        "2026-01-01T02:00:00+02:00",
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2025, 12, 31, 19, tzinfo=timezone(timedelta(hours=-5))),
    ],
)
def test_start_accepts_every_form_of_the_same_instant(start: int | str | datetime) -> None:
    assert VirtualClock(start).now() == NEW_YEAR_MS
    assert VirtualClock(start=start).iso() == "2026-01-01T00:00:00.000Z"


async def test_advance_to_accepts_text_and_datetimes_and_fires_timers_on_the_way() -> None:
    clock = VirtualClock("2026-01-01T00:00:00Z")
    sleeper = asyncio.ensure_future(clock.sleep(90_000))
    await clock.advance_to("2026-01-01T00:01:00Z")
    assert clock.now() == NEW_YEAR_MS + 60_000
    assert not sleeper.done()
    await clock.advance_to(datetime(2026, 1, 1, 0, 2, tzinfo=UTC))
    assert clock.now() == NEW_YEAR_MS + 120_000
    assert sleeper.done()
    await clock.advance_to("2026-01-01T00:00:30Z")  # the past: time stays
    assert clock.now() == NEW_YEAR_MS + 120_000


@pytest.mark.parametrize(
    "naive",
    ["2026-01-01T00:00:00", datetime(2026, 1, 1)],
)
async def test_a_naive_time_is_refused_naming_the_argument(naive: str | datetime) -> None:
    with pytest.raises(ConfigError, match="no UTC offset") as caught:
        VirtualClock(naive)
    assert caught.value.field == "start"
    with pytest.raises(ConfigError, match="no UTC offset") as caught:
        await VirtualClock().advance_to(naive)
    assert caught.value.field == "at"


@pytest.mark.parametrize("bad", ["next tuesday", True, None, [1]])
def test_anything_else_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        VirtualClock(bad)  # type: ignore[arg-type]
    assert caught.value.field == "start"
