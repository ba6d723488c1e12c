"""Rate-limit headers and ``Retry-After``: every family, exact results, and fuzzing."""

from __future__ import annotations

import email.utils

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.http import parse_rate_limit, parse_retry_after
from watukuy.model.rows import RateLimitInfo

NOW = 1_700_000_000_000


def http_date(ms: int) -> str:
    return email.utils.formatdate(ms / 1_000, usegmt=True)


# --- IETF structured fields -------------------------------------------------------------


def test_ietf_ratelimit_with_its_policy() -> None:
    headers = {"RateLimit": '"default";r=50;t=30', "RateLimit-Policy": '"default";q=100;w=60'}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(
        limit=100,
        remaining=50,
        reset_at=NOW + 30_000,
        policy='"default";q=100;w=60',
        source="ietf",
    )


def test_ietf_tolerates_spaces_and_a_missing_name() -> None:
    assert parse_rate_limit({"RateLimit": "r=5 ; t=2"}, NOW) == RateLimitInfo(
        remaining=5, reset_at=NOW + 2_000, source="ietf"
    )


def test_ietf_ignores_unknown_keys_and_quoted_separators() -> None:
    headers = {
        "RateLimit": '"burst"; r=7; t=12; pk=:cHsdsRa894==:; foo="bar;baz"',
        "RateLimit-Policy": '"burst";q=20;qu="requests";w=10;pk=:cHsdsRa894==:',
    }
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(
        limit=20,
        remaining=7,
        reset_at=NOW + 12_000,
        policy='"burst";q=20;qu="requests";w=10;pk=:cHsdsRa894==:',
        source="ietf",
    )


def test_ietf_the_policy_named_by_ratelimit_wins() -> None:
    policy = '"burst";q=100;w=60, "daily";q=1000;w=86400'
    info = parse_rate_limit({"RateLimit": '"daily";r=10;t=100', "RateLimit-Policy": policy}, NOW)
    assert info == RateLimitInfo(
        limit=1000, remaining=10, reset_at=NOW + 100_000, policy=policy, source="ietf"
    )


def test_ietf_falls_back_to_the_first_policy() -> None:
    headers = {"RateLimit": '"other";r=1;t=1', "RateLimit-Policy": '"a";q=11;w=1, "b";q=22;w=2'}
    info = parse_rate_limit(headers, NOW)
    assert info is not None
    assert info.limit == 11


def test_ietf_older_dictionary_form() -> None:
    assert parse_rate_limit({"RateLimit": "limit=100, remaining=50, reset=30"}, NOW) == (
        RateLimitInfo(limit=100, remaining=50, reset_at=NOW + 30_000, source="ietf")
    )


def test_ietf_policy_alone_gives_the_limit() -> None:
    assert parse_rate_limit({"RateLimit-Policy": '"p";q=42;w=60'}, NOW) == RateLimitInfo(
        limit=42, policy='"p";q=42;w=60', source="ietf"
    )


def test_ietf_fractional_reset_is_rounded_to_milliseconds() -> None:
    info = parse_rate_limit({"RateLimit": "r=1;t=1.5"}, NOW)
    assert info is not None
    assert info.reset_at == NOW + 1_500


def test_ietf_takes_priority_over_legacy_and_vendor() -> None:
    headers = {"RateLimit": "r=1;t=1", "RateLimit-Remaining": "99", "X-RateLimit-Remaining": "77"}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(
        remaining=1, reset_at=NOW + 1_000, source="ietf"
    )


def test_an_empty_ietf_header_falls_through_to_legacy() -> None:
    headers = {"RateLimit": '"name";foo=bar', "RateLimit-Remaining": "3"}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(remaining=3, source="legacy")


# --- legacy triple ----------------------------------------------------------------------


def test_legacy_triple() -> None:
    headers = {"RateLimit-Limit": "100", "RateLimit-Remaining": "20", "RateLimit-Reset": "45"}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(
        limit=100, remaining=20, reset_at=NOW + 45_000, source="legacy"
    )


def test_legacy_takes_the_leading_number_of_a_quota_policy() -> None:
    assert parse_rate_limit({"RateLimit-Limit": "100, 100;w=60"}, NOW) == RateLimitInfo(
        limit=100, source="legacy"
    )


def test_legacy_partial_triple() -> None:
    assert parse_rate_limit({"RateLimit-Reset": "10"}, NOW) == RateLimitInfo(
        reset_at=NOW + 10_000, source="legacy"
    )


# --- vendor headers ---------------------------------------------------------------------


def test_vendor_delta_reset() -> None:
    headers = {
        "X-RateLimit-Limit": "5000",
        "X-RateLimit-Remaining": "4999",
        "X-RateLimit-Reset": "60",
    }
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(
        limit=5000, remaining=4999, reset_at=NOW + 60_000, source="vendor"
    )


def test_vendor_epoch_seconds_reset() -> None:
    reset = NOW // 1_000 + 3_600
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(
        remaining=0, reset_at=reset * 1_000, source="vendor"
    )


def test_vendor_epoch_milliseconds_reset() -> None:
    assert parse_rate_limit({"X-RateLimit-Reset": str(NOW + 5_000)}, NOW) == RateLimitInfo(
        reset_at=NOW + 5_000, source="vendor"
    )


def test_vendor_drops_an_epoch_older_than_a_day() -> None:
    stale = NOW // 1_000 - 2 * 86_400
    headers = {"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": str(stale)}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(remaining=1, source="vendor")


def test_vendor_x_rate_limit_spelling() -> None:
    headers = {
        "X-Rate-Limit-Limit": "10",
        "X-Rate-Limit-Remaining": "9",
        "X-Rate-Limit-Reset": "30",
    }
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(
        limit=10, remaining=9, reset_at=NOW + 30_000, source="vendor"
    )


def test_vendor_reset_after_is_preferred() -> None:
    headers = {"X-RateLimit-Reset": str(NOW // 1_000 + 9_999), "X-RateLimit-Reset-After": "2.5"}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(reset_at=NOW + 2_500, source="vendor")


def test_fractional_counts_are_truncated() -> None:
    headers = {"X-RateLimit-Limit": "10.9", "X-RateLimit-Remaining": "0.5"}
    assert parse_rate_limit(headers, NOW) == RateLimitInfo(limit=10, remaining=0, source="vendor")


# --- robustness -------------------------------------------------------------------------


def test_names_are_case_insensitive_in_any_mapping_or_pairs() -> None:
    expected = RateLimitInfo(remaining=4, source="vendor")
    assert parse_rate_limit({"X-RATELIMIT-REMAINING": "4"}, NOW) == expected
    assert parse_rate_limit([("x-ratelimit-remaining", "4")], NOW) == expected
    assert parse_rate_limit(httpx.Headers({"X-RateLimit-Remaining": "4"}), NOW) == expected


def test_repeated_ratelimit_policy_fields_combine() -> None:
    headers = httpx.Headers(
        [
            ("RateLimit", '"daily";r=3;t=9'),
            ("RateLimit-Policy", '"burst";q=5;w=1'),
            ("RateLimit-Policy", '"daily";q=500;w=86400'),
        ]
    )
    info = parse_rate_limit(headers, NOW)
    assert info is not None
    assert (info.limit, info.remaining) == (500, 3)


def test_nothing_usable_gives_none() -> None:
    assert parse_rate_limit({"content-type": "text/plain"}, NOW) is None
    assert parse_rate_limit({}, NOW) is None
    garbage = {
        "X-RateLimit-Limit": "unlimited",
        "X-RateLimit-Remaining": "n/a",
        "X-RateLimit-Reset": "soon",
    }
    assert parse_rate_limit(garbage, NOW) is None
    assert parse_rate_limit({"X-RateLimit-Remaining": "-1"}, NOW) is None
    assert parse_rate_limit({"X-RateLimit-Remaining": "9" * 400}, NOW) is None


@pytest.mark.parametrize(
    "value", ['", ;;;=;"unterminated', "=;=;=", ";;;", '"\\"escaped\\"";r=;t=abc', "   ", '"']
)
def test_malformed_structured_fields_never_raise(value: str) -> None:
    assert parse_rate_limit({"RateLimit": value, "RateLimit-Policy": value}, NOW) is None


RATE_LIMIT_HEADERS = st.sampled_from(
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
        "X-Rate-Limit-Reset",
    ]
)
HEADER_TEXT = st.one_of(
    st.text(),
    st.text(alphabet='0123456789.;=,"\\ rtqwlimitremaining-:'),
    st.from_regex(r"[0-9]{1,400}(\.[0-9]{1,30})?", fullmatch=True),
)


@given(st.dictionaries(RATE_LIMIT_HEADERS, HEADER_TEXT), st.integers(0, 10**15))
def test_fuzz_rate_limit_never_raises(headers: dict[str, str], now: int) -> None:
    info = parse_rate_limit(headers, now)
    if info is not None:
        assert info.source in ("ietf", "legacy", "vendor")
        for value in (info.limit, info.remaining, info.reset_at):
            assert value is None or (isinstance(value, int) and value >= 0)


@given(st.integers(0, 10**9), st.integers(0, 10**6))
def test_fuzz_ietf_numbers_round_trip(remaining: int, seconds: int) -> None:
    info = parse_rate_limit({"RateLimit": f'"p";r={remaining};t={seconds}'}, NOW)
    # A reset more than a day away is read as one day.
    reset_at = NOW + min(seconds, 86_400) * 1_000
    assert info == RateLimitInfo(remaining=remaining, reset_at=reset_at, source="ietf")


# --- Retry-After ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("120", 120.0), (" 7 ", 7.0), ("0", 0.0), ("1.5", 1.5), ("0.25", 0.25), ("+3", 3.0)],
)
def test_retry_after_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value, NOW) == seconds


def test_retry_after_http_date_in_the_future() -> None:
    assert parse_retry_after(http_date(NOW + 90_000), NOW) == 90.0
    # Dates have whole seconds; the wait is measured from the exact millisecond.
    assert parse_retry_after(http_date(NOW + 90_000), NOW + 250) == 89.75


def test_retry_after_obsolete_date_formats() -> None:
    now = 784_111_777_000 - 10_000  # ten seconds before Sun, 06 Nov 1994 08:49:37 GMT
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now) == 10.0
    assert parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now) == 10.0
    assert parse_retry_after("Sun Nov  6 08:49:37 1994", now) == 10.0


def test_retry_after_past_date_is_zero() -> None:
    assert parse_retry_after(http_date(NOW - 90_000), NOW) == 0.0


@pytest.mark.parametrize("value", ["soon", "5 seconds", "-5", "", "   ", "1e5", "Mon, 99 Foo 2020"])
def test_retry_after_garbage_is_none(value: str) -> None:
    assert parse_retry_after(value, NOW) is None


def test_retry_after_absent_is_none() -> None:
    assert parse_retry_after(None, NOW) is None


@given(
    st.one_of(st.text(), st.from_regex(r"[A-Za-z]{3}, [0-9]{1,2} [A-Za-z]{3} [0-9]{1,6} .*")),
    st.integers(0, 10**15),
)
def test_fuzz_retry_after_never_raises(value: str, now: int) -> None:
    seconds = parse_retry_after(value, now)
    assert seconds is None or 0 <= seconds <= 86_400


@given(st.integers(0, 10**7), st.integers(0, 999))
def test_fuzz_retry_after_numbers(whole: int, fraction: int) -> None:
    # Never more than a day.
    expected = min(86_400.0, float(f"{whole}.{fraction:03d}"))
    assert parse_retry_after(f"{whole}.{fraction:03d}", NOW) == expected


@pytest.mark.parametrize(
    "value", [str(2**70), "99999999999999999999.5", "Fri, 31 Dec 9999 23:59:59 GMT"]
)
def test_absurd_retry_after_is_read_as_one_day(value: str) -> None:
    assert parse_retry_after(value, NOW) == 86_400.0
