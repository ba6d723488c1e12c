"""Canonical JSON, content hashes, event ids and the diff: pure functions, no I/O.

- :func:`canonical_json` / :func:`content_hash`: RFC 8785 text and its SHA-256, byte for
  byte what the original watukuy computes.
- :func:`event_id`: the deterministic id of an observation; :func:`identity_text` and
  :func:`version_text` give the texts it is built from.
- :func:`dedupe`, :func:`prepare_candidates`, :func:`diff_candidates`,
  :func:`detect_deletes`: what a page changed against the stored snapshot.
"""

from __future__ import annotations

from .canonical import canonical_json, content_hash
from .changes import (
    Candidate,
    Change,
    ChangeType,
    DiffResult,
    OnSchemaChange,
    dedupe,
    detect_deletes,
    diff_candidates,
    prepare_candidates,
    recreated_revision,
)
from .ids import (
    MAX_IDENTITY_BYTES,
    event_id,
    event_id_material,
    identity_text,
    oversized_identity,
    version_text,
)
from .jcs import format_number, reference_json, utf16_sorted

__all__ = [
    "MAX_IDENTITY_BYTES",
    "Candidate",
    "Change",
    "ChangeType",
    "DiffResult",
    "OnSchemaChange",
    "canonical_json",
    "content_hash",
    "dedupe",
    "detect_deletes",
    "diff_candidates",
    "event_id",
    "event_id_material",
    "format_number",
    "identity_text",
    "oversized_identity",
    "prepare_candidates",
    "recreated_revision",
    "reference_json",
    "utf16_sorted",
    "version_text",
]
