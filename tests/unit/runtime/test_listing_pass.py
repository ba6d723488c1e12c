"""``PassBook`` keeps a lane's full-listing pass with a store, a lease and a clock: no lane
cycle, no engine."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from watukuy.model.errors import SerializedError
from watukuy.model.page import InvalidPageError
from watukuy.model.rows import PKey, empty_poller_state
from watukuy.runtime.listing_pass import PAGE_FAILURES, PassBook

KEY = PKey("catalog", "")
LOGGER = logging.getLogger("test_listing_pass")


async def test_a_page_that_keeps_failing_abandons_its_pass(lease_key: Any) -> None:
    leased = await lease_key(KEY)
    store = leased.store
    book = PassBook(
        store=store, key=KEY, lane="live", keeper=leased.keeper, clock=leased.clock, logger=LOGGER
    )
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
