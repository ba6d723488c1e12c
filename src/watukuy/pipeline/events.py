"""The events of a page, or of a pass's deletes: their ids, their outbox text, and the
event as a hook observes it.

:class:`EventMaker` writes one event; :class:`PageEvents` the ``created``/``updated``
events of one page in sequence order, as :func:`~watukuy.pipeline.page.diff_page`
decided them (and, for a forced backfill, every known item again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from watukuy.diff import content_hash, event_id, version_text
from watukuy.diff.changes import Candidate, Change, Rejected
from watukuy.model import json as wkjson
from watukuy.model.events import Event, EventType, EventWriter, WrittenEvent, iso_time
from watukuy.model.rows import ItemRow, OutboxRow

from .rules import PageRules

__all__ = ["EventMaker", "PageEvents"]


class EventMaker:
    """Writes the events of one lane of one key: ids, outbox text, observed events.

    Args:
        rules: The poller's rules.
    """

    __slots__ = ("_cache", "_rules")

    def __init__(self, rules: PageRules) -> None:
        self._rules = rules
        self._cache: tuple[int, Any, EventWriter] | None = None

    def writer(self, now: int, cursor: Any = None) -> EventWriter:
        """The writer of the events committed at ``now`` (with ``cursor``, see
        :attr:`~watukuy.model.events.Event.cursor`)."""
        # Every event of a page shares its commit time, and so the writer's shared members.
        cached = self._cache
        if cached is None or cached[0] != now or cached[1] != cursor:
            rules = self._rules
            writer = EventWriter(
                source=rules.source,
                poller=rules.poller,
                partition=rules.partition,
                lane=rules.lane,
                time=iso_time(now),
                cursor=cursor,
            )
            self._cache = cached = (now, cursor, writer)
        return cached[2]

    def load_payload(self, payload: str | None) -> Any:
        """A stored payload (JSON text) as the schema makes it, or ``None``."""
        if payload is None:
            return None
        return self._rules.adapter.load(wkjson.loads(payload))

    def version_or_hash(self, item: Any, known_hash: str | None) -> str:
        """What an event of ``item`` is versioned by: its version text, else the hash the
        page already has for it, else its content hash."""
        rules = self._rules
        if rules.version is not None:
            version = version_text(rules.version(item))
            if version is not None:
                return version
        if known_hash is not None:
            return known_hash
        fingerprint = rules.fingerprint(item) if rules.fingerprint else rules.adapter.dump(item)
        return content_hash(fingerprint)

    def event(
        self,
        *,
        type_: EventType,
        identity: str,
        version: str,
        revision: int,
        data: Any,
        previous: Any,
        sequence: int,
        now: int,
        observed: list[Event[Any]] | None,
        data_text: str | None = None,
        cursor: Any = None,
    ) -> tuple[WrittenEvent, OutboxRow]:
        """A new event and its outbox row; the event is read back from the row when it is
        delivered (see :class:`EventWriter`).

        When ``observed`` is a list, the event as observed (the item as ``fetch`` and the
        schema made it) is appended to it, for the ``on_event`` hooks. ``data_text`` is
        ``data``'s text when the diff already wrote it for the snapshot row
        (:attr:`~watukuy.diff.changes.Change.text`); ``cursor`` is the event's ``cursor``.

        Raises:
            Exception: One of :data:`~watukuy.model.json.ENCODING_ERRORS` when ``data`` or
                ``previous`` cannot be written.
        """
        rules = self._rules
        eid = event_id(
            rules.source,
            rules.partition,
            identity,
            version,
            rules.schema_version,
            type_,
            0 if rules.compat_ids else revision,
        )
        writer = self.writer(now, cursor)
        text, written = writer.write(eid, type_, identity, sequence, data, previous, data_text)
        if observed is not None:
            observed.append(dataclasses.replace(writer.read(written), data=data, previous=previous))
        # Positional (event_id, sequence, event, attempts, next_attempt_at, last_error,
        # created_at): this runs once per event, and keywords cost more.
        return written, OutboxRow(eid, sequence, text, 0, None, None, now)


class PageEvents:
    """The events of one page as they are written, and what they count.

    Args:
        maker: Writes each event.
        sequence: The key's sequence before the page.
        now: The page's time.
        observe: Keep each event as observed (someone listens to ``on_event``).
        rejected: Where an item whose event cannot be written goes.
    """

    __slots__ = (
        "_maker",
        "counts",
        "events",
        "now",
        "observed",
        "rejected",
        "rows",
        "sequence",
        "unwritten",
    )

    def __init__(
        self, maker: EventMaker, *, sequence: int, now: int, observe: bool, rejected: Rejected[Any]
    ) -> None:
        self._maker = maker
        self.sequence = sequence
        self.now = now
        self.rows: list[OutboxRow] = []
        self.events: list[WrittenEvent] = []
        self.observed: list[Event[Any]] | None = [] if observe else None
        self.counts = {"created": 0, "updated": 0}
        self.rejected = rejected
        self.unwritten: set[str] = set()  # identities whose event could not be written

    def _add(
        self,
        type_: EventType,
        identity: str,
        version: str,
        revision: int,
        item: Any,
        previous: Any,
        text: str | None = None,
    ) -> None:
        written, row = self._maker.event(
            type_=type_,
            identity=identity,
            version=version,
            revision=revision,
            data=item,
            previous=previous,
            sequence=self.sequence + 1,
            now=self.now,
            observed=self.observed,
            data_text=text,
        )
        self.sequence += 1
        self.rows.append(row)
        self.events.append(written)
        self.counts[type_] += 1

    def write_changes(self, changes: Sequence[Change[Any]]) -> Iterator[int]:
        """Write the event of each change; yields the sequence after each event written
        (the lane hands the event loop over every so many). A change whose item cannot be
        written joins :attr:`rejected` and writes no row."""
        load = self._maker.load_payload
        for change in changes:
            version = change.version if change.version is not None else change.hash
            try:
                self._add(
                    change.type,
                    change.identity,
                    version,
                    change.revision,
                    change.item,
                    load(change.previous),
                    change.text,
                )
            except wkjson.ENCODING_ERRORS as error:
                self.rejected.append((change.identity, change.item, error))
                self.unwritten.add(change.identity)
                continue
            yield self.sequence

    def write_known(
        self,
        pairs: Sequence[tuple[str, Any]],
        changes: Sequence[Change[Any]],
        candidates: Sequence[Candidate[Any]],
        existing: Mapping[str, ItemRow],
        *,
        payload: bool,
    ) -> None:
        """A forced backfill re-emits as ``updated`` every item of ``pairs`` the diff left
        without a change, so a consumer can rebuild (``payload``: rows retain their item).
        ``candidates`` and ``existing`` are the page's hashes and stored rows."""
        changed = {change.identity for change in changes}
        hashes = {candidate.identity: candidate.hash for candidate in candidates}
        for identity, item in pairs:
            if identity in changed:
                continue
            known = existing.get(identity)
            previous = known.payload if known is not None and payload else None
            # The same observation as the row's last event: its revision, not a new one.
            revision = known.revision if known is not None else 0
            try:
                version = self._maker.version_or_hash(item, hashes.get(identity))
                self._add(
                    "updated", identity, version, revision, item, self._maker.load_payload(previous)
                )
            except wkjson.ENCODING_ERRORS as error:
                self.rejected.append((identity, item, error))
