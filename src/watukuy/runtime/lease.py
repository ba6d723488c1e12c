"""Keeping a lease alive while a key runs, and noticing when it is gone."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from watukuy.model.errors import LeaseLostError, StoreError
from watukuy.model.ports import Clock, StateStore
from watukuy.model.rows import Lease, PKey

__all__ = ["LeaseKeeper"]


class LeaseKeeper:
    """Renews one key's lease on a heartbeat and after committed pages.

    When a renewal finds the lease gone (another instance took it after it expired), the
    keeper marks itself ``lost`` and calls ``on_lost`` (the runner cancels the cycle, which
    discards its in-memory work). A renewal that fails because the store is unreachable is
    logged and retried on the next heartbeat: fencing keeps a stale holder from writing.

    Fencing cannot stop a handler, though. So the keeper also watches the lease's expiry
    by this process's clock: once ``expires_at - margin_ms`` passes without a successful
    renewal (the store is down, or a renewal hangs), another instance may be about to take
    the key, and the keeper gives the lease up the same way, with a WARNING, whether or
    not a renewal is still in flight. ``expires_at`` counts from the moment before the
    last successful renewal was sent, so it never runs late.

    Args:
        store: The state store.
        key: The key whose lease is kept.
        lease: The lease as acquired.
        ttl_ms: Lease time-to-live.
        renew_every_ms: Heartbeat period (``ttl / 3`` by default in the engine).
        margin_ms: How long before its own view of the expiry the holder stops.
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
        margin_ms: int = 0,
        clock: Clock,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
        on_lost: Callable[[], None],
    ) -> None:
        self._store = store
        self._key = key
        self._lease = lease
        self._ttl_ms = ttl_ms
        self._renew_every_ms = max(1, renew_every_ms)
        self._margin_ms = max(0, margin_ms)
        self._clock = clock
        self._logger = logger
        self._on_lost = on_lost
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self.lost = False

    @property
    def lease(self) -> Lease:
        """The lease with its latest known expiry."""
        return self._lease

    def start(self) -> None:
        """Begin the heartbeat."""
        if self._task is None:
            self._task = asyncio.create_task(self._heartbeat(), name=f"watukuy-lease-{self._key}")
            self._watch = asyncio.create_task(self._deadline(), name=f"watukuy-expiry-{self._key}")

    async def stop(self) -> None:
        """End the heartbeat (idempotent)."""
        for task in (self._task, self._watch):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._task = self._watch = None

    def may_have_expired(self) -> bool:
        """True once the lease may have expired by this process's clock (less the margin)."""
        return self._clock.now() >= self._lease.expires_at - self._margin_ms

    def check(self) -> None:
        """Called before each delivery and each fetch: gives the lease up when it may have
        expired, without waiting for the watch to wake.

        Raises:
            LeaseLostError: The lease is lost, or may have expired by this process's clock.
        """
        if not self.lost and self.may_have_expired():
            self._expired()
        if self.lost:
            raise LeaseLostError(self._key.poller, self._key.partition, self._lease.epoch)

    async def renew_now(self) -> None:
        """Renew at once (after a committed page).

        Raises:
            LeaseLostError: The lease belongs to someone else now.
        """
        if self.lost:
            raise LeaseLostError(self._key.poller, self._key.partition, self._lease.epoch)
        now = self._clock.now()
        if await self._store.renew_lease(self._key, self._lease, self._ttl_ms, now):
            if self.lost:  # the deadline passed while the renewal was in flight
                raise LeaseLostError(self._key.poller, self._key.partition, self._lease.epoch)
            self._lease = dataclasses.replace(self._lease, expires_at=now + self._ttl_ms)
            return
        self._mark_lost()
        raise LeaseLostError(self._key.poller, self._key.partition, self._lease.epoch)

    async def renew_after_commit(self) -> None:
        """Renew after a committed page, unless the lease was renewed less than a tenth of
        the heartbeat's period ago: a cycle of quick pages renews a few times a heartbeat,
        not once per page, and a slow page still renews after itself. (A page's commit is
        fenced: it fails on a lease that is gone, renewed or not.)

        Raises:
            LeaseLostError: The lease belongs to someone else now.
        """
        renewed_at = self._lease.expires_at - self._ttl_ms
        if not self.lost and self._clock.now() - renewed_at < self._renew_every_ms // 10:
            return
        await self.renew_now()

    async def _heartbeat(self) -> None:
        while not self.lost:
            await self._clock.sleep(self._renew_every_ms)
            try:
                await self.renew_now()
            except LeaseLostError:
                return
            except StoreError as error:
                self._logger.warning("lease renewal failed, will retry: %s", error)

    async def _deadline(self) -> None:
        while not self.lost:
            wait = self._lease.expires_at - self._margin_ms - self._clock.now()
            if wait <= 0:
                self._expired()
                return
            await self._clock.sleep(wait)

    def _expired(self) -> None:
        self._logger.warning(
            "lease at epoch %s may expire at %s by this process's clock and could not be "
            "renewed; stopping delivery and fetching for this key",
            self._lease.epoch,
            self._lease.expires_at,
        )
        self._mark_lost()

    def _mark_lost(self) -> None:
        if not self.lost:
            self.lost = True
            self._logger.warning("lease lost at epoch %s", self._lease.epoch)
            self._on_lost()
