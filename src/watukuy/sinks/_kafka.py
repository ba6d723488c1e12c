"""Produce events to Kafka (aiokafka) per the CloudEvents Kafka protocol binding."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.runtime.context import HandlerContext

from ._common import Target, resolve_target, target_of
from ._serialize import CLOUDEVENTS_CONTENT_TYPE, JSON_CONTENT_TYPE

__all__ = ["KafkaMode", "KafkaSink", "kafka_binary_headers", "kafka_sink"]

KafkaMode: TypeAlias = Literal["binary", "structured"]
"""``"binary"``: the value is the item, the envelope travels in ``ce_*`` headers.
``"structured"``: the value is the whole CloudEvent."""

# Not headers: data is the value, datacontenttype is content-type, and previous can be as
# large as the item itself.
_NOT_HEADERS: Final = frozenset({"data", "datacontenttype", "watukuyprevious"})


def kafka_binary_headers(event: Event[Any]) -> list[tuple[str, bytes]]:
    """Binary-mode headers: ``content-type``, then ``ce_<attribute>`` for every CloudEvent
    attribute except ``data``, ``datacontenttype`` and ``watukuyprevious``; empty values
    (the partition of an unpartitioned poller) are left out."""
    headers: list[tuple[str, bytes]] = [("content-type", JSON_CONTENT_TYPE.encode())]
    for name, value in event.to_cloudevent().items():
        if name in _NOT_HEADERS or value is None or value == "":
            continue
        text = value if isinstance(value, str) else wkjson.dumps(value)
        headers.append((f"ce_{name}", text.encode()))
    return headers


class KafkaSink:
    """Produces one record per event and waits for the broker (see :func:`kafka_sink`)."""

    def __init__(self, producer: Any, topic: Target, *, format: KafkaMode = "binary") -> None:
        if not callable(getattr(producer, "send_and_wait", None)):
            raise ConfigError(
                f"expected an aiokafka AIOKafkaProducer, got {producer!r}", field="producer"
            )
        if format not in ("binary", "structured"):
            raise ConfigError(f"expected 'binary' or 'structured', got {format!r}", field="format")
        self._producer = producer
        self.topic: Target = target_of(topic, "topic")
        self.format: KafkaMode = format

    def __repr__(self) -> str:
        return f"KafkaSink(topic={self.topic!r}, format={self.format!r})"

    async def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Produce one event, then ``ctx.ack()``."""
        await self.publish(event)
        ctx.ack()

    async def publish(self, event: Event[Any]) -> Any:
        """Produce one event; returns the producer's ``RecordMetadata``."""
        if self.format == "structured":
            value = wkjson.dumps(event.to_cloudevent()).encode()
            headers = [("content-type", CLOUDEVENTS_CONTENT_TYPE.encode())]
        else:
            value = wkjson.dumps(wkjson.to_jsonable(event.data)).encode()
            headers = kafka_binary_headers(event)
        return await self._producer.send_and_wait(
            resolve_target(self.topic, event, "topic"),
            value=value,
            key=event.subject.encode(),
            headers=headers,
        )


def kafka_sink(producer: Any, topic: Target, *, format: KafkaMode = "binary") -> KafkaSink:
    """A handler that produces each event to a Kafka topic (aiokafka).

    The key is ``event.subject``, so every change of one item lands on one partition, in
    order. In ``"binary"`` mode (default) the value is the item as JSON (``null`` for a
    delete without payload) and the envelope travels as ``ce_id``, ``ce_type``,
    ``ce_source``, ``ce_specversion``, ``ce_subject``, ``ce_time`` and ``ce_watukuy*``
    headers; ``"structured"`` sends the whole CloudEvent as the value::

        producer = aiokafka.AIOKafkaProducer(bootstrap_servers="kafka:9092")
        await producer.start()
        engine.on("orders", kafka_sink(producer, "erp.orders"))

    Kafka keeps every copy of a redelivered event; consumers dedup on ``ce_id``.

    Args:
        producer: A started ``AIOKafkaProducer`` (yours to stop).
        topic: The topic, or ``(event) -> str``.
        format: ``"binary"`` or ``"structured"``.

    Raises:
        ConfigError: An argument is invalid.
    """
    return KafkaSink(producer, topic, format=format)
