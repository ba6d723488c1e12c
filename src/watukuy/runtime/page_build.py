"""One page of a lane, between its fetch and its commit: the shell around the page pipeline.

:mod:`watukuy.pipeline.page` decides what a page means; this module does what that needs
from the outside world, in this order:

1. :meth:`PageBuilder.select`: the items ``lag`` lets through, selected by the pipeline
   (before any store read, so the lane can ask for the next page at once).
2. :meth:`PageBuilder.hash`: hash them while the page before commits, handing the event
   loop over every so many items.
3. :meth:`PageBuilder.build`: read their stored rows and tombstones, diff, write the events
   (handing the loop over again), read the marks a full listing links, and start the commit.

Landing the commit (its hooks, the deliveries, the validators) is the lane's:
:class:`Built` carries what that needs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from watukuy.cursor import CursorStrategy
from watukuy.diff import Candidate
from watukuy.model.errors import ValidationIssue
from watukuy.model.events import Event, WrittenPage
from watukuy.model.http_port import HttpObservations
from watukuy.model.page import Page
from watukuy.model.ports import StateStore
from watukuy.model.records import dataclass
from watukuy.model.redact import Redaction
from watukuy.model.rows import (
    CommitBatch,
    ItemRow,
    Lane,
    ListingLink,
    ListingPass,
    ListingState,
    OutboxRow,
    PKey,
    PollerState,
    Tombstone,
)
from watukuy.pipeline import page as pipeline
from watukuy.pipeline.events import EventMaker, PageEvents
from watukuy.pipeline.page import Selected
from watukuy.pipeline.rules import PageRules

from ._turn import turn
from .late_watch import LatePage, LateWatch
from .listing_pass import page_token

if TYPE_CHECKING:
    from ._hookbus import HookEmitter
    from .lease import LeaseKeeper
    from .poller import PollerDefinition
    from .scope import KeyScope

__all__ = [
    "Built",
    "PageBuilder",
    "PassAt",
    "Selection",
    "consume",
    "lane_rules",
    "lane_strategy",
    "page_rules",
    "report_commit",
]

# Items hashed (or events written) between two turns of the event loop (see _turn).
_HASH_STEP = 250


def consume(future: asyncio.Future[Any]) -> None:
    """Read a future's outcome, so that asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


@dataclass(slots=True)
class Selection:
    """What the first half of a page (:meth:`PageBuilder.select`) hands to the second."""

    selected: Selected
    page: Page[Any]
    number: int
    observations: HttpObservations
    now: int
    candidates: list[Candidate[Any]] | None = None  # hashed ahead of the stored rows
    # Items that could not be hashed or written as JSON: quarantined like invalid ones.
    rejected: list[tuple[str, Any, Exception]] = dataclasses.field(default_factory=list)
    # Its stored rows and tombstones, being read since the page before it landed.
    stored: asyncio.Future[tuple[dict[str, ItemRow], dict[str, Tombstone]]] | None = None

    def discard(self) -> None:
        """Drop a read of the stored rows that nobody will wait for."""
        reading, self.stored = self.stored, None
        if reading is not None:
            reading.cancel()
            reading.add_done_callback(consume)

    @property
    def next_cursor(self) -> Any:
        """The cursor after the page."""
        return self.selected.next_cursor

    @property
    def done(self) -> bool:
        """The page ends the listing."""
        return self.selected.done

    @property
    def not_modified(self) -> bool:
        """A request of this page was answered ``304 Not Modified``."""
        return self.observations.not_modified


@dataclass(slots=True)
class Built:
    """A page whose commit is being written (:meth:`PageBuilder.build`), and what landing
    it does once the commit is in."""

    commit: asyncio.Future[None]
    started: int
    batch: CommitBatch
    rows: list[OutboxRow]
    page: WrittenPage
    observed: list[Event[Any]] | None
    invalid: list[tuple[Any, list[ValidationIssue]]]
    observations: HttpObservations
    keep_validators: bool
    kept: int
    counts: dict[str, int]
    state: PollerState  # after this page
    late: LatePage | None = None  # late arrivals it found

    def abandon(self) -> None:
        """Stop waiting for the commit: it lands or fails on its own, unread."""
        self.commit.add_done_callback(consume)


@dataclass(frozen=True, slots=True)
class PassAt:
    """The full-listing pass a page belongs to, as the lane holds it.

    Attributes:
        progress: The pass before the page, ``None`` outside a full listing.
        listing_with: Makes a pass after the page the lane's, and returns the listing
            state with it.
        generator: The pages come from an async generator (its listing ends when it is
            exhausted, and its pages need not tile the listing).
    """

    progress: ListingPass | None
    listing_with: Callable[[ListingPass], ListingState]
    generator: bool


def page_rules(
    poller: PollerDefinition[Any],
    *,
    strategy: CursorStrategy[Any],
    key: PKey,
    lane: Lane,
    full_scan: bool,
    redaction: Redaction,
) -> PageRules:
    """What the page pipeline needs of a poller, for one lane of one key."""
    return PageRules(
        strategy=strategy,
        adapter=poller.adapter,
        identity=poller.identity,
        version=poller.version,
        fingerprint=poller.fingerprint,
        schema_version=poller.schema_version,
        on_invalid=poller.on_invalid,
        on_schema_change=poller.on_schema_change,
        retain_payload=poller.retain_payload,
        proves=poller.deletes.proves,
        compat_ids=poller.ids.compat,
        log=poller.log is not None,
        full_scan=full_scan,
        source=poller.source,
        poller=key.poller,
        partition=key.partition,
        lane=lane,
        redaction=redaction,
    )


def lane_strategy(scope: KeyScope, lane: Lane) -> CursorStrategy[Any]:
    """The cursor strategy of ``lane``: the reconcile lane always pages from 1."""
    return scope.deps.reconcile_strategy if lane == "reconcile" else scope.poller.strategy


def lane_rules(scope: KeyScope, lane: Lane) -> PageRules:
    """:func:`page_rules` of ``lane`` in a key run (a full scan: the reconcile lane, or a
    strategy that lists everything)."""
    strategy = lane_strategy(scope, lane)
    return page_rules(
        scope.poller,
        strategy=strategy,
        key=scope.key,
        lane=lane,
        full_scan=lane == "reconcile" or strategy.full_scan,
        redaction=scope.deps.redaction,
    )


async def report_commit(
    hooks: HookEmitter,
    batch: CommitBatch,
    observed: list[Event[Any]] | None,
    *,
    deletes: int,
    duration_ms: int,
) -> None:
    """The hooks of a commit that landed (``on_commit``, then ``on_event`` per event)."""
    await hooks.on_commit(
        events=len(batch.events),
        upserts=len(batch.upserts),
        deletes=deletes,
        duration_ms=duration_ms,
    )
    for event in observed or ():
        await hooks.on_event(event=event)


class PageBuilder:
    """Selects, hashes and builds the pages of one lane of one key.

    Args:
        rules: The page pipeline's rules.
        store: The state store.
        key: The key.
        keeper: The key's lease.
        clock: The engine's clock.
        hooks: The hooks of the key and lane (only asked whether anyone listens to
            ``on_event``).
        logger: The key's logger.
        on_held: Told when a page's item was held back by ``lag`` (the page, its time).
    """

    def __init__(
        self,
        *,
        rules: PageRules,
        store: StateStore,
        key: PKey,
        keeper: LeaseKeeper,
        clock: Any,
        hooks: HookEmitter,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
        on_held: Callable[[Page[Any], int], None],
    ) -> None:
        self.rules = rules
        self.events = EventMaker(rules)
        self._store = store
        self._key = key
        self._keeper = keeper
        self._clock = clock
        self._hooks = hooks
        self._logger = logger
        self._on_held = on_held

    def select(
        self,
        cursor: Any,
        page: Page[Any],
        number: int,
        observations: HttpObservations,
        *,
        watch: LateWatch | None,
    ) -> Selection:
        """The first half of a page, before any store call: the items ``lag`` lets
        through, validated and identified, and the cursor after them.

        Raises:
            ConfigError: Not one item of the page could be identified.
            ValidationError: An item is invalid and ``on_invalid="fail"``.
        """
        rules = self.rules
        now = self._clock.now()
        kept = rules.strategy.select(page, now)
        if len(kept) < len(page.items) and rules.lane == "live":
            self._on_held(page, now)
        raws = watch is not None and watch.measures
        selected = pipeline.select_items(rules, page, kept, cursor, now, raws=raws)
        return Selection(selected, page, number, observations, now)

    async def hash(self, selection: Selection) -> None:
        """Hash the page's items ahead of reading their stored rows, when nothing about the
        hash depends on them (a poller without ``version``, whose fast path skips hashing
        items whose stored version is unchanged)."""
        if self.rules.version is not None or selection.candidates is not None:
            return
        pairs = selection.selected.pairs
        candidates: list[Candidate[Any]] = []
        for start in range(0, len(pairs), _HASH_STEP):
            chunk = pairs[start : start + _HASH_STEP]
            candidates.extend(pipeline.hash_items(self.rules, chunk, selection.rejected))
            await turn()
        selection.candidates = candidates

    async def stored_rows(
        self, selection: Selection
    ) -> tuple[dict[str, ItemRow], dict[str, Tombstone]]:
        """The stored rows of the page's identities, and the tombstones of those without."""
        store = self._store
        identities = selection.selected.identities
        existing = await store.load_versions(self._key, identities) if identities else {}
        # Identities without a row may have left a tombstone: their next event continues
        # their revisions instead of starting over (and repeating old ids).
        missing = [identity for identity in identities if identity not in existing]
        tombstones = await store.load_tombstones(self._key, missing) if missing else {}
        return existing, tombstones

    async def build(
        self,
        state: PollerState,
        selection: Selection,
        stored: str,
        *,
        at: PassAt,
        watch: LateWatch | None,
        force: bool,
    ) -> Built:
        """The second half of a page: read the stored rows, diff, write the events, and
        start the commit.

        Args:
            state: The key's state before the page.
            selection: The page's first half.
            stored: The cursor text the page was asked for with.
            at: The full-listing pass the page belongs to.
            watch: The cycle's late arrivals watch.
            force: A forced backfill: every known item is emitted again.
        """
        rules, selected, now = self.rules, selection.selected, selection.now
        diffed = await self._diff(selection)
        events = PageEvents(
            self.events,
            sequence=state.sequence,
            now=now,
            observe=self._hooks.has("on_event"),
            rejected=selection.rejected,
        )
        for sequence in events.write_changes(diffed.diff.changes):
            if not sequence % _HASH_STEP:
                await turn()
        if rules.lane == "backfill" and force:
            events.write_known(
                selected.pairs,
                diffed.diff.changes,
                diffed.candidates,
                diffed.existing,
                payload=rules.retain_payload,
            )
        rows = pipeline.page_rows(rules, selected, diffed, events, now)
        if rows.skipped:
            self._logger.warning("skipped %d invalid item(s)", rows.skipped)
        late = self._late_page(state, selection, diffed, watch)
        given = pipeline.PageInput(
            state, selected, diffed, events, rows, now, None if late is None else late.late
        )
        if at.progress is not None and at.progress.pass_id is not None:
            advanced, links = await self._advance(at.progress, selection, generator=at.generator)
            given = dataclasses.replace(
                given, progress=advanced, listing=at.listing_with(advanced), links=links
            )
        plan = pipeline.plan_page(rules, given)
        started = self._clock.now()
        batch = plan.batch
        commit = asyncio.ensure_future(
            self._store.commit_poll(self._key, self._keeper.lease, batch)
        )
        return Built(
            commit=commit,
            started=started,
            batch=batch,
            rows=events.rows,
            page=WrittenPage(self.events.writer(now), events.events),
            observed=events.observed,
            invalid=selected.invalid,
            observations=selection.observations,
            keep_validators=pipeline.keeps_validators(
                rules, stored, selection.page, selection.number, selected
            ),
            kept=len(selected.kept),
            counts=events.counts,
            state=plan.state,
            late=late,
        )

    async def _diff(self, selection: Selection) -> pipeline.Diffed:
        """The page against its stored rows: those read since the page before it landed,
        or read now."""
        reading, selection.stored = selection.stored, None
        if reading is None:
            existing, tombstones = await self.stored_rows(selection)
        else:
            existing, tombstones = await reading
        return pipeline.diff_page(
            self.rules,
            selection.selected,
            existing,
            tombstones,
            candidates=selection.candidates,
            rejected=selection.rejected,
            now=selection.now,
        )

    async def _advance(
        self, progress: ListingPass, selection: Selection, *, generator: bool
    ) -> tuple[ListingPass, dict[str, ListingLink]]:
        """The pass after the page, and the listing links of its identities (read with the
        marks an earlier read of the pass left on them)."""
        selected = selection.selected
        links: dict[str, ListingLink] = {}
        tail: dict[str, Any] = {}
        read = pipeline.link_read(
            self.rules, selected, selection.page, not_modified=selection.not_modified
        )
        if read is not None:
            marks = await self._store.load_marks(self._key, read.order) if read.needs_marks else {}
            links, tail = pipeline.page_links(progress, read, marks)
        advanced = pipeline.advance_pass(
            self.rules,
            progress,
            selected,
            not_modified=selection.not_modified,
            generator=generator,
            tail=tail,
        )
        # The token of the next page commits with the pass's cursor, so a listing paged by
        # tokens resumes its pass in another process too (``ctx.page_token``).
        token = None if advanced.listed else page_token(selection.page)
        return dataclasses.replace(advanced, token=token), links

    def _late_page(
        self,
        state: PollerState,
        selection: Selection,
        diffed: pipeline.Diffed,
        watch: LateWatch | None,
    ) -> LatePage | None:
        """The late arrivals of a page (see :class:`LateWatch`), to commit with it."""
        if watch is None:
            return None
        raws = selection.selected.raws

        def raw_of(change: Any) -> Any:
            return change.item if raws is None else raws.get(change.identity, change.item)

        identities = selection.selected.identities
        return watch.page(state.late, diffed.diff.changes, identities, raw_of, selection.now)

    async def store_validators(self, observations: HttpObservations, *, keep: bool) -> None:
        """Store the ETag / Last-Modified of this page's responses, now that the page is
        committed, when ``keep`` says a later ``304`` for the same request would mean
        exactly what processing this response again would
        (:func:`~watukuy.pipeline.page.keeps_validators`); drop them otherwise."""
        pending = observations.pending_validators
        if keep and pending:
            store, key = self._store, self._key
            for url_hash, validator in pending:
                await store.set_validator(key, self._keeper.lease, url_hash, validator)
        pending.clear()
