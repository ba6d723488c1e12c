"""Names that end up in SQL identifiers or Redis key names are matched whole: a trailing
newline (which ``$`` lets through) is refused like any other stray character."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy.model.errors import ConfigError
from watukuy.stores.postgres import PostgresStore
from watukuy.stores.sqlite import SqliteStore, sqlite_migrations


async def _fetch(cursor: Any) -> list[Any]:
    return []


@pytest.mark.parametrize("name", ["orders\n", "orders\n\n", "\norders"])
def test_a_poller_name_with_a_newline_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="name: must match"):
        wk.define_poller(
            name=name, fetch=_fetch, identity=lambda item: item["id"], cursor=wk.SnapshotDiff()
        )


@pytest.mark.parametrize("prefix", ["wk_\n", "\n"])
def test_a_sqlite_prefix_with_a_newline_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match="table_prefix"):
        SqliteStore(":memory:", table_prefix=prefix)
    with pytest.raises(ConfigError, match="table_prefix"):
        sqlite_migrations(prefix)


@pytest.mark.parametrize("field", ["schema", "table_prefix"])
def test_a_postgres_identifier_with_a_newline_is_refused(field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        PostgresStore("postgresql://x/y", **{field: "watukuy\n"})


def test_names_without_the_newline_still_pass() -> None:
    wk.define_poller(
        name="orders", fetch=_fetch, identity=lambda item: item["id"], cursor=wk.SnapshotDiff()
    )
    SqliteStore(":memory:", table_prefix="wk_")
    PostgresStore("postgresql://x/y", schema="s", table_prefix="wk_")
