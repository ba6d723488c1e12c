"""Declarative REST pollers: describe an endpoint, its paginator and its auth as data, and
get a :class:`~watukuy.PollerDefinition` whose ``fetch`` is written for you.

This package is being built; its public names are listed in ``__all__`` as they land.
"""

from __future__ import annotations

from ._auth import AUTHS, ApiKey, Basic, Bearer
from ._auth_port import Auth
from ._call import Call
from ._oauth2 import OAuth2ClientCredentials
from ._secret import Env, Secret

__all__ = [
    "AUTHS",
    "ApiKey",
    "Auth",
    "Basic",
    "Bearer",
    "Call",
    "Env",
    "OAuth2ClientCredentials",
    "Secret",
]
