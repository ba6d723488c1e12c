"""Keeping a lease alive while a key runs, and noticing when it is gone."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from .errors import LeaseLostError, StoreError
from .ports import Clock, StateStore
from .rows import Lease, PKey

__all__ = ["LeaseKeeper"]


class LeaseKeeper:
    """Renews one key's lease on a heartbeat and after every committed page.

    When a renewal finds the lease gone (another instance took it after it expired), the
    keeper marks itself ``lost`` and calls ``on_lost`` (the runner cancels the cycle, which
    discards its in-memory work). A renewal that fails because the store is unreachable is
    logged and retried on the next heartbeat: fencing keeps a stale holder from writing.

    Args:
        store: The state store.
        key: The key whose lease is kept.
        lease: The lease as acquired.
        ttl_ms: Lease time-to-live.
        renew_every_ms: Heartbeat period (``ttl / 3`` by default in the engine).
        clock: The engine's clock.
        logger: Logger scoped to the key.
        on_lost: Called once when the lease is found lost.
    """

    def __init__(
        self,
        store: StateStore,
        key: PKey,
        lease: Lease,
        *,
        ttl_ms: int,
        renew_every_ms: int,
        clock: Clock,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
        on_lost: Callable[[], None],
    ) -> None:
        self._store = store
        self._key = key
        self._lease = lease
        self._ttl_ms = ttl_ms
        self._renew_every_ms = max(1, renew_every_ms)
        self._clock = clock
        self._logger = logger
        self._on_lost = on_lost
        self._task: asyncio.Task[None] | None = None
        self.lost = False

    @property
    def lease(self) -> Lease:
        """The lease with its latest known expiry."""
        return self._lease

    def start(self) -> None:
        """Begin the heartbeat."""
        if self._task is None:
            self._task = asyncio.create_task(self._heartbeat(), name=f"watukuy-lease-{self._key}")

    async def stop(self) -> None:
        """End the heartbeat (idempotent)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def renew_now(self) -> None:
        """Renew at once (after a committed page).

        Raises:
            LeaseLostError: The lease belongs to someone else now.
        """
        if self.lost:
            raise LeaseLostError(self._key.poller, self._key.partition, self._lease.epoch)
        now = self._clock.now()
        if await self._store.renew_lease(self._key, self._lease, self._ttl_ms, now):
            self._lease = dataclasses.replace(self._lease, expires_at=now + self._ttl_ms)
            return
        self._mark_lost()
        raise LeaseLostError(self._key.poller, self._key.partition, self._lease.epoch)

    async def _heartbeat(self) -> None:
        while not self.lost:
            await self._clock.sleep(self._renew_every_ms)
            try:
                await self.renew_now()
            except LeaseLostError:
                return
            except StoreError as error:
                self._logger.warning("lease renewal failed, will retry: %s", error)

    def _mark_lost(self) -> None:
        if not self.lost:
            self.lost = True
            self._logger.warning("lease lost at epoch %s", self._lease.epoch)
            self._on_lost()
