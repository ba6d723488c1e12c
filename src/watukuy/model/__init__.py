"""The vocabulary every part of watukuy speaks: errors, JSON, rows, events, options and ports.

This is the ground floor. It imports nothing else of watukuy and does no I/O: the runtime,
the building blocks (cursors, diff, scheduler, budgets, validators) and the adapters
(stores, HTTP) all stand on it. ``StateStore`` and ``BudgetStore`` in :mod:`watukuy.model.ports`
are the interfaces a new store implements.
"""

from __future__ import annotations

from .durations import Duration, format_duration, parse_duration
from .errors import (
    BudgetTimeoutError,
    ConfigError,
    HandlerError,
    HttpError,
    LeaseLostError,
    ReplayUnavailableError,
    SerializedError,
    StoreError,
    ValidationError,
    WatukuyError,
)
from .events import Event, EventType, event_from_json, event_to_json, iso_time
from .page import InvalidPageError, Page, coerce_page
from .ports import BudgetPolicy, BudgetStore, Clock, Random, StateStore
from .redact import serialize_error
from .rows import (
    BackfillState,
    CircuitState,
    CommitBatch,
    EventCounts,
    ItemRow,
    Lane,
    Lease,
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
    "HandlerError",
    "HttpError",
    "InvalidPageError",
    "ItemRow",
    "Lane",
    "Lease",
    "LeaseLostError",
    "LoggedEvent",
    "OutboxRow",
    "PKey",
    "Page",
    "ParkedKind",
    "ParkedRow",
    "PollSummary",
    "PollerState",
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
