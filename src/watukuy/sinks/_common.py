"""What every sink shares: the handler shape, the error for a refused event, lazy imports."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, TypeAlias

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError, HandlerError
from watukuy.model.events import Event
from watukuy.runtime.context import HandlerContext

__all__ = [
    "INSTALL_HINT",
    "Sink",
    "SinkError",
    "Target",
    "optional_seconds",
    "require",
    "resolve_target",
    "target_of",
]

INSTALL_HINT = "pip install 'watukuy[sinks]'"
"""Installs every broker client at once; each sink's message names its own extra."""

Sink: TypeAlias = Callable[[Event[Any], HandlerContext], Awaitable[None]]
"""A ready-made handler: ``engine.on("orders", sink)``."""

Target: TypeAlias = str | Callable[[Event[Any]], str]
"""A destination name (subject, routing key, stream), fixed or computed per event."""


class SinkError(HandlerError):
    """The destination refused an event (unroutable, rejected). The dispatcher retries it,
    then parks it, like any handler failure.

    Attributes:
        event_id: The event that was refused.
        attempt: The delivery attempt it was refused on.
    """


def require(module: str, extra: str = "sinks") -> ModuleType:
    """Import an optional client library, or explain how to install it.

    Args:
        module: The module to import.
        extra: The package extra that installs it (``"rabbitmq"``, ``"sqs"``, ...).

    Raises:
        ImportError: The library is missing; the message names the extra to install.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"this sink needs {module!r}: pip install 'watukuy[{extra}]'") from error


def target_of(value: object, field: str) -> Target:
    """Check a destination option: a non-empty string or a callable taking the event."""
    if callable(value):
        return value
    if isinstance(value, str) and value:
        return value
    raise ConfigError(
        f"expected a non-empty string or a callable (event) -> str, got {value!r}", field=field
    )


def resolve_target(target: Target, event: Event[Any], field: str) -> str:
    """The destination of one event; a computed one must be a non-empty string."""
    if isinstance(target, str):
        return target
    value = target(event)
    if not isinstance(value, str) or not value:
        # A bad computed name is a bug in the caller's function, not a transient failure,
        # but raising lets the dispatcher park the event with this message attached.
        raise ConfigError(
            f"expected the function to return a non-empty string, got {value!r}", field=field
        )
    return value


def optional_seconds(value: Duration | None, field: str) -> float | None:
    """A positive duration in seconds (what the client libraries take), or ``None``."""
    if value is None:
        return None
    ms = parse_duration(value, field)
    if ms <= 0:
        raise ConfigError(f"expected a positive duration, got {value!r}", field=field)
    return ms / 1000
