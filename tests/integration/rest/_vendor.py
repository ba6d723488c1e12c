"""A small real HTTP vendor that lists one table of items in every pagination style the
declarative paginators follow, served by the standard library on 127.0.0.1 in a thread.

Routes (``size`` items a page unless the request says otherwise; listings in id order):

* ``GET /link?page=N&per_page=K``: GitHub's ``Link: <...>; rel="next"`` header.
* ``GET /next?page=N``: Django REST Framework's ``{"next": url | null, "results": [...]}``
  (``next`` relative to the page).
* ``GET /cursor?cursor=T&limit=K``: Slack's ``{"items": [...], "meta": {"next_cursor": "..."}}``;
  a cursor in ``expired`` answers ``410 Gone``.
* ``POST /graphql`` with ``{"variables": {"after": T, "first": K}}``: a GraphQL connection
  (``data.items.nodes``, ``pageInfo.endCursor`` / ``hasNextPage``).
* ``GET /stripe?limit=K&starting_after=ID``: ``{"data": [...], "has_more": bool}``.
* ``GET /offset?offset=O&limit=K``: ``{"results": [...], "count": N}``.
* ``GET /pages?page=N&size=K``: ``{"items": [...], "total_pages": P, "more": bool}``; a page
  past the last answers ``404 {"detail": "Invalid page."}`` (``past_end = "empty"``: an
  empty list instead).
* ``GET /keyset?updated_since=T&after_id=ID&limit=K``: ``{"data": [...]}`` in
  ``(updated_at, id)`` order, the items after ``(T, ID)``.

With ``etags`` on, ``GET`` answers carry an ``ETag`` and a matching ``If-None-Match`` is
answered ``304``. Every route answers ``401`` unless the ``Authorization`` header is ``Bearer <token>`` when
``token`` is set.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit


def stamp(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}.000Z"


class Vendor(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, size: int = 3) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.size = size
        self.items: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.log: list[str] = []
        """Every request's path and query (``/pages?page=2&size=3``), in arrival order."""
        self.past_end = "not_found"
        self.token: str | None = None
        self.etags = False
        """Answer ``GET`` with an ``ETag``, and ``304`` to a matching ``If-None-Match``."""
        self.expired: set[str] = set()
        """Cursors that ``/cursor`` answers ``410 Gone``."""
        self.statuses: list[int] = []
        """The status of every answer, in order."""

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def put(self, identity: str, second: int = 0) -> None:
        """Create or update an item (its version grows by one)."""
        with self.lock:
            old = self.items.get(identity)
            version = 1 if old is None else old["version"] + 1
            self.items[identity] = {"id": identity, "updated_at": stamp(second), "version": version}

    def delete(self, identity: str) -> None:
        with self.lock:
            del self.items[identity]

    def requests(self, path: str) -> list[str]:
        return [line for line in self.log if line.split("?")[0] == path]

    def by_id(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(self.items[key]) for key in sorted(self.items)]

    def by_stamp(self) -> list[dict[str, Any]]:
        with self.lock:
            rows = [dict(row) for row in self.items.values()]
        return sorted(rows, key=lambda row: (row["updated_at"], row["id"]))


def _after(rows: list[dict[str, Any]], last: str | None) -> list[dict[str, Any]]:
    return rows if not last else [row for row in rows if row["id"] > last]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Vendor

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        headers = dict(headers or {})
        if self.server.etags and self.command == "GET" and status == 200:
            tag = f'"{hashlib.sha256(payload).hexdigest()[:16]}"'
            headers["ETag"] = tag
            if self.headers.get("if-none-match") == tag:
                self.server.statuses.append(304)
                self.send_response(304)
                self.send_header("ETag", tag)
                self.send_header("content-length", "0")
                self.end_headers()
                return
        self.server.statuses.append(status)
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _query(self) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.path)
        return parts.path, {key: values[-1] for key, values in parse_qs(parts.query).items()}

    def _allowed(self) -> bool:
        token = self.server.token
        if token is None or self.headers.get("authorization") == f"Bearer {token}":
            return True
        self._send(401, {"detail": "Authentication credentials were not provided."})
        return False

    def do_GET(self) -> None:
        self.server.log.append(self.path)
        if not self._allowed():
            return
        path, query = self._query()
        size = int(query.get("per_page") or query.get("limit") or query.get("size") or 0)
        size = size or self.server.size
        route = getattr(self, f"_get_{path.strip('/')}", None)
        if route is None:
            self._send(404, {"detail": "Not found."})
            return
        route(query, size)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        self.server.log.append(self.path)
        if not self._allowed():
            return
        variables = request.get("variables") or {}
        rows = _after(self.server.by_id(), variables.get("after"))
        first = int(variables.get("first") or self.server.size)
        page, more = rows[:first], len(rows) > first
        info = {"endCursor": page[-1]["id"] if page else None, "hasNextPage": more}
        self._send(200, {"data": {"items": {"nodes": page, "pageInfo": info}}})

    def _numbered(self, query: dict[str, str], size: int) -> tuple[list[Any], int, int]:
        rows = self.server.by_id()
        number = int(query.get("page", "1"))
        pages = max(1, -(-len(rows) // size))
        return rows[(number - 1) * size : number * size], number, pages

    def _get_link(self, query: dict[str, str], size: int) -> None:
        page, number, pages = self._numbered(query, size)
        base = f"{self.server.url}/link?per_page={size}"
        links = [f'<{base}&page={pages}>; rel="last"']
        if number < pages:
            links.insert(0, f'<{base}&page={number + 1}>; rel="next"')
        self._send(200, page, {"Link": ", ".join(links)})

    def _get_next(self, query: dict[str, str], size: int) -> None:
        page, number, pages = self._numbered(query, size)
        following = f"/next?page={number + 1}" if number < pages else None
        self._send(200, {"next": following, "results": page})

    def _get_cursor(self, query: dict[str, str], size: int) -> None:
        if query.get("cursor") in self.server.expired:
            self._send(410, {"error": "cursor expired"})
            return
        rows = _after(self.server.by_id(), query.get("cursor"))
        page = rows[:size]
        following = page[-1]["id"] if len(rows) > size else ""
        self._send(200, {"items": page, "meta": {"next_cursor": following}})

    def _get_stripe(self, query: dict[str, str], size: int) -> None:
        rows = _after(self.server.by_id(), query.get("starting_after"))
        self._send(200, {"data": rows[:size], "has_more": len(rows) > size})

    def _get_offset(self, query: dict[str, str], size: int) -> None:
        rows = self.server.by_id()
        offset = int(query.get("offset", "0"))
        self._send(200, {"results": rows[offset : offset + size], "count": len(rows)})

    def _get_pages(self, query: dict[str, str], size: int) -> None:
        page, number, pages = self._numbered(query, size)
        if number > pages and self.server.past_end == "not_found":
            self._send(404, {"detail": "Invalid page."})
            return
        self._send(200, {"items": page, "total_pages": pages, "more": number < pages})

    def _get_keyset(self, query: dict[str, str], size: int) -> None:
        rows = self.server.by_stamp()
        since, after = query.get("updated_since"), query.get("after_id")
        if since is not None:
            rows = [
                row
                for row in rows
                if row["updated_at"] > since
                or (row["updated_at"] == since and (after is None or row["id"] > after))
            ]
        self._send(200, {"data": rows[:size]})


@contextmanager
def serving(size: int = 3) -> Iterator[Vendor]:
    vendor = Vendor(size)
    # A short poll interval: shutdown() waits for it, once per test.
    thread = threading.Thread(
        target=vendor.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield vendor
    finally:
        vendor.shutdown()
        vendor.server_close()
