"""Keeping credentials out of logs: header redaction and a logging filter."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = [
    "REDACTED",
    "SENSITIVE_HEADERS",
    "RedactingFilter",
    "is_sensitive_header",
    "redact_headers",
]

SENSITIVE_HEADERS: Final[frozenset[str]] = frozenset(
    {"authorization", "cookie", "set-cookie", "x-api-key", "proxy-authorization"}
)
"""Header names (lower case) whose values never reach a log line, hook or error."""

REDACTED: Final = "***"
"""What a redacted value is replaced with."""

# A log record carries these attributes itself; anything else on it came from ``extra``.
_RECORD_ATTRIBUTES: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# Nested mappings in ``extra`` are followed this deep (a request dict holding headers).
_MAX_DEPTH: Final = 4


def is_sensitive_header(name: object) -> bool:
    """True when ``name`` is a header whose value must never be shown."""
    return isinstance(name, str) and name.strip().lower() in SENSITIVE_HEADERS


def redact_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Copy headers into a plain dict with credential values replaced by ``***``.

    ``authorization``, ``cookie``, ``set-cookie``, ``x-api-key`` and
    ``proxy-authorization`` are matched case-insensitively; the names keep their casing.
    The input (a dict, an ``httpx.Headers`` or ``(name, value)`` pairs) is never modified.

    Args:
        headers: Request or response headers.

    Returns:
        A new dict, safe to log.
    """
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return {name: REDACTED if is_sensitive_header(name) else value for name, value in pairs}


def _redact_mapping(value: Mapping[Any, Any], depth: int) -> Mapping[Any, Any]:
    changed = False
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if is_sensitive_header(key):
            new: Any = REDACTED
        elif isinstance(item, Mapping) and depth < _MAX_DEPTH:
            new = _redact_mapping(item, depth + 1)
        else:
            new = item
        changed = changed or new is not item
        out[key] = new
    # Untouched mappings are passed through as they are, so formatters see the user's object.
    return out if changed else value


class RedactingFilter(logging.Filter):
    """A logging filter that masks credential headers found in a record's ``extra`` dicts.

    watukuy redacts what it logs itself; attach this filter to a handler or logger when
    your own code logs requests, for example
    ``logger.info("calling ERP", extra={"headers": request_headers})``. Every mapping
    passed through ``extra`` (and nested mappings a few levels deep, and a mapping used as
    the record's ``args``) gets the values of ``authorization``, ``cookie``,
    ``set-cookie``, ``x-api-key`` and ``proxy-authorization`` replaced by ``***``. The
    filter never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the record in place and let it through."""
        for name, value in list(vars(record).items()):
            if name not in _RECORD_ATTRIBUTES and isinstance(value, Mapping):
                setattr(record, name, _redact_mapping(value, 1))
        if isinstance(record.args, Mapping):
            record.args = _redact_mapping(record.args, 1)
        return True
