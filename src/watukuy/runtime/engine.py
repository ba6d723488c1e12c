"""The engine: pollers, a store, and the loop that runs whatever is due.

:class:`EngineCore` holds everything that is pure (scheduling, consumers, operations);
``watukuy.Engine`` adds the real-world defaults (system clock, httpx, signal handling).
Two ways to run it: ``start()``/``stop()`` (or ``async with``) for a daemon that wakes
exactly when the next key is due, and ``tick()`` for one pass from a cron or a serverless
function. Both agree because every decision is read from, and written to, the store.

The engine holds collaborators that each have one job, and sequences them:

- ``engine_options``: the options, checked at construction;
- ``attach.ConsumerTable``: the consumers of each poller (``on``, ``off``, ``subscribe``);
- ``daemon.DaemonSchedule``: the daemon's wake-ups and the runs it starts (the loop and
  the lifecycle, ``start``/``stop``, are here);
- ``tick``: the keys a ``tick()`` pass visits, and its workers;
- ``runner.KeyRunner``: one key's run (``_run_key`` here adds the in-memory store backoff).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast, overload

from watukuy.cursor import PageCursor, make_strategy
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, WatukuyError
from watukuy.model.events import Event
from watukuy.model.http_port import HttpFactory
from watukuy.model.logs import Logger, check_logger
from watukuy.model.options import Budget
from watukuy.model.partition import Partition
from watukuy.model.ports import BudgetStore, Clock, Offload, Random, StateStore
from watukuy.model.redact import RedactingLogger, Redaction, serialize_error
from watukuy.model.rows import DEFAULT_CONSUMER, Lane, PKey
from watukuy.scheduler import backoff_ceiling

from ._hook_names import HookContext
from ._hookbus import HookBus, HookEmitter, as_hook_list
from .attach import ConsumerTable
from .clock_skew import warn_on_clock_skew
from .consumers import Consumer, Consumers, Subscription, check_consumer_name
from .context import HandlerContext
from .daemon import STORE_ERROR_MIN_MS, DaemonOptions, DaemonSchedule
from .deadline import finish_by
from .engine_options import (
    admission_for,
    budget_manager_for,
    check_budgets,
    check_sizes,
    check_source_prefix,
    index_pollers,
    optional_duration,
    with_source_prefix,
)
from .key_marks import KeyMarks
from .operations import DeletesOperations, Operations, ParkedOperations, PartitionOperations
from .partition_book import PartitionBook
from .poller import PollerDefinition
from .results import EngineStatus, LeaseOptions, TickResult
from .runner import EngineDeps, KeyRunner, KeyRunResult, TickPollResult
from .stalls import Stall
from .tick import TickFindings, TickKeys, TickPass

if TYPE_CHECKING:
    from watukuy.budget.manager import BudgetManager

__all__ = ["EngineCore"]

T = TypeVar("T")
H = TypeVar("H", bound=Callable[..., Any])
TypedHandler = Callable[[Event[T], HandlerContext], Awaitable[None] | None]
"""A handler for the items of one poller: ``(event, ctx)``, sync or async."""

_log = logging.getLogger("watukuy")

DEFAULT_TICK_CONCURRENCY = 4
TICK_GRACE_MS = 2_000
"""How long ``tick(max_duration=...)`` may overrun its deadline while runs still wait."""


class EngineCore(Operations):
    """The engine without defaults for the outside world (see ``watukuy.Engine``).

    It takes the same arguments as ``watukuy.Engine``, documented there, with every
    dependency explicit. What differs:

    Args:
        clock: Required (``Engine`` defaults to the system clock).
        random: Required (``Engine`` defaults to process randomness).
        offload: Where sync handlers and sync ``fetch`` functions run. Required: the
            runtime starts no threads (``Engine`` passes worker threads).
        instance_id: Default ``watukuy-<10 hex digits>`` drawn from ``random``.
        lease: A :class:`LeaseOptions` only (``Engine`` also takes a dict).
        http: The factory behind ``ctx.http``, in place of ``Engine``'s ``http_client``
            and ``http_max_in_flight`` (``None``: ``ctx.http`` refuses every request with a
            ``ConfigError``).
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
        logger: Logger | None = None,
        source_prefix: str | None = None,
    ) -> None:
        if not isinstance(store, StateStore):
            raise ConfigError(f"expected a StateStore, got {store!r}", field="store")
        self._source_prefix = check_source_prefix(source_prefix)
        self._pollers = with_source_prefix(index_pollers(pollers), self._source_prefix)
        self._budgets = check_budgets(budgets, self._pollers)
        check_sizes(
            dispatch_batch_size=dispatch_batch_size,
            tick_concurrency=tick_concurrency,
            max_concurrent_keys=max_concurrent_keys,
        )
        self.redaction: Redaction = Redaction.coerce(redact)
        """The secrets policy every error, log line and hook record of this engine goes through."""
        self._log = RedactingLogger(
            _log if logger is None else check_logger(logger), self.redaction
        )
        self.store = store
        self.clock = clock
        self.random = random
        self.instance_id = instance_id or f"watukuy-{int(random.random() * 16**10):010x}"
        self._lease = lease or LeaseOptions()
        self._hooks = HookBus(as_hook_list(hooks), self._log)
        self._http = http
        self._budget_manager: BudgetManager | None = budget_manager_for(
            self._budgets, budget_store, clock, self.instance_id
        )
        self._deps = self._engine_deps(dispatch_batch_size, offload)
        self._max_concurrent = max_concurrent_keys
        self._tick_concurrency = tick_concurrency
        self._resync_ms = parse_duration(resync_every, "resync_every")
        fair_spread_ms = optional_duration(fair_share_spread, "fair_share_spread")
        self._auto_migrate = auto_migrate
        self._check_skew = False  # set by Engine on the system clock (a virtual one never skews)
        self._migrated = False
        self._migrate_lock = asyncio.Lock()
        self._status = EngineStatus.IDLE
        self._table = ConsumerTable(self._pollers, self._consumer_attached, offload)
        # The same dict as the table's: the operations read it.
        self._consumers: dict[str, dict[str, Consumer]] = self._table.by_poller
        self._warned_no_consumer: set[str] = set()
        self._book = PartitionBook(
            self._pollers,
            self.store,
            self.clock,
            appeared=self._partition_appeared,
            disappeared=self._partition_disappeared,
            logger=self._log,
        )
        self._marks = KeyMarks()
        self._tick_keys = TickKeys(store, self._book, self._marks, self._log)
        self._admission = admission_for(self._budgets, self._pollers)
        self._daemon = self._daemon_schedule(fair_spread_ms)
        # The daemon's loop. (When it last went to sleep, when it planned to come round):
        # inspect() judges from it whether the loop is alive (see scheduler.loop_grace).
        self._loop_task: asyncio.Task[None] | None = None
        self._loop_beat: tuple[int, int] | None = None
        # The daemon's own dicts, which the operations read.
        self._running: dict[PKey, asyncio.Task[KeyRunResult]] = self._daemon.running
        self._wake_at: dict[PKey, int] = self._daemon.wake_at
        self.parked = ParkedOperations(self)
        """Parked events and quarantined items: list, retry, discard."""
        self.partitions = PartitionOperations(self)
        """The partitions of partitioned pollers: list, remove."""
        self.deletes = DeletesOperations(self)
        """Deletes held back by the mass-delete guard: read, confirm, discard."""

    def _daemon_schedule(self, fair_spread_ms: int | None) -> DaemonSchedule:
        """The daemon's schedule, on this engine's collaborators."""
        return DaemonSchedule(
            store=self.store,
            clock=self.clock,
            random=self.random,
            pollers=self._pollers,
            book=self._book,
            marks=self._marks,
            admission=self._admission,
            run_key=self._run_key,
            has_consumer=self._table.has_consumer,
            log=self._log,
            options=DaemonOptions(
                lease_ttl_ms=self._lease.ttl_ms,
                resync_ms=self._resync_ms,
                fair_spread_ms=fair_spread_ms,
                max_concurrent=self._max_concurrent,
            ),
        )

    def _engine_deps(self, dispatch_batch_size: int, offload: Offload) -> EngineDeps:
        """What every key run shares with this engine."""
        return EngineDeps(
            store=self.store,
            clock=self.clock,
            random=self.random,
            hooks=self._hooks,
            instance_id=self.instance_id,
            lease_ttl_ms=self._lease.ttl_ms,
            lease_renew_ms=self._lease.renew_every_ms,
            lease_margin_ms=self._lease.safety_margin_ms,
            batch_size=dispatch_batch_size,
            http=self._http,
            budgets=self._budget_manager,
            reconcile_strategy=make_strategy(PageCursor(initial=1)),
            budget_max_wait=lambda name: (
                self._budgets[name].max_wait_ms if name in self._budgets else None
            ),
            redaction=self.redaction,
            offload=offload,
            log=self._log,
        )

    # --- public state -------------------------------------------------------------------

    @property
    def status(self) -> EngineStatus:
        """``idle``, ``running``, ``stopping`` or ``stopped``."""
        return self._status

    @property
    def pollers(self) -> Mapping[str, PollerDefinition[Any]]:
        """The poller definitions by name."""
        return dict(self._pollers)

    async def add_poller(self, poller: PollerDefinition[T]) -> PollerDefinition[T]:
        """Add a poller to this engine, started or not (the ``forFeature`` of the
        TypeScript original): a module of your application can bring its own pollers.

        A running daemon starts polling it without a restart: its keys are read from the
        store as at start-up (a key an earlier process polled keeps its cursor, schedule
        and outbox) and scheduled. ``tick()`` visits it from its next pass. Attach its
        handlers (:meth:`on`) before or after, as for any poller.

        Args:
            poller: A definition from ``define_poller``. The engine's ``source_prefix``
                applies to it as to the others.

        Returns:
            The definition as the engine holds it (``engine.pollers[name]``).

        Raises:
            ConfigError: Not a definition, a name the engine has already, or a budget it
                does not know (or whose ``budget_cost`` it can never grant).
            WatukuyError: The engine is stopping or stopped (``NOT_RUNNING``).
            Exception: What ``partitions()`` raised when the daemon first listed them; the
                poller is then not added.
        """
        if self._status in (EngineStatus.STOPPING, EngineStatus.STOPPED):
            raise WatukuyError(f"add_poller() on a {self._status.value} engine", code="NOT_RUNNING")
        if not isinstance(poller, PollerDefinition):
            raise ConfigError(
                f"expected a definition from define_poller(), got {poller!r}", field="poller"
            )
        name = poller.name
        if name in self._pollers:
            raise ConfigError(f"duplicate poller name {name!r}", field="poller")
        added = with_source_prefix({name: poller}, self._source_prefix)[name]
        check_budgets(self._budgets, {name: added})
        # The table, the partition book, the daemon and the operations share this dict.
        self._pollers[name] = added
        if self._status is EngineStatus.RUNNING:
            try:
                await self._daemon.adopt(name)
            except BaseException:
                del self._pollers[name]
                raise
        return added

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
        check = self._table.filter_for(name, when)
        if handler is None:

            def decorator(fn: H) -> H:
                self._table.attach_handler(name, consumer, fn, check)
                return fn

            return decorator
        self._table.attach_handler(name, consumer, handler, check)
        return handler

    def off(self, poller: PollerDefinition[Any] | str, consumer: str | None = None) -> None:
        """Detach the consumer named ``consumer`` of a poller, or all of them when it is
        ``None``. Their events wait in the outbox meanwhile."""
        self._table.detach(self._poller_name(poller), consumer)

    @overload
    def subscribe(
        self,
        poller: PollerDefinition[T],
        *,
        when: Callable[[Event[T]], bool] | None = None,
        consumer: str = ...,
        stop: asyncio.Event | None = None,
    ) -> Subscription[T]: ...

    @overload
    def subscribe(
        self,
        poller: str,
        *,
        when: Callable[[Event[Any]], bool] | None = None,
        consumer: str = ...,
        stop: asyncio.Event | None = None,
    ) -> Subscription[Any]: ...

    def subscribe(
        self,
        poller: PollerDefinition[Any] | str,
        *,
        when: Callable[[Event[Any]], bool] | None = None,
        consumer: str = DEFAULT_CONSUMER,
        stop: asyncio.Event | None = None,
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
            stop: An ``asyncio.Event`` that ends the iteration when set, from any task (the
                ``signal`` of the TypeScript original). ``subscription.close()`` does the
                same. The event in hand is acknowledged when the loop asks for the next
                one, as always; what was not offered yet stays in the outbox for the next
                subscription under the same ``consumer``.

        Raises:
            ConfigError: The poller already has a consumer of that name, the name is not
                valid, ``when`` reads ``previous`` on a poller with ``retain="hash"``, or
                ``stop`` is not an ``asyncio.Event``.
        """
        name = self._poller_name(poller)
        consumer = check_consumer_name(consumer)
        check = self._table.filter_for(name, when)
        if stop is not None and not isinstance(stop, asyncio.Event):
            raise ConfigError(f"expected an asyncio.Event, got {stop!r}", field="stop")
        return self._table.subscribe(name, consumer, check, stop)

    def _consumer_attached(self, name: str) -> None:
        self._warned_no_consumer.discard(name)
        self._tick_keys.revisit(name)  # outboxes may wait for it: look at every key
        # Events may be waiting for a consumer: let the daemon look at every key now.
        self._daemon.look_again(name)

    def _poller_name(self, poller: PollerDefinition[Any] | str) -> str:
        name = poller.name if isinstance(poller, PollerDefinition) else poller
        if name not in self._pollers:
            raise WatukuyError(
                f"unknown poller {name!r}; known: {sorted(self._pollers)}", code="UNKNOWN_POLLER"
            )
        return name

    # --- hooks --------------------------------------------------------------------------

    def add_hooks(self, hooks: object) -> Callable[[], None]:
        """Listen with one more hook set, on a running engine too, from the next hook that
        fires.

        ``Engine(hooks=...)`` is the place for hook sets that live as long as the engine.
        This one is for a hook set that watches for a while: a progress display during one
        ``tick()``, a test that counts pages.

        Args:
            hooks: An object with some of the methods of
                :class:`~watukuy.runtime.hooks.Hooks` (a subclass of it, or any object).

        Returns:
            A function that removes the hook set again; calling it twice does nothing.

        Raises:
            ConfigError: ``hooks``: the object has none of the hook methods.
        """
        return self._hooks.add(hooks)

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
            await warn_on_clock_skew(
                self.store, self.clock, self._lease.safety_margin_ms, self._log
            )

    async def _partitions_of(self, name: str, *, force: bool = False) -> list[Partition]:
        """The current partitions of a poller, refreshing them when due (or forced)."""
        return await self._book.of(name, force=force)

    def _partition_appeared(self, key: PKey, now: int) -> None:
        self._daemon.schedule(key, now)
        self._daemon.wake.set()

    def _partition_disappeared(self, key: PKey) -> None:
        self._forget(key)
        self._daemon.wake.set()

    def _forget(self, key: PKey) -> None:
        self._daemon.forget(key)

    def _wake_key(self, key: PKey, *, force: bool = False) -> None:
        """Make a key due now in this process (operations call it after unfenced writes)."""
        if force:
            self._marks.forced.add(key)
        if self._status is EngineStatus.RUNNING:
            self._daemon.wake_now(key)

    # --- one pass -----------------------------------------------------------------------

    async def tick(
        self,
        max_duration: Duration | None = None,
        only: Sequence[str] | str | None = None,
        *,
        catch_up: bool = True,
    ) -> TickResult:
        """One pass over every due key: drain, poll, persist, release. Never raises for
        fetch or handler failures; they are in ``TickResult.polled[i].error``.

        A key whose cycle stopped with more to fetch (the page cap cut it, say) runs again
        once every chosen key had its turn, round after round, until it caught up or the
        deadline comes near: it runs when its schedule says (at once, or after the wait
        rate-limit pacing asked for), and only if one of its pages still fits before
        ``max_duration`` then. Without ``max_duration`` the pass never waits: a paced key
        is left pending. Without ``max_duration`` a key runs at most
        ``MAX_RUNS_PER_KEY`` (100) times. Keys still behind at the end are in
        ``TickResult.pending_keys``, and each of their lanes says ``pending``. Each run
        takes, renews and releases the key's lease like any other run.

        Args:
            max_duration: Deadline for the whole pass, checked before each key and between
                pages (a running page is not interrupted). Whatever the store or the API
                does, the pass returns at most ``TICK_GRACE_MS`` (2 s) after it: runs still
                waiting then are cancelled and ``timed_out`` is set.
            only: Restrict the pass to these poller names.
            catch_up: ``False`` runs each chosen key once, however much it has left (a test
                that steps a poller cycle by cycle, a cron job that spreads a backlog over
                its runs); its lanes still say ``pending``.

        Returns:
            One entry per (poller, partition, lane) that ran, with the totals of its cycles,
            and what the pass skipped.
        """
        if self._status in (EngineStatus.STOPPING, EngineStatus.STOPPED):
            raise WatukuyError(f"tick() on a {self._status.value} engine", code="NOT_RUNNING")
        names = self._select(only)
        started = self.clock.now()
        deadline = (
            None if max_duration is None else started + parse_duration(max_duration, "max_duration")
        )
        tick = TickPass(
            names,
            deadline,
            clock=self.clock,
            store=self.store,
            marks=self._marks,
            run_key=self._run_key,
            concurrency=self._tick_concurrency,
            catch_up=catch_up,
        )
        work = asyncio.ensure_future(self._tick_pass(tick, started))
        stalls: list[tuple[PKey, int, Stall]] = []
        if deadline is None:
            found = await work
        elif await finish_by(
            self.clock,
            work,
            deadline + TICK_GRACE_MS,
            before_cancel=lambda: stalls.extend(tick.stalls(work, deadline)),
        ):
            found = work.result()
        else:
            # The store or the API stopped answering and its own time limits did not cover
            # it: the pass returns anyway with what finished, saying what each unfinished
            # run waited for.
            found = tick.findings
            found.timed_out = True
            await self._report_stalls(stalls, deadline, found.polled)
        return TickResult(
            polled=list(found.polled),
            skipped_leased=found.skipped_leased,
            skipped_not_due=found.skipped_not_due,
            duration_ms=self.clock.now() - started,
            timed_out=found.timed_out,
        )

    async def _tick_pass(self, tick: TickPass, started: int) -> TickFindings:
        """List the keys of ``tick``'s pollers, choose those to visit, and run them."""
        await self._ensure_migrated()
        keys: list[tuple[PollerDefinition[Any], Partition]] = []
        for name in tick.names:
            partitions = await self._partitions_of(name)
            chosen = await self._tick_keys.choose(name, partitions, started)
            keys.extend((self._pollers[name], partition) for partition in chosen)
            tick.not_due(len(partitions) - len(chosen))
        return await tick.run(keys)

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
            await self._hooks_of(key.poller, key.partition, lane).on_error(
                error=error, phase=stall.phase
            )

    def _hooks_of(self, poller: str, partition: str, lane: Lane) -> HookEmitter:
        context = HookContext(
            poller=poller, partition=partition, lane=lane, instance_id=self.instance_id
        )
        return self._hooks.emitter(context)

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
            failures = self._marks.store_backoff.get(runner.key, (0, 0))[0] + 1
            ceiling = backoff_ceiling(failures, poller.schedule.backoff)
            jittered = ceiling // 2 + round(self.random.random() * ceiling / 2)
            wait = max(STORE_ERROR_MIN_MS, jittered)
            self._marks.store_backoff[runner.key] = (failures, self.clock.now() + wait)
            self._log.warning(
                "run of %s failed: %s (failure %d in a row; next try in %d ms)",
                runner.key,
                error,
                failures,
                wait,
                exc_info=not isinstance(error, WatukuyError),
            )
            await self._hooks_of(poller.name, partition.key, "live").on_error(
                error=serialize_error(error, redaction=self.redaction), phase="commit"
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
        self._marks.store_backoff.pop(runner.key, None)
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
        await self._daemon.resync(initial=True)
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
        self._daemon.wake.set()
        loop_task, self._loop_task = self._loop_task, None
        if loop_task is not None:
            loop_task.cancel()
            await asyncio.gather(loop_task, return_exceptions=True)
        await self._daemon.settle(drain=drain, timeout_ms=timeout_ms)
        self._table.close_subscriptions()
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

    async def _loop(self) -> None:
        daemon = self._daemon
        while self._status is EngineStatus.RUNNING:
            # Due keys start before the resync and the partition refresh, whose store round
            # trips would otherwise delay every key due now by as long as they take.
            daemon.launch_due(self.clock.now())
            await daemon.refresh()
            daemon.wake.clear()
            # What the resync found due starts too; the wake-up comes from the same reading
            # of the clock as the starts (see DaemonSchedule.launch_due).
            await self._sleep_until(daemon.launch_due(self.clock.now()))

    async def _sleep_until(self, at: int) -> None:
        self._loop_beat = (self.clock.now(), at)
        delay = at - self.clock.now()
        wake = self._daemon.wake
        if delay <= 0 or wake.is_set():
            await self.clock.sleep(0)
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(delay))
        waker = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (sleeper, waker):
                if not future.done():
                    future.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)
