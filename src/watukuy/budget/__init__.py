"""Rate budgets: token buckets shared by the pollers that name the same budget.

:mod:`watukuy.budget.bucket` holds the bucket arithmetic (pure, written once) and the
in-process :class:`InMemoryBudgetStore`; ``watukuy.stores.redis.RedisBudgetStore`` runs the
same arithmetic in Redis to share budgets across processes. :class:`BudgetManager` decides
who gets the next tokens: lane priority first (live, reconcile, backfill, replay), then
round-robin or weighted fairness across ``poller/partition`` requesters.
"""

from __future__ import annotations

from watukuy.budget.bucket import Bucket, InMemoryBudgetStore, take
from watukuy.budget.manager import LANE_PRIORITY, BudgetManager

__all__ = ["LANE_PRIORITY", "BudgetManager", "Bucket", "InMemoryBudgetStore", "take"]
