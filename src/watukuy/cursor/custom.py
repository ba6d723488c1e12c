"""The custom strategy: the user's own cursor type and ``advance`` rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, TypeVar

from watukuy.model.errors import ConfigError
from watukuy.model.json import dumps, loads
from watukuy.model.page import Page

from .config import AdvanceContext, CustomCursor

__all__ = ["CustomStrategy"]

C = TypeVar("C")


def _describe_type(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{type(value).__name__} {text[:77]}..."


class CustomStrategy(Generic[C]):
    """Cursor strategy for :class:`~watukuy.cursor.CustomCursor`.

    ``advance`` receives an :class:`~watukuy.cursor.AdvanceContext` and returns
    ``(next_cursor, done)``; a mapping with ``cursor`` and ``done`` keys is accepted too.
    Cursors are stored with the user's ``serialize``/``deserialize``, or as JSON.
    """

    kind: ClassVar[Literal["custom"]] = "custom"
    full_scan: ClassVar[bool] = False

    def __init__(self, config: CustomCursor[C]) -> None:
        self.config = config

    def initial(self) -> C:
        """The configured ``initial`` cursor."""
        return self.config.initial

    def beginning(self) -> C:
        """The configured ``initial`` cursor: only it knows where the API's history starts."""
        return self.config.initial

    def view(self, cursor: C, now: int) -> C:
        """The stored cursor, as is."""
        return cursor

    def next_view(self, cursor: C, request: C, page: Page[Any], now: int) -> C:
        """The stored cursor after the previous page."""
        return cursor

    def select(self, page: Page[Any], now: int) -> list[Any]:
        """Every item of the page."""
        return list(page.items)

    def advance(
        self, cursor: C, page: Page[Any], kept: Sequence[Any], items: Sequence[Any], now: int
    ) -> tuple[C, bool]:
        """Ask the user's ``advance`` for the next cursor.

        Raises:
            ConfigError: ``advance`` returned something other than ``(cursor, done)`` or a
                mapping with ``cursor`` and a boolean ``done``.
        """
        context = AdvanceContext(
            cursor=cursor, items=items, page_cursor=page.cursor, has_more=page.has_more
        )
        result: object = self.config.advance(context)
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], bool):
            return result[0], result[1]
        if (
            isinstance(result, Mapping)
            and "cursor" in result
            and isinstance(result.get("done"), bool)
        ):
            return result["cursor"], result["done"]
        raise ConfigError(
            "advance must return (cursor, done) with done a bool, or "
            f"{{'cursor': ..., 'done': bool}}; got {_describe_type(result)}",
            field="cursor.advance",
        )

    def serialize(self, cursor: C) -> str:
        """The user's ``serialize``, or JSON.

        Raises:
            ConfigError: The cursor has no JSON form, or ``serialize`` did not return text.
        """
        if self.config.serialize is not None:
            text = self.config.serialize(cursor)
            if not isinstance(text, str):
                raise ConfigError(
                    f"must return text, got {_describe_type(text)}", field="cursor.serialize"
                )
            return text
        try:
            return dumps(cursor)
        except TypeError as error:
            raise ConfigError(
                f"the cursor {_describe_type(cursor)} has no JSON form ({error}); give "
                "serialize and deserialize for this cursor type",
                field="cursor.serialize",
            ) from error

    def deserialize(self, text: str) -> C:
        """The user's ``deserialize``, or JSON.

        Raises:
            ConfigError: The text is not JSON (when no ``deserialize`` is given).
        """
        if self.config.deserialize is not None:
            return self.config.deserialize(text)
        try:
            value: C = loads(text)
        except ValueError as error:
            raise ConfigError(
                f"{text[:120]!r} is not JSON; give deserialize to read this cursor",
                field="cursor.deserialize",
            ) from error
        return value

    def from_raw(self, raw: str | None, *, field: str = "cursor") -> C:
        """``deserialize(raw)``; ``None`` gives the initial cursor.

        Raises:
            ConfigError: ``raw`` cannot be read; the message names ``field``.
        """
        if raw is None:
            return self.initial()
        if not isinstance(raw, str):
            raise ConfigError(f"expected the cursor as text, got {raw!r}", field=field)
        reader = self.config.deserialize or loads
        try:
            value: C = reader(raw)
        except Exception as error:
            raise ConfigError(f"cannot read {raw!r} as a cursor: {error}", field=field) from error
        return value

    def lag_ms(self, cursor: C, now: int) -> int | None:
        """Always ``None``: only timestamp cursors know how far behind they are."""
        return None

    def reached(self, cursor: C, target: C) -> bool:
        """True when the cursors are equal."""
        return bool(cursor == target)

    def describe(self, cursor: C) -> Any:
        """The stored text read back as JSON, or the text itself when it is not JSON."""
        text = self.serialize(cursor)
        try:
            return loads(text)
        except ValueError:
            return text
