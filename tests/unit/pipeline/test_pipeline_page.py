"""The page pipeline on plain data: no engine, no store, no event loop."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from watukuy.cursor import SnapshotDiff, TokenCursor, make_strategy
from watukuy.diff import MAX_IDENTITY_BYTES, content_hash
from watukuy.model.errors import ConfigError, ValidationError
from watukuy.model.page import Page
from watukuy.model.redact import DEFAULT_REDACTION
from watukuy.model.rows import (
    ItemMark,
    ItemRow,
    ListingLink,
    ListingPass,
    ListingState,
    PollerState,
    Tombstone,
)
from watukuy.pipeline import page as pipeline
from watukuy.pipeline.events import EventMaker, PageEvents
from watukuy.pipeline.rules import PageRules
from watukuy.validate import schema_adapter

NOW = 1_700_000_000_000

Item = dict[str, Any]


def rules(**changes: Any) -> PageRules:
    """A snapshot-diff poller keyed by ``id``, with no schema and no ``version``."""
    base = PageRules(
        strategy=make_strategy(SnapshotDiff()),
        adapter=schema_adapter(None),
        identity=lambda item: item["id"],
        version=None,
        fingerprint=None,
        schema_version=1,
        on_invalid="quarantine",
        on_schema_change="rebaseline",
        retain_payload=False,
        proves=False,
        compat_ids=False,
        log=False,
        full_scan=True,
        source="test",
        poller="orders",
        partition="default",
        lane="reconcile",
        redaction=DEFAULT_REDACTION,
    )
    return dataclasses.replace(base, **changes)


@dataclasses.dataclass
class Run:
    """One page through the pipeline, as the lane's page builder runs it."""

    selected: pipeline.Selected
    diffed: pipeline.Diffed
    events: PageEvents
    rows: pipeline.PageRows
    plan: pipeline.PagePlan


def run(
    given: PageRules,
    items: list[Any],
    *,
    state: PollerState | None = None,
    existing: Mapping[str, ItemRow] | None = None,
    tombstones: Mapping[str, Tombstone] | None = None,
    page: Page[Any] | None = None,
    hash_ahead: bool = False,
    force: bool = False,
) -> Run:
    state = state or PollerState()
    page = page if page is not None else Page(items=items, has_more=False)
    kept = given.strategy.select(page, NOW)
    selected = pipeline.select_items(given, page, kept, given.strategy.initial(), NOW, raws=False)
    rejected: list[tuple[str, Any, Exception]] = []
    candidates = pipeline.hash_items(given, selected.pairs, rejected) if hash_ahead else None
    diffed = pipeline.diff_page(
        given,
        selected,
        existing or {},
        tombstones or {},
        candidates=candidates,
        rejected=rejected,
        now=NOW,
    )
    events = PageEvents(
        EventMaker(given), sequence=state.sequence, now=NOW, observe=True, rejected=rejected
    )
    sequences = list(events.write_changes(diffed.diff.changes))
    assert sequences == list(range(state.sequence + 1, events.sequence + 1))
    if force:
        events.write_known(
            selected.pairs,
            diffed.diff.changes,
            diffed.candidates,
            diffed.existing,
            payload=given.retain_payload,
        )
    rows = pipeline.page_rows(given, selected, diffed, events, NOW)
    plan = pipeline.plan_page(given, pipeline.PageInput(state, selected, diffed, events, rows, NOW))
    return Run(selected, diffed, events, rows, plan)


def outbox(result: Run) -> list[dict[str, Any]]:
    return [json.loads(row.event) for row in result.plan.batch.events]


def stored(result: Run) -> dict[str, ItemRow]:
    return {row.identity: row for row in result.plan.batch.upserts}


# --- created, updated, unchanged, re-created ---------------------------------------------


@pytest.mark.parametrize("hash_ahead", [False, True])
def test_a_new_item_is_created_and_its_row_written(hash_ahead: bool) -> None:
    result = run(rules(), [{"id": "a", "n": 1}], hash_ahead=hash_ahead)
    [event] = outbox(result)
    assert (event["type"], event["subject"], event["sequence"]) == ("created", "a", 1)
    assert event["data"] == {"id": "a", "n": 1}
    assert event["lane"] == "reconcile"
    [row] = result.plan.batch.upserts
    assert (row.identity, row.revision, row.hash) == ("a", 0, content_hash({"id": "a", "n": 1}))
    assert result.events.counts == {"created": 1, "updated": 0}
    assert result.plan.state.sequence == 1
    assert result.plan.batch.state_patch["sequence"] == 1
    # The hook sees the event as observed.
    assert [e.subject for e in result.events.observed or ()] == ["a"]


def test_a_changed_item_is_updated_and_an_unchanged_one_is_left_alone() -> None:
    first = run(rules(retain_payload=True), [{"id": "a", "n": 1}, {"id": "b", "n": 1}])
    state = first.plan.state
    again = run(
        rules(retain_payload=True),
        [{"id": "a", "n": 2}, {"id": "b", "n": 1}],
        state=state,
        existing=stored(first),
    )
    [event] = outbox(again)
    assert (event["type"], event["subject"], event["sequence"]) == ("updated", "a", 3)
    assert event["previous"] == {"id": "a", "n": 1}
    assert again.diffed.diff.unchanged == ["b"]
    assert [row.identity for row in again.plan.batch.upserts] == ["a"]
    assert stored(again)["a"].revision == 1
    assert again.events.counts == {"created": 0, "updated": 1}


def test_a_deleted_item_that_comes_back_continues_its_revisions() -> None:
    tombstone = Tombstone(
        identity="a",
        version=None,
        hash="old",
        schema_version=1,
        revision=3,
        reason="deleted",
        removed_at=NOW - 1,
    )
    result = run(rules(), [{"id": "a", "n": 1}], tombstones={"a": tombstone})
    [event] = outbox(result)
    assert event["type"] == "created"
    assert stored(result)["a"].revision == 5  # past the deleted event's revision
    assert result.plan.batch.revived == ["a"]


def test_a_forced_backfill_emits_known_items_again() -> None:
    first = run(rules(), [{"id": "a", "n": 1}])
    again = run(
        rules(lane="backfill"),
        [{"id": "a", "n": 1}],
        state=first.plan.state,
        existing=stored(first),
        force=True,
    )
    [event] = outbox(again)
    assert (event["type"], event["subject"], event["lane"]) == ("updated", "a", "backfill")
    assert again.events.counts == {"created": 0, "updated": 1}


# --- invalid, unidentified, unencodable ---------------------------------------------------


def _positive(raw: Item) -> Item:
    if raw["n"] < 0:
        raise ValueError("n must be positive")
    return raw


def test_an_invalid_item_is_quarantined_and_the_rest_goes_on() -> None:
    given = rules(adapter=schema_adapter(_positive))
    result = run(given, [{"id": "a", "n": 1}, {"id": "b", "n": -1}])
    assert [event["subject"] for event in outbox(result)] == ["a"]
    [(raw, issues)] = result.selected.invalid
    assert raw == {"id": "b", "n": -1}
    assert "n must be positive" in issues[0]["message"]
    [parked] = result.plan.batch.parked
    assert parked.kind == "invalid"
    assert parked.id.startswith("invalid:")
    assert parked.item is not None
    assert json.loads(parked.item) == {"id": "b", "n": -1}
    assert parked.error["code"] == "VALIDATION"


def test_invalid_items_are_skipped_or_fail_the_page_as_on_invalid_says() -> None:
    items = [{"id": "a", "n": 1}, {"id": "b", "n": -1}]
    skipped = run(rules(adapter=schema_adapter(_positive), on_invalid="skip"), items)
    assert (skipped.rows.skipped, skipped.plan.batch.parked) == (1, [])
    with pytest.raises(ValidationError, match="1 item"):
        run(rules(adapter=schema_adapter(_positive), on_invalid="fail"), items)


def test_an_identity_too_long_to_store_is_quarantined_not_selected() -> None:
    long = "x" * (MAX_IDENTITY_BYTES + 1)
    given = rules(strategy=make_strategy(TokenCursor()), full_scan=False, lane="live")
    result = run(given, [{"id": long}, {"id": "b"}])
    assert result.selected.identities == ["b"]
    [(raw, issues)] = result.selected.invalid
    assert raw == {"id": long}
    assert f"{MAX_IDENTITY_BYTES + 1:,} bytes" in issues[0]["message"]
    assert len(result.plan.batch.parked) == 1


def test_a_page_whose_items_all_fail_identity_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"identity\(\) failed: KeyError 'id' \(for all 2"):
        run(rules(), [{"key": 1}, {"key": 2}])


def test_one_item_that_fails_identity_is_quarantined() -> None:
    result = run(rules(), [{"key": 1}, {"id": "b"}])
    assert result.selected.identities == ["b"]
    assert "identity() failed: KeyError 'id'" in result.selected.invalid[0][1][0]["message"]


def test_an_item_that_cannot_be_encoded_joins_the_invalid_and_writes_no_row() -> None:
    result = run(rules(), [{"id": "a", "n": float("nan")}, {"id": "b", "n": 1}])
    assert [event["subject"] for event in outbox(result)] == ["b"]
    assert [row.identity for row in result.plan.batch.upserts] == ["b"]
    [(raw, issues)] = result.selected.invalid
    assert raw["id"] == "a"
    assert "cannot be encoded as JSON" in issues[0]["message"]
    assert len(result.plan.batch.parked) == 1


# --- duplicates, 304 ----------------------------------------------------------------------


def test_an_identity_listed_twice_keeps_its_last_item_at_its_first_place() -> None:
    result = run(rules(), [{"id": "a", "n": 1}, {"id": "b", "n": 1}, {"id": "a", "n": 2}])
    assert result.selected.pairs == [("a", {"id": "a", "n": 2}), ("b", {"id": "b", "n": 1})]
    assert [(e["subject"], e["data"]["n"]) for e in outbox(result)] == [("a", 2), ("b", 1)]
    assert len(result.selected.kept) == 3


def test_a_304_page_changes_nothing_and_its_pass_learns_it() -> None:
    given = rules(proves=True)
    unchanged = Page[Any](items=(), has_more=False)
    result = run(given, [], page=unchanged)
    assert (result.selected.done, result.plan.batch.events, result.plan.batch.upserts) == (
        True,
        [],
        [],
    )
    assert pipeline.link_read(given, result.selected, unchanged, not_modified=True) is None
    progress = ListingPass(pass_id=4, pages=2, items=10)
    after = pipeline.advance_pass(
        given, progress, result.selected, not_modified=True, generator=False, tail={}
    )
    assert (after.pages, after.items, after.not_modified, after.listed) == (3, 10, True, True)


# --- links of a page ----------------------------------------------------------------------


def _links(
    progress: ListingPass, ids: list[str], marks: Mapping[str, ItemMark] | None = None
) -> tuple[dict[str, ListingLink], dict[str, Any]]:
    given = rules(proves=True)
    page = Page[Any](items=[{"id": i} for i in ids], has_more=True)
    selected = pipeline.select_items(given, page, list(page.items), None, NOW, raws=False)
    read = pipeline.link_read(given, selected, page, not_modified=False)
    assert read is not None
    return pipeline.page_links(progress, read, marks or {})


def test_the_first_read_of_a_pass_links_neighbours_and_keeps_its_tail() -> None:
    links, tail = _links(ListingPass(pass_id=7), ["a", "b", "c"])
    assert links == {
        "a": ListingLink(0, None, "b"),
        "b": ListingLink(0, "a", "c"),
        "c": ListingLink(0, "b", None),
    }
    assert tail == {"tail": "c", "tail_read": 0, "tail_prev": "b"}


def test_the_next_read_links_back_to_the_tail_and_the_tail_forward() -> None:
    progress = ListingPass(pass_id=7, pages=1, tail="c", tail_read=0, tail_prev="b")
    links, tail = _links(progress, ["d", "e"])
    assert links == {
        "c": ListingLink(0, "b", "d"),
        "d": ListingLink(1, "c", "e"),
        "e": ListingLink(1, "d", None),
    }
    assert tail == {"tail": "e", "tail_read": 1, "tail_prev": "d"}


def test_a_read_that_repeats_an_earlier_item_does_not_link_to_the_tail() -> None:
    progress = ListingPass(pass_id=7, pages=1, tail="c", tail_read=0, tail_prev="b")
    marks = {"b": ItemMark(seen=7, link=ListingLink(0, "a", "c"))}
    links, _ = _links(progress, ["b", "d"], marks)
    assert "c" not in links
    assert links["b"] == ListingLink(1, "a", "d")  # keeps the neighbour an earlier read gave


def test_a_read_with_an_identity_twice_links_nothing() -> None:
    links, tail = _links(ListingPass(pass_id=7), ["a", "b", "a"])
    assert links == {"a": pipeline.UNREAD, "b": pipeline.UNREAD}
    assert tail == {"tail": None}


def test_no_links_without_proofs() -> None:
    page = Page[Any](items=[{"id": "a"}], has_more=True)
    selected = pipeline.select_items(rules(), page, list(page.items), None, NOW, raws=False)
    assert pipeline.link_read(rules(), selected, page, not_modified=False) is None


# --- the pass and the commit --------------------------------------------------------------


def test_a_page_of_a_pass_marks_its_identities_seen_and_counts_what_it_listed() -> None:
    given = rules(adapter=schema_adapter(_positive), proves=True)
    items = [{"id": "a", "n": 1}, {"id": "b", "n": -1}, {"id": "c", "n": 1}]
    result = run(given, items)
    progress = ListingPass(pass_id=3, pages=1, items=5, invalid=1)
    after = pipeline.advance_pass(
        given, progress, result.selected, not_modified=False, generator=False, tail={}
    )
    assert (after.pages, after.items, after.invalid, after.listed) == (2, 8, 2, True)
    assert after.cursor == "null"
    listing = ListingState(counter=3, lanes={"reconcile": after})
    plan = pipeline.plan_page(
        given,
        pipeline.PageInput(
            PollerState(),
            result.selected,
            result.diffed,
            result.events,
            result.rows,
            NOW,
            progress=after,
            listing=listing,
            links={"a": ListingLink(1)},
        ),
    )
    batch = plan.batch
    assert (batch.seen, batch.seen_pass, batch.links) == (["a", "c"], 3, {"a": ListingLink(1)})
    assert batch.state_patch["listing"] is listing
    assert plan.state.listing == listing


def test_a_generator_page_does_not_end_the_pass() -> None:
    result = run(rules(), [{"id": "a"}])
    after = pipeline.advance_pass(
        rules(),
        ListingPass(pass_id=1),
        result.selected,
        not_modified=False,
        generator=True,
        tail={},
    )
    assert after.listed is False


def test_an_incremental_lane_marks_what_it_wrote_seen_by_the_latest_pass() -> None:
    given = rules(strategy=make_strategy(TokenCursor()), full_scan=False, lane="live", proves=True)
    state = PollerState(listing=ListingState(counter=9))
    result = run(given, [{"id": "a"}], state=state, page=Page(items=[{"id": "a"}], cursor="t2"))
    batch = result.plan.batch
    assert (batch.seen, batch.seen_pass, batch.links) == (["a"], 9, {"a": pipeline.UNREAD})
    assert batch.state_patch["cursors"] == {"live": '{"value":"t2"}'}


def test_the_validators_of_a_page_are_kept_only_when_a_304_would_mean_the_same() -> None:
    whole = Page[Any](items=[{"id": "a"}], has_more=False)
    done = pipeline.select_items(rules(), whole, list(whole.items), None, NOW, raws=False)
    assert pipeline.keeps_validators(rules(), "null", whole, 1, done)
    assert not pipeline.keeps_validators(rules(), "null", whole, 2, done)
    more = Page[Any](items=[{"id": "a"}], has_more=True)
    going = pipeline.select_items(rules(), more, list(more.items), None, NOW, raws=False)
    assert not pipeline.keeps_validators(rules(), "null", more, 1, going)


def test_event_ids_follow_the_revision_unless_compat() -> None:
    first = run(rules(), [{"id": "a", "n": 1}])
    distinct = EventMaker(rules())
    compat = EventMaker(rules(compat_ids=True))
    ids = {
        (name, revision): maker.event(
            type_="updated",
            identity="a",
            version="v",
            revision=revision,
            data={"id": "a"},
            previous=None,
            sequence=1,
            now=NOW,
            observed=None,
        )[1].event_id
        for name, maker in (("distinct", distinct), ("compat", compat))
        for revision in (1, 2)
    }
    assert ids["distinct", 1] != ids["distinct", 2]
    assert ids["compat", 1] == ids["compat", 2]
    assert outbox(first)[0]["id"] == first.plan.batch.events[0].event_id


def test_an_unchanged_version_is_not_hashed_and_a_failing_version_quarantines() -> None:
    def version(item: Item) -> Any:
        if item["v"] is None:
            raise ValueError("no version")
        return item["v"]

    given = rules(version=version)
    first = run(given, [{"id": "a", "v": 1, "n": 1}])
    assert stored(first)["a"].version == "1"
    # Same version, other content: the fast path takes the stored row's word for it.
    again = run(
        given,
        [{"id": "a", "v": 1, "n": 2}, {"id": "b", "v": None}],
        state=first.plan.state,
        existing=stored(first),
    )
    assert (again.diffed.candidates, outbox(again)) == ([], [])
    [(raw, issues)] = again.selected.invalid
    assert raw == {"id": "b", "v": None}
    assert issues[0]["message"] == "version() failed: ValueError: no version"


def test_raw_items_are_kept_for_lateness_only_when_a_schema_changes_them() -> None:
    page = Page[Any](items=[{"id": "a"}], has_more=False)
    plain = pipeline.select_items(rules(), page, list(page.items), None, NOW, raws=True)
    assert plain.raws is None  # without a schema the item is the raw item
    typed = rules(adapter=schema_adapter(lambda raw: {**raw, "typed": True}))
    kept = pipeline.select_items(typed, page, list(page.items), None, NOW, raws=True)
    assert kept.raws == {"a": {"id": "a"}}
    assert kept.pairs == [("a", {"id": "a", "typed": True})]
