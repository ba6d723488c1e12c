"""What a lane cycle asks ``fetch`` for, and with what.

:class:`Requests` knows where a cycle starts (the stored cursor, a backfill's range, the
pass of a full listing), what its first request asks for (moved back by ``overlap`` or the
live lane's lookback), what each next request asks for, and whether the next page may be
asked for while the page before it commits. :func:`bind_http` binds ``ctx.http`` to the key
run and lane; :func:`verify_context` is what ``Deletes(verify=)`` is given.
"""

from __future__ import annotations

import asyncio
from typing import Any

from watukuy.cursor import CursorStrategy, TimestampStrategy
from watukuy.cursor.lookback import lookback_floor, lookback_window_ms
from watukuy.model.errors import BudgetTimeoutError, ConfigError, HttpError, WatukuyError
from watukuy.model.http_api import FetchHttp, FetchResponse
from watukuy.model.http_port import HttpObservations, HttpScope
from watukuy.model.page import Page
from watukuy.model.rows import Lane, PollerState

from .context import FetchContext
from .fetching import Fetch, PageSource
from .listing_pass import PassBook
from .page_build import Selection
from .scope import KeyScope

__all__ = ["Requests", "bind_http", "is_throttle", "stuck_cursor", "verify_context"]


def is_throttle(error: BaseException) -> bool:
    """The API asked us to wait (``429``, ``503`` with ``Retry-After``), or the budget is
    spent: not the page failing (the runner does not count it as a failure either)."""
    if isinstance(error, HttpError):
        return error.is_throttle
    return isinstance(error, BudgetTimeoutError)


def stuck_cursor(page: int, cursor: str, why: str | None = None) -> WatukuyError:
    # Fetching again from the same cursor returns the same page: without this the cycle
    # would request it until the page cap, and the next cycle would start over at once.
    # The strategy may know why (a group of equal timestamps larger than the page).
    shown = cursor if len(cursor) <= 200 else cursor[:200] + "..."
    message = (
        f"page {page} says there is more to fetch but left the cursor where it was "
        f"({shown}); the cycle stops instead of requesting the same page again"
    )
    return WatukuyError(f"{message}: {why}" if why else message, code="INVALID_PAGE")


class Requests:
    """The requests of one lane cycle (see the module docstring).

    Args:
        scope: The key run.
        lane: The lane.
        strategy: The lane's cursor strategy.
        passes: The lane's full-listing pass (a full listing starts where it stands).
    """

    def __init__(
        self, scope: KeyScope, lane: Lane, strategy: CursorStrategy[Any], passes: PassBook
    ) -> None:
        self._scope = scope
        self._lane = lane
        self._strategy = strategy
        self._passes = passes
        self._full_scan = lane == "reconcile" or strategy.full_scan
        # The lookback re-reads at most this many pages, so a cycle always moves on.
        self._window_pages = max(1, scope.poller.max_pages_per_cycle // 2)
        self.latest = HttpObservations()
        """The observations of the latest fetch (its rate limit, its validators)."""
        self.window_read = False
        """The cycle's requests reached its stored cursor."""
        self.began_at: Any = None
        """The stored cursor the cycle began with."""
        self.force_backfill = False
        """The backfill re-emits every known item (``force``)."""
        self._sent: asyncio.Future[None] | None = None  # the latest request's, once sent

    def open(self, state: PollerState) -> tuple[Any, Any, Any]:
        """Where the cycle starts: its cursor, its target (where a backfill stops) and its
        first request."""
        self.latest = HttpObservations(rate_limit=state.schedule.rate_limit, defer_validators=True)
        cursor, target = self.start_cursor(state)
        # `overlap` moves back the first request of a cycle only; every later request
        # continues where the previous page left off (see CursorStrategy.next_view).
        request = self.first_request(cursor, state)
        self.window_read = request == cursor
        self.began_at = cursor
        return cursor, target, request

    def start_fetch(
        self,
        source: PageSource,
        request: Any,
        number: int,
        state: PollerState,
        *,
        ahead: bool = False,
        page_token: str | None = None,
    ) -> Fetch:
        """Call ``fetch`` for page ``number`` (of a full listing paged by tokens: the page
        of ``page_token``) in a task of its own.

        Each call gets its own ``ctx.http`` and observations, so a page asked for ahead
        records its validators and its ``304`` apart from the page being committed. A
        generator was handed its ``ctx`` once, on its first call: its pages share that
        one's observations, reset before each page.

        A page asked for ``ahead`` tells when its request goes out (:meth:`Fetch.sending`)
        when the page before it told so (its ``fetch`` uses ``ctx.http``, and that one says
        when it sends: a ``ctx.http`` of your own ``HttpFactory`` may not).
        """
        sent: asyncio.Future[None] | None = None
        told = False
        if source.is_generator:
            observations = self.latest
            observations.reset_page()
            http: FetchHttp = NO_HTTP  # the generator keeps the ctx of its first call
        else:
            told = self._sent is not None and self._sent.done()
            sent = self._sent = asyncio.get_running_loop().create_future()
            observations = HttpObservations(
                rate_limit=self.latest.rate_limit, defer_validators=True
            )
            self.latest = observations
            http = bind_http(self._scope, self._lane, observations, sent=sent)
        ctx: FetchContext[Any] = FetchContext(
            cursor=request,
            page=number,
            partition=self._scope.partition,
            lane=self._lane,
            http=http,
            attempt=state.schedule.consecutive_failures + 1,
            logger=self._scope.logger,
            page_token=page_token,
            _cancel=self._scope.cancel,
        )
        waits = sent if ahead and told else None
        return Fetch(ctx, observations, source, self._scope.deps.clock, waits)

    def ahead(
        self,
        source: PageSource,
        selection: Selection,
        request: Any,
        before: str | None,
        target: Any,
        pages: int,
    ) -> Any | None:
        """The request of the page after this one, when it may be sent before this page is
        committed: the cycle goes on after this page whatever the commit does, unless it
        fails. ``None`` leaves the next request to the loop, after the commit."""
        if not self._scope.poller.prefetch or source.is_generator or selection.done:
            return None
        strategy = self._strategy
        if target is not None and strategy.reached(selection.next_cursor, target):
            return None
        if pages >= self._scope.poller.max_pages_per_cycle or self._scope.should_stop():
            return None
        if (
            self._scope.cancel.is_set()
            or self._scope.keeper.lost
            or self._scope.keeper.may_have_expired()
        ):
            return None
        ahead = self.next_view(selection.next_cursor, request, selection.page, pages)
        if before is not None and strategy.serialize(ahead) == before:
            return None  # stuck: the loop reports it once the page is committed
        return ahead

    def start_cursor(self, state: PollerState) -> tuple[Any, Any]:
        strategy = self._strategy
        stored = state.cursors.get(self._lane)
        if self._lane == "backfill" and state.backfill is not None:
            backfill = state.backfill
            self.force_backfill = backfill.force
            start = stored if stored is not None else backfill.from_cursor
            target = (
                None if backfill.to_cursor is None else strategy.deserialize(backfill.to_cursor)
            )
            return strategy.deserialize(start), target
        if self._full_scan:
            progress = self._passes.begin(state)
            if progress.cursor is None:
                return strategy.initial(), None
            return strategy.deserialize(progress.cursor), None
        if stored is None:
            return strategy.initial(), None
        return strategy.deserialize(stored), None

    def first_request(self, cursor: Any, state: PollerState) -> Any:
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
        return strategy.view(cursor, self._scope.deps.clock.now())

    def next_view(self, cursor: Any, request: Any, page: Page[Any], pages: int) -> Any:
        """The next request of the cycle (:meth:`CursorStrategy.next_view`). A lookback
        window that would take more than half the page cap is cut there: the cycle goes on
        from the stored cursor, so it always moves on."""
        view = self._strategy.next_view(cursor, request, page, self._scope.deps.clock.now())
        if view != cursor and pages >= self._window_pages:
            self._scope.logger.info(
                "the lookback window is longer than %d page(s): this cycle reads on from the "
                "cursor instead",
                self._window_pages,
            )
            view = cursor
        if view == cursor:
            self.window_read = True
        return view

    def stalled(self, request: Any, page: Page[Any]) -> str | None:
        """Why ``page`` could not move the cursor, when the strategy can tell."""
        strategy = self._strategy
        return strategy.stalled(request, page) if isinstance(strategy, TimestampStrategy) else None


class _NoHttp:
    """The ``ctx.http`` of an engine built without an HTTP client (``EngineCore(http=None)``):
    any request says so."""

    async def get(self, url: str, **options: Any) -> FetchResponse:
        return await self.request("GET", url, **options)

    async def request(self, method: str, url: str, **options: Any) -> FetchResponse:
        raise ConfigError(
            f"ctx.http cannot send {method} {url}: this engine has no HTTP client", field="http"
        )

    def __repr__(self) -> str:
        return "<no ctx.http>"


NO_HTTP: FetchHttp = _NoHttp()


def bind_http(
    scope: KeyScope,
    lane: Lane,
    observations: HttpObservations,
    *,
    sent: asyncio.Future[None] | None = None,
) -> FetchHttp:
    """The ``ctx.http`` of one request of ``lane``, recording into ``observations`` and
    resolving ``sent`` when a request goes out (``HttpScope.on_sending``); one that refuses
    every request when the engine has no HTTP client."""
    deps = scope.deps
    if deps.http is None:
        return NO_HTTP
    poller = scope.poller
    budget_wait = deps.budget_max_wait(poller.budget) if poller.budget is not None else None
    hooks = scope.hooks(lane)

    async def on_budget_wait(budget: str, waited: int) -> None:
        await hooks.on_budget_wait(budget=budget, wait_ms=waited)

    def on_sending() -> None:
        if sent is not None and not sent.done():
            sent.set_result(None)

    keeper = scope.keeper
    return deps.http.bind(
        HttpScope(
            key=scope.key,
            lane=lane,
            store=deps.store,
            lease=lambda: keeper.lease,
            observations=observations,
            budget=poller.budget,
            budget_weight=poller.budget_weight,
            budget_cost=poller.budget_cost,
            max_wait_ms=budget_wait if budget_wait is not None else poller.schedule.max_ms,
            gate=deps.budgets,
            clock=deps.clock,
            logger=scope.logger,
            on_budget_wait=on_budget_wait,
            redaction=deps.redaction,
            validators=lane == "live",
            on_sending=on_sending,
        )
    )


def verify_context(
    scope: KeyScope, lane: Lane, observations: HttpObservations
) -> FetchContext[Any]:
    """What ``Deletes(verify=)`` is given: bound to ``observations`` (the latest fetch's)."""
    return FetchContext(
        cursor=None,
        page=0,
        partition=scope.partition,
        lane=lane,
        http=bind_http(scope, lane, observations),
        attempt=1,
        logger=scope.logger,
        _cancel=scope.cancel,
    )
