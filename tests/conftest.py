"""Shared fixtures: the real PostgreSQL and Redis servers that store tests run against.

The servers come from ``WATUKUY_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``) and ``WATUKUY_TEST_REDIS_URL`` (default
``redis://127.0.0.1:6379/15``). A server that cannot be reached makes the tests that need it
skip with the reason, except under ``CI=true``, where they fail: CI must never pass by
skipping. Each test gets its own PostgreSQL schema or Redis key prefix, removed afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, NoReturn

import hypothesis  # noqa: F401  (see below)
import pytest

# hypothesis is imported here, when pytest loads this file. A session that never uses it
# would have hypothesis's pytest plugin import it at the very end, from deep inside the
# summary hooks; pytest's assertion rewriting of it there met a bug of CPython 3.11.7's
# ast module ("AST constructor recursion depth mismatch") and ended the session with an
# internal error, however its tests went.

POSTGRES_URL = os.environ.get(
    "WATUKUY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("WATUKUY_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: a missing service fails the run)", pytrace=False)
    pytest.skip(reason)


def _unique(stem: str) -> str:
    return f"{stem}{uuid.uuid4().hex[:12]}"


# --- PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The PostgreSQL URL, once the server answered (else skip, or fail under CI)."""
    try:
        import psycopg
    except ImportError:
        _unavailable("psycopg is not installed: pip install 'watukuy[postgres]'")
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        _unavailable(f"PostgreSQL is not reachable at WATUKUY_TEST_POSTGRES_URL: {error}")
    return POSTGRES_URL


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A schema name of this test's own; dropped (with everything in it) afterwards."""
    import psycopg

    name = _unique("wk_test_")
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
async def postgres_store(postgres_url: str, pg_schema: str) -> AsyncIterator[Any]:
    """A migrated ``PostgresStore`` in this test's schema, closed afterwards."""
    from watukuy.stores.postgres import PostgresStore

    store = PostgresStore(postgres_url, schema=pg_schema)
    await store.migrate()
    yield store
    await store.close()


# --- Redis --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The Redis URL, once the server answered (else skip, or fail under CI)."""
    try:
        import redis
    except ImportError:
        _unavailable("redis-py is not installed: pip install 'watukuy[redis]'")
    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3, socket_timeout=3)
        with client:
            client.ping()
    except (redis.RedisError, OSError) as error:
        _unavailable(f"Redis is not reachable at WATUKUY_TEST_REDIS_URL: {error}")
    return REDIS_URL


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test's own; every key under it is deleted afterwards."""
    import redis

    prefix = _unique("wk-test:") + ":"
    yield prefix
    with redis.Redis.from_url(redis_url) as client:
        doomed = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if doomed:
            client.delete(*doomed)


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Any]:
    """A ``redis.asyncio`` client for this test, closed afterwards."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def redis_store(redis_client: Any, redis_prefix: str) -> AsyncIterator[Any]:
    """A ``RedisStore`` on this test's prefix."""
    from watukuy.stores.redis import RedisStore

    store = RedisStore(redis_client, prefix=redis_prefix)
    await store.migrate()
    yield store
    await store.close()


# --- NATS (JetStream) and AMQP (RabbitMQ) ---------------------------------------------------

NATS_URL = os.environ.get("WATUKUY_TEST_NATS_URL", "nats://127.0.0.1:4222")
AMQP_URL = os.environ.get("WATUKUY_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


def _greeting(url: str, default_port: int, hello: bytes = b"") -> bytes:
    """The first bytes a server sends after a TCP connect (and ``hello``), or OSError."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection(
        (parts.hostname or "127.0.0.1", parts.port or default_port), timeout=3
    ) as sock:
        if hello:
            sock.sendall(hello)
        return sock.recv(64)


@pytest.fixture(scope="session")
def nats_url() -> str:
    """The NATS URL, once the server answered (else skip, or fail under CI)."""
    try:
        import nats  # noqa: F401
    except ImportError:
        _unavailable("nats-py is not installed: pip install 'watukuy[sinks]'")
    try:
        greeting = _greeting(NATS_URL, 4222)
    except OSError as error:
        _unavailable(f"NATS is not reachable at WATUKUY_TEST_NATS_URL: {error}")
    if not greeting.startswith(b"INFO"):
        _unavailable(f"no NATS server at WATUKUY_TEST_NATS_URL: it said {greeting[:20]!r}")
    return NATS_URL


@pytest.fixture
async def nats_client(nats_url: str) -> AsyncIterator[Any]:
    """A connected ``nats`` client for this test, closed afterwards."""
    import nats

    client = await nats.connect(nats_url, connect_timeout=3, max_reconnect_attempts=0)
    yield client
    await client.close()


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The AMQP URL, once a RabbitMQ server answered (else skip, or fail under CI)."""
    try:
        import aio_pika  # noqa: F401
    except ImportError:
        _unavailable("aio-pika is not installed: pip install 'watukuy[sinks]'")
    try:
        # AMQP 0-9-1 protocol header; a broker answers with a Connection.Start method frame.
        greeting = _greeting(AMQP_URL, 5672, b"AMQP\x00\x00\x09\x01")
    except OSError as error:
        _unavailable(f"RabbitMQ is not reachable at WATUKUY_TEST_AMQP_URL: {error}")
    if greeting[:1] != b"\x01":
        _unavailable(f"no AMQP 0-9-1 broker at WATUKUY_TEST_AMQP_URL: it said {greeting[:8]!r}")
    return AMQP_URL


@pytest.fixture
async def amqp_connection(amqp_url: str) -> AsyncIterator[Any]:
    """An ``aio_pika`` connection for this test, closed afterwards."""
    import aio_pika

    connection = await aio_pika.connect(amqp_url, timeout=5)
    yield connection
    await connection.close()
