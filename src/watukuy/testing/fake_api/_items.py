"""One tenant's dataset and the three listings a vendor API typically offers.

Items are plain JSON objects keyed by their string ``id``. Every listing reads from a
sorted index that is rebuilt lazily after a mutation, so a large dataset polled often
costs one sort per change, not one per request.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import datetime as dt
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.events import iso_time

__all__ = [
    "DEFAULT_START",
    "Dataset",
    "PageResult",
    "SinceResult",
    "TokenResult",
    "copy_item",
    "decode_token",
    "encode_token",
    "fake_items",
    "parse_instant",
    "positive_int",
]

DEFAULT_START: Final = 1_767_225_600_000
"""2026-01-01T00:00:00.000Z in epoch milliseconds."""

_STATUSES: Final = ("pending", "paid", "shipped")
_UNPARSEABLE: Final = -math.inf
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_instant(value: object) -> int | None:
    """Read a timestamp as integer epoch **microseconds**; ``None`` when it is not one.

    Accepted: ISO 8601 strings (``Z`` or an offset; naive means UTC; date-only too),
    strings of digits (up to 11 digits are epoch seconds, more are epoch milliseconds) and
    numbers (epoch milliseconds). Microseconds keep sub-millisecond ISO values exact.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return round(value * 1000) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isdigit():
        return int(text) * (1_000_000 if len(text) <= 11 else 1_000)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _start_ms(start: int | str) -> int:
    if isinstance(start, int) and not isinstance(start, bool):
        return start
    micros = parse_instant(start) if isinstance(start, str) else None
    if micros is None:
        raise ConfigError(f"expected epoch ms or an ISO 8601 time, got {start!r}", field="start")
    return micros // 1000


def fake_items(
    n: int,
    factory: Callable[[int], Mapping[str, Any]] | None = None,
    *,
    start: int | str = DEFAULT_START,
) -> list[dict[str, Any]]:
    """Build ``n`` deterministic items, one second apart.

    Item ``i`` (0-based) is ``{"id": "item-001", "name": "Item 1", "status": "pending",
    "total": 100, "version": 1, "updated_at": "2026-01-01T00:00:00.000Z"}`` with the
    number ``i + 1``, ``status`` cycling through pending/paid/shipped and ``total`` equal
    to ``100 * (i + 1)``. Ids are zero-padded to at least three digits, wider when ``n``
    needs it, so sorting by id equals sorting by number.

    Args:
        n: How many items (``>= 0``).
        factory: ``factory(i)`` returns fields merged over item ``i`` (overrides or extras).
        start: ``updated_at`` of the first item: epoch ms or an ISO 8601 string.

    Raises:
        ConfigError: ``n`` is not a non-negative integer, or ``start`` is not a time.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"expected a non-negative integer, got {n!r}", field="n")
    first = _start_ms(start)
    width = max(3, len(str(n)))
    items: list[dict[str, Any]] = []
    for i in range(n):
        item: dict[str, Any] = {
            "id": f"item-{i + 1:0{width}d}",
            "name": f"Item {i + 1}",
            "status": _STATUSES[i % len(_STATUSES)],
            "total": 100 * (i + 1),
            "version": 1,
            "updated_at": iso_time(first + i * 1_000),
        }
        if factory is not None:
            item.update(factory(i))
        items.append(item)
    return items


@dataclass(frozen=True, slots=True)
class SinceResult:
    """A keyset page: ``data`` sorted by ``(updated_at, id)``; ``has_more`` when more follow."""

    data: list[dict[str, Any]]
    has_more: bool


@dataclass(frozen=True, slots=True)
class PageResult:
    """A numbered page (1-based) of the id-ordered listing; ``pages`` is at least 1."""

    data: list[dict[str, Any]]
    page: int
    pages: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class TokenResult:
    """A page of the id-ordered listing; pass ``next`` back as the token, ``None`` at the end."""

    data: list[dict[str, Any]]
    next: str | None


def positive_int(value: object, field: str) -> int:
    """Check a page size / page number argument."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"expected a positive integer, got {value!r}", field=field)
    return value


def encode_token(after_id: str) -> str:
    """The opaque token that resumes the id-ordered listing after ``after_id``."""
    raw = wkjson.dumps({"after": after_id}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str) -> str:
    """The id a token resumes after; ``ConfigError`` for a token this API did not issue."""
    try:
        padded = token + "=" * (-len(token) % 4)
        data = wkjson.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeError):
        data = None
    after = data.get("after") if isinstance(data, dict) else None
    if not isinstance(after, str):
        raise ConfigError(f"not a token issued by this API: {token!r}", field="cursor")
    return after


def copy_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a stored item, safe to hand to callers.

    Stored items are plain JSON data already (``_plain`` made them so), so only their
    dicts and lists need copying; a listing then costs the API little next to the engine.
    """
    return {
        key: _copy_plain(value) if type(value) in _CONTAINERS else value
        for key, value in item.items()
    }


_CONTAINERS: Final = frozenset({dict, list})


def _copy_plain(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy_plain(item) for key, item in value.items()}
    if kind is list:
        return [_copy_plain(item) for item in value]
    return value  # str, int, float, bool, None: immutable


def _plain(item: object, field: str) -> dict[str, Any]:
    try:
        data = wkjson.to_jsonable(item)
    except TypeError as error:
        raise ConfigError(f"an item must be JSON data: {error}", field=field) from error
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping, got {item!r}", field=field)
    identity = data.get("id")
    if not isinstance(identity, str) or not identity:
        raise ConfigError(f"an item needs a non-empty string 'id', got {identity!r}", field=field)
    return data


class Dataset:
    """The items of one tenant, with the keyset, page and token listings.

    Args:
        now: Current time in epoch ms (the API's clock), used to stamp ``updated_at``.
    """

    def __init__(self, now: Callable[[], int]) -> None:
        self._now = now
        self._items: dict[str, dict[str, Any]] = {}
        self._ids: list[str] | None = None
        self._keys: list[tuple[float, str]] | None = None
        self.modified_at: int = now()
        """Clock time of the last mutation (what ``Last-Modified`` reports)."""

    # --- mutations ----------------------------------------------------------------------

    def _fill(self, item: dict[str, Any]) -> dict[str, Any]:
        if item.get("updated_at") is None:
            item["updated_at"] = iso_time(self._now())
        item.setdefault("version", 1)
        return item

    def _changed(self) -> None:
        self._ids = None
        self._keys = None
        self.modified_at = self._now()

    def add(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Insert a new item; see :meth:`watukuy.testing.FakeApi.add`."""
        stored = self._fill(_plain(item, "item"))
        if stored["id"] in self._items:
            raise ConfigError(
                f"item {stored['id']!r} already exists; use update() to change it", field="id"
            )
        self._items[stored["id"]] = stored
        self._changed()
        return copy_item(stored)

    def update(self, identity: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``changes`` into an item; see :meth:`watukuy.testing.FakeApi.update`."""
        current = self._items.get(identity)
        if current is None:
            raise KeyError(identity)
        merged = _plain({**current, **changes}, "changes")
        if merged["id"] != identity:
            raise ConfigError(
                f"changes would move item {identity!r} to id {merged['id']!r}", field="id"
            )
        if "version" not in changes:
            version = current.get("version")
            if isinstance(version, int) and not isinstance(version, bool):
                merged["version"] = version + 1
            else:
                merged["version"] = 1
        if "updated_at" not in changes:
            merged["updated_at"] = iso_time(self._now())
        self._items[identity] = merged
        self._changed()
        return copy_item(merged)

    def remove(self, identity: str) -> bool:
        """Delete an item; ``False`` when there was none."""
        if self._items.pop(identity, None) is None:
            return False
        self._changed()
        return True

    def seed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """Replace every item; see :meth:`watukuy.testing.FakeApi.seed`."""
        fresh: dict[str, dict[str, Any]] = {}
        for index, item in enumerate(items):
            stored = self._fill(_plain(item, f"items[{index}]"))
            if stored["id"] in fresh:
                raise ConfigError(f"duplicate id {stored['id']!r}", field=f"items[{index}].id")
            fresh[stored["id"]] = stored
        self._items = fresh
        self._changed()

    def clear(self) -> None:
        """Drop every item."""
        self._items.clear()
        self._changed()

    # --- reads --------------------------------------------------------------------------

    def get(self, identity: str) -> dict[str, Any] | None:
        """A copy of one item, or ``None``."""
        item = self._items.get(identity)
        return None if item is None else copy_item(item)

    def raw(self, identity: str) -> dict[str, Any] | None:
        """The stored item itself (callers serialise it and never mutate it)."""
        return self._items.get(identity)

    def size(self) -> int:
        """Number of items."""
        return len(self._items)

    def _by_id(self) -> list[str]:
        if self._ids is None:
            self._ids = sorted(self._items)
        return self._ids

    def _by_time(self) -> list[tuple[float, str]]:
        if self._keys is None:
            keys: list[tuple[float, str]] = []
            for identity, item in self._items.items():
                micros = parse_instant(item.get("updated_at"))
                keys.append((_UNPARSEABLE if micros is None else micros, identity))
            keys.sort()
            self._keys = keys
        return self._keys

    def all_raw(self) -> list[dict[str, Any]]:
        """Every stored item, ordered by id (not copied)."""
        return [self._items[identity] for identity in self._by_id()]

    def since(
        self, since: str | int | None, after_id: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """The keyset listing over ``(updated_at, id)``; items are not copied."""
        keys = self._by_time()
        if since is None or since == "":
            start = 0
        else:
            micros = parse_instant(since)
            if micros is None:
                raise ConfigError(
                    f"expected an ISO 8601 time or epoch, got {since!r}", field="since"
                )
            # Ties on the `since` instant are skipped up to and including `after_id`, so a
            # page boundary inside a group of equal timestamps neither repeats nor skips.
            probe = (micros, after_id) if after_id is not None else (micros, "")
            finder = bisect.bisect_right if after_id is not None else bisect.bisect_left
            start = finder(keys, probe)
        window = keys[start : start + limit]
        return [self._items[identity] for _, identity in window], start + limit < len(keys)

    def page(self, page: int, size: int) -> tuple[list[dict[str, Any]], int, bool]:
        """Page ``page`` (1-based) of the id-ordered listing, the page count, has_more."""
        ids = self._by_id()
        pages = max(1, math.ceil(len(ids) / size))
        chunk = ids[(page - 1) * size : page * size]
        return [self._items[i] for i in chunk], pages, page < pages

    def after(self, after_id: str | None, limit: int) -> tuple[list[dict[str, Any]], str | None]:
        """The id-ordered listing after ``after_id``; the last id when more follow."""
        ids = self._by_id()
        start = 0 if after_id is None else bisect.bisect_right(ids, after_id)
        chunk = ids[start : start + limit]
        more = start + limit < len(ids)
        return [self._items[i] for i in chunk], (chunk[-1] if more and chunk else None)
