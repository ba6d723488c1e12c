"""Publish events to NATS JetStream, deduplicated by the stream itself."""

from __future__ import annotations

from typing import Any

from watukuy.model.durations import Duration
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event
from watukuy.runtime.context import HandlerContext

from ._common import Target, optional_seconds, resolve_target, target_of
from ._serialize import SinkFormat, check_format, serialize_event

__all__ = ["NatsSink", "nats_sink"]


class NatsSink:
    """Publishes each event to JetStream and waits for the stream's ack (see
    :func:`nats_sink`)."""

    def __init__(
        self,
        js: Any,
        *,
        subject: Target,
        format: SinkFormat = "cloudevents",
        stream: str | None = None,
        timeout: Duration | None = None,
    ) -> None:
        if callable(getattr(js, "jetstream", None)):
            # A core connection's publish() neither waits for the stream nor dedups.
            raise ConfigError(
                "got a NATS connection; pass its JetStream context, nc.jetstream()", field="js"
            )
        if not callable(getattr(js, "publish", None)):
            raise ConfigError(
                f"expected a JetStream context (nc.jetstream()), got {js!r}", field="js"
            )
        if stream is not None and (not isinstance(stream, str) or not stream):
            raise ConfigError(f"expected a stream name or None, got {stream!r}", field="stream")
        self._js = js
        self.subject: Target = target_of(subject, "subject")
        self.format: SinkFormat = check_format(format)
        self.stream = stream
        self._timeout = optional_seconds(timeout, "timeout")

    def __repr__(self) -> str:
        return f"NatsSink(subject={self.subject!r}, format={self.format!r})"

    async def __call__(self, event: Event[Any], ctx: HandlerContext) -> None:
        """Publish one event, then ``ctx.ack()``."""
        await self.publish(event)
        ctx.ack()

    async def publish(self, event: Event[Any]) -> Any:
        """Publish one event and return the stream's ``PubAck`` (``duplicate`` is true when
        the stream had already stored this event id within its duplicate window)."""
        wire = serialize_event(event, self.format)
        headers = {"Nats-Msg-Id": event.id, "Content-Type": wire.content_type}
        options: dict[str, Any] = {"headers": headers}
        if self._timeout is not None:
            options["timeout"] = self._timeout
        if self.stream is not None:
            options["stream"] = self.stream
        return await self._js.publish(
            resolve_target(self.subject, event, "subject"), wire.body, **options
        )


def nats_sink(
    js: Any,
    *,
    subject: Target,
    format: SinkFormat = "cloudevents",
    stream: str | None = None,
    timeout: Duration | None = None,
) -> NatsSink:
    """A handler that publishes each event to NATS JetStream.

    Every message carries ``Nats-Msg-Id: <event.id>``, so the stream drops a redelivered
    event that arrives within its ``duplicate_window`` (two minutes unless the stream says
    otherwise); the sink waits for the stream's ack before acking the event::

        nc = await nats.connect("nats://127.0.0.1:4222")
        js = nc.jetstream()
        engine.on("orders", nats_sink(js, subject=lambda e: f"erp.orders.{e.type}"))

    A redelivery later than the window is stored again: consumers that must never see a
    duplicate still dedup on the id (``Nats-Msg-Id``, or the CloudEvent ``id``).

    Args:
        js: The JetStream context, ``nc.jetstream()``.
        subject: The subject, or ``(event) -> str``; a stream must capture it.
        format: ``"cloudevents"`` (``application/cloudevents+json``) or ``"raw"``.
        stream: When set, the publish fails unless this stream stores the message.
        timeout: How long to wait for the stream's ack (default: the client's).

    Raises:
        ConfigError: An argument is invalid (a core connection instead of its JetStream
            context, an empty subject, ...).
    """
    return NatsSink(js, subject=subject, format=format, stream=stream, timeout=timeout)
