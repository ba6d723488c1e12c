"""Token-bucket arithmetic, written once.

A budget is a bucket of ``policy.requests`` tokens that refills continuously, reaching full
again ``policy.per_ms`` milliseconds after it was emptied. Every request takes ``cost``
tokens. The arithmetic lives in :func:`take`, a pure function of the bucket, the policy,
the cost and the caller's ``now``; :class:`InMemoryBudgetStore` applies it to buckets kept
in a dict, and ``watukuy.stores.redis.RedisBudgetStore`` runs the same steps, in the same
order and with the same double-precision operations, inside a Lua script. Because both are
driven by the caller's clock (never the wall clock or Redis ``TIME``), a scripted sequence
of calls gets identical answers from both, also under a virtual clock.

The rules, at ``now``:

1. A bucket seen for the first time is full: ``tokens = requests``, ``updated_at = now``.
2. Refill: ``tokens = min(requests, tokens + (now - updated_at) * requests / per_ms)``,
   adding nothing when ``now`` is not after ``updated_at`` (time never runs backwards for a
   bucket), then ``updated_at = max(updated_at, now)``.
3. When ``tokens >= cost`` the tokens are taken and the answer is ``0``; otherwise nothing
   is taken and the answer is ``ceil((cost - tokens) * per_ms / requests)``, the
   milliseconds until enough tokens will have accumulated.

A ``cost`` larger than ``requests`` never fits in the bucket, so such a request is always
told to wait; callers are expected to keep costs within the budget's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from watukuy.core.errors import ConfigError
from watukuy.core.ports import BudgetPolicy

__all__ = ["Bucket", "InMemoryBudgetStore", "check_budget_args", "take"]


@dataclass(frozen=True, slots=True)
class Bucket:
    """The stored state of one token bucket.

    Attributes:
        tokens: Tokens available at ``updated_at`` (fractional: refill is continuous).
        updated_at: The last time the bucket was refilled (epoch ms).
    """

    tokens: float
    updated_at: int


def check_budget_args(policy: BudgetPolicy, cost: float) -> None:
    """Reject a policy or cost the bucket arithmetic cannot work with.

    Raises:
        ConfigError: ``requests`` or ``per_ms`` is not a positive integer, or ``cost`` is
            negative or not a finite number.
    """
    if isinstance(policy.requests, bool) or not isinstance(policy.requests, int):
        raise ConfigError(f"expected a positive integer, got {policy.requests!r}", field="requests")
    if policy.requests <= 0:
        raise ConfigError(f"expected a positive integer, got {policy.requests!r}", field="requests")
    if isinstance(policy.per_ms, bool) or not isinstance(policy.per_ms, int) or policy.per_ms <= 0:
        raise ConfigError(f"expected a positive integer, got {policy.per_ms!r}", field="per_ms")
    if (
        isinstance(cost, bool)
        or not isinstance(cost, int | float)
        or not math.isfinite(cost)
        or cost < 0
    ):
        raise ConfigError(f"expected a finite number >= 0, got {cost!r}", field="cost")


def take(bucket: Bucket | None, policy: BudgetPolicy, cost: float, now: int) -> tuple[Bucket, int]:
    """Refill ``bucket`` at ``now`` and try to take ``cost`` tokens from it.

    Args:
        bucket: The stored bucket, or ``None`` for one never used (it starts full).
        policy: Size and refill window of the bucket.
        cost: Tokens wanted (``0`` only refills).
        now: The caller's time (epoch ms).

    Returns:
        The bucket to store, and ``0`` when the tokens were taken or else the milliseconds
        to wait before ``cost`` tokens will be there (nothing taken).
    """
    requests = float(policy.requests)
    if bucket is None:
        bucket = Bucket(tokens=requests, updated_at=now)
    # The same operations in the same order as the Lua mirror: IEEE doubles throughout, so
    # both sides round identically.
    elapsed = now - bucket.updated_at
    refill = float(elapsed) * requests / float(policy.per_ms) if elapsed > 0 else 0.0
    tokens = min(requests, bucket.tokens + refill)
    updated_at = max(bucket.updated_at, now)
    needed = float(cost)
    if tokens >= needed:
        return Bucket(tokens=tokens - needed, updated_at=updated_at), 0
    wait = math.ceil((needed - tokens) * float(policy.per_ms) / requests)
    return Bucket(tokens=tokens, updated_at=updated_at), wait


class InMemoryBudgetStore:
    """Token buckets in a dict: shared by every poller of one engine, not across processes.

    Implements the ``BudgetStore`` port. Use ``RedisBudgetStore`` to share buckets between
    processes with the same arithmetic.
    """

    def __init__(self) -> None:
        self._buckets: dict[str, Bucket] = {}

    async def try_take(self, budget: str, policy: BudgetPolicy, cost: float, now: int) -> int:
        """Take ``cost`` tokens from the bucket named ``budget`` at ``now``.

        Returns:
            ``0`` when taken; otherwise the milliseconds to wait, having taken nothing.

        Raises:
            ConfigError: An invalid policy or cost.
        """
        check_budget_args(policy, cost)
        bucket, wait = take(self._buckets.get(budget), policy, cost, now)
        self._buckets[budget] = bucket
        return wait

    def peek(self, budget: str) -> Bucket | None:
        """The stored bucket of ``budget`` as of its last use, or ``None`` if never used."""
        return self._buckets.get(budget)

    def clear(self) -> None:
        """Forget every bucket (they start full again)."""
        self._buckets.clear()

    def __repr__(self) -> str:
        return f"InMemoryBudgetStore(buckets={len(self._buckets)})"
