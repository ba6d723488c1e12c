"""What the rows of one commit have in common, so that a store can bind it once.

A page's snapshot rows all carry the poller's schema version and the commit time as
``seen_at``; its new events all have no attempt, retry time nor error yet, and the commit
time as ``created_at``. A store that writes these values once per statement instead of
once per row binds fewer parameters (SQLite) or dumps fewer array elements (PostgreSQL).

The listing links of a commit are checked here too, once for every store, before any of
them opens a transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from watukuy.model.rows import ItemRow, ListingLink, OutboxRow

__all__ = ["LinkRow", "link_rows", "shared_event_fields", "shared_item_fields"]

LinkRow = tuple[str, int, str | None, str | None]
"""One listing link of a commit, flat: identity, read, prev, next."""


def shared_item_fields(rows: Sequence[ItemRow]) -> tuple[int, int] | None:
    """``(schema_version, seen_at)`` when every row of ``rows`` (not empty) has them."""
    schema_version, seen_at = rows[0].schema_version, rows[0].seen_at
    if all(r.schema_version == schema_version and r.seen_at == seen_at for r in rows):
        return schema_version, seen_at
    return None


def shared_event_fields(rows: Sequence[OutboxRow]) -> tuple[int, int] | None:
    """``(attempts, created_at)`` when every row of ``rows`` (not empty) has them and none
    has a retry time or an error."""
    attempts, created_at = rows[0].attempts, rows[0].created_at
    if all(
        r.attempts == attempts
        and r.created_at == created_at
        and r.next_attempt_at is None
        and r.last_error is None
        for r in rows
    ):
        return attempts, created_at
    return None


def link_rows(links: Mapping[str, ListingLink]) -> list[LinkRow]:
    """``CommitBatch.links`` as flat rows, or ``TypeError`` for a value that is not a
    :class:`ListingLink` with an int ``read`` and str-or-``None`` neighbours (raised before
    the store writes anything, so a bad link fails the whole batch)."""
    out: list[LinkRow] = []
    for identity, link in links.items():
        if type(link) is not ListingLink or type(link.read) is not int:
            raise TypeError(f"expected a ListingLink with an int read, got {link!r}")
        prev, next_ = link.prev, link.next
        if not (prev is None or type(prev) is str) or not (next_ is None or type(next_) is str):
            raise TypeError(f"expected str or None neighbours, got {link!r}")
        out.append((str(identity), link.read, prev, next_))
    return out
