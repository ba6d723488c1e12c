"""PostgreSQL and Redis cases for ``bench/bench_stores.py``.

The servers are the ones the tests use: ``WATUKUY_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``) and ``WATUKUY_TEST_REDIS_URL`` (default
``redis://127.0.0.1:6379/15``). Every run works in a schema / key prefix of its own and
removes it afterwards.

The floors are the plainest code doing the same work on the same driver and the same
layout, without a lease check:

* PostgreSQL: in one transaction, ``UPDATE`` the state, then one ``executemany`` of
  ``INSERT ... ON CONFLICT DO UPDATE`` for the items and one for the outbox (psycopg sends
  an ``executemany`` as one pipeline).
* Redis: one ``MULTI``/``EXEC`` pipeline of plain ``HSET``/``ZADD`` commands writing the
  state fields, the item rows and their identity index, and the outbox rows and their
  sequence index.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from watukuy.model import json as wkjson
from watukuy.model.ports import StateStore
from watukuy.model.rows import (
    CommitBatch,
    PKey,
    empty_poller_state,
    patch_to_fields,
    state_to_fields,
)

try:
    from bench.bench_stores import KEY, T0, StoreCase, Writer
except ImportError:  # run as a script from inside bench/
    from bench_stores import KEY, T0, StoreCase, Writer  # type: ignore[no-redef,import-not-found]

POSTGRES_URL = os.environ.get(
    "WATUKUY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("WATUKUY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def _full_state(batch: CommitBatch) -> dict[str, Any]:
    """The whole state document after the page, as a SQL store writes it."""
    return {**state_to_fields(empty_poller_state(batch.now)), **patch_to_fields(batch.state_patch)}


# --- PostgreSQL ---------------------------------------------------------------------------


async def _postgres_reachable() -> None:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, connect_timeout=3)
    await conn.close()


async def _drop_schema(schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@asynccontextmanager
async def _postgres_store() -> AsyncIterator[StateStore]:
    from watukuy.stores.postgres import PostgresStore

    await _postgres_reachable()
    schema = f"wk_bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(POSTGRES_URL, schema=schema)
    try:
        await store.migrate()
        yield store
    finally:
        await store.close()
        await _drop_schema(schema)


@asynccontextmanager
async def _postgres_floor() -> AsyncIterator[Writer]:
    import psycopg

    from watukuy.stores.postgres import PostgresStore

    await _postgres_reachable()
    schema = f"wk_floor_{uuid.uuid4().hex[:10]}"
    layout = PostgresStore(POSTGRES_URL, schema=schema)
    await layout.save_state_unfenced(KEY, {}, T0)  # the same tables, and the key's row
    await layout.close()
    t = f'"{schema}".watukuy_'
    upsert_items = (
        f'INSERT INTO {t}items (poller, "partition", identity, version, hash, schema_version,'
        " payload, seen_at) VALUES (%s, %s, %s, %s, %s, %s, %s::json, %s)"
        ' ON CONFLICT (poller, "partition", identity) DO UPDATE SET version = EXCLUDED.version,'
        " hash = EXCLUDED.hash, schema_version = EXCLUDED.schema_version,"
        " payload = EXCLUDED.payload, seen_at = EXCLUDED.seen_at"
    )
    upsert_outbox = (
        f'INSERT INTO {t}outbox (poller, "partition", event_id, seq, event, attempts,'
        " next_attempt_at, last_error, created_at)"
        " VALUES (%s, %s, %s, %s, %s::json, %s, %s, %s::json, %s)"
        ' ON CONFLICT (poller, "partition", event_id) DO UPDATE SET seq = EXCLUDED.seq,'
        " event = EXCLUDED.event, attempts = EXCLUDED.attempts,"
        " next_attempt_at = EXCLUDED.next_attempt_at, last_error = EXCLUDED.last_error,"
        " created_at = EXCLUDED.created_at"
    )
    update_state = f'UPDATE {t}pollers SET state = %s::json WHERE poller = %s AND "partition" = %s'
    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True)

    async def write(key: PKey, batch: CommitBatch) -> None:
        p, q = key.poller, key.partition
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(update_state, (wkjson.dumps(_full_state(batch)), p, q))
            await cur.executemany(
                upsert_items,
                [
                    (p, q, r.identity, r.version, r.hash, r.schema_version, r.payload, r.seen_at)
                    for r in batch.upserts
                ],
            )
            await cur.executemany(
                upsert_outbox,
                [
                    (p, q, r.event_id, r.sequence, r.event, r.attempts, None, None, r.created_at)
                    for r in batch.events
                ],
            )

    try:
        yield write
    finally:
        await conn.close()
        await _drop_schema(schema)


# --- Redis --------------------------------------------------------------------------------


async def _redis_client() -> Any:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
    try:
        await client.ping()
    except BaseException:
        await client.aclose()
        raise
    return client


async def _delete_prefix(client: Any, prefix: str) -> None:
    doomed = [name async for name in client.scan_iter(match=f"{prefix}*", count=1000)]
    for start in range(0, len(doomed), 1000):
        await client.delete(*doomed[start : start + 1000])


@asynccontextmanager
async def _redis_store() -> AsyncIterator[StateStore]:
    from watukuy.stores.redis import RedisStore

    client = await _redis_client()
    prefix = f"wk-bench:{uuid.uuid4().hex[:10]}:"
    try:
        store = RedisStore(client, prefix=prefix)
        await store.migrate()
        yield store
    finally:
        await _delete_prefix(client, prefix)
        await client.aclose()


@asynccontextmanager
async def _redis_floor() -> AsyncIterator[Writer]:
    client = await _redis_client()
    prefix = f"wk-floor:{uuid.uuid4().hex[:10]}:"

    async def write(key: PKey, batch: CommitBatch) -> None:
        base = f"{prefix}{{{key.poller}:{key.partition}}}:"
        async with client.pipeline(transaction=True) as pipe:
            state = patch_to_fields(batch.state_patch)  # a hash: only the patched fields
            pipe.hset(base + "state", mapping={k: wkjson.dumps(v) for k, v in state.items()})
            pipe.hset(
                base + "items",
                mapping={
                    r.identity: wkjson.dumps(
                        [r.version, r.hash, r.schema_version, r.payload, r.seen_at]
                    )
                    for r in batch.upserts
                },
            )
            pipe.zadd(base + "ids", dict.fromkeys((r.identity for r in batch.upserts), 0))
            pipe.hset(
                base + "rows",
                mapping={
                    e.event_id: f"{e.sequence}:{e.created_at}:{e.event}" for e in batch.events
                },
            )
            pipe.zadd(base + "outbox", {e.event_id: e.sequence for e in batch.events})
            await pipe.execute()

    try:
        yield write
    finally:
        await _delete_prefix(client, prefix)
        await client.aclose()


def cases() -> list[StoreCase]:
    """PostgresStore and RedisStore, each with its floor."""
    return [
        StoreCase("PostgresStore", _postgres_store, _postgres_floor),
        StoreCase("RedisStore", _redis_store, _redis_floor),
    ]
