"""The timestamp strategy: a ``(value, tie_break)`` keyset over a modification time.

Rules, in the order they matter:

* **The watermark is the server's own value.** After a page, ``value`` becomes the largest
  ``field`` among the kept items exactly as the API wrote it (text stays text, numbers stay
  numbers), never a re-serialised instant.
* **Ties are carried across pages.** When several kept items share that instant and
  ``tie_break`` is configured, the largest tie-break among them is stored; when the page's
  maximum equals the current watermark, only ``tie_break`` grows. Numbers compare
  numerically, text as text (and, should one field mix the two, numbers rank below text).
  Whichever rule the API sorts by, the stored tie-break is one the API already returned,
  so a different ordering can only cause a re-fetch, never a skip.
* **Never backwards.** A page whose maximum is older than the watermark leaves it alone, and
  so does an item whose field is missing or unreadable (that item is still diffed).
* **Lag.** Items newer than ``now - lag`` are not kept: they are fetched again next cycle.
  Because a keyset API returns items oldest first, everything after such an item is newer
  still, so the cycle ends there instead of asking for the same items again.
* **Server watermark.** A text ``Page.cursor`` replaces the watermark (``tie_break`` becomes
  ``None``) and switches lag filtering off for that page.
* **Overlap** only changes what ``fetch`` sees on the first request of a cycle: the
  watermark moved back by ``overlap``, written in the stored value's shape, with
  ``tie_break=None``. Each later request of the cycle continues from the largest
  ``(field, tie_break)`` of the page before it, so the whole window is read once, and from
  the stored watermark as soon as that is further on (or the page did not move forward).
* **The default lookback** (no ``overlap`` given) moves the first request back the same
  way, but only as far as the live lane's memory says is needed (:meth:`lookback_view`,
  :mod:`watukuy.cursor.lookback`): to where the cursor stood a window of wall-clock time
  before the previous cycle, and never more than a window of stamps behind the watermark.

Times are compared exactly: the default rules read nanoseconds as integers; a user ``parse``
yields float milliseconds, compared as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from watukuy.model.errors import ConfigError
from watukuy.model.json import dumps
from watukuy.model.page import InvalidPageError, Page

from ._shared import load_stored, stored_cursor_error
from .config import TieBreakValue, TimestampCursor, TimestampPosition, read_timestamp_ms
from .path import MISSING, resolve_path
from .timeformat import (
    NS_PER_MS,
    TimestampValue,
    format_ns,
    normalise_timestamp,
    parse_ns,
    text_ns,
)

__all__ = ["TimestampStrategy"]

_Instant = int | float
_Stamps = list[tuple[TimestampValue, _Instant] | None]
_Kept = tuple[list[Any], _Stamps, bool]
_Selected = tuple[Page[Any], _Instant, list[Any], _Stamps, bool]
_Largest = tuple[
    Page[Any], _Instant, "tuple[TimestampValue, _Instant] | None", "TieBreakValue | None"
]
_EXPECTED = '{"value": timestamp or null, "tie_break": text, number or null}'


def _tie_value(value: object) -> TieBreakValue | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _tie_rank(value: TieBreakValue) -> tuple[int, Any]:
    return (1, value) if isinstance(value, str) else (0, value)


def _larger_tie(a: TieBreakValue | None, b: TieBreakValue | None) -> TieBreakValue | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if _tie_rank(b) > _tie_rank(a) else a


class TimestampStrategy:
    """Cursor strategy for :class:`~watukuy.cursor.TimestampCursor`.

    Args:
        config: The validated configuration.
    """

    kind: ClassVar[Literal["timestamp"]] = "timestamp"
    full_scan: ClassVar[bool] = False

    def __init__(self, config: TimestampCursor) -> None:
        self.config = config
        # Instants are nanoseconds (int) under the default rules, milliseconds under `parse`.
        self._per_ms = NS_PER_MS if config.parse is None else 1
        # A page's stamps are read several times (lag, the watermark, the next request):
        # for the usual item (a decoded JSON object, a top-level field holding text, the
        # default rules) _stamp goes straight to the cached parse.
        self._key = config.field if config.parse is None and "." not in config.field else None
        tie = config.tie_break
        self._tie_key = tie if tie is not None and "." not in tie else None
        # What the last select() kept and the stamps it read, until advance() takes them:
        # (page, cutoff, kept, stamps, whether an item was too fresh).
        self._selected: _Selected | None = None
        # What the last advance() found largest in a page select() held nothing back from,
        # until next_view() takes it: (page, cutoff, stamp, tie-break).
        self._largest_of: _Largest | None = None

    # -- reading values ------------------------------------------------------------------

    def _instant(self, value: TimestampValue) -> _Instant | None:
        if self.config.parse is None:
            return parse_ns(value)
        return read_timestamp_ms(value, self.config.parse)

    def _stamp(self, item: object) -> tuple[TimestampValue, _Instant] | None:
        key = self._key
        if key is not None and type(item) is dict:
            value = item.get(key)
            if type(value) is str:
                ns = text_ns(value)
                return None if ns is None else (value, ns)
        raw = normalise_timestamp(resolve_path(item, self.config.field))
        if raw is None:
            return None
        instant = self._instant(raw)
        return None if instant is None else (raw, instant)

    def _tie(self, item: object) -> TieBreakValue | None:
        key = self._tie_key
        if key is not None and type(item) is dict:
            value = item.get(key)
            if type(value) is str or type(value) is int:
                return value
        if self.config.tie_break is None:
            return None
        return _tie_value(resolve_path(item, self.config.tie_break))

    def _stored_instant(self, value: TimestampValue) -> _Instant:
        instant = self._instant(value)
        if instant is None:
            raise ConfigError(
                f"the stored watermark {value!r} cannot be read as a timestamp; fix "
                "cursor.parse or move it with reset_cursor()",
                field="cursor",
            )
        return instant

    def _override(self, page: Page[Any]) -> str | None:
        value = page.cursor
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidPageError(
                f"a timestamp poller's Page.cursor must be the server's watermark as text "
                f"(or None), got {value!r}"
            )
        if self._instant(value) is None:
            raise InvalidPageError(
                f"Page.cursor {value!r} cannot be read as a timestamp (field "
                f"{self.config.field!r}); set cursor.parse for this format"
            )
        return value

    def _cutoff(self, now: int) -> _Instant:
        return (now - self.config.lag_ms) * self._per_ms

    def _too_fresh(self, item: object, cutoff: _Instant) -> bool:
        stamp = self._stamp(item)
        return stamp is not None and stamp[1] > cutoff

    # -- the strategy protocol -----------------------------------------------------------

    def initial(self) -> TimestampPosition:
        """The configured ``initial`` value with no tie-break."""
        return TimestampPosition(self.config.initial, None)

    def beginning(self) -> TimestampPosition:
        """No watermark at all, ``(None, None)``, even when ``initial`` is set."""
        return TimestampPosition(None, None)

    def view(self, cursor: TimestampPosition, now: int) -> TimestampPosition:
        """The position of the first request of a cycle: the stored one, or moved back by
        an explicit ``overlap`` (the default lookback is :meth:`lookback_view`)."""
        overlap_ms = self.config.overlap_ms
        if overlap_ms <= 0 or cursor.value is None:
            return cursor
        return TimestampPosition(self._shifted(cursor.value, overlap_ms), None)

    def _shifted(self, value: TimestampValue, ms: int) -> TimestampValue:
        """``value`` moved back by ``ms``, written in its own shape."""
        instant = self._stored_instant(value)
        if self.config.format is not None:
            shifted: TimestampValue = self.config.format(instant - ms)
            return shifted
        try:
            return format_ns(int(instant) - ms * NS_PER_MS, value)
        except ValueError as error:
            raise ConfigError(
                f"moving {value!r} back by {ms}ms leaves the years 1..9999",
                field="cursor.overlap",
            ) from error

    def lookback_view(
        self, cursor: TimestampPosition, window_ms: int, floor: TimestampPosition | None
    ) -> TimestampPosition:
        """The first request of a live cycle under the default lookback.

        Args:
            cursor: The stored cursor.
            window_ms: The lookback window.
            floor: Where the cursor stood ``window_ms`` before the previous cycle that read
                its lookback began (see :func:`~watukuy.cursor.lookback.lookback_floor`);
                ``None`` when nothing is known yet (no lookback then).

        Returns:
            The later of ``floor`` and the watermark moved back by ``window_ms`` (with
            ``tie_break=None``), or ``cursor`` itself when that is not behind it.
        """
        if floor is None or cursor.value is None or window_ms <= 0:
            return cursor
        try:
            shifted: TimestampPosition | None = TimestampPosition(
                self._shifted(cursor.value, window_ms), None
            )
        except ConfigError:
            shifted = None  # out of the years 1..9999: the floor alone bounds it
        start = floor
        if shifted is not None and (
            floor.value is None  # the floor is the very beginning
            or self._ahead(self._position(shifted), self._position(floor))
        ):
            start = shifted
        if start.value is None:
            return cursor
        if not self._ahead(self._position(cursor), self._position(start)):
            return cursor
        return start

    def _position(self, cursor: TimestampPosition) -> tuple[_Instant, TieBreakValue | None]:
        assert cursor.value is not None
        return self._stored_instant(cursor.value), cursor.tie_break

    def next_view(
        self,
        cursor: TimestampPosition,
        request: TimestampPosition,
        page: Page[Any],
        now: int,
    ) -> TimestampPosition:
        """The position of the next request of a cycle: the stored ``cursor``, unless the
        previous request re-read the overlap window and the window goes on past its page.

        Within the window the next request continues from the largest kept
        ``(field, tie_break)`` of ``page``, so a window longer than one page is read through
        instead of its first page again and again.
        """
        if request == cursor or request.value is None or cursor.value is None:
            return cursor
        if self.config.overlap_ms <= 0 and not self.config.lookback:
            # Without overlap every request is the stored cursor (view() leaves it, and a
            # page whose newest kept item is behind it cannot move it back): nothing to read.
            return cursor
        if self._override(page) is not None:
            return cursor
        cutoff = self._cutoff(now)
        known, self._largest_of = self._largest_of, None
        if known is not None and known[0] is page and known[1] <= cutoff:
            best, best_tie = known[2], known[3]  # the page advance() just read whole
        else:
            kept, stamps, _ = self._kept(page, cutoff)
            best, best_tie = self._largest(kept, stamps, cutoff)
        if best is None:
            return cursor
        reached = (best[1], best_tie)
        if not self._ahead(reached, (self._stored_instant(request.value), request.tie_break)):
            return cursor  # the page did not move: continue from the watermark
        if not self._ahead((self._stored_instant(cursor.value), cursor.tie_break), reached):
            return cursor  # the window is behind us
        return TimestampPosition(best[0], best_tie)

    def _largest(
        self,
        items: Sequence[Any],
        stamps: Sequence[tuple[TimestampValue, _Instant] | None],
        cutoff: _Instant,
    ) -> tuple[tuple[TimestampValue, _Instant] | None, TieBreakValue | None]:
        """The largest stamp among ``items`` (``stamps`` holds each one's) not newer than
        ``cutoff``, and the largest tie-break among the items that carry it."""
        best: tuple[TimestampValue, _Instant] | None = None
        best_ns: _Instant = 0
        best_tie: TieBreakValue | None = None
        tie_of = self._tie
        for item, stamp in zip(items, stamps, strict=True):
            if stamp is None:
                continue
            ns = stamp[1]
            if ns > cutoff:
                continue
            if best is None or ns > best_ns:
                best, best_ns, best_tie = stamp, ns, tie_of(item)
            elif ns == best_ns:
                tie = tie_of(item)
                if type(tie) is str and type(best_tie) is str:
                    if tie > best_tie:
                        best_tie = tie
                else:
                    best_tie = _larger_tie(best_tie, tie)
        return best, best_tie

    def _ahead(
        self,
        a: tuple[_Instant, TieBreakValue | None],
        b: tuple[_Instant, TieBreakValue | None],
    ) -> bool:
        """True when keyset position ``a`` is strictly further on than ``b``."""
        if a[0] != b[0]:
            return a[0] > b[0]
        if self.config.tie_break is None or a[1] is None:
            return False
        return b[1] is None or _tie_rank(a[1]) > _tie_rank(b[1])

    def _kept(self, page: Page[Any], cutoff: _Instant) -> _Kept:
        """The items of ``page`` not newer than ``cutoff``, their stamps, and whether any
        item was newer."""
        kept: list[Any] = []
        stamps: list[tuple[TimestampValue, _Instant] | None] = []
        stamp_of = self._stamp
        dropped = False
        for item in page.items:
            stamp = stamp_of(item)
            if stamp is not None and stamp[1] > cutoff:
                dropped = True
                continue
            kept.append(item)
            stamps.append(stamp)
        return kept, stamps, dropped

    def select(self, page: Page[Any], now: int) -> list[Any]:
        """Drop the items newer than ``now - lag``, unless the page carries a watermark."""
        self._selected = self._largest_of = None
        if self._override(page) is not None:
            return list(page.items)
        cutoff = self._cutoff(now)
        kept, stamps, dropped = self._kept(page, cutoff)
        # advance() usually follows with this very list: it reuses the stamps (see there).
        self._selected = (page, cutoff, kept, stamps, dropped)
        return kept

    def advance(
        self,
        cursor: TimestampPosition,
        page: Page[Any],
        kept: Sequence[Any],
        items: Sequence[Any],
        now: int,
    ) -> tuple[TimestampPosition, bool]:
        """Move the keyset to the largest kept ``(field, tie_break)``; never backwards."""
        selected, self._selected = self._selected, None
        self._largest_of = None
        done = page.has_more is not True
        override = self._override(page)
        if override is not None:
            return TimestampPosition(override, None), done
        cutoff = self._cutoff(now)
        if (
            selected is not None
            and selected[0] is page
            and selected[1] == cutoff
            and selected[2] is kept
            and len(kept) == len(selected[3])
        ):
            # ``kept`` is what select() just returned for this page: its stamps are known.
            stamps, dropped = selected[3], selected[4]
        else:
            stamps = [self._stamp(item) for item in kept]
            dropped = any(self._too_fresh(item, cutoff) for item in page.items)
        done = done or dropped
        best, best_tie = self._largest(kept, stamps, cutoff)
        if selected is not None and stamps is selected[3] and not dropped:
            # Every item of the page is in ``kept``: next_view() finds the same largest
            # position for any later cutoff.
            self._largest_of = (page, cutoff, best, best_tie)
        if best is None:
            self._check_fields(page, kept)
            return cursor, done
        if best_tie is None:
            self._check_tie_breaks(kept)
        if cursor.value is None:
            return TimestampPosition(best[0], best_tie), done
        current = self._stored_instant(cursor.value)
        if best[1] > current:
            return TimestampPosition(best[0], best_tie), done
        if best[1] == current and self.config.tie_break is not None:
            tie = _larger_tie(cursor.tie_break, best_tie)
            if tie is not cursor.tie_break:
                return TimestampPosition(cursor.value, tie), done
        return cursor, done

    def _check_fields(self, page: Page[Any], kept: Sequence[Any]) -> None:
        """A page whose items all lack a readable ``field`` cannot move the cursor: the same
        items would be read again every cycle, and nothing after them ever. That is a
        misconfiguration (a wrong field name, an unknown format), so it fails the page."""
        if not kept or len(kept) < len(page.items):
            return  # empty, or items held back by lag: they do have a readable field
        field = self.config.field
        values = [resolve_path(item, field) for item in kept]
        present = [value for value in values if value is not None and value is not MISSING]
        if not present:
            raise ConfigError(
                f"none of the {len(kept)} item(s) of the page has {field!r}, so the cursor "
                "cannot move; check TimestampCursor(field=...) against the API's items",
                field="cursor.field",
            )
        raise ConfigError(
            f"none of the {len(kept)} item(s) of the page has a readable timestamp at "
            f"{field!r} (first value: {present[0]!r}), so the cursor cannot move; set "
            "cursor.parse for this format",
            field="cursor.field",
        )

    def _check_tie_breaks(self, kept: Sequence[Any]) -> None:
        """A configured ``tie_break`` that no item of the page has is a misconfiguration:
        ties on one instant would then be read again page after page."""
        tie_break = self.config.tie_break
        if tie_break is None or not kept:
            return
        if any(self._tie(item) is not None for item in kept):
            return
        values = [resolve_path(item, tie_break) for item in kept]
        present = [value for value in values if value is not None and value is not MISSING]
        shown = f" (first value: {present[0]!r})" if present else ""
        raise ConfigError(
            f"none of the {len(kept)} item(s) of the page has a text or number at "
            f"{tie_break!r}{shown}; check TimestampCursor(tie_break=...) against the API's "
            "items",
            field="cursor.tie_break",
        )

    def serialize(self, cursor: TimestampPosition) -> str:
        """``{"value": ..., "tie_break": ...}`` as JSON text."""
        return dumps(self.describe(cursor))

    def deserialize(self, text: str) -> TimestampPosition:
        """Read what :meth:`serialize` wrote.

        Raises:
            ConfigError: The text is not a stored timestamp cursor.
        """
        data = load_stored(self.kind, text, _EXPECTED)
        if not isinstance(data, dict) or set(data) != {"value", "tie_break"}:
            raise stored_cursor_error(self.kind, text, _EXPECTED)
        value, tie = data["value"], data["tie_break"]
        if value is not None and _tie_value(value) is None:
            raise stored_cursor_error(self.kind, text, _EXPECTED)
        if tie is not None and _tie_value(tie) is None:
            raise stored_cursor_error(self.kind, text, _EXPECTED)
        return TimestampPosition(value, tie)

    def from_raw(
        self, raw: str | int | float | None, *, field: str = "cursor"
    ) -> TimestampPosition:
        """The position at the API's own timestamp ``raw`` (``None``: the initial position).

        Raises:
            ConfigError: ``raw`` cannot be read as a timestamp; the message names ``field``.
        """
        if raw is None:
            return self.initial()
        if isinstance(raw, bool) or self._instant(raw) is None:
            raise ConfigError(
                f"cannot read {raw!r} as a timestamp; give it in the API's own format",
                field=field,
            )
        return TimestampPosition(raw, None)

    def lag_ms(self, cursor: TimestampPosition, now: int) -> int | None:
        """How far the watermark is behind ``now``; ``None`` before the first item."""
        if cursor.value is None:
            return None
        ms = read_timestamp_ms(cursor.value, self.config.parse)
        return None if ms is None else round(now - ms)

    def held_until(self, page: Page[Any], now: int) -> int | None:
        """When the first item of ``page`` that :meth:`select` held back (newer than
        ``now - lag``, or stamped ahead of our clock) becomes deliverable, in epoch ms of
        our clock; ``None`` when nothing was held."""
        if page.cursor is not None:
            return None  # a server watermark switches lag filtering off for the page
        cutoff = self._cutoff(now)
        earliest: _Instant | None = None
        for item in page.items:
            stamp = self._stamp(item)
            if (
                stamp is not None
                and stamp[1] > cutoff
                and (earliest is None or stamp[1] < earliest)
            ):
                earliest = stamp[1]
        if earliest is None:
            return None
        return math.ceil(earliest / self._per_ms) + self.config.lag_ms

    def stalled(self, request: TimestampPosition, page: Page[Any]) -> str | None:
        """Why a page that says there is more cannot move the cursor, when the reason is a
        group of equal timestamps larger than the page: every item carries the very
        timestamp the request started from, and without a ``tie_break`` the next request
        can only ask for that timestamp again. ``None`` for any other page."""
        if self.config.tie_break is not None or request.value is None or not page.items:
            return None
        if page.has_more is not True or page.cursor is not None:
            return None
        at = self._stored_instant(request.value)
        stamps = [self._stamp(item) for item in page.items]
        if any(stamp is None or stamp[1] != at for stamp in stamps):
            return None
        size = len(page.items)
        return (
            f"all {size} item(s) of the page share {self.config.field}={request.value!r}, "
            f"the timestamp the request started from: a group of at least {size} equal "
            f"timestamps does not fit in a page of {size}, and without a tie_break the "
            "cursor cannot get past it. Raise the page size above the largest group of equal "
            "timestamps, or set TimestampCursor(tie_break=...) to a field the API can "
            "filter on (items at the same timestamp with a greater id)"
        )

    def lateness_ms(
        self, item: object, watermark: TimestampPosition, since: TimestampPosition | None
    ) -> int | None:
        """How far ``item`` is behind ``watermark`` (watermark minus its stamp, in ms), or
        ``None`` when it is not behind it: its stamp is later, or equal without a
        ``tie_break`` (the request at the watermark returns that instant whole), or at it
        with a greater tie-break, or unreadable. Items stamped before ``since`` (where the
        live lane started) are never behind: the lane never read past them.
        """
        if watermark.value is None:
            return None
        stamp = self._stamp(item)
        if stamp is None:
            return None
        if (
            since is not None
            and since.value is not None
            and stamp[1] < self._stored_instant(since.value)
        ):
            return None
        at = self._stored_instant(watermark.value)
        if stamp[1] == at:
            tie = self._tie(item)
            if self.config.tie_break is None or tie is None or watermark.tie_break is None:
                return None
            if _tie_rank(tie) > _tie_rank(watermark.tie_break):
                return None
            return 0
        if stamp[1] > at:
            return None
        return int((at - stamp[1]) // self._per_ms)

    def reached(self, cursor: TimestampPosition, target: TimestampPosition) -> bool:
        """True once the keyset has read everything up to ``target``, its instant included:
        past the target's instant, or at it with a tie-break at or past the target's (the
        items tied on that instant may span several pages)."""
        if target.value is None:
            return True
        if cursor.value is None:
            return False
        at, goal = self._stored_instant(cursor.value), self._stored_instant(target.value)
        if at != goal:
            return at > goal
        if self.config.tie_break is None or target.tie_break is None or cursor.tie_break is None:
            return False
        return _tie_rank(cursor.tie_break) >= _tie_rank(target.tie_break)

    def describe(self, cursor: TimestampPosition) -> dict[str, Any]:
        """``{"value": ..., "tie_break": ...}``."""
        return {"value": cursor.value, "tie_break": cursor.tie_break}
