"""How the fast path accounts for "null"s: orjson writes NaN and Infinity as null, so every
"null" it writes must be traced to a None before its text can be trusted."""

from __future__ import annotations

import enum
import hashlib
import math
from typing import Any

import pytest

from watukuy.diff import canonical, canonical_json, content_hash, reference_json

NAN = math.nan
INF = math.inf


class Sentinel(enum.Enum):
    """A null-object enum that claims to equal None, as some codebases write them."""

    NOTHING = 0

    def __eq__(self, other: object) -> bool:
        return other is None or other is self

    __hash__ = enum.Enum.__hash__


def rejected(value: Any) -> None:
    with pytest.raises(ValueError, match="NaN and Infinity are rejected"):
        canonical_json(value)
    with pytest.raises(ValueError, match="NaN and Infinity are rejected"):
        content_hash(value)


def accepted(value: Any) -> bytes:
    """The canonical bytes, after checking both entry points and the fast path agree."""
    out = canonical_json(value)
    assert out == reference_json(value)
    assert content_hash(value) == hashlib.sha256(out).hexdigest()
    assert canonical._fast(value) == out
    return out


def remember(*keys: str) -> None:
    """Leave the fast path remembering ``keys`` as the None members of the last item."""
    canonical_json({"\x7fforget": None})
    canonical_json(dict.fromkeys(keys))
    assert canonical._none_keys == keys


def test_sentinel_really_claims_to_equal_none() -> None:
    assert Sentinel.NOTHING == None  # noqa: E711 - the point of the test
    assert Sentinel.NOTHING is not None


@pytest.mark.parametrize(
    "value",
    [
        {"s": Sentinel.NOTHING, "x": NAN},
        {"x": INF, "s": Sentinel.NOTHING},
        [Sentinel.NOTHING, NAN],
        [-INF, Sentinel.NOTHING, Sentinel.NOTHING, None],
    ],
)
def test_an_object_claiming_to_equal_none_does_not_hide_a_nan(value: Any) -> None:
    # orjson writes the enum as 0 and the NaN as null: only a None counts for that null.
    rejected(value)


def test_the_remembered_none_key_is_checked_by_identity() -> None:
    remember("s")
    rejected({"s": Sentinel.NOTHING, "x": NAN})
    remember("s", "t")
    rejected({"s": Sentinel.NOTHING, "t": None, "x": NAN})


def test_a_lone_null_is_traced_to_the_remembered_key() -> None:
    remember("x")
    assert accepted({"b": 1, "a": None, "c": None}) == b'{"a":null,"b":1,"c":null}'
    assert canonical._none_keys == ("a", "c")
    # One null, and "a" is None: that member is the null, whatever else the value holds.
    assert accepted({"a": None, "c": 2.5, "d": "x"}) == b'{"a":null,"c":2.5,"d":"x"}'
    assert canonical._none_keys == ("a", "c")  # a hit teaches nothing new


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.5, "b": NAN},  # the remembered key holds something else
        {"b": NAN},  # the remembered key is absent
        {"a": None, "b": NAN},  # the remembered key is None, but there are two nulls
        {"a": None, "c": None, "b": INF},
        {"a": None, "c": {"d": NAN}},
    ],
)
def test_a_stale_memory_never_accepts_a_nan(value: Any) -> None:
    remember("a", "c")
    rejected(value)
    remember("a")
    rejected(value)


def test_the_memory_follows_the_items() -> None:
    remember("x")
    accepted({"a": None, "b": 1})
    assert canonical._none_keys == ("a",)
    accepted({"a": 1, "b": None, "c": None})
    assert canonical._none_keys == ("b", "c")
    accepted({"b": None, "c": None, "d": [1.5]})
    assert canonical._none_keys == ("b", "c")
    # Lists, nested Nones and nulls inside strings leave it alone.
    accepted([None, 2.5])
    accepted({"b": {"c": None}})
    accepted({"b": "null", "c": None})
    assert canonical._none_keys == ("b", "c")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"note": "null", "a": None}, b'{"a":null,"note":"null"}'),
        (
            {"a": None, "b": [None, {"c": None}], "d": 1.5},
            b'{"a":null,"b":[null,{"c":null}],"d":1.5}',
        ),
        ([None, {"a": None}, None], b'[null,{"a":null},null]'),
        ({"nullable": None}, b'{"nullable":null}'),
    ],
)
def test_nulls_the_top_level_cannot_explain_are_proved_by_walking(
    value: Any, expected: bytes
) -> None:
    assert accepted(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"note": "null", "a": NAN},
        {"a": None, "b": [None, {"c": NAN}]},
        [None, {"a": None}, INF],
        [None, [NAN]],
    ],
)
def test_nans_next_to_unexplained_nulls_are_found_by_the_walk(value: Any) -> None:
    rejected(value)
