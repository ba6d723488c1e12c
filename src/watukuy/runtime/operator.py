"""What an operator can do to a key, with an engine or on a store alone.

The CLI's store-only commands and the admin page act on keys through an object of this
shape: :class:`EngineKeyOperator` over an engine's own operations, or the store-only ones
``watukuy --store URL`` performs. Both make their writes through
:class:`watukuy.runtime.key_operations.KeyOperations`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from watukuy.model.ports import StateStore
from watukuy.model.rows import HeldDeletes, ParkedKind, ParkedRow, PKey

if TYPE_CHECKING:
    from .engine import EngineCore

__all__ = ["EngineKeyOperator", "KeyOperator"]


@runtime_checkable
class KeyOperator(Protocol):
    """The operations on one key that need no poller definition."""

    @property
    def store(self) -> StateStore:
        """The store operated on."""
        ...

    async def trigger(self, name: str, partition: str | None) -> PKey:
        """Make a key due now."""
        ...

    async def pause(self, name: str, partition: str | None) -> PKey:
        """Pause a key."""
        ...

    async def resume(self, name: str, partition: str | None) -> PKey:
        """Resume a key and make it due now."""
        ...

    async def reset_cursor(
        self, name: str, to: str | None, *, clear_snapshot: bool, partition: str | None
    ) -> PKey:
        """Rewind the live cursor."""
        ...

    async def parked_list(
        self, name: str, *, partition: str | None, kind: ParkedKind | None, limit: int | None
    ) -> list[ParkedRow]:
        """Parked rows of a key."""
        ...

    async def parked_retry(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """Send parked poison events back to the outbox."""
        ...

    async def parked_discard(self, name: str, ids: Sequence[str], *, partition: str | None) -> int:
        """Drop parked rows."""
        ...

    async def deletes_confirm(self, name: str, *, partition: str | None) -> int:
        """Confirm held deletes; returns how many were held."""
        ...

    async def deletes_discard(self, name: str, *, partition: str | None) -> int:
        """Drop held deletes; returns how many were held."""
        ...


class EngineKeyOperator:
    """An engine's own operations in the shape of :class:`KeyOperator`.

    Each operation resolves the key with :meth:`key` first (a surface may override it to
    word its own errors), then calls the engine, which checks the key against the poller
    definitions and wakes it.

    Args:
        engine: The engine operated.
    """

    def __init__(self, engine: EngineCore) -> None:
        self.engine = engine

    @property
    def store(self) -> StateStore:
        """The engine's store."""
        return self.engine.store

    def key(self, name: str, partition: str | None) -> PKey:
        """The key named (the engine checks it against its definitions)."""
        return PKey(name, partition or "")

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
