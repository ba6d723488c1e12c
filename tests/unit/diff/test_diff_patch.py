"""JSON Patches between JSON documents: the shape of the ops, and the round trip."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watukuy.diff.patch import (
    apply_patch,
    changed_paths,
    join_pointer,
    json_equal,
    json_patch,
    split_pointer,
)
from watukuy.model.errors import ConfigError

# --- the shape of the ops -------------------------------------------------------------------


def test_equal_documents_give_an_empty_patch() -> None:
    doc = {"a": [1, {"b": None}], "c": "x"}
    assert json_patch(doc, copy.deepcopy(doc)) == []


def test_objects_member_by_member_in_sorted_order() -> None:
    before = {"status": "pending", "gone": 1, "same": True, "nested": {"x": 1}}
    after = {"status": "paid", "new": [1], "same": True, "nested": {"x": 2}}
    assert json_patch(before, after) == [
        {"op": "remove", "path": "/gone"},
        {"op": "replace", "path": "/nested/x", "value": 2},
        {"op": "add", "path": "/new", "value": [1]},
        {"op": "replace", "path": "/status", "value": "paid"},
    ]


def test_member_names_are_escaped_as_json_pointers() -> None:
    assert json_patch({"a/b": 1, "m~n": 1}, {"a/b": 2, "m~n": 2}) == [
        {"op": "replace", "path": "/a~1b", "value": 2},
        {"op": "replace", "path": "/m~0n", "value": 2},
    ]
    assert split_pointer("/a~1b/m~0n/0") == ["a/b", "m~n", "0"]
    assert join_pointer(["a/b", "m~n", 0]) == "/a~1b/m~0n/0"
    with pytest.raises(ConfigError):
        split_pointer("status")


def test_a_change_of_type_replaces_and_booleans_are_not_numbers() -> None:
    assert json_patch({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    assert json_patch({"a": 1}, {"a": 1.0}) == []  # the same JSON number
    assert json_patch({"a": [1]}, {"a": {"0": 1}}) == [
        {"op": "replace", "path": "/a", "value": {"0": 1}}
    ]
    assert json_patch([1], None) == [{"op": "replace", "path": "", "value": None}]
    assert not json_equal(0, False)
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})


def test_arrays_of_objects_with_ids_are_diffed_by_id() -> None:
    before = {"lines": [{"id": 1, "qty": 1}, {"id": 2, "qty": 2}, {"id": 3, "qty": 3}]}
    after = {"lines": [{"id": 3, "qty": 3}, {"id": 4, "qty": 4}, {"id": 2, "qty": 20}]}
    patch = json_patch(before, after)
    assert patch == [
        {"op": "remove", "path": "/lines/0"},
        {"op": "move", "from": "/lines/1", "path": "/lines/0"},
        {"op": "add", "path": "/lines/1", "value": {"id": 4, "qty": 4}},
        {"op": "replace", "path": "/lines/2/qty", "value": 20},
    ]
    assert apply_patch(before, patch) == after
    assert changed_paths(patch) == ("/lines/0", "/lines/1", "/lines/2/qty")


def test_a_configurable_key_and_none_for_positions() -> None:
    before = [{"sku": "a", "n": 1}, {"sku": "b", "n": 2}]
    after = [{"sku": "b", "n": 2}]
    assert json_patch(before, after, array_key="sku") == [{"op": "remove", "path": "/0"}]
    assert json_patch(before, after, array_key=None) == [
        {"op": "replace", "path": "/0/n", "value": 2},
        {"op": "replace", "path": "/0/sku", "value": "b"},
        {"op": "remove", "path": "/1"},
    ]


def test_arrays_without_distinct_keys_fall_back_to_positions() -> None:
    # A duplicate id, a missing id, or scalars: by position.
    assert json_patch([{"id": 1}, {"id": 1}], [{"id": 1}]) == [{"op": "remove", "path": "/1"}]
    assert json_patch([{"id": 1}, {"x": 1}], [{"x": 1}]) == [
        {"op": "remove", "path": "/0/id"},
        {"op": "add", "path": "/0/x", "value": 1},
        {"op": "remove", "path": "/1"},
    ]
    assert json_patch([1, 2, 3], [1, 5]) == [
        {"op": "replace", "path": "/1", "value": 5},
        {"op": "remove", "path": "/2"},
    ]
    assert json_patch([1], [1, 2, 3]) == [
        {"op": "add", "path": "/1", "value": 2},
        {"op": "add", "path": "/2", "value": 3},
    ]


def test_ids_true_and_one_are_different_elements() -> None:
    before = [{"id": True, "v": 1}, {"id": 1, "v": 2}]
    after = [{"id": 1, "v": 2}, {"id": True, "v": 1}]
    patch = json_patch(before, after)
    assert patch == [{"op": "move", "from": "/1", "path": "/0"}]
    assert apply_patch(before, patch) == after


def test_apply_patch_leaves_its_input_alone_and_checks_the_ops() -> None:
    doc = {"a": [1, 2]}
    assert apply_patch(doc, [{"op": "add", "path": "/a/-", "value": 3}]) == {"a": [1, 2, 3]}
    assert doc == {"a": [1, 2]}
    assert apply_patch(doc, [{"op": "copy", "from": "/a", "path": "/b"}]) == {
        "a": [1, 2],
        "b": [1, 2],
    }
    assert apply_patch(doc, [{"op": "test", "path": "/a/0", "value": 1}]) == doc
    for bad in [
        {"op": "remove", "path": "/b"},
        {"op": "replace", "path": "/a/2", "value": 0},
        {"op": "add", "path": "/a/01", "value": 0},
        {"op": "test", "path": "/a/0", "value": True},
        {"op": "jump", "path": "/a"},
    ]:
        with pytest.raises(ValueError):
            apply_patch(doc, [bad])


# --- the round trip, over nested JSON -------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
_KEYS = st.sampled_from(["id", "a", "b", "c", "a/b", "m~n", "", "0", "-"]) | st.text(max_size=3)


def _json() -> st.SearchStrategy[Any]:
    return st.recursive(
        _SCALARS,
        lambda children: (
            st.lists(children, max_size=5)
            | st.dictionaries(_KEYS, children, max_size=5)
            | _keyed_lists(children)
        ),
        max_leaves=30,
    )


def _keyed_lists(children: st.SearchStrategy[Any]) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Lists of objects with ids drawn from a small pool, so that the two sides share some
    elements, lose some, gain some and reorder them."""
    element = st.fixed_dictionaries(
        {"id": st.sampled_from([1, 2, 3, 4, "x", True])},
        optional={"qty": children, "name": st.text(max_size=3)},
    )
    return st.lists(element, max_size=5, unique_by=lambda e: (type(e["id"]), e["id"]))


PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(before=_json(), after=_json())
def test_the_patch_applied_to_before_gives_after_exactly(before: Any, after: Any) -> None:
    frozen = copy.deepcopy(before)
    patch = json_patch(before, after)
    result = apply_patch(before, patch)
    assert json_equal(result, after)
    assert before == frozen or json_equal(before, frozen)  # untouched
    # An independent RFC 6902 implementation agrees.
    assert json_equal(jsonpatch.apply_patch(copy.deepcopy(before), copy.deepcopy(patch)), after)
    assert (patch == []) == json_equal(before, after)


@PROPERTY
@given(before=_json(), after=_json())
def test_positional_patches_round_trip_too(before: Any, after: Any) -> None:
    patch = json_patch(before, after, array_key=None)
    assert json_equal(apply_patch(before, patch), after)
    assert not any(op["op"] == "move" for op in patch)


@PROPERTY
@given(
    before=st.lists(
        st.fixed_dictionaries({"id": st.integers(0, 6), "v": st.integers(0, 2)}),
        max_size=6,
        unique_by=lambda e: e["id"],
    ),
    after=st.lists(
        st.fixed_dictionaries({"id": st.integers(0, 6), "v": st.integers(0, 2)}),
        max_size=6,
        unique_by=lambda e: e["id"],
    ),
)
def test_keyed_elements_that_stay_are_never_removed(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> None:
    patch = json_patch({"lines": before}, {"lines": after})
    kept = {e["id"] for e in before} & {e["id"] for e in after}
    removed = sum(1 for op in patch if op["op"] == "remove")
    added = [op["value"]["id"] for op in patch if op["op"] == "add" and op["path"].count("/") == 2]
    assert removed == len(before) - len(kept)
    assert not (kept & set(added))
    assert apply_patch({"lines": before}, patch) == {"lines": after}
