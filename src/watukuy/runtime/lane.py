"""One lane cycle: fetch pages, diff them, commit each page atomically, deliver.

The loop (:meth:`LaneCycle.run`) reads top to bottom: fetch a page (:mod:`.fetching`),
select, hash and build it (its commit starts), land it (the commit awaited, its events
handed to the run's :class:`~watukuy.runtime.deliveries.Deliveries`), ask for the next
page. The cycle returns what it did as one :class:`CycleResult`.

The live, reconcile and backfill lanes share this loop; they differ in the cursor strategy
(reconcile always pages from 1), the fetch function (reconcile has its own), whether the
listing is a full scan (snapshot diff and reconcile emit ``deleted`` for what was not seen),
and the backfill rules (stop at the target cursor, ``force`` re-emits known items).

A full listing is a *pass* that may span cycles. Each page commits the pass's next cursor
(``PollerState.listing``) and a seen mark (the pass id) on the snapshot row of every
identity it listed, so a cycle cut by the page cap or a deadline resumes at the next page,
after a crash or on another replica too, and memory holds one page. When the last page is
listed, the rows left below the id of the oldest of the last ``deletes.confirm_passes``
complete passes are the deletes (each of those passes missed them), unless the pass is not
a complete listing (an invalid item, a ``304`` page) or the mass-delete guard holds them.

A pass is *abandoned* (closed with no deletes, confirming nothing; the next cycle starts a
new one at page 1) when a page past its first answers ``Page(gone=True)`` (the listing shrank
while it was read), or when it fails at the same page :data:`_PAGE_FAILURES` times in a
row: resuming at a page that is no longer there would fail every cycle and wedge the key.
"""

from __future__ import annotations

import asyncio
import dataclasses
import reprlib
from typing import TYPE_CHECKING, Any

from watukuy.cursor import CursorStrategy, TimestampStrategy, start_over
from watukuy.cursor.lookback import lookback_floor, lookback_window_ms, remember_cycle
from watukuy.diff import (
    MAX_IDENTITY_BYTES,
    Candidate,
    content_hash,
    dedupe,
    diff_candidates,
    event_id,
    identity_text,
    oversized_identity,
    prepare_candidates,
    version_text,
)
from watukuy.model import json as wkjson
from watukuy.model.errors import (
    BudgetTimeoutError,
    ConfigError,
    HttpError,
    LeaseLostError,
    SerializedError,
    StoreError,
    ValidationError,
    ValidationIssue,
    WatukuyError,
)
from watukuy.model.events import (
    Event,
    EventType,
    EventWriter,
    WrittenEvent,
    WrittenPage,
    iso_time,
)
from watukuy.model.http_port import HttpObservations, HttpScope
from watukuy.model.page import InvalidPageError, Page
from watukuy.model.redact import serialize_error
from watukuy.model.rows import (
    CommitBatch,
    EventCounts,
    ItemRow,
    Lane,
    ListingLink,
    ListingPass,
    ListingState,
    OutboxRow,
    ParkedRow,
    PollerState,
    PollSummary,
    RateLimitInfo,
    StatePatch,
    Tombstone,
    apply_patch,
)
from watukuy.validate import Invalid, is_passthrough

from ._turn import hand_over_of, turn
from .context import FetchContext
from .deliveries import Deliveries
from .dispatcher import DrainResult
from .fetching import Fetch, PageSource
from .late_watch import LatePage, LateWatch
from .pass_end import DeletePath, PassEnd
from .scope import KeyScope

if TYPE_CHECKING:
    from .hooks import ErrorPhase

__all__ = ["CycleResult", "LaneCycle"]

# Items hashed (or events written) between two turns of the event loop (see _turn).
_HASH_STEP = 250
# The link of a row marked by an incremental lane during a pass: no page read listed it.
_UNREAD = ListingLink(read=-1)
# Fetch failures in a row at the same page of a pass (past its first page) that abandon it.
# Two: one failure may be a blip worth resuming after (the pages before it are not read
# again); a second at the same page, after a backoff, most likely means the page is gone
# (the listing shrank). It is well below the circuit's default of 5 failures, and as the
# abandonment is stored with the failure, even a circuit that opens sooner probes a new pass.
_PAGE_FAILURES = 2

# How a quarantined item that cannot be written as JSON is kept: a repr cut short.
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 8
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 200
_SHORT_REPR.maxdict = _SHORT_REPR.maxlist = 20


# What a pass in progress has of its own; none of it outlives the pass.
_NO_PASS: dict[str, Any] = {
    "pass_id": None,
    "started_at": None,
    "cursor": None,
    "pages": 0,
    "items": 0,
    "invalid": 0,
    "not_modified": False,
    "listed": False,
    "failed_page": 0,
    "page_failures": 0,
    "tail": None,
    "tail_read": 0,
    "tail_prev": None,
    "first_len": -1,
    "dirty_from": None,
}


def _between_passes(progress: ListingPass, **changes: Any) -> ListingPass:
    """``progress`` without its pass in progress, and with ``changes`` (a new pass's
    ``pass_id`` and ``started_at``, or what a closed pass found)."""
    return dataclasses.replace(progress, **{**_NO_PASS, **changes})


def _is_throttle(error: BaseException) -> bool:
    """The API asked us to wait (``429``, ``503`` with ``Retry-After``), or the budget is
    spent: not the page failing (the runner does not count it as a failure either)."""
    if isinstance(error, HttpError):
        return error.is_throttle
    return isinstance(error, BudgetTimeoutError)


def _stuck_cursor(page: int, cursor: str, why: str | None = None) -> WatukuyError:
    # Fetching again from the same cursor returns the same page: without this the cycle
    # would request it until the page cap, and the next cycle would start over at once.
    # The strategy may know why (a group of equal timestamps larger than the page).
    shown = cursor if len(cursor) <= 200 else cursor[:200] + "..."
    message = (
        f"page {page} says there is more to fetch but left the cursor where it was "
        f"({shown}); the cycle stops instead of requesting the same page again"
    )
    return WatukuyError(f"{message}: {why}" if why else message, code="INVALID_PAGE")


def _oversized_message(size: int) -> str:
    return (
        f"identity() returned {size:,} bytes of UTF-8; an identity holds at most "
        f"{MAX_IDENTITY_BYTES:,} on every store (docs/stores.md)"
    )


def _describe(error: BaseException) -> str:
    """``KeyError 'order_id'``, ``TypeError: ...``: the failure with its type."""
    name = type(error).__name__
    return f"{name} {error}" if isinstance(error, KeyError) else f"{name}: {error}"


@dataclasses.dataclass(slots=True)
class _Selection:
    """What the first half of a page (:meth:`LaneCycle._select`) hands to the second."""

    page: Page[Any]
    number: int
    observations: HttpObservations
    now: int
    kept: list[Any]
    pairs: list[tuple[str, Any]]  # (identity, item), one per identity
    invalid: list[tuple[Any, list[ValidationIssue]]]
    versions: dict[int, str | None]
    next_cursor: Any
    done: bool
    candidates: list[Candidate[Any]] | None = None  # hashed ahead of the stored rows
    raws: dict[str, Any] | None = None  # raw item by identity, when lateness is measured
    # Items that could not be hashed or written as JSON: quarantined like invalid ones.
    rejected: list[tuple[str, Any, Exception]] = dataclasses.field(default_factory=list)
    # Its stored rows and tombstones, being read since the page before it landed.
    stored: asyncio.Future[tuple[dict[str, ItemRow], dict[str, Tombstone]]] | None = None

    def discard(self) -> None:
        """Drop a read of the stored rows that nobody will wait for."""
        reading, self.stored = self.stored, None
        if reading is not None:
            reading.cancel()
            reading.add_done_callback(_consume)

    @property
    def not_modified(self) -> bool:
        """A request of this page was answered ``304 Not Modified``."""
        return self.observations.not_modified


@dataclasses.dataclass(slots=True)
class _Built:
    """A page whose commit is being written (:meth:`LaneCycle._build`), and what landing
    it (:meth:`LaneCycle._land`) does once the commit is in."""

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
        self.commit.add_done_callback(_consume)


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # read, so that asyncio does not log it as never retrieved


@dataclasses.dataclass(frozen=True, slots=True)
class CycleResult:
    """What one lane cycle did (:meth:`LaneCycle.run`).

    Attributes:
        state: The key's state after the cycle (on a failure, as of the last page whose
            commit landed).
        summary: The cycle in figures (what ``on_poll_end`` receives).
        error: The failure, serialised; ``None`` on success.
        phase: Where ``error`` happened.
        raised: The exception behind ``error`` (its HTTP status and ``Retry-After`` shape
            the backoff).
        drain: What the deliveries of the cycle did.
        rate_limit: The rate limit the API reported last.
        held_until: When the first item the live lane held back (lag, or stamped ahead of
            our clock) becomes deliverable (epoch ms), if it held any.
    """

    state: PollerState
    summary: PollSummary
    error: SerializedError | None
    phase: ErrorPhase
    raised: BaseException | None
    drain: DrainResult
    rate_limit: RateLimitInfo | None
    held_until: int | None


@dataclasses.dataclass(slots=True)
class _Walk:
    """Where the page loop of a cycle stands: what :meth:`LaneCycle.run`'s steps share."""

    state: PollerState  # as of the last page built
    landed: PollerState  # as of the last page whose commit landed
    cursor: Any  # the cursor after the last page built
    request: Any  # what the latest request asked for
    target: Any  # where a backfill stops (None: no target)
    first_page: int  # the number of the cycle's first page (a pass resumes past 1)
    source: PageSource
    pages: int = 0
    deleted: int = 0
    truncated: bool = False  # cut by the page cap, the deadline or the engine stopping
    not_modified: bool = False  # a page was answered `304 Not Modified`
    done: bool = False  # the listing (or the backfill) reached its end
    abandon: str | None = None  # why the pass in progress is abandoned (a gone page)
    phase: ErrorPhase = "fetch"
    upcoming: Fetch | None = None  # the next page, asked for while this one committed
    inflight: _Built | None = None  # the page whose commit is being written
    selection: _Selection | None = None  # the page being selected, hashed and built

    def forget(self) -> None:
        """The run is cancelled or its lease is lost: stop waiting for the page being read
        and the commit being written (its events wait in the outbox for the next run)."""
        if self.selection is not None:
            self.selection.discard()
        if self.inflight is not None:
            self.inflight.abandon()


class LaneCycle:
    """Runs one lane of one key; see the module docstring.

    Args:
        scope: The key run the cycle belongs to.
        lane: Which lane it runs.
        deliveries: Where the events of each page whose commit landed are handed over.
    """

    def __init__(self, scope: KeyScope, lane: Lane, deliveries: Deliveries) -> None:
        deps, poller = scope.deps, scope.poller
        self._deps = deps
        self._hand_over = hand_over_of(deps.store)
        self._poller = poller
        self._partition = scope.partition
        self._key = scope.key
        self._lane = lane
        self._keeper = scope.keeper
        self._deliveries = deliveries
        self._cancel = scope.cancel
        self._should_stop = scope.should_stop
        self._logger = scope.logger
        self._strategy: CursorStrategy[Any] = (
            deps.reconcile_strategy if lane == "reconcile" else poller.strategy
        )
        self._fetch = (
            poller.reconcile.fetch
            if lane == "reconcile" and poller.reconcile is not None
            else poller.fetch
        )
        self._full_scan = lane == "reconcile" or self._strategy.full_scan
        self._log_events = poller.log is not None
        self._latest = HttpObservations()  # the observations of the latest fetch
        self._landed_items = 0  # items of the pages whose commit landed
        self._landed_counts = {"created": 0, "updated": 0}
        self._writer_cache: tuple[int, EventWriter] | None = None
        self._force_backfill = False
        self._pass: ListingPass | None = None  # the full listing pass this cycle continues
        self._listing = ListingState()
        self._page_source_is_generator = False
        self._watch: LateWatch | None = None
        # The lookback re-reads at most this many pages, so a cycle always moves on.
        self._window_pages = max(1, poller.max_pages_per_cycle // 2)
        self._window_read = False  # the cycle's requests reached its stored cursor
        self._began_at: Any = None  # the stored cursor the cycle began with
        self.held_until: int | None = None
        """When the first item the live lane held back (lag, or stamped ahead of our
        clock) becomes deliverable (epoch ms), if it held any (see :attr:`CycleResult.held_until`)."""

    def _fields(self) -> dict[str, Any]:
        return {
            "poller": self._key.poller,
            "partition": self._key.partition,
            "lane": self._lane,
            "instance_id": self._deps.instance_id,
        }

    # --- the loop -------------------------------------------------------------------------

    async def run(self, state: PollerState) -> CycleResult:
        """Run the lane; returns what it did. A failure of the API, of a page or of the
        store is in the result; ``LeaseLostError`` and cancellation propagate.

        Pages overlap by one step: page N+1 is asked for while page N commits (see
        :meth:`_ahead`), and its items are selected and hashed while that commit is still
        being written. Page N is then landed (its commit awaited, its events handed over)
        before anything of page N+1 touches the store, so every page still reads the rows
        the page before it wrote, commits in order, and is delivered before the next page
        commits. What fails first in that order is what the cycle reports.
        """
        started = self._deps.clock.now()
        await self._deps.hooks.emit("on_poll_start", **self._fields(), started_at=started)
        walk = self._open(state, started)
        error: SerializedError | None = None
        raised: BaseException | None = None
        try:
            await self._walk(walk)
            state = await self._close(walk, started)
        except (LeaseLostError, asyncio.CancelledError):
            await self._deliveries.settle()  # with the lease gone, the acks in flight are dropped
            raise
        except Exception as failure:
            raised = failure
            state, error = await self._failed(walk, failure)
        finally:
            await self._stop_fetching(walk)
        return self._result(walk, state, started, error, raised)

    def _open(self, state: PollerState, started: int) -> _Walk:
        """Where the cycle starts: its cursor, its first request, its first page."""
        self._latest = HttpObservations(rate_limit=state.schedule.rate_limit, defer_validators=True)
        cursor, target = self._start_cursor(state)
        # `overlap` moves back the first request of a cycle only; every later request
        # continues where the previous page left off (see CursorStrategy.next_view).
        request = self._first_request(cursor, state)
        self._window_read = request == cursor
        self._began_at = cursor
        self._watch = LateWatch(
            poller=self._poller,
            lane=self._lane,
            state=state,
            started_at=started,
            looked_back=not self._window_read,
            cursor=cursor,
        )
        return _Walk(
            state=state,
            landed=state,
            cursor=cursor,
            request=request,
            target=target,
            first_page=1 + (self._pass.pages if self._pass is not None else 0),
            source=PageSource(self._fetch),
        )

    async def _walk(self, walk: _Walk) -> None:
        """The page loop, then the landing of its last page and the wait for its acks."""
        try:
            await self._pages(walk)
        except (LeaseLostError, asyncio.CancelledError):
            walk.forget()
            raise
        except Exception:
            if walk.selection is not None:
                walk.selection.discard()
            if walk.inflight is not None:
                # The page already written is landed first: it committed before what
                # failed after it, and its own failure is the one to report.
                await self._land_inflight(walk)
            raise
        if walk.inflight is not None:
            await self._land_inflight(walk)
        if walk.selection is not None:
            walk.selection.discard()  # a page left unbuilt (a halt, a deadline) reads nothing
        await self._deliveries.settle()

    async def _pages(self, walk: _Walk) -> None:
        """Page after page: fetch, select and hash, land the page before, build (start its
        commit), then the next request. Returns when the listing ends or the cycle is cut."""
        strategy = self._strategy
        while not (self._pass is not None and self._pass.listed):
            fetch = await self._next_fetch(walk)
            if fetch is None:
                return
            walk.phase = "fetch"
            page = await fetch.task
            if page is None:
                walk.done = True
                return
            if page.gone and self._full_scan:
                walk.abandon = self._gone_page(fetch.ctx.page)
                walk.done = True
                return
            walk.pages += 1
            self._page_source_is_generator = walk.source.is_generator
            before = None if strategy.full_scan else strategy.serialize(walk.request)
            stored = strategy.serialize(walk.cursor)
            selection = walk.selection = self._select(walk.cursor, page, fetch)
            # The next request depends on this page alone: ask for it now, so that it
            # travels while this page commits and is delivered.
            ahead = self._ahead(
                walk.source, selection, walk.request, before, walk.target, walk.pages
            )
            if ahead is not None:
                walk.request = ahead
                number = walk.first_page + walk.pages
                walk.upcoming = self._start_fetch(walk.source, ahead, number, walk.state)
            if walk.inflight is not None and not await self._land_before(walk, selection):
                return
            walk.not_modified = walk.not_modified or selection.not_modified
            await self._deps.hooks.emit(
                "on_fetch",
                **self._fields(),
                page=walk.pages,
                duration_ms=fetch.duration_ms,
                items=len(page.items),
                not_modified=selection.not_modified,
            )
            walk.phase = "fetch"
            walk.inflight = await self._build(walk.state, selection, stored)
            walk.state = walk.inflight.state
            walk.cursor = selection.next_cursor
            if self._page_done(walk, page, selection):
                walk.done = True
                return
            if walk.upcoming is not None:
                continue
            # The next request waits for this page's commit and delivery.
            if not await self._land_inflight(walk):
                return
            asked = walk.request
            walk.request = self._next_view(walk.cursor, asked, page, walk.pages)
            # Stuck means the next request would be this one again (while `overlap`
            # re-reads its window the stored cursor stays, but the request moves on).
            stuck = before is not None and not walk.source.is_generator
            if stuck and strategy.serialize(walk.request) == before:
                raise _stuck_cursor(walk.pages, str(before), self._stalled(asked, page))

    async def _next_fetch(self, walk: _Walk) -> Fetch | None:
        """The request of the next page: the one asked for ahead, or a new one. ``None``
        when the cycle is cut there (the page cap, the deadline)."""
        if walk.upcoming is not None:
            fetch, walk.upcoming = walk.upcoming, None
            if self._should_stop():
                # The deadline passed while the page before it committed: the page is
                # left for the next run, like a page never asked for.
                walk.truncated = True
                await fetch.drop()
                return None
            if self._cancel.is_set():
                await fetch.drop()
                raise asyncio.CancelledError
            return fetch
        if walk.pages >= self._poller.max_pages_per_cycle:
            walk.truncated = True
            return None
        if walk.pages > 0 and self._should_stop():
            walk.truncated = True
            return None
        if self._cancel.is_set():
            raise asyncio.CancelledError
        self._keeper.check()  # never fetch once the lease may have expired
        return self._start_fetch(
            walk.source, walk.request, walk.first_page + walk.pages, walk.state
        )

    async def _land_before(self, walk: _Walk, selection: _Selection) -> bool:
        """Hash this page while the page before it commits; then land that one. False when
        the cycle stops there, before this page is built."""
        await self._hash(selection)
        if not await self._land_inflight(walk, ahead=selection):
            walk.pages -= 1
            return False  # a poison halt opens the circuit: no further pages
        if self._should_stop():
            walk.pages -= 1
            walk.truncated = True  # as if the deadline had come before the fetch
            return False
        if self._cancel.is_set():
            raise asyncio.CancelledError
        return True

    async def _land_inflight(self, walk: _Walk, ahead: _Selection | None = None) -> bool:
        """Land the page whose commit is being written; False when a poison event halted
        its delivery (no further pages)."""
        built, walk.inflight = walk.inflight, None
        assert built is not None
        walk.landed = await self._land(built, ahead=ahead)
        return not self._deliveries.halted()

    def _page_done(self, walk: _Walk, page: Page[Any], selection: _Selection) -> bool:
        """The page just built is the cycle's last."""
        done = selection.done
        if walk.target is not None and self._strategy.reached(walk.cursor, walk.target):
            done = True
        if walk.source.is_generator and not page.gone:
            done = False  # a generator's cycle ends when it is exhausted
        return done

    async def _close(self, walk: _Walk, started: int) -> PollerState:
        """The end of a cycle whose pages all landed: end (or abandon) the pass of a full
        listing, and settle the lane's own bookkeeping."""
        state = walk.landed
        done, truncated = walk.done, walk.truncated
        if walk.abandon is not None:
            walk.phase = "commit"
            state = await self._abandon_pass(state, walk.abandon)
            done = False  # not a complete listing: a reconcile is still to be done
        elif self._pass is not None and (self._pass.listed or (done and not truncated)):
            walk.phase = "commit"
            state, deleted = await self._end_pass(state)
            walk.deleted += deleted
            done, truncated = True, False
        walk.done, walk.truncated = done, truncated
        state = self._finish(state, walk.cursor, done=done and not truncated)
        if self._lane == "live":
            state = await self._after_live(state, started, done=done and not truncated)
        return state

    async def _failed(self, walk: _Walk, failure: Exception) -> tuple[PollerState, SerializedError]:
        """The cycle failed: the state as of the last page that landed, and the error; a
        page of a full listing that failed to fetch is counted against its pass."""
        state = walk.landed
        try:
            await self._deliveries.settle()
        except Exception as ack_failure:  # reported in the log; the cycle has its error
            self._logger.warning("acks of the cycle failed too: %s", ack_failure)
        error = serialize_error(failure, redaction=self._deps.redaction)
        if isinstance(failure, StoreError):
            walk.phase = "commit"
        elif self._full_scan and walk.phase == "fetch" and not _is_throttle(failure):
            state = await self._page_failed(state, error)
        return state, error

    async def _stop_fetching(self, walk: _Walk) -> None:
        """Drop the request asked for ahead, and close a generator ``fetch``."""
        try:
            if walk.upcoming is not None:
                await walk.upcoming.drop()
            await walk.source.aclose()
        except Exception as close_error:  # a generator that fails to close
            self._logger.warning("fetch generator failed to close: %s", close_error)

    def _result(
        self,
        walk: _Walk,
        state: PollerState,
        started: int,
        error: SerializedError | None,
        raised: BaseException | None,
    ) -> CycleResult:
        items = self._landed_items
        summary = PollSummary(
            lane=self._lane,
            started_at=started,
            duration_ms=self._deps.clock.now() - started,
            pages=walk.pages,
            items=items,
            events=EventCounts(**self._landed_counts, deleted=walk.deleted),
            not_modified=walk.not_modified and items == 0,
            truncated=walk.truncated,
        )
        return CycleResult(
            state=state,
            summary=summary,
            error=error,
            phase=walk.phase,
            raised=raised,
            drain=self._deliveries.take(),
            rate_limit=self._latest.rate_limit,
            held_until=self.held_until,
        )

    def _start_fetch(
        self, source: PageSource, request: Any, number: int, state: PollerState
    ) -> Fetch:
        """Call ``fetch`` for page ``number`` in a task of its own.

        Each call gets its own ``ctx.http`` and observations, so a page asked for ahead
        records its validators and its ``304`` apart from the page being committed. A
        generator was handed its ``ctx`` once, on its first call: its pages share that
        one's observations, reset before each page.
        """
        if source.is_generator:
            observations = self._latest
            observations.reset_page()
            http = None
        else:
            observations = HttpObservations(
                rate_limit=self._latest.rate_limit, defer_validators=True
            )
            self._latest = observations
            http = self._bind_http(observations)
        ctx: FetchContext[Any] = FetchContext(
            cursor=request,
            page=number,
            partition=self._partition,
            lane=self._lane,
            http=http,
            attempt=state.schedule.consecutive_failures + 1,
            logger=self._logger,
            _cancel=self._cancel,
        )
        return Fetch(ctx, observations, source, self._deps.clock)

    def _ahead(
        self,
        source: PageSource,
        selection: _Selection,
        request: Any,
        before: str | None,
        target: Any,
        pages: int,
    ) -> Any | None:
        """The request of the page after this one, when it may be sent before this page is
        committed: the cycle goes on after this page whatever the commit does, unless it
        fails. ``None`` leaves the next request to the loop, after the commit."""
        if not self._poller.prefetch or source.is_generator or selection.done:
            return None
        strategy = self._strategy
        if target is not None and strategy.reached(selection.next_cursor, target):
            return None
        if pages >= self._poller.max_pages_per_cycle or self._should_stop():
            return None
        if self._cancel.is_set() or self._keeper.lost or self._keeper.may_have_expired():
            return None
        ahead = self._next_view(selection.next_cursor, request, selection.page, pages)
        if before is not None and strategy.serialize(ahead) == before:
            return None  # stuck: the loop reports it once the page is committed
        return ahead

    def _start_cursor(self, state: PollerState) -> tuple[Any, Any]:
        strategy = self._strategy
        stored = state.cursors.get(self._lane)
        if self._lane == "backfill" and state.backfill is not None:
            backfill = state.backfill
            self._force_backfill = backfill.force
            start = stored if stored is not None else backfill.from_cursor
            target = (
                None if backfill.to_cursor is None else strategy.deserialize(backfill.to_cursor)
            )
            return strategy.deserialize(start), target
        if self._full_scan:
            progress = self._begin_pass(state)
            if progress.cursor is None:
                return strategy.initial(), None
            return strategy.deserialize(progress.cursor), None
        if stored is None:
            return strategy.initial(), None
        return strategy.deserialize(stored), None

    def _first_request(self, cursor: Any, state: PollerState) -> Any:
        """What the first request of the cycle asks for: the stored cursor, moved back by
        an explicit ``overlap``, or by the live lane's default lookback (see
        :mod:`watukuy.cursor.lookback`)."""
        strategy = self._strategy
        if (
            self._lane == "live"
            and isinstance(strategy, TimestampStrategy)
            and strategy.config.lookback
        ):
            window = lookback_window_ms(state.late.max_ms)
            floor = lookback_floor(state.lookback, window)
            since = None if floor is None else strategy.deserialize(floor)
            return strategy.lookback_view(cursor, window, since)
        return strategy.view(cursor, self._deps.clock.now())

    def _next_view(self, cursor: Any, request: Any, page: Page[Any], pages: int) -> Any:
        """The next request of the cycle (:meth:`CursorStrategy.next_view`). A lookback
        window that would take more than half the page cap is cut there: the cycle goes on
        from the stored cursor, so it always moves on."""
        view = self._strategy.next_view(cursor, request, page, self._deps.clock.now())
        if view != cursor and pages >= self._window_pages:
            self._logger.info(
                "the lookback window is longer than %d page(s): this cycle reads on from the "
                "cursor instead",
                self._window_pages,
            )
            view = cursor
        if view == cursor:
            self._window_read = True
        return view

    def _stalled(self, request: Any, page: Page[Any]) -> str | None:
        """Why ``page`` could not move the cursor, when the strategy can tell."""
        strategy = self._strategy
        return strategy.stalled(request, page) if isinstance(strategy, TimestampStrategy) else None

    async def _after_live(self, state: PollerState, started: int, *, done: bool) -> PollerState:
        """After a live cycle that did not fail: remember where its cursor stood for the
        default lookback (once its window was read), and, after a complete cycle, settle
        the reconcile findings it was waiting for."""
        strategy = self._strategy
        ended = state.cursors.get("live")
        if isinstance(strategy, TimestampStrategy) and strategy.config.lookback and ended:
            lookback = remember_cycle(
                state.lookback,
                began=strategy.serialize(self._began_at),
                started_at=started if done or self._window_read else None,
                ended_at=self._deps.clock.now(),
                cursor=ended,
            )
            state = dataclasses.replace(state, lookback=lookback)
        watch = self._watch
        if not done or watch is None or not state.late.following:
            return state
        now = self._deps.clock.now()
        late, missed, warning = watch.judge(state.late, now)
        if late == state.late:
            return state
        patch: StatePatch = {"late": late, "updated_at": now}
        await self._deps.store.save_state(self._key, self._keeper.lease, patch)
        state = apply_patch(state, patch)
        if missed:
            await self._deps.hooks.emit(
                "on_late_arrivals",
                **self._fields(),
                lateness_ms=(),
                missed=len(missed),
                window_ms=watch.window_ms,
            )
        if warning is not None:
            self._logger.warning("late arrivals: %s", warning, extra={"missed": len(missed)})
        return state

    def _begin_pass(self, state: PollerState) -> ListingPass:
        """The pass this cycle continues, or a new one (its id is the key's next)."""
        listing = state.listing
        progress = listing.lanes.get(self._lane, ListingPass())
        if progress.pass_id is None:
            counter = listing.counter + 1
            progress = _between_passes(progress, pass_id=counter, started_at=self._deps.clock.now())
            listing = ListingState(counter=counter, lanes={**listing.lanes, self._lane: progress})
        self._listing, self._pass = listing, progress
        return progress

    def _listing_with(self, progress: ListingPass) -> ListingState:
        self._pass = progress
        self._listing = ListingState(
            counter=self._listing.counter, lanes={**self._listing.lanes, self._lane: progress}
        )
        return self._listing

    def _gone_page(self, number: int) -> str:
        """Why the pass is abandoned at page ``number``, which answered ``Page(gone=True)``.

        Raises:
            InvalidPageError: ``number`` is the pass's first page: a listing always has one
                (an empty listing answers an empty page), so this is a fetch failure.
        """
        if number <= 1:
            raise InvalidPageError(
                "page 1 of a full listing answered Page(gone=True): a listing always has a "
                "first page (an empty listing is an empty page), so the pass is not abandoned"
            )
        return f"page {number} is gone (Page(gone=True)): the listing shrank while it was read"

    async def _page_failed(self, state: PollerState, error: SerializedError) -> PollerState:
        """A page of the pass in progress failed to fetch: count it, and abandon the pass once
        it failed at the same page :data:`_PAGE_FAILURES` times in a row. Returns the state
        with the count (or the abandoned pass) stored; a store failure here is only logged."""
        progress = state.listing.lanes.get(self._lane)
        if progress is None or progress.pass_id is None or progress.listed or not progress.pages:
            return state  # the first page: starting over would ask for the same page
        page = progress.pages + 1
        failures = progress.page_failures + 1 if progress.failed_page == page else 1
        try:
            if failures >= _PAGE_FAILURES:
                message = error.get("message", "")
                why = f"page {page} failed {failures} times in a row: {message}"
                return await self._abandon_pass(state, why, progress, warn=True)
            counted = dataclasses.replace(progress, failed_page=page, page_failures=failures)
            return await self._save_pass(state, counted)
        except StoreError as store_error:
            self._logger.warning("could not count the failed page %d: %s", page, store_error)
            return state

    async def _abandon_pass(
        self,
        state: PollerState,
        why: str,
        progress: ListingPass | None = None,
        *,
        warn: bool = False,
    ) -> PollerState:
        """Close the pass in progress without deletes: it did not list the whole listing,
        and confirms nothing. The next cycle starts a new pass at page 1. Logged as a
        WARNING when ``warn`` says so, or when the pass before it was abandoned too."""
        progress = progress or self._pass
        assert progress is not None
        assert progress.pass_id is not None
        now = self._deps.clock.now()
        again = progress.last_abandoned_at is not None and (
            progress.last_completed_at is None
            or progress.last_abandoned_at > progress.last_completed_at
        )
        closed = _between_passes(
            progress, abandoned=progress.abandoned + 1, last_abandoned_at=now, last_abandoned=why
        )
        (self._logger.warning if warn or again else self._logger.info)(
            "full listing (%s lane): pass %d abandoned, no deletes%s: %s; the next cycle starts a "
            "new pass at page 1",
            self._lane,
            progress.pass_id,
            " (the pass before it was abandoned too)" if again else "",
            why,
            extra={"lane": self._lane, "pass_id": progress.pass_id, "abandoned": why},
        )
        return await self._save_pass(state, closed)

    async def _save_pass(self, state: PollerState, progress: ListingPass) -> PollerState:
        listing = dataclasses.replace(
            state.listing, lanes={**state.listing.lanes, self._lane: progress}
        )
        self._listing, self._pass = listing, progress
        patch: StatePatch = {"listing": listing, "updated_at": self._deps.clock.now()}
        await self._deps.store.save_state(self._key, self._keeper.lease, patch)
        return apply_patch(state, patch)

    def _finish(self, state: PollerState, cursor: Any, *, done: bool) -> PollerState:
        now = self._deps.clock.now()
        if self._lane == "reconcile" and done:
            return dataclasses.replace(state, last_reconcile_at=now)
        if self._lane == "backfill" and done:
            cursors = dict(state.cursors)
            cursors.pop("backfill", None)
            return dataclasses.replace(state, backfill=None, cursors=cursors)
        return state

    def _bind_http(self, observations: HttpObservations) -> Any:
        deps = self._deps
        if deps.http is None:
            return None
        poller = self._poller
        budget_wait = deps.budget_max_wait(poller.budget) if poller.budget is not None else None

        async def on_budget_wait(budget: str, waited: int) -> None:
            await deps.hooks.emit("on_budget_wait", **self._fields(), budget=budget, wait_ms=waited)

        return deps.http.bind(
            HttpScope(
                key=self._key,
                lane=self._lane,
                store=deps.store,
                lease=lambda: self._keeper.lease,
                observations=observations,
                budget=poller.budget,
                budget_weight=poller.budget_weight,
                budget_cost=poller.budget_cost,
                max_wait_ms=budget_wait if budget_wait is not None else poller.schedule.max_ms,
                gate=deps.budgets,
                clock=deps.clock,
                logger=self._logger,
                on_budget_wait=on_budget_wait,
                redaction=deps.redaction,
                validators=self._lane == "live",
            )
        )

    # --- one page -------------------------------------------------------------------------

    def _select(self, cursor: Any, page: Page[Any], fetch: Fetch) -> _Selection:
        """The first half of a page, before any store call: the items ``lag`` lets through,
        validated and identified, and the cursor after them (see :meth:`_page`)."""
        deps = self._deps
        poller = self._poller
        strategy = self._strategy
        now = deps.clock.now()
        kept = strategy.select(page, now)
        if len(kept) < len(page.items) and self._lane == "live":
            self._note_held(page, now)
        valid: list[tuple[str, Any]] = []
        invalid: list[tuple[Any, list[ValidationIssue]]] = []
        passthrough = is_passthrough(poller.adapter)
        watch = self._watch
        # Lateness is read from the raw items (the field path is the API's own).
        raws: dict[str, Any] | None = (
            {} if watch is not None and watch.measures and not passthrough else None
        )
        identity_of = poller.identity
        version_of = poller.version
        # version() runs once per item, here, so that its failure quarantines that item
        # like an identity() failure; the diff reads the text back by item.
        versions: dict[int, str | None] = {}
        unidentified: list[tuple[str, Exception]] = []
        unkeyable: set[int] = set()  # id() of the raw items whose identity is too long
        for raw in kept:
            if passthrough:
                item = raw
            else:
                outcome = poller.adapter.validate(raw)
                if isinstance(outcome, Invalid):
                    # Issue messages quote what the schema saw: clean them like errors.
                    invalid.append((raw, deps.redaction.value(outcome.issues)))
                    continue
                item = outcome.item
            try:
                identity = identity_text(identity_of(item))
            except Exception as error:
                unidentified.append(("identity", error))
                message = deps.redaction.text(f"identity() failed: {_describe(error)}")
                invalid.append((raw, [{"message": message}]))
                continue
            oversized = oversized_identity(identity)
            if oversized is not None:
                # Data, not a misconfigured poller: it never counts as unidentified.
                invalid.append((raw, [{"message": _oversized_message(oversized)}]))
                unkeyable.add(id(raw))
                continue
            if version_of is not None:
                try:
                    versions[id(item)] = version_text(version_of(item))
                except Exception as error:
                    unidentified.append(("version", error))
                    message = deps.redaction.text(f"version() failed: {_describe(error)}")
                    invalid.append((raw, [{"message": message}]))
                    continue
            valid.append((identity, item))
            if raws is not None:
                raws[identity] = raw
        if unidentified and not valid:
            # Not one item of the page could be identified: a misconfigured poller, not a
            # few bad records. Quarantining them all would move the cursor past them.
            name, first = unidentified[0]
            raise ConfigError(
                f"{name}() failed: {_describe(first)} (for all {len(unidentified)} item(s) of "
                f"the page that passed the schema; the page is not committed and the cursor "
                f"stays where it was)",
                field=name,
            )
        if invalid and poller.on_invalid == "fail":
            raw, issues = invalid[0]
            raise ValidationError(
                f"{len(invalid)} item(s) failed the schema: {issues[0].get('message', '')}", issues
            )
        if page.gone:
            next_cursor, done = start_over(strategy, cursor), True
        else:
            # The cursor does not move onto an item whose identity is too long to store: its
            # identity is often the tie-break the next request sends, and a request that
            # cannot be sent would block the key. While it is the newest item it is read
            # (and quarantined) again; the first newer item moves the cursor past it.
            passed = [raw for raw in kept if id(raw) not in unkeyable] if unkeyable else kept
            items = [item for _, item in valid]
            next_cursor, done = strategy.advance(cursor, page, passed, items, now)
        return _Selection(
            page,
            fetch.ctx.page,
            fetch.observations,
            now,
            kept,
            dedupe(valid),
            invalid,
            versions,
            next_cursor,
            done,
            raws=raws,
        )

    def _note_held(self, page: Page[Any], now: int) -> None:
        """Keep when the first item ``lag`` (or our clock) held back becomes deliverable."""
        strategy = self._strategy
        if not isinstance(strategy, TimestampStrategy):
            return
        at = strategy.held_until(page, now)
        if at is not None and (self.held_until is None or at < self.held_until):
            self.held_until = at

    async def _hash(self, selection: _Selection) -> None:
        """Hash the page's items ahead of reading their stored rows, when nothing about the
        hash depends on them (a poller without ``version``, whose fast path skips hashing
        items whose stored version is unchanged)."""
        poller = self._poller
        if poller.version is not None or selection.candidates is not None:
            return
        pairs = selection.pairs
        candidates: list[Candidate[Any]] = []
        for start in range(0, len(pairs), _HASH_STEP):
            hashed, _ = prepare_candidates(
                pairs[start : start + _HASH_STEP],
                {},
                unique=True,
                version=None,
                fingerprint=poller.fingerprint,
                schema_version=poller.schema_version,
                rejected=selection.rejected,
            )
            candidates.extend(hashed)
            await turn(self._hand_over)
        selection.candidates = candidates

    async def _build(self, state: PollerState, selection: _Selection, stored: str) -> _Built:
        """The second half of a page: read the stored rows, diff, write the events, and
        start the commit. ``stored`` is the cursor text the page was asked for with."""
        deps = self._deps
        poller = self._poller
        strategy = self._strategy
        now = selection.now
        kept, pairs, invalid = selection.kept, selection.pairs, selection.invalid
        versions = selection.versions
        version_of = poller.version
        next_cursor, done = selection.next_cursor, selection.done

        identities = [identity for identity, _ in pairs]
        reading, selection.stored = selection.stored, None
        if reading is None:
            existing, tombstones = await self._stored_rows(selection)
        else:
            existing, tombstones = await reading
        candidates = selection.candidates
        rejected = selection.rejected
        if candidates is None:
            candidates, _unchanged = prepare_candidates(
                pairs,
                existing,
                unique=True,
                version=None if version_of is None else (lambda item: versions[id(item)]),
                fingerprint=poller.fingerprint,
                schema_version=poller.schema_version,
                rejected=rejected,
            )
        diff = diff_candidates(
            candidates,
            existing,
            schema_version=poller.schema_version,
            on_schema_change=poller.on_schema_change,
            retain_payload=poller.retain_payload,
            now=now,
            tombstones=tombstones,
            rejected=rejected,
        )

        sequence = state.sequence
        rows: list[OutboxRow] = []
        events: list[WrittenEvent] = []
        observed: list[Event[Any]] | None = [] if deps.hooks.has("on_event") else None
        counts = {"created": 0, "updated": 0}
        unwritten: set[str] = set()  # identities whose event could not be written
        for change in diff.changes:
            version = change.version if change.version is not None else change.hash
            try:
                event, row = self._event(
                    change.type,
                    change.identity,
                    version,
                    change.revision,
                    change.item,
                    self._load_payload(change.previous),
                    sequence + 1,
                    now,
                    observed,
                    change.text,
                )
            except wkjson.ENCODING_ERRORS as error:
                rejected.append((change.identity, change.item, error))
                unwritten.add(change.identity)
                continue
            sequence += 1
            rows.append(row)
            events.append(event)
            counts[change.type] += 1
            if not sequence % _HASH_STEP:
                await turn(self._hand_over)
        if self._lane == "backfill" and self._force_backfill:
            # force: re-emit every known item as `updated`, so a consumer can rebuild.
            changed = {change.identity for change in diff.changes}
            hashes = {candidate.identity: candidate.hash for candidate in candidates}
            for identity, item in pairs:
                if identity in changed:
                    continue
                known = existing.get(identity)
                previous = known.payload if known is not None and poller.retain_payload else None
                # The same observation as the row's last event: its revision, not a new one.
                revision = known.revision if known is not None else 0
                try:
                    version = self._version_or_hash(item, hashes.get(identity))
                    event, row = self._event(
                        "updated",
                        identity,
                        version,
                        revision,
                        item,
                        self._load_payload(previous),
                        sequence + 1,
                        now,
                        observed,
                    )
                except wkjson.ENCODING_ERRORS as error:
                    rejected.append((identity, item, error))
                    continue
                sequence += 1
                rows.append(row)
                events.append(event)
                counts["updated"] += 1

        upserts = diff.upserts
        if rejected:
            upserts = self._reject(rejected, unwritten, upserts, invalid)
        parked = [
            self._quarantine(raw, issues, now)
            for raw, issues in invalid
            if poller.on_invalid == "quarantine"
        ]
        if invalid and poller.on_invalid == "skip":
            self._logger.warning("skipped %d invalid item(s)", len(invalid))
        cursors = dict(state.cursors)
        cursors[self._lane] = strategy.serialize(next_cursor)
        patch: StatePatch = {
            "cursors": cursors,
            "sequence": sequence,
            "schema_version": poller.schema_version,
            "updated_at": now,
        }
        late = self._late_page(state, selection, diff.changes, identities, now)
        if late is not None:
            patch["late"] = late.late
        progress = self._pass
        seen: list[str] = []
        seen_pass = 0
        links: dict[str, ListingLink] = {}
        if progress is not None and progress.pass_id is not None:
            # The page's identities get the pass's seen mark, and the pass its next cursor,
            # in the page's own transaction: a cut pass resumes here, on any replica.
            tail: dict[str, Any] = {}
            if poller.deletes.proves and not selection.not_modified:
                # A read is a window of the listing only when every item it returned is
                # here once, in the order it came (none held back, none twice).
                whole = len(kept) == len(selection.page.items) and len(identities) + len(
                    invalid
                ) == len(kept)
                links, tail = await self._links(
                    progress,
                    identities,
                    whole=whole,
                    # A generator's pages need not tile the listing by their index.
                    length=-1 if self._page_source_is_generator else len(selection.page.items),
                    last=bool(done),
                )
            patch["listing"] = self._listing_with(
                dataclasses.replace(
                    progress,
                    cursor=strategy.serialize(next_cursor),
                    pages=progress.pages + 1,
                    items=progress.items + len(kept),
                    invalid=progress.invalid + len(invalid),
                    not_modified=progress.not_modified or selection.not_modified,
                    listed=bool(done) and not self._page_source_is_generator,
                    **tail,
                )
            )
            seen, seen_pass = identities, progress.pass_id
        elif upserts and state.listing.counter:
            # An incremental lane saw these items now: they count as seen by a full listing
            # in progress (reconcile), which cannot have started after the latest pass id.
            seen = [row.identity for row in upserts]
            seen_pass = state.listing.counter
            if poller.deletes.proves:
                # Their mark is the pass's, but no page read of it listed them: a link that
                # says so keeps a proof from taking an older read for one of this pass.
                links = dict.fromkeys(seen, _UNREAD)
        batch = CommitBatch(
            state_patch=patch,
            upserts=upserts,
            seen=seen,
            seen_pass=seen_pass,
            events=rows,
            log=self._log_events,
            parked=parked,
            now=now,
            revived=[change.identity for change in diff.changes if change.identity in tombstones],
            links=links,
        )
        started = deps.clock.now()
        commit = asyncio.ensure_future(deps.store.commit_poll(self._key, self._keeper.lease, batch))
        after = apply_patch(state, patch)
        if rows:
            after = dataclasses.replace(
                after, schedule=dataclasses.replace(after.schedule, drain_blocked=False)
            )
        keep = self._idle(
            stored, next_cursor, selection.page, selection.number, kept=len(kept), done=done
        )
        return _Built(
            commit=commit,
            started=started,
            batch=batch,
            rows=rows,
            page=WrittenPage(self._writer(now), events),
            observed=observed,
            invalid=invalid,
            observations=selection.observations,
            keep_validators=keep,
            kept=len(kept),
            counts=counts,
            state=after,
            late=late,
        )

    async def _links(
        self,
        progress: ListingPass,
        identities: list[str],
        *,
        whole: bool,
        length: int,
        last: bool,
    ) -> tuple[dict[str, ListingLink], dict[str, Any]]:
        """The listing links one page read of a full-listing pass writes, and the pass's
        new tail (see :class:`ListingLink` and docs/guarantees.md).

        Inside a read, neighbours are neighbours in the listing's order. Across reads the
        first item links back to the pass's tail, and the tail forward to it, only when the
        read repeats nothing the pass listed before (the tail itself, first, excepted): a
        read that repeats something began before the end of the previous one (items were
        inserted before the reading position), and its first item may lie before the tail.
        A read that is not a window of the listing (an item held back or listed twice)
        links nothing: its rows get a link that no proof takes for a read of the pass.
        """
        read = progress.pages
        # Where the pass's page boundaries stop being clean (boundary evidence): a read
        # shorter than the first before the last one, or longer than the first (the first
        # was short), or one that is not a window or repeats what the pass had listed.
        first_len, dirty = progress.first_len, progress.dirty_from
        if length < 0:
            dirty = 0  # no boundary evidence
        elif read == 0:
            first_len = length
        elif length > first_len:
            dirty = 0
        elif length < first_len and not last:
            dirty = read if dirty is None else min(dirty, read)
        changes: dict[str, Any] = {"first_len": first_len, "dirty_from": dirty}

        def dirty_here() -> dict[str, Any]:
            return {**changes, "dirty_from": read if dirty is None else min(dirty, read)}

        order: list[str] = []
        for identity in identities:
            if not order or order[-1] != identity:
                order.append(identity)
        if not whole or len(set(order)) != len(order) or len(order) != len(identities):
            return dict.fromkeys(order, _UNREAD), {**dirty_here(), "tail": None}
        if not order:
            return {}, changes
        tail, tail_prev = progress.tail, progress.tail_prev
        marks = await self._deps.store.load_marks(self._key, order)
        earlier = [  # listed by an earlier read of this pass
            identity
            for identity, mark in marks.items()
            if mark.seen == progress.pass_id and read > 0
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
            # On a side this read cannot tell, an item keeps the neighbour an earlier read
            # gave it: under a fixed order it still lies on that side (a chain needs rows
            # in order, not adjacent ones).
            first = marks.get(order[0])
            if first is not None and first.link is not None and first.link.read >= 0:
                first_prev = first.link.prev
        final = marks.get(order[-1])
        if final is not None and final.link is not None and final.link.read >= 0:
            last_next = final.link.next
        end = len(order) - 1
        for n, identity in enumerate(order):
            links[identity] = ListingLink(
                read,
                order[n - 1] if n else first_prev,
                order[n + 1] if n < end else last_next,
            )
        new_tail = {
            **(dirty_here() if earlier else changes),
            "tail": order[-1],
            "tail_read": read,
            "tail_prev": order[-2] if end else first_prev,
        }
        return links, new_tail

    def _late_page(
        self,
        state: PollerState,
        selection: _Selection,
        changes: list[Any],
        identities: list[str],
        now: int,
    ) -> LatePage | None:
        """The late arrivals of a page (see :class:`LateWatch`), to commit with it."""
        watch = self._watch
        if watch is None:
            return None
        raws = selection.raws

        def raw_of(change: Any) -> Any:
            return change.item if raws is None else raws.get(change.identity, change.item)

        return watch.page(state.late, changes, identities, raw_of, now)

    async def _land(self, built: _Built, ahead: _Selection | None = None) -> PollerState:
        """Wait for a built page's commit, then hand its events over for delivery, renew
        the lease and store its validators; returns the state after the page.

        ``ahead`` is the page that follows: its stored rows are read as soon as the commit
        is in, before the deliveries queue their acks behind it at the store. The acks are
        not awaited here: the next delivery, or the end of the cycle, waits for them.
        """
        deps = self._deps
        await built.commit
        self._landed_items += built.kept
        for name, value in built.counts.items():
            self._landed_counts[name] += value
        if ahead is not None:
            ahead.stored = asyncio.ensure_future(self._stored_rows(ahead))
            # Awaited by the page's build; a run that dies first never awaits it.
            ahead.stored.add_done_callback(_consume)
        await self._report_commit(built.batch, built.observed, deletes=0, started=built.started)
        if built.late is not None:
            await self._late_landed(built.late)
        if self._poller.on_invalid == "quarantine":
            for raw, issues in built.invalid:
                await deps.hooks.emit("on_invalid", **self._fields(), item=raw, issues=issues)
        if built.rows:
            await self._deliveries.hand(built.rows, built.page)
        await self._keeper.renew_after_commit()  # the heartbeat covers the rest
        await self._store_validators(built.observations, keep=built.keep_validators)
        return built.state

    async def _late_landed(self, late: LatePage) -> None:
        """The hook and the WARNING of a page's late arrivals, once its commit is in."""
        if late.lateness_ms:
            await self._deps.hooks.emit(
                "on_late_arrivals",
                **self._fields(),
                lateness_ms=late.lateness_ms,
                missed=0,
                window_ms=late.window_ms,
            )
        if late.warning is not None:
            self._logger.warning(
                "late arrivals: %s",
                late.warning,
                extra={"late_arrivals": len(late.lateness_ms), "window_ms": late.window_ms},
            )

    async def _stored_rows(
        self, selection: _Selection
    ) -> tuple[dict[str, ItemRow], dict[str, Tombstone]]:
        """The stored rows of the page's identities, and the tombstones of those without."""
        store = self._deps.store
        identities = [identity for identity, _ in selection.pairs]
        existing = await store.load_versions(self._key, identities) if identities else {}
        # Identities without a row may have left a tombstone: their next event continues
        # their revisions instead of starting over (and repeating old ids).
        missing = [identity for identity in identities if identity not in existing]
        tombstones = await store.load_tombstones(self._key, missing) if missing else {}
        return existing, tombstones

    async def _store_validators(self, observations: HttpObservations, *, keep: bool) -> None:
        """Store the ETag / Last-Modified of this page's responses, now that the page is
        committed, when ``keep`` says a later ``304`` for the same request would mean
        exactly what processing this response again would (see :meth:`_idle`); drop them
        otherwise."""
        pending = observations.pending_validators
        if keep and pending:
            store, key = self._deps.store, self._key
            for url_hash, validator in pending:
                await store.set_validator(key, self._keeper.lease, url_hash, validator)
        pending.clear()

    def _idle(
        self, before: str, cursor: Any, page: Page[Any], page_number: int, *, kept: int, done: bool
    ) -> bool:
        """True when this page's response may be answered ``304`` next time.

        A ``304`` has no body: the lane can only treat it as an empty page that ends the
        cycle where it stands. That is exactly what processing the same response again does
        only when the response ended the cycle (``done``) without moving the cursor, kept
        every item (nothing held back by ``lag``), and, for a full listing, was the whole
        listing (its first page, ``ctx.page == 1``, and done), since a listing cut by a
        ``304`` finds no deletes. Any
        other response must be read in full again, or the items after it would be skipped.
        """
        if not done or kept < len(page.items):
            return False
        if self._full_scan:
            return page_number == 1
        return self._strategy.serialize(cursor) == before

    def _version_or_hash(self, item: Any, known_hash: str | None) -> str:
        poller = self._poller
        if poller.version is not None:
            version = version_text(poller.version(item))
            if version is not None:
                return version
        if known_hash is not None:
            return known_hash
        fingerprint = poller.fingerprint(item) if poller.fingerprint else poller.adapter.dump(item)
        return content_hash(fingerprint)

    def _load_payload(self, payload: str | None) -> Any:
        if payload is None:
            return None
        return self._poller.adapter.load(wkjson.loads(payload))

    def _event(
        self,
        type_: EventType,
        identity: str,
        version: str,
        revision: int,
        data: Any,
        previous: Any,
        sequence: int,
        now: int,
        observed: list[Event[Any]] | None,
        data_text: str | None = None,
    ) -> tuple[WrittenEvent, OutboxRow]:
        """A new event and its outbox row; the event is read back from the row when it is
        delivered (see :class:`EventWriter`). When ``observed`` is a list, the event as
        observed (the item as ``fetch`` and the schema made it) is appended to it, for the
        ``on_event`` hooks. ``data_text`` is ``data``'s text when the diff already wrote it
        for the snapshot row (:attr:`~watukuy.diff.changes.Change.text`)."""
        poller = self._poller
        eid = event_id(
            poller.source,
            self._key.partition,
            identity,
            version,
            poller.schema_version,
            type_,
            0 if poller.ids.compat else revision,
        )
        writer = self._writer(now)
        text, written = writer.write(eid, type_, identity, sequence, data, previous, data_text)
        if observed is not None:
            observed.append(dataclasses.replace(writer.read(written), data=data, previous=previous))
        return written, OutboxRow(event_id=eid, sequence=sequence, event=text, created_at=now)

    def _writer(self, now: int) -> EventWriter:
        # Every event of a page shares its commit time, and so the writer's shared members.
        cached = self._writer_cache
        if cached is None or cached[0] != now:
            writer = EventWriter(
                source=self._poller.source,
                poller=self._key.poller,
                partition=self._key.partition,
                lane=self._lane,
                time=iso_time(now),
            )
            self._writer_cache = cached = (now, writer)
        return cached[1]

    def _reject(
        self,
        rejected: list[tuple[str, Any, Exception]],
        unwritten: set[str],
        upserts: list[ItemRow],
        invalid: list[tuple[Any, list[ValidationIssue]]],
    ) -> list[ItemRow]:
        """Items the engine cannot encode join the page's invalid items (``on_invalid``
        decides what becomes of them) and write no row: the rest of the page goes on."""
        messages = [
            self._deps.redaction.text(
                f"the item cannot be encoded as JSON: {wkjson.encoding_problem(error)}"
            )
            for _, _, error in rejected
        ]
        if self._poller.on_invalid == "fail":
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

    def _quarantine(self, raw: Any, issues: list[ValidationIssue], now: int) -> ParkedRow:
        try:
            item_json = wkjson.dumps(wkjson.to_jsonable(raw))
        except wkjson.ENCODING_ERRORS:
            # What cannot be written as it is (too deep, say) is kept as a shortened repr,
            # which stops at a few levels and a few hundred characters.
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

    async def _commit(
        self, batch: CommitBatch, observed: list[Event[Any]] | None, *, deletes: int
    ) -> None:
        """Commit a batch made outside the page loop (the deletes of a full listing) and
        wait for it; a page's commit is started by :meth:`_build` and awaited by
        :meth:`_land`."""
        started = self._deps.clock.now()
        await self._deps.store.commit_poll(self._key, self._keeper.lease, batch)
        await self._report_commit(batch, observed, deletes=deletes, started=started)

    async def _report_commit(
        self,
        batch: CommitBatch,
        observed: list[Event[Any]] | None,
        *,
        deletes: int,
        started: int,
    ) -> None:
        """The hooks of a commit that landed (``on_commit``, then ``on_event`` per event)."""
        deps = self._deps
        await deps.hooks.emit(
            "on_commit",
            **self._fields(),
            events=len(batch.events),
            upserts=len(batch.upserts),
            deletes=deletes,
            duration_ms=deps.clock.now() - started,
        )
        for event in observed or ():
            await deps.hooks.emit("on_event", **self._fields(), event=event)

    # --- the end of a full scan (see pass_end) --------------------------------------------

    async def _end_pass(self, state: PollerState) -> tuple[PollerState, int]:
        """Every page of the pass is listed: emit (or hold) its deletes, then close it."""
        progress = self._pass
        assert progress is not None
        return await self._pass_end().end(
            state, progress, lambda ended: self._listing_with(_between_passes(ended))
        )

    async def release_held(self, state: PollerState) -> tuple[PollerState, int]:
        """Emit the deletes an operator confirmed (``state.held_deletes``), then drop the
        hold. Rows seen again since they were held are no longer below its mark."""
        return await self._pass_end().release_held(state)

    def _pass_end(self) -> PassEnd:
        deps = self._deps
        return PassEnd(
            store=deps.store,
            key=self._key,
            lane=self._lane,
            keeper=self._keeper,
            clock=deps.clock,
            poller=self._poller,
            hooks=deps.hooks,
            instance_id=deps.instance_id,
            logger=self._logger,
            path=DeletePath(
                event=self._deleted_event,
                page=lambda now, events: WrittenPage(self._writer(now), events),
                commit=self._commit_deletes,
                deliver=self._deliver,
            ),
            context=self._verify_context,
        )

    def _deleted_event(
        self, row: ItemRow, sequence: int, now: int, observed: list[Event[Any]] | None
    ) -> tuple[WrittenEvent, OutboxRow]:
        payload = self._load_payload(row.payload) if self._poller.retain_payload else None
        version = row.version if row.version is not None else row.hash
        return self._event(
            "deleted",
            row.identity,
            version,
            row.revision + 1,
            payload,
            payload,
            sequence,
            now,
            observed,
        )

    async def _commit_deletes(
        self, batch: CommitBatch, observed: list[Event[Any]] | None, deletes: int
    ) -> None:
        await self._commit(batch, observed, deletes=deletes)

    async def _deliver(self, rows: list[OutboxRow], page: WrittenPage) -> None:
        """Deliver the deletes of one committed batch and wait for their acks."""
        await self._deliveries.deliver(rows, page)

    def _verify_context(self) -> FetchContext[Any]:
        """What ``Deletes(verify=)`` is given: bound to the latest fetch's observations."""
        return FetchContext(
            cursor=None,
            page=0,
            partition=self._partition,
            lane=self._lane,
            http=self._bind_http(self._latest),
            attempt=1,
            logger=self._logger,
            _cancel=self._cancel,
        )
