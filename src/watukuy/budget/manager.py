"""Who is granted next on a budget: lane priority first, then fairness among requesters.

:class:`BudgetManager` is the engine's :class:`~watukuy.model.http_port.BudgetGate`. Every
request ``ctx.http`` sends on a poller with a ``budget`` first calls :meth:`acquire
<BudgetManager.acquire>`, which has its cost granted by the
:class:`~watukuy.model.ports.BudgetStore` before anything goes on the wire, so a budget is
never exceeded.

While the window has room, requests are granted as they arrive. When it is full, requests
queue per budget and one worker per budget serves them as earlier grants leave the window:

1. **Lane priority**: ``live`` before ``reconcile`` before ``backfill`` before ``replay``.
2. **Fairness** among requesters (``"poller/partition"`` strings) of the same lane:

   - ``"round-robin"`` serves the request with the earliest deadline (when it would give
     up, ``max_wait`` after it started waiting): with one ``max_wait``, the request that
     has waited longest. A key whose run is due the longest thus also gets the next grant,
     in the order the daemon admitted the runs. Requests with the same deadline go to the
     requester served least recently (never served comes first);
   - ``"weighted"`` serves the requester with the lowest cost served per unit of weight.
     A requester that starts waiting after an idle spell is brought up to the share of the
     last grant, so it cannot claim the whole budget to "catch up" on time it did not ask.

3. **Arrival order** breaks every remaining tie.

The worker sleeps through the :class:`~watukuy.model.ports.Clock` until the store says the
head of the queue can be served, or until the earliest waiter's deadline, whichever comes
first, so a ``VirtualClock`` drives it exactly. A waiter gives up with
:class:`~watukuy.model.errors.BudgetTimeoutError` when its ``max_wait`` has passed without a
grant; cancelling a waiting task removes it from the queue.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from watukuy.model.durations import describe_duration
from watukuy.model.errors import BudgetTimeoutError, ConfigError
from watukuy.model.options import Budget
from watukuy.model.ports import BudgetPolicy, BudgetStore, Clock
from watukuy.model.rows import Lane

__all__ = ["LANE_PRIORITY", "BudgetHold", "BudgetManager", "BudgetUsage", "describe_usage"]

_log = logging.getLogger("watukuy")

LANE_PRIORITY: Final[Mapping[Lane, int]] = {"live": 0, "reconcile": 1, "backfill": 2, "replay": 3}
"""Rank of each lane when requests wait for a budget; lower is served first."""


@dataclass(eq=False, slots=True)
class _Waiter:
    seq: int
    requester: str
    rank: int
    weight: float
    cost: float
    enqueued_at: int
    deadline: int
    future: asyncio.Future[int]
    hold_ms: int | None = None
    ticket: str | None = None
    stamp: int | None = None


@dataclass(frozen=True, slots=True)
class BudgetHold:
    """A grant that keeps counting until :meth:`BudgetManager.settle` says its answer
    arrived.

    Attributes:
        budget: The budget it was granted by.
        waited_ms: How long the request waited for it.
        ticket: Names the held grant in the budget store (``None``: not held, nothing to
            settle; the store cannot hold grants, or the cost was 0).
        stamp: Where the store logged it until settled (epoch ms).
    """

    budget: str
    waited_ms: int
    ticket: str | None = None
    stamp: int | None = None


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """How much of one budget is in use, as its store sees it now.

    Attributes:
        budget: The budget's name.
        requests: Its cap: the costs any window of ``per_ms`` may hold.
        per_ms: The window.
        burst: The bucket size of a token-bucket budget (``None``: a sliding window).
        used: The costs counting in the current window, or the tokens of the bucket not
            yet refilled; ``None`` when the budget store cannot tell (it has no ``usage``).
        waiting: Requests of this engine queued for it.
    """

    budget: str
    requests: int
    per_ms: int
    burst: int | None
    used: float | None
    waiting: int


def describe_usage(usage: Mapping[str, Any]) -> str:
    """A budget's use for people, from an entry of ``inspect()``'s ``budgets``:
    ``37 of 150 per 1.0s``, ``2 of a bucket of 10 (1 per 100ms)``, with ``, 3 waiting``
    when requests queue; ``?`` stands for a use the store cannot tell.
    """
    used = usage.get("used")
    amount = "?" if used is None else f"{used:.3g}"
    requests, per_ms, burst = usage.get("requests"), usage.get("per_ms"), usage.get("burst")
    if burst:
        rate = describe_duration(per_ms / requests) if per_ms and requests else "-"
        text = f"{amount} of a bucket of {burst} (1 per {rate})"
    else:
        text = f"{amount} of {requests} per {describe_duration(per_ms)}"
    waiting = int(usage.get("waiting") or 0)
    return f"{text}, {waiting} waiting" if waiting else text


@dataclass(slots=True)
class _Share:
    """Fairness bookkeeping of one requester on one budget."""

    last_served: int = -1
    served_per_weight: float = 0.0
    waiting: int = 0


@dataclass(eq=False, slots=True)
class _Line:
    """The queue of one budget and the state of its worker."""

    name: str
    budget: Budget
    policy: BudgetPolicy
    queue: list[_Waiter] = field(default_factory=list)
    shares: dict[str, _Share] = field(default_factory=dict)
    grants: int = 0
    # Share of the most recent grant: where a requester returning from idle starts.
    virtual: float = 0.0
    worker: asyncio.Task[None] | None = None
    wake: asyncio.Future[None] | None = None
    # Set when the queue changed while the worker was talking to the store.
    dirty: bool = False
    # Held grants were taken: room may appear before the store's answer says (a settle
    # here or in another process), so the worker looks again at least this often.
    recheck_ms: int | None = None


def _number(value: object, field_name: str, *, positive: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"expected a finite number {bound}, got {value!r}", field=field_name)
    return float(value)


class BudgetManager:
    """Grants the requests of every poller sharing a named rate budget, in a fair order.

    Args:
        budgets: The engine's budgets by name.
        store: Where the budgets' sliding-window logs live (``InMemoryBudgetStore`` in
            one process, ``RedisBudgetStore`` across processes).
        clock: The engine's clock; every wait goes through ``clock.sleep``.
        instance_id: Unique among the processes sharing ``store`` (the engine passes its
            own); names this manager's held grants.

    Raises:
        ConfigError: A budget name is empty or a value is not a :class:`Budget`.
    """

    def __init__(
        self,
        budgets: Mapping[str, Budget],
        store: BudgetStore,
        clock: Clock,
        *,
        instance_id: str | None = None,
    ) -> None:
        if not isinstance(budgets, Mapping):
            raise ConfigError(
                f"expected a mapping of names to Budget, got {budgets!r}", field="budgets"
            )
        self._lines: dict[str, _Line] = {}
        for name, budget in budgets.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"expected a non-empty name, got {name!r}", field="budgets")
            if not isinstance(budget, Budget):
                raise ConfigError(f"expected a Budget, got {budget!r}", field=f"budgets.{name}")
            policy = BudgetPolicy(
                requests=budget.requests, per_ms=budget.per_ms, burst=budget.burst
            )
            self._lines[name] = _Line(name=name, budget=budget, policy=policy)
        self._store = store
        self._clock = clock
        self._seq = itertools.count()
        self._tickets = itertools.count()
        self._holds = callable(getattr(store, "try_hold", None)) and callable(
            getattr(store, "settle", None)
        )
        # Tickets name held grants in a store other processes share: unique per manager.
        # (A ticket is one field of a ':'-separated Redis member: no ':' in it.)
        self._instance = f"{instance_id or 'm'}.{id(self):x}".replace(":", "_")

    @property
    def names(self) -> tuple[str, ...]:
        """The budgets this manager knows, in declaration order."""
        return tuple(self._lines)

    def waiting(self, budget: str) -> int:
        """Requests currently queued on ``budget`` (``0`` for an unknown name)."""
        line = self._lines.get(budget)
        return 0 if line is None else sum(not w.future.done() for w in line.queue)

    async def usage(self, budget: str) -> BudgetUsage:
        """How much of ``budget`` is in use now (asks the budget store once).

        Raises:
            ConfigError: ``budget`` is not one of :attr:`names`.
            StoreError: The budget store failed.
        """
        line = self._lines.get(budget)
        if line is None:
            raise ConfigError(
                f"unknown budget {budget!r} (known: {list(self._lines)})", field="budget"
            )
        reader = getattr(self._store, "usage", None)
        used = (
            float(await reader(budget, line.policy, self._clock.now()))
            if callable(reader)
            else None
        )
        return BudgetUsage(
            budget=budget,
            requests=line.policy.requests,
            per_ms=line.policy.per_ms,
            burst=line.policy.burst,
            used=used,
            waiting=self.waiting(budget),
        )

    async def acquire(
        self,
        budget: str,
        *,
        requester: str,
        lane: Lane,
        weight: float,
        cost: float,
        max_wait_ms: int,
    ) -> int:
        """Wait until ``budget`` grants ``cost`` to this request.

        Args:
            budget: Name of the budget.
            requester: Who asks, ``"poller/partition"``; fairness is computed per requester.
            lane: The lane of the request (priority).
            weight: The poller's ``budget_weight`` (used by ``"weighted"`` fairness).
            cost: What the request is charged; ``0`` is granted at once without touching
                the store.
            max_wait_ms: Longest wait when the budget sets no ``max_wait`` of its own.

        Returns:
            Milliseconds spent waiting (``0`` when granted at once).

        Raises:
            ConfigError: Unknown budget, or an invalid lane, weight, cost or wait; or a cost
                larger than the budget's ``requests``, which could never be served.
            BudgetTimeoutError: No grant within the wait limit; the waiter left the queue.
        """
        hold = await self.hold(
            budget,
            requester=requester,
            lane=lane,
            weight=weight,
            cost=cost,
            max_wait_ms=max_wait_ms,
            hold_ms=None,
        )
        return hold.waited_ms

    async def hold(
        self,
        budget: str,
        *,
        requester: str,
        lane: Lane,
        weight: float,
        cost: float,
        max_wait_ms: int,
        hold_ms: int | None,
    ) -> BudgetHold:
        """Like :meth:`acquire`, the grant held for up to ``hold_ms`` until :meth:`settle`.

        A held grant counts as if made ``hold_ms`` from now, the latest its answer can come
        back; :meth:`settle` then moves it to the moment the answer did come back, so it
        counts until ``per`` after it. ``ctx.http`` holds every grant for the length of its
        request, so a request waiting for a pooled connection, or slow on the network, can
        never let a later request into the same window at the vendor.

        Args:
            budget: Name of the budget.
            requester: Who asks, ``"poller/partition"``.
            lane: The lane of the request (priority).
            weight: The poller's ``budget_weight``.
            cost: What the request is charged.
            max_wait_ms: Longest wait when the budget sets no ``max_wait`` of its own.
            hold_ms: How long the grant may stay held at most; ``None`` holds nothing.

        Returns:
            The grant, to pass to :meth:`settle` once the answer arrived.

        Raises:
            ConfigError: See :meth:`acquire`.
            BudgetTimeoutError: No grant within the wait limit.
        """
        line = self._lines.get(budget)
        if line is None:
            known = ", ".join(repr(name) for name in self._lines) or "none"
            raise ConfigError(f"unknown budget {budget!r} (declared: {known})", field="budget")
        charge = _number(cost, "cost", positive=False)
        share_weight = _number(weight, "budget_weight", positive=True)
        if lane not in LANE_PRIORITY:
            raise ConfigError(
                f"expected one of {sorted(LANE_PRIORITY)}, got {lane!r}", field="lane"
            )
        if not isinstance(requester, str):
            raise ConfigError(f"expected a string, got {requester!r}", field="requester")
        if charge == 0:
            return BudgetHold(budget, 0)
        capacity = line.policy.requests
        if line.policy.burst is not None:
            capacity = min(capacity, line.policy.burst)
        if charge > capacity:
            raise ConfigError(
                f"a cost of {cost!r} can never be served by budget {budget!r}, which allows "
                f"{capacity} " + ("at once" if line.policy.burst is not None else "per window"),
                field="cost",
            )
        held = hold_ms is not None and self._holds and line.policy.burst is None
        limit = line.budget.max_wait_ms if line.budget.max_wait_ms is not None else max_wait_ms
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigError(f"expected an integer >= 0, got {limit!r}", field="max_wait_ms")

        now = self._clock.now()
        waiter = _Waiter(
            seq=next(self._seq),
            requester=requester,
            rank=LANE_PRIORITY[lane],
            weight=share_weight,
            cost=charge,
            enqueued_at=now,
            deadline=now + limit,
            future=asyncio.get_running_loop().create_future(),
            hold_ms=max(0, hold_ms) if held and hold_ms is not None else None,
            ticket=f"{self._instance}-{next(self._tickets)}" if held else None,
        )
        if held:
            line.recheck_ms = max(1, line.policy.per_ms // line.policy.requests)
        share = line.shares.setdefault(requester, _Share())
        if share.waiting == 0:
            share.served_per_weight = max(share.served_per_weight, line.virtual)
        share.waiting += 1
        line.queue.append(waiter)
        self._kick(line)
        try:
            waited = await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                # Granted or failed just before the cancellation landed; the outcome is
                # dropped (a grant is forfeited: it counts, but the request is never sent).
                waiter.future.exception()
            if self._remove(line, waiter):
                self._kick(line)
            raise
        return BudgetHold(budget, waited, waiter.ticket, waiter.stamp)

    async def settle(self, hold: BudgetHold) -> None:
        """The answer of a held grant arrived: from now on it counts until ``per`` after now.

        A store failure is not raised: the grant then stays held until its hold runs out,
        which only makes the budget stricter for a while.

        Args:
            hold: What :meth:`hold` returned (nothing happens when it holds nothing).
        """
        line = self._lines.get(hold.budget)
        if line is None or hold.ticket is None or hold.stamp is None:
            return
        now = self._clock.now()
        settle = getattr(self._store, "settle")  # noqa: B009 - an optional capability
        try:
            await settle(line.name, line.policy, hold.ticket, stamp=hold.stamp, at=now, now=now)
        except Exception as error:
            _log.warning("budget %s: could not settle a held grant: %s", line.name, error)
            return
        if line.queue:
            self._kick(line)

    # --- the worker ---------------------------------------------------------------------

    def _kick(self, line: _Line) -> None:
        """Make the budget's worker look at the queue again (starting it if needed)."""
        loop = asyncio.get_running_loop()
        if line.worker is not None and line.worker.get_loop() is not loop:
            # An earlier event loop ended (an engine run again under a new ``asyncio.run``):
            # its worker and waiters died with it and must not block this loop's requests.
            for stale in [w for w in line.queue if w.future.get_loop() is not loop]:
                self._remove(line, stale)
            line.worker = line.wake = None
        if line.worker is None:
            line.worker = loop.create_task(self._serve(line), name=f"watukuy-budget-{line.name}")
        elif line.wake is not None and not line.wake.done():
            line.wake.set_result(None)
        else:
            line.dirty = True

    async def _serve(self, line: _Line) -> None:
        me = asyncio.current_task()
        try:
            while True:
                line.dirty = False
                waiter = self._pick(line)
                if waiter is None:
                    return
                try:
                    now = self._clock.now()
                    if waiter.hold_ms is not None and waiter.ticket is not None:
                        stamp = now + waiter.hold_ms
                        wait = await self._store.try_hold(  # type: ignore[attr-defined]
                            line.name,
                            line.policy,
                            waiter.cost,
                            now,
                            stamp=stamp,
                            ticket=waiter.ticket,
                        )
                        if wait <= 0:
                            waiter.stamp = stamp
                    else:
                        wait = await self._store.try_take(line.name, line.policy, waiter.cost, now)
                except Exception as error:
                    # The store failed for this request only; the others still get a try.
                    self._remove(line, waiter)
                    if not waiter.future.done():
                        waiter.future.set_exception(error)
                    continue
                if waiter.future.done():
                    continue  # cancelled while the store answered
                now = self._clock.now()
                if wait <= 0:
                    self._grant(line, waiter, now)
                elif not self._expire(line, now) and not line.dirty:
                    deadline = min(w.deadline for w in line.queue if not w.future.done())
                    nap = min(wait, deadline - now)
                    if line.recheck_ms is not None:
                        nap = min(nap, line.recheck_ms)
                    await self._nap(line, max(1, nap))
        except asyncio.CancelledError:
            if line.worker is me:
                self._fail_all(line, None)
            raise
        except Exception as error:  # pragma: no cover - a bug; never leave waiters hanging
            if line.worker is me:
                self._fail_all(line, error)
        finally:
            # A worker of an event loop that already ended must not touch its successor.
            if line.worker is me:
                line.worker = None
                line.wake = None

    def _pick(self, line: _Line) -> _Waiter | None:
        weighted = line.budget.fairness == "weighted"
        best: _Waiter | None = None
        best_key: tuple[int, float, float, int] | None = None
        for waiter in line.queue:
            if waiter.future.done():
                continue
            share = line.shares[waiter.requester]
            if weighted:
                key = (waiter.rank, share.served_per_weight, 0.0, waiter.seq)
            else:
                # Earliest deadline first, then the requester served least recently.
                key = (waiter.rank, float(waiter.deadline), float(share.last_served), waiter.seq)
            if best_key is None or key < best_key:
                best, best_key = waiter, key
        return best

    def _grant(self, line: _Line, waiter: _Waiter, now: int) -> None:
        self._remove(line, waiter)
        share = line.shares[waiter.requester]
        line.grants += 1
        share.last_served = line.grants
        line.virtual = max(line.virtual, share.served_per_weight)
        share.served_per_weight += waiter.cost / waiter.weight
        waiter.future.set_result(max(0, now - waiter.enqueued_at))

    def _expire(self, line: _Line, now: int) -> bool:
        expired = [w for w in line.queue if not w.future.done() and w.deadline <= now]
        for waiter in expired:
            self._remove(line, waiter)
            waiter.future.set_exception(BudgetTimeoutError(line.name, now - waiter.enqueued_at))
        return bool(expired)

    def _remove(self, line: _Line, waiter: _Waiter) -> bool:
        """Take ``waiter`` off the queue; ``False`` when it was no longer on it."""
        try:
            line.queue.remove(waiter)
        except ValueError:
            return False
        line.shares[waiter.requester].waiting -= 1
        return True

    def _fail_all(self, line: _Line, error: Exception | None) -> None:
        for waiter in list(line.queue):
            self._remove(line, waiter)
            if waiter.future.done():
                continue
            if error is None:
                waiter.future.cancel()
            else:
                waiter.future.set_exception(error)

    async def _nap(self, line: _Line, ms: int) -> None:
        """Sleep ``ms`` on the clock, or less when the queue changes meanwhile."""
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()
        line.wake = wake
        sleeper = loop.create_task(self._clock.sleep(ms))
        try:
            await asyncio.wait((sleeper, wake), return_when=asyncio.FIRST_COMPLETED)
        finally:
            line.wake = None
            sleeper.cancel()
            if not wake.done():
                wake.cancel()

    def __repr__(self) -> str:
        queued = {name: self.waiting(name) for name in self._lines}
        return f"BudgetManager(waiting={queued})"
