"""Late-arrival figures: the histogram, the reconcile findings a key follows, the codec, and
when a WARNING is due."""

from __future__ import annotations

import dataclasses

import pytest

import watukuy as wk
from watukuy.model.late import (
    FOLLOW_LIMIT,
    LATENESS_BOUNDS_MS,
    Following,
    LateArrivals,
    LateWarning,
    Lookback,
    add_lateness,
    follow_findings,
    judge_following,
    late_from_json,
    late_report,
    late_to_json,
    lookback_from_json,
    lookback_to_json,
    mark_returned,
    p99_ms,
)
from watukuy.model.rows import PollerState, state_from_fields, state_to_fields
from watukuy.runtime.late_watch import WARN_EVERY_MS, LateWatch, late_warning

NOW = 1_767_225_600_000


def test_lateness_fills_its_bucket_the_maximum_and_the_lane() -> None:
    late = add_lateness(LateArrivals(), [4_100, 300, 4_100], lane="live", window_ms=10_000, now=NOW)
    assert (late.count, late.max_ms, late.beyond, late.last_at) == (3, 4_100, 0, NOW)
    assert late.by_lane == {"live": 3}
    assert len(late.buckets) == len(LATENESS_BOUNDS_MS) + 1
    assert late.buckets[LATENESS_BOUNDS_MS.index(500)] == 1  # 300 ms: up to 500
    assert late.buckets[LATENESS_BOUNDS_MS.index(5_000)] == 2  # 4.1 s: up to 5 s
    assert late.lost_at is None
    again = add_lateness(late, [60_000], lane="reconcile", window_ms=10_000, now=NOW + 1)
    assert (again.count, again.max_ms, again.beyond, again.lost_at) == (4, 60_000, 1, NOW + 1)
    assert again.by_lane == {"live": 3, "reconcile": 1}


def test_nothing_found_is_the_same_record() -> None:
    late = LateArrivals()
    assert add_lateness(late, [], lane="live", window_ms=None, now=NOW) is late


def test_without_a_window_every_late_arrival_is_beyond_it() -> None:
    late = add_lateness(LateArrivals(), [10], lane="backfill", window_ms=None, now=NOW)
    assert late.beyond == 1
    zero = add_lateness(LateArrivals(), [10], lane="reconcile", window_ms=0, now=NOW)
    assert zero.beyond == 1


@pytest.mark.parametrize(
    ("values", "p99"),
    [
        ([], None),
        ([100], 100),  # the maximum when it is below the bucket's bound
        ([100] * 99 + [9_000], 250),
        ([100] * 98 + [9_000] * 2, 9_000),
        ([700_000], 700_000),  # past the last bound
    ],
)
def test_p99_is_read_from_the_histogram(values: list[int], p99: int | None) -> None:
    late = add_lateness(LateArrivals(), values, lane="live", window_ms=10_000, now=NOW)
    assert p99_ms(late) == p99


def test_the_codec_keeps_every_field() -> None:
    late = dataclasses.replace(
        add_lateness(LateArrivals(), [4_100, 60_000], lane="live", window_ms=10_000, now=NOW),
        missed=2,
        following=(Following("o1", "v2", NOW, False), Following("o|2", "h", NOW + 1, True)),
        warned_at=NOW,
        warned="beyond",
    )
    assert late_from_json(late_to_json(late)) == late
    assert late_from_json(None) == LateArrivals()
    lookback = Lookback(since='{"value":null}', started=NOW, marks=((NOW + 5, "c"),))
    assert lookback_from_json(lookback_to_json(lookback)) == lookback
    assert lookback_from_json({}) == Lookback()
    state = PollerState(late=late, lookback=lookback)
    assert state_from_fields(state_to_fields(state)) == state
    assert state_from_fields({}).late == LateArrivals()  # a state written before the fields


def test_a_reconcile_finding_is_a_miss_when_the_next_live_cycle_does_not_return_it() -> None:
    late = follow_findings(LateArrivals(), [("o1", "v2"), ("o2", "v5")], NOW)
    assert [(f.identity, f.version, f.found_at) for f in late.following] == [
        ("o1", "v2", NOW),
        ("o2", "v5", NOW),
    ]
    # A live cycle that started before the finding does not count.
    assert mark_returned(late, ["o1"], NOW) is None
    returned = mark_returned(late, ["o1", "o9"], NOW + 10)
    assert returned is not None
    assert [f.returned for f in returned.following] == [True, False]
    judged, missed = judge_following(returned, NOW + 10, NOW + 20)
    assert [f.identity for f in missed] == ["o2"]
    assert (judged.missed, judged.following, judged.lost_at) == (1, (), NOW + 20)


def test_a_finding_made_after_the_live_cycle_began_waits_for_the_next_one() -> None:
    late = follow_findings(LateArrivals(), [("o1", "v2")], NOW + 50)
    judged, missed = judge_following(late, NOW + 10, NOW + 60)
    assert (judged, missed) == (late, [])


def test_a_race_is_settled_without_a_miss() -> None:
    late = mark_returned(follow_findings(LateArrivals(), [("o1", "v2")], NOW), ["o1"], NOW + 1)
    assert late is not None
    judged, missed = judge_following(late, NOW + 1, NOW + 2)
    assert (judged.missed, judged.following, missed) == (0, (), [])


def test_a_key_follows_a_bounded_number_of_findings() -> None:
    findings = [(f"o{i}", "v") for i in range(FOLLOW_LIMIT + 20)]
    late = follow_findings(LateArrivals(), findings, NOW)
    assert len(late.following) == FOLLOW_LIMIT
    again = follow_findings(late, [("o0", "v2")], NOW + 1)  # a followed identity moves on
    assert again.following[0] == Following("o0", "v2", NOW + 1)


def test_the_report_for_inspect() -> None:
    late = add_lateness(LateArrivals(), [4_100], lane="live", window_ms=10_000, now=NOW)
    assert late_report(late) == {
        "count": 1,
        "max_ms": 4_100,
        "p99_ms": 4_100,
        "beyond_window": 0,
        "missed": 0,
        "by_lane": {"live": 1},
        "last_at": NOW,
        "lost_at": None,
        "window_ms": 10_000,
        "following": 0,
    }
    assert late_report(LateArrivals(), 12_000)["window_ms"] == 12_000
    assert late_report(LateArrivals())["max_ms"] is None


# --- the WARNING --------------------------------------------------------------------------


def warn(
    late: LateArrivals,
    lateness: list[int],
    window: int | None,
    *,
    missed: int = 0,
    widened: int | None = None,
    now: int = NOW,
) -> tuple[LateWarning, str] | None:
    return late_warning(
        late,
        lateness_ms=lateness,
        missed=missed,
        window=window,
        widened=widened,
        lane="live",
        now=now,
    )


def text_of(decided: tuple[LateWarning, str] | None, level: LateWarning) -> str:
    assert decided is not None
    assert decided[0] == level
    return decided[1]


def test_lateness_within_half_the_window_says_nothing() -> None:
    assert warn(LateArrivals(), [2_400], 5_000) is None


def test_lateness_within_reach_of_the_window_says_it_is_covered() -> None:
    assert text_of(warn(LateArrivals(), [4_100, 100], 5_000), "near") == (
        "2 item(s) arrived up to 4.1s behind the watermark (found by the live lane); "
        "the 5.0s lookback covers them"
    )
    widened = text_of(warn(LateArrivals(), [6_000], 10_000, widened=12_000), "near")
    assert widened.endswith("covers them, and now reaches 12.0s")


def test_lateness_beyond_the_window_says_what_to_change() -> None:
    text = text_of(warn(LateArrivals(), [12_000], 10_000), "beyond")
    assert text.endswith("which exceeds the 10.0s lookback: widen `overlap` or add `reconcile`")
    assert "nothing looks back (overlap=0)" in text_of(warn(LateArrivals(), [1], 0), "beyond")
    missed = text_of(warn(LateArrivals(), [], None, missed=3), "beyond")
    assert missed.startswith("the reconcile lane found 3 change(s) that the live lane's next")


def test_the_same_warning_is_not_repeated_every_cycle() -> None:
    near = LateArrivals(warned_at=NOW, warned="near")
    assert warn(near, [4_100], 5_000, now=NOW + 1_000) is None
    assert warn(near, [4_100], 5_000, now=NOW + WARN_EVERY_MS) is not None
    # A worse one is logged at once.
    assert warn(near, [6_000], 5_000, now=NOW + 1_000) is not None
    beyond = LateArrivals(warned_at=NOW, warned="beyond")
    assert warn(beyond, [4_100], 5_000, now=NOW + 1_000) is None


def test_a_live_cursor_that_cannot_be_read_leaves_other_lanes_unmeasured() -> None:
    poller = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=lambda ctx: [],
    )

    def watch(live: str) -> LateWatch:
        state = PollerState(cursors={"live": live})
        return LateWatch(
            poller=poller,
            lane="reconcile",
            state=state,
            started_at=NOW,
            looked_back=False,
            cursor=None,
        )

    assert watch('{"value":"2026-01-01T00:00:00Z","tie_break":"o1"}').measures
    assert not watch('{"value":"yesterday","tie_break":null}').measures
    assert not watch("not json").measures
