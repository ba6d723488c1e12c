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
    "JSON_PATCH_CONTENT_TYPE",
    "SerializedEvent",
    "SinkFormat",
    "changes_cloudevent",
    "changes_patch",
    "check_format",
    "serialize_event",
    "to_sink_payload",
]

SinkFormat: TypeAlias = Literal["cloudevents", "raw", "changes"]
"""``"cloudevents"``: ``event.to_cloudevent()``, CloudEvents 1.0 structured mode, readable by
any CloudEvents consumer. ``"raw"``: ``event.to_dict()``, the watukuy envelope, which also
carries ``cursor`` and ``attempt``. ``"changes"``: :func:`changes_cloudevent`, a CloudEvent
whose ``data`` is only the JSON Patch of the change (see
https://watukuy.readthedocs.io/en/latest/changes/).
"""

CLOUDEVENTS_CONTENT_TYPE: Final = "application/cloudevents+json"
"""Media type of a CloudEvents structured-mode JSON body."""

JSON_CONTENT_TYPE: Final = "application/json"
"""Media type of a raw envelope (and of CloudEvents ``data`` in binary mode)."""

JSON_PATCH_CONTENT_TYPE: Final = "application/json-patch+json"
"""Media type of an RFC 6902 JSON Patch: the ``datacontenttype`` of a ``"changes"`` body."""

_FORMATS: Final = ("cloudevents", "raw", "changes")


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
        ConfigError: The value is not ``"cloudevents"``, ``"raw"`` or ``"changes"``.
    """
    if value == "cloudevents" or value == "raw" or value == "changes":
        return value
    raise ConfigError(f"expected one of {_FORMATS}, got {value!r}", field=field)


def to_sink_payload(event: Event[Any], format: SinkFormat = "cloudevents") -> dict[str, Any]:
    """The JSON data a sink transports, before encoding (for clients that take objects,
    such as Celery task arguments).

    Raises:
        ConfigError: ``format`` is unknown.
    """
    checked = check_format(format)
    if checked == "cloudevents":
        return event.to_cloudevent()
    if checked == "changes":
        return changes_cloudevent(event)
    return event.to_dict()


def changes_patch(event: Event[Any]) -> list[dict[str, Any]]:
    """The JSON Patch that takes a receiver's copy of the item to the item as it is now,
    with ``null`` standing for "no copy":

    - ``updated`` with ``event.changes`` (``retain="payload"``): that patch;
    - ``updated`` without (``retain="hash"``): ``[{"op": "replace", "path": "", "value": data}]``;
    - ``created``: ``[{"op": "add", "path": "", "value": data}]``;
    - ``deleted``: ``[{"op": "replace", "path": "", "value": null}]``.
    """
    if event.type == "deleted":
        return [{"op": "replace", "path": "", "value": None}]
    if event.type == "updated" and event.changes is not None:
        return event.changes
    value = wkjson.to_jsonable(event.data)
    return [{"op": "add" if event.type == "created" else "replace", "path": "", "value": value}]


def changes_cloudevent(event: Event[Any]) -> dict[str, Any]:
    """The ``"changes"`` body: a CloudEvents 1.0 structured event with the usual attributes
    and ``watukuy*`` extensions (not ``watukuyprevious`` nor ``watukuychanges``), whose
    ``data`` is :func:`changes_patch` and ``datacontenttype``
    ``application/json-patch+json``."""
    cloudevent: dict[str, Any] = {
        "specversion": "1.0",
        "id": event.id,
        "source": event.source,
        "type": f"{event.poller}.{event.type}",
        "subject": event.subject,
        "time": event.time,
        "datacontenttype": JSON_PATCH_CONTENT_TYPE,
        "watukuypartition": event.partition,
        "watukuylane": event.lane,
        "watukuysequence": event.sequence,
        "watukuypoller": event.poller,
        "data": changes_patch(event),
    }
    return cloudevent


def serialize_event(event: Event[Any], format: SinkFormat = "cloudevents") -> SerializedEvent:
    """Encode an event as JSON bytes with the matching media type.

    Use it in your own sinks so bodies and content types stay consistent with the built-in
    ones::

        wire = serialize_event(event)            # CloudEvents structured mode
        await http.post(url, content=wire.body, headers={"content-type": wire.content_type})

    Args:
        event: The event to encode.
        format: ``"cloudevents"`` or ``"changes"`` (``application/cloudevents+json``), or
            ``"raw"`` (``application/json``).

    Raises:
        ConfigError: ``format`` is unknown.
    """
    payload = to_sink_payload(event, format)
    content_type = JSON_CONTENT_TYPE if format == "raw" else CLOUDEVENTS_CONTENT_TYPE
    return SerializedEvent(body=wkjson.dumps(payload).encode(), content_type=content_type)
