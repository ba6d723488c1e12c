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
- ``trigger``, ``pause``, ``resume``, ``reset-cursor``, ``parked`` and ``deletes`` make the
  engine's own writes (:class:`watukuy.runtime.key_operations.KeyOperations`; a confirmed
  hold is emitted by the next run of an engine);
- ``reset-cursor --to null`` removes the stored live cursor, so the next cycle starts
  from the poller's own initial cursor. Any other ``--to`` cannot be interpreted without
  the strategy, so it must be the *stored* form of a cursor, as JSON, shaped like the one
  stored now (copy ``cursors.live`` from ``watukuy inspect --json`` and edit it);
- ``tick``, ``run``, ``backfill`` and ``replay`` need the definitions (``fetch``,
  the cursor strategy, the event log) and refuse to run without ``--app``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from watukuy.model import json as wkjson
from watukuy.model.ports import Clock, StateStore
from watukuy.model.rows import HeldDeletes, ParkedKind, ParkedRow, PKey, PollerState
from watukuy.runtime.key_operations import KeyOperations, stored_cursor
from watukuy.runtime.operator import EngineKeyOperator, KeyOperator
from watukuy.scheduler import OVERDUE_GRACE_MS

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


class EngineOperator(EngineKeyOperator):
    """The operations of a loaded application's engine, with CLI-worded argument checks."""

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


class _StoredKeyOperations(KeyOperations):
    """The key operations on keys the store holds: a key whose state is gone is refused."""

    async def stored(self, key: PKey) -> PollerState:
        state = await self.store.load_state(key)
        if state is None:  # deleted between list_keys and now
            raise CliError(f"--poller: {key} is no longer in the store")
        return state


class StoreOperator:
    """The store-only operations, on the keys a store already holds (see the module doc).

    Args:
        store: The store, built from ``--store``.
        clock: Time for ``updated_at`` stamps and due times.
    """

    def __init__(self, store: StateStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._ops = _StoredKeyOperations(store, clock)

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

    async def inspect(self) -> dict[str, Any]:
        """Every stored key, in the shape of ``engine.inspect()`` (``instance_id`` is
        ``None`` and ``status`` is ``"store-only"``)."""
        now = self._clock.now()
        pollers = [
            await self._ops.inspect_key(key, now, grace_ms=OVERDUE_GRACE_MS)
            for key in await self._store.list_keys()
        ]
        return {
            "instance_id": None,
            "status": "store-only",
            "generated_at": now,
            "pollers": pollers,
            "budgets": {},  # the budgets' policies live in the application, not the store
            "overdue_grace_ms": OVERDUE_GRACE_MS,
        }

    async def trigger(self, name: str, partition: str | None) -> PKey:
        """Due now, any ``Retry-After`` window dropped, an open circuit half-open."""
        key = await self.key(name, partition)
        await self._ops.trigger(key)
        return key

    async def pause(self, name: str, partition: str | None) -> PKey:
        """Paused until resumed."""
        key = await self.key(name, partition)
        await self._ops.pause(key)
        return key

    async def resume(self, name: str, partition: str | None) -> PKey:
        """Un-paused and due now."""
        key = await self.key(name, partition)
        await self._ops.resume(key)
        return key

    async def reset_cursor(
        self, name: str, to: str | None, *, clear_snapshot: bool, partition: str | None
    ) -> PKey:
        """Remove the live cursor (``to=None``) or write a stored-form cursor verbatim;
        otherwise the engine's own reset (validators forgotten, a listing pass started
        over, the held deletes dropped with the snapshot)."""
        key = await self.key(name, partition)

        def live(current: str | None) -> str | None:
            return None if to is None else _check_stored_form(to, current)

        await self._ops.reset_cursor(key, live, clear_snapshot=clear_snapshot)
        return key

    async def parked_list(
        self, name: str, *, partition: str | None, kind: ParkedKind | None, limit: int | None
    ) -> list[ParkedRow]:
        """Parked rows, oldest first."""
        key = await self.key(name, partition)
        return await self._ops.parked_list(key, kind=kind, limit=limit)

    async def parked_retry(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """Poison rows back to the outbox, and the key's deliveries unblocked."""
        key = await self.key(name, partition)
        return await self._ops.parked_retry(key, ids)

    async def parked_discard(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """Rows dropped, and the key's deliveries unblocked."""
        key = await self.key(name, partition)
        return await self._ops.parked_discard(key, ids)

    async def deletes_held(self, name: str, *, partition: str | None) -> HeldDeletes | None:
        """The stored hold, if any."""
        key = await self.key(name, partition)
        return await self._ops.deletes_held(key)

    async def deletes_confirm(self, name: str, *, partition: str | None) -> int:
        """The engine's own write: the hold confirmed and the key due now."""
        key = await self.key(name, partition)
        held = await self._ops.deletes_confirm(key)
        return 0 if held is None else held.count

    async def deletes_discard(self, name: str, *, partition: str | None) -> int:
        """The hold dropped; nothing is emitted."""
        key = await self.key(name, partition)
        held = await self._ops.deletes_discard(key)
        return 0 if held is None else held.count


def _sample(partitions: Sequence[str], limit: int = 5) -> str:
    shown = [p for p in partitions if p][:limit]
    more = len([p for p in partitions if p]) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


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
        stored = stored_cursor(current)
        same_shape = type(stored) is type(value) and (
            not isinstance(value, dict) or set(value) == set(stored)
        )
        if not same_shape:
            raise CliError(
                f"--to: {raw!r} is not shaped like the stored cursor {current!r}; {hint}"
            )
    return wkjson.dumps(value)
