"""``PassBook`` keeps a lane's full-listing pass with a store, a lease and a clock: no lane
cycle, no engine."""

from __future__ import annotations

import dataclasses
import logging

import pytest

import watukuy as wk
from watukuy.model.errors import SerializedError
from watukuy.model.page import InvalidPageError
from watukuy.model.rows import PKey, empty_poller_state
from watukuy.runtime.lease import LeaseKeeper
from watukuy.runtime.listing_pass import PAGE_FAILURES, PassBook
from watukuy.testing import VirtualClock

KEY = PKey("catalog", "")
LOGGER = logging.getLogger("test_listing_pass")


async def _book() -> tuple[PassBook, wk.MemoryStore]:
    clock = VirtualClock()
    store = wk.MemoryStore()
    await store.migrate()
    lease = await store.acquire_lease(KEY, "me", 60_000, clock.now())
    assert lease is not None
    keeper = LeaseKeeper(
        store,
        KEY,
        lease,
        ttl_ms=60_000,
        renew_every_ms=20_000,
        clock=clock,
        logger=LOGGER,
        on_lost=lambda: None,
    )
    book = PassBook(store=store, key=KEY, lane="live", keeper=keeper, clock=clock, logger=LOGGER)
    return book, store


async def test_a_page_that_keeps_failing_abandons_its_pass() -> None:
    book, store = await _book()
    state = empty_poller_state(0)
    progress = book.begin(state)
    assert progress.pass_id == 1
    state = await book.save(state, dataclasses.replace(progress, pages=2))
    error: SerializedError = {"name": "HttpError", "message": "boom"}

    for _ in range(PAGE_FAILURES - 1):
        state = await book.page_failed(state, error)
        live = state.listing.lanes["live"]
        assert (live.pass_id, live.failed_page, live.abandoned) == (1, 3, 0)
    state = await book.page_failed(state, error)

    live = state.listing.lanes["live"]
    assert (live.pass_id, live.pages, live.abandoned) == (None, 0, 1)
    assert live.last_abandoned == "page 3 failed 2 times in a row: boom"
    saved = await store.load_state(KEY)
    assert saved is not None
    assert saved.listing == state.listing


def test_the_first_page_of_a_listing_is_never_gone() -> None:
    with pytest.raises(InvalidPageError):
        PassBook.gone_page(1)
    assert PassBook.gone_page(4).startswith("page 4 is gone")
