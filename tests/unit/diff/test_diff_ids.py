"""Event ids and the identity/version texts they are made of."""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.diff import event_id, event_id_material, identity_text, version_text

ORDERS = ("urn:watukuy:orders", "", "o1", "v1", 1, "created")


def test_event_id_vector() -> None:
    assert event_id(*ORDERS) == "5dc9ec28d4ec668a7add37c6a32e916f839cd6d98ee013de30acd06b32599862"


# The same material with the other two types (printf '%s' '<material>' | sha256sum): the
# original watukuy's ids for an update and a delete to version v1, which ids="compat" gives.
UPDATED_V1 = "c3c9840e97dfeab6779f02557662f81cc40aeb80cf21777814cd22a67824c775"
DELETED_V1 = "1b3d0baaecf2f438942aef004455b23d2957986db507bb0f398aa52fd4ff29a7"


def test_update_and_delete_vectors() -> None:
    assert event_id(*ORDERS[:5], "updated") == UPDATED_V1
    assert event_id(*ORDERS[:5], "deleted") == DELETED_V1


def test_revision_zero_is_the_original_material() -> None:
    assert event_id_material(*ORDERS, 0) == event_id_material(*ORDERS)
    assert event_id(*ORDERS, 0) == event_id(*ORDERS)


def test_a_revision_is_appended_as_a_ninth_part() -> None:
    material = event_id_material(*ORDERS[:5], "updated", 3)
    assert material == "watukuy|v1|urn:watukuy:orders||o1|v1|1|updated|3"
    assert event_id(*ORDERS[:5], "updated", 1) == (
        "735250a79e73fafe453c1bb354316065d7c8961809db0a1a2b2dd4ef49314f97"
    )
    ids = {event_id(*ORDERS[:5], "updated", revision) for revision in range(50)}
    assert len(ids) == 50
    # A type that looks like "<type>|<revision>" is escaped: it cannot pose as a revision.
    assert event_id_material(*ORDERS[:5], "updated|3") != material


def test_material_layout() -> None:
    assert event_id_material(*ORDERS) == "watukuy|v1|urn:watukuy:orders||o1|v1|1|created"
    assert event_id(*ORDERS) == hashlib.sha256(event_id_material(*ORDERS).encode()).hexdigest()


def test_separators_and_backslashes_are_escaped() -> None:
    material = event_id_material("urn:watukuy:orders", "", "a|b", "c\\d", 1, "created")
    assert material == "watukuy|v1|urn:watukuy:orders||a\\|b|c\\\\d|1|created"


def test_every_part_changes_the_id() -> None:
    variants = [
        ("urn:watukuy:invoices", "", "o1", "v1", 1, "created"),
        ("urn:watukuy:orders", "acme", "o1", "v1", 1, "created"),
        ("urn:watukuy:orders", "", "o2", "v1", 1, "created"),
        ("urn:watukuy:orders", "", "o1", "v2", 1, "created"),
        ("urn:watukuy:orders", "", "o1", "v1", 2, "created"),
        ("urn:watukuy:orders", "", "o1", "v1", 1, "updated"),
        ("urn:watukuy:orders", "", "o1", "v1", 1, "deleted"),
    ]
    ids = {event_id(*parts) for parts in variants}
    assert len(ids) == len(variants)
    assert event_id(*ORDERS) not in ids


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("a|b", "c"), ("a", "b|c")),
        (("a\\", "|c"), ("a", "\\|c")),
        (("a\\|", "c"), ("a", "\\|c")),
        (("|o1", ""), ("", "|o1")),
    ],
)
def test_no_separator_injection(left: tuple[str, str], right: tuple[str, str]) -> None:
    a = event_id("urn:watukuy:orders", "", left[0], left[1], 1, "created")
    b = event_id("urn:watukuy:orders", "", right[0], right[1], 1, "created")
    assert a != b


parts = st.text(alphabet=st.sampled_from(["a", "|", "\\", "v"]), max_size=5)


@settings(max_examples=500, deadline=None)
@given(
    st.tuples(parts, parts, parts, parts, st.integers(0, 3), parts),
    st.tuples(parts, parts, parts, parts, st.integers(0, 3), parts),
)
def test_escaping_is_injective(left: tuple[Any, ...], right: tuple[Any, ...]) -> None:
    same_material = event_id_material(*left) == event_id_material(*right)
    assert same_material == (left == right)


@settings(max_examples=300, deadline=None)
@given(
    st.tuples(parts, parts, st.integers(0, 3)),
    st.tuples(parts, parts, st.integers(0, 3)),
)
def test_materials_with_revisions_are_injective(
    left: tuple[str, str, int], right: tuple[str, str, int]
) -> None:
    def material(identity: str, type_: str, revision: int) -> str:
        return event_id_material("s", "", identity, "v", 1, type_, revision)

    assert (material(*left) == material(*right)) == (left == right)


def test_lone_surrogates_are_encoded_like_javascript_text_encoder() -> None:
    # TextEncoder writes U+FFFD for a lone surrogate and joins a surrogate pair.
    lone = event_id("urn:watukuy:orders", "", "a\ud800b", "v1", 1, "created")
    replaced = "watukuy|v1|urn:watukuy:orders||a\ufffdb|v1|1|created".encode()
    assert lone == hashlib.sha256(replaced).hexdigest()
    pair = event_id("urn:watukuy:orders", "", "\ud83d\ude00", "v1", 1, "created")
    assert pair == event_id("urn:watukuy:orders", "", "\U0001f600", "v1", 1, "created")


# --- version_text ------------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    ONE = 1


class Level(enum.IntEnum):
    HIGH = 3


class Tag(enum.StrEnum):
    NEW = "new"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("v1", "v1"),
        ("", ""),
        (None, None),
        (True, "true"),
        (False, "false"),
        (42, "42"),
        (-7, "-7"),
        (1.0, "1"),
        (1.5, "1.5"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.1 + 0.2, "0.30000000000000004"),
        (2**64, "18446744073709552000"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "2026-01-02T03:04:05Z"),
        (dt.date(2026, 1, 2), "2026-01-02"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (Decimal("10.50"), "10.50"),
        (Color.RED, "red"),
        (Color.ONE, "1"),
        (Level.HIGH, "3"),
        (Tag.NEW, "new"),
    ],
)
def test_version_text(value: Any, expected: str | None) -> None:
    text = version_text(value)
    assert text == expected
    assert text is None or type(text) is str


@pytest.mark.parametrize("value", [{"v": 1}, [1, 2], object(), b"bytes"])
def test_version_text_rejects_other_values(value: Any) -> None:
    with pytest.raises(TypeError):
        version_text(value)


# --- identity_text -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("o1", "o1"), ("", ""), (7, "7"), (-3, "-3"), (2**70, str(2**70)), (Tag.NEW, "new")],
)
def test_identity_text(value: Any, expected: str) -> None:
    text = identity_text(value)
    assert text == expected
    assert type(text) is str


@pytest.mark.parametrize("value", [None, True, 1.5, b"o1", ("o", 1), uuid.UUID(int=1)])
def test_identity_text_rejects_other_types(value: Any) -> None:
    with pytest.raises(TypeError, match=r"identity\(\) must return a str or an int, got"):
        identity_text(value)


def test_any_unicode_text_is_an_identity_or_a_version() -> None:
    for text in ("a\x00b", "\x00", "\x01", "\U0010ffff", "\u00e9|\\"):
        assert identity_text(text) == text
        assert version_text(text) == text


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\U0001f600\udc00"])
def test_a_lone_surrogate_is_neither_an_identity_nor_a_version(text: str) -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        identity_text(text)
    with pytest.raises(ValueError, match="lone surrogate"):
        version_text(text)
