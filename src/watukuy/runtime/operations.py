"""Operating a running system: trigger, pause, backfill, replay, reset, parked, inspect.

The writes to one key are :class:`~watukuy.runtime.key_operations.KeyOperations`, shared
with the CLI's store-only mode and the admin page; what this module adds is what only an
engine knows: the poller definitions (a key's partition, the cursor strategy, the event
log), the store's migration, and waking or forgetting the key in this process.

Administrative writes are unfenced (they work from any process, including one that does not
hold the key's lease); ``replay`` briefly takes the lease because it appends to the outbox.
Every per-key operation takes ``partition=`` and raises ``ConfigError`` when a partitioned
poller is called without it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from watukuy.model import json as wkjson
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, ReplayUnavailableError, StoreError, WatukuyError
from watukuy.model.events import event_from_json, event_to_json
from watukuy.model.partition import Partition
from watukuy.model.rows import (
    BackfillState,
    CommitBatch,
    HeldDeletes,
    Lease,
    LoggedEvent,
    OutboxRow,
    ParkedKind,
    ParkedRow,
    PKey,
    PollerState,
)
from watukuy.scheduler import loop_grace, overdue_grace

from .deadline import finish_by
from .key_operations import CursorView, KeyOperations, PollerInspect
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

    async def _operated(self, name: str, partition: str | None) -> PKey:
        """The key an operation names, checked against the definitions, on a migrated
        store."""
        _, key = self._key(name, partition)
        await self._ensure_migrated()
        return key

    @property
    def _key_ops(self) -> KeyOperations:
        """The key operations on this engine's store and clock (what the engine adds to
        them, the definitions' checks and the wake-ups, stays here)."""
        return KeyOperations(self.store, self.clock)

    async def _state(self, key: PKey) -> PollerState:
        return await self._key_ops.state(key)

    # --- scheduling -------------------------------------------------------------------------

    async def trigger(self, name: str, partition: str | None = None) -> None:
        """Mark a key due now and clear any ``Retry-After`` window. On an open circuit the
        run is a half-open probe (success closes it)."""
        key = await self._operated(name, partition)
        await self._key_ops.trigger(key)
        self._wake_key(key, force=True)

    async def pause(self, name: str, partition: str | None = None) -> None:
        """Skip a key until :meth:`resume` (its outbox is not delivered meanwhile)."""
        key = await self._operated(name, partition)
        await self._key_ops.pause(key)
        self._forget(key)

    async def resume(self, name: str, partition: str | None = None) -> None:
        """Un-pause a key and mark it due now."""
        key = await self._operated(name, partition)
        await self._key_ops.resume(key)
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
        await self._key_ops.reset_cursor(key, lambda _stored: cursor, clear_snapshot=clear_snapshot)
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
        lease = await self._replay_lease(key)
        replayed = 0
        try:
            sequence = (await self._state(key)).sequence
            after: int | None = None
            while True:
                logged = await self.store.read_log(
                    key, after_sequence=after, from_time=start, to_time=end, limit=_REPLAY_BATCH
                )
                if not logged:
                    break
                after = logged[-1].sequence
                sequence = await self._replay_batch(key, lease, logged, sequence)
                replayed += len(logged)
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

    async def _replay_lease(self, key: PKey) -> Lease:
        """The key's lease, waited for a few times while a run holds it."""
        for _ in range(_REPLAY_LEASE_ATTEMPTS):
            lease = await self.store.acquire_lease(
                key, self.instance_id, self._lease.ttl_ms, self.clock.now()
            )
            if lease is not None:
                return lease
            await self.clock.sleep(_REPLAY_LEASE_WAIT_MS)
        raise WatukuyError(
            f"replay(): {key} stayed leased by another instance; try again",
            code="INVALID_STATE",
        )

    async def _replay_batch(
        self, key: PKey, lease: Lease, logged: Sequence[LoggedEvent], sequence: int
    ) -> int:
        """Append one batch of logged events to the outbox after ``sequence``, with the
        key's next sequences and ``lane="replay"``; returns the last sequence used."""
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
        return sequence

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
        for name, poller in list(self._pollers.items()):  # add_poller() may add one meanwhile
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
        return await self._key_ops.inspect_key(
            key,
            now,
            grace_ms=self._overdue_grace(),
            view=self._cursor_view(poller),
            late_window=lambda late: window_ms(poller, late),
            queued=self._queued(poller, key, now),
            filtered=self._deps.filtered.get(key, 0),
            consumers=sorted(self._consumers.get(key.poller, {})),
        )

    def _cursor_view(self, poller: PollerDefinition[Any]) -> CursorView:
        """Cursors described by the poller's strategies (a cursor they cannot read is
        shown as stored, without a lag)."""

        def view(lane: str, text: str, now: int) -> tuple[Any, int | None]:
            strategy = self._deps.reconcile_strategy if lane == "reconcile" else poller.strategy
            try:
                value = strategy.deserialize(text)
                described = strategy.describe(value)
                return described, strategy.lag_ms(value, now) if lane == "live" else None
            except ConfigError:
                stored = wkjson.loads(text) if text.startswith(("{", "[", '"')) else text
                return stored, None

        return view


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
        key = await self._engine._operated(name, partition)
        return await self._engine._key_ops.parked_list(key, kind=kind, limit=limit)

    async def retry(self, name: str, ids: Sequence[str], *, partition: str | None = None) -> int:
        """Put parked poison events back in the outbox (holds released); returns the count."""
        engine = self._engine
        key = await engine._operated(name, partition)
        moved = await engine._key_ops.parked_retry(key, ids)
        if moved:
            engine._wake_key(key)
        return moved

    async def discard(self, name: str, ids: Sequence[str], *, partition: str | None = None) -> int:
        """Drop parked rows for good; returns the count."""
        engine = self._engine
        key = await engine._operated(name, partition)
        dropped = await engine._key_ops.parked_discard(key, ids)
        if dropped:
            engine._wake_key(key)
        return dropped


class DeletesOperations:
    """``engine.deletes``: the deletes a mass-delete guard held back (see ``Deletes``)."""

    def __init__(self, engine: Operations) -> None:
        self._engine = engine

    async def held(self, name: str, *, partition: str | None = None) -> HeldDeletes | None:
        """The key's held deletes, or ``None`` when nothing is held."""
        engine = self._engine
        key = await engine._operated(name, partition)
        return await engine._key_ops.deletes_held(key)

    async def confirm(self, name: str, *, partition: str | None = None) -> int:
        """Let the held deletes go out: the key's next run (due now) emits ``deleted`` for
        every identity still missing, under its lease. Returns how many were held (``0``
        when nothing was)."""
        engine = self._engine
        key = await engine._operated(name, partition)
        held = await engine._key_ops.deletes_confirm(key)
        if held is None:
            return 0
        engine._wake_key(key)
        return held.count

    async def discard(self, name: str, *, partition: str | None = None) -> int:
        """Drop the held deletes: nothing is emitted, the rows stay in the snapshot. A later
        pass that still misses them proposes them again (and the guard may hold them
        again). Returns how many were held (``0`` when nothing was)."""
        engine = self._engine
        key = await engine._operated(name, partition)
        held = await engine._key_ops.deletes_discard(key)
        return 0 if held is None else held.count


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
        key = await engine._operated(name, partition)
        await engine.store.delete_key(key)
        engine._forget(key)
