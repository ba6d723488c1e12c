"""Token-bucket arithmetic for budgets with a ``burst``, written once.

``Budget(requests, per, burst=b)`` allows a burst of ``b`` requests, then refills steadily:
one token every ``per / requests``. It is kept as the generic cell rate algorithm (GCRA),
one number per budget: the *theoretical arrival time* ``tat`` (epoch ms, a float), the
moment the bucket would be full again. With ``interval = per_ms / requests``, at ``now``:

1. A ``cost`` of ``0`` is granted at once and changes nothing.
2. ``after = max(tat, now) + cost * interval`` is where the bucket would stand after the
   grant. When ``after - now <= burst * interval`` the grant is made, ``tat`` becomes
   ``after`` and the answer is ``0``.
3. Otherwise nothing changes and the answer is ``ceil(after - burst * interval - now)``,
   the wait until the grant fits (at least 1 ms).

So ``Budget(10, "1s", burst=3)`` grants three requests at ``t = 0`` and then one every
100 ms. Unlike the default hard cap (the sliding window of :mod:`watukuy.budget.window`),
a bucket allows up to ``burst + requests * t / per`` in any stretch ``t``: the burst comes
on top of the steady rate. ``RedisBudgetStore`` runs the same steps, with the same
double-precision operations, in Lua.
"""

from __future__ import annotations

import math

from watukuy.model.ports import BudgetPolicy

__all__ = ["bucket_used", "take_bucket"]


def take_bucket(
    tat: float | None, policy: BudgetPolicy, cost: float, now: int
) -> tuple[float | None, int]:
    """Try to grant ``cost`` at ``now`` from the bucket whose state is ``tat``.

    Args:
        tat: The stored theoretical arrival time, or ``None`` for a bucket never used (or
            forgotten: a bucket idle for a full refill is the same as a new one).
        policy: ``requests`` per ``per_ms`` refill, ``burst`` tokens of capacity (not
            ``None``).
        cost: What the request is charged.
        now: The caller's time (epoch ms).

    Returns:
        The state to store (``None`` when nothing changed) and ``0`` when granted, or the
        milliseconds to wait.
    """
    if cost == 0:
        return None, 0
    burst = policy.burst if policy.burst is not None else policy.requests
    interval = policy.per_ms / policy.requests
    start = float(now) if tat is None or tat < now else tat
    after = start + cost * interval
    limit = burst * interval
    if after - now <= limit:
        return after, 0
    return None, max(1, math.ceil(after - limit - now))


def bucket_used(tat: float | None, policy: BudgetPolicy, now: int) -> float:
    """The tokens of the bucket in use at ``now``: ``burst`` minus what is left to take.

    ``tat`` is the stored theoretical arrival time (``None`` for a full bucket); each
    ``per_ms / requests`` milliseconds it stands ahead of ``now`` is one token taken and
    not yet refilled.
    """
    if tat is None or tat <= now:
        return 0.0
    burst = policy.burst if policy.burst is not None else policy.requests
    interval = policy.per_ms / policy.requests
    return min(float(burst), (tat - now) / interval)
