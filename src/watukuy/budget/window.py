"""Sliding-window-log arithmetic, written once.

A budget of ``policy.requests`` per ``policy.per_ms`` is a hard cap: the costs granted in
any window of ``per_ms`` milliseconds never add up to more than ``requests``. To enforce
it a budget keeps a log of the grants made in the last ``per_ms``, each one a
:class:`Grant` ``(time, cost)``. The arithmetic lives in :func:`take`, a pure function of
the log, the policy, the cost and the caller's ``now``; :class:`InMemoryBudgetStore`
keeps logs in a dict, and ``watukuy.stores.redis.RedisBudgetStore`` runs the same steps,
in the same order and with the same double-precision operations, in a Lua script over a
sorted set. Both are driven by the caller's clock (never the wall clock or Redis
``TIME``), so a scripted sequence of calls gets identical answers from both, also under a
virtual clock.

The rules, at ``now``:

1. A ``cost`` of ``0`` is granted at once and changes nothing.
2. Grants with ``time <= now - per_ms`` leave the log: a grant made at ``t`` stops
   counting at ``t + per_ms`` exactly.
3. When the costs left in the log plus ``cost`` are at most ``requests``, the grant
   ``(now, cost)`` joins the log (after any grant with the same time) and the answer is
   ``0``.
4. Otherwise nothing changes and the answer is the wait ``w``: the smallest ``w > 0`` such
   that the grants still counting at ``now + w`` (those with ``time + per_ms > now + w``)
   leave room for ``cost``. It is always the moment some grant leaves the window.

Costs may be fractional. Sums run from the newest grant to the oldest, on both sides, so
that the partial sums behind a wait are bit for bit the sums a later call will make: a
caller that waits exactly the answer is granted (if nobody took the room meanwhile).
Memory per budget is the grants of one window.

**Held grants.** What the vendor counts is when a request *arrives*, which is later than
its grant by however long it waited for a pooled connection and travelled. So that no
window at the vendor ever holds more than ``requests``, ``ctx.http`` takes each grant
*held*: stamped ``stamp`` (the latest moment its answer can come back) instead of ``now``,
so it keeps counting while the request is out; when the answer arrives, :func:`settle`
moves it to that moment. A grant then counts from its grant until ``per_ms`` after its
answer, and a request granted ``per_ms`` after an earlier answer arrives at least
``per_ms`` after the earlier request did, whatever the pool and the network did.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from watukuy.model.ports import BudgetPolicy, check_budget_args

from .bucket import bucket_used, take_bucket

__all__ = ["Grant", "InMemoryBudgetStore", "check_budget_args", "settle", "take", "window_used"]


@dataclass(frozen=True, slots=True)
class Grant:
    """One grant in a budget's log.

    Attributes:
        time: The caller's ``now`` when it was granted (epoch ms), or for a held grant
            the moment it stops being held (see :func:`settle`).
        cost: What it was charged (fractional costs are allowed).
        ticket: Names a held grant until it is settled.
    """

    time: int
    cost: float
    ticket: str | None = None


def _grant_time(grant: Grant) -> int:
    return grant.time


def take(
    grants: Sequence[Grant],
    policy: BudgetPolicy,
    cost: float,
    now: int,
    *,
    stamp: int | None = None,
    ticket: str | None = None,
) -> tuple[tuple[Grant, ...], int]:
    """Try to grant ``cost`` at ``now`` against the log ``grants``.

    Args:
        grants: The stored log, oldest first (grants with the same time in the order they
            were made); empty for a budget never used.
        policy: The cap: ``requests`` per ``per_ms``.
        cost: What this request is charged; ``0`` is always granted and changes nothing.
        now: The caller's time (epoch ms).
        stamp: For a held grant, the time it is logged at (``>= now``) until settled.
        ticket: For a held grant, the name :func:`settle` finds it by.

    Returns:
        The log to store, and ``0`` when ``cost`` was granted, or else the milliseconds
        until enough grants leave the window for it (nothing granted).

    Raises:
        ConfigError: An invalid policy, cost or time (see :func:`check_budget_args`).
    """
    check_budget_args(policy, cost, now)
    if cost == 0:
        return tuple(grants), 0
    live = tuple(grants[bisect_right(grants, now - policy.per_ms, key=_grant_time) :])
    requests = float(policy.requests)
    need = float(cost)
    # Newest first, by hand: the Lua mirror adds in this order, and builtin sum() may
    # compensate rounding on some Python versions.
    total = 0.0
    for grant in reversed(live):
        total += grant.cost
    if total + need <= requests:
        time = now if stamp is None else max(now, stamp)
        at = bisect_right(live, time, key=_grant_time)
        return (*live[:at], Grant(time, need, ticket), *live[at:]), 0
    # Walk back in time: ``newer`` is what still counts once every grant up to and
    # including the time of ``live[i]`` has left. The oldest time that leaves room is the
    # earliest moment the request fits. The newest time always does (nothing is left and
    # cost <= requests), so the walk finds one.
    newer = 0.0
    fits_from = live[-1].time
    for i in range(len(live) - 1, -1, -1):
        time = live[i].time
        if i == len(live) - 1 or live[i + 1].time != time:
            if newer + need > requests:
                break
            fits_from = time
        newer += live[i].cost
    return live, fits_from + policy.per_ms - now


def settle(grants: Sequence[Grant], ticket: str, at: int) -> tuple[Grant, ...]:
    """Move the held grant named ``ticket`` to ``at``, the moment its answer arrived.

    From then on it counts until ``at + per_ms`` like any grant made at ``at``. A ticket no
    longer in the log (its hold ran out and it left the window) changes nothing.

    Args:
        grants: The stored log, oldest first.
        ticket: The ticket given to :func:`take`.
        at: When the answer arrived (epoch ms).

    Returns:
        The log to store.
    """
    for index, grant in enumerate(grants):
        if grant.ticket == ticket:
            rest = (*grants[:index], *grants[index + 1 :])
            spot = bisect_right(rest, at, key=_grant_time)
            return (*rest[:spot], Grant(at, grant.cost), *rest[spot:])
    return tuple(grants)


def window_used(grants: Sequence[Grant], policy: BudgetPolicy, now: int) -> float:
    """What the grants of ``grants`` still count against the budget at ``now``.

    The costs of the grants with ``time > now - per_ms`` (rule 2 of :func:`take`), summed
    newest first like :func:`take` sums them. A held grant counts from the moment it was
    made, so it is included too. Never more than ``policy.requests``.
    """
    total = 0.0
    for grant in reversed(grants):
        if grant.time <= now - policy.per_ms:
            break
        total += grant.cost
    return total


class InMemoryBudgetStore:
    """Sliding-window logs in a dict: shared by the pollers of one engine, not processes.

    Implements the ``BudgetStore`` port with :func:`take`. Use ``RedisBudgetStore`` to
    share budgets between processes with the same arithmetic. Also a test tool: the logs
    can be inspected with :meth:`peek` and forgotten with :meth:`clear`.
    """

    def __init__(self) -> None:
        self._logs: dict[str, tuple[Grant, ...]] = {}
        self._buckets: dict[str, float] = {}

    async def try_take(self, budget: str, policy: BudgetPolicy, cost: float, now: int) -> int:
        """Grant ``cost`` of the budget named ``budget`` at ``now``, if it fits.

        Returns:
            ``0`` when granted; otherwise the milliseconds to wait, having taken nothing.

        Raises:
            ConfigError: An invalid policy, cost or time; also a cost the budget can never
                grant (see :func:`check_budget_args`), as ``RedisBudgetStore`` refuses it.
        """
        if policy.burst is not None:
            check_budget_args(policy, cost, now)
            tat, wait = take_bucket(self._buckets.get(budget), policy, cost, now)
            if tat is not None:
                self._buckets[budget] = tat
            return wait
        grants, wait = take(self._logs.get(budget, ()), policy, cost, now)
        if grants:
            self._logs[budget] = grants
        return wait

    async def try_hold(
        self, budget: str, policy: BudgetPolicy, cost: float, now: int, *, stamp: int, ticket: str
    ) -> int:
        """Like :meth:`try_take`, the grant held until :meth:`settle` (see :func:`take`).

        A token-bucket budget (``burst``) is not held: it is taken like :meth:`try_take`.
        """
        if policy.burst is not None:
            return await self.try_take(budget, policy, cost, now)
        grants, wait = take(
            self._logs.get(budget, ()), policy, cost, now, stamp=stamp, ticket=ticket
        )
        if grants:
            self._logs[budget] = grants
        return wait

    async def settle(
        self, budget: str, policy: BudgetPolicy, ticket: str, *, stamp: int, at: int, now: int
    ) -> None:
        """Move the held grant ``ticket`` (logged at ``stamp``) to ``at`` (see :func:`settle`)."""
        del stamp, now  # the log is in memory: the ticket alone finds the grant
        if policy.burst is None and budget in self._logs:
            self._logs[budget] = settle(self._logs[budget], ticket, at)

    async def usage(self, budget: str, policy: BudgetPolicy, now: int) -> float:
        """How much of the budget is in use at ``now``: the costs still counting in its
        window, or for a token bucket (``burst``) the tokens not yet refilled."""
        if policy.burst is not None:
            return bucket_used(self._buckets.get(budget), policy, now)
        return window_used(self._logs.get(budget, ()), policy, now)

    def peek(self, budget: str) -> tuple[Grant, ...]:
        """The log of ``budget`` as of its last take, oldest first (empty if never used)."""
        return self._logs.get(budget, ())

    def clear(self) -> None:
        """Forget every log (every budget starts empty again)."""
        self._logs.clear()
        self._buckets.clear()

    def __repr__(self) -> str:
        return f"InMemoryBudgetStore(budgets={len(self._logs)})"
