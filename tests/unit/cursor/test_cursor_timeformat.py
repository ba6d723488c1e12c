"""Reading and writing timestamps in the API's own shapes, and dotted field paths."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.cursor import MISSING, format_timestamp, parse_timestamp, resolve_path
from watukuy.cursor.timeformat import _parse_iso, format_ns, normalise_timestamp, parse_ns

T0 = 1_714_557_600_000  # 2024-05-01T10:00:00Z in epoch milliseconds


@pytest.mark.parametrize(
    ("raw", "ms"),
    [
        ("2024-05-01T10:00:00Z", T0),
        ("2024-05-01T10:00:00z", T0),
        ("2024-05-01t10:00:00Z", T0),
        ("2024-05-01 10:00:00", T0),
        ("2024-05-01T12:00:00+02:00", T0),
        ("2024-05-01T12:00:00+0200", T0),
        ("2024-05-01T12:00:00+02", T0),
        ("2024-05-01T05:30:00-04:30", T0),
        ("2024-05-01T10:00Z", T0),
        ("2024-05-01T10:00:00.123Z", T0 + 123),
        ("2024-05-01T10:00:00,5Z", T0 + 500),
        ("2024-05-01T10:00:00.123456Z", T0 + 123.456),
        ("2024-05-01T10:00:00.000000001Z", T0 + 0.000001),
        ("2024-05-01", T0 - 36_000_000),
        ("1714557600", T0),
        ("1714557600123", T0 + 123),
        (1_714_557_600, T0),
        (1_714_557_600_123, T0 + 123),
        (1_714_557_600.25, T0 + 250),
        (1_714_557_600_123.5, T0 + 123.5),
        (dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))), T0),
        (dt.datetime(2024, 5, 1, 10, 0, 0, 250_000), T0 + 250),
        (dt.date(2024, 5, 1), T0 - 36_000_000),
    ],
)
def test_default_parser_reads_every_supported_shape(raw: object, ms: float) -> None:
    assert parse_timestamp(raw) == ms


@pytest.mark.parametrize(
    "raw",
    [
        "yesterday",
        "",
        "2024-02-30T00:00:00Z",
        "2024-05-01T24:00:00Z",
        "2024-05-01T10:00:00+24:00",
        "2024-05-01T10:00:00 Z",
        "171455760",  # 9 digits: neither seconds nor milliseconds
        "17145576001",
        "1714557600.5",
        "١٧١٤٥٥٧٦٠٠",  # Arabic-Indic digits are not ASCII digits
        171_455_760,
        -1_714_557_600,
        float("nan"),
        float("inf"),
        True,
        None,
        [T0],
    ],
)
def test_default_parser_rejects_everything_else(raw: object) -> None:
    with pytest.raises(ValueError, match="is not an ISO 8601 timestamp"):
        parse_timestamp(raw)


def test_parser_keeps_sub_millisecond_order_exactly() -> None:
    a = parse_ns("2024-05-01T10:00:00.123456Z")
    b = parse_ns("2024-05-01T10:00:00.123457Z")
    assert a == 1_714_557_600_123_456_000
    assert b == 1_714_557_600_123_457_000
    assert parse_ns("2024-05-01T10:00:00.1234567891Z") == 1_714_557_600_123_456_789


@pytest.mark.parametrize(
    ("like", "ms", "expected"),
    [
        ("2024-05-01T10:00:00Z", T0 - 120_000, "2024-05-01T09:58:00Z"),
        ("2024-05-01T10:00:00z", T0 - 120_000, "2024-05-01T09:58:00z"),
        ("2024-05-01T12:00:00+02:00", T0 - 120_000, "2024-05-01T11:58:00+02:00"),
        ("2024-05-01T12:00:00+0200", T0 - 120_000, "2024-05-01T11:58:00+0200"),
        ("2024-05-01T05:30:00-04:30", T0 - 120_000, "2024-05-01T05:28:00-04:30"),
        ("2024-05-01 10:00:00", T0 - 120_000, "2024-05-01 09:58:00"),
        ("2024-05-01T10:00:00.000Z", T0 - 1_500, "2024-05-01T09:59:58.500Z"),
        ("2024-05-01T10:00:00,000Z", T0 - 1_500, "2024-05-01T09:59:58,500Z"),
        ("2024-05-01T10:00:00.000000Z", T0 - 1_500, "2024-05-01T09:59:58.500000Z"),
        # Fewer digits than the instant needs: rounded down, never later.
        ("2024-05-01T10:00:00Z", T0 - 1_500, "2024-05-01T09:59:58Z"),
        ("2024-05-01T10:00Z", T0 - 1_500, "2024-05-01T09:59Z"),
        ("2024-05-01", T0 - 120_000, "2024-05-01"),
        ("2024-05-01", T0 - 36_000_001, "2024-04-30"),
        ("1714557600", T0 - 1_500, "1714557598"),
        ("1714557600123", T0 - 1_500, "1714557598500"),
        (1_714_557_600, T0 - 1_500, 1_714_557_598),
        (1_714_557_600_123, T0 - 1_500, 1_714_557_598_500),
        (1_714_557_600.25, T0 - 1_500, 1_714_557_598.5),
        (1_714_557_600_123.5, T0 - 1_500, 1_714_557_598_500.0),
        ("2024-05-01T10:00:00.000Z", T0 - 0.25, "2024-05-01T09:59:59.999Z"),
    ],
)
def test_formatting_preserves_the_shape_and_rounds_down(
    like: str | int | float, ms: float, expected: str | int | float
) -> None:
    out = format_timestamp(ms, like)
    assert out == expected
    assert type(out) is type(expected)


def test_format_writes_sub_millisecond_digits_exactly() -> None:
    ns = parse_ns("2024-05-01T10:00:00.123456Z")
    assert ns is not None
    assert format_ns(ns - 120_000_000_000, "2024-05-01T10:00:00.123456Z") == (
        "2024-05-01T09:58:00.123456Z"
    )
    assert format_ns(ns, "2024-05-01T12:00:00.0000000000+02:00") == (
        "2024-05-01T12:00:00.1234560000+02:00"
    )


@pytest.mark.parametrize("like", ["soon", True, 12, "2024-13-01"])
def test_format_refuses_a_sample_it_cannot_read(like: object) -> None:
    with pytest.raises(ValueError, match="is not an ISO 8601 timestamp"):
        format_timestamp(T0, like)  # type: ignore[arg-type]


def test_format_refuses_non_finite_milliseconds() -> None:
    with pytest.raises(ValueError, match="finite epoch milliseconds"):
        format_timestamp(float("nan"), "1714557600")


def test_normalise_turns_datetimes_into_utc_text_and_drops_the_rest() -> None:
    plus2 = dt.timezone(dt.timedelta(hours=2))
    assert normalise_timestamp(dt.datetime(2024, 5, 1, 12, 0, tzinfo=plus2)) == (
        "2024-05-01T10:00:00Z"
    )
    assert normalise_timestamp(dt.date(2024, 5, 1)) == "2024-05-01"
    assert normalise_timestamp("x") == "x"
    assert normalise_timestamp(7) == 7
    assert normalise_timestamp(False) is None
    assert normalise_timestamp(float("nan")) is None
    assert normalise_timestamp({"a": 1}) is None


@dataclass
class _Meta:
    updated_at: str


@dataclass
class _Order:
    id: str
    meta: _Meta


def test_resolve_path_walks_mappings_sequences_and_attributes() -> None:
    item = {"a": {"b": {"c": 42}}, "lines": [{"id": "x"}, {"id": "y"}], "nul": None, "zero": 0}
    assert resolve_path(item, "a.b.c") == 42
    assert resolve_path(item, "lines.1.id") == "y"
    assert resolve_path(item, "zero") == 0
    assert resolve_path(item, "nul") is None
    order = _Order(id="o1", meta=_Meta(updated_at="2024-05-01T10:00:00Z"))
    assert resolve_path(order, "meta.updated_at") == "2024-05-01T10:00:00Z"
    assert resolve_path({"order": order}, "order.id") == "o1"


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"a": 1}, "missing"),
        ({"a": {"b": 1}}, "a.missing"),
        ({"a": None}, "a.b"),
        ({"a": 0}, "a.b"),
        ({"a": "text"}, "a.b"),
        ({"lines": [1, 2]}, "lines.2"),
        ({"lines": [1, 2]}, "lines.x"),
        ({"a.b": 1}, "a.b"),
        (None, "a"),
    ],
)
def test_resolve_path_reports_missing(item: object, path: str) -> None:
    assert resolve_path(item, path) is MISSING
    assert not MISSING
    assert repr(MISSING) == "MISSING"


_MOMENTS = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31))


@st.composite
def _utc_like(draw: st.DrawFn) -> str:
    """``YYYY-MM-DDTHH:MM:SS[.mmm]Z`` texts, as written or with up to three characters
    swapped for digits, separators, letters or a non-ASCII digit."""
    moment = draw(_MOMENTS)
    spec = draw(st.sampled_from(["seconds", "milliseconds"]))
    text = list(moment.isoformat(timespec=spec) + "Z")
    for _ in range(draw(st.integers(0, 3))):
        index = draw(st.integers(0, len(text) - 1))
        text[index] = draw(st.sampled_from(list("0123456789:-.,TtzZ x/\u0663")))
    return "".join(text)


@settings(max_examples=3_000, deadline=None)
@given(_utc_like())
def test_the_fast_shape_reads_exactly_as_the_general_parser(text: str) -> None:
    general = _parse_iso(text)
    assert parse_ns(text) == (None if general is None else general[0])
