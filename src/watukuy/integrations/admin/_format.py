"""Values for people: durations, times, cursors, and the lag chart as inline SVG.

Everything here returns plain text, which the templates escape, except :func:`lag_chart`,
which builds its SVG from numbers only (every text in it is escaped here).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

from watukuy.cursor.strategy import describe_cursor
from watukuy.model.durations import describe_duration

__all__ = ["ago", "cursor_text", "duration", "json_text", "lag_chart", "when"]


duration = describe_duration


def when(ms: int | None) -> str:
    """Epoch milliseconds as ``2026-01-01 12:00:01Z``; ``-`` for none."""
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def ago(ms: int | None, now: int) -> str:
    """``12s ago``, ``in 3.0m``, ``now``; ``-`` for none."""
    if ms is None:
        return "-"
    delta = now - ms
    if abs(delta) < 1_000:
        return "now"
    return f"{duration(delta)} ago" if delta > 0 else f"in {duration(-delta)}"


cursor_text = describe_cursor


def json_text(value: Any) -> str:
    """Indented JSON for a ``<pre>`` block."""
    if value is None:
        return "null"
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def lag_chart(
    readings: Sequence[tuple[int, int]],
    *,
    width: int = 560,
    height: int = 120,
    label: str = "lag",
    has_lag: bool = True,
) -> Markup:
    """An inline SVG line chart of ``(time, lag_ms)`` readings, with its range as text.

    Fewer than two readings draw a note instead of a line (``has_lag=False``: the key has
    no lag to chart at all).
    """
    if len(readings) < 2:
        note = (
            "Not enough readings for a chart yet: the page charts the lag it reads, "
            "one point per refresh."
            if has_lag
            else "No lag to chart: the key has no timestamp cursor (yet)."
        )
        return Markup('<p class="muted chart-empty">{}</p>').format(note)
    pad = 6
    inner_w, inner_h = width - 2 * pad, height - 2 * pad
    times = [t for t, _ in readings]
    lags = [lag for _, lag in readings]
    t0, t1 = min(times), max(times)
    high = max(max(lags), 1)
    span = max(t1 - t0, 1)

    def x(t: int) -> float:
        return pad + (t - t0) / span * inner_w

    def y(lag: int) -> float:
        return pad + inner_h - max(lag, 0) / high * inner_h

    points = " ".join(f"{x(t):.1f},{y(lag):.1f}" for t, lag in readings)
    last_t, last_lag = readings[-1]
    title = f"{label} from {duration(min(lags))} to {duration(high)}, now {duration(last_lag)}"
    # The line stretches with the page; the text lives outside the SVG, so it never does.
    svg = (
        f'<svg class="chart" viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<line x1="0" y1="{pad + inner_h}" x2="{width}" y2="{pad + inner_h}" class="axis"/>'
        f'<line x1="0" y1="{pad}" x2="{width}" y2="{pad}" class="grid"/>'
        f'<polyline points="{points}" class="line"/>'
        f'<line x1="{x(last_t):.1f}" y1="{pad}" x2="{x(last_t):.1f}" y2="{pad + inner_h}" '
        'class="now"/></svg>'
    )
    caption = Markup(
        '<p class="chart-caption"><span>top: {high}</span><span>now: <strong>{now}</strong>'
        "</span><span>lowest: {low}</span><span>{start} to {end} ({count} readings)</span></p>"
    ).format(
        high=duration(high),
        now=duration(last_lag),
        low=duration(min(lags)),
        start=when(t0)[11:],
        end=when(t1)[11:],
        count=len(readings),
    )
    return Markup('<div class="chart-box">') + Markup(svg) + caption + Markup("</div>")


def sparkline(readings: Sequence[tuple[int, int]], *, width: int = 80, height: int = 20) -> Markup:
    """A tiny lag line for an overview row (empty with fewer than two readings)."""
    if len(readings) < 2:
        return Markup("")
    times = [t for t, _ in readings]
    lags = [lag for _, lag in readings]
    t0, span = min(times), max(max(times) - min(times), 1)
    high = max(max(lags), 1)
    points = " ".join(
        f"{(t - t0) / span * (width - 2) + 1:.1f},{height - 1 - max(lag, 0) / high * (height - 2):.1f}"
        for t, lag in readings
    )
    label = f"lag {duration(min(lags))} to {duration(high)}"
    return Markup(
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(label)}"><polyline points="{points}" class="line"/></svg>'
    )
