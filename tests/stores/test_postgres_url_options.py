"""PostgresStore: ``?schema=`` and ``?table_prefix=`` in a URL, and ``close_pool=``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from watukuy.model.errors import ConfigError
from watukuy.stores import store_from_url
from watukuy.stores.postgres import PostgresStore
from watukuy.testing.store_contract import KEY, T0, TTL

pytestmark = pytest.mark.postgres


def test_schema_and_prefix_come_from_the_url_and_win_over_the_arguments() -> None:
    store = PostgresStore(
        "postgresql://u@127.0.0.1:1/db?schema=sync&application_name=app&table_prefix=t_",
        schema="ignored",
        table_prefix="ignored_",
    )
    assert repr(store) == "PostgresStore(schema='sync', table_prefix='t_')"
    # libpq sees the rest of the query string, not watukuy's options.
    assert "application_name=app" in store.pool.conninfo
    assert "schema" not in store.pool.conninfo
    assert "table_prefix" not in store.pool.conninfo


def test_an_empty_prefix_in_the_url_is_allowed() -> None:
    store = store_from_url("postgres://u@127.0.0.1:1/db?table_prefix=")
    assert repr(store) == "PostgresStore(schema='public', table_prefix='')"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("schema=bad-name", "schema: expected letters"),
        ("table_prefix=x;drop", "table_prefix: expected letters"),
    ],
)
def test_a_bad_name_in_the_url_names_its_field(query: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        store_from_url(f"postgresql://u@127.0.0.1:1/db?{query}")


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_close_pool_takes_a_bool(value: Any) -> None:
    with pytest.raises(ConfigError, match="close_pool: expected True or False"):
        PostgresStore("postgresql://u@127.0.0.1:1/db", close_pool=value)


async def _tables(url: str, schema: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
            " ORDER BY table_name",
            (schema,),
        )
        return [row[0] for row in await cur.fetchall()]


async def test_a_store_from_a_url_uses_its_schema_and_prefix(
    postgres_url: str, pg_schema: str
) -> None:
    store = store_from_url(f"{postgres_url}?schema={pg_schema}&table_prefix=app_")
    await store.migrate()
    await store.close()
    tables = await _tables(postgres_url, pg_schema)
    assert "app_pollers" in tables
    assert all(name.startswith("app_") for name in tables)


async def test_the_cli_reaches_a_store_in_its_own_schema(postgres_url: str, pg_schema: str) -> None:
    url = f"{postgres_url}?schema={pg_schema}&table_prefix=cli_"
    store = PostgresStore(url)
    lease = await store.acquire_lease(KEY, "node-a", TTL, T0)  # writes the key's row
    assert lease is not None
    await store.close()

    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "watukuy", "inspect", "--store", url, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(p["poller"], p["partition"]) for p in report["pollers"]] == [
        (KEY.poller, KEY.partition)
    ]
    # The default schema and prefix hold nothing of it.
    assert not any(name.startswith("cli_") for name in await _tables(postgres_url, "public"))


async def test_close_pool_true_closes_a_pool_you_passed(postgres_url: str, pg_schema: str) -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(postgres_url, min_size=1, open=False)
    await pool.open()
    store = PostgresStore(pool, schema=pg_schema, close_pool=True)
    await store.migrate()
    await store.close()
    assert pool.closed is True


async def test_by_default_a_pool_you_passed_stays_open(postgres_url: str, pg_schema: str) -> None:
    async with AsyncConnectionPool(postgres_url, min_size=1, open=False) as pool:
        store = PostgresStore(pool, schema=pg_schema)
        await store.migrate()
        await store.close()
        assert pool.closed is False
