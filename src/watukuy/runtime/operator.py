"""What an operator can do to a key, with an engine or on a store alone.

The CLI's store-only commands and the admin page act on keys through an object of this
shape: an engine's own operations, or the store-only ones ``watukuy --store URL`` performs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from watukuy.model.ports import StateStore
from watukuy.model.rows import ParkedKind, ParkedRow, PKey

__all__ = ["KeyOperator"]


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
