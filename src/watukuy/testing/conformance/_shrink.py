"""Shrinking: remove steps from a failing plan while it keeps failing the same way."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from ._plan import Step
from ._report import ConformanceReport

__all__ = ["shrink"]

Runner = Callable[[list[Step]], Awaitable[ConformanceReport]]


async def shrink(
    plan: list[Step], kind: str, run: Runner, *, budget: int = 150, seconds: float = 60.0
) -> tuple[list[Step], ConformanceReport | None]:
    """Delta debugging over the step list: try removing chunks (halves, then quarters, down
    to single steps); keep a removal when the run still fails with a violation of ``kind``.

    Args:
        plan: A plan whose run failed with ``kind``.
        kind: The violation tag to keep (``"[seen]"``...).
        run: Runs a plan on a fresh store.
        budget: At most this many runs.
        seconds: Stop looking after this much real time (a stalling run is slow).

    Returns:
        The smallest failing plan found and its report (``None`` if no removal kept
        failing).
    """
    current = list(plan)
    best: ConformanceReport | None = None
    runs = 0
    chunk = max(1, len(current) // 2)
    deadline = time.monotonic() + seconds

    def more() -> bool:
        return runs < budget and time.monotonic() < deadline

    while chunk >= 1 and more():
        start = 0
        removed_any = False
        while start < len(current) and more():
            candidate = current[:start] + current[start + chunk :]
            runs += 1
            report = await run(candidate)
            if any(v.startswith(kind) for v in report.violations):
                current, best, removed_any = candidate, report, True
            else:
                start += chunk
        if not removed_any:
            chunk //= 2
    return current, best
