"""Publish events to RabbitMQ with aio-pika: persistent, confirmed, identified."""

from __future__ import annotations

from typing import Any

from watukuy.model.durations import Duration
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.runtime.context import HandlerContext

from ._common import SinkError, Target, optional_seconds, require, resolve_target, target_of
from ._serialize import SinkFormat, check_format, serialize_event

__all__ = ["RabbitMQSink", "rabbitmq_sink"]


def _exchange_of(channel_or_exchange: Any) -> Any:
    """The exchange to publish to: a channel's default exchange, or the exchange given."""
    default = getattr(channel_or_exchange, "default_exchange", None)
    exchange = default if default is not None else channel_or_exchange
    channel = getattr(exchange, "channel", None)
    if not callable(getattr(exchange, "publish", None)) or channel is None:
        raise ConfigError(
            f"expected an aio-pika channel or exchange, got {channel_or_exchange!r}",
            field="channel_or_exchange",
        )
    if getattr(channel, "publisher_confirms", True) is False:
        # Without confirms publish() returns once the bytes are written: a broker crash
        # would lose events that watukuy already counted as delivered.
        raise ConfigError(
            "the channel was opened with publisher_confirms=False; open it with "
            "connection.channel() (confirms are the default)",
            field="channel_or_exchange",
        )
    return exchange


class RabbitMQSink:
    """Publishes each event as a persistent message and waits for the broker's confirm
    (see :func:`rabbitmq_sink`)."""

    def __init__(
        self,
        channel_or_exchange: Any,
        *,
        routing_key: Target,
        format: SinkFormat = "cloudevents",
        mandatory: bool = True,
        timeout: Duration | None = None,
    ) -> None:
        self._aio_pika = require("aio_pika", "rabbitmq")
        self._returned_type = require("aiormq.abc", "rabbitmq").DeliveredMessage
        self._exchange = _exchange_of(channel_or_exchange)
        self.routing_key: Target = target_of(routing_key, "routing_key")
        self.format: SinkFormat = check_format(format)
        if not isinstance(mandatory, bool):
            raise ConfigError(f"expected a bool, got {mandatory!r}", field="mandatory")
        self.mandatory = mandatory
        self._timeout = optional_seconds(timeout, "timeout")

    def __repr__(self) -> str:
        name = getattr(self._exchange, "name", "") or "(default)"
        return f"RabbitMQSink(exchange={name!r}, routing_key={self.routing_key!r})"

    async def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Publish one event, then ``ctx.ack()``."""
        await self.publish(event)
        ctx.ack()

    async def publish(self, event: Event[Any]) -> None:
        """Publish one event and wait for the broker's confirm.

        Raises:
            SinkError: The broker returned the message as unroutable (``mandatory``).
        """
        aio_pika = self._aio_pika
        wire = serialize_event(event, self.format)
        message = aio_pika.Message(
            wire.body,
            content_type=wire.content_type,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=event.id,
            type=f"{event.poller}.{event.type}",
            app_id="watukuy",
        )
        routing_key = resolve_target(self.routing_key, event, "routing_key")
        confirmation = await self._exchange.publish(
            message, routing_key, mandatory=self.mandatory, timeout=self._timeout
        )
        # aio-pika hands an unroutable message back instead of raising (unless the channel
        # has on_return_raises); an event nobody will receive must not count as delivered.
        if isinstance(confirmation, self._returned_type):
            reason = getattr(confirmation.delivery, "reply_text", None) or "returned"
            raise SinkError(
                f"RabbitMQ did not route event {event.id} (routing key {routing_key!r}): {reason}",
                event_id=event.id,
                attempt=event.attempt,
            )


def rabbitmq_sink(
    channel_or_exchange: Any,
    *,
    routing_key: Target,
    format: SinkFormat = "cloudevents",
    mandatory: bool = True,
    timeout: Duration | None = None,
) -> RabbitMQSink:
    """A handler that publishes each event to RabbitMQ (aio-pika).

    Messages are persistent, have ``message_id = event.id`` (consumers dedup on it: RabbitMQ
    itself keeps every copy of a redelivered event), ``type = "<poller>.<type>"`` and the
    content type of ``format``. The sink waits for the broker's publisher confirm, and with
    ``mandatory`` (the default) a message no queue would receive fails the delivery instead
    of vanishing::

        connection = await aio_pika.connect_robust("amqp://guest:guest@127.0.0.1/")
        channel = await connection.channel()             # publisher confirms are on
        engine.on("orders", rabbitmq_sink(channel, routing_key="erp.orders"))

    Args:
        channel_or_exchange: An aio-pika channel (its default exchange routes by queue
            name) or an exchange (``await channel.get_exchange("events")``).
        routing_key: The routing key, or ``(event) -> str``.
        format: ``"cloudevents"`` (``application/cloudevents+json``) or ``"raw"``.
        mandatory: Fail when the broker cannot route the message.
        timeout: How long to wait for the confirm (default: no limit).

    Raises:
        ImportError: aio-pika is not installed (``pip install 'watukuy[rabbitmq]'``).
        ConfigError: An argument is invalid, or the channel has publisher confirms off.
    """
    return RabbitMQSink(
        channel_or_exchange,
        routing_key=routing_key,
        format=format,
        mandatory=mandatory,
        timeout=timeout,
    )
