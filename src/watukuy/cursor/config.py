"""The cursor configurations users pass to ``define_poller(cursor=...)``, and the positions
``fetch`` receives as ``ctx.cursor``.

Each configuration is a frozen dataclass that checks itself when it is built, so a typo in a
field path or a timestamp that cannot be read fails at import time with a
:class:`~watukuy.model.errors.ConfigError` naming the option (``cursor.field``,
``cursor.initial``, ...) and the value it received.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.json import dumps
from watukuy.model.records import dataclass

from .path import check_path
from .timeformat import TimestampValue, normalise_timestamp, parse_ns

__all__ = [
    "AdvanceContext",
    "AdvanceResult",
    "CursorConfig",
    "CursorOf",
    "CustomCursor",
    "PageCursor",
    "PagePosition",
    "SnapshotDiff",
    "TieBreakValue",
    "TimestampCursor",
    "TimestampPosition",
    "TokenCursor",
    "TokenPosition",
    "read_timestamp_ms",
]

C = TypeVar("C")
P_co = TypeVar("P_co", covariant=True)

TieBreakValue: TypeAlias = str | int | float
"""A tie-break value as the API writes it (an id, usually)."""


def _set(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def read_timestamp_ms(value: object, parse: Callable[[Any], float] | None) -> float | None:
    """Read ``value`` as epoch milliseconds with ``parse`` (or the default rules).

    Returns ``None`` instead of raising when the value is not a timestamp, including when a
    user ``parse`` raises or returns something that is not a finite number.
    """
    normal = normalise_timestamp(value)
    if normal is None:
        return None
    if parse is None:
        ns = parse_ns(normal)
        return None if ns is None else ns / 1_000_000
    try:
        ms = parse(normal)
    except Exception:
        return None
    if isinstance(ms, bool) or not isinstance(ms, int | float) or not math.isfinite(ms):
        return None
    return float(ms)


# --- positions: what ``fetch`` sees as ``ctx.cursor`` -------------------------------------


@dataclass(frozen=True, slots=True)
class TimestampPosition:
    """Where a timestamp poller stands: the composite keyset ``(value, tie_break)``.

    Your ``fetch`` should ask for items with ``field >= value`` and, when ``tie_break`` is
    not ``None``, only those at exactly ``value`` whose tie-break is greater than it.

    Attributes:
        value: The API's own timestamp (text or number, exactly as it sent it), or ``None``
            to start from the beginning.
        tie_break: The largest tie-break value seen at ``value``, or ``None``.
    """

    value: TimestampValue | None = None
    tie_break: TieBreakValue | None = None


@dataclass(frozen=True, slots=True)
class TokenPosition:
    """Where a token poller stands.

    Attributes:
        value: The opaque token to send, or ``None`` for the first request.
    """

    value: str | None = None


@dataclass(frozen=True, slots=True)
class PagePosition:
    """Where a page poller stands.

    Attributes:
        page: The page number to request.
    """

    page: int = 1


# --- configurations -------------------------------------------------------------------


class CursorOf(Protocol[P_co]):
    """A cursor configuration whose ``fetch`` is handed ``FetchContext[P_co]``.

    Only type checkers see this: ``define_poller`` ties the position type of ``cursor`` to
    the context type of ``fetch``, so a ``fetch(ctx: FetchContext[TimestampPosition])``
    given a ``TokenCursor`` is a type error. ``TimestampCursor`` is a
    ``CursorOf[TimestampPosition]``, ``TokenCursor`` a ``CursorOf[TokenPosition]``,
    ``PageCursor`` a ``CursorOf[PagePosition]``, ``SnapshotDiff`` a ``CursorOf[None]`` and
    ``CustomCursor[C]`` a ``CursorOf[C]``.
    """

    def _position_(self) -> P_co: ...


@dataclass(frozen=True, slots=True)
class TimestampCursor:
    """Follow an ``updated_since`` style filter with a ``(value, tie_break)`` watermark.

    After each page the watermark becomes the largest ``field`` among the page's items,
    stored exactly as the API wrote it; when several items share that instant and
    ``tie_break`` is set, the largest tie-break among them is stored too, so a run of equal
    timestamps across a page boundary is neither skipped nor fetched forever.

    Args:
        field: Dotted path of the modification time in each item (``"meta.updated_at"``);
            keys on dicts, attributes on objects.
        tie_break: Dotted path of a second, unique sort key (usually the id), or ``None``
            when the API cannot filter by one (then rely on ``overlap``).
        initial: The API's own timestamp to start from, or ``None`` for the beginning.
        lag: Items newer than ``now - lag`` are left for the next cycle, so rows stamped
            before a slow transaction commits are not jumped over.
        overlap: ``fetch`` is handed the watermark moved back by this much on the first
            request of each cycle (the stored watermark does not move), to re-scan a window
            when the API cannot filter by ``tie_break`` or clocks disagree. ``None`` (the
            default) is the automatic lookback: the first request re-reads what the cursor
            passed during the last ``window`` of wall-clock time, ``window`` being 10 s,
            widened up to 2 minutes when late commits come near it (see
            https://watukuy.readthedocs.io/en/latest/cursors/#late-commits-the-default-lookback).
            ``0`` turns every lookback off.
        parse: ``(raw) -> epoch milliseconds`` for formats the default rules (ISO 8601,
            10-digit epoch seconds, 13-digit epoch milliseconds) do not cover. Must be given
            together with ``format``.
        format: ``(epoch milliseconds) -> raw``, the inverse of ``parse``; only used to
            write the overlapped value handed to ``fetch``. Must be given together with
            ``parse``.

    Raises:
        ConfigError: A path is empty, a duration is invalid, only one of ``parse`` and
            ``format`` is given, or ``initial`` cannot be read as a timestamp.
    """

    if TYPE_CHECKING:

        def _position_(self) -> TimestampPosition: ...

    field: str
    tie_break: str | None = None
    initial: TimestampValue | None = None
    lag: Duration = 0
    overlap: Duration | None = None
    parse: Callable[[Any], float] | None = None
    format: Callable[[float], Any] | None = None
    lag_ms: int = dataclasses.field(init=False, repr=False, compare=False)
    overlap_ms: int = dataclasses.field(init=False, repr=False, compare=False)
    """The explicit ``overlap`` in ms (``0`` when none is given)."""
    lookback: bool = dataclasses.field(init=False, repr=False, compare=False)
    """True when no ``overlap`` is given: the automatic lookback is on."""

    def __post_init__(self) -> None:
        problem = check_path(self.field)
        if problem:
            raise ConfigError(problem, field="cursor.field")
        if self.tie_break is not None:
            problem = check_path(self.tie_break)
            if problem:
                raise ConfigError(problem, field="cursor.tie_break")
        _set(self, "lag_ms", parse_duration(self.lag, "cursor.lag"))
        _set(self, "lookback", self.overlap is None)
        overlap = 0 if self.overlap is None else self.overlap
        _set(self, "overlap_ms", parse_duration(overlap, "cursor.overlap"))
        for name in ("parse", "format"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigError(f"expected a callable, got {value!r}", field=f"cursor.{name}")
        if (self.parse is None) != (self.format is None):
            missing = "format" if self.format is None else "parse"
            raise ConfigError(
                "parse and format must be given together (format writes the values parse "
                "reads, for the overlap and lookback windows)",
                field=f"cursor.{missing}",
            )
        if self.initial is not None:
            if isinstance(self.initial, bool) or not isinstance(self.initial, str | int | float):
                raise ConfigError(
                    f"expected the API's own timestamp (text or number) or None, "
                    f"got {self.initial!r}",
                    field="cursor.initial",
                )
            if read_timestamp_ms(self.initial, self.parse) is None:
                raise ConfigError(
                    f"cannot read {self.initial!r} as a timestamp; give it in the API's own "
                    "format, or set cursor.parse and cursor.format",
                    field="cursor.initial",
                )


@dataclass(frozen=True, slots=True)
class TokenCursor:
    """Follow an opaque ``next`` / ``cursor`` / ``sync_token`` handed out by the API.

    Return the API's next token as ``Page.cursor``. A non-empty token continues the cycle;
    a token together with ``has_more=False`` is kept for the next cycle (the "sync token"
    pattern of change feeds). No token (``None`` or ``""``) ends the cycle: with
    ``has_more=False`` the last page's own token is kept, so the next cycle asks what came
    after it; without, the next cycle starts again from ``initial``. ``Page(gone=True)``
    (an expired token) starts over from ``initial`` too.

    Args:
        initial: The token of the very first request, usually ``None``.
    """

    if TYPE_CHECKING:

        def _position_(self) -> TokenPosition: ...

    initial: str | None = None

    def __post_init__(self) -> None:
        if self.initial is not None and (not isinstance(self.initial, str) or not self.initial):
            raise ConfigError(
                f"expected a non-empty token or None, got {self.initial!r}",
                field="cursor.initial",
            )


@dataclass(frozen=True, slots=True)
class PageCursor:
    """Walk numbered pages: ``page + 1`` while the page says ``has_more=True``, then start
    over from ``initial`` on the next cycle.

    Args:
        initial: The first page number (``0`` or ``1`` for most APIs).
    """

    if TYPE_CHECKING:

        def _position_(self) -> PagePosition: ...

    initial: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.initial, bool) or not isinstance(self.initial, int) or self.initial < 0:
            raise ConfigError(
                f"expected an integer >= 0, got {self.initial!r}", field="cursor.initial"
            )


@dataclass(frozen=True, slots=True)
class SnapshotDiff:
    """No cursor at all: every cycle lists everything (paged with ``ctx.page``) and the
    listing is compared with the stored snapshot, which also finds deletes."""

    if TYPE_CHECKING:

        def _position_(self) -> None: ...


@dataclass(frozen=True, slots=True)
class AdvanceContext(Generic[C]):
    """What a :class:`CustomCursor` ``advance`` function is given after each page.

    Attributes:
        cursor: The cursor the page was fetched with.
        items: The validated items of the page.
        page_cursor: ``Page.cursor`` as ``fetch`` returned it.
        has_more: ``Page.has_more`` as ``fetch`` returned it (``None`` when it said nothing).
    """

    cursor: C
    items: Sequence[Any]
    page_cursor: Any
    has_more: bool | None


AdvanceResult: TypeAlias = tuple[C, bool] | Mapping[str, Any]
"""``(next_cursor, done)``, or for convenience a mapping with ``cursor`` and ``done`` keys."""


@dataclass(frozen=True, slots=True)
class CustomCursor(Generic[C]):
    """Your own cursor type and your own rule for moving it.

    The cursor's type comes from ``initial`` and flows into ``advance`` and into
    ``ctx.cursor`` in ``fetch``::

        def advance(ctx: wk.AdvanceContext[dict[str, int]]) -> tuple[dict[str, int], bool]:
            if not ctx.items:
                return ctx.cursor, True
            return {"after_id": ctx.items[-1].id}, len(ctx.items) < 100

        cursor = wk.CustomCursor(initial={"after_id": 0}, advance=advance)

    Args:
        initial: The cursor of the very first request.
        advance: ``(AdvanceContext) -> (next_cursor, done)``; called after every page but
            a gone one (``Page(gone=True)``), after which the cursor goes back to
            ``initial``.
        serialize: ``(cursor) -> str`` for cursors that are not plain JSON data. Must be
            given together with ``deserialize``. Default: JSON.
        deserialize: The inverse of ``serialize``; also reads the raw strings given to
            ``reset_cursor(to=...)`` and ``backfill(from_=..., to=...)``. Default: JSON.

    Raises:
        ConfigError: ``advance`` is not callable, only one of ``serialize`` and
            ``deserialize`` is given, or ``initial`` has no JSON form while no
            ``serialize`` is given.
    """

    if TYPE_CHECKING:

        def _position_(self) -> C: ...

    initial: C
    advance: Callable[[AdvanceContext[C]], AdvanceResult[C]]
    serialize: Callable[[C], str] | None = None
    deserialize: Callable[[str], C] | None = None

    def __post_init__(self) -> None:
        for name in ("advance", "serialize", "deserialize"):
            value = getattr(self, name)
            if (value is not None or name == "advance") and not callable(value):
                raise ConfigError(f"expected a callable, got {value!r}", field=f"cursor.{name}")
        if (self.serialize is None) != (self.deserialize is None):
            missing = "deserialize" if self.deserialize is None else "serialize"
            raise ConfigError(
                "serialize and deserialize must be given together", field=f"cursor.{missing}"
            )
        if self.serialize is None:
            try:
                dumps(self.initial)
            except TypeError as error:
                raise ConfigError(
                    f"{self.initial!r} has no JSON form ({error}); give serialize and "
                    "deserialize for this cursor type",
                    field="cursor.initial",
                ) from error


CursorConfig: TypeAlias = (
    TimestampCursor | TokenCursor | PageCursor | SnapshotDiff | CustomCursor[Any]
)
"""Any of the five cursor strategies."""
