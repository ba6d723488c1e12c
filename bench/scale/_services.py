"""The PostgreSQL and Redis servers the harness uses, and a namespace of its own on each.

The servers are the test suite's: ``WATUKUY_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``) and ``WATUKUY_TEST_REDIS_URL`` (default
``redis://127.0.0.1:6379/15``). Every run works in a fresh schema or key prefix and removes
it afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["POSTGRES_URL", "REDIS_URL", "namespace", "reachable", "store_url"]

POSTGRES_URL = os.environ.get(
    "WATUKUY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("WATUKUY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def store_url(kind: str) -> str:
    """The server URL of a store kind (``postgres`` or ``redis``)."""
    return {"postgres": POSTGRES_URL, "redis": REDIS_URL}[kind]


async def reachable(kind: str) -> str | None:
    """``None`` when the server answers, else why not."""
    try:
        if kind == "postgres":
            import psycopg

            conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, connect_timeout=3)
            await conn.close()
        else:
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
            try:
                await client.ping()
            finally:
                await client.aclose()
    except Exception as error:
        return f"{kind} is not reachable: {error}"
    return None


@asynccontextmanager
async def namespace(kind: str) -> AsyncIterator[str]:
    """A fresh PostgreSQL schema name or Redis key prefix, removed on exit."""
    token = uuid.uuid4().hex[:10]
    if kind == "postgres":
        name = f"wk_scale_{token}"
        try:
            yield name
        finally:
            import psycopg

            async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as c:
                await c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        return
    prefix = f"wk-scale:{token}:"
    try:
        yield prefix
    finally:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(REDIS_URL)
        try:
            doomed = [key async for key in client.scan_iter(match=f"{prefix}*", count=1_000)]
            for start in range(0, len(doomed), 1_000):
                await client.delete(*doomed[start : start + 1_000])
        finally:
            await client.aclose()
