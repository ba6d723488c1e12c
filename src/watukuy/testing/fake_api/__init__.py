"""A scriptable vendor API: a dataset per tenant, served in process or over real HTTP.

:class:`FakeApi` holds items (plain JSON objects with a string ``id`` and an
``updated_at``), changes them on command, and serves them the way pull-only vendor APIs
do: keyset, page-number and opaque-token listings. It can fail on cue (error statuses with
``Retry-After`` or Problem Details, dropped connections, timeouts, broken JSON), enforce a
rate limit with any of the common header families, answer ``304`` to conditional requests,
and add latency measured on its injected clock, so tests on a ``VirtualClock`` stay
instant. Every request is counted and logged with the ``x-client-id`` of its sender.

Three ways in:

- **Directly**: ``api.list_since(...)``, ``list_page``, ``list_token``, ``list_all`` from a
  poller's ``fetch``; they count, log and fail like requests.
- **In process over httpx**: ``httpx.AsyncClient(transport=api.transport(),
  base_url=api.base_url)`` (default base URL ``https://fake.api``).
- **Real HTTP**: ``server = await api.serve()`` in the running loop, or a separate process
  with ``python -m watukuy.testing.fake_api --port 8080 --items 20 --tenants 3 --latency
  50ms``, which prints its URL on the first line of stdout and serves until stopped.
  :class:`FakeApiClient` drives such a server from another process or thread.

Routes (relative to the base URL; tenant ``name`` is addressed with the prefix
``/t/{name}``, the default tenant ``""`` without one)::

    GET /items?since=&after_id=&limit=    {"data": [...], "has_more": bool}
    GET /items/page?page=&page_size=      {"data": [...], "page": n, "pages": n, "has_more": bool}
    GET /items/token?cursor=&limit=       {"data": [...], "next": "<token>" | null}
    GET /items/all                        {"data": [...]}
    GET /items/{id}                       the item, or 404

``/items`` is the keyset listing of :meth:`FakeApi.list_since` (sorted by
``(updated_at, id)``); the other listings are ordered by id. Ids ``page``, ``token`` and
``all`` cannot be fetched one by one. Unknown paths and tenants are ``404``, other methods
than ``GET`` on a route ``405``, bad parameters ``400``: all as RFC 9457 Problem Details
(``application/problem+json``). The served server also answers the control API under
``/_control/`` (``POST add``, ``update``, ``remove``, ``seed``, ``clear``, ``fail_next``,
``clear_faults``, ``set_latency``, ``set_rate_limit``, ``set_etags``,
``set_last_modified``, ``reset_stats`` with JSON bodies; ``GET items``, ``item``,
``size``, ``tenants``, ``log?after=&limit=``, ``stats``), which is never counted, logged,
faulted, delayed or rate limited.

Example::

    clock = VirtualClock()
    api = FakeApi(clock, items=fake_items(3))
    api.fail_next(429, retry_after=5)
    async with httpx.AsyncClient(transport=api.transport(), base_url=api.base_url) as http:
        first = await http.get("/items")        # 429, Retry-After: 5
        second = await http.get("/items")       # 200, the three items
"""

from __future__ import annotations

from ._api import FakeApi
from ._client import FakeApiClient, FakeTenantClient
from ._faults import Fault, FaultKind, RateLimitScope, RateLimitStyle, ResetFormat, RetryAfter
from ._items import PageResult, SinceResult, TokenResult, fake_items
from ._protocol import RequestRecord
from ._server import FakeServer
from ._tenant import FakeTenant

__all__ = [
    "FakeApi",
    "FakeApiClient",
    "FakeServer",
    "FakeTenant",
    "FakeTenantClient",
    "Fault",
    "FaultKind",
    "PageResult",
    "RateLimitScope",
    "RateLimitStyle",
    "RequestRecord",
    "ResetFormat",
    "RetryAfter",
    "SinceResult",
    "TokenResult",
    "fake_items",
]
