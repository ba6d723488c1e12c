"""What ``fetch`` returns: one page of items, and whether there is more."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, ClassVar, Generic, TypeVar

from .errors import ErrorCode, WatukuyError
from .records import dataclass

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
    """

    items: Sequence[T] = field(default_factory=tuple)
    cursor: Any = None
    has_more: bool | None = None


class InvalidPageError(WatukuyError):
    """``fetch`` returned something that is not a page: a fetch failure, never a moved cursor."""

    default_code: ClassVar[ErrorCode] = "INVALID_PAGE"


_PAGE_KEYS = frozenset({"items", "cursor", "has_more"})


def coerce_page(value: object) -> Page[Any]:
    """Accept a :class:`Page`, a dict with the same keys, or a bare list of items.

    Raises:
        InvalidPageError: The value has the wrong shape.
    """
    if isinstance(value, Page):
        items = value.items
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidPageError(f"Page.items must be a list, got {type(items).__name__}")
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - _PAGE_KEYS
        if unknown:
            raise InvalidPageError(
                f"a page dict takes the keys items, cursor, has_more; got {sorted(unknown)}"
            )
        items = value.get("items", ())
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidPageError(f"page 'items' must be a list, got {type(items).__name__}")
        has_more = value.get("has_more")
        if has_more is not None and not isinstance(has_more, bool):
            raise InvalidPageError(f"page 'has_more' must be a bool, got {has_more!r}")
        return Page(items=items, cursor=value.get("cursor"), has_more=has_more)
    if isinstance(value, list | tuple):
        return Page(items=value)
    raise InvalidPageError(
        f"fetch must return a Page, a dict with 'items', or a list; got {type(value).__name__}"
    )
