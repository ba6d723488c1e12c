"""The pass and delete-confirmation policy as plain data: no engine, no store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

import watukuy as wk
from watukuy.model.rows import (
    BRIDGE_LIMIT,
    UNPROVEN_PASSES,
    HeldDeletes,
    ItemMark,
    ListingLink,
    ListingPass,
)
from watukuy.pipeline import deletes as policy

PASS = 5  # the pass that just listed its last page
OLD = 4  # the pass that listed the rows it missed


def chain(*rows: tuple[str, int | None]) -> dict[str, ItemMark]:
    """The marks of rows in the listing's order: ``(identity, read)``, where ``read`` is the
    page read of :data:`PASS` that listed it, or ``None`` for a row it missed (listed by
    :data:`OLD` in its first read)."""
    names = [name for name, _ in rows]
    marks: dict[str, ItemMark] = {}
    for index, (name, read) in enumerate(rows):
        prev = names[index - 1] if index else None
        after = names[index + 1] if index + 1 < len(names) else None
        seen, at = (OLD, 0) if read is None else (PASS, read)
        marks[name] = ItemMark(seen, ListingLink(at, prev, after))
    return marks


def walk(
    marks: Mapping[str, ItemMark],
    missed: Sequence[str],
    final_read: int,
    bridges: Sequence[policy.Bridge] = (),
) -> tuple[list[str], set[str]]:
    """Run the walks with ``marks`` standing for the store."""
    proof = policy.Walk(PASS, missed, bridges)
    proof.learn(proof.unknown(missed), marks)
    proof.start()
    while proof.walking:
        proof.learn(proof.unknown(proof.frontier()), marks)
        proof.step()
    return proof.proven(final_read), proof.crossed


# --- proofs of absence ------------------------------------------------------------------------


def test_a_row_between_neighbours_of_one_read_is_proven() -> None:
    marks = chain(("a", 0), ("b", None), ("c", 0), ("d", 1))
    assert walk(marks, ["b"], final_read=1) == (["b"], set())


def test_a_run_of_missed_rows_inside_one_read_is_proven() -> None:
    marks = chain(("a", 1), ("b", None), ("c", None), ("d", None), ("e", 1), ("f", 2))
    assert walk(marks, ["b", "c", "d"], final_read=2)[0] == ["b", "c", "d"]


def test_neighbours_in_two_reads_prove_nothing() -> None:
    marks = chain(("a", 0), ("b", None), ("c", 1), ("d", 2))
    assert walk(marks, ["b"], final_read=2)[0] == []


def test_the_last_read_proves_what_is_past_its_last_row() -> None:
    marks = chain(("a", 0), ("b", 1), ("c", None))
    assert walk(marks, ["c"], final_read=1)[0] == ["c"]
    # The row before it came in an earlier read: the listing may have ended elsewhere.
    assert walk(marks, ["c"], final_read=2)[0] == []


def test_the_first_read_proves_what_is_before_its_first_row() -> None:
    marks = chain(("a", None), ("b", 0), ("c", 1))
    assert walk(marks, ["a"], final_read=1)[0] == ["a"]
    later = chain(("a", None), ("b", 1), ("c", 2))
    assert walk(later, ["a"], final_read=2)[0] == []


def test_a_row_no_linked_listing_saw_is_not_walked() -> None:
    marks = chain(("a", 0), ("b", None), ("c", 0))
    marks["b"] = ItemMark(OLD, None)
    assert walk(marks, ["b"], final_read=1)[0] == []
    marks["b"] = ItemMark(OLD, ListingLink(-1, "a", "c"))  # marked by an incremental lane
    assert walk(marks, ["b"], final_read=1)[0] == []


def test_a_walk_goes_at_most_64_steps_on_each_side() -> None:
    def run(count: int) -> list[str]:
        missed = [f"m{i:03}" for i in range(count)]
        rows = [("a", 1), *((name, None) for name in missed), ("z", 1), ("zz", 2)]
        return walk(chain(*rows), missed, final_read=2)[0]

    assert policy.WALK_STEPS == 64
    assert len(run(64)) == 64
    # The first row needs 65 steps to reach z, the last 65 to reach a.
    proven = run(65)
    assert "m000" not in proven
    assert "m064" not in proven
    assert len(proven) == 63


def test_a_walk_goes_on_through_the_bridge_of_a_deleted_row() -> None:
    marks = chain(("a", 0), ("b", None), ("x", None), ("c", 0))
    del marks["x"]  # deleted since: the store has no row
    assert walk(marks, ["b"], final_read=1) == ([], set())
    bridges = [("x", "b", "c")]
    assert walk(marks, ["b"], final_read=1, bridges=bridges) == (["b"], {"x"})
    assert policy.kept_bridges([*bridges, ("y", None, None)], {"x"}) == (("x", "b", "c"),)


def test_the_unexamined_note() -> None:
    assert policy.unexamined_note(missed=10, streamed=0, known=2, examined=8) == ""
    assert policy.unexamined_note(None, streamed=30_000, known=0, examined=10_000) == (
        "; 20000 missed row(s) beyond 10000 not examined for a proof"
    )


# --- closing a pass ---------------------------------------------------------------------------


def test_a_pass_with_an_invalid_item_or_a_304_page_is_incomplete() -> None:
    rules = wk.Deletes()
    invalid = policy.close_pass(ListingPass(pass_id=PASS, invalid=2, clean=(3,)), PASS, rules)
    assert invalid.incomplete == (
        "incomplete listing (2 item(s) failed the schema or identity()): no deletes"
    )
    assert invalid.clean == (3,)
    cut = policy.close_pass(ListingPass(pass_id=PASS, pages=3, not_modified=True), PASS, rules)
    assert cut.incomplete == (
        "incomplete listing (a page was answered 304 Not Modified): no deletes"
    )


def test_a_single_304_page_repeats_the_complete_pass_before_it() -> None:
    progress = ListingPass(
        pass_id=PASS, pages=1, not_modified=True, last_clean=True, clean=(2, 3), history=(2, 3)
    )
    closing = policy.close_pass(progress, PASS, wk.Deletes())
    assert closing.incomplete is None
    assert closing.repeat
    assert closing.clean == (3, 3)
    assert closing.history == (2, 3, 3)
    assert closing.before == 2


def test_complete_passes_accumulate_up_to_the_confirming_ones() -> None:
    rules = wk.Deletes(confirm_passes=3)
    first = policy.close_pass(ListingPass(pass_id=1), 1, rules)
    assert (first.clean, first.before, first.judge) == ((1,), None, True)
    progress = ListingPass(pass_id=4, clean=(1, 2, 3), history=tuple(range(1, 4)))
    closing = policy.close_pass(progress, 4, rules)
    assert (closing.clean, closing.before) == ((2, 3, 4), 1)
    long = ListingPass(pass_id=20, clean=(18, 19), history=tuple(range(12, 20)))
    assert policy.close_pass(long, 20, wk.Deletes()).history == tuple(range(13, 21))


@pytest.mark.parametrize(
    ("rules", "judge", "proves"),
    [
        (wk.Deletes(), True, True),
        (wk.Deletes(order="changing"), True, False),
        (wk.Deletes(paging="keyset"), False, False),
        (wk.Deletes(verify=lambda identity, ctx: False), False, False),
        (wk.Deletes(confirm_passes=1), False, False),
    ],
)
def test_which_rules_judge_agreement_and_take_proofs(
    rules: wk.Deletes, judge: bool, proves: bool
) -> None:
    # Deletes(order="changing"): an item may move back across the reading position, so
    # no proofs are taken and deletes wait for passes that agree.
    closing = policy.close_pass(ListingPass(pass_id=PASS, clean=(OLD,)), PASS, rules)
    assert closing.judge is judge
    assert rules.proves is proves


# --- agreement --------------------------------------------------------------------------------


def test_passes_that_agree() -> None:
    assert policy.disagreement(3, 4, last_missed=2, last_repeats=0, missed=2, still=2) is None


@pytest.mark.parametrize(
    ("counts", "why"),
    [
        (
            {"last_missed": None, "last_repeats": 0, "missed": 2, "still": 2},
            "pass 3 was not counted when it closed",
        ),
        (
            {"last_missed": 2, "last_repeats": 0, "missed": 5, "still": 2},
            "the listing changed under pass 3: 3 item(s) it listed are gone from pass 4",
        ),
        (
            {"last_missed": 4, "last_repeats": 0, "missed": 2, "still": 2},
            "pass 3 missed 2 item(s) that pass 4 listed",
        ),
        (
            {"last_missed": 2, "last_repeats": 1, "missed": 2, "still": 2},
            "pass 3 listed 1 item(s) twice (the listing moved under it)",
        ),
    ],
    ids=["not-counted", "gone", "refound", "repeats"],
)
def test_passes_that_disagree(counts: dict[str, int | None], why: str) -> None:
    assert policy.disagreement(3, 4, **counts) == why  # type: ignore[arg-type]


# --- holds ------------------------------------------------------------------------------------


def test_the_guard_holds_a_mass_delete() -> None:
    rules = wk.Deletes()
    held = policy.guard(
        rules, lane="live", below=4, count=60, new=60, snapshot=100, ours=None, now=7
    )
    assert held == HeldDeletes(lane="live", below=4, count=60, snapshot=100, held_at=7)
    # A small share, or fewer than guard_min, go out.
    assert (
        policy.guard(rules, lane="live", below=4, count=40, new=40, snapshot=100, ours=None, now=7)
        is None
    )
    assert (
        policy.guard(rules, lane="live", below=4, count=9, new=9, snapshot=10, ours=None, now=7)
        is None
    )
    assert (
        policy.guard(
            wk.Deletes(guard_share=None),
            lane="live",
            below=4,
            count=60,
            new=60,
            snapshot=100,
            ours=None,
            now=7,
        )
        is None
    )


def test_a_hold_of_the_guard_goes_on_and_is_released_after_its_passes() -> None:
    ours = HeldDeletes(lane="live", below=3, count=60, snapshot=100, held_at=1, confirmed=True)
    again = policy.guard(
        wk.Deletes(), lane="live", below=4, count=70, new=70, snapshot=100, ours=ours, now=9
    )
    assert again == HeldDeletes(
        lane="live", below=4, count=70, snapshot=100, held_at=1, passes=2, confirmed=True
    )
    release = wk.Deletes(guard_release_passes=1)
    assert (
        policy.guard(
            release, lane="live", below=4, count=70, new=70, snapshot=100, ours=ours, now=9
        )
        is None
    )


def test_own_hold_and_recount() -> None:
    held = HeldDeletes(lane="live", below=3, count=5, snapshot=10, held_at=1)
    assert policy.own_hold(held, "live", "guard") is held
    assert policy.own_hold(held, "reconcile", "guard") is None
    assert policy.own_hold(held, "live", "unproven") is None
    assert policy.recounted(held, "live", 5) is held
    assert policy.recounted(held, "live", 2) == HeldDeletes(
        lane="live", below=3, count=2, snapshot=10, held_at=1
    )
    assert policy.recounted(held, "live", 0) is None  # seen whole again
    assert policy.recounted(held, "reconcile", 0) is held  # another lane's hold


def test_unproven_for_8_passes_becomes_an_announced_hold() -> None:
    rules = wk.Deletes()
    progress = ListingPass(pass_id=1)
    history: tuple[int, ...] = ()
    for pass_id in range(1, UNPROVEN_PASSES + 1):
        progress = ListingPass(pass_id=pass_id, clean=progress.clean, history=history)
        closing = policy.close_pass(progress, pass_id, rules)
        progress = ListingPass(clean=closing.clean)
        history = closing.history
        due = policy.unproven_due(history, None, "live")
        assert due == (None, 1 if pass_id == UNPROVEN_PASSES else None)
    held = policy.unproven_hold(lane="live", below=1, count=3, snapshot=50, prior=None, now=8)
    assert held == HeldDeletes(
        lane="live", below=1, count=3, snapshot=50, held_at=8, reason="unproven"
    )
    # Judged again at the next end of a pass: the hold is dropped, the count is due again.
    assert policy.unproven_due((2, *history[2:], 9), held, "live") == (None, 2)
    later = policy.unproven_hold(lane="live", below=2, count=2, snapshot=50, prior=held, now=9)
    assert (later.held_at, later.passes) == (8, 2)
    # Another hold in place (the guard's) waits for its own decision.
    guard = HeldDeletes(lane="live", below=1, count=30, snapshot=50, held_at=8)
    assert policy.unproven_due(history, guard, "live") == (guard, None)
    assert policy.unproven_note(3) == (
        "; 3 delete(s) unproven after 8 complete passes, held for an operator"
    )


def test_released_deletes_leave_the_newest_pass_counted_and_their_bridges() -> None:
    progress = ListingPass(last_missed=5, bridges=(("x", None, None),))
    after = policy.released(progress, 3, [("y", "a", "b")])
    assert after.last_missed == 2
    assert after.bridges == (("x", None, None), ("y", "a", "b"))
    assert policy.released(ListingPass(last_missed=1), 3, []).last_missed == 0
    many = [(f"r{i}", None, None) for i in range(BRIDGE_LIMIT + 5)]
    assert len(policy.released(ListingPass(), 0, many).bridges) == BRIDGE_LIMIT


# --- splicing ---------------------------------------------------------------------------------


def test_a_run_of_deleted_rows_is_spliced_out_with_its_bridges() -> None:
    marks = chain(("a", 0), ("b", None), ("c", None), ("d", 0), ("e", None))
    spliced = policy.splice(["b", "c", "e"], marks)
    assert spliced.bridges == (("b", "a", "d"), ("c", "a", "d"), ("e", "d", None))
    assert spliced.neighbours() == ["a", "d"]
    assert spliced.links(marks) == {
        "a": ListingLink(0, None, "d"),
        "d": ListingLink(0, "a", None),
    }


def test_a_neighbour_relisted_since_keeps_its_own_link() -> None:
    marks = chain(("a", 0), ("b", None), ("c", 0))
    spliced = policy.splice(["b"], marks)
    current = {"a": ItemMark(PASS, ListingLink(1, "z", "c")), "c": marks["c"]}
    assert spliced.links(current) == {"c": ListingLink(0, "a", None)}


def test_a_deleted_row_without_a_link_leaves_no_bridge() -> None:
    spliced = policy.splice(["b"], {"b": ItemMark(OLD, None)})
    assert spliced.bridges == ()
    assert spliced.links({}) == {}


# --- outcomes ---------------------------------------------------------------------------------


def test_outcomes_in_words() -> None:
    assert policy.not_yet_outcome(1, 2) == "no deletes yet: 1 of 2 complete passes"
    assert policy.held_outcome(60, 100) == "held 60 delete(s) of 100 (mass-delete guard)"
    assert policy.deleted_outcome(3, 5, None) == "deleted 3"
    assert policy.deleted_outcome(3, 5, "why") == (
        "deleted 3 proven absent; why; 2 other delete(s) wait for a proof or passes that "
        "agree, or give Deletes(verify=)"
    )
    assert policy.waiting_outcome("why", 4, proves=False) == (
        "why; 4 delete(s) wait for passes that agree, or give Deletes(verify=)"
    )
    assert policy.waiting_outcome("why", 4, proves=True) == (
        "why; 4 delete(s) wait for a proof or passes that agree, or give Deletes(verify=)"
    )
