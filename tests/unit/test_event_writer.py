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

from hypothesis import example, given, settings
from hypothesis import strategies as st

from watukuy.model.events import (
    Event,
    EventWriter,
    WrittenPage,
    event_from_json,
    event_to_json,
)


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
    text, written = WRITER.write("ab" * 32, "updated", subject, 42, data, previous)
    return text, WRITER.read(written)


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
# An integer beyond 64 bits sends a value the slow way; a small float next to it must read
# the same as orjson writes it (``0.00001``, not the standard library's ``1e-05``).
@example(-9_223_372_036_854_775_809, 1e-05, "")
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


def test_every_reading_is_a_copy_of_its_own() -> None:
    item = {"id": "o1", "lines": [{"qty": 2, "price": 4.5}], "note": None, "paid": False}
    _, written = WRITER.write("ab" * 32, "created", "o1", 1, item, None)
    page = WrittenPage(WRITER, [written])
    first, second = page.event(0), page.event(0)
    assert first == second
    assert first.data == item
    # A handler that changes its event's data changes nothing a later reading gets.
    assert first.data is not item
    assert first.data is not second.data
    assert page.subject(0) == "o1"
    assert len(page) == 1
