"""The public surface is a contract: this list changes only on purpose."""

from __future__ import annotations

import ast
import inspect

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
}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(wk.__all__) == EXPECTED


def test_the_lazy_exports_and_the_type_checkers_imports_name_the_same_modules() -> None:
    # watukuy/__init__.py lists each public name three times, because type checkers read
    # only literal imports and a literal __all__: in __all__, in the lazy _EXPORTS map
    # (name -> module, loaded on first use) and under `if TYPE_CHECKING:`. They must agree.
    tree = ast.parse(inspect.getsource(wk))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )  # fmt: skip
    checked = {
        alias.name: "." * node.level + (node.module or "")
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    exports: dict[str, str] = wk.__dict__["_EXPORTS"]
    assert checked == exports
    assert {*exports, "__version__"} == set(wk.__all__)  # __version__ is read on first use


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
