"""Differential properties: our canonical JSON against the rfc8785 package and against our
own reference writer, on generated JSON data."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import orjson
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watukuy.diff import (
    canonical,
    canonical_json,
    content_hash,
    format_number,
    reference_json,
)

PROPERTY_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

EDGE_FLOATS = [
    0.0,
    1e21,
    1e20,
    9.999999999999999e20,
    1e16,
    1e15 + 0.5,
    2.0**53,
    100.0,
    0.1,
    123.45,
    1e-5,
    9.99e-6,
    1e-6,
    9.999999999999997e-7,
    1e-7,
    5e-324,
    1.7976931348623157e308,
]
floats = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(EDGE_FLOATS)
    | st.sampled_from(EDGE_FLOATS).map(lambda x: -x)
)
safe_ints = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
any_ints = safe_ints | st.integers(min_value=-(2**80), max_value=2**80)

# Characters around every boundary the writers care about: escapes, UTF-8 lengths, the
# U+E000..U+FFFF block whose order differs from UTF-16 order against supplementary ones.
TRICKY = [
    "a", "Z", "0", "1", ".", "e", "+", "-", ",", "]", "}", ":", "n", "u", "l",
    "\x00", "\x08", "\x1f", "\x7f", '"', "\\", "/", "é", "\u2028", "\u20ac", "\ud7ff",
    "\ue000", "\ufb33", "\ufeff", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff",
]  # fmt: skip
texts = st.text() | st.text(alphabet=st.sampled_from(TRICKY), max_size=8)
# Strings that look like the number tokens and nulls the fast path scans for.
decoys = st.sampled_from(['x":1.0,"y', "e+5,", "e-6]", "null", ".0}", "0.0000001", "1e21"])


def json_values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=5) | st.dictionaries(texts | decoys, children, max_size=5)
        ),
        max_leaves=30,
    )


plain_scalars = st.none() | st.booleans() | safe_ints | floats | texts | decoys
plain_json = json_values(plain_scalars)
wide_json = json_values(st.none() | st.booleans() | any_ints | floats | texts | decoys)
risky_json = json_values(
    st.none()
    | st.booleans()
    | safe_ints
    | floats
    | st.sampled_from([math.nan, math.inf, -math.inf])
)


def has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite(item) for item in value.values())
    if isinstance(value, list):
        return any(has_non_finite(item) for item in value)
    return False


@PROPERTY_SETTINGS
@given(plain_json)
def test_matches_the_rfc8785_package(value: Any) -> None:
    expected = rfc8785.dumps(value)
    assert canonical_json(value) == expected
    assert reference_json(value) == expected


@PROPERTY_SETTINGS
@given(wide_json)
def test_every_path_matches_the_reference_writer(value: Any) -> None:
    expected = reference_json(value)
    assert canonical_json(value) == expected
    assert canonical._slow(value) == expected
    if isinstance(value, dict | list):
        try:
            fast = canonical._fast(value)
        except TypeError:
            fast = None
        assert fast is None or fast == expected


@PROPERTY_SETTINGS
@given(st.dictionaries(st.text(alphabet=st.sampled_from(TRICKY), max_size=4), safe_ints))
def test_keys_sort_by_utf16_code_units(value: dict[str, int]) -> None:
    expected = rfc8785.dumps(value)
    assert canonical_json(value) == expected
    assert canonical_json(dict(reversed(list(value.items())))) == expected
    assert list(json.loads(expected)) == sorted(value, key=lambda k: k.encode("utf-16-be"))


@PROPERTY_SETTINGS
@given(risky_json)
def test_non_finite_numbers_are_always_rejected(value: Any) -> None:
    if has_non_finite(value):
        try:
            canonical_json(value)
        except ValueError:
            return
        raise AssertionError("a NaN or Infinity was hashed instead of rejected")
    assert canonical_json(value) == reference_json(value)


@PROPERTY_SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_number_matches_rfc8785_and_round_trips(number: float) -> None:
    text = format_number(number)
    assert text == rfc8785.dumps(number).decode()
    assert float(text) == number


@PROPERTY_SETTINGS
@given(st.integers(min_value=-(2**200), max_value=2**200))
def test_integers_are_written_as_the_double_javascript_parses(number: int) -> None:
    text = format_number(number)
    if abs(number) <= 2**53:
        assert text == str(number)
    else:
        assert float(text) == float(number)
        assert text == format_number(float(number))


def outcome(write: Any, value: Any) -> Any:
    """What ``write(value)`` returns, or the type of the error it raises."""
    try:
        return write(value)
    except (ValueError, TypeError) as error:
        return type(error)


@PROPERTY_SETTINGS
@given(wide_json | risky_json)
def test_content_hash_is_the_hash_of_canonical_json(value: Any) -> None:
    # content_hash carries its own copy of the fast path; it must never drift from it.
    expected = outcome(canonical_json, value)
    if isinstance(expected, bytes):
        expected = hashlib.sha256(expected).hexdigest()
    assert outcome(content_hash, value) == expected


@PROPERTY_SETTINGS
@given(plain_json)
def test_the_fast_path_accepts_exactly_what_its_checks_prove(value: Any) -> None:
    if not isinstance(value, dict | list):
        return
    try:
        out = orjson.dumps(value, option=canonical._OPTIONS)
    except TypeError:
        return
    # Integral floats (orjson "4.0", JCS "4") are fixed in the text when that is provable.
    fixed = (
        out
        if canonical._integral_or_tiny(out) is None
        else canonical._integral_floats_fixed(value, out)
    )
    proved = (
        fixed is not None and canonical._numbers_agree(fixed) and canonical._keys_in_order(fixed)
    )
    fast = canonical._fast(value)
    assert fast is None or fast == fixed
    if fast is not None and all(math.isfinite(x) for x in _floats(value)):
        assert fast == reference_json(value)
    if b"null" not in out:
        assert (fast is not None) == proved
    elif fast is not None:
        assert proved


def _floats(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [x for item in value.values() for x in _floats(item)]
    if isinstance(value, list | tuple):
        return [x for item in value for x in _floats(item)]
    return [value] if isinstance(value, float) else []


# Items of one feed: the same few keys, often None, now and then NaN or Infinity. Hashed one
# after the other, so whatever the fast path remembers from one item meets the next.
feed_items = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]),
    st.none()
    | st.sampled_from([1.5, 100.0, "null", math.nan, math.inf, -math.inf])
    | st.lists(st.none() | st.sampled_from([2.5, math.nan]), max_size=2),
    max_size=4,
)


@PROPERTY_SETTINGS
@given(st.lists(feed_items, min_size=2, max_size=8))
def test_a_feed_of_similar_items_is_hashed_exactly(items: list[dict[str, Any]]) -> None:
    for item in items:
        if has_non_finite(item):
            assert outcome(canonical_json, item) is ValueError
            assert outcome(content_hash, item) is ValueError
        else:
            expected = reference_json(item)
            assert canonical_json(item) == expected
            assert content_hash(item) == hashlib.sha256(expected).hexdigest()
