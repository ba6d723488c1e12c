"""Rate budgets: hard caps per sliding window, shared by the pollers that name them.

:mod:`watukuy.budget.window` holds the sliding-window-log arithmetic (pure, written once)
and the in-process :class:`InMemoryBudgetStore`; ``watukuy.stores.redis.RedisBudgetStore``
runs the same arithmetic in Redis to share budgets across processes. :class:`BudgetManager`
decides who is granted next: lane priority first (live, reconcile, backfill, replay), then
round-robin or weighted fairness across ``poller/partition`` requesters.
"""

from __future__ import annotations

from watukuy.budget.manager import LANE_PRIORITY, BudgetManager
from watukuy.budget.window import Grant, InMemoryBudgetStore, take

__all__ = ["LANE_PRIORITY", "BudgetManager", "Grant", "InMemoryBudgetStore", "take"]
