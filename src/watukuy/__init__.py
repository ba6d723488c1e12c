"""watukuy: webhooks for APIs that don't have them.

Declare how to fetch a page and how to identify an item; watukuy owns cursors, pagination,
scheduling, diffing, dedup, rate budgets, retries, leases and durability, and hands your
handler a correct stream of ``created`` / ``updated`` / ``deleted`` events::

    import watukuy as wk

    orders = wk.define_poller(
        name="orders",
        identity=lambda o: o["id"],
        cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
        fetch=fetch_orders,
    )
    engine = wk.Engine(store=wk.SqliteStore("watukuy.db"), pollers=[orders])

    @engine.on("orders")
    async def on_order(event: wk.Event, ctx: wk.HandlerContext) -> None: ...

    engine.run()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._system import SystemClock, SystemRandom
from .core.consumers import Subscription
from .core.context import FetchContext, HandlerContext
from .core.durations import Duration, format_duration, parse_duration
from .core.errors import (
    BudgetTimeoutError,
    ConfigError,
    HandlerError,
    HttpError,
    LeaseLostError,
    ReplayUnavailableError,
    StoreError,
    ValidationError,
    WatukuyError,
)
from .core.events import Event, EventType
from .core.operations import InspectReport, PollerInspect
from .core.options import (
    Backoff,
    Budget,
    Circuit,
    Deletes,
    Delivery,
    EventIds,
    EventLog,
    Poison,
    Reconcile,
    Retry,
    Schedule,
)
from .core.page import Page
from .core.poller import JsonObject, Partition, PollerDefinition, define_poller
from .core.redact import Redaction
from .core.results import EngineStatus, LeaseOptions, ReplayResult, TickPollResult, TickResult
from .core.rows import HeldDeletes, Lane, RateLimitInfo
from .cursor import (
    AdvanceContext,
    CursorConfig,
    CursorOf,
    CustomCursor,
    PageCursor,
    PagePosition,
    SnapshotDiff,
    TimestampCursor,
    TimestampPosition,
    TokenCursor,
    TokenPosition,
)
from .engine import Engine
from .stores import MemoryStore, SqliteStore, store_from_url

if TYPE_CHECKING:
    from .stores.postgres import PostgresStore
    from .stores.redis import RedisBudgetStore, RedisStore

    __version__: str

_LAZY = {
    "PostgresStore": ("watukuy.stores.postgres", "PostgresStore"),
    "RedisStore": ("watukuy.stores.redis", "RedisStore"),
    "RedisBudgetStore": ("watukuy.stores.redis", "RedisBudgetStore"),
}


def _version() -> str:
    # importlib.metadata costs tens of milliseconds to import; only a caller of
    # ``watukuy.__version__`` pays for it.
    from importlib import metadata

    try:
        return metadata.version("watukuy")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        version = _version()
        globals()["__version__"] = version
        return version
    # The Postgres and Redis stores need optional drivers; import them on first use only.
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'watukuy' has no attribute {name!r}")


__all__ = [
    "AdvanceContext",
    "Backoff",
    "Budget",
    "BudgetTimeoutError",
    "Circuit",
    "ConfigError",
    "CursorConfig",
    "CursorOf",
    "CustomCursor",
    "Deletes",
    "Delivery",
    "Duration",
    "Engine",
    "EngineStatus",
    "Event",
    "EventIds",
    "EventLog",
    "EventType",
    "FetchContext",
    "HandlerContext",
    "HandlerError",
    "HeldDeletes",
    "HttpError",
    "InspectReport",
    "JsonObject",
    "Lane",
    "LeaseLostError",
    "LeaseOptions",
    "MemoryStore",
    "Page",
    "PageCursor",
    "PagePosition",
    "Partition",
    "Poison",
    "PollerDefinition",
    "PollerInspect",
    "PostgresStore",
    "RateLimitInfo",
    "Reconcile",
    "Redaction",
    "RedisBudgetStore",
    "RedisStore",
    "ReplayResult",
    "ReplayUnavailableError",
    "Retry",
    "Schedule",
    "SnapshotDiff",
    "SqliteStore",
    "StoreError",
    "Subscription",
    "SystemClock",
    "SystemRandom",
    "TickPollResult",
    "TickResult",
    "TimestampCursor",
    "TimestampPosition",
    "TokenCursor",
    "TokenPosition",
    "ValidationError",
    "WatukuyError",
    "__version__",
    "define_poller",
    "format_duration",
    "parse_duration",
    "store_from_url",
]
