"""Small helpers shared by the strategies: reading stored cursors and reporting bad ones."""

from __future__ import annotations

from typing import Any

from watukuy.model.errors import ConfigError
from watukuy.model.json import loads

__all__ = ["load_stored", "stored_cursor_error"]


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


def stored_cursor_error(kind: str, text: str, expected: str) -> ConfigError:
    """The error for a persisted cursor that does not fit the poller's strategy.

    This happens when a poller's cursor strategy changes while its state is kept; the way
    out is ``reset_cursor()``.
    """
    return ConfigError(
        f"the stored {kind} cursor {_short(text)!r} does not look like {expected}; if the "
        "poller's cursor strategy changed, reset it with reset_cursor()",
        field="cursor",
    )


def load_stored(kind: str, text: str, expected: str) -> Any:
    """Parse persisted cursor JSON, turning a decoding failure into a clear ``ConfigError``."""
    try:
        return loads(text)
    except ValueError as error:
        raise stored_cursor_error(kind, text, expected) from error
