"""The event envelope handed to handlers, and its JSON and CloudEvents forms."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar

import orjson

from watukuy.model.records import dataclass

from . import json as wkjson
from .records import fast_init
from .rows import Lane

__all__ = [
    "Event",
    "EventType",
    "event_from_json",
    "event_to_json",
    "iso_time",
    "EventWriter",
    "WrittenEvent",
    "WrittenPage",
    "patch_paths",
]

T = TypeVar("T")

EventType = Literal["created", "updated", "deleted"]
"""What happened to the item: ``event.type``, and the suffix of its CloudEvents type."""

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
        cursor: For a ``deleted`` event that a full listing (a ``SnapshotDiff`` pass or
            a ``Reconcile`` pass) proved, the pass that proved it: ``{"pass": n}``, the
            number of that complete listing pass of the key. ``None`` for every other
            event.
        data: The item (validated by the schema when there is one); ``None`` for a
            ``deleted`` event unless the poller retains payloads.
        previous: The last known item before this change (``retain="payload"`` only).
        attempt: 1-based delivery attempt.
        changes: For an ``updated`` event of a poller with ``retain="payload"``: the RFC 6902
            JSON Patch from ``previous`` to ``data`` (over their fingerprints when the
            poller has one); ``None`` otherwise (``created``, ``deleted``,
            ``retain="hash"``). Set when the event is delivered; see
            https://watukuy.readthedocs.io/en/latest/changes/.
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


def _write(value: Any) -> tuple[str, bytes | None]:
    """``value``'s JSON text, and the bytes to read it back from: ``None`` when orjson wrote
    them (it reads them back exactly), the bytes themselves otherwise."""
    if value is None:
        return "null", None
    raw, exact = wkjson.dumps_typed_bytes(value)
    return raw.decode(), None if exact else raw


def _read(text: str, slow: bytes | None) -> Any:
    if slow is not None:
        return wkjson.loads(slow)
    return None if text == "null" else orjson.loads(text)


# What the writer keeps of one event until it is read back: id, type, subject, sequence,
# and for data and previous their text and, when orjson did not write it, its bytes.
WrittenEvent = tuple[str, "EventType", str, int, str, "bytes | None", str, "bytes | None"]


class EventWriter:
    """Writes the new events of one commit: each one's outbox text, and what it takes to
    read the event back from that text when it is delivered.

    The text is what :func:`event_to_json` writes for the event. :meth:`read` gives what
    :func:`event_from_json` reads back from it (``data`` and ``previous`` parsed from the
    very text the row holds), so a consumer handed that event gets what a redelivery of the
    stored row would give it. Reading back only those two members, at delivery, keeps each
    parsed item alive only while its handler runs; the members every event of the commit
    shares are written once.

    Args:
        source: The events' ``source``.
        poller: The poller's name.
        partition: The partition key.
        lane: The lane the events are observed on.
        time: The observation time, ISO 8601 (see :func:`iso_time`).
        cursor: The events' ``cursor`` (JSON-safe; ``None`` for most events, see
            :attr:`Event.cursor`).
    """

    __slots__ = ("_after_sequence", "_after_subject", "_after_type", "_cursor_text", "_shared")

    def __init__(
        self,
        *,
        source: str,
        poller: str,
        partition: str,
        lane: Lane,
        time: str,
        cursor: Any = None,
    ) -> None:
        self._shared = (source, time, poller, partition, lane)
        dumps = wkjson.dumps
        self._cursor_text = "null" if cursor is None else dumps(cursor)
        self._after_sequence = ',"cursor":' + self._cursor_text + ',"data":'
        self._after_type = '","source":' + dumps(source) + ',"subject":'
        self._after_subject = (
            ',"time":'
            + dumps(time)
            + ',"poller":'
            + dumps(poller)
            + ',"partition":'
            + dumps(partition)
            + ',"lane":'
            + dumps(lane)
            + ',"sequence":'
        )

    def write(
        self,
        id: str,
        type: EventType,
        subject: str,
        sequence: int,
        data: Any,
        previous: Any,
        data_text: str | None = None,
    ) -> tuple[str, WrittenEvent]:
        """The outbox text of one event, and what :meth:`read` reads it back from.

        Args:
            id: The event id (hex: written as it is).
            type: ``"created"``, ``"updated"`` or ``"deleted"``.
            subject: The item's identity.
            sequence: The event's sequence.
            data: The item (typed values are written the way :func:`event_to_json` writes
                them).
            previous: The previous item, or ``None``.
            data_text: ``data``'s text when the caller already has it as orjson writes it
                with :func:`~watukuy.model.json.dumps_typed` (read back with
                ``orjson.loads``); ``data`` is then not serialised again.
        """
        if data_text is None:
            data_text, data_slow = _write(data)
        else:
            data_slow = None
        previous_text, previous_slow = _write(previous)
        text = (
            f'{{"id":"{id}","type":"{type}{self._after_type}{wkjson.dumps(subject)}'
            f"{self._after_subject}{sequence}{self._after_sequence}{data_text},"
            f'"previous":{previous_text},"attempt":1}}'
        )
        return text, (
            id,
            type,
            subject,
            sequence,
            data_text,
            data_slow,
            previous_text,
            previous_slow,
        )

    def read(self, written: WrittenEvent) -> Event[Any]:
        """The event :meth:`write` wrote, as decoding its outbox text gives it."""
        id, type, subject, sequence, data, data_slow, previous, previous_slow = written
        source, time, poller, partition, lane = self._shared
        return Event(
            id,
            type,
            source,
            subject,
            time,
            poller,
            partition,
            lane,
            sequence,
            None if self._cursor_text == "null" else orjson.loads(self._cursor_text),
            _read(data, data_slow),
            _read(previous, previous_slow),
        )


class WrittenPage:
    """The events of one commit, read back one at a time when they are delivered.

    Args:
        writer: The writer that wrote them.
        written: What :meth:`EventWriter.write` returned for each, in the commit's order.
    """

    __slots__ = ("_writer", "_written")

    def __init__(self, writer: EventWriter, written: list[WrittenEvent]) -> None:
        self._writer = writer
        self._written = written

    def __len__(self) -> int:
        return len(self._written)

    def subject(self, index: int) -> str:
        """The subject of event ``index``, without reading the event back."""
        return self._written[index][2]

    def event(self, index: int) -> Event[Any]:
        """Event ``index``, read back."""
        return self._writer.read(self._written[index])


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
