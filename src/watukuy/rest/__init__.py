"""Declarative REST pollers: describe an endpoint, its paginator and its auth as data, and
get a :class:`~watukuy.PollerDefinition` whose ``fetch`` is written for you.

This package is being built; its public names are listed in ``__all__`` as they land.
"""

from __future__ import annotations

from ._call import Call
from ._config import Config, engine_from_toml, load_config

__all__ = ["Call", "Config", "engine_from_toml", "load_config"]
