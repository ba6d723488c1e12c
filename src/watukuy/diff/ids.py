"""Deterministic event ids, and the text forms of identities and versions they are made of.

An event id is the SHA-256 (hex) of::

    watukuy|v1|<source>|<partition>|<identity>|<version-or-hash>|<schema_version>|<type>

where, inside every part, ``\\`` is written ``\\\\`` and ``|`` is written ``\\|``, so no two
different tuples of parts share a material. The same observation therefore has the same id
in every process, after every restart and replay, and in the original watukuy.

From an item's second event on, its *revision* (how many events of the identity came
before, see :class:`~watukuy.model.rows.ItemRow`) is appended as a ninth part,
``...|<type>|<revision>``, so an item that goes back to an earlier version, or is deleted
and re-created, still gets ids it never had. Revision ``0`` adds nothing: the first event
of an item has exactly the original id. (A poller with ``ids="compat"`` passes ``0`` for
every event and reproduces the original watukuy's ids throughout.)
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Final

from watukuy.model.json import to_jsonable

from .jcs import format_number

# Integers below 2**53 in magnitude are doubles exactly, and String(n) writes their digits.
_EXACT_INT: Final = 2**53

__all__ = [
    "MAX_IDENTITY_BYTES",
    "event_id",
    "event_id_material",
    "identity_text",
    "oversized_identity",
    "version_text",
]

_PREFIX: Final = "watukuy|v1|"
_ESCAPES: Final = str.maketrans({"\\": "\\\\", "|": "\\|"})


def _escape(part: str) -> str:
    return part.translate(_ESCAPES)


def event_id_material(
    source: str,
    partition: str,
    identity: str,
    version: str,
    schema_version: int,
    type: str,
    revision: int = 0,
) -> str:
    """The exact text :func:`event_id` hashes; useful to debug or to reimplement ids.

    Args:
        source: The event ``source`` (``urn:watukuy:<poller>`` unless overridden).
        partition: The partition, ``""`` for a poller without partitions.
        identity: The item's identity.
        version: The item's version text, or its content hash when the poller has no
            ``version``; for ``deleted`` events, the last stored one.
        schema_version: The poller's ``schema_version``.
        type: ``"created"``, ``"updated"`` or ``"deleted"``.
        revision: The identity's revision at this event; ``0`` (the first event of an
            item) adds no part, anything above is appended in decimal.

    Returns:
        For example ``watukuy|v1|urn:watukuy:orders||o1|v1|1|created``, and with revision
        ``3`` ``watukuy|v1|urn:watukuy:orders||o1|v1|1|updated|3``.
    """
    parts = (source, partition, identity, version, format_number(schema_version), type)
    joined = "|".join(parts)
    if joined.count("|") == len(parts) - 1 and "\\" not in joined:
        material = _PREFIX + joined  # the usual case: no part holds a character to escape
    else:
        material = _PREFIX + "|".join(map(_escape, parts))
    if revision:
        # A ninth part: unescaped separators make the parts count, so no material of an
        # event with a revision equals one without.
        return f"{material}|{int.__repr__(revision)}"
    return material


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # JavaScript's TextEncoder joins surrogate pairs and turns a lone surrogate into
        # U+FFFD; a round trip through UTF-16 does the same.
        units = text.encode("utf-16-be", "surrogatepass")
        return units.decode("utf-16-be", "replace").encode("utf-8")


def event_id(
    source: str,
    partition: str,
    identity: str,
    version: str,
    schema_version: int,
    type: str,
    revision: int = 0,
) -> str:
    """The deterministic id of one observation: SHA-256 (hex) of its material.

    Args:
        source: The event ``source``.
        partition: The partition, ``""`` for a poller without partitions.
        identity: The item's identity.
        version: The version text, or the content hash when the poller has no version.
        schema_version: The poller's ``schema_version``.
        type: ``"created"``, ``"updated"`` or ``"deleted"``.
        revision: The identity's revision at this event (``0``: the original id).

    Returns:
        64 lowercase hex characters. For source ``urn:watukuy:orders``, partition ``""``,
        identity ``o1``, version ``v1``, schema version 1 and type ``created``:
        ``5dc9ec28d4ec668a7add37c6a32e916f839cd6d98ee013de30acd06b32599862``.
    """
    material = event_id_material(
        source, partition, identity, version, schema_version, type, revision
    )
    return hashlib.sha256(_utf8(material)).hexdigest()


def version_text(value: Any) -> str | None:
    """The text a ``version(item)`` result is stored and hashed as.

    Strings are kept as they are; booleans become ``"true"``/``"false"`` and numbers are
    written the way JavaScript's ``String(n)`` writes them (``1.0`` is ``"1"``), as the
    original watukuy does, so ids agree across the two. ``None`` means "no version".
    Other values (datetimes, UUIDs, decimals, enums) are first turned into JSON data with
    :func:`~watukuy.model.json.to_jsonable`.

    Raises:
        TypeError: The value has no JSON form, or its JSON form is not a string, number
            or boolean.
        ValueError: A string with a lone surrogate: it cannot be stored.
    """
    if value is None:
        return None
    if type(value) is int and -_EXACT_INT < value < _EXACT_INT:
        return int.__repr__(value)  # the common case: JavaScript writes these digit for digit
    if isinstance(value, str):
        # The text itself, also for str enums and subclasses.
        return _unicode(str.__str__(value), "the version")
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and not math.isfinite(value):
        # String() has words for these, though canonical JSON rejects them.
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int | float):
        return format_number(value)
    plain = to_jsonable(value)
    if plain is None or isinstance(plain, dict | list):
        raise TypeError(
            f"version() must return a string, number or boolean, "
            f"got {type(value).__name__} ({value!r})"
        )
    return version_text(plain)


def _unicode(text: str, what: str) -> str:
    """``text`` when it is a string of Unicode characters; a lone surrogate (which has no
    UTF-8 form, so no store and no JSON document can hold it) is refused."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            bad = error.object[error.start : error.end]
            raise ValueError(
                f"{what} holds the lone surrogate {bad!r}, which has no UTF-8 form"
            ) from None
    return text


MAX_IDENTITY_BYTES: Final = 1024
"""The longest identity, in bytes of UTF-8, that every store keys a snapshot row on.

PostgreSQL keeps a key of the snapshot (and tombstone) table in one btree entry of at most
2,704 bytes, poller name and partition key included: longer identities cannot be stored
there, and the other stores follow the same limit so that a poller behaves the same on all
four. The store contract suite writes identities of this size (see
https://watukuy.readthedocs.io/en/latest/stores/#identities-at-most-1024-bytes).
"""


def oversized_identity(identity: str) -> int | None:
    """The size in bytes of ``identity`` when it is over :data:`MAX_IDENTITY_BYTES`, else
    ``None`` (a string of at most a quarter as many characters is never over)."""
    if len(identity) <= MAX_IDENTITY_BYTES // 4:
        return None
    size = len(identity.encode("utf-8", "surrogatepass"))
    return size if size > MAX_IDENTITY_BYTES else None


def identity_text(value: Any) -> str:
    """The identity string a snapshot row is keyed on: a ``str`` as is, an ``int`` in decimal.

    Any string of Unicode characters up to :data:`MAX_IDENTITY_BYTES` of UTF-8 works,
    ``"\\x00"`` included, on every store (the length is checked by the caller: see
    :func:`oversized_identity`).

    Raises:
        TypeError: Any other type, including ``bool``, ``float`` and ``None``.
        ValueError: A string with a lone surrogate (``"\\ud800"``): it cannot be stored.
    """
    if isinstance(value, str):
        # The text itself, also for str enums and subclasses.
        return _unicode(str.__str__(value), "the identity")
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__repr__(value)
    raise TypeError(
        f"identity() must return a str or an int, got {type(value).__name__} ({value!r})"
    )
