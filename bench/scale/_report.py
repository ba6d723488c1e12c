"""Figures, their targets, and the table that shows them side by side."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Figure", "Report", "ratio"]


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure.

    Attributes:
        scenario: Which scenario measured it (``partitions``, ``replicas/postgres``...).
        id: Stable identifier, for tools and the smoke test (``idle_pass_ratio``...).
        label: What it is, in words.
        value: The measurement.
        unit: Unit of ``value`` (``"ms"``, ``"x"``, ``"MB"``, ``""``...).
        target: The target in words (``"<= 2x"``); empty for a figure shown for context.
        passed: Whether the target is met; ``None`` for a figure without a target.
    """

    scenario: str
    id: str
    label: str
    value: float | int | str
    unit: str = ""
    target: str = ""
    passed: bool | None = None

    def shown(self) -> str:
        """The value with its unit, formatted for the table."""
        value = self.value
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                text = str(value)
            elif abs(value) >= 100:
                text = f"{value:,.0f}"
            elif abs(value) >= 10:
                text = f"{value:.1f}"
            else:
                text = f"{value:.3g}"
        elif isinstance(value, int):
            text = f"{value:,}"
        else:
            text = value
        return f"{text} {self.unit}".rstrip()


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; infinity when the denominator is zero."""
    return numerator / denominator if denominator else math.inf


@dataclass
class Report:
    """Everything one harness run measured."""

    figures: list[Figure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    definitions: dict[str, str] = field(default_factory=dict)

    def add(self, figures: Iterable[Figure], definitions: str = "") -> None:
        """Append figures, and the definitions of the terms they use (once per scenario)."""
        figures = list(figures)
        self.figures.extend(figures)
        if definitions and figures:
            self.definitions.setdefault(figures[0].scenario.split("/")[0], definitions)

    @property
    def failed(self) -> list[Figure]:
        """Figures whose target was missed."""
        return [f for f in self.figures if f.passed is False]

    def table(self) -> str:
        """Every figure, one line each, with its target and PASS / FAIL / ``-``."""
        rows: list[Sequence[str]] = [("scenario", "figure", "value", "target", "result")]
        for figure in self.figures:
            verdict = "-" if figure.passed is None else ("PASS" if figure.passed else "FAIL")
            rows.append((figure.scenario, figure.label, figure.shown(), figure.target, verdict))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        lines = []
        for index, row in enumerate(rows):
            cells = [
                row[0].ljust(widths[0]),
                row[1].ljust(widths[1]),
                row[2].rjust(widths[2]),
                row[3].ljust(widths[3]),
                row[4],
            ]
            lines.append("  ".join(cells).rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        for scenario, error in self.errors.items():
            lines.append(f"{scenario}: ERROR {error}")
        if self.definitions:
            lines.append("")
            lines.append("Definitions:")
            for scenario, text in self.definitions.items():
                lines.append(f"  {scenario}:")
                lines.extend(f"    {line}" for line in text.strip().splitlines())
        return "\n".join(lines)

    def write_json(self, path: Path) -> None:
        """Write figures, details and errors as JSON."""
        data = {
            "figures": [asdict(f) for f in self.figures],
            "definitions": self.definitions,
            "details": self.details,
            "errors": self.errors,
        }
        path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
