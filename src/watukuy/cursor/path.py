"""Reading a dotted field path (``"meta.updated_at"``) out of an item.

Items reach the cursor in whatever shape ``fetch`` produced them: plain dicts decoded from
JSON, or objects (pydantic models, msgspec structs, dataclasses). A path segment is looked up
as a key on mappings, as an index on lists and tuples (``"lines.0.id"``), and as an attribute
on anything else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["MISSING", "check_path", "resolve_path"]


class _Missing:
    """The type of :data:`MISSING`; falsy and printed as ``MISSING``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()
"""Returned by :func:`resolve_path` when the path does not lead anywhere."""


def check_path(path: object) -> str | None:
    """Say what is wrong with a dotted path, or return ``None`` when it is usable."""
    if not isinstance(path, str) or not path:
        return f"expected a non-empty dotted path like 'updated_at', got {path!r}"
    if any(not segment for segment in path.split(".")):
        return f"a dotted path cannot have an empty segment, got {path!r}"
    return None


def resolve_path(item: object, path: str) -> Any:
    """Follow ``path`` through ``item``.

    Args:
        item: A mapping, a sequence, or any object with attributes.
        path: Dot-separated segments; there is no escape for keys that contain a dot.

    Returns:
        The value found, or :data:`MISSING` when a segment does not exist, including when
        the walk reaches ``None`` or a scalar before the path ends.
    """
    if type(item) is dict and "." not in path:
        return item.get(path, MISSING)  # the usual case: one key of a decoded JSON object
    current: Any = item
    for segment in path.split("."):
        if current is None or isinstance(current, str | bytes | int | float | bool):
            return MISSING
        if isinstance(current, Mapping):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, Sequence):
            if not (segment.isascii() and segment.isdigit()) or int(segment) >= len(current):
                return MISSING
            current = current[int(segment)]
        else:
            current = getattr(current, segment, MISSING)
            if current is MISSING:
                return MISSING
    return current
