"""Cursor strategies: how a poller remembers what it already saw.

Pick the configuration from what the API offers:

==========================  ==============================================  =================
Configuration               The API has                                     ``ctx.cursor``
==========================  ==============================================  =================
:class:`TimestampCursor`    an ``updated_since`` filter                     TimestampPosition
:class:`TokenCursor`        an opaque ``next`` / ``sync_token``             TokenPosition
:class:`PageCursor`         page numbers                                    PagePosition
:class:`SnapshotDiff`       nothing usable (list everything, find deletes)  ``None``
:class:`CustomCursor`       anything else (offsets, GraphQL end cursors)    your own value
==========================  ==============================================  =================

:func:`make_strategy` turns a configuration into a :class:`CursorStrategy`: pure functions
the runner calls to decide what ``fetch`` sees, which items of a page count, and where the
cursor goes next. Nothing here performs I/O or reads a clock.
"""

from __future__ import annotations

from .config import (
    AdvanceContext,
    AdvanceResult,
    CursorConfig,
    CursorOf,
    CustomCursor,
    PageCursor,
    PagePosition,
    SnapshotDiff,
    TieBreakValue,
    TimestampCursor,
    TimestampPosition,
    TokenCursor,
    TokenPosition,
)
from .custom import CustomStrategy
from .path import MISSING, resolve_path
from .simple import PageStrategy, SnapshotDiffStrategy, TokenStrategy
from .strategy import CursorStrategy, StrategyKind, make_strategy, start_over
from .timeformat import TimestampValue, format_timestamp, parse_timestamp
from .timestamp import TimestampStrategy

__all__ = [
    "MISSING",
    "AdvanceContext",
    "AdvanceResult",
    "CursorConfig",
    "CursorOf",
    "CursorStrategy",
    "CustomCursor",
    "CustomStrategy",
    "PageCursor",
    "PagePosition",
    "PageStrategy",
    "SnapshotDiff",
    "SnapshotDiffStrategy",
    "StrategyKind",
    "TieBreakValue",
    "TimestampCursor",
    "TimestampPosition",
    "TimestampStrategy",
    "TimestampValue",
    "TokenCursor",
    "TokenPosition",
    "TokenStrategy",
    "format_timestamp",
    "make_strategy",
    "parse_timestamp",
    "resolve_path",
    "start_over",
]
