"""Adds up the conformance runs of a test session and prints the totals at the end.

The crash-safety figures of docs/proven.md ("examples x steps x stores, kills, findings")
come from this summary line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from watukuy.testing.conformance import ConformanceReport

_REPORTS: list[ConformanceReport] = []


def record(report: ConformanceReport) -> None:
    """Keep a report for the session summary."""
    _REPORTS.append(report)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _REPORTS:
        return
    stores = Counter(report.store for report in _REPORTS)
    line = (
        f"conformance: {len(_REPORTS)} examples "
        f"({', '.join(f'{n} on {s}' for s, n in stores.items())}), "
        f"{sum(r.steps for r in _REPORTS):,} steps, "
        f"{sum(r.requests for r in _REPORTS):,} requests, "
        f"{sum(r.total_kills for r in _REPORTS):,} kills, "
        f"{sum(r.restarts for r in _REPORTS):,} restarts, "
        f"{sum(r.delivered for r in _REPORTS):,} deliveries, "
        f"{sum(r.obligations for r in _REPORTS):,} versions held to [seen], "
        f"{sum(1 for r in _REPORTS if not r.ok)} failing"
    )
    terminalreporter.write_sep("-", line)
