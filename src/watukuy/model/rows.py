"""The records the engine and the stores exchange.

Everything here is plain data: frozen dataclasses whose times are integer epoch
milliseconds and whose payloads (events, items, cursors) are JSON text, so that a store can
persist them without knowing anything about the user's item types. The codec at the bottom
turns a :class:`PollerState` into JSON-ready fields and back, one field per top-level
attribute (the Redis store keeps exactly these fields; the SQL stores keep them as one JSON
document).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import field
from enum import StrEnum
from typing import Any, Literal, TypedDict, cast

from .errors import SerializedError
from .late import (
    LateArrivals,
    Lookback,
    late_from_json,
    late_to_json,
    lookback_from_json,
    lookback_to_json,
)
from .records import dataclass, fast_init

__all__ = [
    "BRIDGE_LIMIT",
    "BackfillState",
    "DEFAULT_CONSUMER",
    "CircuitState",
    "CommitBatch",
    "EventCounts",
    "HeldDeletes",
    "ItemMark",
    "ItemRow",
    "Lane",
    "Lease",
    "ListingLink",
    "ListingPass",
    "ListingState",
    "LoggedEvent",
    "OutboxRow",
    "PKey",
    "PROVEN_LIMIT",
    "ParkedKind",
    "ParkedRow",
    "PollSummary",
    "PollerState",
    "RateLimitInfo",
    "RateLimitSource",
    "ScheduleState",
    "StatePatch",
    "StoreCapabilities",
    "Tombstone",
    "TombstoneReason",
    "UNPROVEN_PASSES",
    "Validator",
    "apply_patch",
    "delivery_consumer",
    "delivery_id",
    "empty_poller_state",
    "held_deletes_to_json",
    "listing_to_json",
    "patch_to_fields",
    "state_from_fields",
    "state_to_fields",
]

Lane = Literal["live", "reconcile", "backfill", "replay"]
"""Where an event came from: the poller's own cursor, a full reconcile listing, a backfill
from an older cursor, or a replay of the event log."""

LANES: tuple[Lane, ...] = ("live", "reconcile", "backfill", "replay")

ParkedKind = Literal["poison", "invalid"]
RateLimitSource = Literal["ietf", "legacy", "vendor"]


@dataclass(frozen=True, slots=True, order=True)
class PKey:
    """The unit of polling, leasing and ordering: one poller and one of its partitions."""

    poller: str
    partition: str = ""

    def __str__(self) -> str:
        return f"{self.poller}/{self.partition}" if self.partition else self.poller


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof that one instance may write a key's state until ``expires_at``.

    ``epoch`` grows on every acquisition; stores reject writes that carry an older one.
    """

    owner: str
    epoch: int
    expires_at: int


class CircuitState(StrEnum):
    """The circuit breaker of one key."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True, slots=True)
class RateLimitInfo:
    """What the API said about its rate limit in the last response.

    Attributes:
        limit: Requests allowed per window.
        remaining: Requests left in the current window.
        reset_at: When the window resets (epoch ms).
        policy: The raw policy string (IETF ``RateLimit-Policy``), when sent.
        source: Which header family it came from.
    """

    limit: int | None = None
    remaining: int | None = None
    reset_at: int | None = None
    policy: str | None = None
    source: RateLimitSource = "vendor"


@dataclass(frozen=True, slots=True)
class EventCounts:
    """Events emitted by one lane cycle, by type."""

    created: int = 0
    updated: int = 0
    deleted: int = 0

    @property
    def total(self) -> int:
        """All events of the cycle."""
        return self.created + self.updated + self.deleted


@dataclass(frozen=True, slots=True)
class PollSummary:
    """What one lane cycle did."""

    lane: Lane
    started_at: int
    duration_ms: int = 0
    pages: int = 0
    items: int = 0
    events: EventCounts = field(default_factory=EventCounts)
    not_modified: bool = False
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """The persisted scheduling state of one key (see :mod:`watukuy.scheduler`).

    Attributes:
        next_due_at: When the live lane is next due (epoch ms); ``None`` means now.
        interval_ms: The current AIMD interval.
        consecutive_failures: Fetch failures since the last success.
        circuit: Closed, open, or half-open.
        circuit_opened_at: When the circuit last opened.
        throttled_until: End of the last ``Retry-After`` window.
        rate_limit: Rate-limit headers of the last response.
        last_poll_at: Start of the last live cycle.
        last_poll: Summary of the last live cycle.
        last_error: The last cycle's error, serialised; ``None`` after a success.
        next_retry_at: Earliest time a failed delivery may be retried.
        drain_blocked: Every pending event waits behind a parked event of its ordering key;
            nothing is deliverable until ``parked.retry``/``discard`` or a new commit.
        consecutive_throttles: Throttled cycles (``429``, ``503`` with ``Retry-After``, an
            exhausted budget) since the last success; the floor of the next throttle wait
            grows with it.
        lanes: The failure state of the ``reconcile`` and ``backfill`` lanes, by lane. Each
            one fails, backs off and opens its circuit on its own, so a failing reconcile
            listing never holds back the live lane; of each entry only ``next_due_at``,
            ``consecutive_failures``, ``consecutive_throttles``, ``circuit``,
            ``circuit_opened_at``, ``throttled_until`` and ``last_error`` are used. A lane
            whose last cycle succeeded has no entry.
    """

    next_due_at: int | None = None
    interval_ms: int | None = None
    consecutive_failures: int = 0
    circuit: CircuitState = CircuitState.CLOSED
    circuit_opened_at: int | None = None
    throttled_until: int | None = None
    rate_limit: RateLimitInfo | None = None
    last_poll_at: int | None = None
    last_poll: PollSummary | None = None
    last_error: SerializedError | None = None
    next_retry_at: int | None = None
    drain_blocked: bool = False
    consecutive_throttles: int = 0
    lanes: Mapping[str, ScheduleState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BackfillState:
    """An active backfill: from a raw cursor up to a target cursor (both serialised)."""

    from_cursor: str
    to_cursor: str | None
    force: bool = False
    started_at: int = 0


@dataclass(frozen=True, slots=True)
class ListingPass:
    """One lane's full listing: the pass in progress and what the last passes found.

    A full listing (``SnapshotDiff``, ``reconcile``) may take several cycles. Each page
    commits, with its events, the pass's next cursor here and a *seen mark* (the pass id) on
    the snapshot row of every identity the page listed, so a cut pass resumes at its next
    page and the identities seen so far live in the store, not in memory.

    Attributes:
        pass_id: The id of the pass in progress (``None`` between passes). Ids come from
            :attr:`ListingState.counter`, so they grow across the lanes of a key.
        started_at: When the pass in progress started (epoch ms).
        cursor: The serialised cursor of its next page.
        token: The token its next page is asked for with (``ctx.page_token``): the
            ``Page.cursor`` (a ``str``) of its last page, which said ``has_more=True``;
            ``None`` before its second page and for listings paged by number. Committed
            with :attr:`cursor`, so a listing paged by tokens resumes its pass after a
            restart or on another replica.
        pages: Pages it has listed so far.
        items: Items it has listed so far.
        invalid: Items of it that failed the schema or ``identity()`` (the pass is then not
            a complete listing of identities: it deletes nothing).
        not_modified: A page of it was answered ``304`` (its identities are unknown: the
            pass deletes nothing either).
        listed: Every page of it is listed; what is left is its deletes (a run that stops
            there resumes with them, without listing again).
        clean: Ids of the latest complete passes that listed every identity (newest last).
        last_clean: The last complete pass listed every identity (a pass answered ``304``
            repeats it).
        completed: Complete passes so far.
        last_completed_at: When the last pass completed.
        last_outcome: What the last complete pass did with deletes, in words.
        last_missed: Rows the newest pass of :attr:`clean` did not list, counted when it
            closed (after its deletes); ``None`` when unknown. The next pass compares it
            with what is still unlisted: a row found again means that pass missed a live
            item (see ``Deletes``: the confirming passes must agree).
        last_repeats: Items the newest pass of :attr:`clean` listed more than once (the
            listing moved under it); ``None`` when unknown.
        disagreed: Complete passes in a row whose pair of confirming passes disagreed.
        failed_page: The page of the pass in progress whose fetch failed last (``0``:
            none); with :attr:`page_failures`, what abandons a pass that keeps failing at the
            same page (see ``runtime/listing_pass.py``).
        page_failures: Fetch failures in a row at :attr:`failed_page`.
        abandoned: Passes abandoned so far: closed before their last page, by a gone page
            (``Page(gone=True)``) or by failing at the same page again and again. An abandoned
            pass finds no deletes and confirms nothing.
        last_abandoned_at: When the last pass was abandoned (epoch ms).
        last_abandoned: Why, in words.
        tail: The last identity the pass in progress listed (``None`` before its first
            item, or when its next page read must not be linked to it); the next page
            read's first item links back to it (see :class:`ListingLink`).
        tail_read: The page read (from 0) of the pass that listed :attr:`tail`.
        tail_prev: The identity listed just before :attr:`tail` (its link's ``prev``).
        proven: Identities that a complete pass proved absent from the listing (their
            place in the listing's order fell inside one of its page reads, see
            https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing)
            and that no pass listed since; at most
            ``PROVEN_LIMIT`` of them.
        history: Ids of the latest complete passes that listed every identity (newest
            last, at most ``UNPROVEN_PASSES``), to tell how long a delete has waited.
        unproven: Delete candidates that have waited ``UNPROVEN_PASSES`` complete passes
            without a proof or passes that agree, counted at the last end of a pass.
        bridges: ``(identity, prev, next)`` of rows this lane deleted (at most
            ``BRIDGE_LIMIT``, newest last): a proof that walks the links of a row not
            listed since into a deleted row goes on through it. A bridge that no walk of
            the last pass went through is dropped.
    """

    pass_id: int | None = None
    started_at: int | None = None
    cursor: str | None = None
    token: str | None = None
    pages: int = 0
    items: int = 0
    invalid: int = 0
    not_modified: bool = False
    listed: bool = False
    clean: tuple[int, ...] = ()
    last_clean: bool = False
    completed: int = 0
    last_completed_at: int | None = None
    last_outcome: str | None = None
    last_missed: int | None = None
    last_repeats: int | None = None
    disagreed: int = 0
    failed_page: int = 0
    page_failures: int = 0
    abandoned: int = 0
    last_abandoned_at: int | None = None
    last_abandoned: str | None = None
    tail: str | None = None
    tail_read: int = 0
    tail_prev: str | None = None
    proven: tuple[str, ...] = ()
    history: tuple[int, ...] = ()
    unproven: int = 0
    bridges: tuple[tuple[str, str | None, str | None], ...] = ()


BRIDGE_LIMIT = 2_000
"""At most this many deleted rows are kept in :attr:`ListingPass.bridges`."""

PROVEN_LIMIT = 10_000
"""At most this many identities are kept in :attr:`ListingPass.proven`."""

UNPROVEN_PASSES = 8
"""A delete candidate that has waited this many complete passes without a proof is
reported (:attr:`ListingPass.unproven`, a WARNING)."""


@dataclass(frozen=True, slots=True)
class ListingState:
    """The full listings of one key (see :class:`ListingPass`).

    Attributes:
        counter: The last pass id handed out, for every lane of the key.
        lanes: Progress per lane (``"live"`` for ``SnapshotDiff``, ``"reconcile"``).
    """

    counter: int = 0
    lanes: Mapping[str, ListingPass] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HeldDeletes:
    """Deletes held back instead of emitted, until an operator (or a rule) decides: by the
    mass-delete guard, or because no pass could prove them (``reason="unproven"``).

    The identities are not listed: they are the snapshot rows whose seen mark is below
    ``below`` when the deletes are finally emitted, so a row seen again meanwhile drops
    out of the set by itself.

    Attributes:
        lane: The lane whose pass found them.
        below: Rows with a seen mark below this are the held deletes.
        count: How many there were when they were (last) held.
        snapshot: The snapshot size at that time.
        held_at: When they were first held (epoch ms).
        passes: Complete passes in a row that wanted to delete them.
        confirmed: An operator confirmed them; the next run emits them.
        reason: ``"guard"``: the mass-delete guard held them (a pass would have deleted
            too much of the snapshot at once). ``"unproven"``: identities that every one of
            the last ``UNPROVEN_PASSES`` complete passes missed, which no pass proved
            absent and no two passes that agree confirmed (see
            https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing).
    """

    lane: str
    below: int
    count: int
    snapshot: int
    held_at: int
    passes: int = 1
    confirmed: bool = False
    reason: str = "guard"


@dataclass(frozen=True, slots=True)
class PollerState:
    """Everything persisted about one key besides its items, outbox and lease.

    Attributes:
        cursors: Serialised cursor (JSON text) per lane; a missing lane means "initial".
        schedule: Scheduling state.
        paused: True while the key is paused (by ``pause()`` or partition removal).
        schema_version: The poller's ``schema_version`` at the last commit.
        sequence: The last outbox sequence number handed out.
        last_reconcile_at: When the last complete reconcile listing finished.
        backfill: The active backfill, if any.
        created_at: When the key was first seen.
        updated_at: Last time anything here changed.
        wake_at: When the key next needs the engine's attention (epoch ms), as the engine
            last computed it; ``None`` when nothing is due until an operator acts (paused),
            and for states written before the field existed. Stores index it per poller
            (:meth:`~watukuy.model.ports.StateStore.due_keys`).
        late: Late arrivals and live-lane misses found by re-reads (see
            :mod:`watukuy.model.late`).
        lookback: Where the live cursor stood at the start of recent cycles, for the
            default lookback of a ``TimestampCursor``.
    """

    cursors: Mapping[str, str | None] = field(default_factory=dict)
    schedule: ScheduleState = field(default_factory=ScheduleState)
    paused: bool = False
    schema_version: int | None = None
    sequence: int = 0
    last_reconcile_at: int | None = None
    backfill: BackfillState | None = None
    created_at: int = 0
    updated_at: int = 0
    wake_at: int | None = None
    listing: ListingState = field(default_factory=ListingState)
    held_deletes: HeldDeletes | None = None
    late: LateArrivals = field(default_factory=LateArrivals)
    lookback: Lookback = field(default_factory=Lookback)


class StatePatch(TypedDict, total=False):
    """A partial :class:`PollerState`: only the fields present are replaced."""

    cursors: Mapping[str, str | None]
    schedule: ScheduleState
    paused: bool
    schema_version: int | None
    sequence: int
    last_reconcile_at: int | None
    backfill: BackfillState | None
    updated_at: int
    wake_at: int | None
    listing: ListingState
    held_deletes: HeldDeletes | None
    late: LateArrivals
    lookback: Lookback


def empty_poller_state(now: int) -> PollerState:
    """The state of a key that has never been polled: everything initial, due now."""
    return PollerState(created_at=now, updated_at=now, wake_at=now)


def apply_patch(state: PollerState, patch: StatePatch) -> PollerState:
    """Return ``state`` with the fields of ``patch`` replaced."""
    if not patch:
        return state
    changes: dict[str, Any] = dict(patch)
    if "cursors" in changes:
        changes["cursors"] = dict(changes["cursors"])
    return dataclasses.replace(state, **changes)


@fast_init
@dataclass(frozen=True, slots=True)
class ItemRow:
    """One identity in the snapshot of a key.

    Attributes:
        identity: The item's identity string.
        version: The user's version, written as text; ``None`` when the poller has none.
        hash: SHA-256 hex of the canonical fingerprint.
        schema_version: The poller's ``schema_version`` when the row was written.
        payload: The item as JSON text, only with ``retain="payload"``.
        seen_at: When the row was last written (epoch ms).
        revision: How many events of this identity came before its last one: ``0`` after
            the first ``created``, one more for every later event (``updated``,
            ``deleted``, a re-creation). Event ids mix it in from ``1`` on, so an item
            that returns to an earlier state still gets a new id (see
            https://watukuy.readthedocs.io/en/latest/guarantees/#g2-deterministic-event-ids).
    """

    identity: str
    version: str | None
    hash: str
    schema_version: int
    payload: str | None = None
    seen_at: int = 0
    revision: int = 0


TombstoneReason = Literal["deleted", "cleared"]
"""Why a snapshot row became a tombstone: a ``deleted`` event, or ``clear_items``."""


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What a store keeps of an identity that left the snapshot, so its next event gets a
    revision (and so an id) no earlier event of the identity had.

    A commit's ``deletes`` turn rows into ``"deleted"`` tombstones and ``clear_items`` turns
    every row of the key into a ``"cleared"`` one; the row's fields are kept as they were.
    Tombstones are invisible to ``load_versions``, ``stream_identities`` and ``count_items``.

    Attributes:
        identity: The identity.
        version: The row's last version text.
        hash: The row's last content hash.
        schema_version: The row's schema version.
        revision: The row's revision (of its last event before it left).
        reason: ``"deleted"`` or ``"cleared"``.
        removed_at: When it left the snapshot (epoch ms): the commit time of the delete;
            for ``"cleared"``, the row's ``seen_at``. Retention counts from here.
    """

    identity: str
    version: str | None
    hash: str
    schema_version: int
    revision: int
    reason: TombstoneReason
    removed_at: int


@fast_init
@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A committed event waiting for its handler.

    Attributes:
        event_id: The event id (primary key within the key).
        sequence: Position in the key's stream; delivery order within an ordering key.
        event: The event envelope as JSON text.
        attempts: Failed delivery attempts so far.
        next_attempt_at: Earliest time of the next attempt after a failure (epoch ms).
        last_error: The last handler failure, serialised.
        created_at: When the event was committed.
    """

    event_id: str
    sequence: int
    event: str
    attempts: int = 0
    next_attempt_at: int | None = None
    last_error: SerializedError | None = None
    created_at: int = 0


DEFAULT_CONSUMER = "default"
"""The name of a poller's consumer when ``on()`` or ``subscribe()`` is given none."""


def delivery_id(event_id: str, consumer: str) -> str:
    """The outbox id of one event's delivery to one named consumer: ``<event id>@<name>``.

    A poller with a single consumer named ``"default"`` keeps one outbox row per event,
    under the event's own id. A poller with several consumers (or one with another name)
    splits each such shared row, before delivering it, into one row per consumer under
    this id, so that every consumer has its own attempts, retry time and parking. Event
    ids are hexadecimal and consumer names cannot hold ``@``, so the two never mix up.
    """
    return f"{event_id}@{consumer}"


def delivery_consumer(outbox_id: str) -> str | None:
    """The consumer an outbox (or parked) row is for, from its id: ``None`` for a shared
    row, which is the single default consumer's or waits to be split."""
    at = outbox_id.rfind("@")
    return None if at < 0 else outbox_id[at + 1 :]


@dataclass(frozen=True, slots=True)
class ParkedRow:
    """An event that exhausted its retries (``poison``) or an item that failed the schema
    (``invalid``).

    Attributes:
        id: The event id (poison) or a deterministic id of the invalid item.
        kind: ``"poison"`` or ``"invalid"``.
        event: The event envelope as JSON text (poison only).
        item: The raw item as JSON text (invalid only).
        error: The last error, with ``history`` of attempts or the schema ``issues``.
        attempts: Delivery attempts made.
        parked_at: When it was parked (epoch ms).
        hold_key: The ordering key held back while this row is parked, if any.
        sequence: The event's sequence (poison only), kept so a retry restores its place.
    """

    id: str
    kind: ParkedKind
    event: str | None
    item: str | None
    error: SerializedError
    attempts: int
    parked_at: int
    hold_key: str | None = None
    sequence: int | None = None


@dataclass(frozen=True, slots=True)
class Validator:
    """HTTP validators stored for one URL: ``ETag`` and ``Last-Modified``."""

    etag: str | None
    last_modified: str | None
    stored_at: int


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An event kept in the replay log."""

    sequence: int
    event: str
    created_at: int


@fast_init
@dataclass(frozen=True, slots=True)
class ListingLink:
    """Where a full listing last saw an identity, kept on its snapshot row.

    A full listing of an offset-paged API proves an identity absent when the place it had
    in the listing's order falls inside one page read (see
    https://watukuy.readthedocs.io/en/latest/guarantees/#deletes-from-a-full-listing). Each row
    keeps what that needs: which page read of its pass listed it, and its neighbours in
    the listing's order at the time.

    Attributes:
        read: The index (from 0) of the committed page read, within the pass of the row's
            seen mark, that listed it.
        prev: The identity listed just before it in that pass (across page reads), or
            ``None`` when it was the first or the one before is not known.
        next: The identity listed just after it, or ``None`` (the last, or not known yet).
    """

    read: int
    prev: str | None = None
    next: str | None = None


@dataclass(frozen=True, slots=True)
class ItemMark:
    """A snapshot row's seen mark with its :class:`ListingLink`, as
    :meth:`~watukuy.model.ports.StateStore.load_marks` returns it.

    Attributes:
        seen: The seen mark (the id of the last full-listing pass that listed the row;
            ``0`` for a row no pass listed).
        link: Where that listing saw it, or ``None`` when no link was written (a row
            that no linked listing has seen since it was created).
    """

    seen: int
    link: ListingLink | None = None


@dataclass(frozen=True, slots=True)
class CommitBatch:
    """Everything one page commits, in one store transaction.

    Attributes:
        state_patch: The next lane cursor, last sequence, schema version, updated_at.
        upserts: Item rows to insert or replace.
        deletes: Identities to remove from the snapshot (full-scan lanes only); each
            stored row becomes a ``"deleted"`` :class:`Tombstone` with ``removed_at=now``.
        seen: Identities whose seen mark becomes ``seen_pass``, after the upserts (an
            upsert alone keeps an existing row's mark; a new row starts at 0).
        seen_pass: The mark written for ``seen``.
        events: Outbox rows to insert as pending.
        log: Also append ``events`` to the replay log.
        parked: Quarantined invalid items.
        now: The commit time (epoch ms), used for log and outbox timestamps.
        revived: Identities whose tombstone the upserts replace (re-created items): their
            tombstones are dropped in the same transaction.
        links: :class:`ListingLink` values written on existing rows, after the upserts,
            the seen marks and the deletes (a row that does not exist then is skipped).
            A row's link is only changed by this; an upsert keeps it, a new row has none.
    """

    state_patch: StatePatch = field(default_factory=lambda: StatePatch())
    upserts: Sequence[ItemRow] = ()
    deletes: Sequence[str] = ()
    seen: Sequence[str] = ()
    seen_pass: int = 0
    events: Sequence[OutboxRow] = ()
    log: bool = False
    parked: Sequence[ParkedRow] = ()
    now: int = 0
    revived: Sequence[str] = ()
    links: Mapping[str, ListingLink] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a store can do; the contract suite adapts to it instead of skipping silently."""

    transactions: bool = True
    log: bool = True
    streaming: bool = True


# --- codec: PollerState <-> JSON-ready fields ------------------------------------------


def _rate_limit_to_json(info: RateLimitInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "limit": info.limit,
        "remaining": info.remaining,
        "reset_at": info.reset_at,
        "policy": info.policy,
        "source": info.source,
    }


def _rate_limit_from_json(data: Mapping[str, Any] | None) -> RateLimitInfo | None:
    if data is None:
        return None
    return RateLimitInfo(
        limit=data.get("limit"),
        remaining=data.get("remaining"),
        reset_at=data.get("reset_at"),
        policy=data.get("policy"),
        source=data.get("source", "vendor"),
    )


def _summary_to_json(summary: PollSummary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "lane": summary.lane,
        "started_at": summary.started_at,
        "duration_ms": summary.duration_ms,
        "pages": summary.pages,
        "items": summary.items,
        "events": {
            "created": summary.events.created,
            "updated": summary.events.updated,
            "deleted": summary.events.deleted,
        },
        "not_modified": summary.not_modified,
        "truncated": summary.truncated,
    }


def _summary_from_json(data: Mapping[str, Any] | None) -> PollSummary | None:
    if data is None:
        return None
    events = data.get("events") or {}
    return PollSummary(
        lane=data.get("lane", "live"),
        started_at=data.get("started_at", 0),
        duration_ms=data.get("duration_ms", 0),
        pages=data.get("pages", 0),
        items=data.get("items", 0),
        events=EventCounts(
            created=events.get("created", 0),
            updated=events.get("updated", 0),
            deleted=events.get("deleted", 0),
        ),
        not_modified=bool(data.get("not_modified", False)),
        truncated=bool(data.get("truncated", False)),
    )


def schedule_to_json(schedule: ScheduleState) -> dict[str, Any]:
    """JSON-ready form of a :class:`ScheduleState` (also what ``inspect()`` shows)."""
    return {
        "next_due_at": schedule.next_due_at,
        "interval_ms": schedule.interval_ms,
        "consecutive_failures": schedule.consecutive_failures,
        "circuit": schedule.circuit.value,
        "circuit_opened_at": schedule.circuit_opened_at,
        "throttled_until": schedule.throttled_until,
        "rate_limit": _rate_limit_to_json(schedule.rate_limit),
        "last_poll_at": schedule.last_poll_at,
        "last_poll": _summary_to_json(schedule.last_poll),
        "last_error": dict(schedule.last_error) if schedule.last_error is not None else None,
        "next_retry_at": schedule.next_retry_at,
        "drain_blocked": schedule.drain_blocked,
        "consecutive_throttles": schedule.consecutive_throttles,
        "lanes": {name: schedule_to_json(lane) for name, lane in schedule.lanes.items()},
    }


def schedule_from_json(data: Mapping[str, Any] | None) -> ScheduleState:
    """Inverse of :func:`schedule_to_json`; missing fields take their defaults."""
    if not data:
        return ScheduleState()
    last_error = data.get("last_error")
    return ScheduleState(
        next_due_at=data.get("next_due_at"),
        interval_ms=data.get("interval_ms"),
        consecutive_failures=data.get("consecutive_failures", 0),
        circuit=CircuitState(data.get("circuit", "closed")),
        circuit_opened_at=data.get("circuit_opened_at"),
        throttled_until=data.get("throttled_until"),
        rate_limit=_rate_limit_from_json(data.get("rate_limit")),
        last_poll_at=data.get("last_poll_at"),
        last_poll=_summary_from_json(data.get("last_poll")),
        last_error=cast(SerializedError, dict(last_error)) if last_error is not None else None,
        next_retry_at=data.get("next_retry_at"),
        drain_blocked=bool(data.get("drain_blocked", False)),
        consecutive_throttles=data.get("consecutive_throttles", 0),
        lanes={name: schedule_from_json(lane) for name, lane in (data.get("lanes") or {}).items()},
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _backfill_to_json(backfill: BackfillState | None) -> dict[str, Any] | None:
    if backfill is None:
        return None
    return {
        "from_cursor": backfill.from_cursor,
        "to_cursor": backfill.to_cursor,
        "force": backfill.force,
        "started_at": backfill.started_at,
    }


def _backfill_from_json(data: Mapping[str, Any] | None) -> BackfillState | None:
    if data is None:
        return None
    return BackfillState(
        from_cursor=data["from_cursor"],
        to_cursor=data.get("to_cursor"),
        force=bool(data.get("force", False)),
        started_at=data.get("started_at", 0),
    )


def _pass_to_json(progress: ListingPass) -> dict[str, Any]:
    return {
        "pass_id": progress.pass_id,
        "started_at": progress.started_at,
        "cursor": progress.cursor,
        "token": progress.token,
        "pages": progress.pages,
        "items": progress.items,
        "invalid": progress.invalid,
        "not_modified": progress.not_modified,
        "listed": progress.listed,
        "clean": list(progress.clean),
        "last_clean": progress.last_clean,
        "completed": progress.completed,
        "last_completed_at": progress.last_completed_at,
        "last_outcome": progress.last_outcome,
        "last_missed": progress.last_missed,
        "last_repeats": progress.last_repeats,
        "disagreed": progress.disagreed,
        "failed_page": progress.failed_page,
        "page_failures": progress.page_failures,
        "abandoned": progress.abandoned,
        "last_abandoned_at": progress.last_abandoned_at,
        "last_abandoned": progress.last_abandoned,
        "tail": progress.tail,
        "tail_read": progress.tail_read,
        "tail_prev": progress.tail_prev,
        "proven": list(progress.proven),
        "history": list(progress.history),
        "unproven": progress.unproven,
        "bridges": [list(bridge) for bridge in progress.bridges],
    }


def _pass_from_json(data: Mapping[str, Any]) -> ListingPass:
    return ListingPass(
        pass_id=_optional_int(data.get("pass_id")),
        started_at=_optional_int(data.get("started_at")),
        cursor=data.get("cursor"),
        token=_optional_str(data.get("token")),
        pages=int(data.get("pages") or 0),
        items=int(data.get("items") or 0),
        invalid=int(data.get("invalid") or 0),
        not_modified=bool(data.get("not_modified", False)),
        listed=bool(data.get("listed", False)),
        clean=tuple(int(i) for i in data.get("clean") or ()),
        last_clean=bool(data.get("last_clean", False)),
        completed=int(data.get("completed") or 0),
        last_completed_at=_optional_int(data.get("last_completed_at")),
        last_outcome=data.get("last_outcome"),
        last_missed=_optional_int(data.get("last_missed")),
        last_repeats=_optional_int(data.get("last_repeats")),
        disagreed=int(data.get("disagreed") or 0),
        failed_page=int(data.get("failed_page") or 0),
        page_failures=int(data.get("page_failures") or 0),
        abandoned=int(data.get("abandoned") or 0),
        last_abandoned_at=_optional_int(data.get("last_abandoned_at")),
        last_abandoned=data.get("last_abandoned"),
        tail=_optional_str(data.get("tail")),
        tail_read=int(data.get("tail_read") or 0),
        tail_prev=_optional_str(data.get("tail_prev")),
        proven=tuple(str(i) for i in data.get("proven") or ()),
        history=tuple(int(i) for i in data.get("history") or ()),
        unproven=int(data.get("unproven") or 0),
        bridges=tuple(
            (str(b[0]), _optional_str(b[1]), _optional_str(b[2])) for b in data.get("bridges") or ()
        ),
    )


def listing_to_json(listing: ListingState) -> dict[str, Any]:
    """JSON-ready form of a :class:`ListingState`."""
    return {
        "counter": listing.counter,
        "lanes": {lane: _pass_to_json(p) for lane, p in sorted(listing.lanes.items())},
    }


def _listing_from_json(data: Mapping[str, Any] | None) -> ListingState:
    if not data:
        return ListingState()
    lanes = data.get("lanes") or {}
    return ListingState(
        counter=int(data.get("counter") or 0),
        lanes={lane: _pass_from_json(p) for lane, p in lanes.items()},
    )


def held_deletes_to_json(held: HeldDeletes | None) -> dict[str, Any] | None:
    """JSON-ready form of a :class:`HeldDeletes` (also what ``inspect()`` shows)."""
    if held is None:
        return None
    return {
        "lane": held.lane,
        "below": held.below,
        "count": held.count,
        "snapshot": held.snapshot,
        "held_at": held.held_at,
        "passes": held.passes,
        "confirmed": held.confirmed,
        "reason": held.reason,
    }


def _held_from_json(data: Mapping[str, Any] | None) -> HeldDeletes | None:
    if data is None:
        return None
    return HeldDeletes(
        lane=data["lane"],
        below=int(data["below"]),
        count=int(data.get("count") or 0),
        snapshot=int(data.get("snapshot") or 0),
        held_at=int(data.get("held_at") or 0),
        passes=int(data.get("passes") or 1),
        confirmed=bool(data.get("confirmed", False)),
        reason=str(data.get("reason") or "guard"),
    )


_FIELD_ENCODERS: dict[str, Any] = {
    "cursors": lambda v: dict(v),
    "schedule": schedule_to_json,
    "paused": bool,
    "schema_version": lambda v: v,
    "sequence": int,
    "last_reconcile_at": lambda v: v,
    "backfill": _backfill_to_json,
    "created_at": int,
    "updated_at": int,
    "wake_at": _optional_int,
    "listing": listing_to_json,
    "held_deletes": held_deletes_to_json,
    "late": late_to_json,
    "lookback": lookback_to_json,
}

_FIELD_DECODERS: dict[str, Any] = {
    "cursors": lambda v: dict(v or {}),
    "schedule": schedule_from_json,
    "paused": bool,
    "schema_version": lambda v: v,
    "sequence": lambda v: int(v or 0),
    "last_reconcile_at": lambda v: v,
    "backfill": _backfill_from_json,
    "created_at": lambda v: int(v or 0),
    "updated_at": lambda v: int(v or 0),
    "wake_at": _optional_int,
    "listing": _listing_from_json,
    "held_deletes": _held_from_json,
    "late": late_from_json,
    "lookback": lookback_from_json,
}

STATE_FIELDS: tuple[str, ...] = tuple(_FIELD_ENCODERS)


def patch_to_fields(patch: StatePatch) -> dict[str, Any]:
    """JSON-ready values for the fields present in ``patch``."""
    return {name: _FIELD_ENCODERS[name](value) for name, value in patch.items()}


def state_to_fields(state: PollerState) -> dict[str, Any]:
    """JSON-ready values for every field of ``state``."""
    return {name: _FIELD_ENCODERS[name](getattr(state, name)) for name in STATE_FIELDS}


def state_from_fields(fields: Mapping[str, Any]) -> PollerState:
    """Rebuild a :class:`PollerState` from JSON-ready fields; unknown fields are ignored."""
    values = {name: _FIELD_DECODERS[name](fields.get(name)) for name in STATE_FIELDS}
    return PollerState(**values)
