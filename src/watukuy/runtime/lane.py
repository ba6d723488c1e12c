"""One lane cycle: fetch pages, diff them, commit each page atomically, deliver.

:class:`LaneCycle` sequences a cycle and delegates each step. Follow one page of
:meth:`LaneCycle.run` (its loop is :meth:`LaneCycle._pages`) top to bottom:

1. **fetch**: :meth:`~LaneCycle._next_fetch` starts the request in a task of its own
   (:meth:`Requests.start_fetch <watukuy.runtime.requests.Requests.start_fetch>`, calling
   ``fetch`` through :mod:`.fetching`); where the cycle starts and what its first request
   asks for is :meth:`Requests.open <watukuy.runtime.requests.Requests.open>`.
2. **select, hash, build**: :meth:`~LaneCycle._select`, :meth:`~LaneCycle._hash` and
   :meth:`~LaneCycle._build` hand the page to :class:`~watukuy.runtime.page_build.PageBuilder`
   (the pure pipeline is :mod:`watukuy.pipeline.page`); the build starts the page's commit.
3. **commit, land, hand over**: :meth:`~LaneCycle._land` awaits the commit, fires its hooks
   and hands its events to the run's :class:`~watukuy.runtime.deliveries.Deliveries`.
4. **next request**: :meth:`Requests.ahead <watukuy.runtime.requests.Requests.ahead>` (asked
   while the page commits) or :meth:`Requests.next_view
   <watukuy.runtime.requests.Requests.next_view>` (after it).

The cycle ends in :meth:`~LaneCycle._close` (or :meth:`~LaneCycle._failed`) and returns what
it did as one :class:`CycleResult`.

The live, reconcile and backfill lanes share this loop; they differ in the cursor strategy
(reconcile always pages from 1), the fetch function (reconcile has its own), whether the
listing is a full scan (snapshot diff and reconcile emit ``deleted`` for what was not seen),
and the backfill rules (stop at the target cursor, ``force`` re-emits known items).

A full listing is a *pass* that may span cycles, kept by
:class:`~watukuy.runtime.listing_pass.PassBook` (which also abandons a pass that cannot be
read to its end). When the last page is listed, :class:`~watukuy.runtime.pass_end.PassEnd`
finds the deletes: the rows left below the id of the oldest of the last
``deletes.confirm_passes`` complete passes (each of those passes missed them), unless the
pass is not a complete listing (an invalid item, a ``304`` page) or the mass-delete guard
holds them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from watukuy.cursor import TimestampStrategy
from watukuy.cursor.lookback import remember_cycle
from watukuy.model.errors import (
    LeaseLostError,
    SerializedError,
    StoreError,
)
from watukuy.model.page import Page
from watukuy.model.records import dataclass
from watukuy.model.redact import serialize_error
from watukuy.model.rows import (
    EventCounts,
    Lane,
    PollerState,
    PollSummary,
    RateLimitInfo,
    StatePatch,
    apply_patch,
)
from watukuy.pipeline.page import held_until

from .deliveries import Deliveries
from .dispatcher import DrainResult
from .fetching import Fetch, PageSource
from .late_watch import LatePage, LateWatch
from .listing_pass import PassBook, finish, page_token
from .page_build import Built as _Built
from .page_build import PageBuilder, PassAt, lane_rules, lane_strategy, report_commit
from .page_build import Selection as _Selection
from .page_build import consume as _consume
from .pass_end import PassEnd
from .requests import Requests, is_throttle, stuck_cursor, verify_context
from .scope import KeyScope

if TYPE_CHECKING:
    from .hooks import ErrorPhase

__all__ = ["CycleResult", "LaneCycle"]


@dataclass(frozen=True, slots=True)
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


@dataclass(slots=True)
class _Walk:
    """Where the page loop of a cycle stands: what :meth:`LaneCycle.run`'s steps share."""

    state: PollerState  # as of the last page built
    landed: PollerState  # as of the last page whose commit landed
    cursor: Any  # the cursor after the last page built
    request: Any  # what the latest request asked for
    target: Any  # where a backfill stops (None: no target)
    first_page: int  # the number of the cycle's first page (a pass resumes past 1)
    token: str | None  # the token of the next page of a full listing (ctx.page_token)
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
        self._poller = poller
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
        self._landed_items = 0  # items of the pages whose commit landed
        self._landed_counts = {"created": 0, "updated": 0}
        self._passes = PassBook(
            store=deps.store,
            key=self._key,
            lane=lane,
            keeper=self._keeper,
            clock=deps.clock,
            logger=self._logger,
        )
        self._requests = Requests(scope, lane, self._strategy, self._passes)
        self._page_source_is_generator = False
        self._watch: LateWatch | None = None
        self.held_until: int | None = None
        """When the first item the live lane held back (lag, or stamped ahead of our
        clock) becomes deliverable (epoch ms), if it held any (see :attr:`CycleResult.held_until`)."""

    # --- the loop -------------------------------------------------------------------------

    async def run(self, state: PollerState) -> CycleResult:
        """Run the lane; returns what it did. A failure of the API, of a page or of the
        store is in the result; ``LeaseLostError`` and cancellation propagate.

        Pages overlap by one step: page N+1 is asked for while page N commits (see
        :meth:`Requests.ahead <watukuy.runtime.requests.Requests.ahead>`), and its items
        are selected and hashed while that commit is still being written. Page N is then
        landed (its commit awaited, its events handed over) before anything of page N+1
        touches the store, so every page still reads the rows the page before it wrote,
        commits in order, and is delivered before the next page commits. What fails first
        in that order is what the cycle reports.
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
        cursor, target, request = self._requests.open(state)
        progress = self._passes.progress
        self._watch = LateWatch(
            poller=self._poller,
            lane=self._lane,
            state=state,
            started_at=started,
            looked_back=not self._requests.window_read,
            cursor=cursor,
        )
        return _Walk(
            state=state,
            landed=state,
            cursor=cursor,
            request=request,
            target=target,
            first_page=1 + (progress.pages if progress is not None else 0),
            token=progress.token if progress is not None else None,
            source=PageSource(self._fetch, self._deps.offload),
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
        passes, requests = self._passes, self._requests
        while not (passes.progress is not None and passes.progress.listed):
            fetch = await self._next_fetch(walk)
            if fetch is None:
                return
            walk.phase = "fetch"
            page = await fetch.task
            if page is None:
                walk.done = True
                return
            if page.gone and self._full_scan:
                walk.abandon = passes.gone_page(fetch.ctx.page)
                walk.done = True
                return
            walk.pages += 1
            walk.token = page_token(page) if self._full_scan else None
            self._page_source_is_generator = walk.source.is_generator
            before = None if strategy.full_scan else strategy.serialize(walk.request)
            stored = strategy.serialize(walk.cursor)
            selection = walk.selection = self._select(walk.cursor, page, fetch)
            # The next request depends on this page alone: ask for it now, so that it
            # travels while this page commits and is delivered.
            ahead = requests.ahead(
                walk.source, selection, walk.request, before, walk.target, walk.pages
            )
            if ahead is not None:
                walk.request = ahead
                number = walk.first_page + walk.pages
                walk.upcoming = requests.start_fetch(
                    walk.source, ahead, number, walk.state, ahead=True, page_token=walk.token
                )
                if walk.inflight is None or walk.inflight.commit.done():
                    # Its request goes out before this page's work takes the event loop.
                    # Not while the page before still commits: the request's own store
                    # reads would queue behind that commit, and the loop would sit idle
                    # instead of hashing this page meanwhile.
                    await walk.upcoming.sending()
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
            walk.request = requests.next_view(walk.cursor, asked, page, walk.pages)
            # Stuck means the next request would be this one again (while `overlap`
            # re-reads its window the stored cursor stays, but the request moves on).
            stuck = before is not None and not walk.source.is_generator
            if stuck and strategy.serialize(walk.request) == before:
                raise stuck_cursor(walk.pages, str(before), requests.stalled(asked, page))

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
        return self._requests.start_fetch(
            walk.source,
            walk.request,
            walk.first_page + walk.pages,
            walk.state,
            page_token=walk.token,
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
        progress = self._passes.progress
        if walk.abandon is not None:
            walk.phase = "commit"
            state = await self._passes.abandon(state, walk.abandon)
            done = False  # not a complete listing: a reconcile is still to be done
        elif progress is not None and (progress.listed or (done and not truncated)):
            walk.phase = "commit"
            state, deleted = await self._end_pass(state)
            walk.deleted += deleted
            done, truncated = True, False
        walk.done, walk.truncated = done, truncated
        state = finish(self._lane, state, self._deps.clock.now(), done=done and not truncated)
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
        elif self._full_scan and walk.phase == "fetch" and not is_throttle(failure):
            state = await self._passes.page_failed(state, error)
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
            rate_limit=self._requests.latest.rate_limit,
            held_until=self.held_until,
        )

    async def _after_live(self, state: PollerState, started: int, *, done: bool) -> PollerState:
        """After a live cycle that did not fail: remember where its cursor stood for the
        default lookback (once its window was read), and, after a complete cycle, settle
        the reconcile findings it was waiting for."""
        strategy = self._strategy
        ended = state.cursors.get("live")
        if isinstance(strategy, TimestampStrategy) and strategy.config.lookback and ended:
            lookback = remember_cycle(
                state.lookback,
                began=strategy.serialize(self._requests.began_at),
                started_at=started if done or self._requests.window_read else None,
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
        passes = self._passes
        at = PassAt(passes.progress, passes.listing_with, self._page_source_is_generator)
        return await self._builder.build(
            state, selection, stored, at=at, watch=self._watch, force=self._requests.force_backfill
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
        progress = self._passes.progress
        assert progress is not None
        return await self._pass_end().end(state, progress, self._passes.closed)

    def _pass_end(self) -> PassEnd:
        return PassEnd.of(
            self._scope,
            self._lane,
            self._deliveries,
            events=self._builder.events,
            context=lambda: verify_context(self._scope, self._lane, self._requests.latest),
        )
