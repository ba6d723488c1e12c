"""Loggers for an engine: the type it takes, a silent one, and a child of any of them.

``Engine(logger=...)`` takes a ``logging.Logger`` or a ``logging.LoggerAdapter`` (both are
:data:`Logger`); the engine wraps it in its :class:`~watukuy.model.redact.RedactingLogger`,
so what reaches it is cleaned of secrets whichever logger it is. Without one, the engine
writes to the ``"watukuy"`` logger of the standard library.
"""

from __future__ import annotations

import logging
from typing import Any, TypeAlias

from .errors import ConfigError
from .redact import DEFAULT_REDACTION, RedactingLogger

__all__ = ["Logger", "child_logger", "check_logger", "silent_logger"]

Logger: TypeAlias = logging.Logger | logging.LoggerAdapter[Any]
"""What an engine logs to: a standard ``logging.Logger`` or any ``LoggerAdapter``."""


def silent_logger() -> logging.Logger:
    """A logger that drops every record: ``Engine(logger=wk.silent_logger())``.

    It stands outside the ``logging`` hierarchy, so no handler configured elsewhere (the
    root logger's included) and not the standard library's last-resort handler ever
    print what it is given.

    Returns:
        A disabled logger with no parent.
    """
    logger = logging.Logger("watukuy.silent", logging.CRITICAL + 1)
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    logger.disabled = True
    return logger


def child_logger(parent: Logger, name: str, **extra: object) -> RedactingLogger:
    """A logger whose lines start with ``[name]`` and carry ``extra``, written to ``parent``.

    ``child_logger(log, "billing", tenant="acme").warning("late")`` writes
    ``[billing] late`` to ``log`` with ``tenant="acme"`` in the record's fields (a handler
    reads it as ``record.tenant``). A child of a child adds its name after its parent's
    (``[billing] [invoices] late``) and merges the fields, its own winning. Like the
    engine's own loggers, a child cleans secrets out of its lines.

    Args:
        parent: The logger to write to.
        name: What the lines are about: a component, a tenant, a job.
        extra: Fields added to every record.

    Returns:
        A ``logging.LoggerAdapter``.

    Raises:
        ConfigError: ``parent`` is not a logger, or ``name`` is empty.
    """
    check_logger(parent, "parent")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"expected a non-empty string, got {name!r}", field="name")
    if isinstance(parent, RedactingLogger):
        return parent.child(name, **extra)
    return RedactingLogger(parent, DEFAULT_REDACTION, extra, f"[{name}] ")


def check_logger(logger: object, field: str = "logger") -> Logger:
    """``logger`` itself when it is a ``logging.Logger`` or ``LoggerAdapter``.

    Raises:
        ConfigError: Naming ``field``, for anything else.
    """
    if not isinstance(logger, logging.Logger | logging.LoggerAdapter):
        raise ConfigError(
            f"expected a logging.Logger or logging.LoggerAdapter, got {logger!r}", field=field
        )
    return logger
