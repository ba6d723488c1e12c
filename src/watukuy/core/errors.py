"""Deprecated alias of :mod:`watukuy.model.errors` (see :mod:`watukuy.core`); goes in 1.0.

``serialize_error`` lived here too: it is ``watukuy.serialize_error`` now.
"""

from __future__ import annotations

from watukuy.model.errors import *  # noqa: F403
from watukuy.model.errors import __all__ as _moved
from watukuy.model.redact import serialize_error

from . import warn_moved

__all__ = [*_moved, "serialize_error"]

warn_moved(__name__, "watukuy.model.errors (serialize_error: watukuy.serialize_error)")
