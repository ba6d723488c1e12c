"""Walking a timestamp cursor against a simulated keyset API, page by page.

The API below is what the timestamp strategy asks users to write: items ordered by
``(updated_at, id)``; a request with ``(value, tie_break)`` returns the items with
``updated_at > value``, or at exactly ``value`` with ``id > tie_break`` (``>= value`` when
``tie_break`` is ``None``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.cursor import TimestampCursor, TimestampPosition, TimestampStrategy, make_strategy
from watukuy.cursor.timeformat import parse_ns
from watukuy.model.page import Page

T0 = 1_714_557_600_000  # 2024-05-01T10:00:00Z
T0_ISO = "2024-05-01T10:00:00Z"


def iso(offset_ms: int, zone: str = "Z") -> str:
    moment = dt.datetime.fromtimestamp((T0 + offset_ms) / 1000, dt.UTC)
    if zone != "Z":
        hours = int(zone[:3])
        moment = moment.astimezone(dt.timezone(dt.timedelta(hours=hours)))
    text = moment.isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


@dataclass(frozen=True)
class Row:
    id: int | str
    updated_at: str | int

    @property
    def instant(self) -> int:
        ns = parse_ns(self.updated_at)
        assert ns is not None
        return ns


class KeysetApi:
    """Serves ``rows`` through an ``updated_since`` + ``after_id`` keyset, ``limit`` at a time."""

    def __init__(self, rows: list[Row], page_sizes: list[int]) -> None:
        self.rows = sorted(rows, key=lambda row: (row.instant, row.id))
        self.page_sizes = page_sizes
        self.requests: list[TimestampPosition] = []

    def fetch(self, position: TimestampPosition) -> Page[dict[str, Any]]:
        limit = self.page_sizes[len(self.requests) % len(self.page_sizes)]
        self.requests.append(position)
        if position.value is None:
            eligible = self.rows
        else:
            start = parse_ns(position.value)
            assert start is not None
            tie = position.tie_break
            eligible = [
                row
                for row in self.rows
                if row.instant > start or (row.instant == start and (tie is None or row.id > tie))  # type: ignore[operator]
            ]
        page = eligible[:limit]
        return Page(
            items=[{"id": row.id, "updated_at": row.updated_at} for row in page],
            has_more=len(eligible) > limit,
        )


def run_cycle(
    s: TimestampStrategy, cursor: TimestampPosition, api: KeysetApi, now: int
) -> tuple[TimestampPosition, list[Any], list[TimestampPosition]]:
    """One cycle as the runner drives it; returns the cursor, the kept items, the cursors."""
    seen: list[Any] = []
    trail: list[TimestampPosition] = []
    request = s.view(cursor, now)
    for _ in range(1_000):
        page = api.fetch(request)
        kept = s.select(page, now)
        cursor, done = s.advance(cursor, page, kept, kept, now)
        seen.extend(kept)
        trail.append(cursor)
        if done:
            return cursor, seen, trail
        request = s.next_view(cursor, request, page, now)
    raise AssertionError("the cycle never finished")


def test_fifty_items_on_one_timestamp_across_page_boundaries() -> None:
    before = [Row(id=1_000 + n, updated_at=iso(-5_000 + n * 1_000)) for n in range(5)]
    tied = [Row(id=n, updated_at=T0_ISO) for n in range(1, 51)]
    after = [Row(id=2_000 + n, updated_at=iso(1_000 + n * 1_000)) for n in range(5)]
    api = KeysetApi(before + tied + after, page_sizes=[20])
    s = make_strategy(TimestampCursor(field="updated_at", tie_break="id"))

    cursor, seen, trail = run_cycle(s, s.initial(), api, now=T0 + 60_000)

    ids = [item["id"] for item in seen]
    assert ids == [
        1_000,
        1_001,
        1_002,
        1_003,
        1_004,
        *range(1, 51),
        2_000,
        2_001,
        2_002,
        2_003,
        2_004,
    ]
    assert len(set(ids)) == 60
    # Numeric ids compare as numbers: after id 15 comes 16, not a re-fetch from "9".
    assert trail == [
        TimestampPosition(T0_ISO, 15),
        TimestampPosition(T0_ISO, 35),
        TimestampPosition(iso(5_000), 2_004),
    ]
    assert api.requests == [
        TimestampPosition(None, None),
        TimestampPosition(T0_ISO, 15),
        TimestampPosition(T0_ISO, 35),
    ]

    # The next cycle finds nothing new and leaves the cursor where it is.
    again, seen_again, _ = run_cycle(s, cursor, api, now=T0 + 120_000)
    assert seen_again == []
    assert again is cursor


def test_items_dropped_by_lag_come_back_next_cycle() -> None:
    rows = [
        Row(id=1, updated_at=iso(-60_000)),
        Row(id=2, updated_at=iso(-40_000)),
        Row(id=3, updated_at=iso(-31_000)),
        Row(id=4, updated_at=iso(-30_000)),
        Row(id=5, updated_at=iso(-29_000)),
        Row(id=6, updated_at=iso(-10_000)),
        Row(id=7, updated_at=iso(-5_000)),
    ]
    api = KeysetApi(rows, page_sizes=[2])
    s = make_strategy(TimestampCursor(field="updated_at", tie_break="id", lag="30s"))

    cursor, seen, trail = run_cycle(s, s.initial(), api, now=T0)
    assert [item["id"] for item in seen] == [1, 2, 3, 4]
    # Page 3 held only items newer than now - 30s: the cycle stops there.
    assert len(api.requests) == 3
    assert trail[-1] == TimestampPosition(iso(-30_000), 4)
    assert cursor == TimestampPosition(iso(-30_000), 4)

    cursor, seen, _ = run_cycle(s, cursor, api, now=T0 + 30_000)
    assert [item["id"] for item in seen] == [5, 6, 7]
    assert cursor == TimestampPosition(iso(-5_000), 7)


def test_overlap_rescans_the_window_without_moving_the_stored_cursor_back() -> None:
    rows = [Row(id=n, updated_at=iso(-n * 30_000)) for n in range(1, 7)]  # -30s .. -3m
    api = KeysetApi(rows, page_sizes=[50])
    s = make_strategy(TimestampCursor(field="updated_at", tie_break="id", overlap="2m"))

    cursor, seen, _ = run_cycle(s, s.initial(), api, now=T0)
    assert [item["id"] for item in seen] == [6, 5, 4, 3, 2, 1]
    assert cursor == TimestampPosition(iso(-30_000), 1)

    api.rows.append(Row(id=7, updated_at=iso(-10_000)))
    again, seen, _ = run_cycle(s, cursor, api, now=T0 + 1_000)
    assert api.requests[-1] == TimestampPosition(iso(-150_000), None)
    # The window [-2m30s, ...] is fetched again (the version map drops those), plus the new one.
    assert [item["id"] for item in seen] == [5, 4, 3, 2, 1, 7]
    assert again == TimestampPosition(iso(-10_000), 7)


_ZONES = ["Z", "+02:00", "-05:00", "epoch-ms"]


@st.composite
def _rows(draw: st.DrawFn) -> tuple[list[Row], list[int]]:
    count = draw(st.integers(min_value=0, max_value=60))
    text_ids = draw(st.booleans())
    id_numbers = draw(st.lists(st.integers(0, 10_000), min_size=count, max_size=count, unique=True))
    rows = []
    for number in id_numbers:
        offset = draw(st.integers(min_value=0, max_value=6)) * 1_000
        zone = draw(st.sampled_from(_ZONES))
        stamp: str | int = T0 + offset if zone == "epoch-ms" else iso(offset, zone)
        rows.append(Row(id=f"o{number:05d}" if text_ids else number, updated_at=stamp))
    page_sizes = draw(st.lists(st.integers(min_value=1, max_value=25), min_size=1, max_size=5))
    return rows, page_sizes


@settings(max_examples=300, deadline=None)
@given(_rows())
def test_walking_a_keyset_api_yields_every_item_exactly_once(
    case: tuple[list[Row], list[int]],
) -> None:
    rows, page_sizes = case
    api = KeysetApi(rows, page_sizes)
    s = make_strategy(TimestampCursor(field="updated_at", tie_break="id"))

    cursor, seen, _ = run_cycle(s, s.initial(), api, now=T0 + 3_600_000)

    assert sorted(item["id"] for item in seen) == sorted(row.id for row in rows)
    assert len(seen) == len(rows)
    if rows:
        last = api.rows[-1]
        assert parse_ns(cursor.value) == last.instant  # type: ignore[arg-type]
        assert cursor.tie_break == last.id
    again, seen_again, _ = run_cycle(s, cursor, api, now=T0 + 3_600_000)
    assert seen_again == []
    assert again == cursor


def test_overlap_applies_to_the_first_request_of_a_cycle_only() -> None:
    tied = [Row(id=f"o{n:03d}", updated_at=T0_ISO) for n in range(250)]
    api = KeysetApi(tied, page_sizes=[100])
    s = make_strategy(TimestampCursor(field="updated_at", tie_break="id", overlap="2m"))

    cursor, seen, _ = run_cycle(s, s.initial(), api, now=T0 + 60_000)

    assert len(seen) == 250
    assert api.requests == [
        TimestampPosition(None, None),
        TimestampPosition(T0_ISO, "o099"),
        TimestampPosition(T0_ISO, "o199"),
    ]
    api.requests.clear()
    again, seen, _ = run_cycle(s, cursor, api, now=T0 + 120_000)
    # The window is read through once: its first page is not asked for again and again.
    assert [item["id"] for item in seen] == [row.id for row in tied]
    assert api.requests == [
        TimestampPosition("2024-05-01T09:58:00Z", None),
        TimestampPosition(T0_ISO, "o099"),
        TimestampPosition(T0_ISO, "o199"),
    ]
    assert again == cursor


@settings(max_examples=150, deadline=None)
@given(_rows(), st.integers(min_value=0, max_value=7))
def test_with_overlap_the_next_cycle_reads_the_whole_window_once(
    case: tuple[list[Row], list[int]], back_s: int
) -> None:
    rows, page_sizes = case
    api = KeysetApi(rows, page_sizes)
    s = make_strategy(TimestampCursor(field="updated_at", tie_break="id", overlap=back_s))
    now = T0 + 3_600_000

    cursor, seen, _ = run_cycle(s, s.initial(), api, now=now)
    assert sorted(item["id"] for item in seen) == sorted(row.id for row in rows)

    again, seen_again, _ = run_cycle(s, cursor, api, now=now)
    assert again == cursor
    if cursor.value is None:
        return
    start = parse_ns(cursor.value)
    assert start is not None
    window = [row.id for row in api.rows if row.instant >= start - back_s * 1_000_000_000]
    if back_s == 0:
        window = []  # no overlap: the exact keyset has nothing after the last item
    assert [item["id"] for item in seen_again] == window
