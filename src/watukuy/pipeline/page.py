"""One page's journey, from the items a ``fetch`` returned to what its commit writes.

The lane (``runtime/lane.py``) fetches a page and commits it; everything it decides in
between is here, as functions of plain data, in the order a page goes through them:

1. :func:`select_items`: the items ``lag`` let through are validated, identified and
   versioned; the invalid ones are set aside, and the cursor moves past the page.
2. :func:`hash_items` (ahead of the stored rows, when nothing about the hash depends on
   them) and :func:`diff_page`: each item against its stored row and tombstone.
3. :class:`~watukuy.pipeline.events.PageEvents`: the ``created``/``updated`` events and
   their outbox rows, and, for a forced backfill, the known items again.
4. :func:`reject` and :func:`quarantine`: what cannot be written joins the invalid items;
   those become parked rows when ``on_invalid="quarantine"``.
5. :func:`link_read` and :func:`page_links`: where a full listing saw each identity (its
   neighbours in the listing's order, for the proofs of its deletes).
6. :func:`advance_pass` and :func:`plan_page`: what the pass learned, the state patch and
   the batch the commit writes.

Nothing here awaits or reads the store: the lane reads (stored rows, marks) and hands the
event loop over (while hashing, writing), calling these on what it read, or on a slice.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any

from watukuy.cursor import CursorStrategy, TimestampStrategy, start_over
from watukuy.diff import (
    MAX_IDENTITY_BYTES,
    Candidate,
    content_hash,
    dedupe,
    diff_candidates,
    identity_text,
    oversized_identity,
    prepare_candidates,
    version_text,
)
from watukuy.diff.changes import DiffResult, Rejected
from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError, ValidationError, ValidationIssue
from watukuy.model.late import LateArrivals
from watukuy.model.page import Page
from watukuy.model.records import dataclass
from watukuy.model.redact import Redaction
from watukuy.model.rows import (
    CommitBatch,
    ItemMark,
    ItemRow,
    ListingLink,
    ListingPass,
    ListingState,
    ParkedRow,
    PollerState,
    StatePatch,
    Tombstone,
    apply_patch,
)
from watukuy.validate import Invalid, is_passthrough

from .events import PageEvents
from .rules import PageRules

__all__ = [
    "UNREAD",
    "Diffed",
    "LinkRead",
    "PageInput",
    "PagePlan",
    "PageRows",
    "Selected",
    "advance_pass",
    "diff_page",
    "hash_items",
    "held_until",
    "keeps_validators",
    "link_read",
    "page_links",
    "page_rows",
    "plan_page",
    "quarantine",
    "reject",
    "select_items",
]

Invalids = list[tuple[Any, list[ValidationIssue]]]
"""Items set aside, with what is wrong with each: ``(raw item, issues)``, in page order."""

UNREAD = ListingLink(read=-1)
"""The link of a row marked during a pass that no page read of it listed as a window."""

# How a quarantined item that cannot be written as JSON is kept: a repr cut short.
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 8
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 200
_SHORT_REPR.maxdict = _SHORT_REPR.maxlist = 20


# --- select ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selected:
    """The items of a page that go on, and the cursor after the page.

    Attributes:
        kept: The raw items ``lag`` let through, in page order.
        pairs: ``(identity, item)`` of the valid ones, one per identity (the last item of
            an identity listed twice, at its first place).
        invalid: The items that failed the schema, ``identity()`` or ``version()``.
        versions: The version text of each valid item, by ``id(item)``.
        raws: The raw item of each identity, when lateness is measured; else ``None``.
        identities: The identities of :attr:`pairs`, in order.
        next_cursor: The cursor after the page.
        done: The page ends the listing.
    """

    kept: list[Any]
    pairs: list[tuple[str, Any]]
    invalid: Invalids
    versions: dict[int, str | None]
    raws: dict[str, Any] | None
    next_cursor: Any
    done: bool
    identities: list[str] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "identities", [identity for identity, _ in self.pairs])


def held_until(strategy: CursorStrategy[Any], page: Page[Any], now: int) -> int | None:
    """When the first item ``lag`` (or a stamp ahead of ``now``) held back from ``page``
    becomes deliverable (epoch ms); ``None`` when the strategy cannot tell."""
    if not isinstance(strategy, TimestampStrategy):
        return None
    return strategy.held_until(page, now)


def _describe(error: BaseException) -> str:
    """``KeyError 'order_id'``, ``TypeError: ...``: the failure with its type."""
    name = type(error).__name__
    return f"{name} {error}" if isinstance(error, KeyError) else f"{name}: {error}"


def _oversized_message(size: int) -> str:
    return (
        f"identity() returned {size:,} bytes of UTF-8; an identity holds at most "
        f"{MAX_IDENTITY_BYTES:,} on every store "
        "(https://watukuy.readthedocs.io/en/latest/stores/#identities-at-most-1024-bytes)"
    )


@dataclass(slots=True)
class _Sorting:
    """The items of a page as :func:`select_items` sorts them, one by one."""

    valid: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    invalid: Invalids = dataclasses.field(default_factory=list)
    versions: dict[int, str | None] = dataclasses.field(default_factory=dict)
    unidentified: list[tuple[str, Exception]] = dataclasses.field(default_factory=list)
    unkeyable: set[int] = dataclasses.field(default_factory=set)  # id() of raw items
    raws: dict[str, Any] | None = None

    def failed(self, raw: Any, name: str, error: Exception, redaction: Redaction) -> None:
        self.unidentified.append((name, error))
        message = redaction.text(f"{name}() failed: {_describe(error)}")
        self.invalid.append((raw, [{"message": message}]))


def _sort(rules: PageRules, raw: Any, into: _Sorting, passthrough: bool) -> None:
    """Validate, identify and version one raw item, into ``into``."""
    if passthrough:
        item = raw
    else:
        outcome = rules.adapter.validate(raw)
        if isinstance(outcome, Invalid):
            # Issue messages quote what the schema saw: clean them like errors.
            into.invalid.append((raw, rules.redaction.value(outcome.issues)))
            return
        item = outcome.item
    try:
        identity = identity_text(rules.identity(item))
    except Exception as error:
        into.failed(raw, "identity", error, rules.redaction)
        return
    oversized = oversized_identity(identity)
    if oversized is not None:
        # Data, not a misconfigured poller: it never counts as unidentified.
        into.invalid.append((raw, [{"message": _oversized_message(oversized)}]))
        into.unkeyable.add(id(raw))
        return
    if rules.version is not None:
        # version() runs once per item, here, so that its failure quarantines that item
        # like an identity() failure; the diff reads the text back by item.
        try:
            into.versions[id(item)] = version_text(rules.version(item))
        except Exception as error:
            into.failed(raw, "version", error, rules.redaction)
            return
    into.valid.append((identity, item))
    if into.raws is not None:
        into.raws[identity] = raw


def select_items(
    rules: PageRules, page: Page[Any], kept: list[Any], cursor: Any, now: int, *, raws: bool
) -> Selected:
    """The first half of a page, before any store read.

    Args:
        rules: The poller's rules.
        page: The page ``fetch`` returned.
        kept: The items of it ``lag`` let through (``strategy.select``).
        cursor: The cursor the page was asked for with.
        now: The page's time (epoch ms).
        raws: Keep each identity's raw item (lateness is read from the raw items, where
            the field path is the API's own), unless the schema passes items through.

    Raises:
        ConfigError: Not one item that passed the schema could be identified (or
            versioned): a misconfigured poller, not a few bad records.
        ValidationError: An item is invalid and ``on_invalid="fail"``.
    """
    passthrough = is_passthrough(rules.adapter)
    sorting = _Sorting(raws={} if raws and not passthrough else None)
    for raw in kept:
        _sort(rules, raw, sorting, passthrough)
    valid, invalid = sorting.valid, sorting.invalid
    if sorting.unidentified and not valid:
        # Not one item of the page could be identified: a misconfigured poller, not a few
        # bad records. Quarantining them all would move the cursor past them.
        name, first = sorting.unidentified[0]
        raise ConfigError(
            f"{name}() failed: {_describe(first)} (for all {len(sorting.unidentified)} item(s) "
            f"of the page that passed the schema; the page is not committed and the cursor "
            f"stays where it was)",
            field=name,
        )
    if invalid and rules.on_invalid == "fail":
        _, issues = invalid[0]
        raise ValidationError(
            f"{len(invalid)} item(s) failed the schema: {issues[0].get('message', '')}", issues
        )
    strategy = rules.strategy
    if page.gone:
        next_cursor, done = start_over(strategy, cursor), True
    else:
        # The cursor does not move onto an item whose identity is too long to store: its
        # identity is often the tie-break the next request sends, and a request that
        # cannot be sent would block the key. While it is the newest item it is read
        # (and quarantined) again; the first newer item moves the cursor past it.
        unkeyable = sorting.unkeyable
        passed = [raw for raw in kept if id(raw) not in unkeyable] if unkeyable else kept
        items = [item for _, item in valid]
        next_cursor, done = strategy.advance(cursor, page, passed, items, now)
    return Selected(kept, dedupe(valid), invalid, sorting.versions, sorting.raws, next_cursor, done)


# --- hash and diff --------------------------------------------------------------------


def hash_items(
    rules: PageRules, pairs: Sequence[tuple[str, Any]], rejected: Rejected[Any]
) -> list[Candidate[Any]]:
    """Hash a slice of a page's items ahead of their stored rows, for a poller without
    ``version`` (nothing about the hash then depends on them). Items that cannot be hashed
    go to ``rejected``."""
    candidates, _ = prepare_candidates(
        pairs,
        {},
        unique=True,
        version=None,
        fingerprint=rules.fingerprint,
        schema_version=rules.schema_version,
        rejected=rejected,
    )
    return candidates


@dataclass(frozen=True, slots=True)
class Diffed:
    """A page against its stored rows.

    Attributes:
        candidates: The items hashed (those the version fast path found unchanged left out).
        diff: The events and rows the diff decided.
        existing: The stored rows of the page's identities.
        tombstones: The tombstones of the identities without a row.
    """

    candidates: list[Candidate[Any]]
    diff: DiffResult[Any]
    existing: Mapping[str, ItemRow]
    tombstones: Mapping[str, Tombstone]


def diff_page(
    rules: PageRules,
    selected: Selected,
    existing: Mapping[str, ItemRow],
    tombstones: Mapping[str, Tombstone],
    *,
    candidates: list[Candidate[Any]] | None,
    rejected: Rejected[Any],
    now: int,
) -> Diffed:
    """Diff a page's items against their stored rows and tombstones.

    ``candidates`` are the items :func:`hash_items` hashed ahead, or ``None`` to hash them
    here (with the version fast path, when the poller has ``version``). Items that cannot
    be hashed or written go to ``rejected``.
    """
    if candidates is None:
        versions = selected.versions
        candidates, _unchanged = prepare_candidates(
            selected.pairs,
            existing,
            unique=True,
            version=None if rules.version is None else (lambda item: versions[id(item)]),
            fingerprint=rules.fingerprint,
            schema_version=rules.schema_version,
            rejected=rejected,
        )
    diff = diff_candidates(
        candidates,
        existing,
        schema_version=rules.schema_version,
        on_schema_change=rules.on_schema_change,
        retain_payload=rules.retain_payload,
        now=now,
        tombstones=tombstones,
        rejected=rejected,
    )
    return Diffed(candidates, diff, existing, tombstones)


# --- what cannot be written -----------------------------------------------------------


def reject(
    rules: PageRules,
    rejected: Rejected[Any],
    unwritten: set[str],
    upserts: list[ItemRow],
    invalid: Invalids,
) -> list[ItemRow]:
    """Items the engine cannot encode join the page's ``invalid`` items (``on_invalid``
    decides what becomes of them) and write no row: the rest of the page goes on.

    Returns:
        ``upserts`` without the rows of ``rejected`` and ``unwritten`` identities (both
        sets are extended).

    Raises:
        ValidationError: ``on_invalid="fail"``.
    """
    messages = [
        rules.redaction.text(
            f"the item cannot be encoded as JSON: {wkjson.encoding_problem(error)}"
        )
        for _, _, error in rejected
    ]
    if rules.on_invalid == "fail":
        raise ValidationError(
            f"{len(rejected)} item(s) cannot be encoded as JSON: {messages[0]}",
            [{"message": messages[0]}],
        )
    invalid.extend(
        (item, [{"message": message}])
        for (_, item, _), message in zip(rejected, messages, strict=True)
    )
    unwritten.update(identity for identity, _, _ in rejected)
    return [row for row in upserts if row.identity not in unwritten]


def quarantine(raw: Any, issues: list[ValidationIssue], now: int) -> ParkedRow:
    """The parked row of an invalid item (its id is the hash of the item's JSON)."""
    try:
        item_json = wkjson.dumps(wkjson.to_jsonable(raw))
    except wkjson.ENCODING_ERRORS:
        # Not writable as it is (too deep, say): kept as a repr cut short (see _SHORT_REPR).
        item_json = wkjson.dumps(_SHORT_REPR.repr(raw))
    digest = content_hash(item_json)
    message = "; ".join(
        f"{'.'.join(str(p) for p in issue.get('path', []))}: {issue['message']}"
        if issue.get("path")
        else issue["message"]
        for issue in issues
    )
    return ParkedRow(
        id=f"invalid:{digest[:32]}",
        kind="invalid",
        event=None,
        item=item_json,
        error={
            "name": "ValidationError",
            "message": message,
            "code": "VALIDATION",
            "issues": [dict(i) for i in issues],
        },
        attempts=0,
        parked_at=now,
        hold_key=None,
    )


# --- listing links --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkRead:
    """The identities one page read of a full listing links, in order (a run of one
    identity folded), and whether the read is a window of the listing.

    Attributes:
        order: The identities, in the order the page listed them.
        window: Every item the read returned is here once, in the order it came (none
            held back, none invalid, none twice): only then are neighbours neighbours.
    """

    order: list[str]
    window: bool

    @property
    def needs_marks(self) -> bool:
        """The links need the stored marks of :attr:`order` (see :func:`page_links`)."""
        return self.window and bool(self.order)


def link_read(
    rules: PageRules, selected: Selected, page: Page[Any], *, not_modified: bool
) -> LinkRead | None:
    """What a page of a full-listing pass links, or ``None`` when it links nothing: the
    poller's deletes take no proofs, or the page was answered ``304`` (its items are not
    known)."""
    if not rules.proves or not_modified:
        return None
    identities = selected.identities
    kept = selected.kept
    whole = len(kept) == len(page.items) and len(identities) + len(selected.invalid) == len(kept)
    order: list[str] = []
    for identity in identities:
        if not order or order[-1] != identity:
            order.append(identity)
    window = whole and len(set(order)) == len(order) == len(identities)
    return LinkRead(order, window)


def page_links(
    progress: ListingPass, read: LinkRead, marks: Mapping[str, ItemMark]
) -> tuple[dict[str, ListingLink], dict[str, Any]]:
    """The listing links one page read of a full-listing pass writes, and the changes to
    the pass's tail (see :class:`ListingLink` and
    https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing).

    Inside a read, neighbours are neighbours in the listing's order. Across reads the first
    item links back to the pass's tail, and the tail forward to it, only when the read
    repeats nothing the pass listed before (the tail itself, first, excepted): a read that
    repeats something began before the end of the previous one (items were inserted before
    the reading position), and its first item may lie before the tail. A read that is not
    a window of the listing (an item held back or listed twice) links nothing: its rows get
    a link that no proof takes for a read of the pass.

    Args:
        progress: The pass before the page.
        read: From :func:`link_read`.
        marks: The stored marks of ``read.order`` when :attr:`LinkRead.needs_marks`.
    """
    order = read.order
    if not read.window:
        return dict.fromkeys(order, UNREAD), {"tail": None}
    if not order:
        return {}, {}
    index = progress.pages  # this read's index in the pass
    tail, tail_prev = progress.tail, progress.tail_prev
    earlier = [  # listed by an earlier read of this pass
        identity for identity, mark in marks.items() if mark.seen == progress.pass_id and index > 0
    ]
    cross = tail is not None and (not earlier or earlier == [tail] == order[:1])
    links: dict[str, ListingLink] = {}
    first_prev: str | None = None
    last_next: str | None = None
    if cross:
        assert tail is not None
        if order[0] == tail:
            first_prev = tail_prev
        else:
            first_prev = tail
            links[tail] = ListingLink(progress.tail_read, tail_prev, order[0])
    else:
        # On a side this read cannot tell, an item keeps the neighbour an earlier read gave
        # it: under a fixed order it still lies on that side (a chain needs rows in order,
        # not adjacent ones).
        first = marks.get(order[0])
        if first is not None and first.link is not None and first.link.read >= 0:
            first_prev = first.link.prev
    final_mark = marks.get(order[-1])
    if final_mark is not None and final_mark.link is not None and final_mark.link.read >= 0:
        last_next = final_mark.link.next
    final = len(order) - 1
    for n, identity in enumerate(order):
        links[identity] = ListingLink(
            index,
            order[n - 1] if n else first_prev,
            order[n + 1] if n < final else last_next,
        )
    new_tail = {
        "tail": order[-1],
        "tail_read": index,
        "tail_prev": order[-2] if final else first_prev,
    }
    return links, new_tail


# --- the plan -------------------------------------------------------------------------


def advance_pass(
    rules: PageRules,
    progress: ListingPass,
    selected: Selected,
    *,
    not_modified: bool,
    generator: bool,
    tail: Mapping[str, Any],
) -> ListingPass:
    """The pass after one more page: its next cursor, and what it counted.

    ``generator``: the pages come from an async generator, whose listing ends when it is
    exhausted, not with a page that says it is done. ``tail``: from :func:`page_links`.
    """
    done = selected.done
    return dataclasses.replace(
        progress,
        cursor=rules.strategy.serialize(selected.next_cursor),
        pages=progress.pages + 1,
        items=progress.items + len(selected.kept),
        invalid=progress.invalid + len(selected.invalid),
        not_modified=progress.not_modified or not_modified,
        listed=bool(done) and not generator,
        **tail,
    )


def keeps_validators(
    rules: PageRules, before: str, page: Page[Any], number: int, selected: Selected
) -> bool:
    """True when this page's response may be answered ``304`` next time.

    A ``304`` has no body: the lane can only treat it as an empty page that ends the cycle
    where it stands. That is exactly what processing the same response again does only
    when the response ended the cycle (``done``) without moving the cursor (``before`` is
    the cursor text the page was asked for with), kept every item (nothing held back by
    ``lag``), and, for a full listing, was the whole listing (its first page, ``number``
    1, and done), since a listing cut by a ``304`` finds no deletes. Any other response
    must be read in full again, or the items after it would be skipped.
    """
    if not selected.done or len(selected.kept) < len(page.items):
        return False
    if rules.full_scan:
        return number == 1
    return rules.strategy.serialize(selected.next_cursor) == before


@dataclass(frozen=True, slots=True)
class PageRows:
    """The rows a page's commit writes besides its events.

    Attributes:
        upserts: The snapshot rows (none for an item that could not be written).
        parked: The parked rows of its invalid items (``on_invalid="quarantine"``).
        skipped: Invalid items dropped (``on_invalid="skip"``), for the WARNING.
    """

    upserts: list[ItemRow]
    parked: list[ParkedRow]
    skipped: int


def page_rows(
    rules: PageRules, selected: Selected, diffed: Diffed, events: PageEvents, now: int
) -> PageRows:
    """The snapshot and parked rows of a page, once its events are written. The items that
    could not be hashed or written join :attr:`Selected.invalid` (see :func:`reject`).

    Raises:
        ValidationError: An item cannot be encoded and ``on_invalid="fail"``.
    """
    invalid = selected.invalid
    upserts = diffed.diff.upserts
    if events.rejected:
        upserts = reject(rules, events.rejected, events.unwritten, upserts, invalid)
    parked = [
        quarantine(raw, issues, now) for raw, issues in invalid if rules.on_invalid == "quarantine"
    ]
    skipped = len(invalid) if invalid and rules.on_invalid == "skip" else 0
    return PageRows(upserts, parked, skipped)


@dataclass(frozen=True, slots=True)
class PageInput:
    """What :func:`plan_page` plans a page's commit from.

    Attributes:
        state: The key's state before the page.
        selected: The page's items (:func:`select_items`).
        diffed: Against their stored rows (:func:`diff_page`).
        events: Its events (:class:`PageEvents`).
        rows: Its other rows (:func:`page_rows`).
        now: The page's time.
        late: The late arrivals figures after the page, when it changes them.
        progress: The full-listing pass after this page (:func:`advance_pass`), when the
            lane is in one; ``None`` otherwise.
        listing: The listing state with :attr:`progress`.
        links: The links of the page read (:func:`page_links`), in a pass.
    """

    state: PollerState
    selected: Selected
    diffed: Diffed
    events: PageEvents
    rows: PageRows
    now: int
    late: LateArrivals | None = None
    progress: ListingPass | None = None
    listing: ListingState | None = None
    links: dict[str, ListingLink] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PagePlan:
    """What a page's commit writes, and the state after it.

    Attributes:
        batch: The commit.
        state: The key's state once the commit is in.
    """

    batch: CommitBatch
    state: PollerState


def _seen(rules: PageRules, given: PageInput) -> tuple[list[str], int, dict[str, ListingLink]]:
    """The identities the page marks seen, by which pass, and their links."""
    progress = given.progress
    if progress is not None and progress.pass_id is not None:
        # The page's identities get the pass's seen mark, and the pass its next cursor, in
        # the page's own transaction: a cut pass resumes here, on any replica.
        return given.selected.identities, progress.pass_id, given.links
    upserts = given.rows.upserts
    counter = given.state.listing.counter
    if not upserts or not counter:
        return [], 0, {}
    # An incremental lane saw these items now: they count as seen by a full listing in
    # progress (reconcile), which cannot have started after the latest pass id.
    seen = [row.identity for row in upserts]
    # Their mark is the pass's, but no page read of it listed them: a link that says so
    # keeps a proof from taking an older read for one of this pass.
    return seen, counter, dict.fromkeys(seen, UNREAD) if rules.proves else {}


def plan_page(rules: PageRules, given: PageInput) -> PagePlan:
    """The batch a page's commit writes (state patch, rows, events, marks, links), and the
    key's state once it is in."""
    state, selected, events, now = given.state, given.selected, given.events, given.now
    cursors = dict(state.cursors)
    cursors[rules.lane] = rules.strategy.serialize(selected.next_cursor)
    patch: StatePatch = {
        "cursors": cursors,
        "sequence": events.sequence,
        "schema_version": rules.schema_version,
        "updated_at": now,
    }
    if given.late is not None:
        patch["late"] = given.late
    if given.listing is not None:
        patch["listing"] = given.listing
    seen, seen_pass, links = _seen(rules, given)
    tombstones = given.diffed.tombstones
    batch = CommitBatch(
        state_patch=patch,
        upserts=given.rows.upserts,
        seen=seen,
        seen_pass=seen_pass,
        events=events.rows,
        log=rules.log,
        parked=given.rows.parked,
        now=now,
        revived=[
            change.identity for change in given.diffed.diff.changes if change.identity in tombstones
        ]
        if tombstones
        else [],
        links=links,
    )
    after = apply_patch(state, patch)
    if events.rows:
        after = dataclasses.replace(
            after, schedule=dataclasses.replace(after.schedule, drain_blocked=False)
        )
    return PagePlan(batch, after)
