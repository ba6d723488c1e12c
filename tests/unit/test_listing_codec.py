"""The stored form of a key's full-listing passes reads back whole, including a state
written by an older version with fields the passes no longer have."""

from __future__ import annotations

import dataclasses
from typing import Any

from watukuy.model.rows import (
    ListingPass,
    ListingState,
    empty_poller_state,
    state_from_fields,
    state_to_fields,
)


def _stored(listing: ListingState) -> dict[str, Any]:
    return state_to_fields(dataclasses.replace(empty_poller_state(0), listing=listing))


def test_a_listing_reads_back_as_it_was_written() -> None:
    progress = ListingPass(pass_id=3, started_at=10, cursor="2", pages=2, items=40, tail="k9")
    listing = ListingState(counter=3, lanes={"live": progress})

    assert state_from_fields(_stored(listing)).listing == listing


def test_a_pass_stored_with_the_dropped_boundary_fields_still_reads() -> None:
    listing = ListingState(counter=4, lanes={"live": ListingPass(pass_id=4, pages=1)})
    stored = _stored(listing)
    # What a pass carried before the boundary evidence was dropped.
    stored["listing"]["lanes"]["live"].update(
        first_len=50, dirty_from=2, pending=[["k1", 3]], pending_pass=3, pending_dirty=None
    )

    assert state_from_fields(stored).listing == listing


def test_a_pass_keeps_the_token_of_its_next_page() -> None:
    progress = ListingPass(pass_id=5, cursor="null", token="https://api.example.com/?after=k9")
    listing = ListingState(counter=5, lanes={"live": progress})

    assert state_from_fields(_stored(listing)).listing == listing


def test_a_pass_stored_before_tokens_were_kept_has_none() -> None:
    listing = ListingState(counter=4, lanes={"reconcile": ListingPass(pass_id=4, pages=2)})
    stored = _stored(listing)
    del stored["listing"]["lanes"]["reconcile"]["token"]

    assert state_from_fields(stored).listing.lanes["reconcile"].token is None
