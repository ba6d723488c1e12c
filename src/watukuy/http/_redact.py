"""Keeping credentials out of logs, errors and hook records.

The policy itself (:class:`~watukuy.model.redact.Redaction`) lives in the pure core, so the
engine applies it to every error it serialises; this module is its HTTP-facing surface:
header and URL helpers, and a logging filter for your own log records.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Final

from watukuy.model.redact import (
    DEFAULT_REDACTION,
    REDACTED,
    SENSITIVE_NAMES,
    SENSITIVE_PARTS,
    RedactingLogger,
    Redaction,
    format_stack,
    redact_text,
    redact_url,
    relative_source_path,
)

__all__ = [
    "DEFAULT_REDACTION",
    "REDACTED",
    "SENSITIVE_HEADERS",
    "SENSITIVE_NAMES",
    "SENSITIVE_PARTS",
    "Redaction",
    "RedactingFilter",
    "RedactingLogger",
    "format_stack",
    "guard_library_logs",
    "is_sensitive_header",
    "redact_headers",
    "redact_text",
    "redact_url",
    "relative_source_path",
]

SENSITIVE_HEADERS: Final[frozenset[str]] = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "x-access-token",
        "x-amz-security-token",
        "x-goog-api-key",
        "ocp-apim-subscription-key",
    }
)
"""Common credential headers (lower case). Every one is caught by the default
:class:`~watukuy.model.redact.Redaction` rules, which also catch any other name containing
``token``, ``secret``, ``auth``, ``key`` suffixes and more; this list documents them."""

# A log record carries these attributes itself; anything else on it came from ``extra``.
_RECORD_ATTRIBUTES: Final = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


def is_sensitive_header(name: object, redaction: Redaction | None = None) -> bool:
    """True when ``name`` is a header (or parameter) whose value must never be shown."""
    return (redaction or DEFAULT_REDACTION).is_sensitive(name)


def redact_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]], redaction: Redaction | None = None
) -> dict[str, str]:
    """Copy headers into a plain dict with credential values replaced by ``***``.

    Names are matched case-insensitively by the policy (default: the built-in rules:
    ``authorization``, ``cookie``, ``x-api-key``, ``api-key``, ``x-auth-token``, anything
    containing ``token`` / ``secret`` / ``auth``, ...); the names keep their casing. The
    input (a dict, an ``httpx.Headers`` or ``(name, value)`` pairs) is never modified.

    Args:
        headers: Request or response headers.
        redaction: The policy (default: :data:`~watukuy.model.redact.DEFAULT_REDACTION`).

    Returns:
        A new dict, safe to log.
    """
    return (redaction or DEFAULT_REDACTION).headers(headers)


class RedactingFilter(logging.Filter):
    """A logging filter that cleans records of secrets, for your own log lines.

    watukuy cleans what it logs itself; attach this filter to a handler or logger when your
    own code logs requests, for example
    ``logger.info("calling %s", url, extra={"headers": request_headers})``. Every mapping
    passed through ``extra`` (and nested mappings a few levels deep, and a mapping used as
    the record's ``args``) gets the values of sensitive keys replaced by ``***``; string
    values, string arguments and the message have URL credentials and sensitive
    parameters masked. The filter never drops a record.

    Args:
        redaction: The policy (default: the built-in rules).
    """

    def __init__(self, redaction: Redaction | None = None) -> None:
        super().__init__()
        self.redaction = redaction or DEFAULT_REDACTION

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the record in place and let it through."""
        _clean_record(record, self.redaction)
        return True


def _clean_record(record: logging.LogRecord, redaction: Redaction) -> None:
    for name, value in list(vars(record).items()):
        if name in _RECORD_ATTRIBUTES:
            continue
        cleaned = redaction.value(value)
        if cleaned is not value:
            setattr(record, name, cleaned)
    if isinstance(record.msg, str):
        record.msg = redaction.text(record.msg)
    if isinstance(record.args, Mapping):
        record.args = redaction.mapping(record.args)
    elif isinstance(record.args, tuple):
        record.args = tuple(_clean_arg(arg, redaction) for arg in record.args)


def _clean_arg(arg: object, redaction: Redaction) -> object:
    """A ``%`` argument: replaced by its cleaned text only when cleaning changed it (so a
    number or a harmless object keeps its own formatting)."""
    if arg is None or isinstance(arg, int | float):
        return arg
    text = str(arg)
    cleaned = redaction.text(text)
    return arg if cleaned == text else cleaned


# httpx logs every request at INFO ("HTTP Request: GET <full URL>"), user info and query
# string included. Its logger is cleaned by one filter per process, holding the policies of
# every live HTTP factory (plus the default one).
LIBRARY_LOGGERS: Final = ("httpx", "httpcore")
"""Loggers of the HTTP libraries watukuy sends with, cleaned by :func:`guard_library_logs`."""

_library_lock = threading.Lock()
_library_policies: weakref.WeakSet[Redaction] = weakref.WeakSet()


class _LibraryFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for policy in [DEFAULT_REDACTION, *list(_library_policies)]:
            _clean_record(record, policy)
        return True


_library_filter: Final = _LibraryFilter()


def guard_library_logs(redaction: Redaction | None = None) -> None:
    """Clean the records of the ``httpx`` and ``httpcore`` loggers with ``redaction`` too.

    :class:`~watukuy.http.HttpxFactory` calls it for its engine's policy; the filter is
    installed once per process and never drops a record.
    """
    with _library_lock:
        if redaction is not None and redaction is not DEFAULT_REDACTION:
            _library_policies.add(redaction)
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            if _library_filter not in logger.filters:
                logger.addFilter(_library_filter)
