"""``PassBook`` keeps a lane's full-listing pass with a store, a lease and a clock: no lane
cycle, no engine."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from watukuy.model.errors import SerializedError
from watukuy.model.page import InvalidPageError, Page
from watukuy.model.rows import ListingPass, PKey, empty_poller_state
from watukuy.runtime.listing_pass import PAGE_FAILURES, PassBook, between_passes, page_token

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
    state = await book.save(state, dataclasses.replace(progress, pages=2, token="t3"))
    error: SerializedError = {"name": "HttpError", "message": "boom"}

    for _ in range(PAGE_FAILURES - 1):
        state = await book.page_failed(state, error)
        live = state.listing.lanes["live"]
        assert (live.pass_id, live.failed_page, live.abandoned) == (1, 3, 0)
        assert live.token == "t3"  # the failed page is asked for again with its token
    state = await book.page_failed(state, error)

    live = state.listing.lanes["live"]
    assert (live.pass_id, live.pages, live.abandoned, live.token) == (None, 0, 1, None)
    assert live.last_abandoned == "page 3 failed 2 times in a row: boom"
    saved = await store.load_state(KEY)
    assert saved is not None
    assert saved.listing == state.listing


def test_the_first_page_of_a_listing_is_never_gone() -> None:
    with pytest.raises(InvalidPageError):
        PassBook.gone_page(1)
    assert PassBook.gone_page(4).startswith("page 4 is gone")


@pytest.mark.parametrize(
    ("page", "token"),
    [
        (Page(items=[1], cursor="next-2", has_more=True), "next-2"),
        (Page(items=[1], cursor="", has_more=True), ""),
        (Page(items=[1], cursor="next-2", has_more=None), None),  # the listing ends there
        (Page(items=[1], cursor="next-2", has_more=False), None),
        (Page(items=[1], has_more=True), None),  # paged by number
        (Page(items=[1], cursor=2, has_more=True), None),  # not a str: not a token
        (Page(items=[1], cursor={"after": 7}, has_more=True), None),
    ],
)
def test_the_token_of_the_next_page(page: Page[Any], token: str | None) -> None:
    assert page_token(page) == token


def test_a_pass_closed_or_started_anew_has_no_token() -> None:
    progress = ListingPass(pass_id=3, cursor="null", token="t4", pages=3, completed=2)

    closed = between_passes(progress)
    assert (closed.pass_id, closed.token, closed.pages, closed.completed) == (None, None, 0, 2)
    assert between_passes(progress, pass_id=4, started_at=9).token is None
