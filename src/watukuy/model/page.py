"""What ``fetch`` returns: one page of items, whether there is more, or that the page is gone.

A listing ends in one of two ways, and ``fetch`` says which:

* **It ran out.** The last page says ``has_more=False`` (the API's ``next`` link is
  ``None``), or comes back empty. Everything was read: a full listing's pass is complete.
* **The page asked for is not there any more** (``Page(gone=True)``): the API answered a
  ``404`` or ``416`` past the end (a listing that shrank while it was being read), or
  ``410 Gone`` for an expired token. Nothing can be read from that position: the lane
  starts over, and a full listing's pass is abandoned without deletes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, ClassVar, Generic, TypeVar

from watukuy.model.records import dataclass

from .errors import ErrorCode, WatukuyError

__all__ = ["InvalidPageError", "Page", "coerce_page"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page returned by ``fetch``.

    Attributes:
        items: The items of this page, raw (before the schema) or already typed.
        cursor: A strategy-specific next cursor: the next token (token strategy), a server
            watermark overriding the item maximum (timestamp strategy), or anything a
            custom ``advance`` wants to see.
        has_more: ``True`` asks the runner to fetch again at once (catch-up); ``False``
            says the listing is done for now; ``None`` lets the strategy decide.
        gone: The position this request asked for no longer exists: a ``404`` or ``416``
            for a page past the end of a listing that shrank while it was read, a ``410``
            for an expired token. A gone page has no items, cursor or ``has_more``. The
            lane starts over from its first position (a token, page or custom cursor goes
            back to ``initial``); a full listing's pass in progress is abandoned, finds
            no deletes, and the next cycle starts a new pass. A gone *first* position
            (page 1 of a pass, the ``initial`` cursor) and a gone page of a timestamp
            cursor are fetch failures: there is nothing earlier to start over from.

    Example:
        A Django REST Framework listing answers ``404 {"detail": "Invalid page."}`` past
        its last page::

            response = await ctx.http.get(url, params={"page": ctx.page}, raise_for_status=False)
            if response.status == 404 and ctx.page > 1:
                return wk.Page(gone=True)
            response.raise_for_status()
    """

    items: Sequence[T] = field(default_factory=tuple)
    cursor: Any = None
    has_more: bool | None = None
    gone: bool = False


class InvalidPageError(WatukuyError):
    """``fetch`` returned something that is not a page: a fetch failure, never a moved cursor."""

    default_code: ClassVar[ErrorCode] = "INVALID_PAGE"


_PAGE_KEYS = frozenset({"items", "cursor", "has_more", "gone"})


def _check_gone(page: Page[Any]) -> Page[Any]:
    if not isinstance(page.gone, bool):
        raise InvalidPageError(f"Page.gone must be a bool, got {page.gone!r}")
    if page.gone and (len(page.items) or page.cursor is not None or page.has_more is not None):
        raise InvalidPageError(
            "a gone page (Page(gone=True)) has no items, cursor or has_more: the position "
            "it was asked for no longer exists"
        )
    return page


def coerce_page(value: object) -> Page[Any]:
    """Accept a :class:`Page`, a dict with the same keys, or a bare list of items.

    Raises:
        InvalidPageError: The value has the wrong shape, or a gone page carries anything.
    """
    if isinstance(value, Page):
        items = value.items
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidPageError(f"Page.items must be a list, got {type(items).__name__}")
        return _check_gone(value)
    if isinstance(value, Mapping):
        unknown = set(value) - _PAGE_KEYS
        if unknown:
            raise InvalidPageError(
                f"a page dict takes the keys items, cursor, has_more, gone; got {sorted(unknown)}"
            )
        items = value.get("items", ())
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidPageError(f"page 'items' must be a list, got {type(items).__name__}")
        has_more = value.get("has_more")
        if has_more is not None and not isinstance(has_more, bool):
            raise InvalidPageError(f"page 'has_more' must be a bool, got {has_more!r}")
        page = Page(
            items=items,
            cursor=value.get("cursor"),
            has_more=has_more,
            gone=value.get("gone", False),
        )
        return _check_gone(page)
    if isinstance(value, list | tuple):
        return Page(items=value)
    raise InvalidPageError(
        f"fetch must return a Page, a dict with 'items', or a list; got {type(value).__name__}"
    )
