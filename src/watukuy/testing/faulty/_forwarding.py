"""A store that forwards every call: the base of store wrappers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import TypeVar

from watukuy.model.errors import SerializedError
from watukuy.model.ports import StateStore
from watukuy.model.rows import (
    CommitBatch,
    ItemMark,
    ItemRow,
    Lease,
    LoggedEvent,
    OutboxRow,
    ParkedKind,
    ParkedRow,
    PKey,
    PollerState,
    StatePatch,
    StoreCapabilities,
    Tombstone,
    Validator,
)

__all__ = ["ForwardingStore"]

T = TypeVar("T")


class ForwardingStore:
    """A :class:`~watukuy.model.ports.StateStore` that forwards every call to ``inner``.

    Subclass it to observe or disturb a store: override the methods you care about and call
    ``super()``. Every call goes through :meth:`_enter` first and is awaited through
    :meth:`_run` (both plain pass-throughs here).

    Args:
        inner: The store that does the work.
    """

    def __init__(self, inner: StateStore) -> None:
        self.inner = inner

    def _enter(self, operation: str) -> None:
        """Called before every operation; raise to refuse it."""

    async def _run(self, call: Awaitable[T]) -> T:
        """Await one call of the inner store; override to wrap every call."""
        return await call

    @property
    def capabilities(self) -> StoreCapabilities:
        """The inner store's capabilities."""
        return self.inner.capabilities

    async def migrate(self) -> None:
        """Forwarded."""
        self._enter("migrate")
        await self._run(self.inner.migrate())

    async def close(self) -> None:
        """Forwarded."""
        self._enter("close")
        await self._run(self.inner.close())

    async def acquire_lease(self, key: PKey, owner: str, ttl_ms: int, now: int) -> Lease | None:
        """Forwarded."""
        self._enter("acquire_lease")
        return await self._run(self.inner.acquire_lease(key, owner, ttl_ms, now))

    async def renew_lease(self, key: PKey, lease: Lease, ttl_ms: int, now: int) -> bool:
        """Forwarded."""
        self._enter("renew_lease")
        return await self._run(self.inner.renew_lease(key, lease, ttl_ms, now))

    async def release_lease(self, key: PKey, lease: Lease) -> None:
        """Forwarded."""
        self._enter("release_lease")
        await self._run(self.inner.release_lease(key, lease))

    async def get_lease(self, key: PKey) -> Lease | None:
        """Forwarded."""
        self._enter("get_lease")
        return await self._run(self.inner.get_lease(key))

    async def load_state(self, key: PKey) -> PollerState | None:
        """Forwarded."""
        self._enter("load_state")
        return await self._run(self.inner.load_state(key))

    async def save_state(self, key: PKey, lease: Lease, patch: StatePatch) -> None:
        """Forwarded."""
        self._enter("save_state")
        await self._run(self.inner.save_state(key, lease, patch))

    async def save_state_unfenced(self, key: PKey, patch: StatePatch, now: int) -> None:
        """Forwarded."""
        self._enter("save_state_unfenced")
        await self._run(self.inner.save_state_unfenced(key, patch, now))

    async def list_keys(self, poller: str | None = None) -> list[PKey]:
        """Forwarded."""
        self._enter("list_keys")
        return await self._run(self.inner.list_keys(poller))

    async def due_keys(
        self, poller: str, until: int, limit: int | None = None
    ) -> list[tuple[str, int]]:
        """Forwarded."""
        self._enter("due_keys")
        return await self._run(self.inner.due_keys(poller, until, limit))

    async def delete_key(self, key: PKey) -> None:
        """Forwarded."""
        self._enter("delete_key")
        await self._run(self.inner.delete_key(key))

    async def clear_items(self, key: PKey) -> None:
        """Forwarded."""
        self._enter("clear_items")
        await self._run(self.inner.clear_items(key))

    async def load_versions(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemRow]:
        """Forwarded."""
        self._enter("load_versions")
        return await self._run(self.inner.load_versions(key, identities))

    async def load_marks(self, key: PKey, identities: Sequence[str]) -> dict[str, ItemMark]:
        """Forwarded."""
        self._enter("load_marks")
        return await self._run(self.inner.load_marks(key, identities))

    async def load_tombstones(self, key: PKey, identities: Sequence[str]) -> dict[str, Tombstone]:
        """Forwarded."""
        self._enter("load_tombstones")
        return await self._run(self.inner.load_tombstones(key, identities))

    async def prune_tombstones(self, key: PKey, older_than: int) -> int:
        """Forwarded."""
        self._enter("prune_tombstones")
        return await self._run(self.inner.prune_tombstones(key, older_than))

    async def stream_identities(
        self, key: PKey, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """Forwarded, batch by batch (each batch counts as a call)."""
        self._enter("stream_identities")
        async for batch in self.inner.stream_identities(key, batch_size):
            yield batch
            self._enter("stream_identities")

    async def stream_unseen(
        self, key: PKey, before: int, batch_size: int = 1000
    ) -> AsyncIterator[list[str]]:
        """Forwarded, batch by batch (each batch counts as a call)."""
        self._enter("stream_unseen")
        async for batch in self.inner.stream_unseen(key, before, batch_size):
            yield batch
            self._enter("stream_unseen")

    async def count_items(self, key: PKey) -> int:
        """Forwarded."""
        self._enter("count_items")
        return await self._run(self.inner.count_items(key))

    async def commit_poll(self, key: PKey, lease: Lease, batch: CommitBatch) -> None:
        """Forwarded."""
        self._enter("commit_poll")
        await self._run(self.inner.commit_poll(key, lease, batch))

    async def load_pending(
        self, key: PKey, limit: int, after_sequence: int | None = None
    ) -> list[OutboxRow]:
        """Forwarded."""
        self._enter("load_pending")
        return await self._run(self.inner.load_pending(key, limit, after_sequence))

    async def count_pending(self, key: PKey) -> int:
        """Forwarded."""
        self._enter("count_pending")
        return await self._run(self.inner.count_pending(key))

    async def ack_events(self, key: PKey, lease: Lease, event_ids: Sequence[str]) -> None:
        """Forwarded."""
        self._enter("ack_events")
        await self._run(self.inner.ack_events(key, lease, event_ids))

    async def record_attempt(
        self,
        key: PKey,
        lease: Lease,
        event_id: str,
        error: SerializedError,
        next_attempt_at: int | None,
    ) -> None:
        """Forwarded."""
        self._enter("record_attempt")
        await self._run(self.inner.record_attempt(key, lease, event_id, error, next_attempt_at))

    async def park_event(self, key: PKey, lease: Lease, row: ParkedRow) -> None:
        """Forwarded."""
        self._enter("park_event")
        await self._run(self.inner.park_event(key, lease, row))

    async def list_parked(
        self, key: PKey, kind: ParkedKind | None = None, limit: int | None = None
    ) -> list[ParkedRow]:
        """Forwarded."""
        self._enter("list_parked")
        return await self._run(self.inner.list_parked(key, kind, limit))

    async def count_parked(self, key: PKey) -> int:
        """Forwarded."""
        self._enter("count_parked")
        return await self._run(self.inner.count_parked(key))

    async def retry_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Forwarded."""
        self._enter("retry_parked")
        return await self._run(self.inner.retry_parked(key, ids))

    async def discard_parked(self, key: PKey, ids: Sequence[str]) -> int:
        """Forwarded."""
        self._enter("discard_parked")
        return await self._run(self.inner.discard_parked(key, ids))

    async def held_keys(self, key: PKey) -> set[str]:
        """Forwarded."""
        self._enter("held_keys")
        return await self._run(self.inner.held_keys(key))

    async def get_validator(self, key: PKey, url_hash: str) -> Validator | None:
        """Forwarded."""
        self._enter("get_validator")
        return await self._run(self.inner.get_validator(key, url_hash))

    async def set_validator(
        self, key: PKey, lease: Lease, url_hash: str, validator: Validator
    ) -> None:
        """Forwarded."""
        self._enter("set_validator")
        await self._run(self.inner.set_validator(key, lease, url_hash, validator))

    async def clear_validators(self, key: PKey) -> None:
        """Forwarded."""
        self._enter("clear_validators")
        await self._run(self.inner.clear_validators(key))

    async def read_log(
        self,
        key: PKey,
        *,
        after_sequence: int | None = None,
        from_time: int | None = None,
        to_time: int | None = None,
        limit: int = 1000,
    ) -> list[LoggedEvent]:
        """Forwarded."""
        self._enter("read_log")
        return await self._run(
            self.inner.read_log(
                key,
                after_sequence=after_sequence,
                from_time=from_time,
                to_time=to_time,
                limit=limit,
            )
        )

    async def prune_log(self, key: PKey, older_than: int) -> int:
        """Forwarded."""
        self._enter("prune_log")
        return await self._run(self.inner.prune_log(key, older_than))
