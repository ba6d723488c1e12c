"""The vendor's data set: orders of about 390 bytes, 50 per timestamp, in keyset order.

Every order has a nested ``customer`` object and a list of one to four ``lines``; the data
set is a pure function of its size, so the vendor, the floor and the engine agree on it
without sharing anything but the count.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

PER_TIMESTAMP = 50
PAGE_SIZE = 1_000
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
STATUSES = ("pending", "paid", "shipped", "delivered")


def stamp(second: int) -> str:
    """The ISO 8601 text of ``second`` seconds after the data set's epoch."""
    return (EPOCH + dt.timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def initial(items: int) -> list[dict[str, Any]]:
    """The data set before any change: ``items`` orders, ``PER_TIMESTAMP`` per second."""
    return [order(n, n // PER_TIMESTAMP) for n in range(items)]
