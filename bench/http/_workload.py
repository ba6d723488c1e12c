"""The vendor's data sets: orders of about 400 bytes, 50 per timestamp, in keyset order.

Every order has a nested ``customer`` object and a list of one to four ``lines``; a data
set is a pure function of its size and its shape, so the vendor, the floor and the engine
agree on it without sharing anything but the count and the shape's name.

Two shapes (:data:`SHAPES`), each a vendor the way some real API is built:

* ``asyncio``: the vendor on asyncio streams, speaking HTTP/1.1 with keep-alive; stamps to
  the second (``2026-01-01T00:00:00Z``), ids in the order of their stamps, ``since`` and
  ``after`` in the query, ``{"data": [...], "has_more": ...}`` in the answer.
* ``stdlib``: the vendor on the standard library's ``http.server.ThreadingHTTPServer``,
  speaking HTTP/1.0 (a new connection for every page); millisecond stamps
  (``2026-01-01T00:00:00.000Z``), ids shuffled against the stamps, a ``null`` field,
  ``updated_since`` and ``after_id`` in the query, ``{"orders": [...], "has_more": ...}``
  in the answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PER_TIMESTAMP = 50
PAGE_SIZE = 1_000
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
STATUSES = ("pending", "paid", "shipped", "delivered")
# Ids of the ``stdlib`` shape: order ``n`` is ``n * _SCRAMBLE mod _PRIME``, a bijection on
# every data set smaller than the prime, so the ids are unique and out of time order.
_PRIME = 9_999_991
_SCRAMBLE = 7_368_787


def stamp(second: int) -> str:
    """The ISO 8601 text of ``second`` seconds after the data set's epoch."""
    return (EPOCH + dt.timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp_ms(tick: int) -> str:
    """The ISO 8601 text, to the millisecond, of the ``tick``-th stamp (1.237 s apart)."""
    at = EPOCH + dt.timedelta(milliseconds=tick * 1_237)
    return f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z"


def order(n: int, second: int, revision: int = 0) -> dict[str, Any]:
    """Order number ``n`` (from 0), stamped ``second`` seconds after the epoch."""
    lines: list[dict[str, Any]] = [
        {
            "sku": f"SKU-{(n * 7 + k * 13) % 10_000:05d}",
            "name": f"Article {(n + k) % 997}",
            "qty": 1 + (n + k) % 5,
            "price": round(3.5 + ((n * 31 + k) % 400) / 4, 2),
        }
        for k in range(1 + n % 4)
    ]
    return {
        "id": f"ord-{n:07d}",
        "updated_at": stamp(second),
        "status": STATUSES[(n + revision) % len(STATUSES)],
        "revision": revision,
        "currency": "EUR",
        "total": round(sum(line["qty"] * line["price"] for line in lines), 2),
        "customer": {
            "id": f"cus-{n % 9_973:05d}",
            "name": f"Customer {n % 9_973}",
            "email": f"customer{n % 9_973}@example.com",
            "country": ("PE", "CL", "AR", "ES")[n % 4],
        },
        "lines": lines,
    }


def order_stdlib(n: int, tick: int, revision: int = 0) -> dict[str, Any]:
    """Order ``n`` of the ``stdlib`` shape: a shuffled id, a millisecond stamp, a null."""
    item = order(n, 0, revision)
    item["id"] = f"ord-{n * _SCRAMBLE % _PRIME:07d}"
    item["updated_at"] = stamp_ms(tick)
    item["coupon"] = None
    return item


@dataclass(frozen=True)
class Shape:
    """How one vendor shape lists its orders; the floor and the engine read it alike."""

    name: str
    order: Callable[[int, int, int], dict[str, Any]]
    """``(n, tick, revision) -> order``: ``tick`` is the order's stamp, 50 orders a tick."""
    since: str
    """The query parameter of the keyset's timestamp."""
    after: str
    """The query parameter of the keyset's id, among the orders at ``since``."""
    items: str
    """The key of the answer's list of orders."""
    http10: bool
    """True: the vendor speaks HTTP/1.0 and closes the connection after every answer."""


SHAPES = {
    "asyncio": Shape("asyncio", order, "since", "after", "data", http10=False),
    "stdlib": Shape("stdlib", order_stdlib, "updated_since", "after_id", "orders", http10=True),
}
