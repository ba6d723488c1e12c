"""``commit_poll`` throughput of each store, next to its floor.

A page is what one poll of a busy API commits: 500 item upserts, 500 outbox events and the
state patch (cursor, sequence, updated_at). Each store commits pages through
``commit_poll``; its **floor** is the plainest code that writes the same rows to the same
schema on the same driver in one transaction (one ``executemany`` per table, no lease check,
no thread hop). The ratio store/floor is the price of the store's guarantees; the target is
at most 1.5.

Run with ``make bench`` (every ``bench/bench_*.py``), or ``python -m bench.bench_stores``.

Remote stores plug in through ``bench/_stores_remote.py`` when it exists. It defines::

    def cases() -> list[StoreCase]

where each case is a :class:`StoreCase` (import it from this module, or return any object
with the same three attributes):

* ``name``: the label printed, e.g. ``"PostgresStore"``;
* ``store``: ``() -> AbstractAsyncContextManager[StateStore]``, opening a fresh, empty,
  migrated store and cleaning up (drop schema / delete keys) on exit;
* ``floor``: ``() -> AbstractAsyncContextManager[Writer]``, opening the same schema on the
  same driver and yielding ``write(key, batch) -> Awaitable[None]``, the plainest code that
  persists ``batch.state_patch``, ``batch.upserts`` and ``batch.events`` in one
  transaction.

A case whose server is unreachable raises when its context is entered; the bench prints
``skipped`` with the reason and goes on.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import importlib
import sqlite3
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from watukuy.model import json as wkjson
from watukuy.model.ports import StateStore
from watukuy.model.rows import (
    CommitBatch,
    ItemRow,
    OutboxRow,
    PKey,
    StatePatch,
    empty_poller_state,
    patch_to_fields,
    state_to_fields,
)
from watukuy.stores.memory import MemoryStore
from watukuy.stores.sqlite import SqliteStore

__all__ = ["StoreCase", "Writer", "main", "make_page"]

Writer = Callable[[PKey, CommitBatch], Awaitable[None]]

PAGE_ITEMS = 500
PAGES_PER_ROUND = 10
ROUNDS = 15
KEY = PKey("orders", "tenant-1")
T0 = 1_767_225_600_000


class StoreCase(NamedTuple):
    """One store to measure, with its floor (see the module docstring)."""

    name: str
    store: Callable[[], AbstractAsyncContextManager[StateStore]]
    floor: Callable[[], AbstractAsyncContextManager[Writer]]


def make_page(page: int, key: PKey = KEY) -> CommitBatch:
    """Page number ``page``: 500 new items, their 500 ``created`` events, the state patch."""
    now = T0 + page * 1_000
    upserts, events = [], []
    for n in range(PAGE_ITEMS):
        identity = f"order-{page:05d}-{n:03d}"
        sequence = page * PAGE_ITEMS + n + 1
        # Hashes, as real event ids and content hashes are: they land all over the indexes,
        # which is what the engine's commits pay for (sequential ids would flatter both).
        digest = hashlib.sha256(f"{key}|{identity}|{sequence}".encode()).hexdigest()
        upserts.append(ItemRow(identity, f"2026-01-01T00:{n % 60:02d}:00Z", digest, 1, None, now))
        envelope = {
            "id": digest,
            "type": "created",
            "source": f"urn:watukuy:{key.poller}",
            "subject": identity,
            "time": "2026-01-01T00:00:00.000Z",
            "poller": key.poller,
            "partition": key.partition,
            "lane": "live",
            "sequence": sequence,
            "cursor": None,
            "data": {"id": identity, "status": "paid", "total": n * 1.25, "lines": [1, 2, 3]},
            "previous": None,
            "attempt": 1,
        }
        events.append(OutboxRow(digest, sequence, wkjson.dumps(envelope), created_at=now))
    cursor = wkjson.dumps({"since": now, "id": upserts[-1].identity})
    patch: StatePatch = {
        "cursors": {"live": cursor},
        "sequence": (page + 1) * PAGE_ITEMS,
        "updated_at": now,
    }
    return CommitBatch(state_patch=patch, upserts=upserts, events=events, now=now)


# --- the local cases --------------------------------------------------------------------


@asynccontextmanager
async def _memory_store() -> AsyncIterator[StateStore]:
    yield MemoryStore()


@asynccontextmanager
async def _memory_floor() -> AsyncIterator[Writer]:
    states: dict[PKey, dict[str, Any]] = {}
    items: dict[PKey, dict[str, ItemRow]] = {}
    outbox: dict[PKey, dict[str, OutboxRow]] = {}

    async def write(key: PKey, batch: CommitBatch) -> None:
        states.setdefault(key, {}).update(batch.state_patch)
        rows = items.setdefault(key, {})
        for row in batch.upserts:
            rows[row.identity] = row
        pending = outbox.setdefault(key, {})
        for event in batch.events:
            pending[event.event_id] = event

    yield write


@asynccontextmanager
async def _sqlite_store() -> AsyncIterator[StateStore]:
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "bench.db")
        await store.migrate()
        try:
            yield store
        finally:
            await store.close()


@asynccontextmanager
async def _sqlite_floor() -> AsyncIterator[Writer]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "floor.db"
        schema = SqliteStore(path)
        await schema.migrate()  # same tables, same indexes
        await schema.close()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        state = wkjson.dumps(state_to_fields(empty_poller_state(T0)))
        conn.execute(
            'INSERT INTO watukuy_pollers (poller, "partition", state) VALUES (?, ?, ?)',
            (KEY.poller, KEY.partition, state),
        )

        async def write(key: PKey, batch: CommitBatch) -> None:
            p, q = key.poller, key.partition
            fields = {
                **state_to_fields(empty_poller_state(batch.now)),
                **patch_to_fields(batch.state_patch),
            }
            conn.execute("BEGIN")
            conn.execute(
                'UPDATE watukuy_pollers SET state = ? WHERE poller = ? AND "partition" = ?',
                (wkjson.dumps(fields), p, q),
            )
            conn.executemany(
                'INSERT OR REPLACE INTO watukuy_items (poller, "partition", identity, version, '
                "hash, schema_version, payload, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (p, q, r.identity, r.version, r.hash, r.schema_version, r.payload, r.seen_at)
                    for r in batch.upserts
                ],
            )
            conn.executemany(
                'INSERT OR REPLACE INTO watukuy_outbox (poller, "partition", event_id, seq, '
                "event, attempts, next_attempt_at, last_error, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        p,
                        q,
                        r.event_id,
                        r.sequence,
                        r.event,
                        r.attempts,
                        r.next_attempt_at,
                        None,
                        r.created_at,
                    )
                    for r in batch.events
                ],
            )
            conn.execute("COMMIT")

        try:
            yield write
        finally:
            conn.close()


def local_cases() -> list[StoreCase]:
    """MemoryStore and SqliteStore (a file in a temporary directory)."""
    return [
        StoreCase("MemoryStore", _memory_store, _memory_floor),
        StoreCase("SqliteStore", _sqlite_store, _sqlite_floor),
    ]


def _remote_cases() -> tuple[list[Any], str | None]:
    for name in ("bench._stores_remote", "_stores_remote"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name in (name, "bench"):
                continue
            return [], f"bench/_stores_remote.py could not be imported: {error}"
        return list(module.cases()), None
    return [], None


# --- measuring ----------------------------------------------------------------------------


@contextmanager
def _no_gc() -> Iterator[None]:
    # Like timeit: a cyclic collection landing inside one round but not another would
    # dominate the difference between two sub-millisecond pages.
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _round_with_store(store: StateStore, pages: list[CommitBatch]) -> float:
    lease = await store.acquire_lease(KEY, "bench", 3_600_000, T0)
    assert lease is not None, "the bench key is leased by someone else"
    with _no_gc():
        started = time.perf_counter()
        for page in pages:
            await store.commit_poll(KEY, lease, page)
        elapsed = time.perf_counter() - started
    await store.release_lease(KEY, lease)
    return elapsed


async def _round_with_floor(write: Writer, pages: list[CommitBatch]) -> float:
    with _no_gc():
        started = time.perf_counter()
        for page in pages:
            await write(KEY, page)
        return time.perf_counter() - started


async def measure(case: Any) -> tuple[float, float]:
    """Best seconds per page for the store and for its floor, rounds interleaved."""
    best_store = best_floor = float("inf")
    async with case.store() as store, case.floor() as write:
        warmup = [make_page(-1 - n) for n in range(3)]
        await _round_with_store(store, warmup)
        await _round_with_floor(write, warmup)
        for round_no in range(ROUNDS):
            first = round_no * PAGES_PER_ROUND
            # Each side gets pages of its own: strings cache their hash on first use, so
            # shared pages would let whichever side runs second skip hashing every key.
            pages = [make_page(first + n) for n in range(PAGES_PER_ROUND)]
            floor_pages = [make_page(first + n) for n in range(PAGES_PER_ROUND)]
            store_s = await _round_with_store(store, pages) / len(pages)
            floor_s = await _round_with_floor(write, floor_pages) / len(floor_pages)
            best_store, best_floor = min(best_store, store_s), min(best_floor, floor_s)
    return best_store, best_floor


async def run() -> list[tuple[str, float, float]]:
    """Measure every case; returns ``(name, store s/page, floor s/page)`` per case run."""
    remote, problem = _remote_cases()
    results: list[tuple[str, float, float]] = []
    rows_per_page = 2 * PAGE_ITEMS
    print(
        f"commit_poll, one page = {PAGE_ITEMS} upserts + {PAGE_ITEMS} events (best of {ROUNDS} rounds of {PAGES_PER_ROUND} pages)"
    )
    print(
        f"{'store':<16}{'pages/s':>10}{'rows/s':>12}{'floor pages/s':>16}{'floor rows/s':>14}{'ratio':>8}"
    )
    for case in [*local_cases(), *remote]:
        try:
            store_s, floor_s = await measure(case)
        except Exception as error:  # a remote server that is down must not stop the bench
            print(f"{case.name:<16}skipped: {type(error).__name__}: {error}")
            continue
        results.append((case.name, store_s, floor_s))
        print(
            f"{case.name:<16}{1 / store_s:>10.1f}{rows_per_page / store_s:>12,.0f}"
            f"{1 / floor_s:>16.1f}{rows_per_page / floor_s:>14,.0f}{store_s / floor_s:>8.2f}"
        )
    if problem:
        print(problem)
    elif not remote:
        print("(no bench/_stores_remote.py cases: Postgres and Redis not measured)")
    return results


def main() -> None:
    """Entry point used by ``make bench``."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
