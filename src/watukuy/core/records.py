"""Deprecated alias of :mod:`watukuy.model.records` (see :mod:`watukuy.core`); goes in 1.0."""

from __future__ import annotations

from watukuy.model.records import *  # noqa: F403
from watukuy.model.records import __all__ as __all__

from . import warn_moved

warn_moved(__name__, "watukuy.model.records")
