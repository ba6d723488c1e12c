"""The token, page and snapshot-diff strategies: small rules, no time involved."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Literal

from watukuy.model.errors import ConfigError
from watukuy.model.json import dumps
from watukuy.model.page import InvalidPageError, Page

from ._shared import load_stored, stored_cursor_error
from .config import PageCursor, PagePosition, SnapshotDiff, TokenCursor, TokenPosition

__all__ = ["PageStrategy", "SnapshotDiffStrategy", "TokenStrategy"]

_PAGE_NUMBER: Final = re.compile(r"\d+", re.ASCII)


class TokenStrategy:
    """Cursor strategy for :class:`~watukuy.cursor.TokenCursor`.

    * A non-empty text ``Page.cursor`` is the next token and the cycle goes on, unless the
      page also says ``has_more=False``: then the token is kept for the next cycle and this
      one is done (the "sync token" pattern).
    * ``None`` or ``""`` with ``has_more=False`` means caught up: done, and the token this
      page was asked for with is kept, so the next cycle asks again what comes after it
      (the last page of a ``next``-link listing in change order).
    * ``None`` or ``""`` otherwise means the listing is exhausted: done, and the next cycle
      starts over from ``initial`` (a listing in id order, whose tokens never see an item
      change after it was read).
    * Anything else as ``Page.cursor`` is a malformed page: an error, never a moved cursor.
    """

    kind: ClassVar[Literal["token"]] = "token"
    full_scan: ClassVar[bool] = False

    def __init__(self, config: TokenCursor) -> None:
        self.config = config

    def initial(self) -> TokenPosition:
        """The configured ``initial`` token."""
        return TokenPosition(self.config.initial)

    def beginning(self) -> TokenPosition:
        """No token at all, even when ``initial`` is set."""
        return TokenPosition(None)

    def view(self, cursor: TokenPosition, now: int) -> TokenPosition:
        """The stored position, as is."""
        return cursor

    def next_view(
        self, cursor: TokenPosition, request: TokenPosition, page: Page[Any], now: int
    ) -> TokenPosition:
        """The stored position after the previous page."""
        return cursor

    def select(self, page: Page[Any], now: int) -> list[Any]:
        """Every item of the page."""
        return list(page.items)

    def advance(
        self,
        cursor: TokenPosition,
        page: Page[Any],
        kept: Sequence[Any],
        items: Sequence[Any],
        now: int,
    ) -> tuple[TokenPosition, bool]:
        """Follow the page's token; without one, keep this page's own token when the page
        says ``has_more=False``, or start over."""
        token = page.cursor
        if token is None or token == "":
            return (cursor if page.has_more is False else self.initial()), True
        if not isinstance(token, str):
            raise InvalidPageError(
                f"a token poller's Page.cursor must be text or None, got {token!r}"
            )
        return TokenPosition(token), page.has_more is False

    def serialize(self, cursor: TokenPosition) -> str:
        """``{"value": ...}`` as JSON text."""
        return dumps(self.describe(cursor))

    def deserialize(self, text: str) -> TokenPosition:
        """Read what :meth:`serialize` wrote.

        Raises:
            ConfigError: The text is not a stored token cursor.
        """
        expected = '{"value": text or null}'
        data = load_stored(self.kind, text, expected)
        if not isinstance(data, dict) or set(data) != {"value"}:
            raise stored_cursor_error(self.kind, text, expected)
        value = data["value"]
        if value is not None and not isinstance(value, str):
            raise stored_cursor_error(self.kind, text, expected)
        return TokenPosition(value)

    def from_raw(self, raw: str | None, *, field: str = "cursor") -> TokenPosition:
        """The position at token ``raw`` (``None``: the initial position).

        Raises:
            ConfigError: ``raw`` is not text; the message names ``field``.
        """
        if raw is None:
            return self.initial()
        if not isinstance(raw, str):
            raise ConfigError(f"expected a token (text) or None, got {raw!r}", field=field)
        return TokenPosition(raw)

    def lag_ms(self, cursor: TokenPosition, now: int) -> int | None:
        """Always ``None``: a token says nothing about time."""
        return None

    def reached(self, cursor: TokenPosition, target: TokenPosition) -> bool:
        """True when both hold the same token."""
        return cursor == target

    def describe(self, cursor: TokenPosition) -> dict[str, Any]:
        """``{"value": ...}``."""
        return {"value": cursor.value}


class PageStrategy:
    """Cursor strategy for :class:`~watukuy.cursor.PageCursor`.

    ``page + 1`` while the page says ``has_more=True``; otherwise the cycle is done and the
    cursor goes back to ``initial``, so the next cycle lists from the start again.
    """

    kind: ClassVar[Literal["page"]] = "page"
    full_scan: ClassVar[bool] = False

    def __init__(self, config: PageCursor) -> None:
        self.config = config

    def initial(self) -> PagePosition:
        """The configured first page."""
        return PagePosition(self.config.initial)

    def beginning(self) -> PagePosition:
        """The configured first page (``initial``): there is no page before it."""
        return self.initial()

    def view(self, cursor: PagePosition, now: int) -> PagePosition:
        """The stored position, as is."""
        return cursor

    def next_view(
        self, cursor: PagePosition, request: PagePosition, page: Page[Any], now: int
    ) -> PagePosition:
        """The stored position after the previous page."""
        return cursor

    def select(self, page: Page[Any], now: int) -> list[Any]:
        """Every item of the page."""
        return list(page.items)

    def advance(
        self,
        cursor: PagePosition,
        page: Page[Any],
        kept: Sequence[Any],
        items: Sequence[Any],
        now: int,
    ) -> tuple[PagePosition, bool]:
        """Next page while ``has_more`` is true; otherwise done, back to ``initial``."""
        if page.has_more is True:
            return PagePosition(cursor.page + 1), False
        return self.initial(), True

    def serialize(self, cursor: PagePosition) -> str:
        """``{"page": n}`` as JSON text."""
        return dumps(self.describe(cursor))

    def deserialize(self, text: str) -> PagePosition:
        """Read what :meth:`serialize` wrote.

        Raises:
            ConfigError: The text is not a stored page cursor.
        """
        expected = '{"page": integer >= 0}'
        data = load_stored(self.kind, text, expected)
        if not isinstance(data, dict) or set(data) != {"page"}:
            raise stored_cursor_error(self.kind, text, expected)
        page = data["page"]
        if isinstance(page, bool) or not isinstance(page, int) or page < 0:
            raise stored_cursor_error(self.kind, text, expected)
        return PagePosition(page)

    def from_raw(self, raw: str | None, *, field: str = "cursor") -> PagePosition:
        """The position at page ``raw`` (``"17"``; ``None``: the initial position).

        Raises:
            ConfigError: ``raw`` is not a whole number >= 0; the message names ``field``.
        """
        if raw is None:
            return self.initial()
        if not isinstance(raw, str) or not _PAGE_NUMBER.fullmatch(raw):
            raise ConfigError(f"expected a page number like '17', got {raw!r}", field=field)
        return PagePosition(int(raw))

    def lag_ms(self, cursor: PagePosition, now: int) -> int | None:
        """Always ``None``: a page number says nothing about time."""
        return None

    def reached(self, cursor: PagePosition, target: PagePosition) -> bool:
        """True once the page number is at or past the target's."""
        return cursor.page >= target.page

    def describe(self, cursor: PagePosition) -> dict[str, Any]:
        """``{"page": n}``."""
        return {"page": cursor.page}


class SnapshotDiffStrategy:
    """Cursor strategy for :class:`~watukuy.cursor.SnapshotDiff`: no cursor at all.

    ``fetch`` sees ``None`` and pages with ``ctx.page``; the cycle goes on while the page says
    ``has_more=True``. Every cycle is a full scan, which is how deletes are found.
    """

    kind: ClassVar[Literal["snapshot_diff"]] = "snapshot_diff"
    full_scan: ClassVar[bool] = True

    def __init__(self, config: SnapshotDiff | None = None) -> None:
        self.config = config or SnapshotDiff()

    def initial(self) -> None:
        """``None``: there is nothing to remember."""

    def beginning(self) -> None:
        """``None``."""

    def view(self, cursor: None, now: int) -> None:
        """``None``."""

    def next_view(self, cursor: None, request: None, page: Page[Any], now: int) -> None:
        """``None``."""

    def select(self, page: Page[Any], now: int) -> list[Any]:
        """Every item of the page."""
        return list(page.items)

    def advance(
        self, cursor: None, page: Page[Any], kept: Sequence[Any], items: Sequence[Any], now: int
    ) -> tuple[None, bool]:
        """Done unless the page says ``has_more=True``."""
        return None, page.has_more is not True

    def serialize(self, cursor: None) -> str:
        """``"null"``."""
        return "null"

    def deserialize(self, text: str) -> None:
        """``None``, whatever was stored."""

    def from_raw(self, raw: str | None, *, field: str = "cursor") -> None:
        """``None``: a full scan has no position to move to."""

    def lag_ms(self, cursor: None, now: int) -> int | None:
        """Always ``None``."""
        return None

    def reached(self, cursor: None, target: None) -> bool:
        """Always ``False``: a full scan has no target to reach."""
        return False

    def describe(self, cursor: None) -> None:
        """``None``."""
