"""The vendor: a small HTTP/1.1 server on 127.0.0.1, in its own process.

Routes:

* ``GET /orders?since=&after=&limit=``: the keyset listing of the data set of
  :mod:`bench.http._workload`, in ``(updated_at, id)`` order: items with ``updated_at >=
  since`` and, when ``after`` is given, only those at ``since`` whose id is greater.
  Answers ``{"data": [...], "has_more": bool}``.
* ``GET /t/<tenant>/orders?...``: the same listing over a tenant's three orders, answered
  after ``--latency-ms`` (plus up to ``--jitter-ms`` more, drawn uniformly); each request's
  arrival is recorded for ``/_stats``.
* ``POST /_change?share=0.01``: re-stamp that share of the orders (spread over the whole
  listing) after the newest one, with a new status and revision.
* ``POST /_reset``: back to the initial data set; also forgets the recorded arrivals.
* ``GET /_stats``: ``{"requests": n, "arrivals": {tenant: [monotonic seconds, ...]}}``.

Pages are joined from item bodies serialised once, so the vendor costs little CPU next to
its clients. It prints ``port <n>`` on its first line and serves until stdin closes.

Run: ``python -m bench.http.vendor --items 100000``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import random
import sys
import time
from collections import defaultdict
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from ._workload import PER_TIMESTAMP, order, stamp

TENANT_ITEMS = 3


class DataSet:
    """The orders in keyset order, each serialised once."""

    def __init__(self, items: int) -> None:
        self.items = items
        self.reset()

    def reset(self) -> None:
        self.state = {n: (n // PER_TIMESTAMP, 0) for n in range(self.items)}
        self._build()

    def change(self, share: float) -> int:
        step = max(1, round(1 / share))
        newest = max(second for second, _ in self.state.values())
        changed = 0
        for n in range(0, self.items, step):
            _, revision = self.state[n]
            self.state[n] = (newest + 1 + changed // PER_TIMESTAMP, revision + 1)
            changed += 1
        self._build()
        return changed

    def _build(self) -> None:
        rows = sorted(
            (stamp(second), f"ord-{n:07d}", n, second, revision)
            for n, (second, revision) in self.state.items()
        )
        self.keys = [(row[0], row[1]) for row in rows]
        self.bodies = [
            orjson.dumps(order(n, second, revision)) for _, _, n, second, revision in rows
        ]

    def page(self, since: str | None, after: str | None, limit: int) -> bytes:
        return listing(self.keys, self.bodies, since, after, limit)


def listing(
    keys: list[tuple[str, str]],
    bodies: list[bytes],
    since: str | None,
    after: str | None,
    limit: int,
) -> bytes:
    """One keyset page over ``keys`` (sorted) and their ``bodies``."""
    if since is None:
        start = 0
    elif after is None:
        start = bisect.bisect_left(keys, (since, ""))
    else:
        start = bisect.bisect_right(keys, (since, after))
    end = start + limit
    more = b"true" if end < len(keys) else b"false"
    return b'{"data":[' + b",".join(bodies[start:end]) + b'],"has_more":' + more + b"}"


class Vendor:
    """The routes above, over one :class:`DataSet`."""

    def __init__(self, items: int, latency: float, jitter: float = 0.0) -> None:
        self.data = DataSet(items)
        self.latency = latency
        self.jitter = jitter
        self._random = random.Random(0)
        self.requests = 0
        self.arrivals: defaultdict[str, list[float]] = defaultdict(list)
        self._tenants: dict[str, tuple[list[tuple[str, str]], list[bytes]]] = {}

    def _tenant(self, name: str) -> tuple[list[tuple[str, str]], list[bytes]]:
        found = self._tenants.get(name)
        if found is None:
            rows = [order(n, n) for n in range(TENANT_ITEMS)]
            for row in rows:
                row["id"] = f"{name}-{row['id']}"
            found = ([(r["updated_at"], r["id"]) for r in rows], [orjson.dumps(r) for r in rows])
            self._tenants[name] = found
        return found

    async def answer(self, method: str, target: str) -> tuple[int, bytes]:
        arrived = time.monotonic()
        self.requests += 1
        url = urlsplit(target)
        query = dict(parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        limit = int(query.get("limit", "1000"))
        since, after = query.get("since"), query.get("after")
        if parts == ["orders"]:
            return 200, self.data.page(since, after, limit)
        if len(parts) == 3 and parts[0] == "t" and parts[2] == "orders":
            self.arrivals[parts[1]].append(arrived)
            if self.latency or self.jitter:
                await asyncio.sleep(self.latency + self._random.random() * self.jitter)
            keys, bodies = self._tenant(parts[1])
            return 200, listing(keys, bodies, since, after, limit)
        if parts == ["_change"] and method == "POST":
            changed = self.data.change(float(query.get("share", "0.01")))
            return 200, orjson.dumps({"changed": changed})
        if parts == ["_reset"] and method == "POST":
            self.data.reset()
            self.arrivals.clear()
            self.requests = 0
            return 200, b"{}"
        if parts == ["_stats"]:
            return 200, orjson.dumps({"requests": self.requests, "arrivals": self.arrivals})
        return 404, b'{"error":"not found"}'

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                if length:
                    await reader.readexactly(length)
                status, body = await self.answer(method, target)
                reason = b"OK" if status == 200 else b"Not Found"
                writer.write(
                    b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                    % (status, reason, len(body))
                    + body
                )
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except ConnectionError:
            return
        finally:
            writer.close()


async def _main(args: Any) -> None:
    vendor = Vendor(args.items, args.latency_ms / 1000, args.jitter_ms / 1000)
    server = await asyncio.start_server(vendor.serve, "127.0.0.1", args.port, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"port {port}", flush=True)
    loop = asyncio.get_running_loop()
    closed = loop.create_future()

    def stdin_closed() -> None:
        if not closed.done():
            closed.set_result(None)

    loop.add_reader(sys.stdin.fileno(), stdin_closed)
    async with server:
        await closed


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m bench.http.vendor")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
