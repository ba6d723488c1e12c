"""Late arrivals, as one lane cycle finds them (see :mod:`watukuy.model.late`).

A :class:`LateWatch` is made for each lane cycle. Page by page it measures the versions the
cycle turned into events whose timestamp was behind the live watermark (the live lane's
lookback window, a reconcile pass, a backfill), follows what a reconcile found, and marks
what the live lane returned of it; the figures go into the page's own commit. After a
complete live cycle, :meth:`LateWatch.judge` settles the reconcile findings it was waiting
for. :func:`late_warning` decides, as a pure function, whether a WARNING is due.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Final

from watukuy.cursor import TimestampPosition, TimestampStrategy
from watukuy.cursor.lookback import lookback_window_ms
from watukuy.diff import Change
from watukuy.model.durations import describe_duration
from watukuy.model.errors import ConfigError
from watukuy.model.late import (
    Following,
    LateArrivals,
    LateWarning,
    add_lateness,
    follow_findings,
    judge_following,
    mark_returned,
)
from watukuy.model.records import dataclass
from watukuy.model.rows import Lane, PollerState

from .poller import PollerDefinition

__all__ = ["LatePage", "LateWatch", "late_warning", "window_ms"]

WARN_EVERY_MS: Final = 15 * 60_000
"""A key logs the same lateness WARNING at most this often (a worse one at once)."""


def window_ms(poller: PollerDefinition[Any], late: LateArrivals) -> int | None:
    """The lookback window in force for ``poller``: its explicit ``overlap`` (``0`` when it
    turned lookback off), the default window for what ``late`` observed, or ``None`` for a
    cursor that cannot look back."""
    strategy = poller.strategy
    if not isinstance(strategy, TimestampStrategy):
        return None
    if strategy.config.lookback:
        return lookback_window_ms(late.max_ms)
    return strategy.config.overlap_ms


def late_warning(
    late: LateArrivals,
    *,
    lateness_ms: Sequence[int],
    missed: int,
    window: int | None,
    widened: int | None,
    lane: Lane,
    now: int,
) -> tuple[LateWarning, str] | None:
    """The WARNING a key's new late arrivals (or live-lane misses) call for, if any.

    ``beyond`` when a reconcile found misses, or an arrival was later than the window;
    ``near`` when one came within half of the window. The same warning is logged at most
    every :data:`WARN_EVERY_MS` per key; ``beyond`` after ``near`` is logged at once.

    Args:
        late: The figures before these findings (for the last warning).
        lateness_ms: How late each new arrival was.
        missed: New live-lane misses.
        window: The lookback window in force (``None``: the cursor cannot look back).
        widened: The default window these findings widen it to, if they do.
        lane: The lane that found them.
        now: The time (epoch ms).

    Returns:
        The level and the message, or ``None``.
    """
    worst = max(lateness_ms, default=None)
    level: LateWarning
    if missed or (worst is not None and (window is None or worst > window)):
        level = "beyond"
    elif worst is not None and window is not None and worst * 2 >= window:
        level = "near"
    else:
        return None
    recent = late.warned_at is not None and now - late.warned_at < WARN_EVERY_MS
    if recent and (late.warned == "beyond" or late.warned == level):
        return None
    if missed:
        return level, (
            f"the reconcile lane found {missed} change(s) that the live lane's next complete "
            "cycle did not return: the live cursor skips changes (late commits behind it, or a "
            "vendor position that cannot look back); widen `overlap` or run `reconcile` more "
            "often"
        )
    assert worst is not None
    arrived = (
        f"{len(lateness_ms)} item(s) arrived up to {describe_duration(worst)} behind the "
        f"watermark (found by the {lane} lane)"
    )
    if level == "near":
        assert window is not None
        text = f"{arrived}; the {describe_duration(window)} lookback covers them"
        if widened is not None:
            text += f", and now reaches {describe_duration(widened)}"
        return level, text
    if not window:
        return (
            level,
            f"{arrived}, and nothing looks back (overlap=0): set `overlap` or add `reconcile`",
        )
    return level, (
        f"{arrived}, which exceeds the {describe_duration(window)} lookback: widen `overlap` "
        "or add `reconcile`"
    )


def _position(strategy: TimestampStrategy, text: str | None) -> TimestampPosition | None:
    """A stored timestamp cursor, or ``None`` when there is none or it cannot be read (a
    lane that cannot measure lateness still runs: the live lane reports a bad cursor)."""
    if text is None:
        return None
    try:
        position = strategy.deserialize(text)
    except ConfigError:
        return None
    if position.value is not None and strategy.lag_ms(position, 0) is None:
        return None  # its value no longer reads as a timestamp
    return position


@dataclass(frozen=True, slots=True)
class LatePage:
    """What one page added: the new figures to commit with it, the lateness of its late
    arrivals, and the WARNING to log once it landed."""

    late: LateArrivals
    lateness_ms: tuple[int, ...]
    window_ms: int | None
    warning: str | None


class LateWatch:
    """Finds the late arrivals of one lane cycle; see the module docstring.

    Args:
        poller: The poller.
        lane: The lane of the cycle.
        state: The key's state when the cycle began.
        started_at: When the cycle (the key's run) began.
        looked_back: The live lane's first request was moved behind its cursor.
        cursor: The live lane's stored cursor at the start of the cycle (live lane only).
    """

    def __init__(
        self,
        *,
        poller: PollerDefinition[Any],
        lane: Lane,
        state: PollerState,
        started_at: int,
        looked_back: bool,
        cursor: Any,
    ) -> None:
        self._lane = lane
        self._poller = poller
        self._started_at = started_at
        self._window = window_ms(poller, state.late)
        strategy = poller.strategy
        self._timestamps: TimestampStrategy | None = None
        self._watermark: TimestampPosition | None = None
        self._since: TimestampPosition | None = None
        if isinstance(strategy, TimestampStrategy):
            if lane == "live":
                watermark = cursor if looked_back else None
            else:
                watermark = _position(strategy, state.cursors.get("live"))
            if isinstance(watermark, TimestampPosition) and watermark.value is not None:
                self._timestamps, self._watermark = strategy, watermark
                self._since = _position(strategy, state.lookback.since)
        progress = state.listing.lanes.get("reconcile")
        # The first complete reconcile of a key is its baseline: it may find what predates
        # the live lane's start (an `initial` token or timestamp), which is no miss.
        self._follow = lane == "reconcile" and progress is not None and progress.completed > 0
        self._returns = lane == "live"

    @property
    def window_ms(self) -> int | None:
        """The lookback window in force for this cycle (``None``: none can look back)."""
        return self._window

    @property
    def measures(self) -> bool:
        """True when this cycle's events are measured against a watermark (the lane then
        keeps each page's raw items for :meth:`page`)."""
        return self._timestamps is not None

    def page(
        self,
        late: LateArrivals,
        changes: Sequence[Change[Any]],
        identities: Sequence[str],
        raw_of: Callable[[Change[Any]], Any],
        now: int,
    ) -> LatePage | None:
        """The figures after one page, or ``None`` when the page changes nothing.

        Args:
            late: The figures before the page.
            changes: The page's ``created`` and ``updated`` changes.
            identities: Every identity the page listed.
            raw_of: The raw item of a change, as ``fetch`` returned it.
            now: The page's commit time.
        """
        if not (self.measures or self._follow or (self._returns and late.following)):
            return None
        lateness: list[int] = []
        timestamps, watermark = self._timestamps, self._watermark
        if timestamps is not None and watermark is not None:
            for change in changes:
                behind = timestamps.lateness_ms(raw_of(change), watermark, self._since)
                if behind is not None:
                    lateness.append(behind)
        after = add_lateness(late, lateness, lane=self._lane, window_ms=self._window, now=now)
        if lateness:
            # Kept for readers without the poller (the CLI on a store): the window from now on.
            after = dataclasses.replace(after, window_ms=window_ms(self._poller, after))
        if self._follow:
            findings = [(c.identity, c.version or c.hash) for c in changes]
            after = follow_findings(after, findings, now)
        if self._returns and after.following:
            after = mark_returned(after, identities, self._started_at) or after
        warning = None
        if lateness:
            wider = after.window_ms
            widened = wider if wider is not None and wider > (self._window or 0) else None
            after, warning = self._warn(late, after, lateness, 0, widened, now)
        if after is late:
            return None
        return LatePage(after, tuple(lateness), self._window, warning)

    def judge(
        self, late: LateArrivals, now: int
    ) -> tuple[LateArrivals, list[Following], str | None]:
        """After a complete live cycle: settle the reconcile findings made before it began.

        Returns:
            The new figures, the misses, and the WARNING to log (if any).
        """
        after, missed = judge_following(late, self._started_at, now)
        warning = None
        if missed:
            after, warning = self._warn(late, after, (), len(missed), None, now)
        return after, missed, warning

    def _warn(
        self,
        late: LateArrivals,
        after: LateArrivals,
        lateness: Sequence[int],
        missed: int,
        widened: int | None,
        now: int,
    ) -> tuple[LateArrivals, str | None]:
        """``after`` marked with the WARNING :func:`late_warning` calls for, and its text."""
        decided = late_warning(
            late,
            lateness_ms=lateness,
            missed=missed,
            window=self._window,
            widened=widened,
            lane=self._lane,
            now=now,
        )
        if decided is None:
            return after, None
        return dataclasses.replace(after, warned_at=now, warned=decided[0]), decided[1]
