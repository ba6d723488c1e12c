"""Operating a running system: trigger, pause, backfill, replay, reset, parked, inspect.

Administrative writes are unfenced (they work from any process, including one that does not
hold the key's lease); ``replay`` briefly takes the lease because it appends to the outbox.
Every per-key operation takes ``partition=`` and raises ``ConfigError`` when a partitioned
poller is called without it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from watukuy.model import json as wkjson
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, ReplayUnavailableError, StoreError, WatukuyError
from watukuy.model.events import event_from_json, event_to_json
from watukuy.model.late import LateArrivals, Lookback, late_report
from watukuy.model.partition import Partition
from watukuy.model.rows import (
    BackfillState,
    CommitBatch,
    HeldDeletes,
    OutboxRow,
    ParkedKind,
    ParkedRow,
    PKey,
    PollerState,
    StatePatch,
    empty_poller_state,
    held_deletes_to_json,
    listing_to_json,
    schedule_to_json,
)
from watukuy.scheduler import is_overdue, loop_grace, overdue_grace, waiting_ms
from watukuy.scheduler import trigger as trigger_schedule

from .deadline import finish_by
from .late_watch import window_ms
from .poller import PollerDefinition
from .results import EngineStatus, ReplayResult

if TYPE_CHECKING:
    from watukuy.budget.manager import BudgetManager
    from watukuy.model.ports import Clock, StateStore

    from .results import LeaseOptions
    from .runner import EngineDeps

__all__ = [
    "BudgetInspect",
    "DeletesOperations",
    "confirm_held_deletes",
    "discard_held_deletes",
    "listing_report",
    "reset_cursor_patch",
    "InspectReport",
    "LoopInspect",
    "Operations",
    "ParkedOperations",
    "PartitionOperations",
    "PollerInspect",
    "TimeArg",
]

TimeArg = str | int | float | dt.datetime
"""A point in time: ISO 8601 text, epoch milliseconds, or a ``datetime``."""

_REPLAY_BATCH = 500
_REPLAY_LEASE_ATTEMPTS = 20
_REPLAY_LEASE_WAIT_MS = 250


class PollerInspect(TypedDict):
    """One key in :class:`InspectReport` (all plain JSON)."""

    poller: str
    partition: str
    paused: bool
    lease: dict[str, Any] | None
    cursors: dict[str, Any]
    schedule: dict[str, Any]
    last_poll: dict[str, Any] | None
    outbox_pending: int
    parked: int
    items: int
    lag_ms: int | None
    listing: dict[str, Any]
    held_deletes: dict[str, Any] | None
    waiting_ms: NotRequired[int | None]
    """How long the key has been due with nobody working on it (``0``: not due yet, or its
    lease is held; ``None``: paused or nothing planned); see ``watukuy.scheduler.waiting_ms``."""
    overdue: NotRequired[bool]
    """``waiting_ms`` is over the engine's grace (``overdue_grace_ms`` of the report): the
    key should have been polled by now and nobody is on it."""
    queued: NotRequired[bool]
    """This engine holds the key due and waiting to start, for room on its budget or under
    ``max_concurrent_keys`` (a fact of this process; absent from reports read from the store
    alone)."""

    late_arrivals: dict[str, Any]
    """Versions re-reads found behind the live watermark, and live-lane misses a reconcile
    found (see ``docs/cursors.md``, late commits)."""
    filtered: NotRequired[int]
    """Events this engine's consumer of the key acknowledged without delivering them,
    because its ``when=`` filter turned them down, since the engine was created (a count of
    this process; absent from reports read from the store alone)."""
    consumers: NotRequired[list[str]]
    """The names of the consumers this engine has for the poller, sorted (a list of this
    process; absent from reports read from the store alone)."""


class BudgetInspect(TypedDict):
    """One named budget in :class:`InspectReport`: its policy and how much is in use."""

    requests: int
    per_ms: int
    burst: int | None
    used: float | None
    waiting: int


class LoopInspect(TypedDict):
    """The daemon's loop in :class:`InspectReport` (this process only).

    The loop plans when it comes round next (the next key due, the next resync, at most
    ``resync_every`` away) and sleeps until then. A loop that is late by more than
    ``grace_ms`` is stuck, or gone.
    """

    alive: bool
    """The loop's task is running (``False``: it ended while the engine runs)."""
    next_wake_at: int | None
    """When the loop planned to come round next (epoch ms)."""
    late_ms: int
    """How far past ``next_wake_at`` the loop is (``0`` while on time); a wake-up planned in
    the past (go round again at once) counts from when the loop went to sleep."""
    grace_ms: int
    """How late it may be before it counts as stalled (``watukuy.scheduler.loop_grace``)."""
    stalled: bool
    """Not alive, or late by more than ``grace_ms``."""


class InspectReport(TypedDict):
    """What ``engine.inspect()`` returns: a JSON-ready snapshot of persisted state."""

    instance_id: str
    status: str
    generated_at: int
    pollers: list[PollerInspect]
    budgets: dict[str, BudgetInspect]
    overdue_grace_ms: NotRequired[int]
    """How long a key may be due with nobody on it before it is ``overdue``."""
    loop: NotRequired[LoopInspect | None]
    """The daemon's loop while the engine runs (``None`` otherwise: ``tick()`` mode, or
    stopped; absent from reports read from the store alone)."""


def _epoch_ms(value: TimeArg, field: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"expected a time, got {value!r}", field=field)
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return int(moment.timestamp() * 1000)
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"expected an ISO 8601 time, got {value!r}", field=field) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return int(moment.timestamp() * 1000)
    raise ConfigError(f"expected a time, got {value!r}", field=field)


class Operations:
    """The operations half of the engine (``EngineCore`` inherits it)."""

    store: StateStore
    clock: Clock
    instance_id: str
    _pollers: dict[str, PollerDefinition[Any]]
    _lease: LeaseOptions
    _deps: EngineDeps
    _status: EngineStatus
    _budget_manager: BudgetManager | None
    _consumers: dict[str, dict[str, Any]]
    _resync_ms: int
    _max_concurrent: int | None
    _loop_task: asyncio.Task[None] | None
    _loop_beat: tuple[int, int] | None
    _wake_at: dict[PKey, int]
    _running: dict[PKey, Any]

    # Provided by EngineCore.
    def _poller_name(self, poller: PollerDefinition[Any] | str) -> str:
        raise NotImplementedError

    async def _ensure_migrated(self) -> None:
        raise NotImplementedError

    async def _partitions_of(self, name: str, *, force: bool = False) -> list[Partition]:
        raise NotImplementedError

    def _wake_key(self, key: PKey, *, force: bool = False) -> None:
        raise NotImplementedError

    def _forget(self, key: PKey) -> None:
        raise NotImplementedError

    # --- helpers --------------------------------------------------------------------------

    def _key(self, name: str, partition: str | None) -> tuple[PollerDefinition[Any], PKey]:
        poller = self._pollers.get(self._poller_name(name))
        assert poller is not None
        if poller.partitioned:
            if partition is None:
                raise ConfigError(
                    f"poller {name!r} is partitioned; pass partition=...", field="partition"
                )
        elif partition not in (None, ""):
            raise ConfigError(
                f"poller {name!r} is not partitioned; got partition={partition!r}",
                field="partition",
            )
        return poller, PKey(poller.name, partition or "")

    async def _state(self, key: PKey) -> PollerState:
        return await self.store.load_state(key) or empty_poller_state(self.clock.now())

    # --- scheduling -------------------------------------------------------------------------

    async def trigger(self, name: str, partition: str | None = None) -> None:
        """Mark a key due now and clear any ``Retry-After`` window. On an open circuit the
        run is a half-open probe (success closes it)."""
        _, key = self._key(name, partition)
        await self._ensure_migrated()
        now = self.clock.now()
        state = await self._state(key)
        schedule = trigger_schedule(state.schedule, now)
        await self.store.save_state_unfenced(
            key, {"schedule": schedule, "updated_at": now, "wake_at": now}, now
        )
        self._wake_key(key, force=True)

    async def pause(self, name: str, partition: str | None = None) -> None:
        """Skip a key until :meth:`resume` (its outbox is not delivered meanwhile)."""
        _, key = self._key(name, partition)
        await self._ensure_migrated()
        now = self.clock.now()
        await self.store.save_state_unfenced(
            key, {"paused": True, "updated_at": now, "wake_at": None}, now
        )
        self._forget(key)

    async def resume(self, name: str, partition: str | None = None) -> None:
        """Un-pause a key and mark it due now."""
        _, key = self._key(name, partition)
        await self._ensure_migrated()
        now = self.clock.now()
        state = await self._state(key)
        schedule = dataclasses.replace(state.schedule, next_due_at=now, drain_blocked=False)
        await self.store.save_state_unfenced(
            key, {"paused": False, "schedule": schedule, "updated_at": now, "wake_at": now}, now
        )
        self._wake_key(key)

    async def backfill(
        self,
        name: str,
        from_: str | None,
        to: str | None = None,
        force: bool = False,
        *,
        partition: str | None = None,
    ) -> None:
        """Start (or replace) a backfill lane from the API's own raw cursor ``from_``.

        Args:
            name: Poller name.
            from_: Raw cursor to start from. ``None`` is the very beginning: no timestamp
                or token at all (whatever the cursor's ``initial``), the initial page or
                custom cursor.
            to: Raw cursor to stop at (default: the live cursor at the time of the call).
            force: Re-emit items already known at the same version, as ``updated``.
            partition: Required for partitioned pollers.
        """
        poller, key = self._key(name, partition)
        if poller.strategy.full_scan:
            raise ConfigError(
                f"poller {name!r} uses a snapshot diff, which lists everything every cycle; "
                "backfill() does not apply",
                field="backfill",
            )
        await self._ensure_migrated()
        strategy = poller.strategy
        origin = strategy.beginning() if from_ is None else strategy.from_raw(from_, field="from_")
        start = strategy.serialize(origin)
        state = await self._state(key)
        if to is None:
            live = state.cursors.get("live")
            target = live if live is not None else strategy.serialize(strategy.initial())
        else:
            target = strategy.serialize(strategy.from_raw(to, field="to"))
        now = self.clock.now()
        cursors = {lane: value for lane, value in state.cursors.items() if lane != "backfill"}
        await self.store.save_state_unfenced(
            key,
            {
                "backfill": BackfillState(
                    from_cursor=start, to_cursor=target, force=force, started_at=now
                ),
                "cursors": cursors,
                "updated_at": now,
                "wake_at": now,
            },
            now,
        )
        self._wake_key(key)

    async def reset_cursor(
        self,
        name: str,
        to: str | None,
        clear_snapshot: bool = False,
        *,
        partition: str | None = None,
    ) -> None:
        """Rewind the live lane to the raw cursor ``to`` (``None``: the initial cursor).

        The key's stored HTTP validators are forgotten, so the first requests after the
        reset are answered in full, never ``304`` for what was read before. With
        ``clear_snapshot=True`` the item rows are dropped too, so everything is re-emitted
        as ``created``. Each row leaves a tombstone with its revision: an item that is
        still what its row held gets the id of that same observation again (the first
        ``created`` of an item that never changed), and later events continue the
        revisions, so no id from before the reset comes back for a new observation.
        """
        poller, key = self._key(name, partition)
        await self._ensure_migrated()
        strategy = poller.strategy
        cursor = strategy.serialize(strategy.from_raw(to, field="to"))
        state = await self._state(key)
        now = self.clock.now()
        cursors = dict(state.cursors)
        cursors["live"] = cursor
        await self.store.clear_validators(key)
        patch = reset_cursor_patch(state, cursors, now)
        progress = state.listing.lanes.get("live")
        if progress is not None and progress.pass_id is not None:
            # A full listing in progress starts over: its next cursor is no longer ours.
            lanes = {**state.listing.lanes, "live": dataclasses.replace(progress, pass_id=None)}
            patch["listing"] = dataclasses.replace(state.listing, lanes=lanes)
        if clear_snapshot:
            await self.store.clear_items(key)
            patch["held_deletes"] = None  # the rows they named are gone
        await self.store.save_state_unfenced(key, patch, now)
        self._wake_key(key)

    async def replay(
        self,
        name: str,
        from_: TimeArg,
        to: TimeArg | None = None,
        *,
        partition: str | None = None,
    ) -> ReplayResult:
        """Copy logged events in ``[from_, to]`` back into the outbox with their original
        ids, fresh sequences and ``lane="replay"``; they are delivered on the next drain.

        Raises:
            ReplayUnavailableError: The poller keeps no event log (set ``log=EventLog()``).
        """
        poller, key = self._key(name, partition)
        if poller.log is None:
            raise ReplayUnavailableError(
                f"poller {name!r} keeps no event log; define it with log=EventLog(retention=...)",
                code="REPLAY_UNAVAILABLE",
            )
        await self._ensure_migrated()
        start = _epoch_ms(from_, "from_")
        end = None if to is None else _epoch_ms(to, "to")
        lease = None
        for _ in range(_REPLAY_LEASE_ATTEMPTS):
            lease = await self.store.acquire_lease(
                key, self.instance_id, self._lease.ttl_ms, self.clock.now()
            )
            if lease is not None:
                break
            await self.clock.sleep(_REPLAY_LEASE_WAIT_MS)
        if lease is None:
            raise WatukuyError(
                f"replay(): {key} stayed leased by another instance; try again",
                code="INVALID_STATE",
            )
        replayed = 0
        try:
            state = await self._state(key)
            sequence = state.sequence
            after: int | None = None
            while True:
                logged = await self.store.read_log(
                    key, after_sequence=after, from_time=start, to_time=end, limit=_REPLAY_BATCH
                )
                if not logged:
                    break
                after = logged[-1].sequence
                now = self.clock.now()
                rows: list[OutboxRow] = []
                for entry in logged:
                    sequence += 1
                    event = dataclasses.replace(
                        event_from_json(entry.event), lane="replay", sequence=sequence
                    )
                    rows.append(
                        OutboxRow(
                            event_id=event.id,
                            sequence=sequence,
                            event=event_to_json(event),
                            created_at=now,
                        )
                    )
                await self.store.commit_poll(
                    key,
                    lease,
                    CommitBatch(
                        state_patch={"sequence": sequence, "updated_at": now},
                        events=rows,
                        now=now,
                    ),
                )
                replayed += len(rows)
                if len(logged) < _REPLAY_BATCH:
                    break
            if replayed:
                schedule = dataclasses.replace(
                    (await self._state(key)).schedule, next_retry_at=None, drain_blocked=False
                )
                await self.store.save_state(
                    key, lease, {"schedule": schedule, "wake_at": self.clock.now()}
                )
        finally:
            await self.store.release_lease(key, lease)
        self._wake_key(key)
        return ReplayResult(replayed=replayed)

    # --- reporting ------------------------------------------------------------------------

    async def inspect(self, timeout: Duration | None = "10s") -> InspectReport:
        """A JSON-ready snapshot of every active key's persisted state (see the docs for
        the fields worth alerting on).

        Args:
            timeout: The answer comes within this long or not at all (``None``: no limit).

        Raises:
            StoreError: The store failed, or did not answer within ``timeout``.
        """
        if timeout is None:
            return await self._inspect()
        limit = parse_duration(timeout, "timeout")
        work = asyncio.ensure_future(self._inspect())
        if not await finish_by(self.clock, work, self.clock.now() + limit):
            raise StoreError(f"inspect(): the store did not answer within {limit} ms")
        return work.result()

    async def _inspect(self) -> InspectReport:
        await self._ensure_migrated()
        now = self.clock.now()
        report: list[PollerInspect] = []
        for name, poller in self._pollers.items():
            for partition in await self._partitions_of(name):
                report.append(await self._inspect_key(poller, PKey(name, partition.key), now))
        return {
            "instance_id": self.instance_id,
            "status": self._status.value,
            "generated_at": now,
            "pollers": report,
            "budgets": await self.budget_usage(),
            "overdue_grace_ms": self._overdue_grace(),
            "loop": self._loop_report(now),
        }

    def _overdue_grace(self) -> int:
        return overdue_grace(resync_ms=self._resync_ms, lease_ttl_ms=self._lease.ttl_ms)

    @property
    def overdue_grace_ms(self) -> int:
        """How long a key may be due with nobody working on it before ``inspect()`` calls
        it overdue: at least a minute, and at least ``resync_every`` plus the lease TTL."""
        return self._overdue_grace()

    def _loop_report(self, now: int) -> LoopInspect | None:
        """The daemon's loop, judged from what it planned when it last went to sleep."""
        if self._status is not EngineStatus.RUNNING or self._loop_task is None:
            return None
        alive = not self._loop_task.done()
        planned = None if self._loop_beat is None else self._loop_beat[1]
        # A wake-up planned in the past means "round again at once": from when it slept.
        expected = None if self._loop_beat is None else max(self._loop_beat)
        late = 0 if expected is None else max(0, now - expected)
        grace = loop_grace(self._resync_ms)
        return {
            "alive": alive,
            "next_wake_at": planned,
            "late_ms": late,
            "grace_ms": grace,
            "stalled": not alive or late > grace,
        }

    def _queued(self, poller: PollerDefinition[Any], key: PKey, now: int) -> bool:
        """Due in this engine and held back for room (its budget, ``max_concurrent_keys``)."""
        if self._status is not EngineStatus.RUNNING or key in self._running:
            return False
        at = self._wake_at.get(key)
        limited = poller.budget is not None or self._max_concurrent is not None
        return limited and at is not None and at <= now

    async def budget_usage(self) -> dict[str, BudgetInspect]:
        """Each named budget's policy and how much of it is in use now, by name.

        One read of the budget store per budget (``inspect()`` includes the same under
        ``"budgets"``). ``used`` is ``None`` when the budget store cannot tell.

        Raises:
            StoreError: The budget store failed.
        """
        manager = self._budget_manager
        if manager is None:
            return {}
        report: dict[str, BudgetInspect] = {}
        for name in manager.names:
            usage = await manager.usage(name)
            report[name] = {
                "requests": usage.requests,
                "per_ms": usage.per_ms,
                "burst": usage.burst,
                "used": usage.used,
                "waiting": usage.waiting,
            }
        return report

    async def _inspect_key(
        self, poller: PollerDefinition[Any], key: PKey, now: int
    ) -> PollerInspect:
        store = self.store
        state = await store.load_state(key)
        lease = await store.get_lease(key)
        strategy = poller.strategy
        cursors: dict[str, Any] = {}
        lag_ms: int | None = None
        if state is not None:
            for lane, text in state.cursors.items():
                if text is None:
                    continue
                lane_strategy = self._deps.reconcile_strategy if lane == "reconcile" else strategy
                try:
                    value = lane_strategy.deserialize(text)
                    cursors[lane] = lane_strategy.describe(value)
                    if lane == "live":
                        lag_ms = lane_strategy.lag_ms(value, now)
                except ConfigError:
                    cursors[lane] = wkjson.loads(text) if text.startswith(("{", "[", '"')) else text
        schedule = schedule_to_json(
            state.schedule if state is not None else empty_poller_state(now).schedule
        )
        waiting = waiting_ms(state, lease, now)

        late = state.late if state is not None else LateArrivals()
        return {
            "poller": key.poller,
            "partition": key.partition,
            "paused": bool(state and state.paused),
            "lease": None
            if lease is None
            else {"owner": lease.owner, "epoch": lease.epoch, "expires_at": lease.expires_at},
            "cursors": cursors,
            "schedule": schedule,
            "last_poll": schedule["last_poll"],
            "outbox_pending": await store.count_pending(key),
            "parked": await store.count_parked(key),
            "items": await store.count_items(key),
            "lag_ms": lag_ms,
            "listing": listing_report(state),
            "held_deletes": held_deletes_to_json(state.held_deletes) if state else None,
            "waiting_ms": waiting,
            "overdue": is_overdue(waiting, self._overdue_grace()),
            "queued": self._queued(poller, key, now),
            "late_arrivals": late_report(late, window_ms(poller, late)),
            "filtered": self._deps.filtered.get(key, 0),
            "consumers": sorted(self._consumers.get(key.poller, {})),
        }


def reset_cursor_patch(
    state: PollerState, cursors: Mapping[str, str | None], now: int
) -> StatePatch:
    """What resetting the live cursor writes, from the engine or from the CLI on a store
    alone: the new ``cursors``, due now, and the default lookback's memory forgotten (it
    was of the old cursor: the next cycle starts at the new one)."""
    return {
        "cursors": cursors,
        "schedule": dataclasses.replace(state.schedule, next_due_at=now),
        "lookback": Lookback(),
        "updated_at": now,
        "wake_at": now,
    }


def listing_report(state: PollerState | None) -> dict[str, Any]:
    """``inspect()``'s view of the full listings: per lane, the pass in progress (``None``
    between passes), what the last complete pass did, and the passes cut short."""
    if state is None or not state.listing.lanes:
        return {}
    report: dict[str, Any] = {}
    for lane, progress in listing_to_json(state.listing)["lanes"].items():
        current = None
        if progress["pass_id"] is not None:
            current = {
                name: progress[name]
                for name in (
                    "pass_id",
                    "started_at",
                    "pages",
                    "items",
                    "invalid",
                    "not_modified",
                    "listed",
                )
            }
        report[lane] = {
            "pass": current,
            "completed": progress["completed"],
            "last_completed_at": progress["last_completed_at"],
            "last_outcome": progress["last_outcome"],
            "disagreed": progress["disagreed"],
            "proven": len(progress["proven"]),
            "unproven": progress["unproven"],
            "abandoned": progress["abandoned"],
            "last_abandoned_at": progress["last_abandoned_at"],
            "last_abandoned": progress["last_abandoned"],
        }
    return report


class ParkedOperations:
    """``engine.parked``: poison events and quarantined items."""

    def __init__(self, engine: Operations) -> None:
        self._engine = engine

    async def list(
        self,
        name: str,
        *,
        partition: str | None = None,
        kind: ParkedKind | None = None,
        limit: int | None = None,
    ) -> list[ParkedRow]:
        """Parked rows of a key, oldest first, optionally of one ``kind``."""
        if kind not in (None, "poison", "invalid"):
            raise ConfigError(f"expected 'poison' or 'invalid', got {kind!r}", field="kind")
        _, key = self._engine._key(name, partition)
        await self._engine._ensure_migrated()
        return await self._engine.store.list_parked(key, kind=kind, limit=limit)

    async def retry(self, name: str, ids: Sequence[str], *, partition: str | None = None) -> int:
        """Put parked poison events back in the outbox (holds released); returns the count."""
        engine = self._engine
        _, key = engine._key(name, partition)
        await engine._ensure_migrated()
        moved = await engine.store.retry_parked(key, list(ids))
        if moved:
            await self._unblock(key)
        return moved

    async def discard(self, name: str, ids: Sequence[str], *, partition: str | None = None) -> int:
        """Drop parked rows for good; returns the count."""
        engine = self._engine
        _, key = engine._key(name, partition)
        await engine._ensure_migrated()
        dropped = await engine.store.discard_parked(key, list(ids))
        if dropped:
            await self._unblock(key)
        return dropped

    async def _unblock(self, key: PKey) -> None:
        engine = self._engine
        now = engine.clock.now()
        state = await engine._state(key)
        schedule = dataclasses.replace(state.schedule, next_retry_at=now, drain_blocked=False)
        await engine.store.save_state_unfenced(
            key, {"schedule": schedule, "updated_at": now, "wake_at": now}, now
        )
        engine._wake_key(key)


class DeletesOperations:
    """``engine.deletes``: the deletes a mass-delete guard held back (see ``Deletes``)."""

    def __init__(self, engine: Operations) -> None:
        self._engine = engine

    async def held(self, name: str, *, partition: str | None = None) -> HeldDeletes | None:
        """The key's held deletes, or ``None`` when nothing is held."""
        engine = self._engine
        _, key = engine._key(name, partition)
        await engine._ensure_migrated()
        state = await engine.store.load_state(key)
        return None if state is None else state.held_deletes

    async def confirm(self, name: str, *, partition: str | None = None) -> int:
        """Let the held deletes go out: the key's next run (due now) emits ``deleted`` for
        every identity still missing, under its lease. Returns how many were held (``0``
        when nothing was)."""
        engine = self._engine
        _, key = engine._key(name, partition)
        await engine._ensure_migrated()
        held = await confirm_held_deletes(engine.store, key, engine.clock.now())
        if held is None:
            return 0
        engine._wake_key(key)
        return held.count

    async def discard(self, name: str, *, partition: str | None = None) -> int:
        """Drop the held deletes: nothing is emitted, the rows stay in the snapshot. A later
        pass that still misses them proposes them again (and the guard may hold them
        again). Returns how many were held (``0`` when nothing was)."""
        engine = self._engine
        _, key = engine._key(name, partition)
        await engine._ensure_migrated()
        held = await discard_held_deletes(engine.store, key, engine.clock.now())
        return 0 if held is None else held.count


async def confirm_held_deletes(store: StateStore, key: PKey, now: int) -> HeldDeletes | None:
    """Mark a key's held deletes confirmed and the key due now (an unfenced write: the
    lease holder emits them). Returns the hold as it was, ``None`` when there was none."""
    state = await store.load_state(key)
    held = None if state is None else state.held_deletes
    if held is None:
        return None
    patch: StatePatch = {
        "held_deletes": dataclasses.replace(held, confirmed=True),
        "updated_at": now,
        "wake_at": now,
    }
    await store.save_state_unfenced(key, patch, now)
    return held


async def discard_held_deletes(store: StateStore, key: PKey, now: int) -> HeldDeletes | None:
    """Drop a key's held deletes (an unfenced write). Returns the hold as it was, ``None``
    when there was none."""
    state = await store.load_state(key)
    held = None if state is None else state.held_deletes
    if held is None:
        return None
    await store.save_state_unfenced(key, {"held_deletes": None, "updated_at": now}, now)
    return held


class PartitionOperations:
    """``engine.partitions``: list (forcing a refresh) and remove partitions."""

    def __init__(self, engine: Operations) -> None:
        self._engine = engine

    async def list(self, name: str) -> list[Partition]:
        """Call the poller's ``partitions()`` now and return the result."""
        engine = self._engine
        await engine._ensure_migrated()
        return list(await engine._partitions_of(engine._poller_name(name), force=True))

    async def remove(self, name: str, partition: str) -> None:
        """Delete every row of a partition (state, lease, items, outbox, parked,
        validators, log). Use it when a tenant is gone for good."""
        engine = self._engine
        _, key = engine._key(name, partition)
        await engine._ensure_migrated()
        await engine.store.delete_key(key)
        engine._forget(key)
