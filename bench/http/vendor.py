"""The vendor: a small HTTP server on 127.0.0.1, in its own process.

``--shape`` picks how it is built and how it lists (:mod:`bench.http._workload`):
``asyncio`` serves HTTP/1.1 with keep-alive on asyncio streams; ``stdlib`` is the standard
library's ``ThreadingHTTPServer`` speaking HTTP/1.0, a new connection for every request.

Routes:

* ``GET /orders?<since>=&<after>=&limit=``: the keyset listing of the shape's data set, in
  ``(updated_at, id)`` order: items with ``updated_at >= since`` and, when ``after`` is
  given, only those at ``since`` whose id is greater (the parameter names and the answer's
  list key are the shape's). Answered after ``--latency-ms`` (plus up to ``--jitter-ms``
  more, drawn uniformly).
* ``GET /t/<tenant>/orders?since=&after=&limit=``: the same listing over a tenant's three
  orders, answered after the same delay; each request's arrival is recorded for ``/_stats``.
* ``POST /_change?share=0.01``: re-stamp that share of the orders (spread over the whole
  listing) after the newest one, with a new status and revision.
* ``POST /_reset``: back to the initial data set; also forgets the recorded arrivals and
  the counts.
* ``GET /_stats``: ``{"requests": n, "connections": n, "arrivals": {tenant: [monotonic
  seconds, ...]}}``; the connections counted are those accepted, this one's included.

Pages are joined from item bodies serialised once, so the vendor costs little CPU next to
its clients. It prints ``port <n>`` on its first line and serves until stdin closes.

Run: ``python -m bench.http.vendor --items 100000 --shape stdlib --latency-ms 50``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import http.server
import random
import sys
import threading
import time
from collections import defaultdict
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from ._workload import PER_TIMESTAMP, SHAPES, Shape, order

TENANT_ITEMS = 3


class DataSet:
    """The orders of one shape in keyset order, each serialised once."""

    def __init__(self, items: int, shape: Shape) -> None:
        self.items = items
        self.shape = shape
        self.reset()

    def reset(self) -> None:
        self.state = {n: (n // PER_TIMESTAMP, 0) for n in range(self.items)}
        self._build()

    def change(self, share: float) -> int:
        step = max(1, round(1 / share))
        newest = max(tick for tick, _ in self.state.values())
        changed = 0
        for n in range(0, self.items, step):
            _, revision = self.state[n]
            self.state[n] = (newest + 1 + changed // PER_TIMESTAMP, revision + 1)
            changed += 1
        self._build()
        return changed

    def _build(self) -> None:
        made = self.shape.order
        rows = sorted(
            ((item["updated_at"], item["id"]), orjson.dumps(item))
            for item in (made(n, tick, revision) for n, (tick, revision) in self.state.items())
        )
        self.keys = [key for key, _ in rows]
        self.bodies = [body for _, body in rows]

    def page(self, query: dict[str, str]) -> bytes:
        shape = self.shape
        return listing(
            self.keys,
            self.bodies,
            query.get(shape.since),
            query.get(shape.after),
            int(query.get("limit", "1000")),
            shape.items.encode(),
        )


def listing(
    keys: list[tuple[str, str]],
    bodies: list[bytes],
    since: str | None,
    after: str | None,
    limit: int,
    key: bytes = b"data",
) -> bytes:
    """One keyset page over ``keys`` (sorted) and their ``bodies``, listed under ``key``."""
    if since is None:
        start = 0
    elif after is None:
        start = bisect.bisect_left(keys, (since, ""))
    else:
        start = bisect.bisect_right(keys, (since, after))
    end = start + limit
    more = b"true" if end < len(keys) else b"false"
    return b'{"%s":[%s],"has_more":%s}' % (key, b",".join(bodies[start:end]), more)


class Vendor:
    """The routes above, over one :class:`DataSet`; the server applies the delay."""

    def __init__(self, items: int, shape: Shape, latency: float, jitter: float = 0.0) -> None:
        self.data = DataSet(items, shape)
        self.latency = latency
        self.jitter = jitter
        self._random = random.Random(0)
        self._lock = threading.Lock()  # the stdlib server answers on many threads
        self.requests = 0
        self.connections = 0
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

    def _delay(self) -> float:
        if not (self.latency or self.jitter):
            return 0.0
        return self.latency + self._random.random() * self.jitter

    def answer(self, method: str, target: str) -> tuple[int, bytes, float]:
        """``(status, body, seconds to wait before sending it)`` for one request."""
        with self._lock:
            return self._answer(method, target)

    def _answer(self, method: str, target: str) -> tuple[int, bytes, float]:
        arrived = time.monotonic()
        self.requests += 1
        url = urlsplit(target)
        query = dict(parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        if parts == ["orders"]:
            return 200, self.data.page(query), self._delay()
        if len(parts) == 3 and parts[0] == "t" and parts[2] == "orders":
            self.arrivals[parts[1]].append(arrived)
            keys, bodies = self._tenant(parts[1])
            limit = int(query.get("limit", "1000"))
            page = listing(keys, bodies, query.get("since"), query.get("after"), limit)
            return 200, page, self._delay()
        if parts == ["_change"] and method == "POST":
            changed = self.data.change(float(query.get("share", "0.01")))
            return 200, orjson.dumps({"changed": changed}), 0.0
        if parts == ["_reset"] and method == "POST":
            self.data.reset()
            self.arrivals.clear()
            self.requests = 0
            self.connections = 1  # this one
            return 200, b"{}", 0.0
        if parts == ["_stats"]:
            stats = {
                "requests": self.requests,
                "connections": self.connections,
                "arrivals": self.arrivals,
            }
            return 200, orjson.dumps(stats), 0.0
        return 404, b'{"error":"not found"}', 0.0

    def connected(self) -> None:
        with self._lock:
            self.connections += 1

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One HTTP/1.1 connection of the ``asyncio`` server, kept alive."""
        self.connected()
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
                status, body, delay = self.answer(method, target)
                if delay:
                    await asyncio.sleep(delay)
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


async def _serve_asyncio(vendor: Vendor, port: int) -> None:
    server = await asyncio.start_server(vendor.serve, "127.0.0.1", port, backlog=4096)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    loop = asyncio.get_running_loop()
    closed = loop.create_future()

    def stdin_closed() -> None:
        if not closed.done():
            closed.set_result(None)

    loop.add_reader(sys.stdin.fileno(), stdin_closed)
    async with server:
        await closed


class _Handler(http.server.BaseHTTPRequestHandler):
    """One request of the ``stdlib`` server: HTTP/1.0, so the connection closes after it."""

    protocol_version = "HTTP/1.0"
    vendor: Vendor

    def do_GET(self) -> None:
        self._reply("GET")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self._reply("POST")

    def _reply(self, method: str) -> None:
        status, body, delay = self.vendor.answer(method, self.path)
        if delay:
            time.sleep(delay)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: one line per request would cost the vendor more than the answer."""


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128

    def __init__(self, port: int, vendor: Vendor) -> None:
        handler = type("Handler", (_Handler,), {"vendor": vendor})
        super().__init__(("127.0.0.1", port), handler)
        self.vendor = vendor

    def process_request(self, request: Any, client_address: Any) -> None:
        self.vendor.connected()
        super().process_request(request, client_address)


def _serve_stdlib(vendor: Vendor, port: int) -> None:
    with _Server(port, vendor) as server:
        print(f"port {server.server_address[1]}", flush=True)
        serving = threading.Thread(target=server.serve_forever, daemon=True)
        serving.start()
        sys.stdin.buffer.read()  # serves until stdin closes
        server.shutdown()
        serving.join()


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m bench.http.vendor")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="asyncio")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    shape = SHAPES[args.shape]
    vendor = Vendor(args.items, shape, args.latency_ms / 1000, args.jitter_ms / 1000)
    if shape.http10:
        _serve_stdlib(vendor, args.port)
    else:
        asyncio.run(_serve_asyncio(vendor, args.port))


if __name__ == "__main__":
    main()
