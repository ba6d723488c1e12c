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
import functools
from typing import TYPE_CHECKING, Any

from watukuy.cursor import TimestampStrategy
from watukuy.cursor.lookback import lookback_floor, lookback_window_ms, remember_cycle
from watukuy.model.errors import (
    BudgetTimeoutError,
    HttpError,
    LeaseLostError,
    SerializedError,
    StoreError,
    WatukuyError,
)
from watukuy.model.http_port import HttpObservations
from watukuy.model.page import InvalidPageError, Page
from watukuy.model.redact import serialize_error
from watukuy.model.rows import (
    EventCounts,
    Lane,
    ListingPass,
    ListingState,
    PollerState,
    PollSummary,
    RateLimitInfo,
    StatePatch,
    apply_patch,
)
from watukuy.pipeline.page import held_until

from ._turn import hand_over_of
from .context import FetchContext
from .deliveries import Deliveries
from .dispatcher import DrainResult
from .fetching import Fetch, PageSource
from .late_watch import LatePage, LateWatch
from .page_build import Built as _Built
from .page_build import PageBuilder, PassAt, lane_rules, lane_strategy, report_commit
from .page_build import Selection as _Selection
from .page_build import consume as _consume
from .pass_end import PassEnd
from .requests import bind_http, verify_context
from .scope import KeyScope

if TYPE_CHECKING:
    from .hooks import ErrorPhase

__all__ = ["CycleResult", "LaneCycle"]

# Fetch failures in a row at the same page of a pass (past its first page) that abandon it.
# Two: one failure may be a blip worth resuming after (the pages before it are not read
# again); a second at the same page, after a backoff, most likely means the page is gone
# (the listing shrank). It is well below the circuit's default of 5 failures, and as the
# abandonment is stored with the failure, even a circuit that opens sooner probes a new pass.
_PAGE_FAILURES = 2


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
        self._scope = scope
        self._deps = deps
        self._hand_over = hand_over_of(deps.store)
        self._poller = poller
        self._partition = scope.partition
        self._key = scope.key
        self._lane = lane
        self._hooks = scope.hooks(lane)
        self._keeper = scope.keeper
        self._deliveries = deliveries
        self._cancel = scope.cancel
        self._should_stop = scope.should_stop
        self._logger = scope.logger
        self._strategy = lane_strategy(scope, lane)
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
        await self._hooks.on_poll_start(started_at=started)
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
            await self._hooks.on_fetch(
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
            http = bind_http(self._scope, self._lane, observations)
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
            await self._hooks.on_late_arrivals(
                lateness_ms=(), missed=len(missed), window_ms=watch.window_ms
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

    # --- one page (see page_build and watukuy.pipeline.page) -----------------------------

    @functools.cached_property
    def _builder(self) -> PageBuilder:
        deps = self._deps
        rules = lane_rules(self._scope, self._lane)
        return PageBuilder(
            rules=rules,
            store=deps.store,
            key=self._key,
            keeper=self._keeper,
            clock=deps.clock,
            hooks=self._hooks,
            hand_over=self._hand_over,
            logger=self._logger,
            on_held=self._note_held,
        )

    def _select(self, cursor: Any, page: Page[Any], fetch: Fetch) -> _Selection:
        """The first half of a page, before any store call (:meth:`PageBuilder.select`)."""
        return self._builder.select(
            cursor, page, fetch.ctx.page, fetch.observations, watch=self._watch
        )

    def _note_held(self, page: Page[Any], now: int) -> None:
        """Keep when the first item ``lag`` (or our clock) held back becomes deliverable."""
        at = held_until(self._strategy, page, now)
        if at is not None and (self.held_until is None or at < self.held_until):
            self.held_until = at

    async def _hash(self, selection: _Selection) -> None:
        """Hash the page's items ahead of their stored rows (:meth:`PageBuilder.hash`)."""
        await self._builder.hash(selection)

    async def _build(self, state: PollerState, selection: _Selection, stored: str) -> _Built:
        """The second half of a page, up to its commit started (:meth:`PageBuilder.build`).
        ``stored`` is the cursor text the page was asked for with."""
        at = PassAt(self._pass, self._listing_with, self._page_source_is_generator)
        return await self._builder.build(
            state, selection, stored, at=at, watch=self._watch, force=self._force_backfill
        )

    async def _land(self, built: _Built, ahead: _Selection | None = None) -> PollerState:
        """Wait for a built page's commit, then hand its events over for delivery, renew
        the lease and store its validators; returns the state after the page.

        ``ahead`` is the page that follows: its stored rows are read as soon as the commit
        is in, before the deliveries queue their acks behind it at the store. The acks are
        not awaited here: the next delivery, or the end of the cycle, waits for them.
        """
        await built.commit
        self._landed_items += built.kept
        for name, value in built.counts.items():
            self._landed_counts[name] += value
        if ahead is not None:
            ahead.stored = asyncio.ensure_future(self._builder.stored_rows(ahead))
            # Awaited by the page's build; a run that dies first never awaits it.
            ahead.stored.add_done_callback(_consume)
        duration_ms = self._deps.clock.now() - built.started
        await report_commit(
            self._hooks, built.batch, built.observed, deletes=0, duration_ms=duration_ms
        )
        if built.late is not None:
            await self._late_landed(built.late)
        if self._poller.on_invalid == "quarantine":
            for raw, issues in built.invalid:
                await self._hooks.on_invalid(item=raw, issues=issues)
        if built.rows:
            await self._deliveries.hand(built.rows, built.page)
        await self._keeper.renew_after_commit()  # the heartbeat covers the rest
        await self._builder.store_validators(built.observations, keep=built.keep_validators)
        return built.state

    async def _late_landed(self, late: LatePage) -> None:
        """The hook and the WARNING of a page's late arrivals, once its commit is in."""
        if late.lateness_ms:
            await self._hooks.on_late_arrivals(
                lateness_ms=late.lateness_ms, missed=0, window_ms=late.window_ms
            )
        if late.warning is not None:
            self._logger.warning(
                "late arrivals: %s",
                late.warning,
                extra={"late_arrivals": len(late.lateness_ms), "window_ms": late.window_ms},
            )

    # --- the end of a full scan (see pass_end) --------------------------------------------

    async def _end_pass(self, state: PollerState) -> tuple[PollerState, int]:
        """Every page of the pass is listed: emit (or hold) its deletes, then close it."""
        progress = self._pass
        assert progress is not None
        return await self._pass_end().end(
            state, progress, lambda ended: self._listing_with(_between_passes(ended))
        )

    def _pass_end(self) -> PassEnd:
        return PassEnd.of(
            self._scope,
            self._lane,
            self._deliveries,
            events=self._builder.events,
            context=lambda: verify_context(self._scope, self._lane, self._latest),
        )
