"""A budget holds in the vendor's own count, with a pool smaller than the concurrency.

The vendor is a threaded HTTP/1.1 server on 127.0.0.1 that stamps every request when it
arrives (its own clock, ``time.time()``) and answers 200 ms later. Engine processes
(``_pool_budget_child.py``) poll it from 20 keys through 5 pooled connections, charging
``Budget(10, "1s")``: most requests wait for a connection after their budget grant. A
grant charged when made (instead of held until its answer) lets a request that waited for
a connection arrive in the same second as requests granted a second later: the vendor
then counts 15 in one second. The check is the vendor's: at most 10 arrivals in any
window of one second, in one process and in two processes sharing a ``RedisBudgetStore``.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow]

CHILD = Path(__file__).with_name("_pool_budget_child.py")
RUN_SECONDS = 60  # at most: each child stops once it made its share of REQUESTS
REQUESTS = 30  # 3 x BUDGET: the budget is used for several seconds
LATENCY_S = 0.2
BUDGET = 10  # Budget(requests=10, per="1s")


class ThreadedVendor(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrivals: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadedVendor

    def do_GET(self) -> None:
        arrived = time.time() * 1_000
        with self.server.lock:
            self.server.arrivals.append((arrived, self.headers.get("x-client-id", "")))
        time.sleep(LATENCY_S)
        body = json.dumps({"data": []}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def vendor() -> Iterator[ThreadedVendor]:
    server = ThreadedVendor()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def busiest_second(times: list[float]) -> int:
    """Most arrivals in any window ``[t, t + 1000 ms)`` (windows starting at an arrival
    are enough: any window can slide right to its first)."""
    ordered = sorted(times)
    return max(
        (
            sum(1 for other in ordered[i:] if other < start + 1_000)
            for i, start in enumerate(ordered)
        ),
        default=0,
    )


async def run_child(
    vendor: ThreadedVendor, name: str, start_at: int, requests: int, *extra: str
) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        "--api",
        vendor.url,
        "--name",
        name,
        "--start-at",
        str(start_at),
        "--requests",
        str(requests),
        "--seconds",
        str(RUN_SECONDS),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=RUN_SECONDS + 60)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def test_one_process_never_exceeds_the_budget_at_the_vendor(vendor: ThreadedVendor) -> None:
    start_at = int(time.time() * 1_000) + 2_500
    child = await run_child(vendor, "solo", start_at, REQUESTS)
    times = [at for at, _ in vendor.arrivals]
    summary = f"{len(times)} requests, busiest second {busiest_second(times)}"
    print(summary)
    assert child["errors"] == []
    assert busiest_second(times) <= BUDGET, summary
    # ... and the budget is used: the run lasted until the child had made its requests.
    assert len(times) >= REQUESTS, summary


@pytest.mark.redis
async def test_two_processes_sharing_redis_never_exceed_the_budget_at_the_vendor(
    vendor: ThreadedVendor, redis_url: str, redis_prefix: str
) -> None:
    start_at = int(time.time() * 1_000) + 3_000
    children = await asyncio.gather(
        *(
            run_child(
                vendor,
                name,
                start_at,
                REQUESTS // 2,
                "--redis",
                redis_url,
                "--prefix",
                redis_prefix,
            )
            for name in ("child-a", "child-b")
        )
    )
    times = [at for at, _ in vendor.arrivals]
    per_child = {
        name: sum(1 for _, who in vendor.arrivals if who == name) for name in ("child-a", "child-b")
    }
    summary = f"{len(times)} requests {per_child}, busiest second {busiest_second(times)}"
    print(summary)
    assert [child["errors"] for child in children] == [[], []]
    assert min(per_child.values()) >= REQUESTS // 2, summary  # both really competed
    assert busiest_second(times) <= BUDGET, summary
    assert len(times) >= REQUESTS, summary
