"""The wire forms every sink shares: a CloudEvent or the raw envelope, as JSON bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.events import Event

__all__ = [
    "CLOUDEVENTS_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "SerializedEvent",
    "SinkFormat",
    "check_format",
    "serialize_event",
    "to_sink_payload",
]

SinkFormat: TypeAlias = Literal["cloudevents", "raw"]
"""``"cloudevents"``: ``event.to_cloudevent()``, CloudEvents 1.0 structured mode, readable by
any CloudEvents consumer. ``"raw"``: ``event.to_dict()``, the watukuy envelope, which also
carries ``cursor`` and ``attempt``."""

CLOUDEVENTS_CONTENT_TYPE: Final = "application/cloudevents+json"
"""Media type of a CloudEvents structured-mode JSON body."""

JSON_CONTENT_TYPE: Final = "application/json"
"""Media type of a raw envelope (and of CloudEvents ``data`` in binary mode)."""

_FORMATS: Final = ("cloudevents", "raw")


@dataclass(frozen=True, slots=True)
class SerializedEvent:
    """An event encoded for the wire.

    Attributes:
        body: Compact UTF-8 JSON.
        content_type: The media type that describes ``body``.
    """

    body: bytes
    content_type: str


def check_format(value: object, field: str = "format") -> SinkFormat:
    """Validate a ``format`` option.

    Raises:
        ConfigError: The value is not ``"cloudevents"`` or ``"raw"``.
    """
    if value == "cloudevents" or value == "raw":
        return value
    raise ConfigError(f"expected one of {_FORMATS}, got {value!r}", field=field)


def to_sink_payload(event: Event[Any], format: SinkFormat = "cloudevents") -> dict[str, Any]:
    """The JSON data a sink transports, before encoding (for clients that take objects,
    such as Celery task arguments).

    Raises:
        ConfigError: ``format`` is unknown.
    """
    if check_format(format) == "cloudevents":
        return event.to_cloudevent()
    return event.to_dict()


def serialize_event(event: Event[Any], format: SinkFormat = "cloudevents") -> SerializedEvent:
    """Encode an event as JSON bytes with the matching media type.

    Use it in your own sinks so bodies and content types stay consistent with the built-in
    ones::

        wire = serialize_event(event)            # CloudEvents structured mode
        await http.post(url, content=wire.body, headers={"content-type": wire.content_type})

    Args:
        event: The event to encode.
        format: ``"cloudevents"`` (``application/cloudevents+json``) or ``"raw"``
            (``application/json``).

    Raises:
        ConfigError: ``format`` is unknown.
    """
    payload = to_sink_payload(event, format)
    content_type = CLOUDEVENTS_CONTENT_TYPE if format == "cloudevents" else JSON_CONTENT_TYPE
    return SerializedEvent(body=wkjson.dumps(payload).encode(), content_type=content_type)
