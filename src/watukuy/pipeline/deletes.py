"""The pass and delete-confirmation policy: counts in, a decision out.

A full listing (``SnapshotDiff``, ``reconcile``) is a *pass*; when its last page is listed,
the stored rows it did not list are delete candidates. Whether they go out as ``deleted``
events is decided here, from plain data the runtime reads from the store
(``runtime/pass_end.py`` sequences the reads, the writes and the hooks):

- :func:`close_pass`: is the pass a complete listing, which passes now confirm, and is
  their agreement worth judging;
- :class:`Walk` and :func:`proven_by`: which candidates a pass proves absent, from the
  marks and links of the rows around them (see
  https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing);
- :func:`disagreement`: whether the two confirming passes agree;
- :func:`guard`: whether the mass-delete guard holds the deletes;
- :func:`unproven_due` and :func:`unproven_hold`: the hold of candidates no pass could prove in
  :data:`~watukuy.model.rows.UNPROVEN_PASSES` complete passes;
- :func:`splice`: the links that close the gaps deleted rows leave in the listing, and the
  bridges a later walk goes through;
- the ``*_outcome`` functions: what the pass did, in the words ``last_outcome`` keeps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from watukuy.model.options import Deletes
from watukuy.model.records import dataclass
from watukuy.model.rows import (
    BRIDGE_LIMIT,
    UNPROVEN_PASSES,
    HeldDeletes,
    ItemMark,
    ListingLink,
    ListingPass,
)

__all__ = [
    "EVIDENCE_LIMIT",
    "WALK_STEPS",
    "Bridge",
    "PassClose",
    "Splice",
    "Walk",
    "close_pass",
    "deleted_outcome",
    "disagreement",
    "guard",
    "held_outcome",
    "incomplete_outcome",
    "kept_bridges",
    "not_yet_outcome",
    "own_hold",
    "proven_by",
    "recounted",
    "released",
    "splice",
    "unexamined_note",
    "unproven_due",
    "unproven_hold",
    "unproven_note",
    "waiting_outcome",
]

WALK_STEPS = 64
"""A proof walks at most this many rows on each side of a missed identity."""

EVIDENCE_LIMIT = 10_000
"""Beyond this many rows missed by a pass, the rest are not looked at for a proof."""

Bridge = tuple[str, str | None, str | None]
"""``(identity, prev, next)`` of a deleted row: its neighbours in the listing when it was
deleted, so that a walk reaching it goes on (see :attr:`ListingPass.bridges`)."""


# --- the pass that listed its last page ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PassClose:
    """What a pass that listed its last page is, before anything is counted.

    Attributes:
        incomplete: Why the pass is not a complete listing (it then deletes nothing and
            confirms nothing), or ``None``.
        repeat: The pass was one page answered ``304``: the previous pass again, which it
            confirms when that one was complete.
        clean: The complete passes that now confirm deletes (newest last, at most
            ``confirm_passes``).
        history: The complete passes that tell how long a delete has waited (newest
            last, at most :data:`~watukuy.model.rows.UNPROVEN_PASSES`).
        before: The oldest confirming pass of the previous end of a pass, when it had
            enough of them: what was below it was a candidate already.
        judge: The agreement of the confirming passes decides something (two passes or
            more, offset paging, no ``verify``).
    """

    incomplete: str | None
    repeat: bool
    clean: tuple[int, ...]
    history: tuple[int, ...]
    before: int | None
    judge: bool


def close_pass(progress: ListingPass, pass_id: int, rules: Deletes) -> PassClose:
    """How the pass ``pass_id`` (``progress``, every page listed) closes under ``rules``."""
    clean = progress.clean
    # A listing answered 304 is only ever one page: it is the previous pass again, and
    # confirms that pass when it was complete (its marks stand for both).
    repeat = (
        progress.not_modified
        and progress.pages == 1
        and not progress.invalid
        and progress.last_clean
        and bool(clean)
    )
    if progress.invalid or (progress.not_modified and not repeat):
        return PassClose(
            incomplete=incomplete_outcome(progress.invalid),
            repeat=repeat,
            clean=clean,
            history=progress.history,
            before=None,
            judge=False,
        )
    # The candidates the previous end of a pass already had: deletes that waited for a
    # proof or for passes that agree are not lost by this pass.
    before = clean[0] if len(clean) >= rules.confirm_passes else None
    clean = (*clean, clean[-1] if repeat else pass_id)[-rules.confirm_passes :]
    return PassClose(
        incomplete=None,
        repeat=repeat,
        clean=clean,
        history=(*progress.history, clean[-1])[-UNPROVEN_PASSES:],
        before=before,
        # The pair of confirming passes is judged only where it decides anything: verify=
        # rules phantoms out by itself, one pass has nothing to agree with, and a keyset
        # listing cannot shift a live item out of a pass.
        judge=rules.confirm_passes > 1 and rules.verify is None and rules.paging == "offset",
    )


def disagreement(
    older: int,
    newer: int,
    *,
    last_missed: int | None,
    last_repeats: int | None,
    missed: int,
    still: int,
) -> str | None:
    """Why the confirming passes ``older`` and ``newer`` (the newest) disagree, or ``None``
    when they agree.

    Each page of an offset listing starts where the previous one ended, so a pass reads as
    many items as the listing holds at its last page: the live items it never listed are
    exactly as many as the items it listed that were gone by its last page, plus the items
    it listed twice. ``older`` is trusted when it listed nothing twice, nothing it listed is
    missing from ``newer`` (no row has a mark from ``older`` up to ``newer``), and nothing
    it missed turned up in ``newer`` (a page that answered an empty list, an item that came
    back): what it missed was absent at its last page. See
    https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing.

    Args:
        older: The older confirming pass.
        newer: The newest confirming pass.
        last_missed: The rows ``older`` did not list, counted when it closed (``None``:
            not counted).
        last_repeats: The items ``older`` listed twice (``None``: not counted).
        missed: The rows ``newer`` did not list, now.
        still: The rows ``older`` did not list, now.
    """
    if last_repeats is None or last_missed is None:
        return f"pass {older} was not counted when it closed"
    gone = missed - still
    if gone > 0:
        return (
            f"the listing changed under pass {older}: {gone} item(s) it listed are gone "
            f"from pass {newer}"
        )
    if last_missed > still:
        return f"pass {older} missed {last_missed - still} item(s) that pass {newer} listed"
    if last_repeats > 0:
        return f"pass {older} listed {last_repeats} item(s) twice (the listing moved under it)"
    return None


# --- holds ------------------------------------------------------------------------------------


def own_hold(held: HeldDeletes | None, lane: str, reason: str) -> HeldDeletes | None:
    """``held`` when it is ``lane``'s own hold for ``reason``, else ``None``."""
    if held is None or held.lane != lane or held.reason != reason:
        return None
    return held


def recounted(held: HeldDeletes | None, lane: str, count: int) -> HeldDeletes | None:
    """``lane``'s hold with ``count`` rows still below its mark (none clears it: a listing
    seen whole again leaves none); another lane's hold stays as it is."""
    if held is None or held.lane != lane:
        return held
    if count == 0:
        return None
    return dataclasses.replace(held, count=count) if count != held.count else held


def guard(
    rules: Deletes,
    *,
    lane: str,
    below: int,
    count: int,
    new: int,
    snapshot: int,
    ours: HeldDeletes | None,
    now: int,
) -> HeldDeletes | None:
    """The mass-delete guard's hold of the ``count`` deletes below ``below``, or ``None``
    when they go out.

    The guard judges what the pass newly lost (``new``); a hold already in place (``ours``,
    the guard's hold of this lane) keeps being judged whole, so an outage that goes on stays
    held, until ``guard_release_passes`` passes in a row wanted the deletes.
    """
    passes = ours.passes + 1 if ours is not None else 1
    release = rules.guard_release_passes
    if not rules.holds(new, snapshot) or (release is not None and passes > release):
        return None
    return HeldDeletes(
        lane=lane,
        below=below,
        count=count,
        snapshot=snapshot,
        held_at=ours.held_at if ours is not None else now,
        passes=passes,
        confirmed=ours.confirmed if ours is not None else False,
    )


def unproven_due(
    history: Sequence[int], held: HeldDeletes | None, lane: str
) -> tuple[HeldDeletes | None, int | None]:
    """Whether the unproven deletes of ``lane`` are judged at this end of a pass.

    ``lane``'s hold of unproven deletes is judged again at every end of a pass, so it is
    dropped from ``held``. Once the ``history`` of complete passes is
    :data:`~watukuy.model.rows.UNPROVEN_PASSES` long and nothing else holds the lane's
    deletes, the rows below its oldest pass (every pass of it missed them, nothing proved
    them) are to be held.

    Returns:
        ``held`` without the lane's unproven hold, and the pass below which the rows are
        counted (``None``: no count is due).
    """
    if own_hold(held, lane, "unproven") is not None:
        held = None
    if len(history) < UNPROVEN_PASSES or held is not None:
        return held, None
    return held, history[0]


def unproven_hold(
    *,
    lane: str,
    below: int,
    count: int,
    snapshot: int,
    prior: HeldDeletes | None,
    now: int,
) -> HeldDeletes:
    """The hold of the ``count`` rows every pass of the history missed (``below`` its
    oldest) and nothing proved: held for an operator, so that they are neither lost
    silently nor emitted unproven. ``prior`` is the lane's unproven hold before this pass."""
    return HeldDeletes(
        lane=lane,
        below=below,
        count=count,
        snapshot=snapshot,
        held_at=prior.held_at if prior is not None else now,
        passes=prior.passes + 1 if prior is not None else 1,
        confirmed=prior.confirmed if prior is not None else False,
        reason="unproven",
    )


def released(progress: ListingPass, emitted: int, bridges: Sequence[Bridge]) -> ListingPass:
    """The lane's pass after ``emitted`` confirmed held deletes went out, leaving
    ``bridges``."""
    last_missed = progress.last_missed
    if last_missed is not None:
        # The rows it removed were unlisted by the newest complete pass too: without this,
        # the next pass would count them as found again and disagree.
        last_missed = max(last_missed - emitted, 0)
    kept = (*progress.bridges, *bridges)[-BRIDGE_LIMIT:] if bridges else progress.bridges
    return dataclasses.replace(progress, last_missed=last_missed, bridges=kept)


# --- proofs of absence ------------------------------------------------------------------------


def proven_by(before: int | None, after: int | None, final_read: int) -> bool:
    """True when a missed row whose nearest listed neighbours came in the page reads
    ``before`` and ``after`` (``None``: not found) is proven absent.

    Its place in the listing's order fell inside one page read of the pass: both
    neighbours came in the same read, or the one before it came in the last read
    (``final_read``, which ran to the end of the listing), or the one after it in the
    first (which began at its start). Under a fixed order one read is a window of the
    listing at one moment, so the row was not there then.
    """
    # Neighbours in two reads prove nothing through the page boundary between them, even
    # when the reads look clean: an item listed before the boundary, deleted between the
    # two reads and created again before the next pass, shifts a live row across the
    # boundary and leaves no trace (`python -m watukuy.testing.conformance --config
    # snapshot-cap --seed 880001` found one). Such a row waits for a pass that proves it,
    # for passes that agree, or for an operator.
    return (
        (before is not None and before == after)
        or (before is not None and before == final_read)
        or after == 0
    )


class Walk:
    """The walks from the rows a pass missed to the nearest rows it listed, one step a
    round on each side, at most :data:`WALK_STEPS` rounds.

    The walk does no I/O: the caller reads the marks it asks for (:meth:`unknown`) and
    hands them in (:meth:`learn`), first those of the missed rows, then, after
    :meth:`start`, those of the rows the walks reached (:meth:`frontier`) before each
    :meth:`step`. A walk that reaches a row deleted since goes on through its bridge.

    Args:
        pass_id: The pass that missed the rows.
        missed: The rows to prove absent.
        bridges: The bridges of rows the lane deleted.
    """

    def __init__(self, pass_id: int, missed: Sequence[str], bridges: Sequence[Bridge] = ()) -> None:
        self._pass_id = pass_id
        self._missed = missed
        self._marks: dict[str, ItemMark | None] = {}
        self._bridged = {
            identity: ItemMark(-1, ListingLink(-1, prev, after))
            for identity, prev, after in bridges
        }
        self._back: dict[str, str | None] = {}
        self._ahead: dict[str, str | None] = {}
        self._found_back: dict[str, int] = {}
        self._found_ahead: dict[str, int] = {}
        self._steps = 0
        self.crossed: set[str] = set()
        """The bridged rows a walk went through."""

    def unknown(self, identities: Iterable[str]) -> list[str]:
        """Those of ``identities`` whose mark the walk has not learned, once each."""
        return [i for i in dict.fromkeys(identities) if i not in self._marks]

    def learn(self, identities: Iterable[str], marks: Mapping[str, ItemMark]) -> None:
        """The store's ``marks`` of ``identities`` (a row it does not have is missing)."""
        for identity in identities:
            mark = marks.get(identity)
            if mark is None and identity in self._bridged:
                mark = self._bridged[identity]
                self.crossed.add(identity)
            self._marks[identity] = mark

    def start(self) -> None:
        """Begin at the missed rows (their marks learned) that a linked listing saw."""
        for identity in self._missed:
            mark = self._marks.get(identity)
            if mark is not None and mark.link is not None and mark.link.read >= 0:
                self._back[identity] = mark.link.prev
                self._ahead[identity] = mark.link.next

    @property
    def walking(self) -> bool:
        """True while a walk goes on and the rounds are not used up."""
        return bool(self._back or self._ahead) and self._steps < WALK_STEPS

    def frontier(self) -> list[str]:
        """The rows the walks reached, whose marks the next :meth:`step` reads."""
        reached = (*self._back.values(), *self._ahead.values())
        return [identity for identity in reached if identity is not None]

    def step(self) -> None:
        """One step on each side: a walk stops at a row the pass listed, or where the
        chain ends (that side is then not found)."""
        self._steps += 1
        for walks, found, forward in (
            (self._back, self._found_back, False),
            (self._ahead, self._found_ahead, True),
        ):
            for identity, current in list(walks.items()):
                mark = None if current is None else self._marks.get(current)
                if mark is None or mark.link is None:
                    del walks[identity]
                elif mark.seen == self._pass_id:
                    if mark.link.read >= 0:
                        found[identity] = mark.link.read
                    del walks[identity]
                else:
                    walks[identity] = mark.link.next if forward else mark.link.prev

    def proven(self, final_read: int) -> list[str]:
        """The missed rows proven absent (see :func:`proven_by`), in the order given;
        ``final_read`` is the pass's last page read."""
        return [
            identity
            for identity in self._missed
            if proven_by(
                self._found_back.get(identity), self._found_ahead.get(identity), final_read
            )
        ]


def unexamined_note(missed: int | None, streamed: int, known: int, examined: int) -> str:
    """The note for ``last_outcome`` when some missed rows were not examined for a proof:
    ``missed`` counted (or, when ``None``, ``streamed`` read), ``known`` proven before,
    ``examined`` walked."""
    total = missed if missed is not None else streamed
    skipped = total - known - examined
    if skipped <= 0:
        return ""
    return f"; {skipped} missed row(s) beyond {EVIDENCE_LIMIT} not examined for a proof"


def kept_bridges(bridges: Sequence[Bridge], crossed: set[str]) -> tuple[Bridge, ...]:
    """The bridges a walk of the pass went through. When every missed row was walked, a
    bridge none of them reached is of no more use (a row listed since has links of its
    own), and the state stays small."""
    return tuple(bridge for bridge in bridges if bridge[0] in crossed)


# --- closing the gaps deletes leave -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Splice:
    """How deleted rows leave the listing's chains of links.

    Attributes:
        gone: The deleted rows.
        ends: For each deleted row that had a link, the first rows before and after its
            run of deleted rows (``None``: the chain ends there).
        bridges: ``(identity, before, after)`` of those rows, in the order deleted.
    """

    gone: frozenset[str]
    ends: Mapping[str, tuple[str | None, str | None]]
    bridges: tuple[Bridge, ...]

    def neighbours(self) -> list[str]:
        """The rows whose links may change (their current marks decide), sorted."""
        return sorted({n for pair in self.ends.values() for n in pair if n is not None})

    def links(self, current: Mapping[str, ItemMark]) -> dict[str, ListingLink]:
        """The new links: the row before a run of deleted rows links forward to the row
        after it, and back. Only links that pointed into the run change (a row relisted
        since keeps its own). ``current`` holds the marks of :meth:`neighbours`."""
        links: dict[str, ListingLink] = {}
        for before, after in self.ends.values():
            if before is not None:
                mark = current.get(before)
                link = links.get(before) or (mark.link if mark is not None else None)
                if link is not None and link.next in self.gone:
                    links[before] = dataclasses.replace(link, next=after)
            if after is not None:
                mark = current.get(after)
                link = links.get(after) or (mark.link if mark is not None else None)
                if link is not None and link.prev in self.gone:
                    links[after] = dataclasses.replace(link, prev=before)
        return links


def splice(deleted: Sequence[str], marks: Mapping[str, ItemMark]) -> Splice:
    """Where the runs of ``deleted`` rows end, from their ``marks`` (before the delete)."""
    gone = frozenset(deleted)

    def beyond(identity: str, forward: bool) -> str | None:
        """The first row past the run of deleted rows from ``identity`` on."""
        current: str | None = identity
        for _ in range(WALK_STEPS):
            if current is None or current not in gone:
                return current
            link = marks[current].link if current in marks else None
            if link is None:
                return None
            current = link.next if forward else link.prev
        return None

    ends: dict[str, tuple[str | None, str | None]] = {}
    bridges: list[Bridge] = []
    for identity in deleted:
        link = marks[identity].link if identity in marks else None
        if link is None:
            continue
        before, after = beyond(identity, False), beyond(identity, True)
        ends[identity] = (before, after)
        bridges.append((identity, before, after))
    return Splice(gone=gone, ends=ends, bridges=tuple(bridges))


# --- outcomes, in words -----------------------------------------------------------------------


def incomplete_outcome(invalid: int) -> str:
    """A pass with ``invalid`` items (or, with none, a ``304`` page) deletes nothing."""
    why = (
        f"{invalid} item(s) failed the schema or identity()"
        if invalid
        else "a page was answered 304 Not Modified"
    )
    return f"incomplete listing ({why}): no deletes"


def not_yet_outcome(clean: int, confirm_passes: int) -> str:
    """Fewer complete passes than ``confirm_passes`` so far."""
    return f"no deletes yet: {clean} of {confirm_passes} complete passes"


def waiting_outcome(why: str, count: int, *, proves: bool) -> str:
    """The passes disagree (``why``) and nothing is proven: the ``count`` deletes wait."""
    wait = "for a proof or passes that agree" if proves else "for passes that agree"
    return f"{why}; {count} delete(s) wait {wait}, or give Deletes(verify=)"


def held_outcome(count: int, snapshot: int) -> str:
    """The guard held ``count`` deletes of a snapshot of ``snapshot`` rows."""
    return f"held {count} delete(s) of {snapshot} (mass-delete guard)"


def deleted_outcome(emitted: int, count: int, why: str | None) -> str:
    """``emitted`` of ``count`` deletes went out; with ``why`` (the passes disagree) only
    those proven absent did."""
    if why is None:
        return f"deleted {emitted}"
    return (
        f"deleted {emitted} proven absent; {why}; "
        f"{count - emitted} other delete(s) wait for a proof or "
        "passes that agree, or give Deletes(verify=)"
    )


def unproven_note(unproven: int) -> str:
    """What is appended to the outcome when ``unproven`` deletes are held for an operator."""
    return (
        f"; {unproven} delete(s) unproven after {UNPROVEN_PASSES} "
        "complete passes, held for an operator"
    )
