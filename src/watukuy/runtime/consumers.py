"""Who receives events: a handler (push) or a subscription (pull with backpressure)."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar, cast

from watukuy.model.errors import ConfigError, WatukuyError
from watukuy.model.events import Event
from watukuy.model.ports import Offload
from watukuy.model.rows import DEFAULT_CONSUMER

from .context import HandlerContext
from .filters import EventFilter

__all__ = [
    "Consumer",
    "Consumers",
    "DeliveryAbandoned",
    "Handler",
    "HandlerConsumer",
    "ManualAckMissing",
    "Subscription",
    "check_consumer_name",
    "consumer_filter",
]

T = TypeVar("T")

Handler = Callable[[Event[Any], HandlerContext], "Awaitable[None] | None"]
"""``(event, ctx)``, sync or async. Raising fails the delivery (it is retried)."""


class DeliveryAbandoned(WatukuyError):
    """The consumer went away before acknowledging: the event stays pending, no attempt is
    counted, and it is delivered again later."""


class ManualAckMissing(WatukuyError):
    """A handler in ``ack_mode="manual"`` returned without calling ``ctx.ack()``."""


class Consumer(Protocol):
    """Something the dispatcher can hand an event to."""

    async def deliver(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Process one event; return to ack, raise to fail."""
        ...


def consumer_filter(consumer: Consumer) -> EventFilter | None:
    """The ``when=`` filter of a consumer, if it has one."""
    when = getattr(consumer, "when", None)
    return when if isinstance(when, EventFilter) else None


_CONSUMER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_consumer_name(name: object) -> str:
    """``name`` when it can name a consumer: 1-64 letters, digits, ``_``, ``.`` or ``-``.

    Raises:
        ConfigError: It cannot (``field="consumer"``).
    """
    if not isinstance(name, str) or _CONSUMER_NAME.fullmatch(name) is None:
        raise ConfigError(
            f"a consumer name is 1-64 letters, digits, '_', '.' or '-', got {name!r}",
            field="consumer",
        )
    return name


class Consumers(Mapping[str, Consumer]):
    """The consumers of one poller by name, as one run sees them.

    With a single consumer named ``"default"``, an event has one outbox row, delivered to
    it. Otherwise every consumer gets a row of its own (see
    :func:`~watukuy.model.rows.delivery_id`), with its own attempts, retries and parking:
    one consumer failing or parked never redelivers to, or holds back, another.
    """

    __slots__ = ("_by_name",)

    def __init__(self, by_name: Mapping[str, Consumer]) -> None:
        self._by_name = dict(by_name)

    def __getitem__(self, name: str) -> Consumer:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    @property
    def shared(self) -> Consumer | None:
        """The consumer of the events' shared outbox rows: the default one when it is the
        only one; ``None`` when each consumer needs rows of its own."""
        if len(self._by_name) == 1:
            return self._by_name.get(DEFAULT_CONSUMER)
        return None

    def __repr__(self) -> str:
        return f"Consumers({sorted(self._by_name)!r})"


class HandlerConsumer:
    """Runs a user handler; sync handlers run through ``offload`` (the engine's worker
    threads), so they may block.

    Args:
        handler: The user's handler, sync or async.
        manual_ack: The handler must call ``ctx.ack()`` (``delivery.ack_mode="manual"``).
        when: Events this filter turns down are acknowledged without reaching the handler.
        offload: Where a sync handler runs.
    """

    # The next event (of another ordering key) may be handled while this one's ack is
    # being written.
    pipeline_acks = True

    def __init__(
        self,
        handler: Handler,
        *,
        manual_ack: bool,
        when: EventFilter | None = None,
        offload: Offload,
    ) -> None:
        self.handler = handler
        self._offload = offload
        self.when = when
        """Events this filter turns down are acknowledged without reaching the handler."""
        self._manual_ack = manual_ack
        self._is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )

    async def deliver(self, event: Event[Any], ctx: HandlerContext) -> None:
        try:
            if self._is_async:
                await cast("Awaitable[None]", self.handler(event, ctx))
            else:
                result = await self._offload.run(self.handler, event, ctx)
                if inspect.isawaitable(result):
                    await result
        finally:
            ctx._open = False
        if self._manual_ack and not ctx.acked:
            raise ManualAckMissing(
                'handler returned without ctx.ack() while delivery.ack_mode is "manual"'
            )


class Subscription(Generic[T]):
    """An async iterator of events with backpressure (``engine.subscribe(name)``).

    The dispatcher hands over one event and waits; the event is acknowledged when you ask for
    the next one. If your loop body raises, or the task is cancelled, the event in hand is
    **not** acknowledged and is delivered again later (at least once). Used as an async
    context manager, leaving the ``async with`` block normally also acknowledges the event in
    hand (so ``break`` inside it is safe)::

        async with engine.subscribe("orders") as events:
            async for event in events:
                await handle(event)

    Iteration ends when the engine stops, when :meth:`close` (or :meth:`aclose`) is called,
    from the loop or from any other task, or when the ``stop`` event given to
    ``engine.subscribe(..., stop=...)`` is set. Ending it from outside loses nothing: the
    event the loop body was given is acknowledged when the body asks for the next one, as
    usual, or delivered again when the body never finished it; events not yet offered wait
    in the outbox for the next subscription of the same consumer.
    """

    def __init__(
        self,
        name: str,
        on_close: Callable[[Subscription[Any]], None],
        *,
        when: EventFilter | None = None,
        consumer: str = DEFAULT_CONSUMER,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.name = name
        """The poller's name."""
        self.consumer = consumer
        """The consumer name this subscription receives events as."""
        self.when = when
        """Events this filter turns down are acknowledged without being offered."""
        self._on_close = on_close
        self._offers: asyncio.Queue[tuple[Event[T], asyncio.Future[None]] | None] = asyncio.Queue()
        self._current: tuple[Event[T], asyncio.Future[None]] | None = None
        self._closed = False
        self._stop = stop

    # --- the dispatcher side ------------------------------------------------------------

    async def deliver(self, event: Event[Any], ctx: HandlerContext) -> None:
        if self._closed:
            raise DeliveryAbandoned("the subscription is closed")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._offers.put((event, future))
        try:
            await future
        except asyncio.CancelledError:
            future.cancel()
            raise

    # --- the consumer side --------------------------------------------------------------

    def __aiter__(self) -> Subscription[T]:
        return self

    async def __anext__(self) -> Event[T]:
        self.ack()
        while True:
            if self._stop is not None and self._stop.is_set():
                self.close()
            if self._closed:
                raise StopAsyncIteration
            offer = await self._next_offer()
            if offer is None:
                self._closed = True
                raise StopAsyncIteration
            event, future = offer
            if future.done():  # the dispatcher gave up on it (cancelled)
                continue
            self._current = offer
            return event

    async def _next_offer(self) -> tuple[Event[T], asyncio.Future[None]] | None:
        """The next offer, or ``None`` once closed or, while waiting, stopped."""
        if self._stop is None:
            return await self._offers.get()
        getting = asyncio.ensure_future(self._offers.get())
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not getting.done():
                getting.cancel()
        if getting.done() and not getting.cancelled():
            return getting.result()
        # Stopped while waiting; close() ends the iteration and abandons nothing in hand.
        self.close()
        return None

    def ack(self) -> None:
        """Acknowledge the event in hand now (the next ``__anext__`` does it implicitly)."""
        current, self._current = self._current, None
        if current is not None and not current[1].done():
            current[1].set_result(None)

    def _abandon_current(self) -> None:
        current, self._current = self._current, None
        if current is not None and not current[1].done():
            current[1].set_exception(DeliveryAbandoned("the consumer did not acknowledge"))

    def close(self, *, ack_current: bool = False) -> None:
        """Stop the subscription; the event in hand is acked only when ``ack_current``."""
        if ack_current:
            self.ack()
        else:
            self._abandon_current()
        if not self._closed:
            self._closed = True
            while not self._offers.empty():
                offer = self._offers.get_nowait()
                if offer is not None and not offer[1].done():
                    offer[1].set_exception(DeliveryAbandoned("the subscription closed"))
            self._offers.put_nowait(None)
            self._on_close(self)

    async def aclose(self) -> None:
        """Close without acknowledging the event in hand."""
        self.close()

    async def __aenter__(self) -> Subscription[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(ack_current=exc_type is None)

    @property
    def closed(self) -> bool:
        """True once closed (by you or by the engine stopping)."""
        return self._closed
