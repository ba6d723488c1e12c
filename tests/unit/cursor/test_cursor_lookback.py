"""The default lookback of a timestamp cursor, and the rules it shares with late commits:
where the first request of a cycle starts, when a held item becomes deliverable, a tie group
that cannot be paged, and how late an item is."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cursor_timestamp import T0, iso, strategy

from watukuy.cursor import TimestampCursor, TimestampPosition
from watukuy.cursor.lookback import (
    LOOKBACK_CAP_MS,
    LOOKBACK_FLOOR_MS,
    lookback_floor,
    lookback_window_ms,
    remember_cycle,
)
from watukuy.model.late import Lookback
from watukuy.model.page import Page


def at(offset_ms: int, tie: str | None = None) -> TimestampPosition:
    return TimestampPosition(iso(offset_ms), tie)


def item(offset_ms: int, id: str = "o1") -> dict[str, Any]:
    return {"id": id, "updated_at": iso(offset_ms)}


# --- the configuration ------------------------------------------------------------------


def test_no_overlap_means_the_default_lookback_and_zero_means_none() -> None:
    assert TimestampCursor(field="t").lookback is True
    assert TimestampCursor(field="t", overlap=None).lookback is True
    assert (
        TimestampCursor(field="t", overlap=0).lookback,
        TimestampCursor(field="t").overlap_ms,
    ) == (
        False,
        0,
    )
    explicit = TimestampCursor(field="t", overlap="2m")
    assert (explicit.lookback, explicit.overlap_ms) == (False, 120_000)


def test_the_default_window_is_twice_the_latest_lateness_between_floor_and_cap() -> None:
    assert lookback_window_ms(0) == LOOKBACK_FLOOR_MS == 10_000
    assert lookback_window_ms(4_270) == 10_000
    assert lookback_window_ms(6_000) == 12_000
    assert lookback_window_ms(3_600_000) == LOOKBACK_CAP_MS == 120_000


# --- the memory -------------------------------------------------------------------------


def test_nothing_recorded_means_no_floor() -> None:
    assert lookback_floor(Lookback(), 10_000) is None


def test_the_first_cycle_records_where_the_lane_started() -> None:
    memory = remember_cycle(Lookback(), began="c0", started_at=1_000, ended_at=1_200, cursor="c1")
    assert memory == Lookback(since="c0", started=1_000, marks=((1_200, "c1"),))
    # Less than a window before the latest start, the lane had not passed anything yet.
    assert lookback_floor(memory, 10_000) == "c0"


def test_the_floor_is_the_cursor_a_window_before_the_latest_cycle_began() -> None:
    memory = Lookback(
        since="c0", started=60_000, marks=((10_000, "c1"), (30_000, "c2"), (55_000, "c3"))
    )
    assert lookback_floor(memory, 10_000) == "c2"  # held at 50 s
    assert lookback_floor(memory, 30_000) == "c2"  # held at 30 s
    assert lookback_floor(memory, 45_000) == "c1"
    assert lookback_floor(memory, 55_000) == "c0"


def test_a_cycle_that_did_not_move_the_cursor_adds_no_mark_but_moves_the_start() -> None:
    memory = Lookback(since="c0", started=10_000, marks=((10_500, "c1"),))
    after = remember_cycle(memory, began="c1", started_at=40_000, ended_at=40_100, cursor="c1")
    assert after.marks == memory.marks
    assert after.started == 40_000
    assert lookback_floor(after, 10_000) == "c1"  # an idle vendor: nothing to re-read


def test_a_cycle_cut_inside_its_window_keeps_the_previous_start() -> None:
    memory = Lookback(since="c0", started=10_000, marks=((10_500, "c1"),))
    after = remember_cycle(memory, began="c1", started_at=None, ended_at=40_100, cursor="c2")
    assert after.started == 10_000
    assert after.marks[-1] == (40_100, "c2")


def test_marks_no_lookup_needs_are_dropped() -> None:
    marks = tuple((i * 1_000, f"c{i}") for i in range(1, 6))
    memory = Lookback(since="c0", started=5_000, marks=marks)
    late = 5_000 + LOOKBACK_CAP_MS + 2_500
    after = remember_cycle(memory, began="c5", started_at=late, ended_at=late + 10, cursor="c6")
    # The newest mark at least a cap old stays, so a cap-wide window still finds it.
    assert after.marks == ((5_000, "c5"), (late + 10, "c6"))
    assert lookback_floor(after, LOOKBACK_CAP_MS) == "c5"


@given(
    st.lists(
        st.tuples(st.integers(1, 30_000), st.booleans(), st.booleans()), min_size=1, max_size=80
    ),
    st.integers(1, LOOKBACK_CAP_MS),
)
def test_the_floor_never_passes_the_cursor_the_lane_really_held(
    cycles: list[tuple[int, bool, bool]], window: int
) -> None:
    """Whatever marks are dropped or thinned out, the floor is a cursor the lane held at or
    before ``started - window``: a later lookup may start earlier, never later."""
    memory = Lookback()
    history: list[tuple[int, int]] = [(0, 0)]  # (time, cursor number) as it really moved
    now, cursor = 0, 0
    for gap, moves, reads_window in cycles:
        now += gap
        began = cursor
        if moves:
            cursor += 1
            history.append((now + 1, cursor))
        memory = remember_cycle(
            memory,
            began=str(began),
            started_at=now if reads_window else None,
            ended_at=now + 1,
            cursor=str(cursor),
        )
        floor = lookback_floor(memory, window)
        if memory.started is None:
            assert floor is None
            continue
        assert floor is not None
        limit = memory.started - window
        held = max((c for t, c in history if t <= limit), default=0)
        assert int(floor) <= held
        assert len(memory.marks) <= 16


# --- the first request ------------------------------------------------------------------


def test_without_a_floor_the_first_request_is_the_cursor() -> None:
    s = strategy(tie_break="id")
    cursor = at(60_000, "o9")
    assert s.lookback_view(cursor, 10_000, None) == cursor


def test_a_floor_at_the_cursor_costs_nothing() -> None:
    s = strategy(tie_break="id")
    cursor = at(60_000, "o9")
    assert s.lookback_view(cursor, 10_000, cursor) == cursor


def test_a_recent_floor_is_taken_exactly_with_its_tie_break() -> None:
    s = strategy(tie_break="id")
    # A group of equal stamps passed less than a window ago is re-read from where the cursor
    # stood, not from the start of its second.
    assert s.lookback_view(at(60_000, "o9"), 10_000, at(57_000, "o4")) == at(57_000, "o4")


def test_an_old_floor_is_bounded_by_a_window_of_stamps() -> None:
    s = strategy(tie_break="id")
    assert s.lookback_view(at(60_000, "o9"), 10_000, at(0, "o1")) == TimestampPosition(
        iso(50_000), None
    )
    beginning = TimestampPosition(None, None)
    assert s.lookback_view(at(60_000, "o9"), 10_000, beginning) == TimestampPosition(
        iso(50_000), None
    )


def test_an_explicit_overlap_is_not_the_default_lookback() -> None:
    s = strategy(tie_break="id", overlap="2s")
    cursor = at(60_000, "o9")
    assert s.view(cursor, T0) == TimestampPosition(iso(58_000), None)
    assert strategy(tie_break="id").view(cursor, T0) == cursor  # the live lane asks lookback_view


def test_the_default_lookback_reads_its_window_through_page_by_page() -> None:
    s = strategy(tie_break="id")
    cursor = at(60_000, "o9")
    request = at(50_000)
    page = Page(items=[item(51_000, "o2"), item(52_000, "o3")], has_more=True)
    assert s.next_view(cursor, request, page, T0 + 70_000) == at(52_000, "o3")
    assert strategy(tie_break="id", overlap=0).next_view(cursor, request, page, T0) == cursor


@given(
    stamps=st.lists(st.integers(min_value=50_000, max_value=90_000), min_size=1, max_size=8),
    selected_at=st.integers(min_value=60_000, max_value=100_000),
    viewed_at=st.integers(min_value=55_000, max_value=110_000),
)
def test_the_next_view_after_a_page_is_what_reading_the_page_again_gives(
    stamps: list[int], selected_at: int, viewed_at: int
) -> None:
    # The lane selects and advances a page, then asks for the next view a little later:
    # items held back by lag at selection time may be kept by then, and must count.
    cursor, request = at(95_000, "o9"), at(50_000)
    page = Page(items=[item(stamp, f"o{n}") for n, stamp in enumerate(stamps)], has_more=True)
    walked = strategy(tie_break="id", lag="5s")
    kept = walked.select(page, T0 + selected_at)
    walked.advance(request, page, kept, kept, T0 + selected_at)
    fresh = strategy(tie_break="id", lag="5s")
    assert walked.next_view(cursor, request, page, T0 + viewed_at) == fresh.next_view(
        cursor, request, page, T0 + viewed_at
    )


# --- held items ---------------------------------------------------------------------------


def test_a_held_item_is_deliverable_lag_after_its_stamp() -> None:
    s = strategy(lag="30s")
    now = T0 + 100_000
    page = Page(items=[item(50_000, "a"), item(90_000, "b"), item(95_000, "c")])
    assert [i["id"] for i in s.select(page, now)] == ["a"]
    assert s.held_until(page, now) == T0 + 90_000 + 30_000


def test_an_item_stamped_ahead_of_our_clock_is_deliverable_at_its_stamp() -> None:
    s = strategy()
    page = Page(items=[item(5_000, "a")])
    assert s.held_until(page, T0) == T0 + 5_000
    assert s.held_until(Page(items=[item(-1, "a")]), T0) is None
    assert s.held_until(Page(items=[item(5_000, "a")], cursor=iso(0)), T0) is None


def test_held_until_rounds_a_fraction_of_a_millisecond_up() -> None:
    s = strategy()
    page = Page(items=[{"id": "a", "updated_at": "2024-05-01T10:00:05.000250Z"}])
    assert s.held_until(page, T0) == T0 + 5_001


# --- a group of equal stamps larger than the page -------------------------------------------


def test_a_full_page_of_the_requested_stamp_without_tie_break_is_a_stall() -> None:
    s = strategy()
    page = Page(items=[item(0, f"o{i}") for i in range(5)], has_more=True)
    why = s.stalled(at(0), page)
    assert why is not None
    assert "all 5 item(s) of the page share updated_at='2024-05-01T10:00:00.000Z'" in why
    assert "at least 5 equal timestamps does not fit in a page of 5" in why
    assert "Raise the page size above the largest group of equal timestamps" in why
    assert "set TimestampCursor(tie_break=...)" in why


@pytest.mark.parametrize(
    ("options", "request_at", "items", "has_more"),
    [
        ({}, at(0), [item(0, "o1"), item(1, "o2")], True),  # the page moves on
        ({}, at(0), [item(0, "o1")], None),  # the listing says nothing more
        ({"tie_break": "id"}, at(0, "o0"), [item(0, "o1")], True),  # a tie-break pages it
        ({}, TimestampPosition(None, None), [item(0, "o1")], True),
    ],
)
def test_other_pages_are_no_stall(
    options: dict[str, Any], request_at: TimestampPosition, items: list[Any], has_more: bool | None
) -> None:
    assert strategy(**options).stalled(request_at, Page(items=items, has_more=has_more)) is None


# --- lateness -------------------------------------------------------------------------------


def test_lateness_is_the_watermark_minus_the_stamp() -> None:
    s = strategy(tie_break="id")
    watermark = at(10_000, "o5")
    assert s.lateness_ms(item(5_900, "o7"), watermark, None) == 4_100
    assert s.lateness_ms(item(10_000, "o3"), watermark, None) == 0  # behind on its tie-break
    assert s.lateness_ms(item(10_000, "o6"), watermark, None) is None  # ahead
    assert s.lateness_ms(item(10_001, "o1"), watermark, None) is None
    assert s.lateness_ms({"id": "x"}, watermark, None) is None


def test_without_tie_break_the_watermarks_own_instant_is_not_behind() -> None:
    s = strategy()
    assert s.lateness_ms(item(10_000, "o3"), at(10_000), None) is None
    assert s.lateness_ms(item(9_000, "o3"), at(10_000), None) == 1_000


def test_an_item_from_before_the_lanes_start_is_not_late() -> None:
    s = strategy(tie_break="id")
    assert s.lateness_ms(item(1_000), at(10_000, "o5"), at(2_000)) is None
    assert s.lateness_ms(item(3_000), at(10_000, "o5"), at(2_000)) == 7_000
    assert s.lateness_ms(item(3_000), at(10_000, "o5"), TimestampPosition(None, None)) == 7_000
