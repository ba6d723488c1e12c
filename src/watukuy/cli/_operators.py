"""The operations the CLI performs, with or without the application's poller definitions.

With ``--app`` the CLI holds the real engine and every operation is the engine's own.
With only ``--store`` there are no poller definitions, so the store-only commands work on
the keys the store already holds:

- a poller is known when the store has at least one key for it, and it is partitioned when
  those keys have partitions (so ``--partition`` is required exactly as with the engine);
- ``inspect`` lists every stored key; cursors are shown as stored (parsed JSON) and
  ``lag`` is computed only for watermarks that read as standard timestamps, and a key is
  ``overdue`` after the least grace (``watukuy.scheduler.OVERDUE_GRACE_MS``), the
  engine's settings being unknown;
- ``trigger``, ``pause``, ``resume``, ``parked`` and ``deletes`` write what the engine
  would write (a confirmed hold is emitted by the next run of an engine);
- ``reset-cursor --to null`` removes the stored live cursor, so the next cycle starts
  from the poller's own initial cursor. Any other ``--to`` cannot be interpreted without
  the strategy, so it must be the *stored* form of a cursor, as JSON, shaped like the one
  stored now (copy ``cursors.live`` from ``watukuy inspect --json`` and edit it);
- ``tick``, ``run``, ``backfill`` and ``replay`` need the definitions (``fetch``,
  the cursor strategy, the event log) and refuse to run without ``--app``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from watukuy.cursor.config import read_timestamp_ms
from watukuy.model import json as wkjson
from watukuy.model.late import late_report
from watukuy.model.ports import Clock, StateStore
from watukuy.model.rows import (
    HeldDeletes,
    ParkedKind,
    ParkedRow,
    PKey,
    PollerState,
    held_deletes_to_json,
    schedule_to_json,
)
from watukuy.runtime.engine import EngineCore
from watukuy.runtime.operations import (
    confirm_held_deletes,
    discard_held_deletes,
    listing_report,
    reset_cursor_patch,
)
from watukuy.runtime.operator import KeyOperator
from watukuy.scheduler import OVERDUE_GRACE_MS, is_overdue, waiting_ms
from watukuy.scheduler import trigger as trigger_schedule

from ._errors import CliError

__all__ = ["EngineOperator", "Operator", "StoreOperator"]


class Operator(KeyOperator, Protocol):
    """What the store-only commands need, whoever performs it: the key operations, plus
    the report and the held deletes."""

    async def inspect(self) -> dict[str, Any]:
        """A report shaped like ``engine.inspect()``."""
        ...

    async def deletes_held(self, name: str, *, partition: str | None) -> HeldDeletes | None:
        """The deletes the mass-delete guard holds for a key."""
        ...


class EngineOperator:
    """The operations of a loaded application's engine, with CLI-worded argument checks."""

    def __init__(self, engine: EngineCore) -> None:
        self.engine = engine

    @property
    def store(self) -> StateStore:
        """The engine's store."""
        return self.engine.store

    def key(self, name: str, partition: str | None) -> PKey:
        """Check ``--poller``/``--partition`` against the definitions."""
        poller = self.engine.pollers.get(name)
        if poller is None:
            known = ", ".join(sorted(self.engine.pollers)) or "none"
            raise CliError(f"--poller: unknown poller {name!r} (the application has: {known})")
        if poller.partitioned and partition is None:
            raise CliError(f"--partition: poller {name!r} is partitioned; pass --partition KEY")
        if not poller.partitioned and partition:
            raise CliError(f"--partition: poller {name!r} is not partitioned; drop --partition")
        return PKey(name, partition or "")

    async def inspect(self) -> dict[str, Any]:
        """``engine.inspect()``."""
        return dict(await self.engine.inspect())

    async def trigger(self, name: str, partition: str | None) -> PKey:
        """``engine.trigger()``."""
        key = self.key(name, partition)
        await self.engine.trigger(name, partition=partition)
        return key

    async def pause(self, name: str, partition: str | None) -> PKey:
        """``engine.pause()``."""
        key = self.key(name, partition)
        await self.engine.pause(name, partition=partition)
        return key

    async def resume(self, name: str, partition: str | None) -> PKey:
        """``engine.resume()``."""
        key = self.key(name, partition)
        await self.engine.resume(name, partition=partition)
        return key

    async def reset_cursor(
        self, name: str, to: str | None, *, clear_snapshot: bool, partition: str | None
    ) -> PKey:
        """``engine.reset_cursor()`` with the raw cursor ``to``."""
        key = self.key(name, partition)
        await self.engine.reset_cursor(name, to, clear_snapshot=clear_snapshot, partition=partition)
        return key

    async def parked_list(
        self, name: str, *, partition: str | None, kind: ParkedKind | None, limit: int | None
    ) -> list[ParkedRow]:
        """``engine.parked.list()``."""
        self.key(name, partition)
        return await self.engine.parked.list(name, partition=partition, kind=kind, limit=limit)

    async def parked_retry(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """``engine.parked.retry()``."""
        self.key(name, partition)
        return await self.engine.parked.retry(name, ids, partition=partition)

    async def parked_discard(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """``engine.parked.discard()``."""
        self.key(name, partition)
        return await self.engine.parked.discard(name, ids, partition=partition)

    async def deletes_held(self, name: str, *, partition: str | None) -> HeldDeletes | None:
        """``engine.deletes.held()``."""
        self.key(name, partition)
        return await self.engine.deletes.held(name, partition=partition)

    async def deletes_confirm(self, name: str, *, partition: str | None) -> int:
        """``engine.deletes.confirm()``."""
        self.key(name, partition)
        return await self.engine.deletes.confirm(name, partition=partition)

    async def deletes_discard(self, name: str, *, partition: str | None) -> int:
        """``engine.deletes.discard()``."""
        self.key(name, partition)
        return await self.engine.deletes.discard(name, partition=partition)


class StoreOperator:
    """The store-only operations, on the keys a store already holds (see the module doc).

    Args:
        store: The store, built from ``--store``.
        clock: Time for ``updated_at`` stamps and due times.
    """

    def __init__(self, store: StateStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    @property
    def store(self) -> StateStore:
        """The store operated on."""
        return self._store

    async def key(self, name: str, partition: str | None) -> PKey:
        """The stored key for ``--poller``/``--partition``, or a :class:`CliError`."""
        keys = await self._store.list_keys(name)
        if not keys:
            known = sorted({key.poller for key in await self._store.list_keys()})
            listed = ", ".join(known) if known else "no pollers yet"
            raise CliError(f"--poller: the store has no poller {name!r} (it has: {listed})")
        partitions = [key.partition for key in keys]
        partitioned = any(partitions)
        if partitioned and partition is None:
            raise CliError(
                f"--partition: poller {name!r} is partitioned; pass --partition KEY "
                f"(stored: {_sample(partitions)})"
            )
        if not partitioned and partition:
            raise CliError(f"--partition: poller {name!r} is not partitioned; drop --partition")
        wanted = partition or ""
        if wanted not in partitions:
            raise CliError(
                f"--partition: poller {name!r} has no stored partition {wanted!r} "
                f"(stored: {_sample(partitions)})"
            )
        return PKey(name, wanted)

    async def _state(self, key: PKey) -> PollerState:
        state = await self._store.load_state(key)
        if state is None:  # deleted between list_keys and now
            raise CliError(f"--poller: {key} is no longer in the store")
        return state

    async def inspect(self) -> dict[str, Any]:
        """Every stored key, in the shape of ``engine.inspect()`` (``instance_id`` is
        ``None`` and ``status`` is ``"store-only"``)."""
        now = self._clock.now()
        pollers = [await self._inspect_key(key, now) for key in await self._store.list_keys()]
        return {
            "instance_id": None,
            "status": "store-only",
            "generated_at": now,
            "pollers": pollers,
            "budgets": {},  # the budgets' policies live in the application, not the store
            "overdue_grace_ms": OVERDUE_GRACE_MS,
        }

    async def _inspect_key(self, key: PKey, now: int) -> dict[str, Any]:
        store = self._store
        state = await self._state(key)
        lease = await store.get_lease(key)
        cursors = {
            lane: _stored_cursor(text) for lane, text in state.cursors.items() if text is not None
        }
        schedule = schedule_to_json(state.schedule)
        waiting = waiting_ms(state, lease, now)
        return {
            "poller": key.poller,
            "partition": key.partition,
            "paused": state.paused,
            "lease": None
            if lease is None
            else {"owner": lease.owner, "epoch": lease.epoch, "expires_at": lease.expires_at},
            "cursors": cursors,
            "schedule": schedule,
            "last_poll": schedule["last_poll"],
            "outbox_pending": await store.count_pending(key),
            "parked": await store.count_parked(key),
            "items": await store.count_items(key),
            "lag_ms": _lag_ms(cursors.get("live"), now),
            "listing": listing_report(state),
            "held_deletes": held_deletes_to_json(state.held_deletes),
            "waiting_ms": waiting,
            "overdue": is_overdue(waiting, OVERDUE_GRACE_MS),
            "late_arrivals": late_report(state.late),
        }

    async def trigger(self, name: str, partition: str | None) -> PKey:
        """Due now, any ``Retry-After`` window dropped, an open circuit half-open."""
        key = await self.key(name, partition)
        now = self._clock.now()
        state = await self._state(key)
        schedule = trigger_schedule(state.schedule, now)
        await self._store.save_state_unfenced(
            key, {"schedule": schedule, "updated_at": now, "wake_at": now}, now
        )
        return key

    async def pause(self, name: str, partition: str | None) -> PKey:
        """Paused until resumed."""
        key = await self.key(name, partition)
        now = self._clock.now()
        await self._store.save_state_unfenced(
            key, {"paused": True, "updated_at": now, "wake_at": None}, now
        )
        return key

    async def resume(self, name: str, partition: str | None) -> PKey:
        """Un-paused and due now."""
        key = await self.key(name, partition)
        now = self._clock.now()
        state = await self._state(key)
        schedule = dataclasses.replace(state.schedule, next_due_at=now, drain_blocked=False)
        await self._store.save_state_unfenced(
            key, {"paused": False, "schedule": schedule, "updated_at": now, "wake_at": now}, now
        )
        return key

    async def reset_cursor(
        self, name: str, to: str | None, *, clear_snapshot: bool, partition: str | None
    ) -> PKey:
        """Remove the live cursor (``to=None``) or write a stored-form cursor verbatim."""
        key = await self.key(name, partition)
        state = await self._state(key)
        cursors = dict(state.cursors)
        if to is None:
            cursors.pop("live", None)
        else:
            cursors["live"] = _check_stored_form(to, cursors.get("live"))
        now = self._clock.now()
        if clear_snapshot:
            await self._store.clear_items(key)
        await self._store.save_state_unfenced(key, reset_cursor_patch(state, cursors, now), now)
        return key

    async def parked_list(
        self, name: str, *, partition: str | None, kind: ParkedKind | None, limit: int | None
    ) -> list[ParkedRow]:
        """Parked rows, oldest first."""
        key = await self.key(name, partition)
        return await self._store.list_parked(key, kind=kind, limit=limit)

    async def parked_retry(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """Poison rows back to the outbox, and the key's deliveries unblocked."""
        key = await self.key(name, partition)
        moved = await self._store.retry_parked(key, list(ids))
        if moved:
            await self._unblock(key)
        return moved

    async def parked_discard(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """Rows dropped, and the key's deliveries unblocked."""
        key = await self.key(name, partition)
        dropped = await self._store.discard_parked(key, list(ids))
        if dropped:
            await self._unblock(key)
        return dropped

    async def deletes_held(self, name: str, *, partition: str | None) -> HeldDeletes | None:
        """The stored hold, if any."""
        key = await self.key(name, partition)
        return (await self._state(key)).held_deletes

    async def deletes_confirm(self, name: str, *, partition: str | None) -> int:
        """The engine's own write: the hold confirmed and the key due now."""
        key = await self.key(name, partition)
        held = await confirm_held_deletes(self._store, key, self._clock.now())
        return 0 if held is None else held.count

    async def deletes_discard(self, name: str, *, partition: str | None) -> int:
        """The hold dropped; nothing is emitted."""
        key = await self.key(name, partition)
        held = await discard_held_deletes(self._store, key, self._clock.now())
        return 0 if held is None else held.count

    async def _unblock(self, key: PKey) -> None:
        # The same write the engine makes: held events become deliverable at once.
        now = self._clock.now()
        state = await self._state(key)
        schedule = dataclasses.replace(state.schedule, next_retry_at=now, drain_blocked=False)
        await self._store.save_state_unfenced(
            key, {"schedule": schedule, "updated_at": now, "wake_at": now}, now
        )


def _sample(partitions: Sequence[str], limit: int = 5) -> str:
    shown = [p for p in partitions if p][:limit]
    more = len([p for p in partitions if p]) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _stored_cursor(text: str) -> Any:
    try:
        return wkjson.loads(text)
    except ValueError:
        return text


def _lag_ms(live: Any, now: int) -> int | None:
    """Lag of a timestamp watermark, when it reads with the default timestamp rules."""
    if not isinstance(live, dict) or set(live) != {"value", "tie_break"}:
        return None
    value = live["value"]
    if value is None:
        return None
    ms = read_timestamp_ms(value, None)
    return None if ms is None else round(now - ms)


def _check_stored_form(raw: str, current: str | None) -> str:
    """``raw`` as compact JSON text, shaped like the cursor stored now (when there is one)."""
    hint = (
        "without --app the cursor strategy is unknown, so --to must be null or the stored "
        "form of a cursor as JSON (copy cursors.live from 'watukuy inspect --json'), or pass "
        "--app to give the API's own cursor"
    )
    try:
        value = wkjson.loads(raw)
    except ValueError:
        raise CliError(f"--to: {hint}; got {raw!r}") from None
    if current is not None:
        stored = _stored_cursor(current)
        same_shape = type(stored) is type(value) and (
            not isinstance(value, dict) or set(value) == set(stored)
        )
        if not same_shape:
            raise CliError(
                f"--to: {raw!r} is not shaped like the stored cursor {current!r}; {hint}"
            )
    return wkjson.dumps(value)
