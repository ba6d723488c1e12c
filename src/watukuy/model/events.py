"""The event envelope handed to handlers, and its JSON and CloudEvents forms."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar

from . import json as wkjson
from .records import dataclass, fast_init
from .rows import Lane

__all__ = [
    "Event",
    "EventType",
    "event_from_json",
    "event_to_json",
    "iso_time",
    "patch_paths",
]

T = TypeVar("T")

EventType = Literal["created", "updated", "deleted"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def patch_paths(patch: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The JSON Pointers an RFC 6902 patch touches: each operation's ``path`` and a
    ``move``'s (or ``copy``'s) ``from``, sorted, without duplicates."""
    paths: set[str] = set()
    for op in patch:
        paths.add(op["path"])
        source = op.get("from")
        if source is not None:
            paths.add(source)
    return tuple(sorted(paths))


def iso_time(ms: int) -> str:
    """Format epoch milliseconds the way JavaScript's ``toISOString()`` does.

    ``0`` becomes ``"1970-01-01T00:00:00.000Z"``.
    """
    moment = _EPOCH + dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@fast_init
@dataclass(frozen=True, slots=True)
class Event(Generic[T]):
    """One observed change of one item.

    Attributes:
        id: SHA-256 hex of the id material; equal for the same observation everywhere.
        type: ``"created"``, ``"updated"`` or ``"deleted"``.
        source: ``urn:watukuy:<poller>`` unless the poller sets ``source``.
        subject: The item's identity.
        time: ISO 8601 observation time (UTC, milliseconds).
        poller: The poller's name.
        partition: The partition key, ``""`` for single-partition pollers.
        lane: ``"live"``, ``"reconcile"``, ``"backfill"`` or ``"replay"``.
        sequence: Position in the (poller, partition) stream; grows monotonically.
        cursor: Reserved; ``None`` in this release.
        data: The item (validated by the schema when there is one); ``None`` for a
            ``deleted`` event unless the poller retains payloads.
        previous: The last known item before this change (``retain="payload"`` only).
        attempt: 1-based delivery attempt.
        changes: For an ``updated`` event of a poller with ``retain="payload"``: the RFC 6902
            JSON Patch from ``previous`` to ``data`` (over their fingerprints when the
            poller has one); ``None`` otherwise (``created``, ``deleted``,
            ``retain="hash"``). Set when the event is delivered; see ``docs/changes.md``.
    """

    id: str
    type: EventType
    source: str
    subject: str
    time: str
    poller: str
    partition: str
    lane: Lane
    sequence: int
    cursor: Any = None
    data: T | None = None
    previous: T | None = None
    attempt: int = 1
    changes: list[dict[str, Any]] | None = None

    @property
    def changed_paths(self) -> tuple[str, ...] | None:
        """The JSON Pointers :attr:`changes` touches, sorted (``("/status",)``); ``None``
        when there is no patch."""
        return None if self.changes is None else patch_paths(self.changes)

    def to_cloudevent(self) -> dict[str, Any]:
        """This event as a CloudEvents 1.0 structured-mode dictionary.

        ``type`` becomes ``<poller>.<created|updated|deleted>``; the extensions
        ``watukuypartition``, ``watukuylane``, ``watukuysequence`` and ``watukuypoller`` are
        always present, ``watukuyprevious`` only when ``previous`` is set, and
        ``watukuychanges`` (the JSON Patch, an array) only when :attr:`changes` is set.
        ``datacontenttype`` stays ``application/json``: ``data`` is the item.
        """
        cloudevent: dict[str, Any] = {
            "specversion": "1.0",
            "id": self.id,
            "source": self.source,
            "type": f"{self.poller}.{self.type}",
            "subject": self.subject,
            "time": self.time,
            "datacontenttype": "application/json",
            "watukuypartition": self.partition,
            "watukuylane": self.lane,
            "watukuysequence": self.sequence,
            "watukuypoller": self.poller,
        }
        if self.data is not None:
            cloudevent["data"] = wkjson.to_jsonable(self.data)
        if self.previous is not None:
            cloudevent["watukuyprevious"] = wkjson.to_jsonable(self.previous)
        if self.changes is not None:
            cloudevent["watukuychanges"] = self.changes
        return cloudevent

    def to_dict(self) -> dict[str, Any]:
        """The envelope as plain JSON data (the form stored in the outbox); ``changes`` is
        present only when set."""
        envelope: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "source": self.source,
            "subject": self.subject,
            "time": self.time,
            "poller": self.poller,
            "partition": self.partition,
            "lane": self.lane,
            "sequence": self.sequence,
            "cursor": wkjson.to_jsonable(self.cursor),
            "data": wkjson.to_jsonable(self.data),
            "previous": wkjson.to_jsonable(self.previous),
            "attempt": self.attempt,
        }
        if self.changes is not None:
            envelope["changes"] = self.changes
        return envelope


def event_to_json(event: Event[Any]) -> str:
    """Serialise an event to the JSON text stored in the outbox, parked table and log.

    ``changes`` is written only when set (the outbox holds events without it: the patch is
    computed when the event is delivered).
    """
    envelope: dict[str, Any] = {
        "id": event.id,
        "type": event.type,
        "source": event.source,
        "subject": event.subject,
        "time": event.time,
        "poller": event.poller,
        "partition": event.partition,
        "lane": event.lane,
        "sequence": event.sequence,
        "cursor": event.cursor,
        "data": event.data,
        "previous": event.previous,
        "attempt": event.attempt,
    }
    if event.changes is not None:
        envelope["changes"] = event.changes
    return wkjson.dumps_typed(envelope)


def event_from_json(text: str | Mapping[str, Any]) -> Event[Any]:
    """Rebuild an event from its stored JSON; ``data`` and ``previous`` stay plain JSON.

    Events stored before ``changes`` existed load with ``changes=None``.
    """
    data = wkjson.loads(text) if isinstance(text, str | bytes) else text
    return Event(
        id=data["id"],
        type=data["type"],
        source=data["source"],
        subject=data["subject"],
        time=data["time"],
        poller=data["poller"],
        partition=data.get("partition", ""),
        lane=data.get("lane", "live"),
        sequence=int(data["sequence"]),
        cursor=data.get("cursor"),
        data=data.get("data"),
        previous=data.get("previous"),
        attempt=int(data.get("attempt", 1)),
        changes=data.get("changes"),
    )
