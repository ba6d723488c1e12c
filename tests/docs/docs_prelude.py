"""What the Python blocks of the docs assume without writing it.

A block imports from here exactly the names it uses and does not define (see
``docs_blocks.module_source``). The vendor is a :class:`~watukuy.testing.FakeApi` in process
(``https://fake.api``, five items, tenants ``t_41`` and ``t_42``); the store is a SQLite
file in the working directory; ``engine`` has the pollers the docs talk about (``orders``,
``invoices`` partitioned by tenant, ``catalog`` as a snapshot) and no handler yet, so a
block may attach its own. ``vendor_http`` answers for ``https://vendor.example``, the other
APIs of docs/recipes.md (GraphQL, lines without ids, epoch timestamps, per-tenant tokens)
and of docs/cursors.md (Django REST Framework's page-number and cursor paginations); it also
answers, for docs/rest.md, as ``api.github.com`` (issues), ``api.stripe.com`` (charges) and
``slack.com`` (``conversations.list``) answer, with the tokens ``ENVIRONMENT`` holds.
The other names stand in for the reader's own code (a queue client, a Kafka producer, a
warehouse, a pager) with the smallest thing that behaves like it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

import watukuy as wk
from watukuy.testing import FakeApi, fake_items

__all__ = [
    "SECRET",
    "Tenant",
    "api",
    "apply_change",
    "audit_log",
    "catalog",
    "downstream",
    "engine",
    "fetch_catalog",
    "fetch_invoices",
    "fetch_orders",
    "handle",
    "interval_gauge",
    "invoices",
    "legacy_client",
    "log",
    "on_order",
    "operator",
    "orders",
    "pager",
    "producer",
    "vendor_http",
    "process",
    "seen_before",
    "send_to_queue",
    "stop_requested",
    "store",
    "tenants_db",
    "tenants_table",
    "vendor_sdk",
    "warehouse",
]

# Changed in the last minute, so a health check's lag is small.
_RECENT = int(time.time() * 1000) - 60_000
_ITEMS = [
    {**item, "customer_id": f"cus_{n % 2}"}
    for n, item in enumerate(fake_items(5, start=_RECENT), 1)
]
api = FakeApi(items=_ITEMS, tenants={"t_41": fake_items(2), "t_42": fake_items(3)})

# A "whsec_<base64>" secret, as Standard Webhooks libraries expect it.
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@dataclass(frozen=True)
class Tenant:
    slug: str
    token: str


async def fetch_orders(ctx: wk.FetchContext[wk.TimestampPosition]) -> wk.Page[Any]:
    response = await ctx.http.get(
        "https://fake.api/items",
        params={"since": ctx.cursor.value, "after_id": ctx.cursor.tie_break, "limit": 100},
    )
    body = response.json()
    return wk.Page(items=body["data"], has_more=body["has_more"])


orders = wk.define_poller(
    name="orders",
    identity=lambda order: order["id"],
    version=lambda order: order["version"],
    cursor=wk.TimestampCursor(field="updated_at", tie_break="id"),
    fetch=fetch_orders,
    log=wk.EventLog(retention="7d"),
)


def _tenants() -> list[wk.Partition]:
    return [
        wk.Partition(key=name, data=Tenant(name, f"token-{name}")) for name in api.tenants() if name
    ]


async def fetch_invoices(ctx: wk.FetchContext[wk.TokenPosition]) -> wk.Page[Any]:
    tenant: Tenant | None = ctx.partition.data
    prefix = "" if tenant is None else f"/t/{tenant.slug}"
    response = await ctx.http.get(
        f"https://fake.api{prefix}/items/token",
        params={"cursor": ctx.cursor.value},
        headers={} if tenant is None else {"authorization": f"Bearer {tenant.token}"},
    )
    body = response.json()
    return wk.Page(items=body["data"], cursor=body["next"])


invoices = wk.define_poller(
    name="invoices",
    partitions=_tenants,
    identity=lambda invoice: invoice["id"],
    version=lambda invoice: invoice["version"],
    cursor=wk.TokenCursor(),
    fetch=fetch_invoices,
    log=wk.EventLog(retention="7d"),
)


async def fetch_catalog(ctx: wk.FetchContext[None]) -> wk.Page[Any]:
    response = await ctx.http.get("https://fake.api/items/all")
    return wk.Page(items=response.json()["data"])


catalog = wk.define_poller(
    name="catalog",
    identity=lambda product: product["id"],
    cursor=wk.SnapshotDiff(),
    fetch=fetch_catalog,
)

store = wk.SqliteStore("docs-prelude.db")
engine = wk.Engine(
    store=store,
    pollers=[orders, invoices, catalog],
    http_client=httpx.AsyncClient(transport=api.transport()),
)

log = logging.getLogger("myapp")


async def on_order(event: wk.Event[wk.JsonObject], ctx: wk.HandlerContext) -> None:
    ctx.logger.info("%s %s", event.type, event.subject)


async def handle(event: wk.Event[Any]) -> None:
    log.info("handled %s", event.id)


async def operator(authorization: str = "") -> None:
    """A FastAPI dependency that lets everyone in (the docs show a real one)."""


@dataclass
class _Recorder:
    """Keeps what it is given: a queue, a warehouse, a pager, an audit log."""

    calls: list[Any] = field(default_factory=list[Any])

    def push(self, message: Mapping[str, Any]) -> None:
        self.calls.append(message)

    async def try_enqueue(self, message: Mapping[str, Any]) -> bool:
        self.calls.append(message)
        return True

    async def upsert(self, **row: Any) -> None:
        self.calls.append(row)

    async def send(self, text: str) -> None:
        self.calls.append(text)

    async def put(self, *, key: str, body: bytes, content_type: str) -> None:
        self.calls.append((key, body, content_type))


legacy_client = downstream = warehouse = pager = audit_log = _Recorder()


async def send_to_queue(message: Mapping[str, Any]) -> None:
    downstream.calls.append(message)


def apply_change(db: sqlite3.Connection, event: wk.Event[Any]) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS changes (subject TEXT, type TEXT)")
    db.execute("INSERT INTO changes VALUES (?, ?)", (event.subject, event.type))


_seen: set[str] = set()


async def seen_before(webhook_id: str) -> bool:
    if webhook_id in _seen:
        return True
    _seen.add(webhook_id)
    return False


async def process(payload: Any) -> None:
    log.info("received %s", payload)


class _Gauge:
    def labels(self, *values: str) -> _Gauge:
        return self

    def set(self, value: float) -> None:
        pass


interval_gauge = _Gauge()


class _Rows:
    async def fetch(self, sql: str) -> list[dict[str, Any]]:
        return [{"id": "t_42", "slug": "acme", "api_token": "token-acme"}]


tenants_db = _Rows()


@dataclass(frozen=True)
class _Charge:
    id: str
    amount: int


@dataclass(frozen=True)
class _ChargePage:
    data: list[_Charge]
    has_more: bool


class _Charges:
    async def list(self, starting_after: str | None, limit: int) -> _ChargePage:
        return _ChargePage([_Charge("ch_1", 100)], has_more=False)


@dataclass(frozen=True)
class _VendorSdk:
    charges: _Charges


vendor_sdk = _VendorSdk(_Charges())


class _SoonSet:
    """An ``asyncio.Event`` someone sets a moment later (a signal handler, in real life)."""

    async def wait(self) -> bool:
        await asyncio.sleep(0.2)
        return True


stop_requested = _SoonSet()


class _RecordingProducer:
    """Stands in for a started ``aiokafka.AIOKafkaProducer``: keeps what it is sent."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        self.records.append({"topic": topic, "key": key, "value": value, "headers": headers})


producer = _RecordingProducer()


# --- https://vendor.example: the other APIs the recipes talk to ------------------------------

_ORDERS = [{"id": f"ord_{n}", "status": "open", "version": 1} for n in range(1, 8)]
# Order lines: no id of their own; an order number and a line number name one.
_LINES = [
    {"order_no": f"A-{order}", "line_no": line, "sku": f"sku-{order}{line}", "qty": line}
    for order in (1, 2)
    for line in (1, 2, 3)
]
# Changes stamped in epoch seconds.
_CHANGES: list[dict[str, Any]] = [
    {"id": f"chg_{n}", "modified": 1_767_225_600 + 60 * n, "amount": 10 * n} for n in range(1, 6)
]
# The token the vendor accepts for each tenant; a request with another one is a 401.
_ACCEPTED = {"acme": "tok-acme", "globex": "tok-globex", "initech": "tok-initech-rotated"}
# The reader's tenants table: initech's token there was revoked at the vendor.
tenants_table = [("acme", "tok-acme"), ("globex", "tok-globex"), ("initech", "tok-initech-old")]
_TENANT_INVOICES = {
    tenant: [{"id": f"{tenant}-inv-{n}", "etag": "1"} for n in range(1, 4)] for tenant in _ACCEPTED
}


def _graphql(request: httpx.Request) -> httpx.Response:
    variables = json.loads(request.content)["variables"]
    start = 0 if variables.get("after") is None else int(variables["after"]) + 1
    nodes = _ORDERS[start : start + int(variables["first"])]
    end = start + len(nodes) - 1
    info = {"endCursor": str(end) if nodes else None, "hasNextPage": end + 1 < len(_ORDERS)}
    return httpx.Response(200, json={"data": {"orders": {"nodes": nodes, "pageInfo": info}}})


def _drf_page_number(request: httpx.Request) -> httpx.Response:
    """Django REST Framework's ``PageNumberPagination``, three a page: ``404`` past the end."""
    number = int(request.url.params.get("page", "1"))
    pages = max(1, -(-len(_ORDERS) // 3))
    if number > pages:
        return httpx.Response(404, json={"detail": "Invalid page."})
    more = f"https://vendor.example/api/orders/?page={number + 1}" if number < pages else None
    chunk = _ORDERS[(number - 1) * 3 : number * 3]
    return httpx.Response(200, json={"count": len(_ORDERS), "next": more, "results": chunk})


def _drf_cursor(request: httpx.Request) -> httpx.Response:
    """Django REST Framework's ``CursorPagination``, three a page: ``next`` is a link with an
    opaque position, ``null`` on the last page."""
    raw = request.url.params.get("cursor")
    start = 0 if raw is None else int(raw.removeprefix("p"))
    end = min(start + 3, len(_ORDERS))
    more = f"https://vendor.example/api/changes/?cursor=p{end}" if end < len(_ORDERS) else None
    return httpx.Response(200, json={"next": more, "results": _ORDERS[start:end]})


# --- the public APIs of docs/rest.md, as their documentation describes them -------------------

_ISSUES = [
    {
        "id": 1000 + n,
        "number": n,
        "title": f"Issue {n}",
        "state": "open",
        "updated_at": f"2026-01-0{n}T12:00:00Z",
    }
    for n in range(1, 6)
]
# Stripe lists newest first: ch_5 is the latest charge.
_CHARGES = [
    {"id": f"ch_{n}", "object": "charge", "amount": 100 * n, "created": 1_767_225_600 + n}
    for n in range(5, 0, -1)
]
_CHANNELS = [{"id": f"C0{n}", "name": f"channel-{n}", "is_archived": False} for n in range(1, 5)]
_PRODUCTS = [{"sku": f"sku-{n}", "name": f"Product {n}", "price": 10 * n} for n in range(1, 8)]


def _unauthorized(request: httpx.Request, expected: str) -> bool:
    given: str | None = request.headers.get("authorization")
    return given != expected


def _github(request: httpx.Request) -> httpx.Response:
    """``GET /repos/{owner}/{repo}/issues``: ``per_page`` and ``page``, a ``Link`` header."""
    if _unauthorized(request, "Bearer gh-token-for-the-docs"):
        return httpx.Response(401, json={"message": "Bad credentials"})
    size = int(request.url.params.get("per_page", "30"))
    number = int(request.url.params.get("page", "1"))
    last = max(1, -(-len(_ISSUES) // size))
    links: list[str] = []
    if number < last:
        links.append(f'<{request.url.copy_merge_params({"page": number + 1})}>; rel="next"')
        links.append(f'<{request.url.copy_merge_params({"page": last})}>; rel="last"')
    headers = {"link": ", ".join(links)} if links else {}
    chunk = _ISSUES[(number - 1) * size : number * size]
    return httpx.Response(200, json=chunk, headers=headers)


def _stripe(request: httpx.Request) -> httpx.Response:
    """``GET /v1/charges``: ``limit`` and ``starting_after``, ``{"data", "has_more"}``."""
    if _unauthorized(request, "Bearer sk_test_for_the_docs"):
        return httpx.Response(401, json={"error": {"type": "invalid_request_error"}})
    limit = int(request.url.params.get("limit", "10"))
    after = request.url.params.get("starting_after")
    ids = [charge["id"] for charge in _CHARGES]
    start = 0 if after is None else ids.index(after) + 1
    chunk = _CHARGES[start : start + limit]
    more = start + limit < len(_CHARGES)
    return httpx.Response(200, json={"object": "list", "data": chunk, "has_more": more})


def _slack(request: httpx.Request) -> httpx.Response:
    """``GET /api/conversations.list``: ``cursor`` and ``limit``; an empty ``next_cursor``
    on the last page."""
    if _unauthorized(request, "Bearer xoxb-token-for-the-docs"):
        return httpx.Response(200, json={"ok": False, "error": "invalid_auth"})
    limit = int(request.url.params.get("limit", "100"))
    start = int(request.url.params.get("cursor") or "0")
    chunk = _CHANNELS[start : start + limit]
    following = str(start + limit) if start + limit < len(_CHANNELS) else ""
    body = {"ok": True, "channels": chunk, "response_metadata": {"next_cursor": following}}
    return httpx.Response(200, json=body)


def _products(request: httpx.Request) -> httpx.Response:
    """``GET /api/products``: ``offset`` and ``limit``, ``{"items", "total"}``."""
    offset = int(request.url.params.get("offset", "0"))
    limit = int(request.url.params.get("limit", "20"))
    chunk = _PRODUCTS[offset : offset + limit]
    return httpx.Response(200, json={"items": chunk, "total": len(_PRODUCTS)})


_EVENTS = [{"id": f"evt_{n}", "kind": "order.paid"} for n in range(1, 6)]


def _events(request: httpx.Request) -> httpx.Response:
    """``GET /api/events``: two a page, the next page's cursor in ``X-Next-Cursor``."""
    start = int(request.url.params.get("cursor", "0"))
    following = start + 2
    headers = {"x-next-cursor": str(following)} if following < len(_EVENTS) else {}
    return httpx.Response(200, json={"events": _EVENTS[start:following]}, headers=headers)


def _vendor(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    host = request.url.host
    if path == "/api/events":
        return _events(request)
    if host == "api.github.com" and path.startswith("/repos/") and path.endswith("/issues"):
        return _github(request)
    if host == "api.stripe.com" and path == "/v1/charges":
        return _stripe(request)
    if host == "slack.com" and path == "/api/conversations.list":
        return _slack(request)
    if path == "/api/products":
        return _products(request)
    if request.method == "POST" and path == "/graphql":
        return _graphql(request)
    if path == "/api/orders/":
        return _drf_page_number(request)
    if path == "/api/changes/":
        return _drf_cursor(request)
    if path == "/lines":
        return httpx.Response(200, json={"lines": _LINES})
    if path == "/changes":
        since = int(request.url.params.get("modified_since", "0"))
        rows = [row for row in _CHANGES if int(row["modified"]) >= since]
        return httpx.Response(200, json=rows[: int(request.url.params.get("limit", "100"))])
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[1] == "invoices" and parts[0] in _ACCEPTED:
        if request.headers.get("authorization") != f"Bearer {_ACCEPTED[parts[0]]}":
            return httpx.Response(401, json={"error": "bad token"})
        return httpx.Response(200, json={"data": _TENANT_INVOICES[parts[0]], "next": None})
    return httpx.Response(404, json={"error": f"no route {path}"})


vendor_http = httpx.AsyncClient(transport=httpx.MockTransport(_vendor))
