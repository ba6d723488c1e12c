"""The token, page, snapshot-diff and custom strategies, and ``make_strategy``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest

from watukuy.cursor import (
    AdvanceContext,
    CursorConfig,
    CursorStrategy,
    CustomCursor,
    CustomStrategy,
    PageCursor,
    PagePosition,
    PageStrategy,
    SnapshotDiff,
    SnapshotDiffStrategy,
    TimestampCursor,
    TimestampPosition,
    TimestampStrategy,
    TokenCursor,
    TokenPosition,
    TokenStrategy,
    make_strategy,
    start_over,
)
from watukuy.model.errors import ConfigError
from watukuy.model.page import InvalidPageError, Page

NOW = 1_700_000_000_000
ITEMS = [{"id": 1}, {"id": 2}]


def page(cursor: Any = None, has_more: bool | None = None) -> Page[dict[str, int]]:
    return Page(items=ITEMS, cursor=cursor, has_more=has_more)


# -- token ------------------------------------------------------------------------------


def test_token_follows_the_page_token_until_exhausted() -> None:
    s = make_strategy(TokenCursor(initial="start"))
    assert s.initial() == TokenPosition("start")
    assert s.select(page(), NOW) == ITEMS
    assert s.advance(TokenPosition("start"), page("p2"), ITEMS, ITEMS, NOW) == (
        TokenPosition("p2"),
        False,
    )
    assert s.advance(TokenPosition("p2"), page("p3", True), ITEMS, ITEMS, NOW) == (
        TokenPosition("p3"),
        False,
    )


@pytest.mark.parametrize("token", [None, ""])
@pytest.mark.parametrize("has_more", [None, True])
def test_token_exhausted_resets_to_initial(token: str | None, has_more: bool | None) -> None:
    s = make_strategy(TokenCursor(initial="start"))
    assert s.advance(TokenPosition("p9"), page(token, has_more), ITEMS, ITEMS, NOW) == (
        TokenPosition("start"),
        True,
    )
    plain = make_strategy(TokenCursor())
    assert plain.advance(TokenPosition("p9"), page(token), ITEMS, ITEMS, NOW) == (
        TokenPosition(None),
        True,
    )


def test_token_with_has_more_false_is_kept_for_the_next_cycle() -> None:
    s = make_strategy(TokenCursor())
    assert s.advance(TokenPosition("old"), page("sync-2", False), ITEMS, ITEMS, NOW) == (
        TokenPosition("sync-2"),
        True,
    )


@pytest.mark.parametrize("token", [None, ""])
def test_a_caught_up_token_page_keeps_its_own_token(token: str | None) -> None:
    # The last page of a `next`-link listing (DRF's CursorPagination): no next token, and
    # nothing more. The next cycle asks again from this page's token, not from the start.
    s = make_strategy(TokenCursor(initial="start"))
    assert s.advance(TokenPosition("p9"), page(token, False), ITEMS, ITEMS, NOW) == (
        TokenPosition("p9"),
        True,
    )
    assert s.advance(TokenPosition(None), page(token, False), ITEMS, ITEMS, NOW) == (
        TokenPosition(None),
        True,
    )


GONE: Page[Any] = Page(gone=True)


@pytest.mark.parametrize(
    ("config", "at", "back_to"),
    [
        (TokenCursor(), TokenPosition("expired"), TokenPosition(None)),
        (TokenCursor(initial="t0"), TokenPosition("expired"), TokenPosition("t0")),
        (PageCursor(initial=1), PagePosition(4), PagePosition(1)),
        (
            CustomCursor(initial={"offset": 0}, advance=lambda c: (c.cursor, True)),
            {"offset": 50},
            {"offset": 0},
        ),
    ],
)
def test_a_gone_page_starts_over_from_initial(config: CursorConfig, at: Any, back_to: Any) -> None:
    assert start_over(make_strategy(config), at) == back_to


@pytest.mark.parametrize(
    ("config", "at"),
    [
        (TokenCursor(), TokenPosition(None)),
        (TokenCursor(initial="t0"), TokenPosition("t0")),
        (PageCursor(initial=0), PagePosition(0)),
        (CustomCursor(initial={"offset": 0}, advance=lambda c: (c.cursor, True)), {"offset": 0}),
    ],
)
def test_a_gone_first_position_is_a_page_error(config: CursorConfig, at: Any) -> None:
    with pytest.raises(InvalidPageError, match="nothing earlier to start over from"):
        start_over(make_strategy(config), at)


def test_a_timestamp_page_is_never_gone() -> None:
    strategy = make_strategy(TimestampCursor(field="updated_at"))
    with pytest.raises(InvalidPageError, match="timestamp cursor's page cannot be gone"):
        start_over(strategy, TimestampPosition("2026-01-01T00:00:00Z", None))


@pytest.mark.parametrize("token", [17, {"next": "x"}, ["x"]])
def test_token_that_is_not_text_is_a_page_error(token: Any) -> None:
    s = make_strategy(TokenCursor())
    with pytest.raises(InvalidPageError, match="must be text or None"):
        s.advance(TokenPosition("p1"), page(token), ITEMS, ITEMS, NOW)


def test_token_helpers() -> None:
    s = make_strategy(TokenCursor(initial="start"))
    cursor = TokenPosition("x")
    assert (s.kind, s.full_scan) == ("token", False)
    assert s.view(cursor, NOW) is cursor
    assert s.lag_ms(cursor, NOW) is None
    assert s.reached(TokenPosition("x"), TokenPosition("x")) is True
    assert s.reached(TokenPosition("x"), TokenPosition("y")) is False
    assert s.from_raw("raw") == TokenPosition("raw")
    assert s.from_raw(None) == TokenPosition("start")
    with pytest.raises(ConfigError, match=r"^from_: expected a token \(text\) or None, got 5"):
        s.from_raw(5, field="from_")  # type: ignore[arg-type]
    assert s.serialize(TokenPosition("abc")) == '{"value":"abc"}'
    assert s.serialize(TokenPosition(None)) == '{"value":null}'
    assert s.deserialize('{"value":"abc"}') == TokenPosition("abc")
    assert s.describe(TokenPosition("abc")) == {"value": "abc"}


@pytest.mark.parametrize("text", ['{"value":5}', "nope", "null", "{}", '{"value":"a","x":1}'])
def test_token_deserialize_rejects_other_shapes(text: str) -> None:
    with pytest.raises(ConfigError, match="stored token cursor"):
        make_strategy(TokenCursor()).deserialize(text)


# -- page -------------------------------------------------------------------------------


def test_page_increments_while_has_more_and_resets_when_done() -> None:
    s = make_strategy(PageCursor())
    assert s.initial() == PagePosition(1)
    assert s.advance(PagePosition(1), page(has_more=True), ITEMS, ITEMS, NOW) == (
        PagePosition(2),
        False,
    )
    for has_more in (False, None):
        assert s.advance(PagePosition(4), page(has_more=has_more), ITEMS, ITEMS, NOW) == (
            PagePosition(1),
            True,
        )
    zero = make_strategy(PageCursor(initial=0))
    assert zero.advance(PagePosition(9), page(), ITEMS, ITEMS, NOW) == (PagePosition(0), True)


def test_page_walks_a_three_page_cycle_and_starts_over() -> None:
    s = make_strategy(PageCursor())
    cursor = s.initial()
    requested = []
    for has_more in (True, True, False):
        requested.append(s.view(cursor, NOW).page)
        cursor, done = s.advance(cursor, page(has_more=has_more), ITEMS, ITEMS, NOW)
    assert requested == [1, 2, 3]
    assert (cursor, done) == (PagePosition(1), True)


def test_page_from_raw() -> None:
    s = make_strategy(PageCursor(initial=5))
    assert s.from_raw("12") == PagePosition(12)
    assert s.from_raw("0") == PagePosition(0)
    assert s.from_raw(None) == PagePosition(5)
    for raw in ("twelve", "-1", "1.5", " 3", "", "٣"):
        with pytest.raises(ConfigError, match=r"^to: expected a page number like '17'") as info:
            s.from_raw(raw, field="to")
        assert repr(raw) in str(info.value)


def test_page_helpers() -> None:
    s = make_strategy(PageCursor())
    assert (s.kind, s.full_scan) == ("page", False)
    assert s.select(page(), NOW) == ITEMS
    assert s.lag_ms(PagePosition(2), NOW) is None
    assert s.reached(PagePosition(2), PagePosition(2)) is True
    assert s.reached(PagePosition(3), PagePosition(2)) is True
    assert s.reached(PagePosition(1), PagePosition(2)) is False
    assert s.serialize(PagePosition(7)) == '{"page":7}'
    assert s.deserialize('{"page":7}') == PagePosition(7)
    assert s.describe(PagePosition(7)) == {"page": 7}


@pytest.mark.parametrize(
    "text", ['{"page":"7"}', '{"page":1.5}', '{"page":-1}', "{}", '{"page":true}']
)
def test_page_deserialize_rejects_other_shapes(text: str) -> None:
    with pytest.raises(ConfigError, match="stored page cursor"):
        make_strategy(PageCursor()).deserialize(text)


# -- snapshot diff ----------------------------------------------------------------------


def test_snapshot_diff_has_no_cursor() -> None:
    s: CursorStrategy[Any] = make_strategy(SnapshotDiff())
    assert (s.kind, s.full_scan) == ("snapshot_diff", True)
    assert s.initial() is None
    assert s.view(None, NOW) is None
    assert s.select(page(), NOW) == ITEMS
    assert s.advance(None, page(has_more=True), ITEMS, ITEMS, NOW) == (None, False)
    assert s.advance(None, page(has_more=False), ITEMS, ITEMS, NOW) == (None, True)
    assert s.advance(None, page(), ITEMS, ITEMS, NOW) == (None, True)
    assert s.serialize(None) == "null"
    assert s.deserialize("anything") is None
    assert s.from_raw("x") is None
    assert s.from_raw(None) is None
    assert s.lag_ms(None, NOW) is None
    assert s.reached(None, None) is False
    assert s.describe(None) is None


# -- custom -----------------------------------------------------------------------------


def test_custom_calls_advance_with_the_validated_items() -> None:
    calls: list[AdvanceContext[dict[str, int]]] = []

    def advance(ctx: AdvanceContext[dict[str, int]]) -> tuple[dict[str, int], bool]:
        calls.append(ctx)
        return {"offset": ctx.cursor["offset"] + len(ctx.items)}, ctx.has_more is not True

    s = make_strategy(CustomCursor(initial={"offset": 0}, advance=advance))
    typed = ["one", "two", "three"]
    assert s.advance({"offset": 10}, page("pc"), ITEMS, typed, NOW) == ({"offset": 13}, True)
    assert calls == [
        AdvanceContext(cursor={"offset": 10}, items=typed, page_cursor="pc", has_more=None)
    ]
    assert s.advance({"offset": 0}, page(has_more=True), ITEMS, typed, NOW)[1] is False


def test_custom_accepts_a_mapping_result() -> None:
    def advance(ctx: AdvanceContext[int]) -> Mapping[str, Any]:
        return {"cursor": ctx.cursor + 1, "done": False}

    s = make_strategy(CustomCursor(initial=0, advance=advance))
    assert s.advance(4, page(), ITEMS, ITEMS, NOW) == (5, False)


@pytest.mark.parametrize(
    "result",
    [
        None,
        [1, True],
        (1, True, 2),
        (1, "yes"),
        {"cursor": 1},
        {"done": True},
        {"cursor": 1, "done": 1},
    ],
)
def test_custom_rejects_any_other_result(result: Any) -> None:
    s = make_strategy(CustomCursor(initial=0, advance=lambda ctx: result))
    with pytest.raises(ConfigError, match=r"^cursor.advance: advance must return \(cursor, done\)"):
        s.advance(0, page(), ITEMS, ITEMS, NOW)


def test_custom_defaults_to_json() -> None:
    config: CustomCursor[dict[str, Any]] = CustomCursor(
        initial={"after_id": 0}, advance=lambda ctx: (ctx.cursor, True)
    )
    s = make_strategy(config)
    assert (s.kind, s.full_scan) == ("custom", False)
    assert s.serialize({"after_id": 3, "names": ["a"]}) == '{"after_id":3,"names":["a"]}'
    assert s.deserialize('{"after_id":3,"names":["a"]}') == {"after_id": 3, "names": ["a"]}
    assert s.describe({"after_id": 3}) == {"after_id": 3}
    assert s.from_raw('{"after_id":4}') == {"after_id": 4}
    assert s.from_raw(None) == {"after_id": 0}
    assert s.view({"after_id": 3}, NOW) == {"after_id": 3}
    assert s.select(page(), NOW) == ITEMS
    assert s.lag_ms({"after_id": 3}, NOW) is None
    assert s.reached({"after_id": 3}, {"after_id": 3}) is True
    assert s.reached({"after_id": 3}, {"after_id": 4}) is False
    with pytest.raises(ConfigError, match=r"^from_: cannot read 'nope' as a cursor"):
        s.from_raw("nope", field="from_")
    with pytest.raises(ConfigError, match=r"^cursor\.deserialize: 'nope' is not JSON"):
        s.deserialize("nope")
    with pytest.raises(ConfigError, match=r"^cursor\.serialize: the cursor .* has no JSON form"):
        s.serialize({"at": object()})


def test_custom_serialize_and_deserialize_replace_json() -> None:
    start = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    s = make_strategy(
        CustomCursor(
            initial=start,
            advance=lambda ctx: (ctx.cursor + dt.timedelta(hours=1), True),
            serialize=lambda moment: moment.isoformat(),
            deserialize=dt.datetime.fromisoformat,
        )
    )
    assert s.serialize(start) == "2024-05-01T00:00:00+00:00"
    assert s.deserialize("2024-05-01T00:00:00+00:00") == start
    assert s.from_raw("2024-05-02T00:00:00+00:00") == start + dt.timedelta(days=1)
    assert s.describe(start) == "2024-05-01T00:00:00+00:00"
    assert s.advance(start, page(), ITEMS, ITEMS, NOW) == (start + dt.timedelta(hours=1), True)
    with pytest.raises(ConfigError, match=r"^to: cannot read 'soon' as a cursor"):
        s.from_raw("soon", field="to")


def test_custom_serialize_must_return_text() -> None:
    def not_text(cursor: int) -> Any:
        return cursor

    s = make_strategy(
        CustomCursor(initial=1, advance=lambda ctx: (1, True), serialize=not_text, deserialize=int)
    )
    with pytest.raises(ConfigError, match=r"^cursor\.serialize: must return text, got 1"):
        s.serialize(1)


# -- make_strategy ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (TimestampCursor(field="u", initial="2024-01-01T00:00:00Z"), TimestampStrategy),
        (TokenCursor(initial="t"), TokenStrategy),
        (PageCursor(initial=3), PageStrategy),
        (SnapshotDiff(), SnapshotDiffStrategy),
        (CustomCursor(initial=[1, "a"], advance=lambda ctx: (ctx.cursor, True)), CustomStrategy),
    ],
)
def test_make_strategy_picks_the_strategy_and_initial_round_trips(
    config: CursorConfig, expected: type
) -> None:
    s = make_strategy(config)
    assert type(s) is expected
    assert s.deserialize(s.serialize(s.initial())) == s.initial()


def test_make_strategy_rejects_anything_else() -> None:
    with pytest.raises(ConfigError, match=r"^cursor: expected TimestampCursor, .* got 'timestamp'"):
        make_strategy("timestamp")  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("config", "beginning"),
    [
        # The very beginning is no watermark and no token, whatever `initial` says...
        (TimestampCursor(field="u", initial="2024-01-01T00:00:00Z"), TimestampPosition()),
        (TokenCursor(initial="t"), TokenPosition(None)),
        # ... and the initial page or custom cursor, which is the first one there is.
        (PageCursor(initial=3), PagePosition(3)),
        (SnapshotDiff(), None),
        (CustomCursor(initial={"after": 0}, advance=lambda ctx: (ctx.cursor, True)), {"after": 0}),
    ],
)
def test_beginning_is_where_a_backfill_from_none_starts(
    config: CursorConfig, beginning: Any
) -> None:
    s = make_strategy(config)
    assert s.beginning() == beginning
    assert s.deserialize(s.serialize(s.beginning())) == beginning


@pytest.mark.parametrize(
    ("config", "cursor"),
    [
        (TokenCursor(), TokenPosition("p2")),
        (PageCursor(), PagePosition(2)),
        (SnapshotDiff(), None),
        (CustomCursor(initial={"after": 0}, advance=lambda ctx: (ctx.cursor, True)), {"after": 5}),
        (TimestampCursor(field="u"), TimestampPosition("2024-01-01T00:00:00Z", None)),
    ],
)
def test_the_next_request_of_a_cycle_continues_from_the_stored_cursor(
    config: CursorConfig, cursor: Any
) -> None:
    s: CursorStrategy[Any] = make_strategy(config)
    assert s.next_view(cursor, s.view(cursor, NOW), page(), NOW) is cursor
