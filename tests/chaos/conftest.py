"""Adds up the chaos runs of a test session and prints the totals at the end.

The figures in docs/proven.md ("seeds x steps x stores run in CI, kills survived, events
lost") come from this summary line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from watukuy.testing.chaos import ChaosReport

_REPORTS: list[ChaosReport] = []


def record(report: ChaosReport) -> None:
    """Keep a report for the session summary."""
    _REPORTS.append(report)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _REPORTS:
        return
    stores = Counter(report.store for report in _REPORTS)
    kills = sum(sum(report.kills.values()) for report in _REPORTS)
    line = (
        f"chaos: {len(_REPORTS)} runs ({', '.join(f'{n} on {s}' for s, n in stores.items())}), "
        f"{sum(r.steps for r in _REPORTS):,} steps, {kills:,} kills, "
        f"{sum(r.restarts for r in _REPORTS):,} restarts, "
        f"{sum(r.delivered for r in _REPORTS):,} deliveries "
        f"({sum(r.duplicates for r in _REPORTS):,} duplicates), "
        f"{sum(r.lost for r in _REPORTS)} lost"
    )
    terminalreporter.write_sep("-", line)
