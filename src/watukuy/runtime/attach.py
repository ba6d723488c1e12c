"""The consumers of each poller: handlers and subscriptions, attached and detached.

:class:`ConsumerTable` is what ``EngineCore.on``, ``off`` and ``subscribe`` do once the
poller's name is checked: it names a consumer attached without a name, checks its filter
against what the poller keeps, refuses a second consumer of one name, and tells the engine
when a consumer was attached (events may be waiting for it in the outbox).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.model.ports import InlineOffload, Offload
from watukuy.model.rows import DEFAULT_CONSUMER

from .consumers import Consumer, Handler, HandlerConsumer, Subscription
from .filters import EventFilter, as_filter
from .poller import PollerDefinition

__all__ = ["ConsumerTable"]


_INLINE = InlineOffload()


class ConsumerTable:
    """Poller name -> consumer name -> consumer (a poller with none has no entry).

    Args:
        pollers: The poller definitions by name (names are checked by the caller).
        attached: Called with a poller's name after a consumer of it was attached.
        offload: Where sync handlers run (default: in place, on the event loop's thread;
            the engine passes its own).
    """

    def __init__(
        self,
        pollers: Mapping[str, PollerDefinition[Any]],
        attached: Callable[[str], None],
        offload: Offload = _INLINE,
    ) -> None:
        self._pollers = pollers
        self._attached = attached
        self._offload = offload
        self.by_poller: dict[str, dict[str, Consumer]] = {}
        """The consumers by poller, then by consumer name."""

    def has_consumer(self, name: str) -> bool:
        """Whether poller ``name`` has at least one consumer."""
        return name in self.by_poller

    def filter_for(
        self, name: str, when: Callable[[Event[Any]], bool] | None
    ) -> EventFilter | None:
        """``when`` as a filter of poller ``name``'s events (``None``: no filter).

        Raises:
            ConfigError: ``when`` reads ``previous`` on a poller with ``retain="hash"``.
        """
        if when is None:
            return None
        poller = self._pollers[name]
        check = as_filter(when, array_key=poller.array_key)
        if check.needs_previous and not poller.retain_payload:
            raise ConfigError(
                f"the filter {check!r} reads previous and changes, which poller {name!r} "
                'does not keep with retain="hash"; define it with retain="payload"',
                field="when",
            )
        return check

    def attach_handler(
        self, name: str, consumer: str | None, handler: Handler, when: EventFilter | None = None
    ) -> None:
        """Attach ``handler`` to poller ``name`` under ``consumer`` (``None``: the first
        free default name).

        Raises:
            ConfigError: ``handler`` is not callable, or the name is taken.
        """
        if not callable(handler):
            raise ConfigError(f"expected a callable handler, got {handler!r}", field="handler")
        if consumer is None:
            consumer = self._free_default_name(name)
        manual = self._pollers[name].delivery.ack_mode == "manual"
        self._attach(
            name,
            consumer,
            HandlerConsumer(handler, manual_ack=manual, when=when, offload=self._offload),
        )

    def subscribe(
        self,
        name: str,
        consumer: str,
        when: EventFilter | None = None,
        stop: asyncio.Event | None = None,
    ) -> Subscription[Any]:
        """A new subscription to poller ``name``, attached under ``consumer``.

        Raises:
            ConfigError: The name is taken.
        """
        subscription: Subscription[Any] = Subscription(
            name, self._subscription_closed, when=when, consumer=consumer, stop=stop
        )
        self._attach(name, consumer, subscription)
        return subscription

    def detach(self, name: str, consumer: str | None) -> None:
        """Detach the consumer named ``consumer`` of poller ``name`` (``None``: all of
        them); a detached subscription is closed."""
        by_name = self.by_poller.get(name, {})
        names = list(by_name) if consumer is None else [consumer]
        for each in names:
            detached = by_name.pop(each, None)
            if isinstance(detached, Subscription):
                detached.close()
        if not by_name:
            self.by_poller.pop(name, None)

    def close_subscriptions(self) -> None:
        """Close every subscription (the engine stopped); they stay attached."""
        for by_name in list(self.by_poller.values()):
            for consumer in list(by_name.values()):
                if isinstance(consumer, Subscription):
                    consumer.close()

    def _subscription_closed(self, subscription: Subscription[Any]) -> None:
        by_name = self.by_poller.get(subscription.name, {})
        if by_name.get(subscription.consumer) is subscription:
            del by_name[subscription.consumer]
            if not by_name:
                del self.by_poller[subscription.name]

    def _free_default_name(self, name: str) -> str:
        """The name of a handler attached without one: ``"default"``, else the first free
        ``"default-<n>"`` from 2."""
        taken = self.by_poller.get(name, {})
        if DEFAULT_CONSUMER not in taken:
            return DEFAULT_CONSUMER
        number = 2
        while f"{DEFAULT_CONSUMER}-{number}" in taken:
            number += 1
        return f"{DEFAULT_CONSUMER}-{number}"

    def _attach(self, name: str, consumer_name: str, consumer: Consumer) -> None:
        by_name = self.by_poller.setdefault(name, {})
        if consumer_name in by_name:
            raise ConfigError(
                f"poller {name!r} already has a consumer named {consumer_name!r}; give "
                "another handler or subscription its own consumer= name",
                field="consumer",
            )
        by_name[consumer_name] = consumer
        self._attached(name)
