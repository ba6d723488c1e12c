"""Deprecated alias of :mod:`watukuy.model.events` (see :mod:`watukuy.core`); goes in 1.0."""

from __future__ import annotations

from watukuy.model.events import *  # noqa: F403
from watukuy.model.events import __all__ as __all__

from . import warn_moved

warn_moved(__name__, "watukuy.model.events")
