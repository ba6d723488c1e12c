"""Delivering a key's outbox: ordered per ordering key, concurrent across keys.

The dispatcher loads pending rows in sequence order, a batch at a time (keyset paging, so a
held or retrying key at the head never starves the rows behind it), groups each batch by
ordering key and runs at most ``delivery.concurrency`` groups at once, strictly one event at a
time within a group. Every success is acked on its own (so a crash redelivers at most the
events in flight). A failure records the attempt with a full-jitter retry time and blocks its
group for the rest of the drain; after ``retry.attempts`` the event is parked as poison, with
its ordering key held when ``poison.hold_key`` is on.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from watukuy.model.errors import LeaseLostError
from watukuy.model.events import Event, WrittenPage, event_from_json
from watukuy.model.redact import serialize_error
from watukuy.model.rows import (
    DEFAULT_CONSUMER,
    CommitBatch,
    Lease,
    OutboxRow,
    ParkedRow,
    delivery_consumer,
    delivery_id,
)
from watukuy.pipeline.delivery import DrainResult, Rehydration, with_history, without_history
from watukuy.scheduler import backoff_delay

from ._turn import turn
from .acks import AckWriter
from .consumers import Consumer, Consumers, DeliveryAbandoned, consumer_filter
from .context import HandlerContext
from .scope import KeyScope

__all__ = ["DrainResult", "Dispatcher"]

# Events delivered between two turns of the event loop (see _turn).
_TURN_EVERY = 32


# One event to deliver: its group (ordering key, with "@<consumer>" on a consumer's own
# row), the consumer's name, the consumer, the row and its event.
_Delivery = tuple[str, str, Consumer, OutboxRow, Event[Any]]

# What the dispatcher keeps with a queued ack until it lands: the event (for the hook that
# reports it), attempt, handler milliseconds, its drain's result, filtered out.
_AckDetail = tuple["Event[Any] | None", int, int, DrainResult, bool]


class Dispatcher:
    """Drains one key's outbox into its consumer.

    Args:
        scope: The key run it delivers for: its store, clock, randomness (retry jitter),
            hooks, batch size, redaction and filter counts (``scope.deps``), the poller
            (delivery options, schema for rehydration), the partition (handed to
            handlers), the lease keeper (the lease each write is fenced with, checked
            before each delivery), the logger and the run's cancel event (handlers see
            ``ctx.cancelled``).
    """

    def __init__(self, scope: KeyScope) -> None:
        deps, keeper, poller = scope.deps, scope.keeper, scope.poller
        self._check_lease = keeper.check
        self._filtered_counts = deps.filtered
        self._redaction = deps.redaction
        self._store = store = deps.store
        self._key = key = scope.key
        self._poller = poller
        self._partition = scope.partition

        def lease() -> Lease:
            return keeper.lease

        self._lease = lease
        self._clock = clock = deps.clock
        self._random = deps.random
        self._hooks = deps.hooks
        self._hooks_of = scope.hooks  # the key's emitter of an event's lane
        self._batch_size = deps.batch_size
        self._logger = scope.logger
        self._cancel = scope.cancel
        self._ordering_key = poller.delivery.ordering_key
        self._rehydrate = Rehydration(
            adapter=poller.adapter,
            patches=poller.retain_payload,
            fingerprint=poller.fingerprint,
            array_key=poller.array_key,
        )
        self._acks: AckWriter[_AckDetail] = AckWriter(
            store=store, key=key, lease=lease, clock=clock, landed=self._acked
        )

    async def drain(
        self,
        consumers: Consumers | None,
        committed: Sequence[OutboxRow] = (),
        events: WrittenPage | None = None,
        *,
        settle: bool = True,
    ) -> DrainResult:
        """Deliver everything deliverable now; returns what happened.

        Args:
            consumers: Who receives the events (nothing is delivered without one).
            committed: The rows the caller has just committed, in sequence order. When the
                outbox holds these and nothing else, they are delivered as they are,
                without reading them back; otherwise the outbox is read in sequence order.
            events: The events of ``committed``, one per row, as their writer reads them
                back (see :class:`~watukuy.model.events.EventWriter`): what decoding each
                row's text gives. Without them each row is decoded. Either way a consumer
                receives what a redelivery of the stored row would give it.
            settle: Return only once every ack landed (the default). ``False`` returns as
                soon as the last event is handled, its acks still being written: the
                result's ``delivered`` grows as they land, and the next ``drain()`` or
                :meth:`settle` waits for them first.
        """
        # What an earlier drain left being written lands before this one reads the outbox.
        await self.settle()
        result = DrainResult()
        if not consumers:
            return result
        try:
            await self._drain(consumers, committed, events, result)
        except BaseException:
            await self._end_acks()
            raise
        self._acks.flush()  # the last group is written while the caller goes on
        if settle:
            await self._end_acks()
        return result

    async def settle(self) -> None:
        """Wait for the acks a ``drain(settle=False)`` left being written."""
        if self._acks.unsettled:
            await self._end_acks()

    async def _end_acks(self) -> None:
        # Acks are written in the background while the next events (and batches) are
        # delivered, in groups (see AckWriter). A drain ends only when all of them landed,
        # unless the lease is gone: they would be refused, or wait on a store that no
        # longer answers.
        await self._acks.end(settle=not self._lease_gone())

    async def _drain(
        self,
        consumers: Consumers,
        committed: Sequence[OutboxRow],
        events: WrittenPage | None,
        result: DrainResult,
    ) -> None:
        if committed:
            # Both questions at once: one wait for the store instead of two.
            held, pending = await asyncio.gather(
                self._store.held_keys(self._key), self._store.count_pending(self._key)
            )
        else:
            held, pending = await self._store.held_keys(self._key), -1
        blocked: set[str] = set(held)
        held_at_start = set(blocked)
        if committed and pending == len(committed):
            # Rows are added to a key's outbox only by its lease holder's commits (and by
            # an operator's retry, which the count would show): these are all of them.
            if events is not None and consumers.shared is not None:
                # Already in memory: one batch, each event read back as it is delivered.
                await self._batch(
                    consumers, list(committed), blocked, held_at_start, result, events
                )
                return
            step = self._batch_size
            for start in range(0, len(committed), step):
                if result.halted or result.abandoned or self._cancel.is_set():
                    break
                rows = list(committed[start : start + step])
                if consumers.shared is None:
                    rows = await self._split(rows, consumers)
                await self._batch(consumers, rows, blocked, held_at_start, result)
            return
        after: int | None = None
        # Rows of the last sequence of the previous batch: the next batch starts at that
        # sequence again (rows sharing it may straddle the boundary) and skips these.
        edge: set[str] = set()
        upcoming: asyncio.Future[list[OutboxRow]] | None = None
        try:
            while not (result.halted or result.abandoned or self._cancel.is_set()):
                if upcoming is None:
                    rows = await self._store.load_pending(self._key, self._batch_size, after)
                else:
                    rows, upcoming = await upcoming, None
                full = len(rows) == self._batch_size
                fresh = [row for row in rows if row.event_id not in edge]
                if not fresh and full and self._acks.busy:
                    # A whole batch of delivered rows whose acks are still queued (rows of
                    # one sequence straddle batches): once those acks land, read again.
                    await self._acks.landed()
                    rows = await self._store.load_pending(self._key, len(rows), after)
                    full = len(rows) == self._batch_size
                    fresh = [row for row in rows if row.event_id not in edge]
                if not fresh:
                    break  # nothing new (a batch of one sequence only): the next drain
                last = fresh[-1].sequence
                edge = {row.event_id for row in fresh if row.sequence == last} | (
                    edge if after == last - 1 else set()
                )
                if consumers.shared is None:
                    fresh = await self._split(fresh, consumers)
                    # The rows split at the last sequence sit at it too: skip them next.
                    edge |= {row.event_id for row in fresh if row.sequence == last}
                after = last - 1
                if full:
                    # Read the next batch while this one is delivered (rows are only ever
                    # removed behind ``after``, so the read cannot go stale).
                    upcoming = asyncio.ensure_future(
                        self._store.load_pending(self._key, self._batch_size, after)
                    )
                await self._batch(consumers, fresh, blocked, held_at_start, result)
                if not full:
                    break
        finally:
            if upcoming is not None:
                upcoming.cancel()
                await asyncio.gather(upcoming, return_exceptions=True)

    async def _split(self, rows: list[OutboxRow], consumers: Consumers) -> list[OutboxRow]:
        """Give every consumer a row of its own for each shared row of the batch.

        The consumers' rows (``<event id>@<name>``, at the event's sequence) are written
        first, then the shared rows are acknowledged: a crash between the two writes the
        same rows again next time, before anything was delivered from them.
        """
        shared = [row for row in rows if delivery_consumer(row.event_id) is None]
        if not shared:
            return rows
        names = list(consumers)
        split = [
            OutboxRow(
                event_id=delivery_id(row.event_id, name),
                sequence=row.sequence,
                event=row.event,
                created_at=row.created_at,
            )
            for row in shared
            for name in names
        ]
        lease = self._lease()
        now = self._clock.now()
        await self._store.commit_poll(self._key, lease, CommitBatch(events=split, now=now))
        await self._store.ack_events(self._key, lease, [row.event_id for row in shared])
        # A crash after an earlier split left both the shared rows and their copies: the
        # copies were just written again (same ids), and appear once in what is delivered.
        out: dict[str, OutboxRow] = {}
        at = 0
        for row in rows:
            if delivery_consumer(row.event_id) is None:
                for copy in split[at : at + len(names)]:
                    out[copy.event_id] = copy
                at += len(names)
            else:
                out.setdefault(row.event_id, row)
        return list(out.values())

    async def _batch(
        self,
        consumers: Consumers,
        rows: list[OutboxRow],
        blocked: set[str],
        held_at_start: set[str],
        result: DrainResult,
        events: WrittenPage | None = None,
    ) -> None:
        """Deliver one batch: group its rows by consumer and ordering key, skipping
        blocked groups and rows for a consumer this engine does not have. ``events``, when
        given, reads the rows' events back (one per row, in order); with the default
        ordering key each is read only when it is delivered."""
        if self._poller.delivery.concurrency == 1:
            await self._in_sequence(consumers, rows, blocked, held_at_start, result, events)
            return
        plan: list[_Delivery] = []
        for index, row in enumerate(rows):
            name, consumer = _consumer_of_row(consumers, row)
            if consumer is None:
                result.held += 1  # it waits for its consumer to be registered
                continue
            event = event_from_json(row.event) if events is None else events.event(index)
            group = _group(self._ordering_key_of(event), name, blocked, held_at_start, result)
            if group is not None:
                plan.append((group, name or DEFAULT_CONSUMER, consumer, row, event))
        if plan:
            await self._run_groups(plan, blocked, result)

    async def _in_sequence(
        self,
        consumers: Consumers,
        rows: list[OutboxRow],
        blocked: set[str],
        held_at_start: set[str],
        result: DrainResult,
        events: WrittenPage | None,
    ) -> None:
        """Deliver a batch with one worker (``concurrency=1``): one event at a time, in
        sequence order, so each key's events stay in order. Each event is decoded (or read
        back from ``events``) just before its handler, and lives no longer than that."""
        lazy = events is not None and self._ordering_key is None
        for index, row in enumerate(rows):
            if result.halted or result.abandoned or self._cancel.is_set():
                return
            if index and not index % _TURN_EVERY:
                await turn()  # handlers that never wait would hold the loop
            name, consumer = _consumer_of_row(consumers, row)
            if consumer is None:
                result.held += 1  # it waits for its consumer to be registered
                continue
            event: Event[Any] | None
            if lazy:
                assert events is not None
                okey, event = events.subject(index), None
            else:
                event = event_from_json(row.event) if events is None else events.event(index)
                okey = self._ordering_key_of(event)
            group = _group(okey, name, blocked, held_at_start, result)
            if group is None:
                continue
            if event is None:
                assert events is not None
                event = events.event(index)
            outcome = await self._deliver_one(
                consumer, name or DEFAULT_CONSUMER, group, row, event, result
            )
            if outcome == "stop-group":
                blocked.add(group)

    def _ordering_key_of(self, event: Event[Any]) -> str:
        if self._ordering_key is None:
            return event.subject
        try:
            return str(self._ordering_key(event))
        except Exception as error:
            self._logger.warning(
                "delivery.ordering_key raised %s; using the subject %r", error, event.subject
            )
            return event.subject

    async def _run_groups(
        self, plan: list[_Delivery], blocked: set[str], result: DrainResult
    ) -> None:
        """Deliver ``plan`` with up to ``delivery.concurrency`` workers, each taking one
        group at a time and delivering its events strictly in order. A group that stops
        (a failure, a hold) is skipped for the rest of the batch."""
        groups: dict[str, list[_Delivery]] = {}
        for entry in plan:
            groups.setdefault(entry[0], []).append(entry)
        queue = collections.deque(groups.values())

        async def worker() -> None:
            while queue:
                for group, name, consumer, row, event in queue.popleft():
                    if result.halted or result.abandoned or self._cancel.is_set():
                        return
                    outcome = await self._deliver_one(consumer, name, group, row, event, result)
                    if outcome == "stop-group":
                        blocked.add(group)
                        break

        workers = min(self._poller.delivery.concurrency, len(queue))
        if workers == 1:
            await worker()
        else:
            await self._run_workers(worker, workers, queue)

    def _lease_gone(self) -> bool:
        try:
            self._check_lease()
        except LeaseLostError:
            return True
        return False

    @staticmethod
    async def _run_workers(
        worker: Callable[[], Awaitable[None]], workers: int, queue: collections.deque[Any]
    ) -> None:
        """Run up to ``workers`` workers over ``queue``, starting the extra ones only once
        the first one waits (a handler doing I/O): a handler that never waits gains nothing
        from more workers, and would only pay for their tasks."""
        tasks = [asyncio.ensure_future(worker())]

        async def spawn_when_the_first_waits() -> None:
            for _ in range(workers - 1):
                if queue:
                    tasks.append(asyncio.ensure_future(worker()))

        tasks.append(asyncio.ensure_future(spawn_when_the_first_waits()))
        try:
            while pending := [task for task in tasks if not task.done()]:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    if not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _deliver_one(
        self,
        consumer: Consumer,
        name: str,
        okey: str,
        row: OutboxRow,
        stored: Event[Any],
        result: DrainResult,
    ) -> str:
        """Deliver one row to its consumer; ``okey`` is its group (the ordering key, with
        ``@<consumer>`` on a consumer's own row): what it acks behind and what it holds."""
        # The clock is read only for a retry's backoff and for a hook that gets the
        # handler's duration: most deliveries need neither.
        clock = self._clock
        timed = self._hooks.has("on_delivered")
        now = clock.now() if timed or row.next_attempt_at is not None else 0
        if row.next_attempt_at is not None and row.next_attempt_at > now:
            result.note_retry(row.next_attempt_at)
            return "stop-group"
        previous_ack = self._acks.behind(okey)
        if previous_ack is not None:
            # The key's previous event must be acked before its next one is delivered: a
            # redelivery then never follows a later event of the same key.
            await previous_ack
        attempt = row.attempts + 1
        event = self._rehydrate.event(stored, attempt)
        # Positional (partition, attempt, logger, consumer, cancel): one per delivery.
        ctx = HandlerContext(self._partition, attempt, self._logger, name, self._cancel)
        self._check_lease()  # after any wait above: never deliver on a lease that may be gone
        when = consumer_filter(consumer)
        if when is not None:
            try:
                passed = when(event)
            except Exception as error:  # a broken filter fails the delivery, like a handler
                return await self._failed(okey, row, event, attempt, error, result)
            if not passed:
                # Acked for this consumer without reaching it: it never holds the key.
                if self._queue_ack(okey, row.event_id, event, attempt, 0, result, filtered=True):
                    await self._acks.wait_for_room()
                return "next"
        try:
            await consumer.deliver(event, ctx)
        except DeliveryAbandoned:
            result.abandoned = True
            return "stop-group"
        except LeaseLostError:
            raise
        except Exception as error:
            return await self._failed(okey, row, event, attempt, error, result)
        duration = clock.now() - now if timed else 0
        if not getattr(consumer, "pipeline_acks", False):
            # A pull consumer asks for the next event only once this one is acked.
            await self._ack(row.event_id, event, attempt, duration, result)
            return "next"
        if self._queue_ack(okey, row.event_id, event, attempt, duration, result):
            await self._acks.wait_for_room()  # no coroutine per event otherwise
        return "next"

    def _queue_ack(
        self,
        okey: str,
        event_id: str,
        event: Event[Any],
        attempt: int,
        duration: int,
        result: DrainResult,
        *,
        filtered: bool = False,
    ) -> bool:
        """Queue the ack of a handled event with the writer (see :class:`AckWriter`);
        ``True`` when the caller should wait for room."""
        # The event is kept for the hook that reports the ack; without one it is let go
        # now, not when its ack lands, so its item does not outlive its handler.
        kept = event if self._hooks.has("on_filtered" if filtered else "on_delivered") else None
        return self._acks.queue(okey, event_id, (kept, attempt, duration, result, filtered))

    async def _acked(self, outbox_id: str, detail: _AckDetail) -> None:
        event, attempt, duration, result, filtered = detail
        if filtered:
            await self._filtered(outbox_id, event, attempt, result)
        elif event is None:
            # No hook kept the event (see _queue_ack): only the count is left to do, and
            # this runs once per ack, without the coroutine _delivered would cost.
            result.delivered += 1
        else:
            await self._delivered(outbox_id, event, attempt, duration, result)

    async def _filtered(
        self, outbox_id: str, event: Event[Any] | None, attempt: int, result: DrainResult
    ) -> None:
        result.filtered += 1
        key = self._key
        self._filtered_counts[key] = self._filtered_counts.get(key, 0) + 1
        if event is not None and self._hooks.has("on_filtered"):
            await self._hooks_of(event.lane).on_filtered(
                event=event, attempt=attempt, consumer=_consumer_of(outbox_id)
            )

    async def _ack(
        self, event_id: str, event: Event[Any], attempt: int, duration: int, result: DrainResult
    ) -> None:
        await self._store.ack_events(self._key, self._lease(), [event_id])
        await self._delivered(event_id, event, attempt, duration, result)

    async def _delivered(
        self,
        outbox_id: str,
        event: Event[Any] | None,
        attempt: int,
        duration: int,
        result: DrainResult,
    ) -> None:
        result.delivered += 1
        if event is not None and self._hooks.has("on_delivered"):
            await self._hooks_of(event.lane).on_delivered(
                event=event, attempt=attempt, duration_ms=duration, consumer=_consumer_of(outbox_id)
            )

    async def _failed(
        self,
        okey: str,
        row: OutboxRow,
        event: Event[Any],
        attempt: int,
        error: Exception,
        result: DrainResult,
    ) -> str:
        now = self._clock.now()
        serialized = with_history(
            serialize_error(error, redaction=self._redaction), row.last_error, now, attempt
        )
        delivery = self._poller.delivery
        hooks = self._hooks_of(event.lane)
        if attempt >= delivery.retry.attempts:
            parked = ParkedRow(
                id=row.event_id,
                kind="poison",
                event=row.event,
                item=None,
                error=serialized,
                attempts=attempt,
                parked_at=now,
                hold_key=okey if delivery.poison.hold_key else None,
                sequence=row.sequence,
            )
            await self._store.park_event(self._key, self._lease(), parked)
            result.parked += 1
            result.parked_rows.append(parked)
            self._logger.warning(
                "event %s parked as poison after %d attempts: %s",
                row.event_id,
                attempt,
                serialized.get("message"),
                extra={"event_id": row.event_id, "attempts": attempt},
            )
            await hooks.on_parked(row=parked)
            if delivery.poison.action == "halt":
                result.halted = True
                return "stop-group"
            return "stop-group" if delivery.poison.hold_key else "next"
        delay = backoff_delay(attempt, delivery.retry.backoff, self._random)
        retry_at = now + delay
        await self._store.record_attempt(
            self._key, self._lease(), row.event_id, serialized, retry_at
        )
        result.failed += 1
        result.note_retry(retry_at)
        self._logger.info(
            "handler failed on %s (attempt %d), retrying in %dms: %s",
            row.event_id,
            attempt,
            delay,
            serialized.get("message"),
        )
        await hooks.on_retry(
            event=event,
            attempt=attempt,
            error=without_history(serialized),
            delay_ms=delay,
            consumer=_consumer_of(row.event_id),
        )
        return "stop-group"


def _consumer_of_row(consumers: Consumers, row: OutboxRow) -> tuple[str | None, Consumer | None]:
    """The consumer a row is for: the shared one for a shared row, else the one it names
    (``None`` when this engine does not have it)."""
    name = delivery_consumer(row.event_id)
    consumer = consumers.shared if name is None else consumers.get(name)
    return name, consumer


def _group(
    okey: str, name: str | None, blocked: set[str], held_at_start: set[str], result: DrainResult
) -> str | None:
    """The group a row is delivered in (its ordering key, with ``@<consumer>`` on a
    consumer's own row), or ``None`` when a hold or an earlier failure blocks it; a row
    held since the drain began is counted in ``result.held``."""
    # A hold without a consumer name (left by a shared row) holds every consumer.
    group = okey if name is None else f"{okey}@{name}"
    if okey in blocked or group in blocked:
        if okey in held_at_start or group in held_at_start:
            result.held += 1
        return None
    return group


def _consumer_of(outbox_id: str) -> str:
    return delivery_consumer(outbox_id) or DEFAULT_CONSUMER
