"""A child process for the crash and fencing tests: one engine, real clock, real store.

It polls a served ``FakeApi`` over HTTP, writes every event it handles to a consumer log
(its own SQLite file, one committed row per delivery, before the engine acks), and prints
what it lives through on stdout, one line each, flushed at once: ``ready``,
``lease-acquired epoch N``, ``lease-lost epoch N``, ``paused-before-commit epoch N events
K``, ``refused <operation> epoch N``, ``stopped``. The parent kills it with SIGKILL, pauses
it with SIGSTOP, or stops it with SIGTERM (a graceful ``stop()``).

With ``--pause-file PATH`` the store is wrapped in a probe: when PATH exists at a commit
that carries events, the file is removed and the process freezes for ``--pause`` seconds
(a blocking sleep, like a long GC pause) right before the commit, which then proceeds with
whatever lease it had.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import watukuy as wk
from watukuy.model import json as wkjson
from watukuy.model.errors import LeaseLostError
from watukuy.model.ports import StateStore
from watukuy.model.rows import CommitBatch, Lease, PKey, StatePatch
from watukuy.runtime.hooks import ErrorDetails, LeaseAcquiredDetails, LeaseLostDetails
from watukuy.testing.faulty import ForwardingStore

PAGE_SIZE = 20


def say(line: str) -> None:
    print(line, flush=True)


class Probe(ForwardingStore):
    """Serialises fenced writes and renewals (like one connection would), reports refused
    writes, and freezes the process before a commit when asked to."""

    def __init__(self, inner: StateStore, pause_file: str, pause_s: float) -> None:
        super().__init__(inner)
        self._pause_file = pause_file
        self._pause_s = pause_s
        self._lock = asyncio.Lock()

    async def _fenced(self, operation: str, lease: Lease, call: Any) -> Any:
        async with self._lock:
            try:
                return await call
            except LeaseLostError:
                say(f"refused {operation} epoch {lease.epoch}")
                raise

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        async with self._lock:  # a renewal in flight finishes first; the next one waits
            if batch.events and os.path.exists(self._pause_file):  # noqa: ASYNC240
                os.remove(self._pause_file)
                say(f"paused-before-commit epoch {lease.epoch} events {len(batch.events)}")
                time.sleep(self._pause_s)  # noqa: ASYNC251 - the whole process stalls
            try:
                await self.inner.commit_poll(key, lease, batch)
            except LeaseLostError:
                say(f"refused commit_poll epoch {lease.epoch}")
                raise

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Any) -> None:
        await self._fenced("ack_events", lease, self.inner.ack_events(key, lease, event_ids))

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        await self._fenced("save_state", lease, self.inner.save_state(key, lease, patch))

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        async with self._lock:
            return await self.inner.renew_lease(key, lease, ttl_ms, now)


class Hooks:
    def on_lease_acquired(self, details: LeaseAcquiredDetails) -> None:
        say(f"lease-acquired epoch {details.lease.epoch}")

    def on_lease_lost(self, details: LeaseLostDetails) -> None:
        say(f"lease-lost epoch {details.epoch}")

    def on_error(self, details: ErrorDetails) -> None:
        say(f"error {details.lane} {details.phase}: {details.error.get('message')}")


class ConsumerLog:
    """The consumer's durable log: one committed row per handled event."""

    def __init__(self, path: str, instance: str, seed: int) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, timeout=10)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._instance = instance
        self._random = random.Random(seed)

    async def handle(self, event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        await asyncio.sleep(self._random.uniform(0, 0.004))
        self._db.execute(
            "INSERT INTO deliveries (event_id, type, subject, sequence, lane, data, previous, "
            "attempt, instance, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.id,
                event.type,
                event.subject,
                event.sequence,
                event.lane,
                wkjson.dumps(event.data),
                wkjson.dumps(event.previous),
                event.attempt,
                self._instance,
                time.time_ns() // 1_000_000,
            ),
        )
        # Logged but not acked yet: a SIGKILL here is the "handler ran, ack lost" case.
        await asyncio.sleep(self._random.uniform(0, 0.004))


def build_poller(strategy: str, api: str) -> wk.PollerDefinition[Any]:
    async def listing(ctx: wk.FetchContext[Any]) -> AsyncIterator[wk.Page[Any]]:
        # Full scans follow the token listing: it resumes after the last id it saw, so a
        # removal during the scan cannot shift a surviving item out of it (numbered pages
        # would, and the scan would report that item deleted).
        token: str | None = None
        while True:
            res = await ctx.http.get(
                f"{api}/items/token", params={"cursor": token, "limit": PAGE_SIZE}
            )
            body = res.json()
            token = body["next"]
            yield wk.Page(items=body["data"], has_more=token is not None)
            if token is None:
                return

    async def since(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
        res = await ctx.http.get(
            f"{api}/items",
            params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 20},
        )
        body = res.json()
        return wk.Page(items=body["data"], has_more=body["has_more"])

    common: dict[str, Any] = {
        "name": "orders",
        "identity": lambda o: o["id"],
        "schedule": wk.Schedule(min="100ms", max="400ms"),
        "delivery": wk.Delivery(
            concurrency=4, retry=wk.Retry(attempts=20, backoff=wk.Backoff(base="50ms", max="200ms"))
        ),
        "log": wk.EventLog(retention="1d"),
    }
    if strategy == "timestamp":
        return wk.define_poller(
            cursor=wk.TimestampCursor(field="updated_at", tie_break="id", lag="300ms"),
            version=lambda o: o["version"],
            fetch=since,
            reconcile=wk.Reconcile(every="1s", fetch=listing),
            deletes=wk.Deletes(paging="keyset"),  # the listing pages by token
            **common,
        )
    return wk.define_poller(
        cursor=wk.SnapshotDiff(), fetch=listing, deletes=wk.Deletes(paging="keyset"), **common
    )


async def main(args: argparse.Namespace) -> None:
    store: StateStore
    if args.sqlite:
        store = wk.SqliteStore(args.sqlite, busy_timeout="10s")
    else:
        from watukuy.stores.postgres import PostgresStore

        store = PostgresStore(args.postgres, schema=args.schema)
    if args.pause_file:
        store = Probe(store, args.pause_file, args.pause)
    consumer = ConsumerLog(args.consumer_log, args.instance, args.seed)
    engine = wk.Engine(
        store=store,
        pollers=[build_poller(args.strategy, args.api)],
        instance_id=args.instance,
        hooks=Hooks(),
        lease=wk.LeaseOptions(ttl=args.ttl),
        resync_every="500ms",
        auto_migrate=False,
    )
    engine.on("orders", consumer.handle)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await engine.start()
    say("ready")
    await stop.wait()
    await engine.stop(drain=True, timeout="5s")
    await store.close()
    say("stopped")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--instance", required=True)
    parser.add_argument("--api", required=True)
    parser.add_argument("--consumer-log", required=True)
    parser.add_argument("--strategy", choices=("timestamp", "snapshot_diff"), required=True)
    parser.add_argument("--sqlite")
    parser.add_argument("--postgres")
    parser.add_argument("--schema", default="public")
    parser.add_argument("--ttl", default="2s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pause-file")
    parser.add_argument("--pause", type=float, default=1.0)
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
