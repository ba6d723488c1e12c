"""Send events to Amazon SQS (aiobotocore, or boto3 in a worker thread).

A FIFO queue (its URL ends in ``.fifo``) dedups on ``MessageDeduplicationId`` for five
minutes and keeps order within a ``MessageGroupId``: the sink sends the event id as the
first, so a redelivered event is dropped by SQS itself, and the ordering key as the second,
so the changes of one item reach consumers in the order they were observed.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import re
from collections.abc import Callable
from typing import Any, Final, TypeAlias

from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.runtime.context import HandlerContext

from ._serialize import SinkFormat, check_format, serialize_event

__all__ = ["GroupId", "SqsSink", "sqs_group_id", "sqs_sink"]

GroupId: TypeAlias = str | Callable[[Event[Any]], str]
"""The ``MessageGroupId`` of a FIFO queue: fixed, or computed per event."""

# SQS accepts 1 to 128 of these characters in a MessageGroupId.
_GROUP_CHARS: Final = re.compile(r"[!-~]{1,128}")


def sqs_group_id(event: Event[Any]) -> str:
    """The default ``MessageGroupId``: the event's item within its poller and partition
    (watukuy's default ordering key), as ``poller/partition/subject``. A key SQS would refuse
    (longer than 128 characters, or with characters outside printable ASCII) is sent as its
    SHA-256 hex instead, which keeps one item in one group."""
    key = f"{event.poller}/{event.partition}/{event.subject}"
    if _GROUP_CHARS.fullmatch(key):
        return key
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class SqsSink:
    """Sends one message per event and waits for SQS to take it (see :func:`sqs_sink`)."""

    def __init__(
        self,
        client: Any,
        queue_url: str,
        *,
        format: SinkFormat = "cloudevents",
        group_id: GroupId = sqs_group_id,
    ) -> None:
        send = getattr(client, "send_message", None)
        if not callable(send):
            raise ConfigError(
                f"expected an SQS client (aiobotocore or boto3), got {client!r}", field="client"
            )
        if not isinstance(queue_url, str) or not queue_url.startswith(("https://", "http://")):
            raise ConfigError(f"expected the queue's URL, got {queue_url!r}", field="queue_url")
        if not (callable(group_id) or (isinstance(group_id, str) and _valid_group(group_id))):
            raise ConfigError(
                f"expected 1-128 printable ASCII characters or a callable, got {group_id!r}",
                field="group_id",
            )
        self._send = send
        # aiobotocore clients are async context managers whose methods return coroutines
        # (without being coroutine functions); boto3's block, so they run in a thread.
        self._awaits = inspect.iscoroutinefunction(send) or hasattr(client, "__aenter__")
        self.queue_url = queue_url
        self.fifo = queue_url.endswith(".fifo")
        self.format: SinkFormat = check_format(format)
        self.group_id: GroupId = group_id

    def __repr__(self) -> str:
        return f"SqsSink(queue_url={self.queue_url!r}, fifo={self.fifo}, format={self.format!r})"

    async def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Send one event, then ``ctx.ack()``."""
        await self.publish(event)
        ctx.ack()

    def message(self, event: Event[Any]) -> dict[str, Any]:
        """The ``send_message`` arguments for ``event``."""
        encoded = serialize_event(event, self.format)
        arguments: dict[str, Any] = {
            "QueueUrl": self.queue_url,
            "MessageBody": encoded.body.decode("utf-8"),
            "MessageAttributes": {
                "content-type": {"DataType": "String", "StringValue": encoded.content_type},
                "ce_id": {"DataType": "String", "StringValue": event.id},
                "ce_type": {"DataType": "String", "StringValue": f"{event.poller}.{event.type}"},
            },
        }
        if self.fifo:
            arguments["MessageDeduplicationId"] = event.id
            arguments["MessageGroupId"] = self._group(event)
        return arguments

    async def publish(self, event: Event[Any]) -> Any:
        """Send one event; returns SQS's answer (``MessageId``, ``SequenceNumber``)."""
        arguments = self.message(event)
        if self._awaits:
            return await self._send(**arguments)
        answer = await asyncio.to_thread(self._send, **arguments)
        return await answer if inspect.isawaitable(answer) else answer

    def _group(self, event: Event[Any]) -> str:
        if isinstance(self.group_id, str):
            return self.group_id
        value = self.group_id(event)
        if not isinstance(value, str) or not _valid_group(value):
            raise ConfigError(
                f"group_id returned {value!r}; SQS takes 1-128 printable ASCII characters",
                field="group_id",
            )
        return value


def _valid_group(value: str) -> bool:
    return _GROUP_CHARS.fullmatch(value) is not None


def sqs_sink(
    client: Any,
    queue_url: str,
    *,
    format: SinkFormat = "cloudevents",
    group_id: GroupId = sqs_group_id,
) -> SqsSink:
    """A handler that sends each event to an SQS queue.

    On a FIFO queue (``.fifo``), ``MessageDeduplicationId`` is the event id, so SQS drops a
    redelivered event within its five-minute window, and ``MessageGroupId`` is the ordering
    key, so one item's changes stay in order. Every message carries ``ce_id`` and ``ce_type``
    attributes; the body is the CloudEvent (or the raw envelope with ``format="raw"``).

    Example::

        session = aiobotocore.session.get_session()
        async with session.create_client("sqs", region_name="eu-west-1") as sqs:
            engine.on("orders", sqs_sink(sqs, QUEUE_URL))
            async with engine:
                await stop_requested.wait()

    Args:
        client: An aiobotocore SQS client (awaited), or a boto3 one (called in a worker
            thread). You create and close it.
        queue_url: The queue's URL; one ending in ``.fifo`` is a FIFO queue.
        format: ``"cloudevents"`` (default) or ``"raw"``.
        group_id: The ``MessageGroupId`` on a FIFO queue: a string, or ``(event) -> str``.
            Give the same function as ``Delivery(ordering_key=...)`` when the poller has
            one. Default: :func:`sqs_group_id`, the item.

    Returns:
        The sink; pass it to ``engine.on``.

    Raises:
        ConfigError: The client has no ``send_message``, the URL is not one, or
            ``group_id`` is not usable.
    """
    return SqsSink(client, queue_url, format=format, group_id=group_id)
