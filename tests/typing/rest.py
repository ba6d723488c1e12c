"""Never executed: type-checked with mypy --strict and pyright --strict to pin that the
built-in paginators and auth kinds of ``watukuy.rest`` are what ``define_rest_poller``
takes, as a reader of docs/rest.md writes them.
"""

from __future__ import annotations

from typing import Any, assert_type

import watukuy as wk
from watukuy import rest

PAGINATORS: list[rest.Paginator] = [
    rest.LinkHeader(),
    rest.NextUrl(path="next"),
    rest.CursorParam(path="response_metadata.next_cursor", param="cursor"),
    rest.StartingAfter(limit=100),
    rest.OffsetLimit(limit=100, total="total"),
    rest.PageNumber(end="not_found"),
    rest.Keyset(since_param="updated_since", after_param="after_id"),
]
AUTHS: list[rest.Auth] = [
    rest.Bearer(token=rest.Env("TOKEN")),
    rest.ApiKey(name="X-Api-Key", value="key"),
    rest.Basic(username="user", password=rest.Env("PASSWORD")),
    rest.OAuth2ClientCredentials(
        token_url="https://auth.example/oauth/token", client_id="id", client_secret="secret"
    ),
]


def per_partition(partition: wk.Partition) -> str:
    return f"token-{partition.key}"


for paginator in PAGINATORS:
    poller = rest.define_rest_poller(
        name="items",
        request=rest.Request(url="https://api.example/items", params={"limit": 100}),
        items="data",
        identity="id",
        version="updated_at",
        paginator=paginator,
        auth=rest.Bearer(token=per_partition),
        reconcile=rest.Listing(every="6h", paginator=rest.NextUrl()),
        schedule=wk.Schedule(min="1m", max="15m"),
    )
    assert_type(poller, wk.PollerDefinition[Any])
