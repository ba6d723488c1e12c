"""Late arrivals: what a key's re-reads found that its live lane should already have seen,
and where the live lane stood at the start of its recent cycles (the default lookback's
memory).

A *late arrival* is a version that a re-read (the live lane's lookback window, a reconcile
pass, a backfill) turned into an event although its timestamp was behind the watermark the
live lane had already passed: the row became visible after the poller had read past its
stamp, usually because its transaction committed seconds after it was stamped. How late it
was is the watermark minus the item's stamp. A *live-lane miss* is a change a reconcile
found that the live lane's next complete cycle, started after it, did not return either
(see :class:`Following`): that is how a cursor that cannot look back (a token, a vendor's
position) shows it is skipping.

Both records are plain data persisted in :class:`~watukuy.model.rows.PollerState` (JSON,
one field each), updated in the same transaction as the events they describe.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from .records import dataclass

__all__ = [
    "FOLLOW_LIMIT",
    "LATENESS_BOUNDS_MS",
    "Following",
    "LateArrivals",
    "LateWarning",
    "Lookback",
    "add_lateness",
    "follow_findings",
    "judge_following",
    "late_from_json",
    "late_report",
    "late_to_json",
    "lookback_from_json",
    "lookback_to_json",
    "mark_returned",
    "p99_ms",
]

LATENESS_BOUNDS_MS: Final[tuple[int, ...]] = (
    250,
    500,
    1_000,
    2_000,
    3_000,
    4_000,
    5_000,
    7_500,
    10_000,
    15_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
)
"""Upper bounds (inclusive, ms) of the lateness histogram's buckets; one more bucket holds
everything later than the last bound."""

FOLLOW_LIMIT: Final = 100
"""Reconcile findings a key follows at a time (the rest of a large finding goes unjudged)."""

LateWarning = Literal["near", "beyond"]
"""The last warning logged: lateness came within reach of the lookback window (``near``),
or exceeded it / a reconcile found live-lane misses (``beyond``)."""


@dataclass(frozen=True, slots=True)
class Following:
    """A change a reconcile pass found, waiting for the live lane's next complete cycle.

    The reconcile saw ``identity`` at ``version`` changed at ``found_at``. If the first
    complete live cycle that starts after ``found_at`` (together with the cycles cut short
    just before it) returns the identity, the two lanes only raced; if it does not, the
    live lane missed the change: it counts in :attr:`LateArrivals.missed`.

    Attributes:
        identity: The item's identity.
        version: Its version (or content hash) as the reconcile saw it.
        found_at: When the reconcile committed it (epoch ms).
        returned: A live cycle started after ``found_at`` has returned the identity.
    """

    identity: str
    version: str
    found_at: int
    returned: bool = False


@dataclass(frozen=True, slots=True)
class LateArrivals:
    """Late arrivals and live-lane misses of one key, since it was first polled.

    Attributes:
        count: Late arrivals (versions found by a re-read behind the live watermark).
        max_ms: The latest of them: watermark minus stamp, in ms.
        buckets: How many fell in each bucket of :data:`LATENESS_BOUNDS_MS` (one count per
            bound, then one for later ones); empty before the first.
        beyond: Late arrivals later than the lookback window in force when they were found
            (the live lane could not have caught them).
        missed: Changes a reconcile found that the live lane's next complete cycle did not
            return (see :class:`Following`).
        by_lane: Late arrivals by the lane whose re-read found them.
        last_at: When the last late arrival or miss was found (epoch ms).
        lost_at: When the last one the live lane could not have caught was found: an
            arrival later than the lookback window, or a miss (epoch ms).
        window_ms: The lookback window in force when the figures last changed (``None``:
            not a timestamp cursor, or nothing found yet).
        following: Reconcile findings waiting for the live lane's next complete cycle.
        warned_at: When the last WARNING about lateness was logged (epoch ms).
        warned: Which one it was.
    """

    count: int = 0
    max_ms: int = 0
    buckets: tuple[int, ...] = ()
    beyond: int = 0
    missed: int = 0
    by_lane: Mapping[str, int] = dataclasses.field(default_factory=dict)
    last_at: int | None = None
    lost_at: int | None = None
    window_ms: int | None = None
    following: tuple[Following, ...] = ()
    warned_at: int | None = None
    warned: LateWarning | None = None


@dataclass(frozen=True, slots=True)
class Lookback:
    """Where the live lane's cursor stood at the start of its recent cycles.

    The default lookback of a ``TimestampCursor`` re-reads what the live lane passed during
    the last window of wall-clock time (see ``watukuy.cursor.lookback``): a row can only
    have been missed if it became visible after the lane read past its stamp, and a row
    that commits at most a window after its stamp is visible by then.

    Attributes:
        since: The serialised live cursor of the first cycle recorded: nothing before it
            was ever passed by the live lane (``None`` until the first cycle).
        started: When the latest live cycle that read its lookback window began (epoch ms).
        marks: ``(cycle end, serialised live cursor then)`` pairs, oldest first, each with
            a cursor different from the one before it.
    """

    since: str | None = None
    started: int | None = None
    marks: tuple[tuple[int, str], ...] = ()


# --- rules ------------------------------------------------------------------------------


def _bucket(lateness_ms: int) -> int:
    return bisect.bisect_left(LATENESS_BOUNDS_MS, lateness_ms)


def add_lateness(
    late: LateArrivals,
    lateness_ms: Sequence[int],
    *,
    lane: str,
    window_ms: int | None,
    now: int,
) -> LateArrivals:
    """``late`` with the late arrivals a lane just found added.

    Args:
        late: The figures so far.
        lateness_ms: How late each new arrival was (watermark minus stamp, ms, >= 0).
        lane: The lane whose re-read found them.
        window_ms: The lookback window in force (``None``: the strategy cannot look back,
            so every late arrival is beyond it).
        now: The time of the commit (epoch ms).

    Returns:
        The new figures (``late`` itself when ``lateness_ms`` is empty).
    """
    if not lateness_ms:
        return late
    buckets = list(late.buckets) or [0] * (len(LATENESS_BOUNDS_MS) + 1)
    beyond = late.beyond
    for value in lateness_ms:
        buckets[_bucket(value)] += 1
        if window_ms is None or value > window_ms:
            beyond += 1
    by_lane = dict(late.by_lane)
    by_lane[lane] = by_lane.get(lane, 0) + len(lateness_ms)
    return dataclasses.replace(
        late,
        count=late.count + len(lateness_ms),
        max_ms=max(late.max_ms, *lateness_ms),
        buckets=tuple(buckets),
        beyond=beyond,
        by_lane=by_lane,
        last_at=now,
        lost_at=now if beyond > late.beyond else late.lost_at,
        window_ms=window_ms,
    )


def p99_ms(late: LateArrivals) -> int | None:
    """The 99th percentile of lateness, read from the histogram: the upper bound of the
    bucket that holds it, or the maximum when that is smaller (``None`` before any)."""
    if not late.count or not late.buckets:
        return None
    rank = -(-late.count * 99 // 100)  # ceil: the p99 is the rank-th smallest
    seen = 0
    for index, count in enumerate(late.buckets):
        seen += count
        if seen >= rank:
            if index >= len(LATENESS_BOUNDS_MS):
                return late.max_ms
            return min(LATENESS_BOUNDS_MS[index], late.max_ms)
    return late.max_ms


def follow_findings(
    late: LateArrivals, findings: Sequence[tuple[str, str]], now: int
) -> LateArrivals:
    """``late`` following the ``(identity, version)`` changes a reconcile page found, up to
    :data:`FOLLOW_LIMIT` at a time; an identity already followed takes the new version."""
    if not findings:
        return late
    followed = {entry.identity: entry for entry in late.following}
    for identity, version in findings:
        if identity in followed or len(followed) < FOLLOW_LIMIT:
            followed[identity] = Following(identity, version, now)
    return dataclasses.replace(late, following=tuple(followed.values()))


def mark_returned(
    late: LateArrivals, identities: Sequence[str], started_at: int
) -> LateArrivals | None:
    """``late`` with the followed identities a live cycle started at ``started_at`` read
    marked as returned, or ``None`` when it read none of them."""
    if not late.following:
        return None
    read = set(identities)
    changed = False
    following = []
    for entry in late.following:
        if not entry.returned and entry.found_at < started_at and entry.identity in read:
            entry = dataclasses.replace(entry, returned=True)
            changed = True
        following.append(entry)
    return dataclasses.replace(late, following=tuple(following)) if changed else None


def judge_following(
    late: LateArrivals, started_at: int, now: int
) -> tuple[LateArrivals, list[Following]]:
    """Judge the followed changes after a complete live cycle that started at
    ``started_at``: each one found before that start is settled, as a race when the live
    lane returned it, as a miss otherwise.

    Returns:
        The new figures and the misses (``late`` itself and ``[]`` when nothing was due).
    """
    due = [entry for entry in late.following if entry.found_at < started_at]
    if not due:
        return late, []
    missed = [entry for entry in due if not entry.returned]
    waiting = tuple(entry for entry in late.following if entry.found_at >= started_at)
    if not missed:
        return dataclasses.replace(late, following=waiting), []
    return (
        dataclasses.replace(
            late,
            following=waiting,
            missed=late.missed + len(missed),
            last_at=now,
            lost_at=now,
        ),
        missed,
    )


# --- codec and report -------------------------------------------------------------------


def late_to_json(late: LateArrivals) -> dict[str, Any]:
    """JSON-ready form of :class:`LateArrivals` (what the stores keep)."""
    return {
        "count": late.count,
        "max_ms": late.max_ms,
        "buckets": list(late.buckets),
        "beyond": late.beyond,
        "missed": late.missed,
        "by_lane": dict(late.by_lane),
        "last_at": late.last_at,
        "lost_at": late.lost_at,
        "window_ms": late.window_ms,
        "following": [
            [entry.identity, entry.version, entry.found_at, entry.returned]
            for entry in late.following
        ],
        "warned_at": late.warned_at,
        "warned": late.warned,
    }


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def late_from_json(data: Mapping[str, Any] | None) -> LateArrivals:
    """Inverse of :func:`late_to_json`; missing fields take their defaults."""
    if not data:
        return LateArrivals()
    warned = data.get("warned")
    return LateArrivals(
        count=int(data.get("count") or 0),
        max_ms=int(data.get("max_ms") or 0),
        buckets=tuple(int(n) for n in data.get("buckets") or ()),
        beyond=int(data.get("beyond") or 0),
        missed=int(data.get("missed") or 0),
        by_lane={str(k): int(v) for k, v in (data.get("by_lane") or {}).items()},
        last_at=_int_or_none(data.get("last_at")),
        lost_at=_int_or_none(data.get("lost_at")),
        window_ms=_int_or_none(data.get("window_ms")),
        following=tuple(
            Following(str(entry[0]), str(entry[1]), int(entry[2]), bool(entry[3]))
            for entry in data.get("following") or ()
        ),
        warned_at=_int_or_none(data.get("warned_at")),
        warned=warned if warned in ("near", "beyond") else None,
    )


def lookback_to_json(lookback: Lookback) -> dict[str, Any]:
    """JSON-ready form of :class:`Lookback`."""
    return {
        "since": lookback.since,
        "started": lookback.started,
        "marks": [[at, cursor] for at, cursor in lookback.marks],
    }


def lookback_from_json(data: Mapping[str, Any] | None) -> Lookback:
    """Inverse of :func:`lookback_to_json`; missing fields take their defaults."""
    if not data:
        return Lookback()
    return Lookback(
        since=data.get("since"),
        started=_int_or_none(data.get("started")),
        marks=tuple((int(at), str(cursor)) for at, cursor in data.get("marks") or ()),
    )


def late_report(late: LateArrivals, window_ms: int | None = None) -> dict[str, Any]:
    """``inspect()``'s view of a key's late arrivals.

    Args:
        late: The key's figures.
        window_ms: The lookback window in force now, when the caller knows the poller
            (default: the one stored with the figures).
    """
    return {
        "count": late.count,
        "max_ms": late.max_ms if late.count else None,
        "p99_ms": p99_ms(late),
        "beyond_window": late.beyond,
        "missed": late.missed,
        "by_lane": dict(late.by_lane),
        "last_at": late.last_at,
        "lost_at": late.lost_at,
        "window_ms": window_ms if window_ms is not None else late.window_ms,
        "following": len(late.following),
    }
