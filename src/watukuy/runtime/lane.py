"""One lane cycle: fetch pages, diff them, commit each page atomically, deliver.

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
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from watukuy.cursor import CursorStrategy, TimestampStrategy
from watukuy.cursor.lookback import lookback_floor, lookback_window_ms, remember_cycle
from watukuy.model.errors import (
    BudgetTimeoutError,
    HttpError,
    LeaseLostError,
    NotModifiedError,
    SerializedError,
    StoreError,
    WatukuyError,
)
from watukuy.model.events import (
    Event,
    EventType,
    EventWriter,
    WrittenEvent,
    WrittenPage,
)
from watukuy.model.http_port import HttpObservations, HttpScope
from watukuy.model.page import InvalidPageError, Page, coerce_page
from watukuy.model.partition import Partition
from watukuy.model.redact import serialize_error
from watukuy.model.rows import (
    BRIDGE_LIMIT,
    PROVEN_LIMIT,
    UNPROVEN_PASSES,
    CommitBatch,
    EventCounts,
    HeldDeletes,
    ItemMark,
    ItemRow,
    Lane,
    ListingLink,
    ListingPass,
    ListingState,
    OutboxRow,
    PKey,
    PollerState,
    PollSummary,
    RateLimitInfo,
    StatePatch,
    Tombstone,
    apply_patch,
)
from watukuy.pipeline.page import held_until

from ._turn import hand_over_of
from .consumers import Consumers
from .context import FetchContext
from .dispatcher import Dispatcher, DrainResult
from .late_watch import LatePage, LateWatch
from .lease import LeaseKeeper
from .page_build import Built as _Built
from .page_build import PageBuilder, PassAt, page_rules
from .page_build import Selection as _Selection
from .page_build import consume as _consume
from .poller import PollerDefinition

if TYPE_CHECKING:
    from .hooks import ErrorPhase

__all__ = ["LaneCycle"]

_IDENTITY_BATCH = 1000
_DISAGREEMENT_WARNING = 3
# A proof walks at most this many rows on each side of a missed identity.
_WALK_STEPS = 64
# Beyond this many rows missed by a pass, the rest are not looked at for a proof.
_EVIDENCE_LIMIT = 10_000
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


class _PageSource:
    """Calls ``fetch`` in whichever shape it has: coroutine, async generator, or plain."""

    def __init__(self, fetch: Callable[[Any], Any]) -> None:
        self._fetch = fetch
        self._native = inspect.iscoroutinefunction(fetch) or inspect.isasyncgenfunction(fetch)
        self._generator: AsyncIterator[Any] | None = None
        self.is_generator = False
        self.exhausted = False

    async def next(self, ctx: FetchContext[Any]) -> Page[Any] | None:
        if self._generator is not None:
            try:
                return coerce_page(await anext(self._generator))
            except StopAsyncIteration:
                self.exhausted = True
                return None
        if self._native:
            result = self._fetch(ctx)
        else:
            result = await asyncio.to_thread(self._fetch, ctx)
        if hasattr(result, "__anext__"):
            self._generator = result
            self.is_generator = True
            return await self.next(ctx)
        if inspect.isawaitable(result):
            result = await result
        return coerce_page(result)

    async def aclose(self) -> None:
        generator, self._generator = self._generator, None
        if generator is not None:
            aclose = getattr(generator, "aclose", None)
            if aclose is not None:
                await aclose()


_UNCHANGED: Page[Any] = Page(items=(), has_more=False)
"""The page a ``304 Not Modified`` stands for: nothing new, the cursor keeps its place."""


class _Fetch:
    """One call of ``fetch``, running in a task of its own from the moment it is made."""

    def __init__(
        self,
        ctx: FetchContext[Any],
        observations: HttpObservations,
        source: _PageSource,
        clock: Any,
    ) -> None:
        self.ctx = ctx
        self.observations = observations
        self._clock = clock
        self._started = clock.now()
        self.duration_ms = 0
        self.task: asyncio.Future[Page[Any] | None] = asyncio.ensure_future(self._run(source))

    async def _run(self, source: _PageSource) -> Page[Any] | None:
        try:
            return await source.next(self.ctx)
        except NotModifiedError:
            if not self.observations.not_modified:
                raise  # not this page's own 304: a failure like any other
            # `fetch` read the body of this page's 304: the page is as it was, which is
            # what a fetch that checks `response.not_modified` says.
            return _UNCHANGED
        finally:
            self.duration_ms = self._clock.now() - self._started

    async def drop(self) -> None:
        """Cancel the call if it still runs; whatever it returns or raises is ignored."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


class LaneCycle:
    """Runs one lane of one key; see the module docstring."""

    def __init__(
        self,
        *,
        deps: Any,
        poller: PollerDefinition[Any],
        partition: Partition,
        key: PKey,
        lane: Lane,
        keeper: LeaseKeeper,
        dispatcher: Dispatcher,
        consumer: Consumers | None,
        cancel: asyncio.Event,
        should_stop: Callable[[], bool],
        force: bool,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self._deps = deps
        self._hand_over = hand_over_of(deps.store)
        self._poller = poller
        self._partition = partition
        self._key = key
        self._lane = lane
        self._keeper = keeper
        self._dispatcher = dispatcher
        self._consumer = consumer
        self._cancel = cancel
        self._should_stop = should_stop
        self._logger = logger
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
        self.drain = DrainResult()
        self.rate_limit: RateLimitInfo | None = None
        self.raised: BaseException | None = None
        self._latest = HttpObservations()  # the observations of the latest fetch
        self._unsettled: list[DrainResult] = []  # drains whose acks may still be landing
        self._landed_items = 0  # items of the pages whose commit landed
        self._landed_counts = {"created": 0, "updated": 0}
        self._writer_cache: tuple[int, EventWriter] | None = None
        self._force_backfill = False
        self._pass: ListingPass | None = None  # the full listing pass this cycle continues
        # (identity, prev, next) of the rows deleted since the last save (see _splice)
        self._bridges: list[tuple[str, str | None, str | None]] = []
        # The bridges a pass keeps (see _prove), and those its walks went through.
        self._kept_bridges: tuple[tuple[str, str | None, str | None], ...] = ()
        self._crossed: set[str] = set()
        self._listing = ListingState()
        self._page_source_is_generator = False
        self._watch: LateWatch | None = None
        # The lookback re-reads at most this many pages, so a cycle always moves on.
        self._window_pages = max(1, poller.max_pages_per_cycle // 2)
        self._window_read = False  # the cycle's requests reached its stored cursor
        self._began_at: Any = None  # the stored cursor the cycle began with
        self.held_until: int | None = None
        """When the first item the live lane held back (lag, or stamped ahead of our
        clock) becomes deliverable (epoch ms), if it held any."""

    def _fields(self) -> dict[str, Any]:
        return {
            "poller": self._key.poller,
            "partition": self._key.partition,
            "lane": self._lane,
            "instance_id": self._deps.instance_id,
        }

    # --- the loop -------------------------------------------------------------------------

    async def run(
        self, state: PollerState
    ) -> tuple[PollerState, PollSummary, SerializedError | None, ErrorPhase]:
        """Run the lane; returns the new state, the summary, the error (if any) and the phase
        the error happened in. ``LeaseLostError`` and cancellation propagate.

        Pages overlap by one step: page N+1 is asked for while page N commits (see
        :meth:`_ahead`), and its items are selected and hashed while that commit is still
        being written. Page N is then landed (its commit awaited, its events delivered)
        before anything of page N+1 touches the store, so every page still reads the rows
        the page before it wrote, commits in order, and is delivered before the next page
        commits. What fails first in that order is what the cycle reports.
        """
        deps = self._deps
        clock = deps.clock
        started = clock.now()
        await deps.hooks.emit("on_poll_start", **self._fields(), started_at=started)
        strategy = self._strategy
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
        first_page = 1 + (self._pass.pages if self._pass is not None else 0)
        pages = 0
        counts = {"created": 0, "updated": 0, "deleted": 0}
        truncated = saw_not_modified = done = False
        abandon: str | None = None  # why the pass in progress is abandoned (a gone page)
        phase: ErrorPhase = "fetch"
        source = _PageSource(self._fetch)
        error: SerializedError | None = None
        upcoming: _Fetch | None = None  # the next page, asked for while this one committed
        inflight: _Built | None = None  # the page whose commit is being written
        selection: _Selection | None = None  # the page being selected, hashed and built
        landed = state  # the state as of the last page whose commit landed
        try:
            try:
                while not (self._pass is not None and self._pass.listed):
                    if upcoming is not None:
                        fetch, upcoming = upcoming, None
                        if self._should_stop():
                            # The deadline passed while the page before it committed: the
                            # page is left for the next run, like a page never asked for.
                            truncated = True
                            await fetch.drop()
                            break
                        if self._cancel.is_set():
                            await fetch.drop()
                            raise asyncio.CancelledError
                    else:
                        if pages >= self._poller.max_pages_per_cycle:
                            truncated = True
                            break
                        if pages > 0 and self._should_stop():
                            truncated = True
                            break
                        if self._cancel.is_set():
                            raise asyncio.CancelledError
                        self._keeper.check()  # never fetch once the lease may have expired
                        fetch = self._start_fetch(source, request, first_page + pages, state)
                    phase = "fetch"
                    page = await fetch.task
                    if page is None:
                        done = True
                        break
                    if page.gone and self._full_scan:
                        abandon = self._gone_page(fetch.ctx.page)
                        done = True
                        break
                    pages += 1
                    self._page_source_is_generator = source.is_generator
                    before = None if strategy.full_scan else strategy.serialize(request)
                    stored = strategy.serialize(cursor)
                    selection = self._select(cursor, page, fetch)
                    # The next request depends on this page alone: ask for it now, so that
                    # it travels while this page commits and is delivered.
                    ahead = self._ahead(source, selection, request, before, target, pages)
                    if ahead is not None:
                        request = ahead
                        upcoming = self._start_fetch(source, ahead, first_page + pages, state)
                    if inflight is not None:
                        # Hash this page while the page before it commits; then land that one.
                        await self._hash(selection)
                        built, inflight = inflight, None
                        landed = await self._land(built, ahead=selection)
                        if self.drain.halted:
                            pages -= 1
                            break  # a poison halt opens the circuit: no further pages
                        if self._should_stop():
                            pages -= 1
                            truncated = True  # as if the deadline had come before the fetch
                            break
                        if self._cancel.is_set():
                            raise asyncio.CancelledError
                    saw_not_modified = saw_not_modified or selection.not_modified
                    await deps.hooks.emit(
                        "on_fetch",
                        **self._fields(),
                        page=pages,
                        duration_ms=fetch.duration_ms,
                        items=len(page.items),
                        not_modified=selection.not_modified,
                    )
                    phase = "fetch"
                    inflight = await self._build(state, selection, stored)
                    state = inflight.state
                    cursor = selection.next_cursor
                    page_done = selection.done
                    if target is not None and strategy.reached(cursor, target):
                        page_done = True
                    if source.is_generator and not page.gone:
                        page_done = False  # a generator's cycle ends when it is exhausted
                    if page_done:
                        done = True
                        break
                    if upcoming is not None:
                        continue
                    # The next request waits for this page's commit and delivery.
                    built, inflight = inflight, None
                    landed = await self._land(built)
                    if self.drain.halted:
                        break
                    asked, request = request, self._next_view(cursor, request, page, pages)
                    # Stuck means the next request would be this one again (while `overlap`
                    # re-reads its window the stored cursor stays, but the request moves on).
                    stuck = before is not None and not source.is_generator
                    if stuck and strategy.serialize(request) == before:
                        raise _stuck_cursor(pages, str(before), self._stalled(asked, page))
            except (LeaseLostError, asyncio.CancelledError):
                if selection is not None:
                    selection.discard()
                if inflight is not None:
                    inflight.abandon()  # its events wait in the outbox for the next run
                raise
            except Exception:
                if selection is not None:
                    selection.discard()
                if inflight is not None:
                    # The page already written is landed first: it committed before what
                    # failed after it, and its own failure is the one to report.
                    built, inflight = inflight, None
                    landed = await self._land(built)
                raise
            if inflight is not None:
                built, inflight = inflight, None
                landed = await self._land(built)
            if selection is not None:
                selection.discard()  # a page left unbuilt (a halt, a deadline) reads nothing
            await self._settled()
            state = landed
            if abandon is not None:
                phase = "commit"
                state = await self._abandon_pass(state, abandon)
                done = False  # not a complete listing: a reconcile is still to be done
            elif self._pass is not None and (self._pass.listed or (done and not truncated)):
                phase = "commit"
                state, deleted = await self._end_pass(state)
                counts["deleted"] += deleted
                done, truncated = True, False
            state = self._finish(state, cursor, done=done and not truncated)
            if self._lane == "live":
                state = await self._after_live(state, started, done=done and not truncated)
        except (LeaseLostError, asyncio.CancelledError):
            await self._settled()  # with the lease gone, the acks in flight are dropped
            raise
        except Exception as failure:
            state = landed
            try:
                await self._settled()
            except Exception as ack_failure:  # reported in the log; the cycle has its error
                self._logger.warning("acks of the cycle failed too: %s", ack_failure)
            self.raised = failure
            error = serialize_error(failure, redaction=self._deps.redaction)
            if isinstance(failure, StoreError):
                phase = "commit"
            elif self._full_scan and phase == "fetch" and not _is_throttle(failure):
                state = await self._page_failed(state, error)
        finally:
            try:
                if upcoming is not None:
                    await upcoming.drop()
                await source.aclose()
            except Exception as close_error:  # a generator that fails to close
                self._logger.warning("fetch generator failed to close: %s", close_error)
        self.rate_limit = self._latest.rate_limit
        items = self._landed_items
        for name, value in self._landed_counts.items():
            counts[name] += value
        summary = PollSummary(
            lane=self._lane,
            started_at=started,
            duration_ms=clock.now() - started,
            pages=pages,
            items=items,
            events=EventCounts(**counts),
            not_modified=saw_not_modified and items == 0,
            truncated=truncated,
        )
        return state, summary, error, phase

    def _start_fetch(
        self, source: _PageSource, request: Any, number: int, state: PollerState
    ) -> _Fetch:
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
        return _Fetch(ctx, observations, source, self._deps.clock)

    def _ahead(
        self,
        source: _PageSource,
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

    # --- one page (see page_build and watukuy.pipeline.page) -----------------------------

    @functools.cached_property
    def _pages(self) -> PageBuilder:
        deps = self._deps
        rules = page_rules(
            self._poller,
            strategy=self._strategy,
            key=self._key,
            lane=self._lane,
            full_scan=self._full_scan,
            redaction=deps.redaction,
        )
        return PageBuilder(
            rules=rules,
            store=deps.store,
            key=self._key,
            keeper=self._keeper,
            clock=deps.clock,
            hooks=deps.hooks,
            hand_over=self._hand_over,
            logger=self._logger,
            on_held=self._note_held,
        )

    def _select(self, cursor: Any, page: Page[Any], fetch: _Fetch) -> _Selection:
        """The first half of a page, before any store call (:meth:`PageBuilder.select`)."""
        return self._pages.select(
            cursor, page, fetch.ctx.page, fetch.observations, watch=self._watch
        )

    def _note_held(self, page: Page[Any], now: int) -> None:
        """Keep when the first item ``lag`` (or our clock) held back becomes deliverable."""
        at = held_until(self._strategy, page, now)
        if at is not None and (self.held_until is None or at < self.held_until):
            self.held_until = at

    async def _hash(self, selection: _Selection) -> None:
        """Hash the page's items ahead of their stored rows (:meth:`PageBuilder.hash`)."""
        await self._pages.hash(selection)

    async def _build(self, state: PollerState, selection: _Selection, stored: str) -> _Built:
        """The second half of a page, up to its commit started (:meth:`PageBuilder.build`).
        ``stored`` is the cursor text the page was asked for with."""
        at = PassAt(self._pass, self._listing_with, self._page_source_is_generator)
        return await self._pages.build(
            state, selection, stored, at=at, watch=self._watch, force=self._force_backfill
        )

    async def _land(self, built: _Built, ahead: _Selection | None = None) -> PollerState:
        """Wait for a built page's commit, then deliver its events, renew the lease and
        store its validators; returns the state after the page.

        ``ahead`` is the page that follows: its stored rows are read as soon as the commit
        is in, before the deliveries queue their acks behind it at the store. The acks are
        not awaited here: the next drain, or the end of the cycle, waits for them.
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
        await self._committed(built.batch, built.observed, deletes=0, started=built.started)
        if built.late is not None:
            await self._late_landed(built.late)
        if self._poller.on_invalid == "quarantine":
            for raw, issues in built.invalid:
                await deps.hooks.emit("on_invalid", **self._fields(), item=raw, issues=issues)
        if built.rows:
            result = await self._dispatcher.drain(
                self._consumer, built.rows, built.page, settle=False
            )
            self._unsettled.append(result)
            self.drain.halted = self.drain.halted or result.halted
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

    async def _settled(self) -> None:
        """Wait for the acks the landed pages left being written, and count what they
        delivered into :attr:`drain`."""
        try:
            await self._dispatcher.settle()
        finally:
            for result in self._unsettled:
                self.drain.merge(result)
            self._unsettled.clear()

    async def _stored_rows(
        self, selection: _Selection
    ) -> tuple[dict[str, ItemRow], dict[str, Tombstone]]:
        return await self._pages.stored_rows(selection)

    async def _store_validators(self, observations: HttpObservations, *, keep: bool) -> None:
        await self._pages.store_validators(observations, keep=keep)

    def _load_payload(self, payload: str | None) -> Any:
        return self._pages.events.load_payload(payload)

    def _writer(self, now: int) -> EventWriter:
        return self._pages.events.writer(now)

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
    ) -> tuple[WrittenEvent, OutboxRow]:
        """:meth:`~watukuy.pipeline.events.EventMaker.event` with its arguments by position,
        as the deletes of a pass still call it (the pages call it by keyword)."""
        return self._pages.events.event(
            type_=type_,
            identity=identity,
            version=version,
            revision=revision,
            data=data,
            previous=previous,
            sequence=sequence,
            now=now,
            observed=observed,
        )

    async def _commit(
        self, batch: CommitBatch, observed: list[Event[Any]] | None, *, deletes: int
    ) -> None:
        started = self._deps.clock.now()
        await self._deps.store.commit_poll(self._key, self._keeper.lease, batch)
        await self._committed(batch, observed, deletes=deletes, started=started)

    async def _committed(
        self,
        batch: CommitBatch,
        observed: list[Event[Any]] | None,
        *,
        deletes: int,
        started: int,
    ) -> None:
        """The hooks of a commit that landed."""
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

    # --- the end of a full scan -----------------------------------------------------------

    async def _end_pass(self, state: PollerState) -> tuple[PollerState, int]:
        """Every page of the pass is listed: emit (or hold) its deletes, then close it."""
        progress = self._pass
        assert progress is not None
        pass_id = progress.pass_id
        assert pass_id is not None
        rules = self._poller.deletes
        now = self._deps.clock.now()
        if not progress.listed:
            # A generator's listing ends when it is exhausted, after its last page's commit.
            progress = dataclasses.replace(progress, listed=True)
        emitted = 0
        self._bridges = []
        self._kept_bridges = progress.bridges
        held = state.held_deletes  # another lane's hold stays as it is
        clean = progress.clean
        last_missed, last_repeats = progress.last_missed, progress.last_repeats
        disagreed = progress.disagreed
        proven, history, unproven = progress.proven, progress.history, progress.unproven
        # A listing answered 304 is only ever one page (see _idle): it is the previous pass
        # again, and confirms that pass when it was complete (its marks stand for both).
        repeat = (
            progress.not_modified
            and progress.pages == 1
            and not progress.invalid
            and progress.last_clean
            and bool(clean)
        )
        last_clean = False
        if progress.invalid or (progress.not_modified and not repeat):
            why = (
                f"{progress.invalid} item(s) failed the schema or identity()"
                if progress.invalid
                else "a page was answered 304 Not Modified"
            )
            outcome = f"incomplete listing ({why}): no deletes"
            self._logger.info("full listing pass %d: %s", pass_id, outcome)
        else:
            last_clean = True
            # The candidates the previous end of a pass already had: deletes that waited
            # for a proof or for passes that agree are not lost by this pass.
            before = clean[0] if len(clean) >= rules.confirm_passes else None
            clean = (*clean, clean[-1] if repeat else pass_id)[-rules.confirm_passes :]
            history = (*history, clean[-1])[-UNPROVEN_PASSES:]
            # The pair of confirming passes is judged only where it decides anything:
            # verify= rules phantoms out by itself, one pass has nothing to agree with, and
            # a keyset listing cannot shift a live item out of a pass.
            judge = rules.confirm_passes > 1 and rules.verify is None and rules.paging == "offset"
            missed = await self._count_unseen(clean[-1]) if judge else None
            if judge and not repeat:
                assert missed is not None
                listed = await self._deps.store.count_items(self._key) - missed
                repeats: int | None = max(progress.items - listed, 0)
            else:
                repeats = progress.last_repeats if repeat else None
            note = ""
            if rules.proves and not repeat:
                proven, note = await self._prove(progress, pass_id, missed)
            if len(clean) < rules.confirm_passes:
                outcome = f"no deletes yet: {len(clean)} of {rules.confirm_passes} complete passes"
            else:
                below = clean[0]
                count = await self._count_unseen(below)
                why = None
                if judge and count:  # with nothing to delete, agreement decides nothing
                    assert missed is not None
                    older = clean[-2]
                    still = count if older == below else await self._count_unseen(older)
                    why = self._disagreement(progress, older, clean[-1], missed, still)
                only: dict[str, int] | None = None  # proven candidates and their marks
                if why is not None:
                    disagreed += 1
                    held = await self._recount_held(held)
                    if rules.proves:
                        only = await self._marks_below(proven, below)
                ours = held
                if ours is None or ours.lane != self._lane or ours.reason != "guard":
                    ours = None  # the guard's own hold of this lane, if any
                if why is not None and not only:
                    wait = "for passes that agree"
                    if rules.proves:
                        wait = "for a proof or passes that agree"
                    outcome = f"{why}; {count} delete(s) wait {wait}, or give Deletes(verify=)"
                    self._report_disagreement(disagreed, outcome)
                else:
                    if why is None:
                        disagreed = 0
                    deletable = count if only is None else len(only)
                    # The guard judges what this pass newly lost; a hold already in place
                    # keeps being judged whole (an outage that goes on stays held).
                    new = deletable
                    if ours is None and before is not None:
                        if only is None:
                            new -= await self._count_unseen(before)
                        else:
                            new -= sum(1 for seen in only.values() if seen < before)
                    snapshot = await self._deps.store.count_items(self._key)
                    passes = ours.passes + 1 if ours is not None else 1
                    release = rules.guard_release_passes
                    if rules.holds(new, snapshot) and (release is None or passes <= release):
                        held = HeldDeletes(
                            lane=self._lane,
                            below=below,
                            count=count,
                            snapshot=snapshot,
                            held_at=ours.held_at if ours is not None else now,
                            passes=passes,
                            confirmed=ours.confirmed if ours is not None else False,
                        )
                        outcome = f"held {count} delete(s) of {snapshot} (mass-delete guard)"
                        await self._report_held(held)
                    else:
                        chosen = None if only is None else set(only)
                        state, emitted = await self._emit_deletes(state, below, only=chosen)
                        if ours is not None:
                            held = None
                        outcome = f"deleted {emitted}"
                        if why is not None:
                            outcome = (
                                f"deleted {emitted} proven absent; {why}; "
                                f"{count - emitted} other delete(s) wait for a proof or "
                                "passes that agree, or give Deletes(verify=)"
                            )
                            self._report_disagreement(disagreed, outcome)
                        if emitted and missed is not None:
                            missed = await self._count_unseen(clean[-1])
                if emitted:
                    proven = await self._still_missed(proven, clean[-1])
                unproven = 0
                prior = state.held_deletes  # before this pass (a hold it dropped included)
                if prior is None or prior.lane != self._lane or prior.reason != "unproven":
                    prior = None
                if held is not None and held.lane == self._lane and held.reason == "unproven":
                    held = None  # judged again below
                if len(history) == UNPROVEN_PASSES and held is None:
                    # What every pass of the history missed and nothing proved: held for an
                    # operator, so that it is neither lost silently nor emitted unproven.
                    unproven = await self._count_unseen(history[0])
                    if unproven:
                        outcome += (
                            f"; {unproven} delete(s) unproven after {UNPROVEN_PASSES} "
                            "complete passes, held for an operator"
                        )
                        held = HeldDeletes(
                            lane=self._lane,
                            below=history[0],
                            count=unproven,
                            snapshot=await self._deps.store.count_items(self._key),
                            held_at=prior.held_at if prior is not None else now,
                            passes=prior.passes + 1 if prior is not None else 1,
                            confirmed=prior.confirmed if prior is not None else False,
                            reason="unproven",
                        )
                        await self._report_unproven(held, progress.unproven)
            outcome += note
            last_missed, last_repeats = missed, repeats
        closed = _between_passes(
            progress,
            clean=clean,
            last_clean=last_clean,
            completed=progress.completed + 1,
            last_completed_at=now,
            last_outcome=outcome,
            last_missed=last_missed,
            last_repeats=last_repeats,
            disagreed=disagreed,
            proven=proven,
            history=history,
            unproven=unproven,
            bridges=(*self._kept_bridges, *self._bridges)[-BRIDGE_LIMIT:],
        )
        patch: StatePatch = {
            "listing": self._listing_with(closed),
            "held_deletes": held,
            "updated_at": now,
        }
        await self._deps.store.save_state(self._key, self._keeper.lease, patch)
        return apply_patch(state, patch), emitted

    # --- proofs of absence ------------------------------------------------------------------

    async def _prove(
        self, progress: ListingPass, pass_id: int, missed: int | None
    ) -> tuple[tuple[str, ...], str]:
        """The identities proven absent so far, with those the pass ``pass_id`` (complete)
        proves now, and a note for ``last_outcome`` when some rows were not examined.

        A row the pass missed is proven absent when its place in the listing's order fell
        inside one page read of the pass: the nearest rows the pass listed on each side of
        it (found by walking its links through rows the pass did not list) came in the same
        read, or the one before it came in the last read (which ran to the end of the
        listing), or the one after it in the first (which began at its start). Under a
        fixed order one read is a window of the listing at one moment, so the row was not
        there then. See docs/guarantees.md.
        """
        kept = await self._still_missed(progress.proven, pass_id)
        known = set(kept)
        examine: list[str] = []
        seen_rows = 0
        async for batch in self._deps.store.stream_unseen(self._key, pass_id, _IDENTITY_BATCH):
            seen_rows += len(batch)
            examine.extend(identity for identity in batch if identity not in known)
            if len(examine) >= _EVIDENCE_LIMIT:
                break
        examine = examine[:_EVIDENCE_LIMIT]
        note = ""
        total = missed if missed is not None else seen_rows
        if total - len(known) > len(examine):
            skipped = total - len(known) - len(examine)
            note = f"; {skipped} missed row(s) beyond {_EVIDENCE_LIMIT} not examined for a proof"
        self._crossed = set()
        found = (
            await self._evidence(pass_id, progress.pages - 1, examine, progress.bridges)
            if examine
            else []
        )
        if not note:
            # Every missed row was walked: a bridge none of them reached is of no more use
            # (a row listed since has links of its own), and the state stays small.
            self._kept_bridges = tuple(b for b in progress.bridges if b[0] in self._crossed)
        return (*kept, *found)[:PROVEN_LIMIT], note

    async def _evidence(
        self,
        pass_id: int,
        final_read: int,
        missed: list[str],
        bridges: Sequence[tuple[str, str | None, str | None]] = (),
    ) -> list[str]:
        """Those of ``missed`` (rows the pass ``pass_id`` did not list) that it proves
        absent (see :meth:`_prove`). Every row is read once, 1,000 at a time; a walk that
        reaches a row deleted since goes on through its bridge (its neighbours when it
        was deleted)."""
        store = self._deps.store
        cache: dict[str, ItemMark | None] = {}
        bridged = {
            identity: ItemMark(-1, ListingLink(-1, prev, after))
            for identity, prev, after in bridges
        }

        async def load(identities: list[str]) -> None:
            need = [i for i in dict.fromkeys(identities) if i not in cache]
            for start in range(0, len(need), _IDENTITY_BATCH):
                chunk = need[start : start + _IDENTITY_BATCH]
                marks = await store.load_marks(self._key, chunk)
                for identity in chunk:
                    mark = marks.get(identity)
                    if mark is None and identity in bridged:
                        mark = bridged[identity]
                        self._crossed.add(identity)
                    cache[identity] = mark

        await load(missed)
        # The walks, one step a round on each side: the identity reached so far.
        back: dict[str, str | None] = {}
        ahead: dict[str, str | None] = {}
        for identity in missed:
            mark = cache.get(identity)
            if mark is not None and mark.link is not None and mark.link.read >= 0:
                back[identity] = mark.link.prev
                ahead[identity] = mark.link.next
        found_back: dict[str, int] = {}
        found_ahead: dict[str, int] = {}
        for _ in range(_WALK_STEPS):
            if not back and not ahead:
                break
            await load([i for i in (*back.values(), *ahead.values()) if i is not None])
            for walks, found, forward in ((back, found_back, False), (ahead, found_ahead, True)):
                for identity, current in list(walks.items()):
                    mark = None if current is None else cache.get(current)
                    if mark is None or mark.link is None:
                        del walks[identity]  # the chain ends: that side is not found
                    elif mark.seen == pass_id:
                        if mark.link.read >= 0:
                            found[identity] = mark.link.read
                        del walks[identity]
                    else:
                        walks[identity] = mark.link.next if forward else mark.link.prev
        proven: list[str] = []
        for identity in missed:
            before, after = found_back.get(identity), found_ahead.get(identity)
            if (
                (before is not None and before == after)
                or (before is not None and before == final_read)
                or after == 0
            ):
                proven.append(identity)
            # A row whose nearest listed neighbours came in two reads is not proven by
            # the page boundaries between them, even when the reads before them look
            # clean: an item listed before the boundary, deleted between the two reads
            # and created again before the next pass, shifts a live row across the
            # boundary and leaves no trace (`python -m watukuy.testing.conformance
            # --config snapshot-cap --seed 880001` found one). Such a row waits for a pass
            # that proves it, for passes that agree, or for an operator.
        return proven

    async def _load_marks(self, identities: Sequence[str]) -> dict[str, ItemMark]:
        """The marks and links of those stored ``identities``, 1,000 at a time."""
        found: dict[str, ItemMark] = {}
        for start in range(0, len(identities), _IDENTITY_BATCH):
            chunk = identities[start : start + _IDENTITY_BATCH]
            found.update(await self._deps.store.load_marks(self._key, chunk))
        return found

    async def _marks_below(self, identities: Sequence[str], below: int) -> dict[str, int]:
        """The seen marks of those stored ``identities`` whose mark is below ``below``."""
        found: dict[str, int] = {}
        for start in range(0, len(identities), _IDENTITY_BATCH):
            chunk = identities[start : start + _IDENTITY_BATCH]
            marks = await self._deps.store.load_marks(self._key, chunk)
            found.update((i, m.seen) for i, m in marks.items() if m.seen < below)
        return found

    async def _still_missed(self, identities: Sequence[str], below: int) -> tuple[str, ...]:
        """``identities`` pruned of rows listed by a pass from ``below`` on, or deleted."""
        marks = await self._marks_below(identities, below)
        return tuple(identity for identity in identities if identity in marks)

    async def _report_unproven(self, held: HeldDeletes, before: int) -> None:
        """The WARNING and the ``on_deletes_held`` hook of a hold of unproven deletes (the
        hook once, when the hold appears; the WARNING then and every 10th pass)."""
        if before and held.passes % 10:
            return
        self._logger.warning(
            "full listing: holding %d delete(s) that %d complete passes in a row missed "
            "without a proof or passes that agree (the listing keeps changing where they "
            "were); confirm or discard them with engine.deletes.confirm()/discard() or "
            "`watukuy deletes`, or give Deletes(verify=)",
            held.count,
            UNPROVEN_PASSES,
            extra={"held_deletes": held.count, "unproven": held.count},
        )
        if not before:
            await self._deps.hooks.emit(
                "on_deletes_held",
                **self._fields(),
                count=held.count,
                snapshot=held.snapshot,
                passes=held.passes,
            )

    def _disagreement(
        self, progress: ListingPass, older: int, newer: int, missed: int, still: int
    ) -> str | None:
        """Why the confirming passes ``older`` and ``newer`` (the newest) disagree, or
        ``None`` when they agree. ``missed`` and ``still`` count the rows ``newer`` and
        ``older`` did not list, now.

        Each page of an offset listing starts where the previous one ended, so a pass reads
        as many items as the listing holds at its last page: the live items it never listed
        are exactly as many as the items it listed that were gone by its last page, plus the
        items it listed twice. ``older`` is trusted when it listed nothing twice, nothing it
        listed is missing from ``newer`` (no row has a mark from ``older`` up to ``newer``),
        and nothing it missed turned up in ``newer`` (a page that answered an empty list, an
        item that came back): what it missed was absent at its last page. See
        docs/guarantees.md.
        """
        repeats = progress.last_repeats
        before = progress.last_missed
        if repeats is None or before is None:
            return f"pass {older} was not counted when it closed"
        gone = missed - still
        if gone > 0:
            return (
                f"the listing changed under pass {older}: {gone} item(s) it listed are gone "
                f"from pass {newer}"
            )
        if before > still:
            return f"pass {older} missed {before - still} item(s) that pass {newer} listed"
        if repeats > 0:
            return f"pass {older} listed {repeats} item(s) twice (the listing moved under it)"
        return None

    async def _recount_held(self, held: HeldDeletes | None) -> HeldDeletes | None:
        """This lane's hold, counting only the rows still below its mark (a listing seen
        whole again leaves none, and clears it); another lane's hold stays as it is."""
        if held is None or held.lane != self._lane:
            return held
        count = await self._count_unseen(held.below)
        if count == 0:
            return None
        return dataclasses.replace(held, count=count) if count != held.count else held

    def _report_disagreement(self, disagreed: int, outcome: str) -> None:
        if disagreed == _DISAGREEMENT_WARNING or (disagreed and disagreed % 10 == 0):
            self._logger.warning(
                "full listing: %d pass(es) in a row disagreed with the one before (only "
                "deletes proven one by one go out meanwhile): %s",
                disagreed,
                outcome,
                extra={"disagreed": disagreed},
            )
        else:
            self._logger.info("full listing: %s", outcome)

    async def _verify(
        self, verify: Callable[..., Any], candidates: list[str]
    ) -> tuple[list[str], list[str]]:
        """Split delete candidates into (gone, still present) by asking ``verify``."""
        ctx: FetchContext[Any] = FetchContext(
            cursor=None,
            page=0,
            partition=self._partition,
            lane=self._lane,
            http=self._bind_http(self._latest),
            attempt=1,
            logger=self._logger,
            _cancel=self._cancel,
        )
        gone: list[str] = []
        present: list[str] = []
        for identity in candidates:
            if self._cancel.is_set():
                raise asyncio.CancelledError
            answer = verify(identity, ctx)
            if inspect.isawaitable(answer):
                answer = await answer
            (present if answer else gone).append(identity)
        if present:
            self._logger.info("verify kept %d delete candidate(s) the listing missed", len(present))
        return gone, present

    async def _count_unseen(self, below: int) -> int:
        count = 0
        async for batch in self._deps.store.stream_unseen(self._key, below, _IDENTITY_BATCH):
            count += len(batch)
        return count

    async def _report_held(self, held: HeldDeletes) -> None:
        self._logger.warning(
            "mass-delete guard: holding %d delete(s) of a snapshot of %d (pass %d in a row); "
            "confirm or discard them with engine.deletes.confirm()/discard() or "
            "`watukuy deletes`",
            held.count,
            held.snapshot,
            held.passes,
            extra={"held_deletes": held.count, "snapshot": held.snapshot},
        )
        await self._deps.hooks.emit(
            "on_deletes_held",
            **self._fields(),
            count=held.count,
            snapshot=held.snapshot,
            passes=held.passes,
        )

    async def release_held(self, state: PollerState) -> tuple[PollerState, int]:
        """Emit the deletes an operator confirmed (``state.held_deletes``), then drop the
        hold. Rows seen again since they were held are no longer below its mark."""
        held = state.held_deletes
        assert held is not None
        self._bridges = []
        state, emitted = await self._emit_deletes(state, held.below)
        now = self._deps.clock.now()
        patch: StatePatch = {"held_deletes": None, "updated_at": now}
        progress = state.listing.lanes.get(held.lane)
        if progress is not None:
            changes: dict[str, Any] = {}
            if progress.last_missed is not None:
                # The rows it removed were unlisted by the newest complete pass too: without
                # this, the next pass would count them as found again and disagree.
                changes["last_missed"] = max(progress.last_missed - emitted, 0)
            if self._bridges:
                changes["bridges"] = (*progress.bridges, *self._bridges)[-BRIDGE_LIMIT:]
            lanes = {**state.listing.lanes, held.lane: dataclasses.replace(progress, **changes)}
            patch["listing"] = dataclasses.replace(state.listing, lanes=lanes)
        await self._deps.store.save_state(self._key, self._keeper.lease, patch)
        self._logger.info("emitted %d confirmed delete(s)", emitted)
        return apply_patch(state, patch), emitted

    async def _splice(self, deleted: list[str]) -> dict[str, ListingLink]:
        """The links that close the gaps ``deleted`` leaves in the listing's chains: the
        row before a run of deleted rows links forward to the row after it, and back.
        Only links that pointed into the run change (a row relisted since keeps its own)."""
        if not deleted:
            return {}
        store = self._deps.store
        gone = set(deleted)
        marks: dict[str, ItemMark] = {}
        for start in range(0, len(deleted), _IDENTITY_BATCH):
            marks.update(
                await store.load_marks(self._key, deleted[start : start + _IDENTITY_BATCH])
            )

        def beyond(identity: str, forward: bool) -> str | None:
            """The first row past the run of deleted rows from ``identity`` on."""
            current: str | None = identity
            for _ in range(_WALK_STEPS):
                if current is None or current not in gone:
                    return current
                link = marks[current].link if current in marks else None
                if link is None:
                    return None
                current = link.next if forward else link.prev
            return None

        ends: dict[str, tuple[str | None, str | None]] = {}
        for identity in deleted:
            link = marks[identity].link if identity in marks else None
            if link is None:
                continue
            before, after = beyond(identity, False), beyond(identity, True)
            ends[identity] = (before, after)
            self._bridges.append((identity, before, after))
        neighbours = sorted({n for pair in ends.values() for n in pair if n is not None})
        current_links: dict[str, ItemMark] = {}
        for start in range(0, len(neighbours), _IDENTITY_BATCH):
            chunk = neighbours[start : start + _IDENTITY_BATCH]
            current_links.update(await store.load_marks(self._key, chunk))
        links: dict[str, ListingLink] = {}
        for before, after in ends.values():
            if before is not None:
                mark = current_links.get(before)
                link = links.get(before) or (mark.link if mark is not None else None)
                if link is not None and link.next in gone:
                    links[before] = dataclasses.replace(link, next=after)
            if after is not None:
                mark = current_links.get(after)
                link = links.get(after) or (mark.link if mark is not None else None)
                if link is not None and link.prev in gone:
                    links[after] = dataclasses.replace(link, prev=before)
        return links

    async def _emit_deletes(
        self, state: PollerState, below: int, *, only: set[str] | None = None
    ) -> tuple[PollerState, int]:
        """Emit ``deleted`` for every stored identity whose seen mark is below ``below``
        (and that is among ``only``, when given), one committed batch at a time (a run cut
        half-way resumes with the rest)."""
        deps = self._deps
        poller = self._poller
        emitted = 0
        # The walk pages by the last identity, so deleting what it already passed is safe.
        verify = poller.deletes.verify
        async for candidates in deps.store.stream_unseen(self._key, below, _IDENTITY_BATCH):
            if only is not None:
                candidates = [identity for identity in candidates if identity in only]
                if not candidates:
                    continue
            chunk, present = candidates, list[str]()
            if verify is not None:
                chunk, present = await self._verify(verify, candidates)
            now = deps.clock.now()
            sequence = state.sequence
            rows: list[OutboxRow] = []
            events: list[WrittenEvent] = []
            observed: list[Event[Any]] | None = [] if deps.hooks.has("on_event") else None
            stored: dict[str, ItemRow] = await deps.store.load_versions(self._key, chunk)
            for identity in chunk:
                row = stored.get(identity)
                if row is None:
                    continue
                payload = self._load_payload(row.payload) if poller.retain_payload else None
                sequence += 1
                event, outbox_row = self._event(
                    "deleted",
                    identity,
                    row.version if row.version is not None else row.hash,
                    row.revision + 1,
                    payload,
                    payload,
                    sequence,
                    now,
                    observed,
                )
                rows.append(outbox_row)
                events.append(event)
            patch: StatePatch = {"sequence": sequence, "updated_at": now}
            links = await self._splice(chunk) if poller.deletes.proves else {}
            await self._commit(
                CommitBatch(
                    state_patch=patch,
                    deletes=chunk,
                    links=links,
                    # Still there: seen now, by the newest pass, so no pass in progress
                    # proposes it again.
                    seen=present,
                    seen_pass=state.listing.counter,
                    events=rows,
                    log=self._log_events,
                    now=now,
                ),
                observed,
                deletes=len(chunk),
            )
            state = apply_patch(state, patch)
            emitted += len(rows)
            if rows:
                page = WrittenPage(self._writer(now), events)
                self.drain.merge(await self._dispatcher.drain(self._consumer, rows, page))
        return state, emitted
