"""The engine: pollers, a store, and the loop that runs whatever is due.

:class:`EngineCore` holds everything that is pure (scheduling, consumers, operations);
``watukuy.Engine`` adds the real-world defaults (system clock, httpx, signal handling).
Two ways to run it: ``start()``/``stop()`` (or ``async with``) for a daemon that wakes
exactly when the next key is due, and ``tick()`` for one pass from a cron or a serverless
function. Both agree because every decision is read from, and written to, the store.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast, overload

from watukuy.cursor import PageCursor, make_strategy
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, StoreError, WatukuyError
from watukuy.model.events import Event
from watukuy.model.http_port import HttpFactory
from watukuy.model.options import Budget
from watukuy.model.partition import Partition
from watukuy.model.ports import (
    BudgetPolicy,
    BudgetStore,
    Clock,
    Offload,
    Random,
    StateStore,
    StoreClock,
    budget_capacity,
    describe_capacity,
)
from watukuy.model.redact import RedactingLogger, Redaction, serialize_error
from watukuy.model.rows import DEFAULT_CONSUMER, Lane, PKey, PollerState
from watukuy.scheduler import backoff_ceiling, planned_top

from ._hookbus import HookBus, as_hook_list
from .admission import Admission, Pace, admission_limit, start_pace
from .consumers import (
    Consumer,
    Consumers,
    Handler,
    HandlerConsumer,
    Subscription,
    check_consumer_name,
)
from .context import HandlerContext
from .deadline import finish_by
from .filters import EventFilter, as_filter
from .operations import DeletesOperations, Operations, ParkedOperations, PartitionOperations
from .partition_book import PartitionBook
from .poller import PollerDefinition
from .results import EngineStatus, LeaseOptions, TickResult
from .runner import EngineDeps, KeyRunner, KeyRunResult, TickPollResult, wake_time
from .stalls import Stall, diagnose

if TYPE_CHECKING:
    from watukuy.budget.manager import BudgetManager

__all__ = ["EngineCore"]

T = TypeVar("T")
H = TypeVar("H", bound=Callable[..., Any])
TypedHandler = Callable[[Event[T], HandlerContext], Awaitable[None] | None]
"""A handler for the items of one poller: ``(event, ctx)``, sync or async."""

_log = logging.getLogger("watukuy")

DEFAULT_TICK_CONCURRENCY = 4
_RETRY_LEASED_MIN_MS = 1_000
_RETRY_LEASED_FLOOR_MS = 100
_MAX_SPREAD_MS = 500
_STORE_ERROR_MIN_MS = 1_000
TICK_GRACE_MS = 2_000
"""How long ``tick(max_duration=...)`` may overrun its deadline while runs still wait."""


class EngineCore(Operations):
    """The engine without defaults for the outside world (see ``watukuy.Engine``).

    Args:
        store: Where all state lives (``MemoryStore``, ``SqliteStore``, ...).
        pollers: The poller definitions (a list, or a mapping whose keys equal the names).
        clock: Time (required here; ``watukuy.Engine`` defaults to the system clock).
        random: Randomness (jitter, ids).
        offload: Where sync handlers and sync ``fetch`` functions run (required here: the
            runtime starts no threads; ``watukuy.Engine`` passes worker threads).
        budgets: Named rate budgets, ``{"erp": Budget(requests=100, per="1m")}``.
        budget_store: Where budget windows live (default in-process; ``RedisBudgetStore``
            shares them across processes).
        instance_id: This process's id in leases and ``inspect()``.
        hooks: A hook set or a list of them.
        lease: Lease TTL and renewal period.
        http: The factory behind ``ctx.http`` (``None``: fetch gets ``ctx.http = None``).
        dispatch_batch_size: Outbox rows loaded per dispatcher batch (1,000, about a
            page: delivering a batch then takes long enough to hide the next read).
        max_concurrent_keys: Keys run at once by the daemon (default: no limit).
        tick_concurrency: Keys run at once by ``tick()``.
        resync_every: How often the daemon asks the store's due index which keys wake soon,
            to see changes made by other processes (triggers from the CLI, other
            replicas); each resync also re-reads the state of a few keys in turn.
        auto_migrate: Run ``store.migrate()`` once before the first pass.
        fair_share_spread: Upper bound of the random delay the daemon adds before looking at
            a key again, so that replicas on one store share the keys evenly (default: a
            tenth of the poller's ``schedule.min``, at most 500 ms; ``0`` turns it off).
            A poll's delay never takes it past ``interval * (1 + schedule.jitter)``.
        redact: What counts as a secret in errors, logs and hook records: a
            :class:`~watukuy.model.redact.Redaction`, or a list of extra header / parameter
            names (default: the built-in names, see ``docs/security.md``).
    """

    def __init__(
        self,
        *,
        store: StateStore,
        pollers: Sequence[PollerDefinition[Any]] | Mapping[str, PollerDefinition[Any]],
        clock: Clock,
        random: Random,
        offload: Offload,
        budgets: Mapping[str, Budget] | None = None,
        budget_store: BudgetStore | None = None,
        instance_id: str | None = None,
        hooks: object | Sequence[object] | None = None,
        lease: LeaseOptions | None = None,
        http: HttpFactory | None = None,
        dispatch_batch_size: int = 1000,
        max_concurrent_keys: int | None = None,
        tick_concurrency: int = DEFAULT_TICK_CONCURRENCY,
        resync_every: Duration = "15s",
        auto_migrate: bool = True,
        fair_share_spread: Duration | None = None,
        redact: Redaction | Sequence[str] | None = None,
    ) -> None:
        if not isinstance(store, StateStore):
            raise ConfigError(f"expected a StateStore, got {store!r}", field="store")
        self._pollers = _index_pollers(pollers)
        self._budgets = _check_budgets(budgets, self._pollers)
        for name, value in (
            ("dispatch_batch_size", dispatch_batch_size),
            ("tick_concurrency", tick_concurrency),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"expected an integer >= 1, got {value!r}", field=name)
        if max_concurrent_keys is not None and (
            isinstance(max_concurrent_keys, bool)
            or not isinstance(max_concurrent_keys, int)
            or max_concurrent_keys < 1
        ):
            raise ConfigError(
                f"expected an integer >= 1 or None, got {max_concurrent_keys!r}",
                field="max_concurrent_keys",
            )
        self.redaction: Redaction = Redaction.coerce(redact)
        """The secrets policy every error, log line and hook record of this engine goes through."""
        self._log = RedactingLogger(_log, self.redaction)
        self.store = store
        self.clock = clock
        self.random = random
        self._offload = offload
        self.instance_id = instance_id or f"watukuy-{int(random.random() * 16**10):010x}"
        self._lease = lease or LeaseOptions()
        self._hooks = HookBus(as_hook_list(hooks), self._log)
        self._http = http
        self._budget_manager: BudgetManager | None = None
        if self._budgets:
            # Imported here: an engine without budgets never loads the budget machinery.
            from watukuy.budget.manager import BudgetManager
            from watukuy.budget.window import InMemoryBudgetStore

            self._budget_manager = BudgetManager(
                self._budgets,
                budget_store or InMemoryBudgetStore(),
                clock,
                instance_id=self.instance_id,
            )
        self._deps = EngineDeps(
            store=store,
            clock=clock,
            random=random,
            hooks=self._hooks,
            instance_id=self.instance_id,
            lease_ttl_ms=self._lease.ttl_ms,
            lease_renew_ms=self._lease.renew_every_ms,
            lease_margin_ms=self._lease.safety_margin_ms,
            batch_size=dispatch_batch_size,
            http=http,
            budgets=self._budget_manager,
            reconcile_strategy=make_strategy(PageCursor(initial=1)),
            budget_max_wait=lambda name: (
                self._budgets[name].max_wait_ms if name in self._budgets else None
            ),
            redaction=self.redaction,
            offload=offload,
        )
        self._max_concurrent = max_concurrent_keys
        self._tick_concurrency = tick_concurrency
        self._resync_ms = parse_duration(resync_every, "resync_every")
        self._fair_spread_ms = (
            None
            if fair_share_spread is None
            else parse_duration(fair_share_spread, "fair_share_spread")
        )
        self._auto_migrate = auto_migrate
        # Set by Engine when it runs on the system clock (a virtual clock is never skewed).
        self._check_skew = False
        self._migrated = False
        self._migrate_lock = asyncio.Lock()
        # poller name -> consumer name -> consumer (a poller with none has no entry)
        self._consumers: dict[str, dict[str, Consumer]] = {}
        self._warned_no_consumer: set[str] = set()
        self._book = PartitionBook(
            self._pollers,
            self.store,
            self.clock,
            appeared=self._partition_appeared,
            disappeared=self._partition_disappeared,
            logger=self._log,
        )
        self._tick_swept: set[str] = set()  # pollers whose every key tick() has visited
        self._status = EngineStatus.IDLE
        # daemon state
        self._loop_task: asyncio.Task[None] | None = None
        # (when the loop last went to sleep, when it planned to come round): inspect()
        # judges from it whether the loop is alive (see scheduler.loop_grace).
        self._loop_beat: tuple[int, int] | None = None
        self._running: dict[PKey, asyncio.Task[KeyRunResult]] = {}
        self._wake = asyncio.Event()
        self._heap: list[tuple[int, int, PKey]] = []
        # Due keys wait here, one line per budget, until a run on their budget may start.
        # Runs on a budget also start at its pace: a burst, then as fast as it grants.
        limits: dict[str, int] = {}
        paces: dict[str, Pace] = {}
        for name, budget in self._budgets.items():
            costs = [p.budget_cost for p in self._pollers.values() if p.budget == name]
            waits = [p.schedule.max_ms for p in self._pollers.values() if p.budget == name]
            limits[name] = admission_limit(budget, costs=costs, waits=waits)
            paces[name] = start_pace(budget, costs=costs, limit=limits[name])
        self._admission = Admission(limits, paces)
        self._stall_reported = False
        self._wake_at: dict[PKey, int] = {}
        # key -> (poll wake-up, its deadline): the top of the jitter band it must start by.
        self._deadlines: dict[PKey, tuple[int, int]] = {}
        self._forced: set[PKey] = set()
        # Keys whose last run failed before its state could be saved (the store failing):
        # (failures in a row, no new run before this time).
        self._store_backoff: dict[PKey, tuple[int, int]] = {}
        self._rerun: set[PKey] = set()  # keys asked for while they ran
        self._seq = itertools.count()
        self._next_resync = 0
        self._resync_failures = 0  # in a row (see _loop)
        self.parked = ParkedOperations(self)
        self.partitions = PartitionOperations(self)
        self.deletes = DeletesOperations(self)

    # --- public state -------------------------------------------------------------------

    @property
    def status(self) -> EngineStatus:
        """``idle``, ``running``, ``stopping`` or ``stopped``."""
        return self._status

    @property
    def pollers(self) -> Mapping[str, PollerDefinition[Any]]:
        """The poller definitions by name."""
        return dict(self._pollers)

    # --- consumers ----------------------------------------------------------------------

    @overload
    def on(
        self,
        poller: PollerDefinition[T],
        handler: None = None,
        *,
        when: Callable[[Event[T]], bool] | None = None,
        consumer: str | None = ...,
    ) -> Callable[[TypedHandler[T]], TypedHandler[T]]: ...

    @overload
    def on(
        self,
        poller: PollerDefinition[T],
        handler: TypedHandler[T],
        *,
        when: Callable[[Event[T]], bool] | None = None,
        consumer: str | None = ...,
    ) -> TypedHandler[T]: ...

    @overload
    def on(
        self,
        poller: str,
        handler: None = None,
        *,
        when: Callable[[Event[Any]], bool] | None = None,
        consumer: str | None = ...,
    ) -> Callable[[H], H]: ...

    @overload
    def on(
        self,
        poller: str,
        handler: H,
        *,
        when: Callable[[Event[Any]], bool] | None = None,
        consumer: str | None = ...,
    ) -> H: ...

    def on(
        self,
        poller: PollerDefinition[Any] | str,
        handler: Any = None,
        *,
        when: Callable[[Event[Any]], bool] | None = None,
        consumer: str | None = None,
    ) -> Any:
        """Attach a handler to a poller: ``(event, ctx)``, sync or async.

        Use it directly, ``engine.on("orders", handle)``, or as a decorator,
        ``@engine.on("orders")``. Returns the handler.

        A poller may have several consumers (handlers and subscriptions), each under its
        own ``consumer`` name: every one receives every event, with its own filter,
        attempts, retries and parking, so one failing never redelivers to the others.
        The name is what the store keeps their progress under: keep it stable across
        deploys, and register every consumer before the engine starts.

        Args:
            poller: The poller definition or its name.
            handler: ``(event, ctx)``; omitted when used as a decorator.
            when: Only events this filter passes reach the handler (``wk.changed(...)``,
                ``wk.created()``... combined with ``&``, ``|``, ``~``, or any
                ``(event) -> bool``); the others are acknowledged without it and counted
                (``inspect()``'s ``filtered``, the ``on_filtered`` hook).
            consumer: The consumer's name (1-64 letters, digits, ``_``, ``.``, ``-``),
                seen by the handler as ``ctx.consumer``. Omitted, it is ``"default"``, or
                the first free of ``"default-2"``, ``"default-3"``... in the order the
                handlers are attached: name each consumer of a poller that has several,
                so that reordering the code never hands one's progress to another.

        Raises:
            ConfigError: The poller already has a consumer of that name, the name or the
                handler is not valid, or ``when`` reads ``previous`` on a poller with
                ``retain="hash"``.
        """
        name = self._poller_name(poller)
        if consumer is not None:
            consumer = check_consumer_name(consumer)
        check = self._filter_for(name, when)
        if handler is None:

            def decorator(fn: H) -> H:
                self._attach(name, consumer, fn, check)
                return fn

            return decorator
        self._attach(name, consumer, handler, check)
        return handler

    def off(self, poller: PollerDefinition[Any] | str, consumer: str | None = None) -> None:
        """Detach the consumer named ``consumer`` of a poller, or all of them when it is
        ``None``. Their events wait in the outbox meanwhile."""
        name = self._poller_name(poller)
        by_name = self._consumers.get(name, {})
        names = list(by_name) if consumer is None else [consumer]
        for each in names:
            detached = by_name.pop(each, None)
            if isinstance(detached, Subscription):
                detached.close()
        if not by_name:
            self._consumers.pop(name, None)

    @overload
    def subscribe(
        self,
        poller: PollerDefinition[T],
        *,
        when: Callable[[Event[T]], bool] | None = None,
        consumer: str = ...,
    ) -> Subscription[T]: ...

    @overload
    def subscribe(
        self,
        poller: str,
        *,
        when: Callable[[Event[Any]], bool] | None = None,
        consumer: str = ...,
    ) -> Subscription[Any]: ...

    def subscribe(
        self,
        poller: PollerDefinition[Any] | str,
        *,
        when: Callable[[Event[Any]], bool] | None = None,
        consumer: str = DEFAULT_CONSUMER,
    ) -> Subscription[Any]:
        """Pull events with backpressure: ``async for event in engine.subscribe("orders")``.

        An event is acknowledged when you pull the next one (or leave an ``async with``
        block normally); an exception or cancellation leaves it unacknowledged, and it is
        delivered again. A subscription is a consumer like a handler of :meth:`on`, and
        shares the poller with the others under its own ``consumer`` name.

        Args:
            poller: The poller definition or its name.
            when: Only events this filter passes are offered; the others are acknowledged
                without being offered, as with :meth:`on`.
            consumer: The consumer's name, as with :meth:`on`.

        Raises:
            ConfigError: The poller already has a consumer of that name, the name is not
                valid, or ``when`` reads ``previous`` on a poller with ``retain="hash"``.
        """
        name = self._poller_name(poller)
        consumer = check_consumer_name(consumer)
        check = self._filter_for(name, when)
        subscription: Subscription[Any] = Subscription(
            name, self._subscription_closed, when=check, consumer=consumer
        )
        self._attach_consumer(name, consumer, subscription)
        return subscription

    def _subscription_closed(self, subscription: Subscription[Any]) -> None:
        by_name = self._consumers.get(subscription.name, {})
        if by_name.get(subscription.consumer) is subscription:
            del by_name[subscription.consumer]
            if not by_name:
                del self._consumers[subscription.name]

    def _filter_for(
        self, name: str, when: Callable[[Event[Any]], bool] | None
    ) -> EventFilter | None:
        if when is None:
            return None
        poller = self._pollers[name]
        check = as_filter(when, array_key=poller.array_key)
        if check.needs_previous and not poller.retain_payload:
            raise ConfigError(
                f"the filter {check!r} reads previous and changes, which poller {name!r} "
                'does not keep with retain="hash"; define it with retain="payload"',
                field="when",
            )
        return check

    def _attach(
        self, name: str, consumer: str | None, handler: Handler, when: EventFilter | None = None
    ) -> None:
        if not callable(handler):
            raise ConfigError(f"expected a callable handler, got {handler!r}", field="handler")
        if consumer is None:
            consumer = self._free_default_name(name)
        manual = self._pollers[name].delivery.ack_mode == "manual"
        self._attach_consumer(
            name,
            consumer,
            HandlerConsumer(handler, manual_ack=manual, when=when, offload=self._offload),
        )

    def _free_default_name(self, name: str) -> str:
        """The name of a handler attached without one: ``"default"``, else the first free
        ``"default-<n>"`` from 2."""
        taken = self._consumers.get(name, {})
        if DEFAULT_CONSUMER not in taken:
            return DEFAULT_CONSUMER
        number = 2
        while f"{DEFAULT_CONSUMER}-{number}" in taken:
            number += 1
        return f"{DEFAULT_CONSUMER}-{number}"

    def _attach_consumer(self, name: str, consumer_name: str, consumer: Consumer) -> None:
        by_name = self._consumers.setdefault(name, {})
        if consumer_name in by_name:
            raise ConfigError(
                f"poller {name!r} already has a consumer named {consumer_name!r}; give "
                "another handler or subscription its own consumer= name",
                field="consumer",
            )
        by_name[consumer_name] = consumer
        self._warned_no_consumer.discard(name)
        self._tick_swept.discard(name)  # outboxes may wait for it: look at every key
        # Events may be waiting for a consumer: let the daemon look at every key now.
        for key in list(self._wake_at):
            if key.poller == name:
                self._schedule(key, self.clock.now())
        self._wake.set()

    def _poller_name(self, poller: PollerDefinition[Any] | str) -> str:
        name = poller.name if isinstance(poller, PollerDefinition) else poller
        if name not in self._pollers:
            raise WatukuyError(
                f"unknown poller {name!r}; known: {sorted(self._pollers)}", code="UNKNOWN_POLLER"
            )
        return name

    # --- setup --------------------------------------------------------------------------

    async def migrate(self) -> None:
        """Create the store's tables/keys (idempotent)."""
        await self.store.migrate()
        self._migrated = True

    async def _ensure_migrated(self) -> None:
        # Migrate first: the skew check's store call then finds the schema checked, where
        # the other way round a store that migrates lazily checks it twice.
        if not self._migrated and self._auto_migrate:
            async with self._migrate_lock:
                if not self._migrated:
                    await self.store.migrate()
                    self._migrated = True
        if self._check_skew:
            self._check_skew = False
            await self._warn_on_clock_skew()

    async def _warn_on_clock_skew(self) -> None:
        """Compare the store server's clock with this process's, once: leases are judged by
        each holder's own clock, so hosts must agree within the lease safety margin."""
        if not isinstance(self.store, StoreClock):
            return
        try:
            before = self.clock.now()
            server = await self.store.server_time()
            after = self.clock.now()
        except Exception as error:  # the first real call reports a store that is down
            self._log.debug("could not read the store's clock: %s", error)
            return
        skew = server - (before + after) // 2
        bound = max(self._lease.safety_margin_ms // 2, 1)
        if abs(skew) - (after - before) // 2 > bound:
            self._log.warning(
                "the store's clock is %s ms %s this process's clock; leases are judged by "
                "each instance's own clock, so keep the clocks of every host within "
                "lease.safety_margin (%s ms) of each other (NTP); see docs/stores.md",
                abs(skew),
                "ahead of" if skew > 0 else "behind",
                self._lease.safety_margin_ms,
            )

    async def _partitions_of(self, name: str, *, force: bool = False) -> list[Partition]:
        """The current partitions of a poller, refreshing them when due (or forced)."""
        return await self._book.of(name, force=force)

    def _partition_appeared(self, key: PKey, now: int) -> None:
        self._schedule(key, now)
        self._wake.set()

    def _partition_disappeared(self, key: PKey) -> None:
        self._forget(key)
        self._wake.set()

    # --- one pass -----------------------------------------------------------------------

    async def tick(
        self, max_duration: Duration | None = None, only: Sequence[str] | str | None = None
    ) -> TickResult:
        """One pass over every due key: drain, poll, persist, release. Never raises for
        fetch or handler failures; they are in ``TickResult.polled[i].error``.

        Args:
            max_duration: Deadline for the whole pass, checked before each key and between
                pages (a running page is not interrupted). Whatever the store or the API
                does, the pass returns at most ``TICK_GRACE_MS`` (2 s) after it: runs still
                waiting then are cancelled and ``timed_out`` is set.
            only: Restrict the pass to these poller names.
        """
        if self._status in (EngineStatus.STOPPING, EngineStatus.STOPPED):
            raise WatukuyError(f"tick() on a {self._status.value} engine", code="NOT_RUNNING")
        names = self._select(only)
        started = self.clock.now()
        deadline = (
            None if max_duration is None else started + parse_duration(max_duration, "max_duration")
        )
        results: list[TickPollResult] = []
        counts = {"leased": 0, "not_due": 0}
        flags = {"timed_out": False}
        running: dict[PKey, tuple[asyncio.Task[Any], int]] = {}
        work = asyncio.ensure_future(
            self._tick_pass(names, started, deadline, results, counts, flags, running)
        )
        stalls: list[tuple[PKey, int, Stall]] = []
        if deadline is None:
            await work
        elif not await finish_by(
            self.clock,
            work,
            deadline + TICK_GRACE_MS,
            before_cancel=lambda: stalls.extend(self._stalls(work, running, deadline, names)),
        ):
            # The store or the API stopped answering and its own time limits did not cover
            # it: the pass returns anyway, saying what each unfinished run waited for.
            flags["timed_out"] = True
            await self._report_stalls(stalls, deadline, results)
        return TickResult(
            polled=list(results),
            skipped_leased=counts["leased"],
            skipped_not_due=counts["not_due"],
            duration_ms=self.clock.now() - started,
            timed_out=flags["timed_out"],
        )

    def _stalls(
        self,
        work: asyncio.Future[Any],
        running: Mapping[PKey, tuple[asyncio.Task[Any], int]],
        deadline: int,
        names: list[str],
    ) -> list[tuple[PKey, int, Stall]]:
        """What each run still going at the end of the grace was waiting for (the pass
        itself when no run had started: it was listing keys)."""
        late = self.clock.now() - deadline
        if not running:
            key = PKey(names[0], "") if names else PKey("", "")
            what = f"the pass (choosing the keys of {', '.join(names)})"
            return [(key, self.clock.now(), diagnose(work, self.store, what, late))]
        return [
            (key, began, diagnose(task, self.store, _key_text(key), late))
            for key, (task, began) in running.items()
        ]

    async def _report_stalls(
        self, stalls: list[tuple[PKey, int, Stall]], deadline: int, results: list[TickPollResult]
    ) -> None:
        """Record each stall as a failed cycle: a warning, ``TickResult.errors``, ``on_error``."""
        self._log.warning(
            "tick(): still waiting %d ms after max_duration: %s; the pass returns and its "
            "unfinished runs are cancelled",
            self.clock.now() - deadline,
            "; ".join(f"{stall.what} waited for {stall.waiting_for}" for _, _, stall in stalls),
        )
        for key, began, stall in stalls:
            error = serialize_error(stall.error, redaction=self.redaction)
            lane = cast(Lane, stall.lane)
            results.append(
                TickPollResult(
                    poller=key.poller,
                    partition=key.partition,
                    lane=lane,
                    items=0,
                    events=0,
                    delivered=0,
                    duration_ms=self.clock.now() - began,
                    error=error,
                )
            )
            await self._hooks.emit(
                "on_error",
                poller=key.poller,
                partition=key.partition,
                lane=lane,
                instance_id=self.instance_id,
                error=error,
                phase=stall.phase,
            )

    async def _tick_pass(
        self,
        names: list[str],
        started: int,
        deadline: int | None,
        results: list[TickPollResult],
        counts: dict[str, int],
        flags: dict[str, bool],
        running: dict[PKey, tuple[asyncio.Task[Any], int]],
    ) -> None:
        await self._ensure_migrated()
        keys: list[tuple[PollerDefinition[Any], Partition]] = []
        for name in names:
            partitions = await self._partitions_of(name)
            chosen = await self._tick_keys(name, partitions, started)
            keys.extend((self._pollers[name], partition) for partition in chosen)
            counts["not_due"] += len(partitions) - len(chosen)
        queue = iter(keys)

        async def worker() -> None:
            for poller, partition in queue:
                if deadline is not None and self.clock.now() >= deadline:
                    flags["timed_out"] = True
                    return
                key = PKey(poller.name, partition.key)
                if self._store_backoff.get(key, (0, 0))[1] > self.clock.now():
                    counts["not_due"] += 1  # the store failed this key's last run: backing off
                    continue
                forced = key in self._forced
                self._forced.discard(key)
                task = asyncio.current_task()
                if task is not None:
                    running[key] = (task, self.clock.now())
                try:
                    outcome = await self._run_key(
                        poller, partition, force=forced, deadline=deadline
                    )
                finally:
                    running.pop(key, None)
                results.extend(outcome.results)
                if outcome.outcome == "leased":
                    counts["leased"] += 1
                elif outcome.outcome in ("not-due", "paused"):
                    counts["not_due"] += 1

        workers = [
            asyncio.create_task(worker())
            for _ in range(min(self._tick_concurrency, max(1, len(keys))))
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _tick_keys(self, name: str, partitions: list[Partition], now: int) -> list[Partition]:
        """The partitions a tick visits.

        The first tick of an engine (or the first after a consumer was attached) visits
        every key: that is how keys never polled, keys that predate the due index and
        outboxes waiting for a consumer are found. A warm engine then asks the store's due
        index and visits only the keys due now, partitions listed since the last tick and
        forced keys: an idle tick costs in proportion to the due keys, not to all keys.
        (The daemon's rolling audit has no counterpart here: an idle tick reads no state.)
        """
        fresh = self._book.take_fresh(name)
        if name not in self._tick_swept:
            self._tick_swept.add(name)
            return partitions
        try:
            due = await self.store.due_keys(name, now)
        except StoreError as error:
            # Without the due index every key is visited: each run then meets the store on
            # its own, reports its error and backs off (instead of the whole pass failing).
            self._log.warning("tick(): the due index of %s could not be read: %s", name, error)
            return partitions
        wanted = [partition for partition, _ in due]
        # Forced keys, and keys whose last run the store failed (it may not list them).
        again = {
            key.partition for key in (*self._forced, *self._store_backoff) if key.poller == name
        }
        wanted += sorted(fresh | again)
        return self._book.pick(name, wanted)

    def _select(self, only: Sequence[str] | str | None) -> list[str]:
        if only is None:
            return list(self._pollers)
        names = [only] if isinstance(only, str) else list(only)
        return [self._poller_name(name) for name in names]

    async def _run_key(
        self,
        poller: PollerDefinition[Any],
        partition: Partition,
        *,
        force: bool = False,
        deadline: int | None = None,
    ) -> KeyRunResult:
        by_name = self._consumers.get(poller.name)
        runner = KeyRunner(
            self._deps,
            poller,
            partition,
            Consumers(by_name) if by_name else None,
            force=force,
            deadline=deadline,
            stopping=lambda: self._status is EngineStatus.STOPPING,
        )
        try:
            result = await runner.run()
        except Exception as error:
            # A store failure before the lane could run (load_state, acquire_lease, the final
            # save), or a bug: report it like a failed cycle; the key backs off in memory
            # (the store that would keep its schedule is the one failing).
            failures = self._store_backoff.get(runner.key, (0, 0))[0] + 1
            ceiling = backoff_ceiling(failures, poller.schedule.backoff)
            jittered = ceiling // 2 + round(self.random.random() * ceiling / 2)
            wait = max(_STORE_ERROR_MIN_MS, jittered)
            self._store_backoff[runner.key] = (failures, self.clock.now() + wait)
            self._log.warning(
                "run of %s failed: %s (failure %d in a row; next try in %d ms)",
                runner.key,
                error,
                failures,
                wait,
                exc_info=not isinstance(error, WatukuyError),
            )
            await self._hooks.emit(
                "on_error",
                poller=poller.name,
                partition=partition.key,
                lane="live",
                instance_id=self.instance_id,
                error=serialize_error(error, redaction=self.redaction),
                phase="commit",
            )
            return KeyRunResult(
                "ran",
                results=[
                    TickPollResult(
                        poller=poller.name,
                        partition=partition.key,
                        lane="live",
                        items=0,
                        events=0,
                        delivered=0,
                        duration_ms=0,
                        error=serialize_error(error, redaction=self.redaction),
                    )
                ],
            )
        self._store_backoff.pop(runner.key, None)
        waiting = not by_name and any(r.events for r in result.results)
        if waiting and poller.name not in self._warned_no_consumer:
            self._warned_no_consumer.add(poller.name)
            self._log.warning(
                "poller %s has no handler: its events wait in the outbox until on() or "
                "subscribe() is called",
                poller.name,
            )
        return result

    # --- daemon -------------------------------------------------------------------------

    async def start(self) -> None:
        """Run the daemon in the background until :meth:`stop`."""
        if self._status is EngineStatus.RUNNING:
            raise WatukuyError("the engine is already running", code="INVALID_STATE")
        if self._status in (EngineStatus.STOPPING, EngineStatus.STOPPED):
            raise WatukuyError(
                f"the engine is {self._status.value}; create a new one", code="NOT_RUNNING"
            )
        await self._ensure_migrated()
        self._status = EngineStatus.RUNNING
        await self._resync(initial=True)
        self._loop_beat = (self.clock.now(), self.clock.now())  # due round at once
        self._loop_task = asyncio.create_task(self._loop(), name="watukuy-engine")

    async def stop(self, drain: bool = True, timeout: Duration = "30s") -> None:
        """Stop the daemon.

        Args:
            drain: Let in-flight cycles finish their current page, deliveries and schedule
                write (up to ``timeout``); ``False`` cancels them at once. Cancelled
                deliveries are not acked and are delivered again later.
            timeout: Longest wait for in-flight work when draining.
        """
        if self._status is EngineStatus.STOPPED:
            return
        timeout_ms = parse_duration(timeout, "timeout")
        self._status = EngineStatus.STOPPING
        self._wake.set()
        loop_task, self._loop_task = self._loop_task, None
        if loop_task is not None:
            loop_task.cancel()
            await asyncio.gather(loop_task, return_exceptions=True)
        running = list(self._running.values())
        if running and drain:
            await _wait_with_clock(running, self.clock, timeout_ms)
        for task in running:
            if not task.done():
                task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        self._running.clear()
        self._admission.clear()
        self._deadlines.clear()
        for by_name in list(self._consumers.values()):
            for consumer in list(by_name.values()):
                if isinstance(consumer, Subscription):
                    consumer.close()
        if self._http is not None:
            await self._http.aclose()
        self._status = EngineStatus.STOPPED

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop(drain=exc_type is None)

    def _schedule(self, key: PKey, at: int | None) -> None:
        if at is None:
            self._wake_at.pop(key, None)
            return
        failed = self._store_backoff.get(key)
        if failed is not None:
            # The store failed this key's last run: whatever its stored state says, the next
            # run waits out the backoff (a trigger, too: the store is what is failing).
            at = max(at, failed[1])
        current = self._wake_at.get(key)
        if current is not None and current <= at and key not in self._running:
            return
        self._wake_at[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), key))

    def _spread(self, poller: PollerDefinition[Any]) -> int:
        """A random delay added to this engine's next look at a key.

        Replicas read the same ``next_due_at`` from the store; without a spread, the one
        whose event loop happens to be quickest wins every key, every time. With it, each
        wake-up goes to a random replica and the shares even out. Bounded by
        ``fair_share_spread`` (default: a tenth of ``schedule.min``, at most 500 ms).
        """
        limit = self._spread_limit(poller)
        return int(self.random.random() * limit) if limit > 0 else 0

    def _poll_top(
        self,
        poller: PollerDefinition[Any],
        result: KeyRunResult,
        state: PollerState,
        started: int,
        now: int,
    ) -> int:
        """The latest a poll wake-up should start the key's next run: the start of its last
        live run plus ``interval * (1 + jitter)``, less the planning allowance (what
        :func:`~watukuy.scheduler.on_success` plans at most, see
        :func:`~watukuy.scheduler.planned_top`)."""
        schedule = poller.schedule
        interval = state.schedule.interval_ms
        interval = interval if interval is not None else schedule.max_ms
        if any(r.lane == "live" for r in result.results):
            base = started  # this run polled: the runner counted from its start
        else:
            # No live cycle in this run: the schedule still counts from the last one, whose
            # lane started a little after its run did (so this top errs on the late side).
            last = state.schedule.last_poll_at
            base = last if last is not None and last <= now else now
        return base + planned_top(interval, schedule.jitter)

    def _spread_within(self, poller: PollerDefinition[Any], at: int, top: int) -> int:
        """The spread of a poll wake-up at ``at``, drawn under ``top``, the top of its
        jitter band (:meth:`_poll_top`).

        The spread is drawn uniformly from the room left between ``at`` and the top (at
        most the whole spread), so replicas still take turns and no wake-up takes a poll
        past what the schedule promises. A wake-up already past the top (a paced or
        throttled one) keeps its whole spread.
        """
        limit = self._spread_limit(poller)
        if limit <= 0:
            return 0
        if at <= top:
            limit = min(limit, top - at)
        return int(self.random.random() * limit)

    def _spread_limit(self, poller: PollerDefinition[Any]) -> int:
        if self._fair_spread_ms is not None:
            return self._fair_spread_ms
        return min(_MAX_SPREAD_MS, poller.schedule.min_ms // 10)

    def _forget(self, key: PKey) -> None:
        self._wake_at.pop(key, None)
        self._deadlines.pop(key, None)

    def _wake_key(self, key: PKey, *, force: bool = False) -> None:
        """Make a key due now in this process (operations call it after unfenced writes)."""
        if force:
            self._forced.add(key)
        if self._status is EngineStatus.RUNNING:
            self._wake_at.pop(key, None)
            self._schedule(key, self.clock.now())
            self._wake.set()

    async def _resync(self, *, initial: bool = False) -> None:
        """Bring the wake-up index up to date with changes made by other processes.

        The first pass reads every key's state. The others ask the store's due index which
        keys wake before the next resync and re-read the state of ``AUDIT_BATCH`` keys in
        turn (the rolling audit), so an idle pass costs in proportion to the keys about to
        be due, not to all keys.
        """
        now = self.clock.now()
        for name, poller in self._pollers.items():
            try:
                partitions = await self._partitions_of(name)
            except Exception as error:
                self._log.warning("partitions() of %s failed: %s", name, error)
                continue
            if initial:
                await self._sweep(name, poller, partitions, now, recovering=True)
                continue
            # An entry within the spread of what this engine already holds is its own
            # schedule coming back (the index has no spread): nothing to do for it.
            slack = self._spread_limit(poller)
            for partition, at in await self.store.due_keys(name, now + self._resync_ms):
                key = PKey(name, partition)
                current = self._wake_at.get(key)
                if current is not None and current - slack <= at:
                    continue
                if key in self._running or self._book.named(key) is None:
                    continue
                self._wake_at.pop(key, None)
                self._schedule(key, at)
            audit = self._book.audit_slice(name, partitions)
            await self._sweep(name, poller, audit, now, recovering=False, sooner_only=True)
        self._next_resync = now + self._resync_ms
        self._resync_failures = 0

    async def _sweep(
        self,
        name: str,
        poller: PollerDefinition[Any],
        partitions: list[Partition],
        now: int,
        *,
        recovering: bool,
        sooner_only: bool = False,
    ) -> None:
        """Read these keys' state and reschedule them (start-up, and the rolling audit,
        which only ever brings a wake-up forward: a key woken too early finds itself not
        due and reschedules itself)."""
        has_consumer = name in self._consumers
        for partition in partitions:
            key = PKey(name, partition.key)
            if key in self._running:
                continue
            state = await self.store.load_state(key)
            at = wake_time(poller, state, has_consumer=has_consumer, now=now)
            live = recovering and has_consumer and state is not None and not state.paused
            if live and await self.store.count_pending(key) > 0:
                at = now  # a previous process left events in the outbox: deliver them first
            if sooner_only:
                current = self._wake_at.get(key)
                if at is None or (current is not None and current <= at):
                    continue
            self._wake_at.pop(key, None)
            self._schedule(key, at)

    async def _loop(self) -> None:
        while self._status is EngineStatus.RUNNING:
            # Due keys start before the resync and the partition refresh, whose store round
            # trips would otherwise delay every key due now by as long as they take.
            self._launch_due(self.clock.now())
            try:
                if self.clock.now() >= self._next_resync:
                    await self._resync()
                for name in self._pollers:
                    await self._partitions_of(name)
            except Exception as error:  # a failing partitions() or store must not stop the loop
                self._log.warning(
                    "engine loop: %s", error, exc_info=not isinstance(error, WatukuyError)
                )
                if self.clock.now() >= self._next_resync:
                    # The resync itself failed (the store's due index, say): try it again
                    # after a backoff, not at once and again in a tight loop.
                    self._resync_failures += 1
                    backoff = _STORE_ERROR_MIN_MS << min(self._resync_failures - 1, 10)
                    self._next_resync = self.clock.now() + min(self._resync_ms, backoff)
            self._wake.clear()
            # What the resync found due starts too; the wake-up comes from the same reading
            # of the clock as the starts (see _launch_due).
            await self._sleep_until(self._launch_due(self.clock.now()))

    def _launch_due(self, now: int) -> int:
        """Start the runs that may start at ``now`` and return when to look again.

        Every due wake-up joins the line of its poller's budget; then runs start, the
        earliest deadline first, on the budgets with room (see runtime/admission.py).

        The next look is computed here, from the state the starts were decided on and the
        same ``now``: whatever may start at ``now`` has started, so a line still waiting
        is held back by its budget's room (a finishing run wakes the loop) or by its pace
        (whose time is among the wake-ups). Read at a later ``now``, a pace that became
        ready in between looked like nothing to wait for, and the loop slept until the
        next resync while every key was overdue.
        """
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if self._wake_at.get(entry[2]) != entry[0]:
                continue  # superseded by a later _schedule
            poller = self._pollers.get(entry[2].poller)
            budget = None if poller is None else poller.budget
            # The deadline stands only for the wake-up it was computed with.
            planned = self._deadlines.pop(entry[2], None)
            deadline = planned[1] if planned is not None and planned[0] == entry[0] else None
            self._admission.push(entry, budget, urgent=entry[2] in self._forced, deadline=deadline)
        while self._max_concurrent is None or len(self._running) < self._max_concurrent:
            picked = self._admission.pop(self._current, now)
            if picked is None:
                break
            (_, _, key), budget = picked
            del self._wake_at[key]
            if key in self._running:
                # Asked for (a trigger, say) while the key runs: the run in progress may
                # already have read the state the request wrote, so run once more after it.
                self._rerun.add(key)
                continue
            poller = self._pollers.get(key.poller)
            partition = self._book.named(key)
            if poller is None or partition is None:
                continue
            force = key in self._forced
            self._forced.discard(key)
            self._admission.started(budget)
            task = asyncio.create_task(self._run_and_reschedule(poller, partition, force))
            self._running[key] = task
        return self._next_wake(now)

    def _current(self, entry: tuple[int, int, PKey]) -> bool:
        """``entry`` is still the key's wake-up (no later ``_schedule`` superseded it)."""
        return self._wake_at.get(entry[2]) == entry[0]

    async def _run_and_reschedule(
        self, poller: PollerDefinition[Any], partition: Partition, force: bool
    ) -> KeyRunResult:
        key = PKey(poller.name, partition.key)
        result = KeyRunResult("not-due")
        started = self.clock.now()  # where the runner counts the next interval from
        try:
            result = await self._run_key(poller, partition, force=force)
        finally:
            self._running.pop(key, None)
            self._admission.finished(poller.budget)
            now = self.clock.now()
            if result.outcome == "leased":
                # Look again when the holder's lease runs out (a dead replica's keys move to
                # a live one within one TTL), or sooner if the holder lets go: its run ends
                # by rescheduling the key, which this engine sees at that time.
                retry = now + max(_RETRY_LEASED_MIN_MS, self._lease.ttl_ms // 2)
                if result.leased_until is not None:
                    retry = min(retry, max(now + _RETRY_LEASED_FLOOR_MS, result.leased_until))
                at: int | None = retry + self._spread(poller)
            elif result.outcome == "lease-lost":
                at = now + self._lease.ttl_ms // 2
            elif result.state is None:
                failed = self._store_backoff.get(key)
                at = failed[1] if failed is not None else now + _STORE_ERROR_MIN_MS
            else:
                at = wake_time(
                    poller, result.state, has_consumer=poller.name in self._consumers, now=now
                )
                if at is not None and at > now and at == result.state.schedule.next_due_at:
                    # A poll wake-up: replicas race for these, and its deadline orders the
                    # admission line when more keys are due than the budget serves.
                    top = self._poll_top(poller, result, result.state, started, now)
                    at += self._spread_within(poller, at, top)
                    self._deadlines[key] = (at, max(at, top))
            if key in self._rerun:
                self._rerun.discard(key)
                if at is not None and result.outcome in ("ran", "not-due"):
                    self._forced.add(key)
                    at = now
            if key not in self._wake_at or (at is not None and at < self._wake_at[key]):
                self._wake_at.pop(key, None)
                self._schedule(key, at)
            self._wake.set()
        return result

    def _next_wake(self, now: int) -> int:
        """When the loop looks again, given that :meth:`_launch_due` ran at ``now``.

        A run that ends, a trigger or a new partition wakes the loop sooner.
        """
        candidates = [self._next_resync]
        while self._heap and self._wake_at.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        full = self._max_concurrent is not None and len(self._running) >= self._max_concurrent
        if self._heap and not full:
            candidates.append(self._heap[0][0])
        for name in self._pollers:
            refresh = self._book.next_refresh(name)
            if refresh is not None:
                candidates.append(refresh)
        paced = None if full else self._admission.next_start(now)
        if paced is not None:
            if paced <= now and not self._stall_reported:
                # The invariant: after the starts at `now`, no line with room may still be
                # ready at `now`. Should a rule ever break it, say so (once) and look again
                # at once instead of sleeping past a key that may run.
                self._stall_reported = True
                self._log.error(
                    "engine loop: a run could start at %d but did not: %r", now, self._admission
                )
            candidates.append(paced)
        return min(candidates)

    async def _sleep_until(self, at: int) -> None:
        self._loop_beat = (self.clock.now(), at)
        delay = at - self.clock.now()
        if delay <= 0 or self._wake.is_set():
            await self.clock.sleep(0)
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (sleeper, waker):
                if not future.done():
                    future.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)


async def _wait_with_clock(tasks: list[asyncio.Task[Any]], clock: Clock, timeout_ms: int) -> None:
    timer = asyncio.ensure_future(clock.sleep(timeout_ms))
    everything = asyncio.ensure_future(asyncio.gather(*tasks, return_exceptions=True))
    try:
        await asyncio.wait({timer, everything}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        await asyncio.gather(timer, return_exceptions=True)
        if not everything.done():
            everything.cancel()
            await asyncio.gather(everything, return_exceptions=True)


def _key_text(key: PKey) -> str:
    return f"{key.poller}/{key.partition}" if key.partition else key.poller


def _index_pollers(
    pollers: Sequence[PollerDefinition[Any]] | Mapping[str, PollerDefinition[Any]],
) -> dict[str, PollerDefinition[Any]]:
    index: dict[str, PollerDefinition[Any]] = {}
    if isinstance(pollers, Mapping):
        items = list(pollers.items())
        for key, poller in items:
            if isinstance(poller, PollerDefinition) and key != poller.name:
                raise ConfigError(
                    f"key {key!r} must equal the poller name {poller.name!r}", field="pollers"
                )
        values = [poller for _, poller in items]
    else:
        values = list(pollers)
    if not values:
        raise ConfigError("at least one poller is required", field="pollers")
    for poller in values:
        if not isinstance(poller, PollerDefinition):
            raise ConfigError(
                f"expected definitions from define_poller(), got {poller!r}", field="pollers"
            )
        if poller.name in index:
            raise ConfigError(f"duplicate poller name {poller.name!r}", field="pollers")
        index[poller.name] = poller
    return index


def _check_budgets(
    budgets: Mapping[str, Budget] | None, pollers: Mapping[str, PollerDefinition[Any]]
) -> dict[str, Budget]:
    resolved: dict[str, Budget] = {}
    for name, budget in (budgets or {}).items():
        if isinstance(budget, Mapping):
            budget = Budget(**budget)
        if not isinstance(budget, Budget):
            raise ConfigError(f"expected a Budget, got {budget!r}", field=f"budgets.{name}")
        resolved[name] = budget
    for poller in pollers.values():
        if poller.budget is None:
            continue
        if poller.budget not in resolved:
            raise ConfigError(
                f"poller {poller.name!r} uses budget {poller.budget!r}, which is not in "
                f"budgets ({sorted(resolved)})",
                field="budgets",
            )
        budget = resolved[poller.budget]
        policy = BudgetPolicy(requests=budget.requests, per_ms=budget.per_ms, burst=budget.burst)
        if poller.budget_cost > budget_capacity(policy):
            # Every request of this poller would wait for room that never comes.
            raise ConfigError(
                f"poller {poller.name!r} has budget_cost {poller.budget_cost:g}, which budget "
                f"{poller.budget!r} ({describe_capacity(policy)}) can never grant",
                field="budget_cost",
            )
    return resolved
