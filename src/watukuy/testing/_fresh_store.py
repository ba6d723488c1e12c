"""An empty store of a given kind for one harness run, removed afterwards.

The chaos and conformance command lines both run seeds on every store kind; each run gets a
store of its own (a temporary SQLite file, a PostgreSQL schema, a Redis key prefix) so that
runs never see each other's rows, and the store is dropped when the run ends. The servers
come from ``WATUKUY_TEST_POSTGRES_URL`` and ``WATUKUY_TEST_REDIS_URL``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import AsyncIterator
from typing import Any, Final

from watukuy.model.ports import StateStore

POSTGRES_URL: Final = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL: Final = "redis://127.0.0.1:6379/15"


@contextlib.asynccontextmanager
async def fresh_store(kind: str, stem: str) -> AsyncIterator[StateStore | None]:
    """An empty store of ``kind`` (``None`` for memory: the harness makes its own).

    Args:
        kind: ``"memory"``, ``"sqlite"``, ``"postgres"`` or ``"redis"``.
        stem: Names the run's file, schema or key prefix (``"chaos"``, ``"conf"``).
    """
    if kind == "memory":
        yield None
    elif kind == "sqlite":
        from watukuy.stores.sqlite import SqliteStore

        with tempfile.TemporaryDirectory(prefix=f"watukuy-{stem}-") as folder:
            store = SqliteStore(os.path.join(folder, f"{stem}.db"))
            try:
                yield store
            finally:
                await store.close()
    elif kind == "postgres":
        import psycopg

        from watukuy.stores.postgres import PostgresStore

        url = os.environ.get("WATUKUY_TEST_POSTGRES_URL", POSTGRES_URL)
        schema = f"wk_{stem}_{uuid.uuid4().hex[:12]}"
        pg = PostgresStore(url, schema=schema)
        try:
            yield pg
        finally:
            await pg.close()
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        import redis.asyncio

        from watukuy.stores.redis import RedisStore

        client: Any = redis.asyncio.Redis.from_url(
            os.environ.get("WATUKUY_TEST_REDIS_URL", REDIS_URL)
        )
        prefix = f"wk-{stem}:{uuid.uuid4().hex[:12]}:"
        try:
            yield RedisStore(client, prefix=prefix)
        finally:
            doomed = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
            if doomed:
                await client.delete(*doomed)
            await client.aclose()
