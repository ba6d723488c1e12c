"""The structured-field parser (RFC 9651) behind the IETF rate-limit headers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.http import parse_rate_limit
from watukuy.http._sfv import (
    DisplayString,
    InnerList,
    Item,
    SfvError,
    Token,
    parse_dictionary,
    parse_list,
)
from watukuy.model.rows import RateLimitInfo
from watukuy.scheduler import pacing_delay

NOW = 1_700_000_000_000
DAY_MS = 86_400_000


def test_a_list_of_named_items_with_parameters() -> None:
    members = parse_list('"burst";r=5;t=1, "day";r=900;t=3600, default;q=1.5')
    assert members == [
        Item("burst", {"r": 5, "t": 1}),
        Item("day", {"r": 900, "t": 3600}),
        Item(Token("default"), {"q": 1.5}),
    ]
    assert isinstance(members[2], Item)
    assert isinstance(members[2].value, Token)


def test_every_bare_item_type() -> None:
    [member] = parse_list('?1;a=-42;b="x\\"y";c=:aGk=:;d=@1700000000;e=%"caf%c3%a9";f;g=?0')
    assert member == Item(
        True,
        {
            "a": -42,
            "b": 'x"y',
            "c": b"hi",
            "d": 1_700_000_000,
            "e": DisplayString("café"),
            "f": True,
            "g": False,
        },
    )


def test_inner_lists_and_a_dictionary() -> None:
    assert parse_list('("a" b);p=1, c') == [
        InnerList((Item("a"), Item(Token("b"))), {"p": 1}),
        Item(Token("c")),
    ]
    assert parse_dictionary("limit=100, remaining=50, reset=30, flag") == {
        "limit": Item(100),
        "remaining": Item(50),
        "reset": Item(30),
        "flag": Item(True),
    }


@pytest.mark.parametrize(
    "text",
    [
        '"unterminated',
        "a,",
        "a b",
        "1234567890123456",
        "1.2345",
        "1.",
        "1234567890123.5",
        '"\\x"',
        "?2",
        ":not base64",
        "(a b",
        '"caf\u00e9"',
        "a;B=1",
        '%"bad%zz"',
        "@1.5",
    ],
)
def test_invalid_lists_fail(text: str) -> None:
    with pytest.raises(SfvError):
        parse_list(text)


@given(st.text())
@settings(max_examples=300)
def test_any_text_parses_or_fails_cleanly(text: str) -> None:
    for parse in (parse_list, parse_dictionary):
        try:
            parse(text)
        except SfvError:
            pass


# --- the strictest policy ---------------------------------------------------------------


def test_two_policies_the_daily_one_is_stricter() -> None:
    headers = {"RateLimit": '"burst";r=5;t=1, "day";r=900;t=3600'}
    info = parse_rate_limit(headers, NOW)
    assert info == RateLimitInfo(remaining=900, reset_at=NOW + 3_600_000, source="ietf")
    assert pacing_delay(info, NOW) == 4_000  # not the burst's 200 ms


def test_two_policies_the_burst_is_stricter_when_it_is_spent() -> None:
    policy = '"burst";q=10;w=1, "day";q=1000;w=86400'
    headers = {"RateLimit": '"burst";r=0;t=10, "day";r=900;t=3600', "RateLimit-Policy": policy}
    info = parse_rate_limit(headers, NOW)
    assert info == RateLimitInfo(
        limit=10, remaining=0, reset_at=NOW + 10_000, policy=policy, source="ietf"
    )


def test_policies_alone_report_the_one_with_the_lowest_rate() -> None:
    policy = '"burst";q=100;w=1, "day";q=1000;w=86400'
    info = parse_rate_limit({"RateLimit-Policy": policy}, NOW)
    assert info == RateLimitInfo(limit=1000, policy=policy, source="ietf")


HEADER_NAMES = st.sampled_from(
    [
        "RateLimit",
        "RateLimit-Policy",
        "RateLimit-Limit",
        "RateLimit-Remaining",
        "RateLimit-Reset",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "X-RateLimit-Reset-After",
    ]
)
NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.from_regex(r"-?[0-9]{1,40}(\.[0-9]{1,5})?", fullmatch=True),
)
STRUCTURED = st.lists(
    st.tuples(
        st.sampled_from(['"burst"', '"day"', "default", "", '"x"']),
        st.lists(st.tuples(st.sampled_from(["r", "t", "q", "w", "limit", "reset"]), NUMBERS)),
    ),
    max_size=4,
).map(
    lambda members: ", ".join(
        name + "".join(f";{key}={value}" for key, value in params) for name, params in members
    )
)
VALUES = st.one_of(st.text(), NUMBERS, STRUCTURED)


@given(st.dictionaries(HEADER_NAMES, VALUES), st.integers(0, 10**15))
@settings(max_examples=300)
def test_garbage_never_raises_and_never_gives_a_negative_or_unbounded_wait(
    headers: dict[str, str], now: int
) -> None:
    info = parse_rate_limit(headers, now)
    if info is None:
        return
    for value in (info.limit, info.remaining):
        assert value is None or 0 <= value < 2**53
    if info.reset_at is not None:
        assert info.reset_at <= now + DAY_MS
    wait = pacing_delay(info, now)
    assert wait is None or 0 < wait <= DAY_MS
