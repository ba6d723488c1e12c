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

if TYPE_CHECKING:
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
    from .stores.postgres import PostgresStore
    from .stores.redis import RedisBudgetStore, RedisStore

    __version__: str

# Every public name is imported on first use (PEP 562): ``import watukuy`` itself loads
# nothing else, so a command or a script that touches a few names pays for those only.
# ``from watukuy import X``, ``watukuy.X`` and ``from watukuy import *`` all work as with
# eager imports; type checkers read the imports above.
_EXPORTS: dict[str, str] = {
    "SystemClock": "._system",
    "SystemRandom": "._system",
    "Subscription": ".core.consumers",
    "FetchContext": ".core.context",
    "HandlerContext": ".core.context",
    "Duration": ".core.durations",
    "format_duration": ".core.durations",
    "parse_duration": ".core.durations",
    "BudgetTimeoutError": ".core.errors",
    "ConfigError": ".core.errors",
    "HandlerError": ".core.errors",
    "HttpError": ".core.errors",
    "LeaseLostError": ".core.errors",
    "ReplayUnavailableError": ".core.errors",
    "StoreError": ".core.errors",
    "ValidationError": ".core.errors",
    "WatukuyError": ".core.errors",
    "Event": ".core.events",
    "EventType": ".core.events",
    "InspectReport": ".core.operations",
    "PollerInspect": ".core.operations",
    "Backoff": ".core.options",
    "Budget": ".core.options",
    "Circuit": ".core.options",
    "Deletes": ".core.options",
    "Delivery": ".core.options",
    "EventIds": ".core.options",
    "EventLog": ".core.options",
    "Poison": ".core.options",
    "Reconcile": ".core.options",
    "Retry": ".core.options",
    "Schedule": ".core.options",
    "Page": ".core.page",
    "JsonObject": ".core.poller",
    "Partition": ".core.poller",
    "PollerDefinition": ".core.poller",
    "define_poller": ".core.poller",
    "Redaction": ".core.redact",
    "EngineStatus": ".core.results",
    "LeaseOptions": ".core.results",
    "ReplayResult": ".core.results",
    "TickPollResult": ".core.results",
    "TickResult": ".core.results",
    "HeldDeletes": ".core.rows",
    "Lane": ".core.rows",
    "RateLimitInfo": ".core.rows",
    "AdvanceContext": ".cursor",
    "CursorConfig": ".cursor",
    "CursorOf": ".cursor",
    "CustomCursor": ".cursor",
    "PageCursor": ".cursor",
    "PagePosition": ".cursor",
    "SnapshotDiff": ".cursor",
    "TimestampCursor": ".cursor",
    "TimestampPosition": ".cursor",
    "TokenCursor": ".cursor",
    "TokenPosition": ".cursor",
    "Engine": ".engine",
    "MemoryStore": ".stores",
    "SqliteStore": ".stores",
    "store_from_url": ".stores",
    "PostgresStore": ".stores.postgres",
    "RedisStore": ".stores.redis",
    "RedisBudgetStore": ".stores.redis",
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
        value: Any = _version()
    else:
        module_name = _EXPORTS.get(name)
        if module_name is None:
            raise AttributeError(f"module 'watukuy' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
