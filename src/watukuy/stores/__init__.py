"""The stores: where watukuy keeps leases, cursors, snapshots, outbox, parked rows and log.

* :class:`MemoryStore`: in process memory; tests, demos, prototypes.
* :class:`SqliteStore`: one SQLite file; one host, one or several processes.
* ``PostgresStore``: many instances against one database (extra ``postgres``).
* ``RedisStore`` and ``RedisBudgetStore``: Redis, and rate budgets shared across
  processes (extra ``redis``).

Each store's module is imported on first access, so ``import watukuy.stores`` never needs
psycopg or redis-py, and a process that uses one store does not load the others.
:func:`store_from_url` picks a store from a URL.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, unquote

from watukuy.model.errors import ConfigError
from watukuy.model.ports import StateStore
from watukuy.model.redact import redact_url

if TYPE_CHECKING:
    from watukuy.stores.memory import MemoryKeySnapshot, MemoryStore
    from watukuy.stores.postgres import PostgresStore
    from watukuy.stores.redis import RedisBudgetStore, RedisStore
    from watukuy.stores.sqlite import SqliteStore, sqlite_migrations

__all__ = [
    "MemoryKeySnapshot",
    "MemoryStore",
    "PostgresStore",
    "RedisBudgetStore",
    "RedisStore",
    "SqliteStore",
    "sqlite_migrations",
    "store_from_url",
]

_LAZY: Final = {
    "MemoryKeySnapshot": "watukuy.stores.memory",
    "MemoryStore": "watukuy.stores.memory",
    "SqliteStore": "watukuy.stores.sqlite",
    "sqlite_migrations": "watukuy.stores.sqlite",
    "PostgresStore": "watukuy.stores.postgres",
    "RedisStore": "watukuy.stores.redis",
    "RedisBudgetStore": "watukuy.stores.redis",
}

_SQLITE_OPTIONS: Final = ("table_prefix", "busy_timeout")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _redact_url(url: str) -> str:
    """``url`` with its password and sensitive parameters replaced by ``***``."""
    return redact_url(url)


def store_from_url(url: str) -> StateStore:
    """Build a store from a URL.

    ============================================  ====================================
    URL                                           store
    ============================================  ====================================
    ``memory://``                                 ``MemoryStore()``
    ``sqlite:///relative/path.db``                ``SqliteStore("relative/path.db")``
    ``sqlite:////absolute/path.db``               ``SqliteStore("/absolute/path.db")``
    ``sqlite://:memory:``                         ``SqliteStore(":memory:")``
    ``postgresql://...`` or ``postgres://...``    ``PostgresStore(url)``
    ``redis://...`` or ``rediss://...``           ``RedisStore.from_url(url)``
    ============================================  ====================================

    SQLite URLs accept ``?table_prefix=...&busy_timeout=...``; PostgreSQL URLs accept
    ``?schema=...&table_prefix=...`` and the timeouts ``PostgresStore`` takes, next to
    libpq's own parameters. Nothing is connected until the store is first used.

    Raises:
        ConfigError: An unknown scheme or a malformed URL; the message names ``store`` and
            shows the URL with any password hidden.
        ImportError: The backend's extra is not installed.
    """
    if not isinstance(url, str):
        raise ConfigError(f"expected a store URL, got {url!r}", field="store")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme == "memory":
        if rest.strip("/"):
            raise ConfigError(f"memory:// takes no path or options, got {url!r}", field="store")
        from watukuy.stores.memory import MemoryStore

        return MemoryStore()
    if sep and scheme == "sqlite":
        return _sqlite_from_url(url, rest)
    if sep and scheme in ("postgresql", "postgres"):
        from watukuy.stores.postgres import PostgresStore

        return PostgresStore(url)
    if sep and scheme in ("redis", "rediss"):
        from watukuy.stores.redis import RedisStore

        return RedisStore.from_url(url)
    raise ConfigError(
        "expected a URL starting with memory://, sqlite://, postgresql://, postgres://, "
        f"redis:// or rediss://, got {_redact_url(url)!r}",
        field="store",
    )


def _sqlite_from_url(url: str, rest: str) -> SqliteStore:
    location, _, query = rest.partition("?")
    options: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if name not in _SQLITE_OPTIONS:
            raise ConfigError(
                f"unknown SQLite option {name!r} in {url!r} "
                f"(expected {', '.join(_SQLITE_OPTIONS)})",
                field="store",
            )
        options[name] = value
    if location in (":memory:", "/:memory:"):
        path = ":memory:"
    elif location.startswith("/") and len(location) > 1:
        # sqlite:///relative.db -> "relative.db"; sqlite:////abs.db -> "/abs.db"
        path = unquote(location[1:])
    else:
        raise ConfigError(
            "expected sqlite:///relative.db, sqlite:////absolute/path.db or "
            f"sqlite://:memory:, got {url!r}",
            field="store",
        )
    from watukuy.stores.sqlite import SqliteStore

    return SqliteStore(path, **options)
