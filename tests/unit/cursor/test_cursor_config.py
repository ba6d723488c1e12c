"""Cursor configurations check themselves when built, naming the field and the value."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from watukuy.cursor import CustomCursor, PageCursor, SnapshotDiff, TimestampCursor, TokenCursor
from watukuy.model.errors import ConfigError


def _fails(field: str, value_text: str, build: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        build()
    error = info.value
    assert error.field == field
    assert error.code == "CONFIG"
    assert str(error).startswith(f"{field}: ")
    assert value_text in str(error)
    return error


def test_timestamp_defaults_and_durations() -> None:
    config = TimestampCursor(
        field="meta.updated_at", tie_break="id", lag="30s", overlap=timedelta(minutes=2)
    )
    assert (config.lag_ms, config.overlap_ms) == (30_000, 120_000)
    assert TimestampCursor(field="u", lag=1.5).lag_ms == 1_500
    plain = TimestampCursor(field="u")
    assert (plain.tie_break, plain.initial, plain.lag_ms, plain.overlap_ms) == (None, None, 0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.field = "v"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "field", "value_text"),
    [
        ({"field": ""}, "cursor.field", "''"),
        ({"field": "meta..updated_at"}, "cursor.field", "'meta..updated_at'"),
        ({"field": 5}, "cursor.field", "5"),
        ({"tie_break": ""}, "cursor.tie_break", "''"),
        ({"tie_break": "id."}, "cursor.tie_break", "'id.'"),
        ({"lag": "soon"}, "cursor.lag", "'soon'"),
        ({"lag": -1}, "cursor.lag", "-1"),
        ({"overlap": "2 minutes"}, "cursor.overlap", "'2 minutes'"),
        ({"parse": float}, "cursor.format", "parse and format must be given together"),
        ({"format": str}, "cursor.parse", "parse and format must be given together"),
        ({"parse": "iso", "format": str}, "cursor.parse", "'iso'"),
        ({"parse": float, "format": 3}, "cursor.format", "3"),
        ({"initial": "yesterday"}, "cursor.initial", "'yesterday'"),
        ({"initial": "2024-02-30T00:00:00Z"}, "cursor.initial", "'2024-02-30T00:00:00Z'"),
        ({"initial": 171_455_760}, "cursor.initial", "171455760"),
        ({"initial": True}, "cursor.initial", "True"),
        ({"initial": ["2024-01-01"]}, "cursor.initial", "['2024-01-01']"),
    ],
)
def test_timestamp_rejects_bad_options(
    options: dict[str, Any], field: str, value_text: str
) -> None:
    options.setdefault("field", "updated_at")
    _fails(field, value_text, lambda: TimestampCursor(**options))


def test_timestamp_initial_is_checked_with_the_user_parse() -> None:
    def parse(raw: Any) -> float:
        return float(raw.removeprefix("t="))

    assert (
        TimestampCursor(field="u", initial="t=5", parse=parse, format=lambda ms: f"t={ms}").initial
        == "t=5"
    )
    error = _fails(
        "cursor.initial",
        "'2024-01-01T00:00:00Z'",
        lambda: TimestampCursor(field="u", initial="2024-01-01T00:00:00Z", parse=parse, format=str),
    )
    assert "cursor.parse" in str(error)


def test_token_initial() -> None:
    assert TokenCursor().initial is None
    assert TokenCursor(initial="abc").initial == "abc"
    _fails("cursor.initial", "''", lambda: TokenCursor(initial=""))
    _fails("cursor.initial", "5", lambda: TokenCursor(initial=5))  # type: ignore[arg-type]


def test_page_initial() -> None:
    assert PageCursor().initial == 1
    assert PageCursor(initial=0).initial == 0
    _fails("cursor.initial", "-1", lambda: PageCursor(initial=-1))
    _fails("cursor.initial", "True", lambda: PageCursor(initial=True))
    _fails("cursor.initial", "1.5", lambda: PageCursor(initial=1.5))  # type: ignore[arg-type]
    _fails("cursor.initial", "'1'", lambda: PageCursor(initial="1"))  # type: ignore[arg-type]


def test_snapshot_diff_takes_nothing() -> None:
    assert SnapshotDiff() == SnapshotDiff()


def test_custom_rejects_bad_options() -> None:
    def advance(ctx: Any) -> tuple[Any, bool]:
        return ctx.cursor, True

    _fails("cursor.advance", "None", lambda: CustomCursor(initial=0, advance=None))  # type: ignore[arg-type]
    _fails(
        "cursor.deserialize",
        "serialize and deserialize must be given together",
        lambda: CustomCursor(initial=0, advance=advance, serialize=str),
    )
    _fails(
        "cursor.serialize",
        "serialize and deserialize must be given together",
        lambda: CustomCursor(initial=0, advance=advance, deserialize=int),
    )
    _fails(
        "cursor.serialize",
        "'str'",
        lambda: CustomCursor(initial=0, advance=advance, serialize="str", deserialize=int),  # type: ignore[arg-type]
    )
    error = _fails(
        "cursor.initial", "{1, 2}", lambda: CustomCursor(initial={1, 2}, advance=advance)
    )
    assert "give serialize and deserialize" in str(error)
    # A cursor type without a JSON form is fine once it brings its own serialisation.
    config = CustomCursor(
        initial={1, 2},
        advance=advance,
        serialize=lambda ids: ",".join(str(n) for n in sorted(ids)),
        deserialize=lambda text: {int(n) for n in text.split(",")},
    )
    assert config.initial == {1, 2}
