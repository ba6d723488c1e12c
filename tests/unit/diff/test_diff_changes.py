"""The diff rules, one by one, with exact outcomes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from watukuy.diff import (
    Candidate,
    Change,
    DiffResult,
    OnSchemaChange,
    content_hash,
    dedupe,
    detect_deletes,
    diff_candidates,
    prepare_candidates,
)
from watukuy.model.errors import ConfigError
from watukuy.model.rows import ItemRow

NOW = 5_000

Item = dict[str, Any]


def item(identity: str, name: str, updated: str | None = None) -> Item:
    out: Item = {"id": identity, "name": name}
    if updated is not None:
        out["updated"] = updated
    return out


def stored(
    value: Item,
    *,
    version: str | None = None,
    schema_version: int = 1,
    payload: str | None = None,
    fingerprint: Callable[[Item], Any] | None = None,
) -> ItemRow:
    """The row an earlier cycle wrote for ``value``."""
    subject = fingerprint(value) if fingerprint is not None else value
    return ItemRow(
        identity=value["id"],
        version=version,
        hash=content_hash(subject),
        schema_version=schema_version,
        payload=payload,
        seen_at=1_000,
    )


def pairs(*items: Item) -> list[tuple[str, Item]]:
    return [(value["id"], value) for value in items]


def diff(
    items: list[Item],
    existing: dict[str, ItemRow],
    *,
    version: Callable[[Item], Any] | None = None,
    fingerprint: Callable[[Item], Any] | None = None,
    schema_version: int = 1,
    on_schema_change: OnSchemaChange = "rebaseline",
    retain_payload: bool = False,
    touch_unchanged: bool = False,
) -> tuple[DiffResult[Item], list[str]]:
    """prepare_candidates then diff_candidates, as a lane runs them."""
    candidates, skipped = prepare_candidates(
        pairs(*items),
        existing,
        version=version,
        fingerprint=fingerprint,
        schema_version=schema_version,
    )
    result = diff_candidates(
        candidates,
        existing,
        schema_version=schema_version,
        on_schema_change=on_schema_change,
        retain_payload=retain_payload,
        now=NOW,
        touch_unchanged=touch_unchanged,
    )
    return result, skipped


# --- dedupe -----------------------------------------------------------------------------------


def test_dedupe_keeps_the_last_item_at_the_first_position() -> None:
    assert dedupe([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)]) == [
        ("a", 3),
        ("b", 5),
        ("c", 4),
    ]
    assert dedupe([("x", 1), ("y", 2)]) == [("x", 1), ("y", 2)]
    assert dedupe([]) == []
    assert dedupe(iter([("a", 1), ("a", 2)])) == [("a", 2)]


# --- prepare_candidates ---------------------------------------------------------------------


def test_candidates_carry_identity_version_and_hash() -> None:
    a, b = item("a", "A"), item("b", "B")
    candidates, skipped = prepare_candidates(
        pairs(a, b), {}, version=None, fingerprint=None, schema_version=1
    )
    assert skipped == []
    assert candidates == [
        Candidate("a", a, None, content_hash(a)),
        Candidate("b", b, None, content_hash(b)),
    ]


def test_versions_become_text() -> None:
    revisions: list[tuple[str, dict[str, Any]]] = [
        ("a", {"rev": 42}),
        ("b", {"rev": 1.0}),
        ("c", {"rev": True}),
        ("d", {"rev": None}),
    ]
    candidates, _ = prepare_candidates(
        revisions,
        {},
        version=lambda value: value["rev"],
        fingerprint=None,
        schema_version=1,
    )
    assert [c.version for c in candidates] == ["42", "1", "true", None]


def test_the_fingerprint_is_what_gets_hashed() -> None:
    a = item("a", "A", "t1")
    candidates, _ = prepare_candidates(
        pairs(a),
        {},
        version=None,
        fingerprint=lambda value: {"name": value["name"]},
        schema_version=1,
    )
    assert candidates[0].hash == content_hash({"name": "A"})
    assert candidates[0].item is a


def test_version_fast_path_skips_hashing() -> None:
    calls: list[str] = []

    def fingerprint(value: Item) -> Any:
        calls.append(value["id"])
        return {"name": value["name"]}

    same = item("same", "S", "v1")
    bumped = item("bumped", "B", "v2")
    fresh = item("fresh", "F", "v1")
    existing = {
        "same": stored(same, version="v1", fingerprint=fingerprint),
        "bumped": stored(item("bumped", "B", "v1"), version="v1", fingerprint=fingerprint),
    }
    calls.clear()
    candidates, skipped = prepare_candidates(
        pairs(same, bumped, fresh),
        existing,
        version=lambda value: value["updated"],
        fingerprint=fingerprint,
        schema_version=1,
    )
    assert skipped == ["same"]
    assert [c.identity for c in candidates] == ["bumped", "fresh"]
    assert calls == ["bumped", "fresh"]


def test_no_fast_path_across_schema_versions() -> None:
    calls: list[str] = []

    def fingerprint(value: Item) -> Any:
        calls.append(value["id"])
        return value["name"]

    a = item("a", "A", "v1")
    existing = {"a": stored(a, version="v1", schema_version=1)}
    candidates, skipped = prepare_candidates(
        pairs(a),
        existing,
        version=lambda v: v["updated"],
        fingerprint=fingerprint,
        schema_version=2,
    )
    assert skipped == []
    assert [c.identity for c in candidates] == ["a"]
    assert calls == ["a"]


def test_no_fast_path_without_a_version() -> None:
    a = item("a", "A")
    candidates, skipped = prepare_candidates(
        pairs(a), {"a": stored(a)}, version=None, fingerprint=None, schema_version=1
    )
    assert skipped == []
    assert [c.identity for c in candidates] == ["a"]
    # A version of None is "no version" too, even when the stored row has none either.
    candidates, skipped = prepare_candidates(
        pairs(a), {"a": stored(a)}, version=lambda v: None, fingerprint=None, schema_version=1
    )
    assert skipped == []
    assert candidates[0].version is None


def test_duplicates_in_a_page_fold_to_the_last() -> None:
    first, other, last = item("a", "first"), item("b", "B"), item("a", "last")
    candidates, _ = prepare_candidates(
        pairs(first, other, last), {}, version=None, fingerprint=None, schema_version=1
    )
    assert [(c.identity, c.item["name"]) for c in candidates] == [("a", "last"), ("b", "B")]
    assert candidates[0].hash == content_hash(last)


# --- diff_candidates ------------------------------------------------------------------------


def test_created_updated_and_unchanged() -> None:
    kept, old = item("kept", "K"), item("changed", "old")
    existing = {"kept": stored(kept), "changed": stored(old)}
    new, created = item("changed", "new"), item("new", "N")
    result, _ = diff([kept, new, created], existing)

    assert result.changes == [
        Change("updated", "changed", new, None, None, content_hash(new), 1),
        Change("created", "new", created, None, None, content_hash(created)),
    ]
    assert result.unchanged == ["kept"]
    assert result.rebaselined == []
    assert result.upserts == [
        ItemRow("changed", None, content_hash(new), 1, None, NOW, 1),
        ItemRow("new", None, content_hash(created), 1, None, NOW),
    ]


def test_retained_payloads_are_written_and_returned_as_previous() -> None:
    before, after, other = item("a", "before"), item("a", "after"), item("b", "B")
    existing = {"a": stored(before, payload='{"id":"a","name":"before"}')}
    result, _ = diff([after, other], existing, retain_payload=True)

    after_text, other_text = '{"id":"a","name":"after"}', '{"id":"b","name":"B"}'
    assert result.changes == [
        Change(
            "updated",
            "a",
            after,
            '{"id":"a","name":"before"}',
            None,
            content_hash(after),
            1,
            after_text,
        ),
        Change("created", "b", other, None, None, content_hash(other), 0, other_text),
    ]
    assert [row.payload for row in result.upserts] == [after_text, other_text]


def deep(levels: int) -> Item:
    value: Item = {"leaf": 1}
    for _ in range(levels):
        value = {"x": value}
    return value


def test_an_item_that_cannot_be_hashed_is_rejected_when_asked() -> None:
    good, nan, cyclic = item("a", "A"), {"id": "n", "v": math.nan}, {"id": "c"}
    cyclic["self"] = cyclic
    page = pairs(good, nan, cyclic)
    with pytest.raises(ValueError):
        prepare_candidates(page, {}, version=None, fingerprint=None, schema_version=1)
    rejected: list[tuple[str, Item, Exception]] = []
    candidates, _ = prepare_candidates(
        page, {}, version=None, fingerprint=None, schema_version=1, rejected=rejected
    )
    assert [c.identity for c in candidates] == ["a"]
    assert [(identity, type(error)) for identity, _, error in rejected] == [
        ("n", ValueError),
        ("c", ValueError),
    ]


def test_a_payload_that_cannot_be_written_leaves_the_result_as_it_was() -> None:
    # Hashed (the slow, recursive writer manages 300 levels) but not written by orjson.
    too_deep = {"id": "d", "v": deep(300)}
    before = item("u", "before")
    existing = {"u": stored(before, payload='{"id":"u","name":"before"}')}
    updated = {"id": "u", "v": deep(300)}
    candidates, _ = prepare_candidates(
        pairs(item("a", "A"), too_deep, updated),
        existing,
        version=None,
        fingerprint=None,
        schema_version=1,
    )
    assert len(candidates) == 3
    args: dict[str, Any] = {
        "schema_version": 1,
        "on_schema_change": "rebaseline",
        "retain_payload": True,
        "now": NOW,
    }
    with pytest.raises(TypeError, match="Recursion limit reached"):
        diff_candidates(candidates, existing, **args)
    rejected: list[tuple[str, Item, Exception]] = []
    result = diff_candidates(candidates, existing, rejected=rejected, **args)
    assert [c.identity for c in result.changes] == ["a"]
    assert [row.identity for row in result.upserts] == ["a"]
    assert result.unchanged == result.rebaselined == []
    assert [identity for identity, _, _ in rejected] == ["d", "u"]


def test_a_change_shares_its_text_only_when_orjson_wrote_it() -> None:
    # An integer beyond 64 bits: orjson cannot write it, the stdlib does; the event's data
    # is then written (and read back) on its own, exactly.
    big = {"id": "a", "n": 2**70}
    result, _ = diff([big], {}, retain_payload=True)
    assert [change.text for change in result.changes] == [None]
    assert [row.payload for row in result.upserts] == ['{"id":"a","n":1180591620717411303424}']


def test_without_retained_payloads_previous_stays_empty() -> None:
    before = item("a", "before")
    existing = {"a": stored(before, payload='{"id":"a","name":"before"}')}
    result, _ = diff([item("a", "after")], existing, retain_payload=False)
    assert [change.previous for change in result.changes] == [None]
    assert [row.payload for row in result.upserts] == [None]


def test_typed_items_are_retained_as_json_text() -> None:
    class Order(pydantic.BaseModel):
        id: str
        total: float

    order = Order(id="o1", total=10.0)
    candidates, _ = prepare_candidates(
        [("o1", order)], {}, version=None, fingerprint=None, schema_version=1
    )
    result = diff_candidates(
        candidates,
        {},
        schema_version=1,
        on_schema_change="rebaseline",
        retain_payload=True,
        now=NOW,
    )
    assert result.upserts == [
        ItemRow(
            "o1", None, content_hash({"id": "o1", "total": 10}), 1, '{"id":"o1","total":10.0}', NOW
        )
    ]


def test_drifted_rows_rebaseline_silently() -> None:
    current = item("a", "A")
    existing = {"a": stored(item("a", "old"), schema_version=1)}
    result, _ = diff(
        [current], existing, schema_version=2, on_schema_change="rebaseline", retain_payload=True
    )
    assert result.changes == []
    assert result.unchanged == []
    assert result.rebaselined == ["a"]
    assert result.upserts == [
        ItemRow("a", None, content_hash(current), 2, '{"id":"a","name":"A"}', NOW)
    ]


def test_drifted_rows_emit_updated_only_when_the_hash_changed() -> None:
    changed, same = item("changed", "new"), item("same", "S")
    existing = {
        "changed": stored(item("changed", "old"), schema_version=1, payload='{"old":true}'),
        "same": stored(same, schema_version=1),
    }
    result, _ = diff(
        [changed, same], existing, schema_version=2, on_schema_change="emit", retain_payload=True
    )
    assert result.changes == [
        Change(
            "updated",
            "changed",
            changed,
            '{"old":true}',
            None,
            content_hash(changed),
            1,
            '{"id":"changed","name":"new"}',
        )
    ]
    assert result.rebaselined == ["same"]
    assert result.unchanged == []
    assert [(row.identity, row.schema_version, row.seen_at) for row in result.upserts] == [
        ("changed", 2, NOW),
        ("same", 2, NOW),
    ]


def test_unchanged_rows_are_rewritten_only_when_touched() -> None:
    a = item("a", "A")
    existing = {"a": stored(a)}
    quiet, _ = diff([a], existing)
    assert quiet == DiffResult([], [], ["a"], [])
    touched, _ = diff([a], existing, touch_unchanged=True)
    assert touched == DiffResult([], [ItemRow("a", None, content_hash(a), 1, None, NOW)], ["a"], [])


def test_a_new_version_with_the_same_content_refreshes_the_row() -> None:
    a = item("a", "A", "v2")
    existing = {"a": stored(item("a", "A", "v1"), version="v1", fingerprint=lambda v: v["name"])}
    result, skipped = diff(
        [a], existing, version=lambda v: v["updated"], fingerprint=lambda v: v["name"]
    )
    assert skipped == []
    assert result == DiffResult(
        changes=[],
        upserts=[ItemRow("a", "v2", content_hash("A"), 1, None, NOW)],
        unchanged=["a"],
        rebaselined=[],
    )


def test_an_empty_page() -> None:
    result, skipped = diff([], {})
    assert result == DiffResult([], [], [], [])
    assert skipped == []


def test_on_schema_change_is_validated() -> None:
    with pytest.raises(
        ConfigError, match="on_schema_change: expected 'rebaseline' or 'emit', got 'ignore'"
    ):
        diff_candidates(
            [],
            {},
            schema_version=1,
            on_schema_change="ignore",  # type: ignore[arg-type]
            retain_payload=False,
            now=NOW,
        )


# --- detect_deletes ---------------------------------------------------------------------------


def test_deletes_are_the_unseen_identities_sorted() -> None:
    stored_ids = ["c", "a", "b", "d"]
    assert detect_deletes(stored_ids, {"b"}) == ["a", "c", "d"]
    assert detect_deletes(stored_ids, set(stored_ids)) == []
    assert detect_deletes([], {"x"}) == []
    assert detect_deletes(iter(["z", "y"]), frozenset()) == ["y", "z"]


def test_deletes_sort_by_utf16_code_units() -> None:
    identities = ["b", "B", "10", "9", "é", "\uff01", "\U0001f600", "\udc00"]
    # U+1F600 is the pair D83D DE00, before U+FF01 and before a lone DC00.
    assert detect_deletes(identities, set()) == [
        "10",
        "9",
        "B",
        "b",
        "é",
        "\U0001f600",
        "\udc00",
        "\uff01",
    ]


def test_two_cycles_end_to_end() -> None:
    table: dict[str, ItemRow] = {}

    page1 = [item("1", "one"), item("2", "two"), item("3", "three")]
    first, skipped = diff(page1, table, retain_payload=True)
    assert [(c.type, c.identity) for c in first.changes] == [
        ("created", "1"),
        ("created", "2"),
        ("created", "3"),
    ]
    table.update({row.identity: row for row in first.upserts})
    assert detect_deletes(table, {v["id"] for v in page1} | set(skipped)) == []

    page2 = [item("1", "one"), item("2", "TWO"), item("4", "four")]
    second, skipped = diff(page2, table, retain_payload=True)
    assert [(c.type, c.identity, c.previous) for c in second.changes] == [
        ("updated", "2", '{"id":"2","name":"two"}'),
        ("created", "4", None),
    ]
    assert second.unchanged == ["1"]
    assert detect_deletes(table, {v["id"] for v in page2} | set(skipped)) == ["3"]
