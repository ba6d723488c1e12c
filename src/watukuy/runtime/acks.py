"""Writing a drain's acks in groups, in the background, while the next events are delivered.

A fast handler would otherwise pay one store call per event. The writer queues each ack and
writes the queue in one ``ack_events`` call: once it holds :data:`MAX_ACKS_IN_FLIGHT` acks,
when a delivery waits for one of its acks (the next event of the same ordering key), when
the drain ends, and at the latest :data:`ACK_GROUP_WAIT_MS` after a group's first ack. Bigger
groups cost less per ack (SQLite rewrites each index page a group touches once per group).

The group's deadline is a sleep on the engine's :class:`~watukuy.model.ports.Clock`, so a
test on a ``VirtualClock`` decides when it passes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from watukuy.model.errors import LeaseLostError
from watukuy.model.ports import Clock, StateStore
from watukuy.model.rows import Lease, PKey

__all__ = ["ACK_GROUP_WAIT_MS", "MAX_ACKS_IN_FLIGHT", "AckWriter"]

T = TypeVar("T")

# Acks waiting for the writer while it writes the group before them: at this many the
# dispatcher waits for that write. Groups grow while the writer is slow, which is when a
# bigger group costs least per ack.
MAX_ACKS_IN_FLIGHT = 1024
# How long the first ack of a group waits for others before the group is written anyway.
ACK_GROUP_WAIT_MS = 50


class AckWriter(Generic[T]):
    """The background ack writer of one key's drains.

    Each ack carries a detail of type ``T`` that the writer does not read: once the ack has
    landed it is handed to ``landed`` with the event id (the dispatcher counts the event
    and fires its hook there).

    Args:
        store: The state store.
        key: The key whose outbox rows are acked.
        lease: Returns the current lease (read when a group is written).
        clock: The engine's clock: a group's deadline is a sleep on it.
        landed: Called once per ack that landed, in queue order.
    """

    def __init__(
        self,
        *,
        store: StateStore,
        key: PKey,
        lease: Callable[[], Lease],
        clock: Clock,
        landed: Callable[[str, T], Awaitable[None]],
    ) -> None:
        self._store = store
        self._key = key
        self._lease = lease
        self._clock = clock
        self._landed = landed
        self._acking: dict[str, asyncio.Future[None]] = {}  # group -> its latest ack
        # Acks waiting for the writer, and the future they all resolve together.
        self._queue: list[tuple[str, T]] = []
        self._batch: asyncio.Future[None] | None = None
        self._writing: asyncio.Future[None] | None = None  # the group being written
        self._writer: asyncio.Task[None] | None = None
        self._flush_now = False  # the queued acks are to be written now (see queue)
        self._timer: asyncio.Future[None] | None = None

    # --- what the dispatcher asks -----------------------------------------------------------

    def queue(self, group: str, event_id: str, detail: T) -> bool:
        """Queue an ack for ``event_id``, the latest of ``group`` (its ordering key):
        :meth:`behind` returns it before the group's next event is delivered.

        Returns:
            Whether a whole group now waits for the writer: the caller should then
            :meth:`wait_for_room` before it delivers more.
        """
        if self._batch is None:
            self._batch = asyncio.get_running_loop().create_future()
            # A group's failure reaches every delivery that awaits one of its acks. When none
            # does (the run ended first: its lease lost, cancelled, its process killed), the
            # failure has no one left to tell: it is observed here, not logged by asyncio as
            # "Future exception was never retrieved" when the group is collected.
            self._batch.add_done_callback(_observed)
        self._acking[group] = self._batch
        if not self._queue:
            self._timer = asyncio.ensure_future(self._flush_after_wait())
        self._queue.append((event_id, detail))
        if len(self._queue) < MAX_ACKS_IN_FLIGHT:
            return False
        self.flush()
        return True

    def behind(self, group: str) -> asyncio.Future[None] | None:
        """The latest ack of ``group``, to await before the group's next event is
        delivered (a redelivery then never follows a later event of the same ordering
        key); it is written now if still queued. ``None`` when none is in flight.

        Not a coroutine: most deliveries have nothing to wait for, and pay no coroutine.
        """
        previous = self._acking.pop(group, None)
        if previous is not None and not previous.done():
            self.flush()
        return previous

    def flush(self) -> None:
        """Have the queued acks written as soon as the writer is free."""
        self._stop_timer()
        if not self._queue:
            return
        self._flush_now = True
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write())

    async def wait_for_room(self) -> None:
        """Wait while a whole group of acks waits for the writer: until the group being
        written lands and the writer takes the waiting one. At most two groups are then
        delivered but not acknowledged, while the next events are delivered."""
        while len(self._queue) >= MAX_ACKS_IN_FLIGHT:
            writing = self._writing
            if writing is None or writing.done():
                return
            await asyncio.wait((writing,))

    @property
    def busy(self) -> bool:
        """Acks are queued or being written."""
        return bool(self._queue) or (self._writer is not None and not self._writer.done())

    @property
    def unsettled(self) -> bool:
        """Some ack has not been waited for since the last :meth:`end`."""
        return self._writer is not None or bool(self._acking) or bool(self._queue)

    async def landed(self) -> None:
        """Write the queued acks now and wait until the writer is done with them; a failed
        write is left for the deliveries waiting on it to raise."""
        self.flush()
        writer = self._writer
        if writer is not None and not writer.done():
            await asyncio.gather(writer, return_exceptions=True)

    async def end(self, *, settle: bool) -> None:
        """Wait for every ack in flight when ``settle`` (the first failure is raised once
        all are done), then stop the writer; what it had not written is dropped (the
        events stay pending)."""
        try:
            if settle:
                await self._settle()
        finally:
            for ack in self._acking.values():
                ack.cancel()
            self._acking.clear()
            self._abandon()

    # --- the writer -------------------------------------------------------------------------

    async def _flush_after_wait(self) -> None:
        await self._clock.sleep(ACK_GROUP_WAIT_MS)
        self._timer = None  # done: flush() must not cancel the task running it
        self.flush()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _settle(self) -> None:
        self.flush()
        acks, self._acking = list(dict.fromkeys(self._acking.values())), {}
        writer = self._writer
        if writer is not None and not writer.done():
            await asyncio.gather(writer, return_exceptions=True)
        if not acks:
            return
        outcomes = await asyncio.gather(*acks, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    def _abandon(self) -> None:
        self._stop_timer()
        self._flush_now = False
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
        if self._batch is not None and not self._batch.done():
            self._batch.cancel()
        self._writer, self._batch, self._queue = None, None, []
        self._writing = None

    async def _write(self) -> None:
        while self._queue and self._flush_now:
            self._flush_now = False
            entries, self._queue = self._queue, []
            batch, self._batch = self._batch, None
            assert batch is not None
            self._writing = batch
            try:
                failure = await self._write_group(entries)
            except BaseException as error:
                failure = error
            if not batch.done():
                if failure is None:
                    batch.set_result(None)
                else:
                    batch.set_exception(failure)
            if isinstance(failure, asyncio.CancelledError):
                raise failure

    async def _write_group(self, entries: list[tuple[str, T]]) -> BaseException | None:
        """Ack a group in one store call. When that call fails for a reason other than a
        lost lease, each event is acked on its own, so that one bad ack costs one
        redelivery rather than one per event of the group. Returns the first failure."""
        lease = self._lease()
        try:
            await self._store.ack_events(self._key, lease, [entry[0] for entry in entries])
        except LeaseLostError:
            raise
        except Exception as error:
            if len(entries) == 1:
                return error
            failure: BaseException | None = None
            for event_id, detail in entries:
                try:
                    await self._store.ack_events(self._key, lease, [event_id])
                except Exception as single:
                    failure = failure or single
                    continue
                await self._landed(event_id, detail)
            return failure
        for event_id, detail in entries:
            await self._landed(event_id, detail)
        return None


def _observed(done: asyncio.Future[None]) -> None:
    """Mark a finished future's exception as retrieved (see :meth:`AckWriter.queue`)."""
    if not done.cancelled():
        done.exception()
