"""Handing a key's committed events to its consumers: the one caller of its dispatcher.

A key run makes one :class:`Deliveries`. The run delivers what the outbox holds through it
before any request, and each lane cycle hands it every page whose commit landed. It keeps
what the deliveries did: for the whole run (:attr:`Deliveries.drained`), and since the step
of the run that last asked (:meth:`Deliveries.take`), so each cycle reports its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from watukuy.model.events import WrittenPage
from watukuy.model.rows import OutboxRow

from .consumers import Consumers
from .dispatcher import Dispatcher, DrainResult

__all__ = ["Deliveries"]


class Deliveries:
    """Delivers the events of one key run, and counts what the deliveries did.

    Args:
        dispatcher: The key's dispatcher (made for this run, under its lease).
        consumers: The poller's consumers, or ``None`` (events then wait in the outbox).
    """

    def __init__(self, dispatcher: Dispatcher, consumers: Consumers | None) -> None:
        self._dispatcher = dispatcher
        self._consumers = consumers
        # Drains whose acks may still be landing: their counts grow until settle().
        self._unsettled: list[DrainResult] = []
        self._settled: list[DrainResult] = []  # since the last take()
        self._drained = DrainResult()

    @property
    def drained(self) -> DrainResult:
        """What every settled delivery of the run did, together."""
        return self._drained

    def halted(self) -> bool:
        """A poison event with ``action="halt"`` stopped a delivery of the run (its acks
        landed or not): nothing more is to be fetched or delivered."""
        return self._drained.halted or any(result.halted for result in self._unsettled)

    async def deliver(
        self, rows: Sequence[OutboxRow] = (), page: WrittenPage | None = None
    ) -> None:
        """Deliver everything deliverable now and wait for the acks: with no ``rows``, what
        the outbox holds before the run's first request; otherwise a batch just committed
        outside the page loop (see :meth:`Dispatcher.drain`)."""
        result = await self._dispatcher.drain(self._consumers, rows, page)
        self._count(result)

    async def hand(self, rows: Sequence[OutboxRow], page: WrittenPage) -> None:
        """Deliver the events of a page whose commit landed, without waiting for their acks:
        they are written while the next page is fetched, and :meth:`settle` (or the next
        delivery) waits for them."""
        result = await self._dispatcher.drain(self._consumers, rows, page, settle=False)
        self._unsettled.append(result)

    async def settle(self) -> None:
        """Wait for the acks the handed pages left being written. What they delivered is
        counted even when the wait fails (the acks that landed did land)."""
        try:
            await self._dispatcher.settle()
        finally:
            unsettled, self._unsettled = self._unsettled, []
            for result in unsettled:
                self._count(result)

    def take(self) -> DrainResult:
        """What the settled deliveries did since the last call (a step of the run: the
        deliveries before the first request, one lane cycle)."""
        taken = DrainResult()
        for result in self._settled:
            taken.merge(result)
        self._settled.clear()
        return taken

    def _count(self, result: DrainResult) -> None:
        self._settled.append(result)
        self._drained.merge(result)
