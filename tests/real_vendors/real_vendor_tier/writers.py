"""The writers: who changes each vendor while the pollers read it.

- :func:`run_drf_writer` runs ``drf_writer.py`` (the vendor's application, through the
  Django ORM) in a process of its own, and :func:`seed_drf` seeds the vendor with it.
- :class:`JsonWriters` are json-server clients that stamp an order's ``updatedAt`` and
  send the write 0.5-3 s later (a slow client, a mobile app syncing, a queue in between):
  json-server applies writes at once, so this is how its stamps land out of order. A
  client editing an order holds it (one edit of an order at a time); a bulk edit sends
  many orders with one stamp. Every write is logged (:class:`~.oracle.JsonWrite`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from .oracle import JsonWrite
from .vendors import HERE, drf_env

WRITER = HERE / "drf_writer.py"


def seed_drf(dsn: str, schema: str, orders: int) -> None:
    """Create orders 1..``orders`` at the DRF vendor, in one transaction."""
    subprocess.run(
        [sys.executable, str(WRITER), "--initial", str(orders)],
        env=drf_env(dsn, schema),
        check=True,
        capture_output=True,
    )


async def run_drf_writer(
    dsn: str,
    schema: str,
    *,
    seconds: float,
    threads: int = 8,
    seed: int = 1,
    bulk_at: Sequence[float] = (),
    bulk_size: int = 150,
) -> dict[str, int]:
    """Run the DRF writers for ``seconds``; their counts by kind of write."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        "--seconds",
        str(seconds),
        "--threads",
        str(threads),
        "--seed",
        str(seed),
        "--bulk-at",
        ",".join(str(x) for x in bulk_at),
        "--bulk-size",
        str(bulk_size),
        env=drf_env(dsn, schema),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the DRF writer failed: {err.decode()[-3000:]}")
    counts: dict[str, int] = json.loads(out.decode().strip().splitlines()[-1])
    return counts


def iso_ms(moment: float) -> str:
    """Epoch seconds as JavaScript's ``toISOString()`` writes them."""
    stamp = dt.datetime.fromtimestamp(moment, dt.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_orders(count: int, *, start: float) -> list[dict[str, Any]]:
    """``count`` orders stamped 1 ms apart from ``start``: a json-server's first db."""
    return [
        {
            "id": n,
            "customer": f"c{n % 17}",
            "status": "new",
            "amount": 10 + n % 90,
            "version": 1,
            "updatedAt": iso_ms(start + n / 1000),
        }
        for n in range(1, count + 1)
    ]


class JsonWriters:
    """Slow json-server clients (see the module docstring)."""

    def __init__(self, base_url: str, initial: Sequence[dict[str, Any]], seed: int) -> None:
        self.base_url = base_url
        self.random = random.Random(seed)
        self.live: dict[int, dict[str, Any]] = {order["id"]: dict(order) for order in initial}
        self.gone: dict[int, int] = {}
        self.next_id = max(self.live, default=0) + 1
        self.log: list[JsonWrite] = []
        kinds = ("update", "create", "delete", "recreate", "bulk", "late", "failed")
        self.counts = dict.fromkeys(kinds, 0)
        self._busy: set[int] = set()

    async def run(
        self,
        seconds: float,
        *,
        clients: int = 6,
        bulk_at: Sequence[float] = (),
        bulk_size: int = 60,
        late_at: Sequence[float] = (),
        polled: Callable[[], int] | None = None,
    ) -> dict[str, int]:
        """Write for ``seconds`` with ``clients`` at once, bulk edits at ``bulk_at``, and
        at ``late_at`` a write that surely lands after a poll (:meth:`late_after_poll`)."""
        async with httpx.AsyncClient(base_url=self.base_url, timeout=30) as http:
            until = time.monotonic() + seconds
            started = time.monotonic()
            tasks = [
                asyncio.create_task(self._client(http, random.Random(self.random.random()), until))
                for _ in range(clients)
            ]
            tasks.append(asyncio.create_task(self._bulks(http, started, bulk_at, bulk_size)))
            if polled is not None:
                tasks.append(asyncio.create_task(self._lates(http, started, late_at, polled)))
            await asyncio.gather(*tasks)
        return dict(self.counts)

    async def _lates(
        self,
        http: httpx.AsyncClient,
        started: float,
        at: Sequence[float],
        polled: Callable[[], int],
    ) -> None:
        for offset in at:
            await asyncio.sleep(max(0.0, started + offset - time.monotonic()))
            await self.late_after_poll(http, polled)

    async def late_after_poll(self, http: httpx.AsyncClient, polled: Callable[[], int]) -> None:
        """A late write a poller surely reads past: order A is stamped, order B is written
        with a later stamp, and A is sent only once ``polled()`` (a poller's request count
        at the vendor) has grown since B landed, or after 15 s. A is left alone afterwards,
        so its late version stays visible to the end of the run."""
        rng = self.random
        first = self._take(rng)
        second = self._take(rng)
        if first is None or second is None:
            return
        late = dict(self.live[first])
        late.update(status="late", version=late["version"] + 1, updatedAt=iso_ms(time.time()))
        await asyncio.sleep(0.01)
        try:
            quick = dict(self.live[second])
            quick.update(version=quick["version"] + 1, updatedAt=iso_ms(time.time()))
            await self._send(http, "put", quick)
            self.live[second] = quick
        finally:
            self._busy.discard(second)
        seen = polled()
        deadline = time.monotonic() + 15
        while polled() == seen and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await self._send(http, "put", late)
        self.live[first] = late
        self.counts["late"] += 1

    def _take(self, rng: random.Random) -> int | None:
        free = sorted(set(self.live) - self._busy)
        if not free:
            return None
        chosen = rng.choice(free)
        self._busy.add(chosen)
        return chosen

    async def _client(self, http: httpx.AsyncClient, rng: random.Random, until: float) -> None:
        while time.monotonic() < until:
            roll = rng.random()
            if roll < 0.62:
                await self._update(http, rng)
            elif roll < 0.76:
                await self._create(http, rng)
            elif roll < 0.92:
                await self._delete(http, rng)
            else:
                await self._recreate(http, rng)
            await asyncio.sleep(rng.uniform(0.0, 0.3))

    async def _send(self, http: httpx.AsyncClient, op: str, order: dict[str, Any]) -> int:
        sent = time.time()
        if op == "put":
            response = await http.put(f"/orders/{order['id']}", json=order)
        elif op == "post":
            response = await http.post("/orders", json=order)
        else:
            response = await http.delete(f"/orders/{order['id']}")
        self.log.append(JsonWrite(op, dict(order), sent, time.time(), response.status_code))
        if not response.is_success:
            self.counts["failed"] += 1
        return response.status_code

    async def _update(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        target = self._take(rng)
        if target is None:
            return
        try:
            order = dict(self.live[target])
            order.update(
                status=rng.choice(("paid", "packed", "shipped", "returned")),
                amount=rng.randint(1, 999),
                version=order["version"] + 1,
                updatedAt=iso_ms(time.time()),
            )
            await asyncio.sleep(rng.uniform(0.5, 3.0))  # stamped now, sent later
            await self._send(http, "put", order)
            self.live[target] = order
            self.counts["update"] += 1
        finally:
            self._busy.discard(target)

    async def _create(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        identity = self.next_id
        self.next_id += 1
        await self._post(http, rng, identity, 1, "create")

    async def _post(
        self, http: httpx.AsyncClient, rng: random.Random, identity: int, version: int, kind: str
    ) -> None:
        """Create order ``identity`` at ``version``: a new one, or one deleted before."""
        self._busy.add(identity)
        try:
            order = {
                "id": identity,
                "customer": f"c{rng.randint(0, 16)}",
                "status": "new",
                "amount": 25,
                "version": version,
                "updatedAt": iso_ms(time.time()),
            }
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            await self._send(http, "post", order)
            self.live[identity] = order
            self.counts[kind] += 1
        finally:
            self._busy.discard(identity)

    async def _delete(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        if len(self.live) < 20:
            return
        target = self._take(rng)
        if target is None:
            return
        try:
            order = self.live.pop(target)
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            await self._send(http, "delete", {"id": target})
            self.gone[target] = order["version"]
            self.counts["delete"] += 1
        finally:
            self._busy.discard(target)

    async def _recreate(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        if not self.gone:
            return
        target = rng.choice(sorted(self.gone))
        # The same id comes back; its version goes on from the deleted one.
        await self._post(http, rng, target, self.gone.pop(target) + 1, "recreate")

    async def _bulks(
        self, http: httpx.AsyncClient, started: float, at: Sequence[float], size: int
    ) -> None:
        for offset in at:
            await asyncio.sleep(max(0.0, started + offset - time.monotonic()))
            await self.bulk(http, size)

    async def bulk(self, http: httpx.AsyncClient, size: int) -> None:
        """One client gives ``size`` free orders one stamp and sends them 0.5-3 s later."""
        rng = self.random
        free = sorted(set(self.live) - self._busy)
        chosen = sorted(rng.sample(free, min(size, len(free))))
        self._busy.update(chosen)
        try:
            stamp = iso_ms(time.time())
            orders = []
            for identity in chosen:
                order = dict(self.live[identity])
                order.update(status="bulk", version=order["version"] + 1, updatedAt=stamp)
                orders.append(order)
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            for order in orders:
                await self._send(http, "put", order)
                self.live[order["id"]] = order
            self.counts["bulk"] += 1
        finally:
            self._busy.difference_update(chosen)
