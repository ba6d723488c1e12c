"""The timestamp strategy, rule by rule."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import BaseModel

from watukuy.cursor import (
    TimestampCursor,
    TimestampPosition,
    TimestampStrategy,
    TimestampValue,
    make_strategy,
)
from watukuy.model.errors import ConfigError
from watukuy.model.page import InvalidPageError, Page

T0 = 1_714_557_600_000  # 2024-05-01T10:00:00Z
LATER = T0 + 3_600_000


def iso(offset_ms: int) -> str:
    """ISO text with milliseconds and ``Z``, ``offset_ms`` after T0."""
    moment = dt.datetime.fromtimestamp((T0 + offset_ms) / 1000, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def strategy(**options: Any) -> TimestampStrategy:
    options.setdefault("field", "updated_at")
    return make_strategy(TimestampCursor(**options))


def step(
    s: TimestampStrategy,
    cursor: TimestampPosition,
    items: list[Any],
    *,
    now: int = LATER,
    has_more: bool | None = None,
    page_cursor: Any = None,
) -> tuple[list[Any], TimestampPosition, bool]:
    page = Page(items=items, cursor=page_cursor, has_more=has_more)
    kept = s.select(page, now)
    nxt, done = s.advance(cursor, page, kept, kept, now)
    return kept, nxt, done


# -- advance ----------------------------------------------------------------------------


def test_watermark_is_the_servers_own_text_of_the_largest_item() -> None:
    s = strategy()
    items = [
        {"id": 1, "updated_at": "2024-05-01T10:00:02+00:00"},
        {"id": 2, "updated_at": "2024-05-01T12:00:05+02:00"},
        {"id": 3, "updated_at": "2024-05-01T10:00:03Z"},
    ]
    kept, cursor, done = step(s, s.initial(), items)
    assert kept == items
    assert cursor == TimestampPosition("2024-05-01T12:00:05+02:00", None)
    assert done is True


def test_numbers_stay_numbers_in_the_watermark_and_in_storage() -> None:
    s = strategy()
    _, cursor, _ = step(
        s, s.initial(), [{"updated_at": 1_714_557_600}, {"updated_at": 1_714_557_605}]
    )
    assert cursor == TimestampPosition(1_714_557_605, None)
    assert s.serialize(cursor) == '{"value":1714557605,"tie_break":null}'
    assert s.deserialize(s.serialize(cursor)) == cursor


def test_items_in_mixed_shapes_are_compared_by_instant() -> None:
    s = strategy()
    items = [
        {"updated_at": "1714557606"},  # 10:00:06Z, the latest
        {"updated_at": 1_714_557_605_999},
        {"updated_at": "2024-05-01T12:00:05.999999+02:00"},
        {"updated_at": "2024-05-01"},
    ]
    _, cursor, _ = step(s, s.initial(), items)
    assert cursor == TimestampPosition("1714557606", None)


def test_never_moves_backwards() -> None:
    s = strategy(tie_break="id")
    current = TimestampPosition(iso(10_000), "m")
    _, cursor, _ = step(
        s, current, [{"id": "z", "updated_at": iso(5_000)}, {"id": "a", "updated_at": iso(1)}]
    )
    assert cursor is current


def test_empty_page_keeps_the_cursor_and_done_follows_has_more() -> None:
    s = strategy()
    current = TimestampPosition(iso(0), None)
    assert step(s, current, [])[1:] == (current, True)
    assert step(s, current, [], has_more=True)[1:] == (current, False)
    assert step(s, current, [], has_more=False)[1:] == (current, True)


def test_largest_tie_break_among_items_at_the_maximum() -> None:
    s = strategy(tie_break="id")
    items = [
        {"id": "b", "updated_at": iso(0)},
        {"id": "z", "updated_at": iso(-1_000)},
        {"id": "c", "updated_at": iso(0)},
        {"id": "a", "updated_at": iso(0)},
    ]
    assert step(s, s.initial(), items)[1] == TimestampPosition(iso(0), "c")


def test_numeric_tie_breaks_compare_as_numbers() -> None:
    s = strategy(tie_break="id")
    items = [
        {"id": 7, "updated_at": iso(0)},
        {"updated_at": iso(0)},
        {"id": 12, "updated_at": iso(0)},
    ]
    cursor = step(s, s.initial(), items)[1]
    assert cursor == TimestampPosition(iso(0), 12)
    assert s.serialize(cursor) == '{"value":"2024-05-01T10:00:00.000Z","tie_break":12}'


def test_mixed_tie_break_types_rank_numbers_below_text() -> None:
    s = strategy(tie_break="id")
    items = [{"id": "7", "updated_at": iso(0)}, {"id": 12, "updated_at": iso(0)}]
    assert step(s, s.initial(), items)[1] == TimestampPosition(iso(0), "7")


def test_at_the_current_watermark_only_the_tie_break_grows() -> None:
    s = strategy(tie_break="id")
    current = TimestampPosition(iso(0), "b")
    grown = step(
        s, current, [{"id": "a", "updated_at": iso(0)}, {"id": "d", "updated_at": iso(0)}]
    )[1]
    assert grown == TimestampPosition(iso(0), "d")
    assert step(s, current, [{"id": "a", "updated_at": iso(0)}])[1] is current
    # The same instant written differently keeps the stored text.
    same = step(s, current, [{"id": "e", "updated_at": "2024-05-01T12:00:00+02:00"}])[1]
    assert same == TimestampPosition(iso(0), "e")


def test_without_tie_break_a_tie_with_the_watermark_changes_nothing() -> None:
    s = strategy()
    current = TimestampPosition(iso(0), None)
    assert step(s, current, [{"id": "z", "updated_at": iso(0)}])[1] is current


def test_missing_or_unreadable_fields_are_kept_but_never_move_the_watermark() -> None:
    s = strategy(lag="30s", tie_break="id")
    current = TimestampPosition(iso(0), "k")
    items = [
        {"id": "a"},
        {"id": "b", "updated_at": "not a date"},
        {"id": "c", "updated_at": None},
        {"id": "d", "updated_at": True},
        {"id": "e", "updated_at": {"at": iso(5_000)}},
        {"id": "f", "updated_at": 42},
        {"id": "g", "updated_at": iso(-1_000)},  # one readable stamp, behind the watermark
    ]
    kept, cursor, done = step(s, current, items, now=T0 + 60_000, has_more=True)
    assert kept == items
    assert cursor is current
    assert done is False


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            [{"id": "a", "updated_at": iso(0)}, {"id": "b"}],
            r"^cursor\.field: none of the 2 item\(s\) of the page has 'modified_at', so",
        ),
        (
            [{"id": "a", "modified_at": None}],
            r"^cursor\.field: none of the 1 item\(s\) of the page has 'modified_at'",
        ),
        (
            [{"id": "a", "modified_at": "yesterday"}, {"id": "b", "modified_at": True}],
            r"has a readable timestamp at 'modified_at' \(first value: 'yesterday'\).*"
            r"cursor\.parse",
        ),
    ],
)
def test_a_page_where_no_item_has_a_readable_field_is_a_config_error(
    items: list[dict[str, Any]], message: str
) -> None:
    s = make_strategy(TimestampCursor(field="modified_at"))
    with pytest.raises(ConfigError, match=message) as info:
        step(s, s.initial(), items, now=T0 + 60_000)
    assert info.value.field == "cursor.field"
    with pytest.raises(ConfigError, match=message):  # also on a stored watermark
        step(s, TimestampPosition(iso(0), None), items, now=T0 + 60_000)


def test_an_empty_page_or_one_held_back_by_lag_is_no_config_error() -> None:
    s = strategy(lag="30s")
    current = TimestampPosition(iso(0), None)
    assert step(s, current, [], now=T0 + 60_000)[1] is current
    fresh = [{"updated_at": iso(50_000)}]
    assert step(s, current, fresh, now=T0 + 60_000)[1] is current


def test_a_page_where_no_item_has_the_tie_break_is_a_config_error() -> None:
    s = strategy(tie_break="order_no")
    items = [{"id": "a", "updated_at": iso(0)}, {"id": "b", "updated_at": iso(0)}]
    with pytest.raises(ConfigError, match=r"^cursor\.tie_break: none of the 2 item\(s\)") as info:
        step(s, s.initial(), items, now=T0 + 60_000)
    assert info.value.field == "cursor.tie_break"
    unusable = [{"order_no": {"n": 1}, "updated_at": iso(0)}]
    with pytest.raises(ConfigError, match=r"at 'order_no' \(first value: \{'n': 1\}\)"):
        step(s, s.initial(), unusable, now=T0 + 60_000)
    # One item with it is enough: the others simply do not extend the tie.
    items.append({"id": "c", "order_no": 7, "updated_at": iso(0)})
    assert step(s, s.initial(), items, now=T0 + 60_000)[1] == TimestampPosition(iso(0), 7)


def test_a_broken_user_parse_counts_as_unreadable() -> None:
    def parse(raw: Any) -> float:
        if raw == "boom":
            raise RuntimeError("cannot")
        return float("nan") if raw == "nan" else float(raw)

    s = strategy(parse=parse, format=lambda ms: str(int(ms)))
    items = [{"updated_at": "boom"}, {"updated_at": "nan"}, {"updated_at": "5"}]
    assert step(s, s.initial(), items, now=10)[1] == TimestampPosition("5", None)


# -- lag --------------------------------------------------------------------------------


def test_lag_drops_exactly_the_items_newer_than_now_minus_lag() -> None:
    s = strategy(lag="5s")
    now = T0 + 10_000
    old = {"id": 1, "updated_at": "2024-05-01T10:00:00+00:00"}
    edge = {"id": 2, "updated_at": iso(5_000)}  # exactly now - lag: kept
    fresh = {"id": 3, "updated_at": iso(5_001)}
    kept, cursor, done = step(s, s.initial(), [old, edge, fresh], now=now)
    assert kept == [old, edge]
    assert cursor == TimestampPosition(iso(5_000), None)
    assert done is True


def test_lag_zero_still_drops_items_stamped_in_the_future() -> None:
    s = strategy()
    kept, cursor, _ = step(s, s.initial(), [{"updated_at": iso(0)}, {"updated_at": iso(1)}], now=T0)
    assert kept == [{"updated_at": iso(0)}]
    assert cursor == TimestampPosition(iso(0), None)


def test_a_page_that_lag_cut_short_ends_the_cycle() -> None:
    s = strategy(lag="30s")
    now = T0 + 60_000
    items = [{"updated_at": iso(10_000)}, {"updated_at": iso(45_000)}]
    _, cursor, done = step(s, s.initial(), items, now=now, has_more=True)
    assert (cursor, done) == (TimestampPosition(iso(10_000), None), True)
    _, _, done = step(s, s.initial(), items[:1], now=now, has_more=True)
    assert done is False


def test_advance_reads_the_list_it_is_given_not_the_one_select_returned() -> None:
    # advance() reuses the stamps select() read when it is handed select()'s very list (as
    # the engine does); any other list, page or time is read afresh.
    s = strategy(lag="30s", tie_break="id")
    now = T0 + 60_000
    items = [
        {"id": "a", "updated_at": iso(1_000)},
        {"id": "b", "updated_at": iso(2_000)},
        {"id": "c", "updated_at": iso(45_000)},  # too fresh
    ]
    page = Page(items=items, has_more=True)
    kept = s.select(page, now)
    assert kept == items[:2]
    fewer = kept[:1]  # the caller validated one item away
    assert s.advance(s.initial(), page, fewer, fewer, now) == (
        TimestampPosition(iso(1_000), "a"),
        True,
    )
    s.select(page, now)
    assert s.advance(s.initial(), page, kept, kept, now + 20_000) == (
        TimestampPosition(iso(2_000), "b"),
        False,  # 20 s later nothing is too fresh: the cycle goes on
    )
    assert s.select(page, now) is not kept
    assert s.advance(s.initial(), page, kept, kept, now) == (
        TimestampPosition(iso(2_000), "b"),
        True,
    )


def test_text_tie_breaks_at_one_instant_keep_the_largest_in_any_order() -> None:
    s = strategy(tie_break="id")
    items = [{"id": name, "updated_at": iso(0)} for name in ("b", "d", "a", "c")]
    _, cursor, _ = step(s, s.initial(), items)
    assert cursor == TimestampPosition(iso(0), "d")


# -- server-supplied watermark -----------------------------------------------------------


def test_a_text_page_cursor_overrides_the_watermark_and_disables_lag() -> None:
    s = strategy(lag="1h", tie_break="id")
    items = [{"id": "a", "updated_at": iso(0)}, {"id": "b", "updated_at": iso(1_000)}]
    kept, cursor, done = step(
        s,
        TimestampPosition(iso(-1), "zzz"),
        items,
        now=T0,
        has_more=True,
        page_cursor="2024-05-01T09:30:00Z",
    )
    assert kept == items
    assert cursor == TimestampPosition("2024-05-01T09:30:00Z", None)
    assert done is False


@pytest.mark.parametrize("page_cursor", ["soon", "", 1_714_557_600, {"at": 1}])
def test_a_malformed_page_cursor_is_a_page_error_not_a_moved_cursor(page_cursor: Any) -> None:
    s = strategy()
    page = Page(items=[{"updated_at": iso(0)}], cursor=page_cursor)
    with pytest.raises(InvalidPageError, match=r"Page\.cursor"):
        s.select(page, LATER)
    with pytest.raises(InvalidPageError, match=r"Page\.cursor"):
        s.advance(s.initial(), page, page.items, page.items, LATER)


# -- view / overlap ---------------------------------------------------------------------


def test_view_without_overlap_is_the_stored_position() -> None:
    s = strategy(tie_break="id")
    current = TimestampPosition(iso(0), "a")
    assert s.view(current, LATER) is current
    empty = TimestampPosition(None, None)
    assert strategy(overlap="5m").view(empty, LATER) is empty


@pytest.mark.parametrize(
    ("stored", "seen"),
    [
        ("2024-05-01T10:00:00Z", "2024-05-01T09:58:00Z"),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T11:58:00+02:00"),
        ("2024-05-01T10:00:00.123Z", "2024-05-01T09:58:00.123Z"),
        ("2024-05-01T10:00:00.123456Z", "2024-05-01T09:58:00.123456Z"),
        ("2024-05-01 10:00:00", "2024-05-01 09:58:00"),
        ("1714557600", "1714557480"),
        ("1714557600123", "1714557480123"),
        (1_714_557_600, 1_714_557_480),
        (1_714_557_600_123, 1_714_557_480_123),
        (1_714_557_600.5, 1_714_557_480.5),
    ],
)
def test_overlap_hands_fetch_the_shifted_value_in_the_stored_shape(
    stored: TimestampValue, seen: TimestampValue
) -> None:
    s = strategy(overlap="2m", tie_break="id")
    current = TimestampPosition(stored, "o7")
    view = s.view(current, LATER)
    assert view == TimestampPosition(seen, None)
    assert type(view.value) is type(seen)
    # The stored cursor is not moved back by re-scanning the window.
    window = [{"id": "o5", "updated_at": seen}, {"id": "o6", "updated_at": stored}]
    assert step(s, current, window)[1] is current


def test_user_parse_and_format_replace_the_default_rules() -> None:
    def parse(raw: Any) -> float:
        moment = dt.datetime.strptime(raw, "%d/%m/%Y %H:%M:%S").replace(tzinfo=dt.UTC)
        return moment.timestamp() * 1000

    def format_(ms: float) -> str:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%d/%m/%Y %H:%M:%S")

    s = strategy(parse=parse, format=format_, overlap="5m", initial="30/04/2024 23:00:00")
    assert s.initial() == TimestampPosition("30/04/2024 23:00:00", None)
    # As text "30/04" > "02/05"; by instant it is the other way round.
    items = [{"updated_at": "02/05/2024 10:00:00"}, {"updated_at": "30/04/2024 23:59:59"}]
    cursor = step(s, s.initial(), items, now=T0 + 2 * 86_400_000)[1]
    assert cursor == TimestampPosition("02/05/2024 10:00:00", None)
    assert s.view(cursor, LATER) == TimestampPosition("02/05/2024 09:55:00", None)
    assert s.lag_ms(cursor, T0 + 86_400_000) == 0
    assert s.reached(cursor, TimestampPosition("01/05/2024 00:00:00", None)) is True


# -- field paths and typed items ---------------------------------------------------------


class _Meta(BaseModel):
    updated_at: dt.datetime


class _Order(BaseModel):
    id: int
    meta: _Meta


def test_dot_paths_read_attributes_of_typed_items() -> None:
    s = strategy(field="meta.updated_at", tie_break="id")
    items = [
        _Order(
            id=3,
            meta=_Meta(
                updated_at=dt.datetime(
                    2024, 5, 1, 12, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))
                )
            ),
        ),
        _Order(id=9, meta=_Meta(updated_at=dt.datetime(2024, 5, 1, 10, 0, 5, tzinfo=dt.UTC))),
    ]
    assert step(s, s.initial(), items)[1] == TimestampPosition("2024-05-01T10:00:05Z", 9)


def test_dot_paths_read_nested_dicts() -> None:
    s = strategy(field="meta.updated_at")
    items = [{"meta": {"updated_at": 1_714_557_630}}, {"meta": {}}]
    assert step(s, s.initial(), items)[1] == TimestampPosition(1_714_557_630, None)


# -- from_raw, reached, lag_ms, serialisation ---------------------------------------------


def test_from_raw() -> None:
    s = strategy(initial="2024-01-01T00:00:00Z")
    assert s.from_raw("2024-05-01T10:00:00Z") == TimestampPosition("2024-05-01T10:00:00Z", None)
    assert s.from_raw("1714557600") == TimestampPosition("1714557600", None)
    assert s.from_raw(1_714_557_600) == TimestampPosition(1_714_557_600, None)
    assert s.from_raw(None) == TimestampPosition("2024-01-01T00:00:00Z", None)
    with pytest.raises(ConfigError, match=r"^to: cannot read 'yesterday' as a timestamp") as info:
        s.from_raw("yesterday", field="to")
    assert info.value.field == "to"
    with pytest.raises(ConfigError, match=r"^cursor: cannot read True"):
        s.from_raw(True)


def test_reached_compares_instants() -> None:
    s = strategy()
    assert s.reached(TimestampPosition(None), TimestampPosition(None)) is True
    assert s.reached(TimestampPosition(iso(0)), TimestampPosition(None)) is True
    assert s.reached(TimestampPosition(None), TimestampPosition(iso(0))) is False
    # The target's instant is included: ties on it may still follow on the next page.
    assert s.reached(TimestampPosition(iso(0)), TimestampPosition("1714557600")) is False
    assert s.reached(TimestampPosition(iso(1_000)), TimestampPosition(iso(0))) is True
    assert s.reached(TimestampPosition(iso(-1)), TimestampPosition(iso(0))) is False


def test_lag_ms() -> None:
    s = strategy()
    assert s.lag_ms(TimestampPosition(None), T0) is None
    assert s.lag_ms(TimestampPosition(iso(0)), T0 + 42_000) == 42_000
    assert s.lag_ms(TimestampPosition("1714557600"), T0 + 1) == 1
    assert s.lag_ms(TimestampPosition(1_714_557_600_123), T0 + 1_000) == 877
    assert s.lag_ms(TimestampPosition("garbage"), T0) is None


def test_a_stored_watermark_that_no_longer_parses_is_a_config_error() -> None:
    s = strategy(overlap="1m")
    with pytest.raises(ConfigError, match="stored watermark 'garbage'") as info:
        s.advance(
            TimestampPosition("garbage"),
            Page(items=[{"updated_at": iso(0)}]),
            [{"updated_at": iso(0)}],
            [],
            LATER,
        )
    assert info.value.field == "cursor"
    with pytest.raises(ConfigError, match="stored watermark 'garbage'"):
        s.view(TimestampPosition("garbage"), LATER)


def test_serialize_round_trips_and_describe_is_json_ready() -> None:
    s = strategy()
    for position in [
        TimestampPosition(None, None),
        TimestampPosition(iso(0), None),
        TimestampPosition(iso(0), "o-9"),
        TimestampPosition(1_714_557_600_123, 42),
        TimestampPosition(1_714_557_600.5, 4.5),
    ]:
        text = s.serialize(position)
        assert s.deserialize(text) == position
    assert s.serialize(TimestampPosition(iso(0), "o-9")) == (
        '{"value":"2024-05-01T10:00:00.000Z","tie_break":"o-9"}'
    )
    assert s.describe(TimestampPosition(iso(0), 3)) == {"value": iso(0), "tie_break": 3}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        "null",
        '{"value": "x"}',
        '{"value": true, "tie_break": null}',
        '{"value": "x", "tie_break": [1]}',
        '{"value": "x", "tie_break": null, "extra": 1}',
    ],
)
def test_deserialize_rejects_what_is_not_a_timestamp_cursor(text: str) -> None:
    with pytest.raises(ConfigError, match="stored timestamp cursor") as info:
        strategy().deserialize(text)
    assert info.value.field == "cursor"


def test_kind_and_initial() -> None:
    s = strategy(initial=1_714_557_600)
    assert (s.kind, s.full_scan) == ("timestamp", False)
    assert s.initial() == TimestampPosition(1_714_557_600, None)
    assert strategy().initial() == TimestampPosition(None, None)


def test_reached_reads_the_ties_of_the_target_instant_through() -> None:
    s = strategy(tie_break="id")
    target = TimestampPosition(iso(0), "o249")
    assert s.reached(TimestampPosition(iso(0), "o099"), target) is False
    assert s.reached(TimestampPosition(iso(0), "o249"), target) is True
    assert s.reached(TimestampPosition(iso(0), "o300"), target) is True
    assert s.reached(TimestampPosition(iso(0), None), target) is False
    assert s.reached(TimestampPosition(iso(1), None), target) is True
