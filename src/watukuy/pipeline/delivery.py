"""What a delivery decides from plain data: a drain's tally, the event a handler receives,
the error record an attempt leaves. Pure: the runtime's dispatcher does the store calls and
the hooks around these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from watukuy.diff.patch import json_patch
from watukuy.model import json as wkjson
from watukuy.model.errors import SerializedError
from watukuy.model.events import Event
from watukuy.model.records import dataclass
from watukuy.model.rows import ParkedRow
from watukuy.validate import SchemaAdapter, is_passthrough

__all__ = ["DrainResult", "Rehydration", "with_history", "without_history"]

# Failed attempts an event's stored error remembers.
_MAX_HISTORY = 20


@dataclass(slots=True)
class DrainResult:
    """What one drain did.

    Attributes:
        delivered: Events acked.
        filtered: Events the consumer's ``when=`` filter turned down (acked, not delivered).
        parked: Events parked as poison.
        failed: Failed attempts scheduled for retry.
        next_retry_at: Earliest retry time of a failed event, if any.
        halted: A poison event hit ``poison.action="halt"``.
        held: Rows skipped because a parked event holds their ordering key, or because
            they are for a consumer this engine does not have.
        abandoned: A subscriber went away with an event in hand.
    """

    delivered: int = 0
    filtered: int = 0
    parked: int = 0
    failed: int = 0
    next_retry_at: int | None = None
    halted: bool = False
    held: int = 0
    abandoned: bool = False
    parked_rows: list[ParkedRow] = field(default_factory=list)

    def note_retry(self, at: int) -> None:
        """Remember the earliest retry time."""
        if self.next_retry_at is None or at < self.next_retry_at:
            self.next_retry_at = at

    def merge(self, other: DrainResult) -> None:
        """Fold another drain of the same run into this one."""
        self.delivered += other.delivered
        self.filtered += other.filtered
        self.parked += other.parked
        self.failed += other.failed
        if other.next_retry_at is not None:
            self.note_retry(other.next_retry_at)
        self.halted = self.halted or other.halted
        self.held = max(self.held, other.held)
        self.abandoned = self.abandoned or other.abandoned
        self.parked_rows.extend(other.parked_rows)


@dataclass(frozen=True, slots=True)
class Rehydration:
    """Turns an event as stored in the outbox into the one a handler receives.

    Args:
        adapter: The poller's schema adapter (``data`` and ``previous`` are loaded by it).
        patches: The poller keeps payloads, so an ``updated`` event without stored
            ``changes`` gets a JSON Patch computed now.
        fingerprint: The poller's fingerprint: the patch is taken over it when set.
        array_key: How the patch matches array elements (see :func:`json_patch`).
    """

    adapter: SchemaAdapter[Any]
    patches: bool
    fingerprint: Callable[[Any], Any] | None = None
    array_key: str | None = "id"
    _passthrough: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_passthrough", is_passthrough(self.adapter))

    def event(self, stored: Event[Any], attempt: int) -> Event[Any]:
        """The event of delivery attempt ``attempt``: its payloads through the schema, and
        ``changes`` filled in when the poller keeps payloads."""
        adapter = self.adapter
        changes = stored.changes
        if changes is None and self.patches and stored.type == "updated":
            changes = self.changes_of(stored)
        if self._passthrough and stored.attempt == attempt and changes is stored.changes:
            return stored  # no schema and a first attempt: the stored event is the one
        data = stored.data if stored.data is None else adapter.load(stored.data)
        previous = stored.previous if stored.previous is None else adapter.load(stored.previous)
        return Event(
            id=stored.id,
            type=stored.type,
            source=stored.source,
            subject=stored.subject,
            time=stored.time,
            poller=stored.poller,
            partition=stored.partition,
            lane=stored.lane,
            sequence=stored.sequence,
            cursor=stored.cursor,
            data=data,
            previous=previous,
            attempt=attempt,
            changes=changes,
        )

    def changes_of(self, stored: Event[Any]) -> list[dict[str, Any]] | None:
        """The JSON Patch from ``previous`` to ``data`` of a stored ``updated`` event, over
        the poller's fingerprint when it has one (``None`` without a ``previous``).

        Computed at delivery rather than stored with the event: the outbox keeps its size,
        and events written before patches existed get one too.
        """
        if stored.previous is None:
            return None
        before, after = stored.previous, stored.data
        fingerprint = self.fingerprint
        if fingerprint is not None:
            adapter = self.adapter
            before = wkjson.to_jsonable(fingerprint(adapter.load(before)))
            after = wkjson.to_jsonable(fingerprint(adapter.load(after)))
        return json_patch(before, after, array_key=self.array_key)


def with_history(
    error: SerializedError, last_error: SerializedError | None, now: int, attempt: int
) -> SerializedError:
    """``error`` with the attempt history of ``last_error`` and this attempt appended (the
    last few attempts only)."""
    history = list((last_error or {}).get("history", []))
    history.append({"at": now, "attempt": attempt, "message": error.get("message", "")})
    error["history"] = history[-_MAX_HISTORY:]
    return error


def without_history(error: SerializedError) -> SerializedError:
    """The error without its attempt history (hooks get the current failure)."""
    return {k: v for k, v in error.items() if k != "history"}  # type: ignore[return-value]
