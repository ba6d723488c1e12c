"""Declarative REST pollers: describe an endpoint, its paginator and its auth as data, and
get a :class:`~watukuy.PollerDefinition` whose ``fetch`` is written for you::

    from watukuy import rest

    issues = rest.define_rest_poller(
        name="issues",
        request=rest.Request(
            url="https://api.github.com/repos/{partition}/issues",
            params={"state": "all", "per_page": 100},
        ),
        identity="id",
        version="updated_at",
        paginator=rest.LinkHeader(),
    )

Every request goes through ``ctx.http``, so budgets, ``Retry-After``, rate-limit pacing,
redaction and redirect rules hold as for a hand-written ``fetch``.
"""

from __future__ import annotations

from ._auth import AUTHS, ApiKey, Basic, Bearer
from ._auth_port import Auth
from ._build import Mode, define_rest_poller
from ._call import Call
from ._config import Config, engine_from_toml, load_config
from ._describe import FieldSpec, ItemsSpec, Listing, Request
from ._oauth2 import OAuth2ClientCredentials
from ._paginate import (
    PAGINATORS,
    CursorParam,
    Keyset,
    LinkHeader,
    NextUrl,
    OffsetLimit,
    PageNumber,
    StartingAfter,
)
from ._paging import Kind, Paginator, Position, Reply, Step
from ._secret import Env, Secret

__all__ = [
    "AUTHS",
    "PAGINATORS",
    "ApiKey",
    "Auth",
    "Basic",
    "Bearer",
    "Call",
    "Config",
    "CursorParam",
    "Env",
    "FieldSpec",
    "ItemsSpec",
    "Keyset",
    "Kind",
    "LinkHeader",
    "Listing",
    "Mode",
    "NextUrl",
    "OAuth2ClientCredentials",
    "OffsetLimit",
    "PageNumber",
    "Paginator",
    "Position",
    "Reply",
    "Request",
    "Secret",
    "StartingAfter",
    "Step",
    "define_rest_poller",
    "engine_from_toml",
    "load_config",
]
