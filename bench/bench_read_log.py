"""``read_log`` with a time window: its cost as the log grows from 10,000 to 1,000,000 entries.

Each size holds one key's log with one entry per millisecond (sequence ``n`` logged at
``T0 + n``); the read asks for a window of 1,000 entries in the middle of the log, then for
the same window a page after its first half (``after_sequence``), and for comparison 1,000
entries with no time bound. A read whose cost is flat in the size of the log is what keeps
a Redis server from blocking on a replay.

RedisStore runs on a private ``redis-server`` (no persistence) when the binary is
installed, else on ``WATUKUY_TEST_REDIS_URL``; the entries are written in the store's own
layout by a server-side loop, which keeps the 1,000,000 case to a few seconds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from watukuy.model.rows import PKey

SIZES = (10_000, 100_000, 1_000_000)
WINDOW = 1_000
ROUNDS = 7
T0 = 1_767_225_600_000
KEY = PKey("bench-log")
REDIS_URL = os.environ.get("WATUKUY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")

# Writes entries first..last of the log in the RedisStore layout, as commit_poll does.
# KEYS: log, logrows, logtime.  ARGV: first, last, t0.
_FILL = """
local first, last, t0 = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for n = first, last do
  local at = string.format('%d', t0 + n)
  local seq = string.format('%d', n)
  redis.call('ZADD', KEYS[1], seq, seq)
  redis.call('HSET', KEYS[2], seq, at .. ':{"id":"e' .. seq .. '","sequence":' .. seq .. '}')
  redis.call('ZADD', KEYS[3], at, seq)
end
return last - first + 1
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _redis_url() -> Iterator[str]:
    server = shutil.which("redis-server")
    if server is None:
        yield REDIS_URL
        return
    port = _free_port()
    with tempfile.TemporaryDirectory() as directory:
        command = [server, "--port", str(port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", directory]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                        break
                except OSError:
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:  # busy in a long script: SIGTERM waits for it
                process.kill()
                process.wait(timeout=10)


async def _best(read: Any) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await read()
        best = min(best, time.perf_counter() - started)
    return best


async def _measure_redis(url: str) -> list[tuple[int, float, float, float]]:
    import redis.asyncio as aioredis

    from watukuy.stores.redis import RedisStore, _Keys

    client = aioredis.Redis.from_url(url)
    prefix = f"wk-bench-{uuid.uuid4().hex[:8]}:"
    store = RedisStore(client, prefix=prefix)
    keys = _Keys.of(prefix, KEY)
    fill = client.register_script(_FILL)
    rows: list[tuple[int, float, float, float]] = []
    try:
        await store.migrate()
        written = 0
        for size in SIZES:
            for first in range(written + 1, size + 1, 50_000):
                last = min(size, first + 49_999)
                await fill(keys=[keys.log, keys.logrows, keys.logtime], args=[first, last, T0])
            written = size
            low = T0 + size // 2
            high = low + WINDOW - 1
            middle = size // 2 + WINDOW // 2

            async def window(low: int = low, high: int = high) -> None:
                got = await store.read_log(KEY, from_time=low, to_time=high, limit=WINDOW)
                assert len(got) == WINDOW, len(got)

            async def page(low: int = low, high: int = high, middle: int = middle) -> None:
                got = await store.read_log(
                    KEY, after_sequence=middle, from_time=low, to_time=high, limit=WINDOW
                )
                assert len(got) == WINDOW // 2 - 1, len(got)

            async def plain(middle: int = middle) -> None:
                got = await store.read_log(KEY, after_sequence=middle, limit=WINDOW)
                assert len(got) == WINDOW, len(got)

            rows.append((size, await _best(window), await _best(page), await _best(plain)))
    finally:
        await store.delete_key(KEY)
        await client.aclose()
    return rows


async def run(url: str) -> list[tuple[int, float, float, float]]:
    """Measure every size; returns ``(entries, window s, page-after s, no-window s)``."""
    print(
        f"RedisStore.read_log, a window of {WINDOW:,} entries in the middle of one key's log "
        f"(best of {ROUNDS})"
    )
    print(f"{'log entries':>12}{'window ms':>12}{'page after ms':>16}{'no window ms':>15}")
    # The private server persists nothing on purpose; the store's warning about it is noise.
    logging.getLogger("watukuy").setLevel(logging.ERROR)
    try:
        rows = await _measure_redis(url)
    except Exception as error:  # a server that is down must not stop the other benchmarks
        print(f"{'':>12}skipped: {type(error).__name__}: {error}")
        return []
    for size, whole, after, plain in rows:
        print(f"{size:>12,}{whole * 1000:>12.2f}{after * 1000:>16.2f}{plain * 1000:>15.2f}")
    return rows


def main() -> None:
    """Entry point used by ``make bench``."""
    with _redis_url() as url:
        asyncio.run(run(url))


if __name__ == "__main__":
    main()
