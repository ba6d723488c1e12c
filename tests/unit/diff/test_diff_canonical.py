"""Canonical JSON and content hashes: known vectors, RFC 8785 samples, errors, typed values."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import math
import struct
import uuid
from decimal import Decimal
from typing import Any

import msgspec
import pydantic
import pytest
import rfc8785

from watukuy.diff import canonical, canonical_json, content_hash, format_number, reference_json
from watukuy.model.json import to_jsonable

NAN = float("nan")
INF = float("inf")

# An order as an ERP would send it: the shape the fast path is built for.
ORDER: dict[str, Any] = {
    "id": "ord_000123",
    "customer": "Acme Logística S.A.",
    "status": "paid",
    "quantity": 3,
    "price": 123.45,
    "paid": True,
    "coupon": None,
    "address": {"street": "Av. Arequipa 1234", "city": "Lima", "zip": "15001"},
    "lines": [
        {"sku": "A-1", "qty": 1, "unit_price": 10.5},
        {"sku": "B-2", "qty": 2, "unit_price": 20.25},
    ],
    "updated_at": "2026-01-02T03:04:05.006Z",
}


def both_writers(value: Any) -> bytes:
    """canonical_json(value), after checking the reference writer agrees."""
    out = canonical_json(value)
    assert reference_json(value) == out
    return out


# --- vectors shared with the original ------------------------------------------------------


def test_content_hash_vectors() -> None:
    assert content_hash({"a": 1}) == (
        "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
    )
    assert content_hash(None) == (
        "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"
    )


def test_content_hash_is_sha256_of_the_canonical_bytes() -> None:
    assert content_hash(ORDER) == hashlib.sha256(canonical_json(ORDER)).hexdigest()
    assert content_hash({"b": [1.0, {"y": 2, "x": 1e21}], "a": "x"}) == content_hash(
        {"a": "x", "b": [1, {"x": 1e21, "y": 2}]}
    )
    assert content_hash({"a": 1}) != content_hash({"a": "1"})
    assert content_hash([1, 2]) != content_hash([2, 1])


def test_rfc8785_serialization_sample() -> None:
    # RFC 8785 section 3.2.2; the RFC writes the first number as 333333333.33333329, which
    # is the same double.
    value = {
        "numbers": [333333333.3333333, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": '\u20ac$\u000f\nA\'B"\\\\"/',
        "literals": [None, True, False],
    }
    assert (
        both_writers(value)
        == (
            '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
            '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        ).encode()
    )


def test_rfc8785_key_order_sample() -> None:
    # RFC 8785 section 3.2.3: keys sort by UTF-16 code units, so the emoji (a surrogate
    # pair starting 0xD83D) comes before U+FB33 although its code point is larger.
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    ).encode()
    assert both_writers(value) == expected
    assert rfc8785.dumps(value) == expected
    # orjson sorts this object by code point, so the fast path must have declined it.
    assert canonical._fast(value) is None


# RFC 8785 appendix B: IEEE 754 bits -> JCS text.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_rfc8785_number_vectors(bits: str, expected: str) -> None:
    number = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert format_number(number) == expected
    assert both_writers(number) == expected.encode()
    assert both_writers({"n": number, "k": None}) == f'{{"k":null,"n":{expected}}}'.encode()


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e16, "10000000000000000"),
        (123456789012345680.0, "123456789012345680"),
        (0.000001, "0.000001"),
        (0.0000015, "0.0000015"),
        (9.5e-6, "0.0000095"),
        (1e-7, "1e-7"),
        (5e-7, "5e-7"),
        (1.0, "1"),
        (100.0, "100"),
        (-0.0, "0"),
        (0.0, "0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (-1.5, "-1.5"),
        (123.45, "123.45"),
        (1.5e300, "1.5e+300"),
        (-2.5e-8, "-2.5e-8"),
    ],
)
def test_numbers_are_written_like_javascript(number: float, expected: str) -> None:
    assert format_number(number) == expected
    assert both_writers([number]) == f"[{expected}]".encode()


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (0, "0"),
        (-7, "-7"),
        (2**53 - 1, "9007199254740991"),
        (2**53, "9007199254740992"),
        (-(2**53), "-9007199254740992"),
        # Beyond 2**53 JSON.parse has already rounded to the nearest double.
        (2**53 + 1, "9007199254740992"),
        (2**64, "18446744073709552000"),
        (-(2**64), "-18446744073709552000"),
        (2**68, "295147905179352830000"),
        (10**21, "1e+21"),
        (123456789012345678901234567890, "1.2345678901234568e+29"),
    ],
)
def test_integers(number: int, expected: str) -> None:
    assert format_number(number) == expected
    assert both_writers({"n": number}) == f'{{"n":{expected}}}'.encode()


def test_rfc8785_package_rejects_integers_beyond_two_to_the_53() -> None:
    # Why the integer vectors above are explicit: the reference package refuses them.
    assert rfc8785.dumps(2**53 - 1) == b"9007199254740991"
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps(2**53)
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps(2**64)


def test_integer_too_large_for_a_double_is_rejected() -> None:
    with pytest.raises(ValueError, match="beyond the range of a JSON number"):
        canonical_json({"n": 10**400})


# --- strings ----------------------------------------------------------------------------------


def test_strings_escape_only_what_jcs_requires() -> None:
    text = 'a"b\\c\x01\x1f\t\n\x08\x0c\r\x7f\u2028/é😀'
    assert (
        both_writers(text) == ('"a\\"b\\\\c\\u0001\\u001f\\t\\n\\b\\f\\r\x7f\u2028/é😀"').encode()
    )
    assert (
        both_writers({text: text}) == b"{" + both_writers(text) + b":" + both_writers(text) + b"}"
    )


@pytest.mark.parametrize(
    "value",
    [
        "\ud800",
        ["ok", "x\udfffy"],
        {"k": {"deep": "\udc00"}},
        {"\ud83d": 1},
        {"a": None, "b": "\ud800"},
    ],
)
def test_lone_surrogates_are_rejected(value: Any) -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        canonical_json(value)


# --- NaN and Infinity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        NAN,
        INF,
        -INF,
        {"a": NAN},
        [INF],
        {"a": None, "b": NAN},  # one null from None, one from NaN
        {"a": None, "b": {"c": -INF}},
        [None, NAN],
        {"x": [1.5, {"y": [None, INF]}]},
        {"a": 100.0, "b": NAN},  # the float check sends this past the fast path first
    ],
)
def test_nan_and_infinity_are_rejected(value: Any) -> None:
    with pytest.raises(ValueError, match="NaN and Infinity are rejected"):
        canonical_json(value)
    with pytest.raises(ValueError):
        content_hash(value)


def test_non_finite_floats_inside_typed_values_are_reported_by_to_jsonable() -> None:
    @dataclasses.dataclass
    class Reading:
        value: float

    class Level(enum.Enum):
        UNKNOWN = NAN

    with pytest.raises(TypeError, match="has no JSON form"):
        canonical_json({"reading": Reading(NAN)})
    with pytest.raises(TypeError, match="has no JSON form"):
        canonical_json({"level": Level.UNKNOWN, "note": None})


# --- structure -----------------------------------------------------------------------------


def test_key_order_and_whitespace() -> None:
    a = {"z": 1, "a": {"d": [1, {"y": 2, "x": 1}], "c": "x"}, "m": None}
    b = {"m": None, "a": {"c": "x", "d": [1, {"x": 1, "y": 2}]}, "z": 1}
    assert (
        both_writers(a)
        == both_writers(b)
        == (b'{"a":{"c":"x","d":[1,{"x":1,"y":2}]},"m":null,"z":1}')
    )
    assert both_writers({"a": [1, 2, {"b": "c d"}]}) == b'{"a":[1,2,{"b":"c d"}]}'


def test_primitives_and_empty_containers() -> None:
    values: list[Any] = [None, True, False, "", 0, [], {}, (), [[]], {"a": {}}]
    assert [both_writers(value) for value in values] == [
        b"null",
        b"true",
        b"false",
        b'""',
        b"0",
        b"[]",
        b"{}",
        b"[]",
        b"[[]]",
        b'{"a":{}}',
    ]


def test_tuples_are_arrays_and_shared_references_are_fine() -> None:
    shared = {"k": 1}
    assert both_writers({"t": (1, (2, 3)), "a": shared, "b": [shared, shared]}) == (
        b'{"a":{"k":1},"b":[{"k":1},{"k":1}],"t":[1,[2,3]]}'
    )


def test_circular_values_are_rejected() -> None:
    loop: dict[str, Any] = {"name": "a"}
    loop["self"] = loop
    with pytest.raises(ValueError, match="circular"):
        canonical_json(loop)
    items: list[Any] = [1]
    items.append(items)
    with pytest.raises(ValueError, match="circular"):
        canonical_json({"items": items})


def test_non_string_keys_follow_to_jsonable() -> None:
    class Color(enum.Enum):
        RED = "red"

    assert both_writers({1: "one", "2": "two"}) == b'{"1":"one","2":"two"}'
    assert both_writers({Color.RED: 1}) == b'{"red":1}'
    with pytest.raises(TypeError, match="keys must be strings"):
        canonical_json({True: 1})
    with pytest.raises(TypeError, match="has no JSON form"):
        canonical_json({"a": object()})


# --- typed values --------------------------------------------------------------------------


class Status(enum.StrEnum):
    PAID = "paid"


class Priority(enum.IntEnum):
    HIGH = 1


class Kind(enum.Enum):
    ORDER = "order"


class OrderModel(pydantic.BaseModel):
    id: str
    total: float
    placed_at: dt.datetime
    status: Status


class OrderStruct(msgspec.Struct):
    id: str
    total: float
    tags: list[str]


@dataclasses.dataclass
class OrderData:
    id: str
    total: Decimal
    ref: uuid.UUID


class Label(str):
    """A str subclass, as some libraries hand out."""


WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)

TYPED: list[Any] = [
    OrderModel(id="o1", total=100.0, placed_at=WHEN, status=Status.PAID),
    OrderStruct(id="o2", total=1e21, tags=["a", "b"]),
    OrderData(id="o3", total=Decimal("10.50"), ref=uuid.UUID(int=7)),
    {"when": WHEN, "day": dt.date(2026, 1, 2), "kind": Kind.ORDER, "price": 12.5},
    {"status": Status.PAID, "priority": Priority.HIGH, Status.PAID: [Priority.HIGH]},
    {"label": Label("x"), Label("k"): Label("v")},
    [OrderData(id="o4", total=Decimal("1"), ref=uuid.UUID(int=1)), None, WHEN],
    {"nested": {"model": OrderStruct(id="o5", total=2.5, tags=[])}, "none": None},
    WHEN,
    Status.PAID,
    Priority.HIGH,
    Decimal("3.14"),
]


@pytest.mark.parametrize("value", TYPED)
def test_typed_values_are_canonicalised_through_to_jsonable(value: Any) -> None:
    plain = to_jsonable(value)
    expected = rfc8785.dumps(plain)
    assert canonical_json(value) == expected
    assert canonical_json(plain) == expected
    assert reference_json(value) == expected


def test_typed_value_vectors() -> None:
    model = OrderModel(id="o1", total=100.0, placed_at=WHEN, status=Status.PAID)
    assert canonical_json(model) == (
        b'{"id":"o1","placed_at":"2026-01-02T03:04:05.006000Z","status":"paid","total":100}'
    )
    assert canonical_json({"k": Kind.ORDER, "p": Priority.HIGH, "s": Status.PAID}) == (
        b'{"k":"order","p":1,"s":"paid"}'
    )


# --- the fast path ---------------------------------------------------------------------------


def test_orjson_behaves_as_the_fast_paths_assume() -> None:
    # If this fails after an orjson upgrade, hashing is still correct (everything takes
    # the reference writer) but much slower: revisit the checks in watukuy.diff.canonical.
    assert canonical.FAST_PATHS is True


def test_fast_path_takes_everyday_items_as_orjson_writes_them() -> None:
    out = canonical._fast(ORDER)
    assert out is not None
    assert out == reference_json(ORDER) == rfc8785.dumps(ORDER)


@pytest.mark.parametrize(
    "value",
    [
        {"n": -0.0},
        {"n": [2.0, -0.0]},
        {"n": [-0.0, 2.0]},
        {"n": [-10.0, -0.0]},
        {"price": 4.0, "note": "0.0000001"},
        {"price": 4.0, "note": "v1.0, then v2.0}"},
        {"price": 4.0, "1.0]": 1},
        [1e16],
        [1e20],
        [1e-6],
        [5.5e-6],
        {"a": None, "b": NAN},
        {"a": [None], "b": None, "c": INF},
        {"\ue000": 1, "\U0001f600": 2},
        {"s": "ab\uffff", "t": "\U00010000"},
    ],
)
def test_fast_path_declines_what_orjson_writes_differently(value: Any) -> None:
    assert canonical._fast(value) is None
    if not any(isinstance(x, float) and not math.isfinite(x) for x in _leaves(value)):
        assert canonical.canonical_json(value) == reference_json(value)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"price": 100.0}, b'{"price":100}'),
        ({"a": [1.0, 2.5, {"b": 3.0}], "c": -7.0}, b'{"a":[1,2.5,{"b":3}],"c":-7}'),
        ({"a": [-10.0, -20.0], "b": 0.0}, b'{"a":[-10,-20],"b":0}'),
        ([0.0, 12345678.0], b"[0,12345678]"),
        ({"s": "x.0", "n": 1.0}, b'{"n":1,"s":"x.0"}'),
        ({"big": 1e15, "n": 2.0}, b'{"big":1000000000000000,"n":2}'),
        # An escaped quote: the strings cannot be told apart by quotes alone.
        ({"s": 'say "4.0"', "n": 4.0}, b'{"n":4,"s":"say \\"4.0\\""}'),
    ],
)
def test_fast_path_writes_integral_floats_as_javascript_does(value: Any, text: bytes) -> None:
    # Whole amounts as floats are everyday data (a price of 4.0): orjson writes "4.0",
    # JCS "4"; the fast path fixes the text instead of walking the value.
    assert canonical._fast(value) == text == reference_json(value) == rfc8785.dumps(value)
    assert canonical.content_hash(value) == hashlib.sha256(text).hexdigest()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"s": "v1.0,beta", "n": 2.0}, b'{"n":2,"s":"v1.0,beta"}'),
        ({"v1.0]": 3.0, "w": ["x.0}"]}, b'{"v1.0]":3,"w":["x.0}"]}'),
        # A backslash: quotes no longer tell strings apart, and the text is parsed back.
        ({"s": "C:\\dir 1.0,", "n": 1.0}, b'{"n":1,"s":"C:\\\\dir 1.0,"}'),
        ({"s": 'say "1.0,"', "n": 1.0}, b'{"n":1,"s":"say \\"1.0,\\""}'),
    ],
)
def test_integral_floats_beside_strings_holding_the_pattern(value: Any, text: bytes) -> None:
    # The edit would reach into the string: the fast path declines, the walk is right.
    assert canonical._fast(value) is None
    assert canonical.canonical_json(value) == text == reference_json(value)
    assert canonical.content_hash(value) == hashlib.sha256(text).hexdigest()


@pytest.mark.parametrize(
    "value",
    [
        {"big": 2**53},
        {"when": WHEN},
        {"s": Label("x")},
        {1: 2},
        {"d": Decimal("1")},
        ["\ud800"],
    ],
)
def test_fast_path_refuses_what_it_cannot_write(value: Any) -> None:
    with pytest.raises(TypeError):
        canonical._fast(value)


def test_fast_path_accepts_nulls_it_can_account_for() -> None:
    value = {"a": None, "b": [None, {"c": None}], "d": 1.5}
    assert canonical._fast(value) == b'{"a":null,"b":[null,{"c":null}],"d":1.5}'
    assert canonical._fast([None, 2.5, None]) == b"[null,2.5,null]"


def test_false_alarms_inside_strings_still_give_the_right_bytes() -> None:
    value: dict[str, Any] = {"note": 'x":1.0,"y', "e": "1e+5,", "n": "null", "m": 2.5}
    assert canonical._fast(value) is None
    assert both_writers(value) == rfc8785.dumps(value)


def test_float_heavy_items_take_the_prepared_path() -> None:
    value = {"a": 100.0, "b": [1.0, 1e21, 1e-7, 0.5, 1e16, 5e-324, -0.0], "c": 2**60}
    with pytest.raises(TypeError):  # the big integer
        canonical._fast(value)
    assert canonical._fast({"a": 100.0, "b": 1e16}) is None  # 1e16: JavaScript writes it plain
    assert canonical._slow(value) == reference_json(value)
    assert canonical_json(value) == (
        b'{"a":100,"b":[1,1e+21,1e-7,0.5,10000000000000000,5e-324,0],"c":1152921504606847000}'
    )
