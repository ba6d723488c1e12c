"""The bookkeeping of a full-listing pass in one lane of one key: which pass a cycle
continues, the pass as its pages advance it, and a pass abandoned.

A full listing is a *pass* that may span cycles. Each page commits the pass's next cursor
(``PollerState.listing``) and a seen mark (the pass id) on the snapshot row of every
identity it listed, so a cycle cut by the page cap or a deadline resumes at the next page,
after a crash or on another replica too, and memory holds one page.

A listing paged by tokens (a ``Link`` header's next URL, a ``next_cursor``) cannot be
resumed by page number alone: each page that says ``has_more=True`` with a ``str``
``Page.cursor`` commits that token with the pass (:func:`page_token`), and the next page's
``ctx.page_token`` carries it, in this cycle or in the one that resumes the pass.

A pass is *abandoned* (closed with no deletes, confirming nothing; the next cycle starts a
new one at page 1) when a page past its first answers ``Page(gone=True)`` (the listing shrank
while it was read), or when it fails at the same page :data:`PAGE_FAILURES` times in a
row: resuming at a page that is no longer there would fail every cycle and wedge the key.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from watukuy.model.errors import SerializedError, StoreError
from watukuy.model.page import InvalidPageError, Page
from watukuy.model.ports import Clock, StateStore
from watukuy.model.rows import (
    Lane,
    ListingPass,
    ListingState,
    PKey,
    PollerState,
    StatePatch,
    apply_patch,
)

from .lease import LeaseKeeper

__all__ = ["PAGE_FAILURES", "PassBook", "between_passes", "finish", "page_token"]

# Fetch failures in a row at the same page of a pass (past its first page) that abandon it.
# Two: one failure may be a blip worth resuming after (the pages before it are not read
# again); a second at the same page, after a backoff, most likely means the page is gone
# (the listing shrank). It is well below the circuit's default of 5 failures, and as the
# abandonment is stored with the failure, even a circuit that opens sooner probes a new pass.
PAGE_FAILURES = 2


# What a pass in progress has of its own; none of it outlives the pass.
_NO_PASS: dict[str, Any] = {
    "pass_id": None,
    "started_at": None,
    "cursor": None,
    "token": None,
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


def page_token(page: Page[Any]) -> str | None:
    """The token the page after ``page`` is asked for with (``ctx.page_token``): its
    ``cursor`` when it says ``has_more=True`` and the cursor is a ``str``.

    Any other cursor is not a token and is ignored, as it always was on a full listing: a
    ``fetch`` that pages by ``ctx.page`` and returns, say, the next page number as its
    cursor goes on exactly as before.
    """
    if page.has_more is True and isinstance(page.cursor, str):
        return page.cursor
    return None


def between_passes(progress: ListingPass, **changes: Any) -> ListingPass:
    """``progress`` without its pass in progress, and with ``changes`` (a new pass's
    ``pass_id`` and ``started_at``, or what a closed pass found)."""
    return dataclasses.replace(progress, **{**_NO_PASS, **changes})


def finish(lane: Lane, state: PollerState, now: int, *, done: bool) -> PollerState:
    """The lane's own bookkeeping once its listing reached its end: when the reconcile
    lane last completed, and a finished backfill dropped."""
    if lane == "reconcile" and done:
        return dataclasses.replace(state, last_reconcile_at=now)
    if lane == "backfill" and done:
        cursors = dict(state.cursors)
        cursors.pop("backfill", None)
        return dataclasses.replace(state, backfill=None, cursors=cursors)
    return state


class PassBook:
    """The full-listing pass one lane cycle continues (see the module docstring).

    Args:
        store: The state store.
        key: The key.
        lane: The lane.
        keeper: The lease the writes are made under.
        clock: The engine's clock.
        logger: The key's logger.
    """

    def __init__(
        self,
        *,
        store: StateStore,
        key: PKey,
        lane: Lane,
        keeper: LeaseKeeper,
        clock: Clock,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self._store = store
        self._key = key
        self._lane = lane
        self._keeper = keeper
        self._clock = clock
        self._logger = logger
        self.progress: ListingPass | None = None
        """The pass the cycle continues (``None``: the lane does not list in full)."""
        self.listing = ListingState()
        """The key's passes, with :attr:`progress` as the pages advanced it."""

    def begin(self, state: PollerState) -> ListingPass:
        """The pass this cycle continues, or a new one (its id is the key's next)."""
        listing = state.listing
        progress = listing.lanes.get(self._lane, ListingPass())
        if progress.pass_id is None:
            counter = listing.counter + 1
            progress = between_passes(progress, pass_id=counter, started_at=self._clock.now())
            listing = ListingState(counter=counter, lanes={**listing.lanes, self._lane: progress})
        self.listing, self.progress = listing, progress
        return progress

    def listing_with(self, progress: ListingPass) -> ListingState:
        """The key's passes with ``progress`` as this lane's (kept as the pass)."""
        self.progress = progress
        self.listing = ListingState(
            counter=self.listing.counter, lanes={**self.listing.lanes, self._lane: progress}
        )
        return self.listing

    def closed(self, ended: ListingPass) -> ListingState:
        """The key's passes once the pass ``ended`` is closed."""
        return self.listing_with(between_passes(ended))

    @staticmethod
    def gone_page(number: int) -> str:
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

    async def page_failed(self, state: PollerState, error: SerializedError) -> PollerState:
        """A page of the pass in progress failed to fetch: count it, and abandon the pass once
        it failed at the same page :data:`PAGE_FAILURES` times in a row. Returns the state
        with the count (or the abandoned pass) stored; a store failure here is only logged."""
        progress = state.listing.lanes.get(self._lane)
        if progress is None or progress.pass_id is None or progress.listed or not progress.pages:
            return state  # the first page: starting over would ask for the same page
        page = progress.pages + 1
        failures = progress.page_failures + 1 if progress.failed_page == page else 1
        try:
            if failures >= PAGE_FAILURES:
                message = error.get("message", "")
                why = f"page {page} failed {failures} times in a row: {message}"
                return await self.abandon(state, why, progress, warn=True)
            counted = dataclasses.replace(progress, failed_page=page, page_failures=failures)
            return await self.save(state, counted)
        except StoreError as store_error:
            self._logger.warning("could not count the failed page %d: %s", page, store_error)
            return state

    async def abandon(
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
        progress = progress or self.progress
        assert progress is not None
        assert progress.pass_id is not None
        now = self._clock.now()
        again = progress.last_abandoned_at is not None and (
            progress.last_completed_at is None
            or progress.last_abandoned_at > progress.last_completed_at
        )
        closed = between_passes(
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
        return await self.save(state, closed)

    async def save(self, state: PollerState, progress: ListingPass) -> PollerState:
        """Store ``progress`` as the lane's pass; returns the state with it."""
        listing = dataclasses.replace(
            state.listing, lanes={**state.listing.lanes, self._lane: progress}
        )
        self.listing, self.progress = listing, progress
        patch: StatePatch = {"listing": listing, "updated_at": self._clock.now()}
        await self._store.save_state(self._key, self._keeper.lease, patch)
        return apply_patch(state, patch)
