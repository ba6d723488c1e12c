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
    from .diff.patch import JsonPatch, apply_patch, json_patch
    from .engine import Engine
    from .inbox import Inbox
    from .model.durations import Duration, format_duration, parse_duration
    from .model.errors import (
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
    from .model.events import Event, EventType
    from .model.http_api import FetchHttp, FetchResponse
    from .model.logs import child_logger, silent_logger
    from .model.options import (
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
    from .model.page import Page
    from .model.partition import Partition
    from .model.redact import Redaction, serialize_error
    from .model.rows import HeldDeletes, Lane, RateLimitInfo
    from .runtime.consumers import Subscription
    from .runtime.context import FetchContext, HandlerContext
    from .runtime.filters import EventFilter, changed, created, deleted, updated
    from .runtime.operations import InspectReport, PollerInspect
    from .runtime.poller import JsonObject, PollerDefinition, define_poller
    from .runtime.results import (
        EngineStatus,
        LeaseOptions,
        ReplayResult,
        TickPollResult,
        TickResult,
    )
    from .stores import MemoryStore, SqliteStore, store_from_url
    from .stores.postgres import PostgresStore
    from .stores.redis import RedisBudgetStore, RedisStore

    __version__: str
    """The installed version of watukuy, read from the package."""

# Every public name is imported on first use (PEP 562): ``import watukuy`` itself loads
# nothing else, so a command or a script that touches a few names pays for those only.
# ``from watukuy import X``, ``watukuy.X`` and ``from watukuy import *`` all work as with
# eager imports; type checkers read the imports above.
_EXPORTS: dict[str, str] = {
    "SystemClock": "._system",
    "SystemRandom": "._system",
    "Subscription": ".runtime.consumers",
    "FetchContext": ".runtime.context",
    "HandlerContext": ".runtime.context",
    "EventFilter": ".runtime.filters",
    "changed": ".runtime.filters",
    "created": ".runtime.filters",
    "deleted": ".runtime.filters",
    "updated": ".runtime.filters",
    "JsonPatch": ".diff.patch",
    "apply_patch": ".diff.patch",
    "json_patch": ".diff.patch",
    "Duration": ".model.durations",
    "format_duration": ".model.durations",
    "parse_duration": ".model.durations",
    "BudgetTimeoutError": ".model.errors",
    "ConfigError": ".model.errors",
    "HandlerError": ".model.errors",
    "HttpError": ".model.errors",
    "LeaseLostError": ".model.errors",
    "ReplayUnavailableError": ".model.errors",
    "StoreError": ".model.errors",
    "ValidationError": ".model.errors",
    "WatukuyError": ".model.errors",
    "Event": ".model.events",
    "EventType": ".model.events",
    "FetchHttp": ".model.http_api",
    "FetchResponse": ".model.http_api",
    "InspectReport": ".runtime.operations",
    "PollerInspect": ".runtime.operations",
    "Backoff": ".model.options",
    "Budget": ".model.options",
    "Circuit": ".model.options",
    "Deletes": ".model.options",
    "Delivery": ".model.options",
    "EventIds": ".model.options",
    "EventLog": ".model.options",
    "Poison": ".model.options",
    "Reconcile": ".model.options",
    "Retry": ".model.options",
    "Schedule": ".model.options",
    "Page": ".model.page",
    "JsonObject": ".runtime.poller",
    "Partition": ".model.partition",
    "PollerDefinition": ".runtime.poller",
    "define_poller": ".runtime.poller",
    "Redaction": ".model.redact",
    "serialize_error": ".model.redact",
    "child_logger": ".model.logs",
    "silent_logger": ".model.logs",
    "EngineStatus": ".runtime.results",
    "LeaseOptions": ".runtime.results",
    "ReplayResult": ".runtime.results",
    "TickPollResult": ".runtime.results",
    "TickResult": ".runtime.results",
    "HeldDeletes": ".model.rows",
    "Lane": ".model.rows",
    "RateLimitInfo": ".model.rows",
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
    "Inbox": ".inbox",
    "MemoryStore": ".stores",
    "SqliteStore": ".stores",
    "store_from_url": ".stores",
    "PostgresStore": ".stores.postgres",
    "RedisStore": ".stores.redis",
    "RedisBudgetStore": ".stores.redis",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from ._version import __version__

        value: Any = __version__
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
    "EventFilter",
    "EventIds",
    "EventLog",
    "EventType",
    "FetchContext",
    "FetchHttp",
    "FetchResponse",
    "HandlerContext",
    "HandlerError",
    "HeldDeletes",
    "HttpError",
    "Inbox",
    "InspectReport",
    "JsonObject",
    "JsonPatch",
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
    "apply_patch",
    "changed",
    "child_logger",
    "created",
    "define_poller",
    "deleted",
    "format_duration",
    "json_patch",
    "parse_duration",
    "serialize_error",
    "silent_logger",
    "store_from_url",
    "updated",
]
