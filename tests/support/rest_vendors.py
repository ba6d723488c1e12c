"""Vendor APIs on real sockets for declarative REST pollers: each a small HTTP/1.1 server on
a free port of 127.0.0.1, served by a thread, over an item table that tests change between
cycles.

Every vendor is started with ``with Vendor(...) as api:`` (or ``start()`` / ``stop()``)
and has:

* ``base_url``: ``http://127.0.0.1:<port>``;
* ``add(**fields)``, ``update(id, **fields)``, ``delete(id)``: change the table. An item
  has an ``id`` (given, or the next one), an ``updated_at`` stamped at each change from a
  clock of the vendor's own that moves one second per change (so timestamps are distinct
  and increase), and the fields given; ``items`` is a copy of the table;
* ``requests`` (the requests its API answered, token requests apart) and ``targets`` (the
  path and query of each, in arrival order);
* ``token``: when set (a constructor keyword), the API answers ``401`` to a request without
  ``Authorization: Bearer <token>``.

The vendors:

* :class:`LinkVendor`, GitHub's style. ``GET /items`` (or the ``path`` given) answers a
  JSON array; ``per_page`` (default 30, at most 100) and ``page`` (from 1) page it, and an
  RFC 8288 ``Link`` header gives ``rel="next"`` and ``rel="last"`` (``rel="first"`` and
  ``rel="prev"`` past page 1) with the request's other parameters kept. ``since`` keeps
  the items updated at or after it; ``sort`` is ``id`` (default), ``created`` (the same
  order) or ``updated``, ``direction`` ``asc`` (default) or ``desc``. A page past the last
  is an empty array. Ids are integers.
* :class:`StripeVendor`, Stripe's style. ``GET /v1/items`` answers ``{"object": "list",
  "url": "/v1/items", "data": [...], "has_more": bool}``; ``limit`` (default 10, 1 to 100)
  and ``starting_after`` (an id: the items after it in the list's order) page it. Lists
  are sorted by id, newest first (``order="desc"``, as Stripe lists) or oldest first
  (``order="asc"``). Ids are ``"it_000001"``, ... (sorting as created); a
  ``starting_after`` naming a deleted id still pages from where it stood.
* :class:`OAuthVendor`, an OAuth2 client-credentials server. ``POST /oauth/token``
  (``grant_type=client_credentials``, the client authenticated by an ``Authorization:
  Basic`` header or by ``client_id`` and ``client_secret`` in the form) issues tokens that
  expire after ``token_ttl`` seconds (``expires_in`` says ``announced_ttl``, by default the
  same; ``omit_expires_in`` leaves it out). A wrong client gets ``401 {"error":
  "invalid_client"}``, another grant ``400 {"error": "unsupported_grant_type"}``;
  ``token_failure = (status, content_type, body)`` makes the endpoint answer that instead
  (with the headers in ``token_failure_headers``).
  ``token_requests`` counts the token requests, ``token_log`` records each (client id,
  how it authenticated, the form without the secret) and ``tokens_issued`` lists the
  tokens given out; ``revoke_tokens()`` makes every token
  issued so far unknown. ``GET /items`` answers ``{"data": [...], "has_more": bool}``
  (``page`` from 1, ``per_page`` default 10) to a live token, ``401`` with
  ``WWW-Authenticate: Bearer error="invalid_token"`` to a missing, unknown or expired one;
  ``api_clients`` lists the client whose token each answered request carried.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

__all__ = ["LinkVendor", "OAuthVendor", "StripeVendor", "VendorServer"]

Answer = tuple[int, dict[str, str], bytes]
"""A status, headers and a body."""

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return (
        status,
        {"content-type": "application/json", **(headers or {})},
        json.dumps(body).encode(),
    )


def _int(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int | None:
    try:
        value = int(query.get(name, default))
    except ValueError:
        return None
    return value if low <= value <= high else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5  # idle kept-alive connections end, and their threads with them
    server: _Server

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            status, extra, payload = self.server.vendor.answer(
                self.command, self.path, headers, body
            )
        except Exception as error:  # a bug in a vendor shows as a 500, not a hung test
            status, extra, payload = _json(500, {"error": repr(error)})
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, vendor: VendorServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.vendor = vendor


class VendorServer:
    """What every vendor shares: the server thread, the item table and the counters.

    Args:
        token: When set, the API asks for ``Authorization: Bearer <token>``.
    """

    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.requests = 0
        self.targets: list[str] = []
        self._table: dict[Any, dict[str, Any]] = {}
        self._changes = 0
        self._next_id = 1
        self._lock = threading.RLock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> VendorServer:
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=type(self).__name__,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the vendor first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # --- the table ------------------------------------------------------------------------

    def _new_id(self) -> Any:
        return self._next_id

    def _stamp(self) -> str:
        self._changes += 1
        moment = _EPOCH + timedelta(seconds=self._changes)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def add(self, **fields: Any) -> dict[str, Any]:
        """A new item (the next id unless ``id`` is given); returns a copy."""
        with self._lock:
            item_id = fields.pop("id", None)
            if item_id is None:
                item_id = self._new_id()
            self._next_id += 1
            item = {"id": item_id, "updated_at": self._stamp(), **fields}
            self._table[item_id] = item
            return dict(item)

    def update(self, item_id: Any, **fields: Any) -> dict[str, Any]:
        """Change an item's fields and stamp its ``updated_at``; returns a copy."""
        with self._lock:
            item = self._table[item_id]
            item.update(fields, updated_at=self._stamp())
            return dict(item)

    def delete(self, item_id: Any) -> None:
        """Remove an item."""
        with self._lock:
            del self._table[item_id]

    @property
    def items(self) -> list[dict[str, Any]]:
        """A copy of the table, by id."""
        with self._lock:
            return [dict(self._table[key]) for key in sorted(self._table)]

    # --- requests -------------------------------------------------------------------------

    def answer(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        """The answer to one request (called on the server's threads)."""
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        with self._lock:
            special = self._special(method, parts.path, headers, body)
            if special is not None:
                return special
            self.requests += 1
            self.targets.append(target)
            refused = self._refuse(headers)
            if refused is not None:
                return refused
            return self._route(method, parts.path, query)

    def _special(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Answer | None:
        return None

    def _refuse(self, headers: dict[str, str]) -> Answer | None:
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return _json(401, {"message": "Bad credentials"})
        return None

    def _route(self, method: str, path: str, query: dict[str, str]) -> Answer:
        return _json(404, {"message": "Not Found"})


class LinkVendor(VendorServer):
    """A GitHub-style listing at ``GET /items``, paged by ``Link`` headers.

    Args:
        path: Where the listing is (``/repos/octo-org/hello-world/issues``, as GitHub has it).
        token: When set, the API asks for ``Authorization: Bearer <token>``.
    """

    def __init__(self, *, path: str = "/items", token: str | None = None) -> None:
        super().__init__(token=token)
        self.path = path

    def _route(self, method: str, path: str, query: dict[str, str]) -> Answer:
        if (method, path) != ("GET", self.path):
            return _json(404, {"message": "Not Found"})
        per_page = _int(query, "per_page", 30, 1, 100)
        page = _int(query, "page", 1, 1, 1_000_000)
        sort, direction = query.get("sort", "id"), query.get("direction", "asc")
        if per_page is None or page is None or sort not in ("id", "created", "updated"):
            return _json(422, {"message": "Validation Failed"})
        if direction not in ("asc", "desc"):
            return _json(422, {"message": "Validation Failed"})
        field = "updated_at" if sort == "updated" else "id"  # ids grow as items are created
        rows = sorted(self._table.values(), key=lambda o: (o[field], o["id"]))
        if direction == "desc":
            rows.reverse()
        since = query.get("since")
        if since:
            rows = [o for o in rows if o["updated_at"] >= since]
        last = max(1, -(-len(rows) // per_page))
        shown = rows[(page - 1) * per_page : page * per_page]
        return _json(200, shown, {"link": self._link(query, page, last)})

    def _link(self, query: dict[str, str], page: int, last: int) -> str:
        def url(number: int) -> str:
            return f"{self.base_url}{self.path}?{urlencode({**query, 'page': number})}"

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(1)}>; rel="first"', f'<{url(min(page, last + 1) - 1)}>; rel="prev"']
        return ", ".join(links)


class StripeVendor(VendorServer):
    """A Stripe-style list at ``GET /v1/items``, paged by ``starting_after``.

    Args:
        order: ``"desc"`` (newest first, as Stripe lists) or ``"asc"``.
        token: See :class:`VendorServer`.
    """

    def __init__(self, *, order: Literal["asc", "desc"] = "desc", token: str | None = None):
        super().__init__(token=token)
        self.order = order

    def _new_id(self) -> Any:
        return f"it_{self._next_id:06d}"

    def _route(self, method: str, path: str, query: dict[str, str]) -> Answer:
        if (method, path) != ("GET", "/v1/items"):
            return _json(404, {"error": {"type": "invalid_request_error", "message": "no route"}})
        limit = _int(query, "limit", 10, 1, 100)
        if limit is None:
            return _json(400, {"error": {"type": "invalid_request_error", "param": "limit"}})
        descending = self.order == "desc"
        rows = sorted(self._table.values(), key=lambda o: o["id"], reverse=descending)
        after = query.get("starting_after")
        if after:
            rows = [o for o in rows if (o["id"] < after if descending else o["id"] > after)]
        data = rows[:limit]
        body = {"object": "list", "url": "/v1/items", "data": data, "has_more": len(rows) > limit}
        return _json(200, body)


class OAuthVendor(VendorServer):
    """An OAuth2 client-credentials server (``POST /oauth/token``) and an API behind it
    (``GET /items``).

    Args:
        clients: Client ids to their secrets.
        token_ttl: How long a token lives, in seconds.
        announced_ttl: What ``expires_in`` says (default: ``token_ttl``).
        omit_expires_in: Leave ``expires_in`` out of the token response.
    """

    def __init__(
        self,
        clients: Mapping[str, str],
        *,
        token_ttl: float = 2.0,
        announced_ttl: float | None = None,
        omit_expires_in: bool = False,
    ) -> None:
        super().__init__()
        self.clients = dict(clients)
        self.token_ttl = token_ttl
        self.announced_ttl = announced_ttl
        self.omit_expires_in = omit_expires_in
        self.token_failure: tuple[int, str, bytes] | None = None
        self.token_failure_headers: dict[str, str] = {}
        self.token_requests = 0
        self.token_log: list[dict[str, Any]] = []
        self.api_clients: list[str] = []
        self.tokens_issued: list[str] = []
        self._issued: dict[str, tuple[str, float]] = {}

    def revoke_tokens(self) -> None:
        """Forget every token issued so far: the API answers ``401`` to them."""
        with self._lock:
            self._issued.clear()

    def _special(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Answer | None:
        if path != "/oauth/token":
            return None
        self.token_requests += 1
        if method != "POST":
            return _json(405, {"error": "invalid_request"})
        if self.token_failure is not None:
            status, kind, payload = self.token_failure
            return status, {"content-type": kind, **self.token_failure_headers}, payload
        form = dict(parse_qsl(body.decode(), keep_blank_values=True))
        client_id, secret, how = self._client(headers, form)
        self.token_log.append(
            {
                "client_id": client_id,
                "client_auth": how,
                "form": {k: v for k, v in form.items() if k != "client_secret"},
            }
        )
        if form.get("grant_type") != "client_credentials":
            return _json(400, {"error": "unsupported_grant_type"})
        if client_id is None or self.clients.get(client_id) != secret:
            return _json(
                401,
                {"error": "invalid_client", "error_description": "client authentication failed"},
                {"www-authenticate": 'Basic realm="oauth"'},
            )
        token = secrets.token_urlsafe(16)
        self._issued[token] = (client_id, time.monotonic() + self.token_ttl)
        self.tokens_issued.append(token)
        answer: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
        if not self.omit_expires_in:
            ttl = self.token_ttl if self.announced_ttl is None else self.announced_ttl
            answer["expires_in"] = int(ttl) if float(ttl).is_integer() else ttl
        return _json(200, answer, {"cache-control": "no-store"})

    @staticmethod
    def _client(
        headers: dict[str, str], form: dict[str, str]
    ) -> tuple[str | None, str | None, str]:
        authorization = headers.get("authorization", "")
        if authorization[:6].lower() == "basic ":
            pair = base64.b64decode(authorization[6:]).decode()
            client_id, _, secret = pair.partition(":")
            return unquote(client_id), unquote(secret), "basic"
        return form.get("client_id"), form.get("client_secret"), "body"

    def _refuse(self, headers: dict[str, str]) -> Answer | None:
        authorization = headers.get("authorization", "")
        token = authorization[7:] if authorization[:7].lower() == "bearer " else None
        issued = self._issued.get(token or "")
        if issued is None or issued[1] <= time.monotonic():
            return _json(
                401,
                {"error": "invalid_token"},
                {"www-authenticate": 'Bearer error="invalid_token"'},
            )
        self.api_clients.append(issued[0])
        return None

    def _route(self, method: str, path: str, query: dict[str, str]) -> Answer:
        if (method, path) != ("GET", "/items"):
            return _json(404, {"error": "not_found"})
        page = _int(query, "page", 1, 1, 1_000_000)
        per_page = _int(query, "per_page", 10, 1, 100)
        if page is None or per_page is None:
            return _json(400, {"error": "invalid_request"})
        rows = sorted(self._table.values(), key=lambda o: o["id"])
        data = rows[(page - 1) * per_page : page * per_page]
        return _json(200, {"data": data, "has_more": len(rows) > page * per_page})
