"""The contract every cursor strategy fulfils, and the factory that picks one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, overload

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.page import InvalidPageError, Page

from .config import (
    CursorConfig,
    CustomCursor,
    PageCursor,
    SnapshotDiff,
    TimestampCursor,
    TokenCursor,
)
from .custom import CustomStrategy
from .simple import PageStrategy, SnapshotDiffStrategy, TokenStrategy
from .timestamp import TimestampStrategy

__all__ = [
    "CursorStrategy",
    "StrategyKind",
    "describe_cursor",
    "listing_caught_up",
    "make_strategy",
    "start_over",
]

C = TypeVar("C")

StrategyKind: TypeAlias = Literal["timestamp", "token", "page", "snapshot_diff", "custom"]
"""Which cursor strategy a poller uses, as ``inspect()`` and the store report it."""


class CursorStrategy(Protocol[C]):
    """Pure rules for one poller's cursor of type ``C``; no I/O, no clock of its own.

    The runner drives a cycle like this::

        cursor = strategy.deserialize(stored) if stored else strategy.initial()
        request = strategy.view(cursor, now)
        while True:
            page = await fetch(ctx(cursor=request))
            kept = strategy.select(page, now)
            items = validate(kept)
            cursor, done = strategy.advance(cursor, page, kept, items, now)
            commit(strategy.serialize(cursor), events_for(items))
            if done:
                break
            request = strategy.next_view(cursor, request, page, now)
    """

    @property
    def kind(self) -> StrategyKind:
        """Which of the five strategies this is."""
        ...

    @property
    def full_scan(self) -> bool:
        """True when every cycle lists everything (snapshot diff), so deletes can be found."""
        ...

    def initial(self) -> C:
        """The cursor before the first poll."""
        ...

    def beginning(self) -> C:
        """The cursor at the very start of the API's history, whatever ``initial`` says
        (where ``backfill(name, None)`` starts): no timestamp, no token; the initial page or
        custom cursor, which is the first one by definition."""
        ...

    def view(self, cursor: C, now: int) -> Any:
        """What ``fetch`` sees as ``ctx.cursor`` on the first request of a cycle, for the
        stored ``cursor`` at ``now`` (ms)."""
        ...

    def next_view(self, cursor: C, request: Any, page: Page[Any], now: int) -> Any:
        """What ``fetch`` sees as ``ctx.cursor`` on the next request of the same cycle.

        Args:
            cursor: The stored cursor after ``page``.
            request: The ``ctx.cursor`` ``page`` was fetched with.
            page: The page as ``fetch`` returned it.
            now: The engine clock, in epoch milliseconds.
        """
        ...

    def select(self, page: Page[Any], now: int) -> list[Any]:
        """The raw items of ``page`` to process this cycle; the rest come back next cycle."""
        ...

    def advance(
        self, cursor: C, page: Page[Any], kept: Sequence[Any], items: Sequence[Any], now: int
    ) -> tuple[C, bool]:
        """The next cursor after ``page``, and whether the cycle is done.

        Args:
            cursor: The stored cursor the page was fetched with.
            page: The page as ``fetch`` returned it.
            kept: The raw items :meth:`select` kept.
            items: The validated items made from ``kept``.
            now: The engine clock, in epoch milliseconds.
        """
        ...

    def serialize(self, cursor: C) -> str:
        """The JSON text persisted for the lane."""
        ...

    def deserialize(self, text: str) -> C:
        """The inverse of :meth:`serialize`."""
        ...

    def from_raw(self, raw: str | None, *, field: str = "cursor") -> C:
        """The cursor at the API's own raw value (as given to ``reset_cursor(to=...)`` or
        ``backfill(from_=..., to=...)``); ``None`` gives :meth:`initial`.

        Raises:
            ConfigError: ``raw`` does not fit this strategy; the message names ``field``.
        """
        ...

    def lag_ms(self, cursor: C, now: int) -> int | None:
        """How far the cursor is behind ``now`` (timestamp only; ``None`` otherwise)."""
        ...

    def reached(self, cursor: C, target: C) -> bool:
        """True once ``cursor`` has reached ``target`` (where a backfill lane stops)."""
        ...

    def describe(self, cursor: C) -> Any:
        """A JSON-ready form of ``cursor`` for ``inspect()``."""
        ...


@overload
def make_strategy(config: TimestampCursor) -> TimestampStrategy: ...
@overload
def make_strategy(config: TokenCursor) -> TokenStrategy: ...
@overload
def make_strategy(config: PageCursor) -> PageStrategy: ...
@overload
def make_strategy(config: SnapshotDiff) -> SnapshotDiffStrategy: ...
@overload
def make_strategy(config: CustomCursor[C]) -> CustomStrategy[C]: ...
@overload
def make_strategy(config: CursorConfig) -> CursorStrategy[Any]: ...
def make_strategy(config: CursorConfig) -> CursorStrategy[Any]:
    """Build the strategy for a cursor configuration.

    Raises:
        ConfigError: ``config`` is not one of the five cursor configurations.
    """
    if isinstance(config, TimestampCursor):
        return TimestampStrategy(config)
    if isinstance(config, TokenCursor):
        return TokenStrategy(config)
    if isinstance(config, PageCursor):
        return PageStrategy(config)
    if isinstance(config, SnapshotDiff):
        return SnapshotDiffStrategy(config)
    if isinstance(config, CustomCursor):
        return CustomStrategy(config)
    raise ConfigError(
        "expected TimestampCursor, TokenCursor, PageCursor, SnapshotDiff or CustomCursor, "
        f"got {config!r}",
        field="cursor",
    )


def start_over(strategy: CursorStrategy[C], cursor: C) -> C:
    """Where an incremental lane goes after a gone page (``Page(gone=True)``) it asked for
    at ``cursor``: back to the strategy's ``initial`` position, the cycle done.

    A full listing does not come here: its pass is cut instead (see ``runtime/lane.py``).

    Raises:
        InvalidPageError: A timestamp cursor's page is never gone (a filter by time past the
            newest item answers an empty page), and a gone ``initial`` position leaves
            nothing to start over from: both are fetch failures, and the cursor stays.
    """
    if strategy.kind == "timestamp":
        raise InvalidPageError(
            "a timestamp cursor's page cannot be gone (Page(gone=True)): a request for "
            "what changed after the watermark answers an empty page when nothing did"
        )
    initial = strategy.initial()
    if strategy.serialize(cursor) == strategy.serialize(initial):
        raise InvalidPageError(
            f"the first position of the listing ({strategy.serialize(cursor)}) answered "
            "Page(gone=True): there is nothing earlier to start over from (an empty listing "
            "is an empty page)"
        )
    return initial


def listing_caught_up(last_poll: Any, last_error: Any = None) -> bool:
    """Whether a key's live lane has finished its listing: its last cycle came to the end
    of what the API had (not cut by the page cap, a deadline or a stop) and no cycle has
    failed since.

    Args:
        last_poll: The key's ``schedule.last_poll``: a ``PollSummary`` or its JSON form
            (``inspect()``), ``None`` before the first cycle.
        last_error: The key's ``schedule.last_error`` (``None`` after a success).

    Returns:
        ``True`` when the cursor's position is where a finished cycle left it.
    """
    if last_poll is None or last_error:
        return False
    if isinstance(last_poll, Mapping):
        return not last_poll.get("truncated", False)
    return not getattr(last_poll, "truncated", False)


def describe_cursor(cursor: Any, *, caught_up: bool = False) -> str:
    """One line for a cursor as ``inspect()`` describes it: the one rule every renderer
    (the CLI, the admin page, the demo) uses.

    Timestamp cursors read ``<value> #<tie-break>``, token cursors show the token, page
    cursors ``page <n>``; anything else is shown as compact JSON. A token or page cursor
    back at its first position, or a timestamp cursor that has seen no item, reads
    ``(start)`` before the listing was ever finished and ``(caught up)`` after (the next
    cycle asks from there again); a token kept by a finished cycle (a sync token) reads
    ``<token> (caught up)``.

    Args:
        cursor: The cursor's JSON form (``inspect()``'s ``cursors["live"]``).
        caught_up: Whether the key's last cycle finished the listing (see
            :func:`listing_caught_up`); pass it for the live lane only.
    """
    at_start = "(caught up)" if caught_up else "(start)"
    if cursor is None:
        return "-"
    if isinstance(cursor, Mapping):
        keys = set(cursor)
        if keys == {"value", "tie_break"}:
            value, tie = cursor["value"], cursor["tie_break"]
            if value is None:
                return at_start
            return f"{value} #{tie}" if tie is not None else str(value)
        if keys == {"value"}:
            # No token: the next request carries none, at the very start or after a
            # listing that ran to its end (an exhausted one starts over).
            if cursor["value"] is None:
                return at_start
            return f"{cursor['value']} (caught up)" if caught_up else str(cursor["value"])
        if keys == {"page"}:
            # A finished listing goes back to its first page for the next cycle.
            return "(caught up)" if caught_up else f"page {cursor['page']}"
    if isinstance(cursor, str):
        return cursor
    return wkjson.dumps(cursor)
