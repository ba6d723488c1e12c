"""The vocabulary every part of watukuy speaks: errors, JSON, rows, events, options and ports.

This is the ground floor. It imports nothing else of watukuy and does no I/O: the runtime,
the building blocks (cursors, diff, scheduler, budgets, validators) and the adapters
(stores, HTTP) all stand on it. ``StateStore`` and ``BudgetStore`` in :mod:`watukuy.model.ports`
are the interfaces a new store implements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .durations import Duration, format_duration, parse_duration
    from .errors import (
        BudgetTimeoutError,
        ConfigError,
        HandlerError,
        HttpError,
        LeaseLostError,
        NotModifiedError,
        ReplayUnavailableError,
        SerializedError,
        StoreError,
        ValidationError,
        WatukuyError,
    )
    from .events import Event, EventType, event_from_json, event_to_json, iso_time
    from .http_api import FetchHttp, FetchResponse, QueryParams, QueryScalar, QueryValue
    from .page import InvalidPageError, Page, coerce_page
    from .ports import BudgetPolicy, BudgetStore, Clock, Random, StateStore
    from .redact import serialize_error
    from .rows import (
        BackfillState,
        CircuitState,
        CommitBatch,
        EventCounts,
        ItemMark,
        ItemRow,
        Lane,
        Lease,
        ListingLink,
        LoggedEvent,
        OutboxRow,
        ParkedKind,
        ParkedRow,
        PKey,
        PollerState,
        PollSummary,
        RateLimitInfo,
        ScheduleState,
        StatePatch,
        StoreCapabilities,
        Tombstone,
        Validator,
        apply_patch,
        empty_poller_state,
    )

# Names are imported on first use (PEP 562), as in ``watukuy`` itself: a module that needs
# ``watukuy.model.errors`` (the command line's ``--help``, an error path) does not load the
# rows, events and ports with it. Type checkers read the imports above.
_EXPORTS: dict[str, str] = {
    "Duration": ".durations",
    "format_duration": ".durations",
    "parse_duration": ".durations",
    "BudgetTimeoutError": ".errors",
    "ConfigError": ".errors",
    "HandlerError": ".errors",
    "HttpError": ".errors",
    "LeaseLostError": ".errors",
    "NotModifiedError": ".errors",
    "ReplayUnavailableError": ".errors",
    "SerializedError": ".errors",
    "StoreError": ".errors",
    "ValidationError": ".errors",
    "WatukuyError": ".errors",
    "Event": ".events",
    "EventType": ".events",
    "event_from_json": ".events",
    "event_to_json": ".events",
    "iso_time": ".events",
    "FetchHttp": ".http_api",
    "FetchResponse": ".http_api",
    "QueryParams": ".http_api",
    "QueryScalar": ".http_api",
    "QueryValue": ".http_api",
    "InvalidPageError": ".page",
    "Page": ".page",
    "coerce_page": ".page",
    "BudgetPolicy": ".ports",
    "BudgetStore": ".ports",
    "Clock": ".ports",
    "Random": ".ports",
    "StateStore": ".ports",
    "serialize_error": ".redact",
    "BackfillState": ".rows",
    "CircuitState": ".rows",
    "CommitBatch": ".rows",
    "EventCounts": ".rows",
    "ItemMark": ".rows",
    "ItemRow": ".rows",
    "ListingLink": ".rows",
    "Lane": ".rows",
    "Lease": ".rows",
    "LoggedEvent": ".rows",
    "OutboxRow": ".rows",
    "ParkedKind": ".rows",
    "ParkedRow": ".rows",
    "PKey": ".rows",
    "PollerState": ".rows",
    "PollSummary": ".rows",
    "RateLimitInfo": ".rows",
    "ScheduleState": ".rows",
    "StatePatch": ".rows",
    "StoreCapabilities": ".rows",
    "Tombstone": ".rows",
    "Validator": ".rows",
    "apply_patch": ".rows",
    "empty_poller_state": ".rows",
}


# The submodules themselves, reachable as attributes as when this package imported them all.
_SUBMODULES = frozenset(
    {
        "durations",
        "errors",
        "events",
        "http_api",
        "http_port",
        "json",
        "logs",
        "options",
        "page",
        "partition",
        "ports",
        "records",
        "redact",
        "rows",
    }
)


def __getattr__(name: str) -> Any:
    import importlib

    module_name = _EXPORTS.get(name)
    if module_name is None:
        if name in _SUBMODULES:
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'watukuy.model' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "BackfillState",
    "BudgetPolicy",
    "BudgetStore",
    "BudgetTimeoutError",
    "CircuitState",
    "Clock",
    "CommitBatch",
    "ConfigError",
    "Duration",
    "Event",
    "EventCounts",
    "EventType",
    "FetchHttp",
    "FetchResponse",
    "HandlerError",
    "HttpError",
    "InvalidPageError",
    "ItemMark",
    "ItemRow",
    "Lane",
    "Lease",
    "LeaseLostError",
    "ListingLink",
    "LoggedEvent",
    "NotModifiedError",
    "OutboxRow",
    "PKey",
    "Page",
    "ParkedKind",
    "ParkedRow",
    "PollSummary",
    "PollerState",
    "QueryParams",
    "QueryScalar",
    "QueryValue",
    "Random",
    "RateLimitInfo",
    "ReplayUnavailableError",
    "ScheduleState",
    "SerializedError",
    "StatePatch",
    "StateStore",
    "StoreCapabilities",
    "StoreError",
    "Tombstone",
    "ValidationError",
    "Validator",
    "WatukuyError",
    "apply_patch",
    "coerce_page",
    "empty_poller_state",
    "event_from_json",
    "event_to_json",
    "format_duration",
    "iso_time",
    "parse_duration",
    "serialize_error",
]
