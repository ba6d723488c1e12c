"""Event filters: which events a handler or a subscription receives (``when=``).

A filter is a callable ``(event) -> bool``. The built-in ones compose with ``&``, ``|`` and
``~``, and with plain predicates::

    engine.on("orders", handler, when=wk.changed("status", to="paid"))
    engine.on("orders", handler, when=wk.created() | wk.deleted())
    engine.on("orders", handler, when=wk.changed("/lines/*/qty") & ~wk.changed("status"))
    engine.on("orders", handler, when=lambda event: event.data["total"] > 100)

An event a filter turns down is acknowledged for that consumer without reaching it.
Filters that read ``previous`` or ``changes`` (:func:`changed`) need ``retain="payload"``:
registering one on a poller that keeps hashes only raises ``ConfigError``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from watukuy.diff.patch import (
    DEFAULT_ARRAY_KEY,
    element_identity,
    join_pointer,
    json_equal,
    keyed_array,
    split_pointer,
)
from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event, EventType

__all__ = [
    "EventFilter",
    "Predicate",
    "as_filter",
    "changed",
    "created",
    "deleted",
    "needs_previous",
    "updated",
]

Predicate = Callable[[Event[Any]], bool]
"""A plain filter: ``(event) -> bool``."""


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Final = _Unset()
_WILDCARD: Final = "*"


class EventFilter:
    """A composable event filter: call it with an event to get ``True`` (deliver) or
    ``False`` (acknowledge without delivering).

    Build them with :func:`changed`, :func:`created`, :func:`updated` and :func:`deleted`,
    and combine them with ``&`` (both), ``|`` (either) and ``~`` (not); a plain
    ``(event) -> bool`` callable combines with them too.

    Attributes:
        needs_previous: The filter reads ``previous`` or ``changes``, which only
            ``retain="payload"`` keeps.
    """

    __slots__ = ()

    needs_previous: bool = False

    def __call__(self, event: Event[Any]) -> bool:
        """True when ``event`` passes the filter."""
        raise NotImplementedError

    def __and__(self, other: EventFilter | Predicate) -> EventFilter:
        return _All(self, as_filter(other))

    def __rand__(self, other: Predicate) -> EventFilter:
        return _All(as_filter(other), self)

    def __or__(self, other: EventFilter | Predicate) -> EventFilter:
        return _Any(self, as_filter(other))

    def __ror__(self, other: Predicate) -> EventFilter:
        return _Any(as_filter(other), self)

    def __invert__(self) -> EventFilter:
        return _Not(self)

    def _bind(self, array_key: str | None) -> EventFilter:
        """This filter for a poller whose arrays are diffed by ``array_key``."""
        return self


class _Types(EventFilter):
    __slots__ = ("_types",)

    def __init__(self, *types: EventType) -> None:
        self._types = frozenset(types)

    def __call__(self, event: Event[Any]) -> bool:
        return event.type in self._types

    def __repr__(self) -> str:
        return " | ".join(f"{kind}()" for kind in sorted(self._types))


class _Callable(EventFilter):
    __slots__ = ("_predicate",)

    def __init__(self, predicate: Predicate) -> None:
        self._predicate = predicate

    def __call__(self, event: Event[Any]) -> bool:
        return bool(self._predicate(event))

    def __repr__(self) -> str:
        return repr(self._predicate)


class _All(EventFilter):
    __slots__ = ("_left", "_right", "needs_previous")

    def __init__(self, left: EventFilter, right: EventFilter) -> None:
        self._left, self._right = left, right
        self.needs_previous = left.needs_previous or right.needs_previous

    def __call__(self, event: Event[Any]) -> bool:
        return self._left(event) and self._right(event)

    def _bind(self, array_key: str | None) -> EventFilter:
        return _All(self._left._bind(array_key), self._right._bind(array_key))

    def __repr__(self) -> str:
        return f"({self._left!r} & {self._right!r})"


class _Any(EventFilter):
    __slots__ = ("_left", "_right", "needs_previous")

    def __init__(self, left: EventFilter, right: EventFilter) -> None:
        self._left, self._right = left, right
        self.needs_previous = left.needs_previous or right.needs_previous

    def __call__(self, event: Event[Any]) -> bool:
        return self._left(event) or self._right(event)

    def _bind(self, array_key: str | None) -> EventFilter:
        return _Any(self._left._bind(array_key), self._right._bind(array_key))

    def __repr__(self) -> str:
        return f"({self._left!r} | {self._right!r})"


class _Not(EventFilter):
    __slots__ = ("_inner", "needs_previous")

    def __init__(self, inner: EventFilter) -> None:
        self._inner = inner
        self.needs_previous = inner.needs_previous

    def __call__(self, event: Event[Any]) -> bool:
        return not self._inner(event)

    def _bind(self, array_key: str | None) -> EventFilter:
        return _Not(self._inner._bind(array_key))

    def __repr__(self) -> str:
        return f"~{self._inner!r}"


def _matches(pattern: Sequence[str], path: Sequence[str]) -> bool:
    """True when one is a prefix of the other, ``*`` standing for any one segment: a change
    at ``/lines`` or ``/lines/2`` (a parent) or ``/lines/2/qty/unit`` (a child) is a change
    at ``/lines/*/qty``."""
    for want, got in zip(pattern, path, strict=False):
        if want != got and want != _WILDCARD:
            return False
    return True


_MISSING: Final = object()
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_PLAIN: Final = _SCALARS | {dict, list}


def _plain(node: Any) -> Any:
    """``node`` as JSON data: plain JSON as it is, anything else (a model, a datetime)
    through ``to_jsonable``, one level at a time as a path is walked."""
    return node if type(node) in _PLAIN or node is _MISSING else wkjson.to_jsonable(node)


@functools.lru_cache(maxsize=4096)
def _segments(pointer: str) -> tuple[str, ...]:
    return tuple(split_pointer(pointer))


def _lookup(document: Any, path: list[str]) -> Any:
    node = _plain(document)
    for segment in path:
        if isinstance(node, dict):
            node = node.get(segment, _MISSING)
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return _MISSING
        node = _plain(node)
    return node


def _counterpart(element: Any, others: list[Any], key: str) -> Any:
    identity = element_identity(element, key)
    for other in others:
        if element_identity(other, key) == identity:
            return other
    return _MISSING


def _resolve(primary: Any, other: Any, path: list[str], key: str | None) -> tuple[Any, Any]:
    """The value at ``path`` in ``primary``, and the value at the same place in ``other``:
    in an array diffed by key (as the patch was), the element with the same key, wherever it
    is; elsewhere the same member or position. ``_MISSING`` where there is none."""
    mine, theirs = _plain(primary), _plain(other)
    for segment in path:
        if isinstance(mine, dict):
            mine, theirs = (
                mine.get(segment, _MISSING),
                theirs.get(segment, _MISSING) if isinstance(theirs, dict) else _MISSING,
            )
        elif isinstance(mine, list) and segment.isdigit() and int(segment) < len(mine):
            index = int(segment)
            element = mine[index]
            if not isinstance(theirs, list):
                theirs = _MISSING
            elif key is not None and keyed_array(mine, key) and keyed_array(theirs, key):
                theirs = _counterpart(element, theirs, key)
            else:
                theirs = theirs[index] if index < len(theirs) else _MISSING
            mine = element
        else:
            return _MISSING, _MISSING
        mine, theirs = _plain(mine), _plain(theirs)
    return mine, theirs


def _expand(document: Any, pattern: Sequence[str], bound: list[str]) -> Iterator[list[str]]:
    """Concrete paths of ``pattern`` that exist in ``document``, starting from ``bound``
    (its first segments, already concrete)."""
    if len(bound) == len(pattern):
        yield bound
        return
    segment = pattern[len(bound)]
    if segment != _WILDCARD:
        yield from _expand(document, pattern, [*bound, segment])
        return
    node = _lookup(document, bound)
    if isinstance(node, dict):
        keys: list[str] = list(node)
    elif isinstance(node, list):
        keys = [str(index) for index in range(len(node))]
    else:
        return
    for key in keys:
        yield from _expand(document, pattern, [*bound, key])


class _Changed(EventFilter):
    __slots__ = ("_array_key", "_from", "_pattern", "_pointer", "_to")

    needs_previous = True

    def __init__(self, pointer: str, to: Any, from_: Any, array_key: str | None) -> None:
        self._pointer = pointer
        self._pattern = _segments(pointer)
        self._to = to
        self._from = from_
        self._array_key = array_key

    def _bind(self, array_key: str | None) -> EventFilter:
        return _Changed(self._pointer, self._to, self._from, array_key)

    def __call__(self, event: Event[Any]) -> bool:
        if event.type != "updated" or event.changes is None:
            return False
        pattern = self._pattern
        values = self._to is not _UNSET or self._from is not _UNSET
        # Where each op points: a removal at a place in ``previous`` (the patch removes
        # first), every other op at its place in ``data``.
        hits: list[tuple[tuple[str, ...], bool]] = []
        for op in event.changes:
            path = _segments(op["path"])
            if _matches(pattern, path):
                if not values:
                    return True
                hits.append((path, op["op"] == "remove"))
            source = op.get("from")
            if not values and source is not None and _matches(pattern, _segments(source)):
                return True
        if not hits:
            return False
        after, before = event.data, event.previous
        for path, in_before in hits:
            bound = list(path[: len(pattern)])
            for concrete in _expand(before if in_before else after, pattern, bound):
                if in_before:
                    old, new = _resolve(before, after, concrete, self._array_key)
                else:
                    new, old = _resolve(after, before, concrete, self._array_key)
                if self._passes(old, new):
                    return True
        return False

    def _passes(self, old: Any, new: Any) -> bool:
        if old is _MISSING and new is _MISSING:
            return False
        # A leaf that is an object or an array may still hold a model or a datetime.
        old = old if old is _MISSING or type(old) in _SCALARS else wkjson.to_jsonable(old)
        new = new if new is _MISSING or type(new) in _SCALARS else wkjson.to_jsonable(new)
        if old is not _MISSING and new is not _MISSING and json_equal(old, new):
            return False
        if self._to is not _UNSET and (new is _MISSING or not json_equal(new, self._to)):
            return False
        return self._from is _UNSET or (old is not _MISSING and json_equal(old, self._from))

    def __repr__(self) -> str:
        parts = [repr(self._pointer)]
        if self._to is not _UNSET:
            parts.append(f"to={self._to!r}")
        if self._from is not _UNSET:
            parts.append(f"from_={self._from!r}")
        return f"changed({', '.join(parts)})"


def changed(path: str = "", *, to: Any = _UNSET, from_: Any = _UNSET) -> EventFilter:
    """Pass ``updated`` events whose change set touches ``path``.

    Args:
        path: A top-level member name (``"status"``) or a JSON Pointer (``"/lines/*/qty"``,
            ``*`` standing for any one segment: an array index or a member name). A change
            at the path, under it (``/status/code``) or above it (the whole ``/lines``
            array replaced, a line added) counts. ``""`` (default): any change.
        to: Also require the value at the path in ``data`` (its JSON form) to equal this,
            and to differ from the one in ``previous``.
        from_: Also require the value at the path in ``previous`` to equal this, and to
            differ from the one in ``data``.

    Returns:
        A filter that needs ``retain="payload"`` (``created`` and ``deleted`` events never
        pass it; combine with :func:`created` or :func:`deleted` for those).

    Raises:
        ConfigError: ``path`` is not a string.
    """
    if not isinstance(path, str):
        raise ConfigError(f"expected a member name or a JSON Pointer, got {path!r}", field="path")
    pointer = path if path == "" or path.startswith("/") else join_pointer([path])
    return _Changed(pointer, to, from_, DEFAULT_ARRAY_KEY)


def created() -> EventFilter:
    """Pass ``created`` events."""
    return _Types("created")


def updated() -> EventFilter:
    """Pass ``updated`` events."""
    return _Types("updated")


def deleted() -> EventFilter:
    """Pass ``deleted`` events."""
    return _Types("deleted")


def as_filter(
    when: EventFilter | Predicate, *, array_key: str | None = DEFAULT_ARRAY_KEY
) -> EventFilter:
    """``when`` as an :class:`EventFilter` (a plain callable is wrapped), for a poller whose
    arrays are diffed by ``array_key`` (so that ``to=`` and ``from_=`` pair array elements
    the way its patches do).

    Raises:
        ConfigError: ``when`` is not callable.
    """
    if isinstance(when, EventFilter):
        return when._bind(array_key)
    if not callable(when):
        raise ConfigError(
            f"expected a filter or a callable (event) -> bool, got {when!r}", field="when"
        )
    return _Callable(when)


def needs_previous(when: EventFilter | Predicate) -> bool:
    """True when ``when`` is a filter that reads ``previous`` or ``changes``."""
    return isinstance(when, EventFilter) and when.needs_previous
