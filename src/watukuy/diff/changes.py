"""The diff: what one page of items changed against the stored snapshot rows.

Pure, synchronous and deterministic. A page goes through three steps:

1. :func:`dedupe` keeps one item per identity (an overlapping re-scan or a repeating API
   may show an identity twice in a page);
2. :func:`prepare_candidates` computes version text and content hash, skipping the hash
   entirely when the stored row already has the same version and schema version;
3. :func:`diff_candidates` compares the candidates with the stored rows and says which
   events to emit and which rows to write in the page's commit.

Full scans add :func:`detect_deletes` once the whole listing has been seen.

The rules of :func:`diff_candidates`, with ``row`` the stored row of the identity:

============================  =====================  =====================================
stored row                    condition              result
============================  =====================  =====================================
absent                                               ``created``, upsert
same ``schema_version``       hash differs           ``updated``, upsert
same ``schema_version``       hash equal             unchanged; upsert only with
                                                     ``touch_unchanged`` or a new version
other ``schema_version``      ``"rebaseline"``       rebaselined, upsert, no event
other ``schema_version``      ``"emit"``             ``updated`` if the hash differs, else
                                                     rebaselined; upsert either way
============================  =====================  =====================================

Every event also gets the identity's next *revision* (kept in the row, mixed into the event
id from ``1`` on, see :mod:`watukuy.diff.ids`): an ``updated`` is one more than the row's;
a ``created`` is ``0`` for an identity never seen, two more than a ``"deleted"`` tombstone
(its ``deleted`` event took the one in between), and, after ``clear_items``, the revision
of the ``"cleared"`` tombstone when the item is still what the row held (the same
observation, the same id), one more otherwise. Rows written without an event keep their
revision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import field
from typing import Any, Generic, Literal, TypeVar

from watukuy.model import json as wkjson
from watukuy.model.errors import ConfigError
from watukuy.model.records import dataclass, fast_init
from watukuy.model.rows import ItemRow, Tombstone

from .canonical import content_hash
from .ids import version_text
from .jcs import utf16_sorted

__all__ = [
    "Candidate",
    "Change",
    "ChangeType",
    "DiffResult",
    "OnSchemaChange",
    "Rejected",
    "dedupe",
    "detect_deletes",
    "diff_candidates",
    "prepare_candidates",
    "recreated_revision",
]

T = TypeVar("T")

ChangeType = Literal["created", "updated"]
"""The events a diff can emit; ``deleted`` comes from :func:`detect_deletes`."""

OnSchemaChange = Literal["rebaseline", "emit"]
"""What to do with a stored row written under another ``schema_version``."""

_ON_SCHEMA_CHANGE: frozenset[str] = frozenset({"rebaseline", "emit"})


@fast_init
@dataclass(frozen=True, slots=True)
class Candidate(Generic[T]):
    """One item of a page, ready to compare with its stored row.

    Attributes:
        identity: The item's identity.
        item: The (validated) item itself.
        version: The version text, ``None`` when the poller has no ``version``.
        hash: SHA-256 hex of the canonical fingerprint (the whole item by default).
    """

    identity: str
    item: T
    version: str | None
    hash: str


@fast_init
@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """An event the page produces.

    Attributes:
        type: ``"created"`` or ``"updated"``.
        identity: The item's identity.
        item: The item as it is now.
        previous: The stored payload (JSON text) of an ``updated`` item when payloads are
            retained; ``None`` otherwise.
        version: The version text, ``None`` when the poller has no ``version`` (the event
            id then uses ``hash``).
        hash: The content hash of the item's fingerprint.
        revision: The identity's revision at this event (see the module docstring).
        text: The item's JSON text as the snapshot row holds it (``dumps_typed``), when
            payloads are retained and orjson wrote it (so ``orjson.loads`` reads it back
            exactly); ``None`` otherwise. The event's ``data`` is then written from it
            instead of serialising the item a second time.
    """

    type: ChangeType
    identity: str
    item: T
    previous: str | None
    version: str | None
    hash: str
    revision: int = 0
    text: str | None = None


@dataclass(frozen=True, slots=True)
class DiffResult(Generic[T]):
    """What :func:`diff_candidates` decided for one page.

    Attributes:
        changes: Events to emit, in candidate order.
        upserts: Rows to write in the page's commit (every created, updated and rebaselined
            item, and unchanged ones when touched or when their version text moved).
        unchanged: Identities whose hash and schema version matched the stored row.
        rebaselined: Identities whose row was rewritten for a new ``schema_version``
            without an event.
    """

    changes: list[Change[T]] = field(default_factory=list)
    upserts: list[ItemRow] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rebaselined: list[str] = field(default_factory=list)


def dedupe(pairs: Iterable[tuple[str, T]]) -> list[tuple[str, T]]:
    """Keep one ``(identity, item)`` per identity: the last item, at the first position.

    The last occurrence is the freshest observation; keeping the first position keeps the
    page order stable for everything else. A list without a repeated identity is returned
    as it is.
    """
    given = pairs if isinstance(pairs, list) else list(pairs)
    latest: dict[str, T] = dict(given)  # a dict keeps a key where it was first inserted
    if len(latest) == len(given):
        return given  # no identity twice (the usual page): the pairs as they came
    return list(latest.items())


Rejected = list[tuple[str, T, Exception]]
"""Items that could not be encoded: ``(identity, item, the error)``, in page order."""


def prepare_candidates(
    pairs: Iterable[tuple[str, T]],
    existing: Mapping[str, ItemRow],
    *,
    version: Callable[[T], Any] | None,
    fingerprint: Callable[[T], Any] | None,
    schema_version: int,
    unique: bool = False,
    rejected: Rejected[T] | None = None,
) -> tuple[list[Candidate[T]], list[str]]:
    """Compute version text and content hash for a page of ``(identity, item)`` pairs.

    Duplicate identities are folded with :func:`dedupe` first. When the poller has a
    ``version`` and the stored row carries the same version text under the same
    ``schema_version``, the item is reported unchanged without being hashed (the version
    fast path); callers that track presence must count those identities as seen too.

    Args:
        pairs: ``(identity, item)`` in page order.
        existing: The stored rows of (at least) these identities.
        version: The poller's ``version(item)``, or ``None``.
        fingerprint: The poller's ``fingerprint(item)``, or ``None`` to hash the whole item.
        schema_version: The poller's current ``schema_version``.
        unique: The caller already folded duplicate identities (skips :func:`dedupe`).
        rejected: Where an item that cannot be hashed goes (nested too deep, NaN, a value
            with no JSON form: see :data:`~watukuy.model.json.ENCODING_ERRORS`), instead
            of the error being raised.

    Returns:
        The candidates to diff, and the identities the fast path found unchanged, each in
        page order.
    """
    candidates: list[Candidate[T]] = []
    unchanged: list[str] = []
    for identity, item in pairs if unique else dedupe(pairs):
        text = version_text(version(item)) if version is not None else None
        row = existing.get(identity)
        if (
            text is not None
            and row is not None
            and row.version == text
            and row.schema_version == schema_version
        ):
            unchanged.append(identity)
            continue
        try:
            digest = content_hash(fingerprint(item) if fingerprint is not None else item)
        except wkjson.ENCODING_ERRORS as error:
            if rejected is None:
                raise
            rejected.append((identity, item, error))
            continue
        candidates.append(Candidate(identity, item, text, digest))
    return candidates, unchanged


def recreated_revision(
    tombstone: Tombstone | None, candidate: Candidate[Any], schema_version: int
) -> int:
    """The revision of the ``created`` event of an identity that has no snapshot row.

    Args:
        tombstone: What the store kept of the identity when it left the snapshot, if any.
        candidate: The item as it is now.
        schema_version: The poller's current ``schema_version``.
    """
    if tombstone is None:
        return 0
    if tombstone.reason == "cleared":
        same = (
            tombstone.hash == candidate.hash
            and tombstone.version == candidate.version
            and tombstone.schema_version == schema_version
        )
        return tombstone.revision if same else tombstone.revision + 1
    return tombstone.revision + 2


def _payload(item: Any) -> tuple[str, str | None]:
    """The snapshot payload of ``item``, and the same text again when orjson wrote it (an
    event's ``data`` can then share it), ``None`` otherwise."""
    raw, exact = wkjson.dumps_typed_bytes(item)
    text = raw.decode()
    return text, text if exact else None


def _row(
    candidate: Candidate[Any],
    schema_version: int,
    retain_payload: bool,
    now: int,
    revision: int,
    payload: str | None = None,
) -> ItemRow:
    if payload is None and retain_payload:
        payload = wkjson.dumps_typed(candidate.item)
    # Positional arguments: this runs once per changed item, and keywords cost more.
    return ItemRow(
        candidate.identity,
        candidate.version,
        candidate.hash,
        schema_version,
        payload,
        now,
        revision,
    )


def diff_candidates(
    candidates: Iterable[Candidate[T]],
    existing: Mapping[str, ItemRow],
    *,
    schema_version: int,
    on_schema_change: OnSchemaChange,
    retain_payload: bool,
    now: int,
    touch_unchanged: bool = False,
    tombstones: Mapping[str, Tombstone] | None = None,
    rejected: Rejected[T] | None = None,
) -> DiffResult[T]:
    """Decide, for each candidate, the event to emit and the row to write.

    The rules are in the module docstring. Upserted rows carry the current
    ``schema_version``, ``seen_at=now``, the revision of their event (or the stored one
    when there is none) and, only when ``retain_payload``, the item as JSON text.

    Args:
        candidates: From :func:`prepare_candidates`.
        existing: The stored rows of these identities.
        schema_version: The poller's current ``schema_version``.
        on_schema_change: ``"rebaseline"`` (rewrite drifted rows silently) or ``"emit"``
            (emit ``updated`` for drifted rows whose hash changed).
        retain_payload: The poller keeps payloads (``retain="payload"``).
        now: The commit time, epoch milliseconds.
        touch_unchanged: Also rewrite unchanged rows, refreshing ``seen_at``.
        tombstones: The tombstones of (at least) the candidates without a stored row.
        rejected: Where a candidate whose payload cannot be written goes (with
            ``retain_payload``), left out of the result, instead of the error being raised.

    Raises:
        ConfigError: ``on_schema_change`` is neither ``"rebaseline"`` nor ``"emit"``.
    """
    if on_schema_change not in _ON_SCHEMA_CHANGE:
        raise ConfigError(
            f"expected 'rebaseline' or 'emit', got {on_schema_change!r}",
            field="on_schema_change",
        )
    result: DiffResult[T] = DiffResult()
    changes, upserts = result.changes, result.upserts
    for candidate in candidates:
        identity = candidate.identity
        row = existing.get(identity)
        # Each branch writes its payload before it adds anything to the result: a
        # candidate that cannot be written (see `rejected`) leaves the result as it was.
        try:
            if row is None:
                tombstone = tombstones.get(identity) if tombstones else None
                revision = recreated_revision(tombstone, candidate, schema_version)
                payload, text = _payload(candidate.item) if retain_payload else (None, None)
                changes.append(
                    Change(
                        "created",
                        identity,
                        candidate.item,
                        None,
                        candidate.version,
                        candidate.hash,
                        revision,
                        text,
                    )
                )
                upserts.append(
                    _row(candidate, schema_version, retain_payload, now, revision, payload)
                )
                continue
            kept = row.revision
            drifted = row.schema_version != schema_version
            if drifted and on_schema_change == "rebaseline":
                upserts.append(_row(candidate, schema_version, retain_payload, now, kept))
                result.rebaselined.append(identity)
                continue
            if row.hash != candidate.hash:
                previous = row.payload if retain_payload else None
                payload, text = _payload(candidate.item) if retain_payload else (None, None)
                changes.append(
                    Change(
                        "updated",
                        identity,
                        candidate.item,
                        previous,
                        candidate.version,
                        candidate.hash,
                        kept + 1,
                        text,
                    )
                )
                upserts.append(
                    _row(candidate, schema_version, retain_payload, now, kept + 1, payload)
                )
                continue
            if drifted:
                # Nothing to tell the handler, but the row must move to the current schema
                # version so the version fast path applies to it again.
                upserts.append(_row(candidate, schema_version, retain_payload, now, kept))
                result.rebaselined.append(identity)
                continue
            if touch_unchanged or row.version != candidate.version:
                upserts.append(_row(candidate, schema_version, retain_payload, now, kept))
            result.unchanged.append(identity)
        except wkjson.ENCODING_ERRORS as error:
            if rejected is None:
                raise
            rejected.append((identity, candidate.item, error))
    return result


def detect_deletes(stored_identities: Iterable[str], seen: Set[str]) -> list[str]:
    """The stored identities a complete listing did not show, sorted by UTF-16 code units.

    Args:
        stored_identities: Identities in the snapshot (any iterable, e.g. one batch).
        seen: Every identity the listing showed, including fast-path unchanged ones.
    """
    return utf16_sorted(identity for identity in stored_identities if identity not in seen)
