"""What a poller says about its pages, as the page pipeline reads it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from watukuy.cursor import CursorStrategy
from watukuy.diff.changes import OnSchemaChange
from watukuy.model.records import dataclass
from watukuy.model.redact import Redaction
from watukuy.model.rows import Lane
from watukuy.validate import SchemaAdapter

__all__ = ["OnInvalid", "PageRules"]

OnInvalid = Literal["quarantine", "skip", "fail"]
"""What becomes of a page's invalid items."""


@dataclass(frozen=True, slots=True)
class PageRules:
    """What a poller says about its pages, for one lane of one key.

    Attributes:
        strategy: The lane's cursor strategy.
        adapter: The schema adapter (validation, dump, load).
        identity: The poller's ``identity(item)``.
        version: The poller's ``version(item)``, or ``None``.
        fingerprint: The poller's ``fingerprint(item)``, or ``None`` (the whole item).
        schema_version: The poller's ``schema_version``.
        on_invalid: What becomes of invalid items.
        on_schema_change: What a row of another schema version does.
        retain_payload: Rows keep their item (``retain="payload"``).
        proves: Full listings link each identity to its neighbours (``Deletes.proves``).
        compat_ids: Event ids ignore revisions (``EventIds(compat)``).
        log: Events are kept in the event log.
        full_scan: The lane lists everything (snapshot diff, reconcile).
        source: The events' ``source``.
        poller: The poller's name.
        partition: The partition key.
        lane: The lane.
        redaction: Cleans what validation issues and error messages quote.
    """

    strategy: CursorStrategy[Any]
    adapter: SchemaAdapter[Any]
    identity: Callable[[Any], Any]
    version: Callable[[Any], Any] | None
    fingerprint: Callable[[Any], Any] | None
    schema_version: int
    on_invalid: OnInvalid
    on_schema_change: OnSchemaChange
    retain_payload: bool
    proves: bool
    compat_ids: bool
    log: bool
    full_scan: bool
    source: str
    poller: str
    partition: str
    lane: Lane
    redaction: Redaction
