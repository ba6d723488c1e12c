"""The public surface is a contract: this list changes only on purpose."""

from __future__ import annotations

import watukuy as wk

EXPECTED = {
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
}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(wk.__all__) == EXPECTED


def test_every_listed_name_resolves() -> None:
    for name in wk.__all__:
        assert getattr(wk, name) is not None, name


def test_every_error_has_a_stable_code_and_one_root() -> None:
    codes = {
        wk.ConfigError: "CONFIG",
        wk.LeaseLostError: "LEASE_LOST",
        wk.HttpError: "HTTP",
        wk.StoreError: "STORE",
        wk.ValidationError: "VALIDATION",
        wk.HandlerError: "HANDLER",
        wk.ReplayUnavailableError: "REPLAY_UNAVAILABLE",
        wk.BudgetTimeoutError: "BUDGET_TIMEOUT",
    }
    for cls, code in codes.items():
        assert issubclass(cls, wk.WatukuyError)
        assert cls.default_code == code


def test_the_version_comes_from_package_metadata() -> None:
    from importlib.metadata import version

    assert wk.__version__ == version("watukuy")
