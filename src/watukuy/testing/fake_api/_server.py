"""The real-HTTP face: a small HTTP/1.1 server on asyncio streams.

It speaks just enough HTTP for clients like httpx: keep-alive connections, bodies framed by
``Content-Length`` (chunked request bodies are refused with 501), ``HEAD`` without a body.
A scripted ``network`` fault aborts the connection; a ``timeout`` fault keeps it open and
silent until the client gives up or the server closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from http import HTTPStatus
from types import TracebackType
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from ._control import handle_control
from ._protocol import Request, Response, problem_response, split_path
from ._vendor import Vendor

__all__ = ["FakeServer"]

_MAX_HEADERS: Final = 100
_MAX_BODY: Final = 64 * 1024 * 1024
_LINE_LIMIT: Final = 1024 * 1024


class _BadRequest(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class FakeServer:
    """A running HTTP server for a :class:`~watukuy.testing.FakeApi`.

    Created by ``await api.serve()``. ``url`` is the API's base URL on this server
    (``http://127.0.0.1:<port>`` plus the base path of ``api.base_url``). Close it with
    ``await server.close()``, or use it as an async context manager.
    """

    def __init__(self, api: Vendor, *, control: bool = True) -> None:
        self._vendor = api
        self._control = control
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.url: str = ""
        """Base URL of the served API, e.g. ``http://127.0.0.1:54321``."""
        self.host: str = ""
        """The bound address."""
        self.port: int = 0
        """The bound TCP port."""

    async def start(self, host: str, port: int) -> None:
        """Bind and start accepting connections (``api.serve()`` calls this)."""
        self._server = await asyncio.start_server(self._connection, host, port, limit=_LINE_LIMIT)
        bound = self._server.sockets[0].getsockname()
        self.host, self.port = str(bound[0]), int(bound[1])
        shown = f"[{self.host}]" if ":" in self.host else self.host
        base = "".join("/" + part for part in self._vendor._base_segments)
        self.url = f"http://{shown}:{self.port}{base}"

    async def close(self) -> None:
        """Stop accepting, drop open connections and wait until everything has ended."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> FakeServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"FakeServer({self.url!r})"

    # --- connections ------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            # The server is closing or the client went away: nothing left to answer.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                parsed = await _read_request(reader)
            except _BadRequest as error:
                await _write(writer, "GET", problem_response(error.status, error.detail), False)
                return
            if parsed is None:
                return
            method, target, keep_alive, headers, body = parsed
            try:
                outcome = await self._answer(method, target, headers, body)
            except Exception as error:  # a bug must not kill the connection task silently
                outcome = problem_response(500, f"{type(error).__name__}: {error}")
            if outcome == "network":
                writer.transport.abort()
                return
            if outcome == "timeout":
                while await reader.read(65_536):
                    pass
                return
            assert isinstance(outcome, Response)
            await _write(writer, method, outcome, keep_alive)
            if not keep_alive:
                return

    async def _answer(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> Response | str:
        parts = urlsplit(target)
        relative = self._vendor._relative(split_path(parts.path or "/"))
        if relative is None:
            return problem_response(404, f"nothing is served at {parts.path}")
        query: dict[str, str] = {}
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            query.setdefault(name, value)
        request = Request(method, relative, query, headers, body)
        if self._control and relative[:1] == ("_control",):
            return handle_control(self._vendor, request)
        return await self._vendor._handle(request)


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, bool, dict[str, str], bytes] | None:
    """Read one request: method, target, keep-alive, headers, body; ``None`` at EOF."""
    try:
        line = await reader.readline()
    except ValueError:
        raise _BadRequest(414, "request line too long") from None
    if not line:
        return None
    parts = line.decode("latin-1").strip().split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(400, "malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS + 1):
        try:
            raw = await reader.readline()
        except ValueError:
            raise _BadRequest(431, "header line too long") from None
        if raw in (b"\r\n", b"\n", b""):
            break
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep or not name.strip():
            raise _BadRequest(400, "malformed header line")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    else:
        raise _BadRequest(431, "too many headers")
    if "transfer-encoding" in headers:
        raise _BadRequest(501, "only Content-Length request bodies are supported")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequest(400, "invalid Content-Length") from None
    if not 0 <= length <= _MAX_BODY:
        raise _BadRequest(413, "request body too large")
    body = await reader.readexactly(length) if length else b""
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
    return method.upper(), target, keep_alive, headers, body


async def _write(
    writer: asyncio.StreamWriter, method: str, response: Response, keep_alive: bool
) -> None:
    status = response.status
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Status"
    lines = [f"HTTP/1.1 {status} {phrase}"]
    lines += [f"{name}: {value}" for name, value in response.headers]
    has_body = status not in (204, 304)
    if has_body:
        lines.append(f"content-length: {len(response.body)}")
    lines.append("connection: keep-alive" if keep_alive else "connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")
    writer.write(head + (response.body if has_body and method != "HEAD" else b""))
    await writer.drain()
