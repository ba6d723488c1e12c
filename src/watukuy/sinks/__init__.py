"""Sinks: ready-made handlers that forward events to webhooks and message brokers.

A sink is a handler, ``engine.on("orders", webhook_sink(url, secret))``. Each one sends the
event, waits until the destination has it (an HTTP 2xx, a publish ack, a confirm), then
calls ``ctx.ack()`` (harmless with ``ack_mode="auto"``, required with ``"manual"``). Any
failure propagates, so the dispatcher retries and eventually parks the event.

Delivery is at least once, so a destination may be offered the same event twice (a crash
between its publish and the outbox ack). Every sink labels messages with ``event.id``,
which is the same on every redelivery; where the destination can drop duplicates by that
label, the sink lets it:

==========================  =============================  ================================
sink                        the event id travels as        duplicates
==========================  =============================  ================================
:func:`webhook_sink`        ``webhook-id`` header          receiver dedups on it
:func:`nats_sink`           ``Nats-Msg-Id`` header         dropped by JetStream (window)
:func:`rabbitmq_sink`       ``message_id`` property        consumer dedups on it
:func:`redis_stream_sink`   ``id`` field                   dropped by the sink (window)
:func:`celery_sink`         ``task_id``                    worker dedups on it
:func:`kafka_sink`          ``ce_id`` header               consumer dedups on it
:func:`sqs_sink`            ``MessageDeduplicationId``     dropped by a FIFO queue (5 min)
==========================  =============================  ================================

Client libraries are optional (one extra per broker, ``pip install 'watukuy[kafka]'``, or
all of them with ``pip install 'watukuy[sinks]'``) and never imported until
a sink needs them; you create and close the clients, the sinks only use them.
"""

from __future__ import annotations

from ._celery import CelerySink, celery_sink
from ._common import Sink, SinkError, Target
from ._kafka import KafkaMode, KafkaSink, kafka_binary_headers, kafka_sink
from ._nats import NatsSink, nats_sink
from ._rabbitmq import RabbitMQSink, rabbitmq_sink
from ._redis import DEFAULT_DEDUP_WINDOW, RedisStreamSink, StreamAdd, redis_stream_sink
from ._serialize import (
    CLOUDEVENTS_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    JSON_PATCH_CONTENT_TYPE,
    SerializedEvent,
    SinkFormat,
    changes_cloudevent,
    serialize_event,
    to_sink_payload,
)
from ._signing import (
    DEFAULT_WEBHOOK_TOLERANCE,
    WEBHOOK_SECRET_PREFIX,
    decode_webhook_secret,
    sign_webhook,
    standard_webhook_secret,
    verify_webhook_signature,
)
from ._sqs import GroupId, SqsSink, sqs_group_id, sqs_sink
from ._webhook import (
    DEFAULT_WEBHOOK_TIMEOUT,
    MAX_WEBHOOK_ERROR_BODY_CHARS,
    WebhookDeliveryError,
    WebhookSink,
    webhook_sink,
)

__all__ = [
    "CLOUDEVENTS_CONTENT_TYPE",
    "DEFAULT_DEDUP_WINDOW",
    "DEFAULT_WEBHOOK_TIMEOUT",
    "DEFAULT_WEBHOOK_TOLERANCE",
    "JSON_CONTENT_TYPE",
    "JSON_PATCH_CONTENT_TYPE",
    "MAX_WEBHOOK_ERROR_BODY_CHARS",
    "WEBHOOK_SECRET_PREFIX",
    "CelerySink",
    "GroupId",
    "KafkaMode",
    "KafkaSink",
    "NatsSink",
    "RabbitMQSink",
    "RedisStreamSink",
    "SerializedEvent",
    "Sink",
    "SinkError",
    "SinkFormat",
    "SqsSink",
    "StreamAdd",
    "Target",
    "WebhookDeliveryError",
    "WebhookSink",
    "celery_sink",
    "changes_cloudevent",
    "decode_webhook_secret",
    "kafka_binary_headers",
    "kafka_sink",
    "nats_sink",
    "rabbitmq_sink",
    "redis_stream_sink",
    "serialize_event",
    "sign_webhook",
    "sqs_group_id",
    "sqs_sink",
    "standard_webhook_secret",
    "to_sink_payload",
    "verify_webhook_signature",
    "webhook_sink",
]
