"""Vendor APIs behind ``httpx`` transports: no sockets, and time only on a virtual clock.

* :class:`ArrivalsVendor`: an empty listing that logs when each request arrived and answers
  after a latency on the clock, optionally through a bounded pool of connections.
* :class:`KeysetVendor`: a listing of ``items`` in ``updated_at`` order, read ``since`` a
  timestamp (and ``after_id``, when the request sends one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from watukuy.testing import VirtualClock


class ArrivalsVendor(httpx.AsyncBaseTransport):
    """An empty listing (``{"data": []}``) that logs each request's arrival on ``clock``.

    Args:
        clock: The clock that stamps arrivals and runs the latency.
        latency_ms: How long each answer takes: a number, or a function called once per
            request. No latency answers at once, without sleeping on the clock.
        connections: At most this many requests in hand at a time; the others wait, and
            arrive when one ends. ``None``: no bound.
    """

    def __init__(
        self,
        clock: VirtualClock,
        latency_ms: int | Callable[[], int] = 0,
        connections: int | None = None,
    ) -> None:
        self.clock = clock
        self.latency_ms = latency_ms
        self.arrivals: list[int] = []
        """When each request arrived, in arrival order."""
        self.paths: list[str] = []
        """The path of each request, in arrival order."""
        self._pool = asyncio.Semaphore(connections) if connections is not None else None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._pool is None:
            return await self._answer(request)
        async with self._pool:
            return await self._answer(request)

    async def _answer(self, request: httpx.Request) -> httpx.Response:
        # One reading of the clock per request: some tests use a clock that moves when read.
        self.arrivals.append(self.clock.now())
        self.paths.append(request.url.path)
        latency = self.latency_ms() if callable(self.latency_ms) else self.latency_ms
        if latency:
            await self.clock.sleep(latency)
        return httpx.Response(200, json={"data": []})


class KeysetVendor:
    """A listing of ``items`` in ``(updated_at, id)`` order (a ``MockTransport`` handler).

    ``since`` (when not empty) keeps the items after it: after ``(since, after_id)`` when the
    request sends an ``after_id`` (even an empty one), else those updated strictly later.
    The body is ``{"data": [...], "has_more": false}``.
    """

    def __init__(self, items: list[dict[str, Any]] | None = None) -> None:
        self.items: list[dict[str, Any]] = items if items is not None else []
        self.requests = 0

    def add(self, n: int) -> None:
        """Item ``item-NNN``, updated at second ``n`` of the last minute of 2025."""
        self.items.append({"id": f"item-{n:03d}", "updated_at": f"2025-12-31T00:00:{n:02d}.000Z"})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        since = request.url.params.get("since")
        after = request.url.params.get("after_id")
        rows = sorted(self.items, key=lambda o: (o["updated_at"], o["id"]))
        if since and after is not None:
            rows = [o for o in rows if (o["updated_at"], o["id"]) > (since, after)]
        elif since:
            rows = [o for o in rows if o["updated_at"] > since]
        return httpx.Response(200, json={"data": rows, "has_more": False})
