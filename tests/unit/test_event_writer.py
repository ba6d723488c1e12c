"""The event writer: the outbox text of a new event, and the event read back from it.

A consumer handed the writer's event must get exactly what decoding the stored row gives
(a redelivery after a crash gets that), whatever the item holds: plain JSON, typed values,
big integers, non-ASCII and control characters, a NaN outside the fingerprint.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import uuid
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.model.events import Event, EventWriter, event_from_json, event_to_json
from watukuy.model.json import is_plain


class Colour(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


class Name(str):
    pass


@dataclasses.dataclass
class Point:
    x: int
    y: int


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)

TYPED = [
    dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    dt.date(2026, 1, 2),
    ("a", 1),
    Colour.RED,
    Size.BIG,
    Name("subclass"),
    uuid.UUID(int=7),
    Decimal("1.50"),
    Point(1, 2),
    {1: "int key"},
    {"nested": [{"when": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}]},
    float("nan"),
    {"x": float("inf")},
]

WRITER = EventWriter(
    source="urn:watukuy:orders",
    poller="orders",
    partition='tenant "a"\\b',
    lane="live",
    time="2026-01-01T00:00:00.000Z",
)


def _written(data: Any, previous: Any = None, subject: str = "o1") -> tuple[str, Event[Any]]:
    return WRITER.write("ab" * 32, "updated", subject, 42, data, previous)


def _reference(data: Any, previous: Any, subject: str) -> Event[Any]:
    return Event(
        id="ab" * 32,
        type="updated",
        source="urn:watukuy:orders",
        subject=subject,
        time="2026-01-01T00:00:00.000Z",
        poller="orders",
        partition='tenant "a"\\b',
        lane="live",
        sequence=42,
        data=data,
        previous=previous,
    )


def _same(a: Any, b: Any) -> bool:
    """Equal, type for type (so ``1`` is not ``1.0`` and ``True`` is not ``1``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(JSON, JSON, st.text())
def test_the_event_is_what_its_text_reads_back_as(data: Any, previous: Any, subject: str) -> None:
    text, event = _written(data, previous, subject)
    assert text == event_to_json(_reference(data, previous, subject))
    stored = event_from_json(text)
    assert stored == event
    assert _same(stored.data, event.data)
    assert _same(stored.previous, event.previous)


def test_typed_values_are_read_back_from_their_text() -> None:
    for value in TYPED:
        item = {"id": "o1", "value": value}
        text, event = _written(item, value)
        assert text == event_to_json(_reference(item, value, "o1"))
        stored = event_from_json(text)
        assert _same(stored.data, event.data), value
        assert _same(stored.previous, event.previous), value
        # Never the typed value itself: the consumer gets JSON data, as a redelivery would.
        assert event.data is not item


def test_plain_items_are_handed_on_as_they_are() -> None:
    item = {"id": "o1", "lines": [{"qty": 2, "price": 4.5}], "note": None, "paid": False}
    _, event = _written(item)
    assert event.data is item


def test_is_plain_says_no_to_anything_that_reads_back_otherwise() -> None:
    for value in TYPED:
        assert not is_plain(value), value
        assert not is_plain({"id": "o1", "value": value}), value
    assert is_plain({"a": [1, 2.5, "x", None, True, {"b": []}]})
    assert is_plain(2**80)  # read back exactly: the big-integer path keeps it an int
    assert not is_plain([[[]] * 2, (1,)])


def test_is_plain_gives_up_on_values_nested_too_deep() -> None:
    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    assert not is_plain(deep)
