"""The default lookback of a ``TimestampCursor``: how far back the first request of a live
cycle re-reads, and the memory that decides it.

Rows commit out of stamp order: a transaction stamps ``updated_at`` when it starts and
becomes visible when it commits, seconds later, after rows with later stamps were already
read. A row can only have been missed if it became visible after the live lane read past
its stamp. So if every row becomes visible within ``window`` of its stamp, the lane only
needs to re-read what it passed during the last ``window`` of wall-clock time: the
position it held ``window`` before the previous cycle began is safe. The engine keeps a few
``(cycle end, cursor then)`` marks (:class:`~watukuy.model.late.Lookback`) to know it.

Reasoning it out: say a row stamped ``s`` became visible at ``c``, and the lane had read
past it at ``r`` (``r >= s``: nothing stamped ``s`` exists before ``s``, whatever the two
clocks say, since both readings are the vendor's stamps seen through our clock at a constant
offset). Let ``t1`` be the first cycle that starts at or after ``c``, and ``t0`` the one
before it (that read its window). ``t0 < c <= s + window <= r + window``, so
``t0 - window < r``: the cursor held at ``t0 - window`` is still before the row, and ``t1``
re-reads it.

On an idle vendor the lookback therefore stops costing anything once ``window`` has passed
since the cursor last moved (the first request is the stored cursor again), and a group of
equal timestamps larger than a page is re-read for one window, not every cycle. The lane
also never re-reads more than ``window`` of stamps behind the watermark (the classic
``overlap`` rule), so catching up a long history does not re-read the previous cycles'
pages.

The window itself adapts: :data:`LOOKBACK_FLOOR_MS` at first, then twice the latest
lateness observed, up to :data:`LOOKBACK_CAP_MS`.
"""

from __future__ import annotations

from typing import Final

from watukuy.model.late import Lookback

__all__ = [
    "LOOKBACK_CAP_MS",
    "LOOKBACK_FLOOR_MS",
    "lookback_floor",
    "lookback_window_ms",
    "remember_cycle",
]

LOOKBACK_FLOOR_MS: Final = 10_000
"""The default window before any lateness is observed: 10 s, more than twice what a
database-backed API with transactions held up to 3 s showed (p99 4.0 s, max 4.3 s)."""

LOOKBACK_CAP_MS: Final = 120_000
"""The widest the default window grows: on a busy vendor every cycle re-reads about a
window's worth of writes, so an outlier must not make that unbounded."""

_MARKS: Final = 16


def lookback_window_ms(observed_max_ms: int) -> int:
    """The default window: twice the latest lateness observed, within the floor and cap.

    Args:
        observed_max_ms: The largest lateness found so far (ms), ``0`` when none.
    """
    return min(LOOKBACK_CAP_MS, max(LOOKBACK_FLOOR_MS, 2 * observed_max_ms))


def lookback_floor(lookback: Lookback, window_ms: int) -> str | None:
    """The serialised cursor the live lane held ``window_ms`` before the start of its latest
    cycle that read its lookback: everything after it was passed less than a window before
    that cycle began. ``since`` when no mark is that old; ``None`` when nothing is recorded
    yet (no lookback)."""
    if lookback.started is None:
        return None
    limit = lookback.started - window_ms
    found = lookback.since
    for at, cursor in lookback.marks:
        if at > limit:
            break
        found = cursor
    return found


def remember_cycle(
    lookback: Lookback, *, began: str, started_at: int | None, ended_at: int, cursor: str
) -> Lookback:
    """The memory after a live cycle that did not fail.

    Args:
        lookback: The memory before the cycle.
        began: The serialised cursor the cycle began with (where the lane's history
            starts, when nothing is recorded yet).
        started_at: When the cycle began, if it read its whole lookback window (``None``
            when a deadline cut it inside the window: the next cycle then looks back as
            far as this one did).
        ended_at: When the cycle ended.
        cursor: The serialised cursor it ended with.

    A mark ``(ended_at, cursor)`` is added only when the cursor moved since the last one (a
    mark equal to the one before it tells nothing new). Marks no lookup can need any more
    are dropped, keeping the newest one at least :data:`LOOKBACK_CAP_MS` old; past a few,
    the one closest to its predecessor goes. Dropping a mark only makes a later lookup
    start earlier: never a skipped row, at worst a longer re-read.
    """
    since = lookback.since if lookback.since is not None else began
    started = started_at if started_at is not None else lookback.started
    marks = list(lookback.marks)
    last = marks[-1][1] if marks else since
    if cursor != last:
        marks.append((ended_at, cursor))
    if started is not None:
        limit = started - LOOKBACK_CAP_MS
        first = 0
        for index, (at, _) in enumerate(marks):
            if at <= limit:
                first = index
        del marks[:first]
    while len(marks) > _MARKS:
        gaps = [(marks[i][0] - marks[i - 1][0], i) for i in range(1, len(marks) - 1)]
        del marks[min(gaps)[1]]
    return Lookback(since=since, started=started, marks=tuple(marks))
