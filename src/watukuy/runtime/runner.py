"""One run of one (poller, partition): the poll cycle of "How it works".

In order: decide whether anything is due; take the lease (with a fenced epoch); deliver what
the outbox still holds; run the live lane page by page, committing cursor, snapshot delta,
events, log entries and quarantined items of each page in ONE store transaction; run the
reconcile lane and the backfill lane when they are due; persist the schedule; release the
lease. A lost lease cancels the run and throws its in-memory work away.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import field
from typing import Any, Literal, cast

from watukuy.model.errors import (
    BudgetTimeoutError,
    HttpError,
    LeaseLostError,
    SerializedError,
    StoreError,
)
from watukuy.model.http_port import HttpObservations
from watukuy.model.partition import Partition
from watukuy.model.records import dataclass
from watukuy.model.redact import (
    describe_error,
    serialize_error,
)
from watukuy.model.rows import (
    CircuitState,
    Lane,
    Lease,
    PKey,
    PollerState,
    ScheduleState,
    StatePatch,
    empty_poller_state,
)
from watukuy.pipeline.events import EventMaker
from watukuy.scheduler import (
    Transition,
    begin_cycle,
    is_due,
    on_failure,
    on_poison_halt,
    on_success,
)

from .consumers import Consumers
from .deliveries import Deliveries
from .dispatcher import Dispatcher, DrainResult
from .lane import CycleResult, LaneCycle
from .lease import LeaseKeeper
from .page_build import lane_rules
from .pass_end import PassEnd
from .poller import PollerDefinition
from .requests import verify_context
from .results import TickPollResult
from .scope import EngineDeps, KeyHooks, KeyScope

__all__ = [
    "EngineDeps",
    "KeyRunResult",
    "KeyRunner",
    "TickPollResult",
    "catch_up_at",
    "wake_time",
]


RunOutcome = Literal["ran", "not-due", "paused", "leased", "lease-lost"]


@dataclass(frozen=True, slots=True)
class KeyRunResult:
    """What :meth:`KeyRunner.run` did for one key.

    Attributes:
        outcome: Whether the run ran, and if not, why.
        results: One entry per lane cycle that ran (those that finished before a lost
            lease, too).
        state: The key's state after the run (``"ran"``), or as loaded (``"paused"``,
            ``"not-due"``, ``"leased"``); ``None`` when the run did not get to save it.
        drain: What the run's deliveries did.
        leased_until: When another holder's lease expires (``"leased"`` only).
        wake_at: When the key next needs a run, from ``state`` (see :func:`wake_time`);
            ``None``: only on demand, or not known (``"leased"``, ``"lease-lost"``).
    """

    outcome: RunOutcome
    results: list[TickPollResult] = field(default_factory=list)
    state: PollerState | None = None
    drain: DrainResult = field(default_factory=DrainResult)
    leased_until: int | None = None
    wake_at: int | None = None

    @property
    def pending(self) -> bool:
        """A lane cycle of the run stopped with more to fetch (see
        :attr:`TickPollResult.pending`)."""
        return self.outcome == "ran" and any(result.pending for result in self.results)


def catch_up_at(result: KeyRunResult) -> int | None:
    """When a run that left more to fetch should run again; ``None`` when nothing is left.

    A cut-short cycle plans the key's next run at once (the scheduler's ``catch-up``; a
    cut-short reconcile pass or a backfill in progress is due at once too), or later when
    rate-limit pacing asks the poller to slow down. The run's ``wake_at`` carries that
    decision: the daemon schedules the key at it, and ``tick()`` runs the key again at it
    when its deadline leaves room, so both follow the scheduler rather than a rule of
    their own.
    """
    return result.wake_at if result.pending else None


_HEALTHY = ScheduleState()


def _side_state(schedule: ScheduleState, lane: Lane) -> ScheduleState:
    return schedule.lanes.get(lane) or _HEALTHY


def _side(state: PollerState, lane: Lane) -> ScheduleState:
    """The failure state of a reconcile or backfill lane (empty when its last cycle
    succeeded)."""
    return _side_state(state.schedule, lane)


def _reconcile_due(poller: PollerDefinition[Any], state: PollerState, now: int) -> bool:
    if poller.reconcile is None or not is_due(_side(state, "reconcile"), now):
        return False
    progress = state.listing.lanes.get("reconcile")
    if progress is not None and progress.pass_id is not None:
        return True  # a pass cut short continues at once (catch-up)
    last = state.last_reconcile_at
    return last is None or last + poller.reconcile.every_ms <= now


def _backfill_due(state: PollerState, now: int) -> bool:
    return state.backfill is not None and is_due(_side(state, "backfill"), now)


def _release_due(state: PollerState) -> bool:
    """An operator confirmed the deletes the mass-delete guard held: emit them now."""
    return state.held_deletes is not None and state.held_deletes.confirmed


def wake_time(
    poller: PollerDefinition[Any], state: PollerState | None, *, has_consumer: bool, now: int
) -> int | None:
    """When a key next needs a run, from its persisted state (``None``: only on demand)."""
    if state is None:
        return now
    if state.paused:
        return None
    schedule = state.schedule
    candidates = [now if schedule.next_due_at is None else schedule.next_due_at]
    if has_consumer and schedule.next_retry_at is not None and not schedule.drain_blocked:
        candidates.append(schedule.next_retry_at)
    if poller.reconcile is not None:
        last = state.last_reconcile_at
        progress = state.listing.lanes.get("reconcile")
        resuming = progress is not None and progress.pass_id is not None
        at = now if last is None or resuming else last + poller.reconcile.every_ms
        candidates.append(max(at, _side(state, "reconcile").next_due_at or at))
    if state.backfill is not None:
        candidates.append(_side(state, "backfill").next_due_at or now)
    if _release_due(state):
        candidates.append(now)
    return min(candidates)


class KeyRunner:
    """Runs everything that is due for one key, once.

    Args:
        deps: Engine-wide dependencies.
        poller: The poller.
        partition: The partition (``Partition("")`` when not partitioned).
        consumer: The poller's consumers, or ``None`` (events then wait in the outbox).
        force: Run the live lane even if it is not due (``trigger()``).
        deadline: Epoch ms after which no new page is fetched (``tick(max_duration=...)``).
        stopping: Returns True once the engine is stopping (no new pages either).
    """

    def __init__(
        self,
        deps: EngineDeps,
        poller: PollerDefinition[Any],
        partition: Partition,
        consumer: Consumers | None,
        *,
        force: bool = False,
        deadline: int | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self._deps = deps
        self._poller = poller
        self._partition = partition
        self._consumer = consumer
        self._force = force
        self._deadline = deadline
        self._stopping = stopping
        self._key = PKey(poller.name, partition.key)
        # When run() began: the live lane's next interval counts from here (start to start).
        self._started_at: int | None = None
        # Every line of the run names its key, in the text (a handler may print the
        # message alone, as the CLI's stderr does) and in the record's fields.
        self._logger = deps.log.child(str(self._key), poller=poller.name, partition=partition.key)
        # What each step of the run did, kept as it finishes: a run whose lease is lost
        # half-way still reports the lanes that ran.
        self._polled: list[TickPollResult] = []
        # The hooks of the key, one emitter per lane; the scope of each run shares them.
        self._hooks = KeyHooks(deps.hooks, self._key, deps.instance_id)

    @property
    def key(self) -> PKey:
        """The key this runner serves."""
        return self._key

    def should_stop(self) -> bool:
        """True when the deadline passed or the engine is stopping (checked between pages)."""
        if self._stopping():
            return True
        return self._deadline is not None and self._deps.clock.now() >= self._deadline

    async def _is_due(self, state: PollerState, now: int) -> bool:
        if self._force or is_due(state.schedule, now):
            return True
        if _reconcile_due(self._poller, state, now) or _backfill_due(state, now):
            return True
        if _release_due(state):
            return True
        if self._consumer is None or state.schedule.drain_blocked:
            return False
        retry_at = state.schedule.next_retry_at
        if retry_at is not None and retry_at > now:
            return False
        return await self._deps.store.count_pending(self._key) > 0

    async def run(self) -> KeyRunResult:
        """Do one run; never raises for poller failures (they are in ``results``)."""
        deps = self._deps
        now = deps.clock.now()
        self._started_at = now
        state = await deps.store.load_state(self._key) or empty_poller_state(now)
        if state.paused:
            return KeyRunResult("paused", state=state)
        if not await self._is_due(state, now):
            return KeyRunResult(
                "not-due", state=state, wake_at=self._wake_time(state, deps.clock.now())
            )
        lease = await deps.store.acquire_lease(
            self._key, deps.instance_id, deps.lease_ttl_ms, deps.clock.now()
        )
        if lease is None:
            held = await deps.store.get_lease(self._key)
            return KeyRunResult(
                "leased", state=state, leased_until=None if held is None else held.expires_at
            )
        await self._hooks("live").on_lease_acquired(lease=lease)
        return await self._run_leased(lease)

    def _wake_time(self, state: PollerState, now: int) -> int | None:
        """When the key next needs a run (see :func:`wake_time`): computed once per run."""
        return wake_time(self._poller, state, has_consumer=self._consumer is not None, now=now)

    async def _run_leased(self, lease: Lease) -> KeyRunResult:
        deps = self._deps
        self._polled = []
        cancel = asyncio.Event()
        lanes_task: asyncio.Task[PollerState] | None = None

        def lost() -> None:
            cancel.set()
            if lanes_task is not None:
                lanes_task.cancel()

        keeper = LeaseKeeper(
            deps.store,
            self._key,
            lease,
            ttl_ms=deps.lease_ttl_ms,
            renew_every_ms=deps.lease_renew_ms,
            margin_ms=deps.lease_margin_ms,
            clock=deps.clock,
            logger=self._logger,
            on_lost=lost,
        )
        scope = KeyScope(
            deps=deps,
            poller=self._poller,
            partition=self._partition,
            keeper=keeper,
            consumers=self._consumer,
            cancel=cancel,
            should_stop=self.should_stop,
            logger=self._logger,
            hooks=self._hooks,
        )
        deliveries = Deliveries(Dispatcher(scope), self._consumer)
        lanes_task = asyncio.create_task(self._lanes(scope, deliveries))
        keeper.start()
        lease_lost = False
        final: PollerState | None = None
        try:
            final = await lanes_task
        except LeaseLostError:
            lease_lost = True
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if keeper.lost and (current is None or current.cancelling() == 0):
                lease_lost = True
            else:
                cancel.set()
                raise
        finally:
            cancel.set()
            await keeper.stop()
            if not lease_lost and not keeper.lost:
                try:
                    await deps.store.release_lease(self._key, keeper.lease)
                except StoreError as error:
                    self._logger.warning("lease release failed: %s", error)
        outcome: RunOutcome = "ran"
        if lease_lost or keeper.lost:
            outcome = "lease-lost"
            self._logger.warning("lease lost during the run; its in-memory work was discarded")
            await self._hooks("live").on_lease_lost(epoch=lease.epoch)
        return KeyRunResult(
            outcome,
            results=list(self._polled),
            state=final,
            drain=deliveries.drained,
            wake_at=None if final is None else final.wake_at,
        )

    async def _lanes(self, scope: KeyScope, deliveries: Deliveries) -> PollerState:
        """Deliver, release confirmed deletes, run the due lanes, save the schedule; returns
        the state saved. What each lane did is kept in :attr:`_polled` as it finishes."""
        deps = self._deps
        state = await deps.store.load_state(self._key) or empty_poller_state(deps.clock.now())
        # 1. Deliver what a previous run (or a crash) left behind, before any request.
        # What it delivered is counted by the run's first step (or reported on its own
        # below when no lane runs): a retried parked event is delivered here.
        await deliveries.deliver()
        if deliveries.halted():
            state = await self._halt(state, deliveries.drained)

        if _release_due(state) and not deliveries.halted():
            state, polled = await self._release_held(state, scope, deliveries)
            self._polled.append(polled)

        lanes = self._due_lanes(state, halted=deliveries.halted())
        for lane in lanes:
            if deliveries.halted():
                break
            if lane != "live" and self.should_stop():
                break
            state = self._begin(lane, state)
            state, polled = await self._run_lane(lane, state, scope, deliveries)
            self._polled.append(polled)
            if deliveries.halted():
                state = await self._halt(state, deliveries.drained)
        if lanes:
            await self._prune()
        if not self._polled:
            self._polled.extend(self._delivered_only(deliveries.take()))
        # 7. Persist the schedule (and lane bookkeeping), then the caller releases the lease.
        return await self._save(state, scope.keeper, deliveries.drained)

    def _delivered_only(self, drained: DrainResult) -> list[TickPollResult]:
        """The report of a run whose only step was delivering what the outbox held (none
        when it delivered nothing)."""
        if not drained.delivered:
            return []
        return [
            TickPollResult(
                poller=self._key.poller,
                partition=self._key.partition,
                lane="live",
                items=0,
                events=0,
                delivered=drained.delivered,
                duration_ms=self._deps.clock.now() - (self._started_at or self._deps.clock.now()),
                cycles=0,
            )
        ]

    def _due_lanes(self, state: PollerState, *, halted: bool) -> list[Lane]:
        """The lanes this run runs, in order (no live lane once a poison event halted)."""
        clock = self._deps.clock
        lanes: list[Lane] = []
        if not halted and (self._force or is_due(state.schedule, clock.now())):
            lanes.append("live")
        if _reconcile_due(self._poller, state, clock.now()):
            lanes.append("reconcile")
        if _backfill_due(state, clock.now()):
            lanes.append("backfill")
        return lanes

    def _begin(self, lane: Lane, state: PollerState) -> PollerState:
        """The schedule as a cycle of ``lane`` begins (a probe, when its open circuit's
        time has come)."""
        now = self._deps.clock.now()
        if lane == "live":
            schedule = begin_cycle(state.schedule, now)
            if self._force and schedule.circuit is CircuitState.OPEN:
                schedule = dataclasses.replace(schedule, circuit=CircuitState.HALF_OPEN)
            return dataclasses.replace(state, schedule=schedule)
        if lane in state.schedule.lanes:
            # The lane's own circuit: a probe when its open circuit's time has come.
            side = begin_cycle(_side(state, lane), now)
            lanes_now = {**state.schedule.lanes, lane: side}
            return dataclasses.replace(
                state, schedule=dataclasses.replace(state.schedule, lanes=lanes_now)
            )
        return state

    async def _prune(self) -> None:
        """Trim the replay log and the tombstones past their retention."""
        deps, poller = self._deps, self._poller
        if poller.log is not None:
            # The replay log keeps log.retention of events; trimming it here costs one
            # indexed delete per poll.
            try:
                await deps.store.prune_log(self._key, deps.clock.now() - poller.log.retention_ms)
            except StoreError as error:
                self._logger.warning("could not prune the event log: %s", error)
        retention = poller.ids.tombstones_ms
        if retention is not None:
            try:
                await deps.store.prune_tombstones(self._key, deps.clock.now() - retention)
            except StoreError as error:
                self._logger.warning("could not prune tombstones: %s", error)

    async def _save(
        self, state: PollerState, keeper: LeaseKeeper, drained: DrainResult
    ) -> PollerState:
        """Save the schedule (with what the deliveries left to retry) and the lanes'
        bookkeeping; returns the state as saved."""
        schedule = dataclasses.replace(
            state.schedule,
            next_retry_at=drained.next_retry_at,
            drain_blocked=drained.held > 0 and drained.next_retry_at is None,
        )
        now = self._deps.clock.now()
        final = dataclasses.replace(state, schedule=schedule)
        # The store's due index: when this key next needs a run (see wake_time).
        wake_at = self._wake_time(final, now)
        patch: StatePatch = {
            "schedule": schedule,
            "last_reconcile_at": state.last_reconcile_at,
            "backfill": state.backfill,
            "cursors": state.cursors,
            "late": state.late,
            "lookback": state.lookback,
            "updated_at": now,
            "wake_at": wake_at,
        }
        await self._deps.store.save_state(self._key, keeper.lease, patch)
        return dataclasses.replace(final, wake_at=wake_at)

    async def _halt(self, state: PollerState, drain: DrainResult) -> PollerState:
        """A poison event with ``action="halt"``: open the circuit now."""
        deps = self._deps
        message = "poison event with delivery.poison.action='halt'; circuit opened"
        if drain.parked_rows:
            message += f" (event {drain.parked_rows[-1].id})"
        error: SerializedError = {"name": "PoisonHalt", "message": message, "code": "CIRCUIT_OPEN"}
        transition = on_poison_halt(
            state.schedule,
            schedule=self._poller.schedule,
            circuit=self._poller.circuit,
            error=error,
            now=deps.clock.now(),
        )
        if transition.circuit_opened:
            await self._hooks("live").on_circuit_open(
                failures=transition.state.consecutive_failures,
                probe_at=transition.state.next_due_at or deps.clock.now(),
            )
        return dataclasses.replace(state, schedule=transition.state)

    async def _release_held(
        self, state: PollerState, scope: KeyScope, deliveries: Deliveries
    ) -> tuple[PollerState, TickPollResult]:
        """Emit confirmed held deletes under this run's lease. A store failure is logged
        and reported; the hold stays confirmed, so the next run tries again."""
        held = state.held_deletes
        assert held is not None
        lane = cast(Lane, held.lane)
        observations = HttpObservations()  # what verify= requests observe; nothing reads it
        ending = PassEnd.of(
            scope,
            lane,
            deliveries,
            events=EventMaker(lane_rules(scope, lane)),
            context=lambda: verify_context(scope, lane, observations),
        )
        started = self._deps.clock.now()
        error: SerializedError | None = None
        emitted = 0
        try:
            state, emitted = await ending.release_held(state)
        except StoreError as failure:
            error = serialize_error(failure, redaction=self._deps.redaction)
            self._logger.warning("could not emit the confirmed deletes: %s", failure)
        polled = TickPollResult(
            poller=self._key.poller,
            partition=self._key.partition,
            lane=lane,
            items=0,
            events=emitted,
            delivered=deliveries.take().delivered,
            duration_ms=self._deps.clock.now() - started,
            error=error,
        )
        return state, polled

    async def _run_lane(
        self, lane: Lane, state: PollerState, scope: KeyScope, deliveries: Deliveries
    ) -> tuple[PollerState, TickPollResult]:
        """Run one lane cycle, then move its schedule on; returns the state after it and
        what it did."""
        ran = await LaneCycle(scope, lane, deliveries).run(state)
        now = self._deps.clock.now()
        if lane == "live":
            schedule, throttled = await self._live_transition(ran, now)
        else:
            schedule, throttled = await self._side_transition(lane, ran, now)
        if ran.error is not None:
            await self._report_failure(lane, ran, throttled)
        state = dataclasses.replace(ran.state, schedule=schedule)
        await self._hooks(lane).on_poll_end(summary=ran.summary)
        polled = TickPollResult(
            poller=self._key.poller,
            partition=self._key.partition,
            lane=lane,
            items=ran.summary.items,
            events=ran.summary.events.total,
            delivered=ran.drain.delivered,
            duration_ms=ran.summary.duration_ms,
            error=ran.error,
            throttled=throttled,
            pending=ran.summary.truncated and ran.error is None,
        )
        return state, polled

    async def _live_transition(self, ran: CycleResult, now: int) -> tuple[ScheduleState, bool]:
        """A live cycle ended: the next interval, the backoff or the circuit, with their
        hooks. Returns the schedule and whether the cycle was throttled."""
        deps, poller, summary = self._deps, self._poller, ran.summary
        throttled = False
        if ran.error is None:
            tr = on_success(
                ran.state.schedule,
                schedule=poller.schedule,
                circuit=poller.circuit,
                events=summary.events.total,
                not_modified=summary.not_modified,
                truncated=summary.truncated,
                rate_limit=ran.rate_limit,
                now=now,
                random=deps.random,
                summary=summary,
                # The run's start, before its store round trips: the next run's wake-up
                # is followed by the same round trips before its request leaves.
                started_at=self._started_at,
                held_until=ran.held_until,
            )
        else:
            tr = self._failure_transition(ran.state.schedule, ran.error, ran.raised, now)
            throttled = tr.reason == "throttled"
            tr = dataclasses.replace(
                tr,
                state=dataclasses.replace(
                    tr.state, last_poll=summary, last_poll_at=summary.started_at
                ),
            )
        schedule = tr.state
        if summary.events.total:
            schedule = dataclasses.replace(schedule, drain_blocked=False)
        if tr.circuit_closed:
            await self._hooks("live").on_circuit_close()
        if tr.circuit_opened:
            await self._hooks("live").on_circuit_open(
                failures=schedule.consecutive_failures, probe_at=schedule.next_due_at or now
            )
        await self._hooks("live").on_schedule_change(
            interval_ms=schedule.interval_ms or poller.schedule.min_ms,
            next_due_at=schedule.next_due_at or now,
            reason=tr.reason,
        )
        return schedule, throttled

    async def _side_transition(
        self, lane: Lane, ran: CycleResult, now: int
    ) -> tuple[ScheduleState, bool]:
        """A reconcile or backfill cycle ended: that lane backs off, throttles, opens or
        closes its own circuit; the live lane's schedule is left alone."""
        schedule, error = ran.state.schedule, ran.error
        side = _side_state(schedule, lane)
        lanes = dict(schedule.lanes)
        throttled = False
        if error is None:
            lanes.pop(lane, None)
            if side.circuit is not CircuitState.CLOSED:
                await self._hooks(lane).on_circuit_close()
        else:
            tr = self._failure_transition(side, error, ran.raised, now)
            throttled = tr.reason == "throttled"
            lanes[lane] = tr.state
            if tr.circuit_opened:
                await self._hooks(lane).on_circuit_open(
                    failures=tr.state.consecutive_failures, probe_at=tr.state.next_due_at or now
                )
        last_error = error if error is not None else schedule.last_error
        return dataclasses.replace(schedule, lanes=lanes, last_error=last_error), throttled

    async def _report_failure(self, lane: Lane, ran: CycleResult, throttled: bool) -> None:
        """Log a failed (or throttled) cycle and fire ``on_error``."""
        error, phase = ran.error, ran.phase
        assert error is not None
        self._logger.warning(
            "%s cycle %s (%s): %s",
            lane,
            "throttled" if throttled else "failed",
            phase,
            describe_error(error),
            extra={
                "lane": lane,
                "phase": phase,
                "error_code": error.get("code"),
                "throttled": throttled,
            },
        )
        await self._hooks(lane).on_error(error=error, phase=phase)

    def _failure_transition(
        self,
        schedule: ScheduleState,
        error: SerializedError,
        raised: BaseException | None,
        now: int,
    ) -> Transition:
        retry_after_ms: int | None = None
        status: int | None = None
        throttle = False
        if isinstance(raised, HttpError):
            status = raised.status
            throttle = raised.is_throttle
            if raised.retry_after is not None:
                retry_after_ms = round(raised.retry_after * 1000)
        elif isinstance(raised, BudgetTimeoutError):
            # Out of budget is not the API failing: defer, do not count a failure.
            throttle = True
            retry_after_ms = self._poller.schedule.min_ms
        return on_failure(
            schedule,
            schedule=self._poller.schedule,
            circuit=self._poller.circuit,
            error=error,
            error_status=status,
            retry_after_ms=retry_after_ms,
            is_throttle=throttle,
            now=now,
            random=self._deps.random,
        )
