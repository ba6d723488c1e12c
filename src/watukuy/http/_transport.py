"""HTTP/1.1 on asyncio streams: the transport of the engine's own ``httpx`` client.

httpx's default transport is httpcore, which on asyncio runs through anyio: importing the
two (and anyio's asyncio backend, on the first request) costs a short-lived process a
noticeable share of its run, and their connection pool does bookkeeping per request that
the engine does not need (it already bounds its requests in flight, see ``_factory``).
:class:`AsyncioTransport` speaks HTTP/1.1 with ``h11`` (the protocol state machine httpcore
itself uses) over ``asyncio.open_connection``, and keeps idle connections per origin.

It serves only the client the engine creates for itself, and only when no proxy is
configured in the environment (httpx then routes through httpcore's proxy support). A
client you pass to the engine keeps its own transport.

What it does, as httpcore does it: keep-alive with at most ``max_keepalive_connections``
idle connections, closed after ``keepalive_expiry`` idle seconds; ``connect``, ``read``,
``write`` and ``pool`` timeouts from the request; TLS with the client's context (SNI, ALPN
``http/1.1``); a connection is reused only once its previous answer was read to the end,
and never after the server asked to close it or an error; a request that finds a reused
connection closed by the server before any answer byte is sent again once on a new
connection.

One thing httpcore does not: a server that closes the connection after each answer
(HTTP/1.0, ``Connection: close``), and is asked again soon after (within the keep-alive
expiry), gets the next connection opened as soon as it closed the last one, kept idle for
the next request to the origin. A lane asks for its next page while
it works on the page before: the connection set-up then happens during that work instead
of in front of the request.

Errors are httpx's: ``ConnectError``, ``ConnectTimeout``, ``ReadError``, ``ReadTimeout``,
``WriteError``, ``WriteTimeout``, ``PoolTimeout``, ``RemoteProtocolError``.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import h11
import httpx

__all__ = ["AsyncioTransport"]

_READ_SIZE: Final = 64 * 1024
_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})

_Origin = tuple[str, str, int]


class _Closed(Exception):
    """The server closed a reused connection before answering (the request may be sent
    again on a new one)."""


class _Connection:
    """One socket and its HTTP/1.1 state."""

    __slots__ = ("idle_since", "origin", "protocol", "reader", "writer")

    def __init__(
        self, origin: _Origin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.protocol = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0

    def reusable(self, now: float, expiry: float) -> bool:
        """Still open, not answered past its request, and not idle too long."""
        return (
            not self.writer.is_closing()
            and not self.reader.at_eof()
            and now - self.idle_since < expiry
        )

    def close(self) -> None:
        self.writer.close()


def _timeout(timeouts: dict[str, float | None], name: str) -> float | None:
    return timeouts.get(name)


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport for HTTP/1.1 over asyncio streams; see the module docstring.

    Args:
        ssl_context: The TLS context of ``https`` connections, or a function that builds
            it, called on the first ``https`` connection (even an empty
            ``ssl.SSLContext`` takes OpenSSL a millisecond to make, which a process
            polling only ``http://`` need not pay).
        limits: Connections at most, and kept alive at most, with their idle expiry.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
        limits: httpx.Limits,
    ) -> None:
        self._ssl = ssl_context
        self._alpn = False
        most = limits.max_connections
        self._max: float = float("inf") if most is None else most
        keep = limits.max_keepalive_connections
        self._keep: float = self._max if keep is None else keep
        self._expiry = limits.keepalive_expiry if limits.keepalive_expiry is not None else 5.0
        self._idle: collections.OrderedDict[_Connection, None] = collections.OrderedDict()
        self._open = 0  # connections open, idle or answering
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False
        self._opening: dict[_Origin, asyncio.Task[None]] = {}  # spare connections
        # When each origin's last connection closed after its answer, and whether the
        # request after it came while a spare opened then would still have been fresh.
        self._closed_at: dict[_Origin, float] = {}
        self._followed: dict[_Origin, bool] = {}

    # --- the pool -----------------------------------------------------------------------

    def _take_idle(self, origin: _Origin) -> _Connection | None:
        now = time.monotonic()
        for connection in list(self._idle):
            if not connection.reusable(now, self._expiry):
                self._drop(connection)
            elif connection.origin == origin:
                del self._idle[connection]
                return connection
        return None

    def _drop(self, connection: _Connection) -> None:
        self._idle.pop(connection, None)
        connection.close()
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        """A connection slot or an idle connection is free: wake the first waiter."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _release(
        self,
        connection: _Connection,
        reusable: bool,
        timeouts: dict[str, float | None] | None = None,
    ) -> None:
        """A request is done with ``connection``: keep it for the next one or close it (and
        open a spare one when the server closes it after a complete answer)."""
        protocol = connection.protocol
        if reusable and not self._closed and protocol.their_state is h11.MUST_CLOSE:
            origin = connection.origin
            self._closed_at[origin] = time.monotonic()
            if self._followed.get(origin):
                self._open_spare(origin, timeouts or {})
        if (
            reusable
            and not self._closed
            and protocol.our_state is h11.DONE
            and protocol.their_state is h11.DONE
        ):
            protocol.start_next_cycle()
            connection.idle_since = time.monotonic()
            self._idle[connection] = None
            while len(self._idle) > self._keep:
                self._drop(next(iter(self._idle)))
            self._wake()
            return
        connection.close()
        self._open -= 1
        self._wake()

    def _open_spare(self, origin: _Origin, timeouts: dict[str, float | None]) -> None:
        """Open a connection to ``origin`` in the background, for its next request: the
        server closes each one after its answer. At most one at a time per origin, and none
        when the pool is full or one is idle already."""
        # ``_open`` still counts the connection being released.
        if origin in self._opening or self._waiting or self._open > self._max or self._keep < 1:
            return
        if any(idle.origin == origin for idle in self._idle):
            return
        self._open += 1  # the spare's slot, held while it connects
        task = asyncio.get_running_loop().create_task(self._spare(origin, timeouts))
        self._opening[origin] = task

    async def _spare(self, origin: _Origin, timeouts: dict[str, float | None]) -> None:
        try:
            connection = await self._connect(origin, timeouts)
        except (Exception, asyncio.CancelledError):
            # The next request connects, and fails, on its own.
            self._open -= 1
            self._wake()
            return
        finally:
            self._opening.pop(origin, None)
        if self._closed:
            connection.close()
            self._open -= 1
            return
        # Idle since now: a request on it is sent again once if the server closed it unused.
        connection.idle_since = time.monotonic()
        self._idle[connection] = None
        while len(self._idle) > self._keep:
            self._drop(next(iter(self._idle)))
        self._wake()

    async def _acquire(self, origin: _Origin, timeouts: dict[str, float | None]) -> _Connection:
        closed_at = self._closed_at.get(origin)
        # A spare is opened only for an origin asked again soon after it closed the last
        # connection: one polled once a minute would get an idle connection it never uses.
        self._followed[origin] = (
            closed_at is not None and time.monotonic() - closed_at < self._expiry
        )
        while True:
            connection = self._take_idle(origin)
            if connection is not None:
                return connection
            spare = self._opening.get(origin)
            if spare is not None:
                # Already on its way: wait for it rather than open a second one.
                try:
                    async with asyncio.timeout(_timeout(timeouts, "connect")):
                        await asyncio.shield(spare)
                except TimeoutError:
                    pass  # connect on our own, as if there were no spare
                else:
                    continue
            if self._open >= self._max and self._idle:
                self._drop(next(iter(self._idle)))  # room from another origin's idle one
            if self._open < self._max:
                break
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                async with asyncio.timeout(_timeout(timeouts, "pool")):
                    await waiter
            except TimeoutError as error:
                raise httpx.PoolTimeout("no connection free within the pool timeout") from error
            finally:
                if not waiter.done():
                    waiter.cancel()
        self._open += 1
        try:
            return await self._connect(origin, timeouts)
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    def _tls(self) -> ssl.SSLContext:
        """The TLS context, built by the first ``https`` connection when given as a function."""
        if not isinstance(self._ssl, ssl.SSLContext):
            self._ssl = self._ssl()
        return self._ssl

    async def _connect(self, origin: _Origin, timeouts: dict[str, float | None]) -> _Connection:
        scheme, host, port = origin
        context: ssl.SSLContext | None = None
        if scheme == "https":
            context = self._tls()
            if not self._alpn:
                context.set_alpn_protocols(["http/1.1"])
                self._alpn = True
        try:
            async with asyncio.timeout(_timeout(timeouts, "connect")):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if context is not None else None,
                    limit=_READ_SIZE,
                )
        except TimeoutError as error:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from error
        except (OSError, ssl.SSLError) as error:
            raise httpx.ConnectError(str(error) or type(error).__name__) from error
        return _Connection(origin, reader, writer)

    # --- one request --------------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its response, whose body is read as it streams."""
        if self._closed:
            raise RuntimeError("the transport is closed")
        url = request.url
        scheme = url.scheme
        port = url.port or (443 if scheme == "https" else 80)
        origin: _Origin = (scheme, url.host, port)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        again = request.method in _IDEMPOTENT
        while True:
            connection = await self._acquire(origin, timeouts)
            reused = connection.idle_since > 0
            try:
                head = await self._exchange(connection, request, timeouts)
            except _Closed as error:
                self._release(connection, reusable=False)
                if reused and again:
                    again = False  # a reused connection the server had closed: once more
                    continue
                raise httpx.RemoteProtocolError(
                    "the server closed the connection without answering", request=request
                ) from error
            except BaseException:
                self._release(connection, reusable=False)
                raise
            break
        headers = [(bytes(name), bytes(value)) for name, value in head.headers.raw_items()]
        return httpx.Response(
            status_code=head.status_code,
            headers=headers,
            stream=_Body(self, connection, timeouts, request),
            extensions={
                "http_version": b"HTTP/" + bytes(head.http_version),
                "reason_phrase": bytes(head.reason),
            },
        )

    async def _exchange(
        self, connection: _Connection, request: httpx.Request, timeouts: dict[str, float | None]
    ) -> h11.Response:
        protocol = connection.protocol
        writer = connection.writer
        url = request.url
        target = url.raw_path
        try:
            data = protocol.send(
                h11.Request(method=request.method, target=target, headers=request.headers.raw)
            )
            assert data is not None
            writer.write(data)
            if isinstance(request.stream, httpx.AsyncByteStream):
                async for chunk in request.stream:
                    if chunk:
                        body = protocol.send(h11.Data(data=chunk))
                        assert body is not None
                        writer.write(body)
            end = protocol.send(h11.EndOfMessage())
            assert end is not None
            writer.write(end)
        except h11.LocalProtocolError as error:
            raise httpx.LocalProtocolError(str(error), request=request) from error
        try:
            async with asyncio.timeout(_timeout(timeouts, "write")):
                await writer.drain()
        except TimeoutError as error:
            raise httpx.WriteTimeout("sending the request timed out", request=request) from error
        except (ConnectionError, OSError) as error:
            raise _Closed() from error
        answered = False
        while True:
            event = await _next_event(connection, request, timeouts, answered)
            if isinstance(event, h11.Response):
                return event
            if isinstance(event, h11.InformationalResponse):
                answered = True
                continue
            if event is h11.NEED_DATA:  # pragma: no cover - _next_event reads until an event
                continue
            raise httpx.RemoteProtocolError(
                f"unexpected {type(event).__name__} before the response", request=request
            )

    async def aclose(self) -> None:
        """Close every idle connection; connections still answering close when done."""
        self._closed = True
        opening = list(self._opening.values())
        for task in opening:
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)
        for connection in list(self._idle):
            self._drop(connection)


async def _next_event(
    connection: _Connection,
    request: httpx.Request,
    timeouts: dict[str, float | None],
    answered: bool,
) -> Any:
    """The next protocol event of the response, reading from the socket as needed.

    ``answered`` says whether any of the response was received: an end of stream before
    that is a reused connection the server had closed (:class:`_Closed`).
    """
    protocol = connection.protocol
    while True:
        try:
            event = protocol.next_event()
        except h11.RemoteProtocolError as error:
            raise httpx.RemoteProtocolError(str(error), request=request) from error
        if event is not h11.NEED_DATA:
            return event
        try:
            async with asyncio.timeout(_timeout(timeouts, "read")):
                data = await connection.reader.read(_READ_SIZE)
        except TimeoutError as error:
            raise httpx.ReadTimeout("reading the response timed out", request=request) from error
        except (ConnectionError, OSError) as error:
            if not answered and protocol.their_state is h11.SEND_RESPONSE:
                raise _Closed() from error
            raise httpx.ReadError(str(error) or type(error).__name__, request=request) from error
        if not data and not answered and protocol.their_state is h11.SEND_RESPONSE:
            raise _Closed()
        answered = answered or bool(data)
        try:
            protocol.receive_data(data)
        except h11.RemoteProtocolError as error:  # pragma: no cover - h11 raises on next_event
            raise httpx.RemoteProtocolError(str(error), request=request) from error


class _Body(httpx.AsyncByteStream):
    """A response body, read from the connection as it is iterated."""

    def __init__(
        self,
        transport: AsyncioTransport,
        connection: _Connection,
        timeouts: dict[str, float | None],
        request: httpx.Request,
    ) -> None:
        self._transport = transport
        self._connection: _Connection | None = connection
        self._timeouts = timeouts
        self._request = request
        self._complete = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        try:
            while True:
                event = await _next_event(connection, self._request, self._timeouts, True)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    self._complete = True
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError(
                        "the server closed the connection in the middle of the answer",
                        request=self._request,
                    )
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            transport = self._transport
            transport._release(connection, reusable=self._complete, timeouts=self._timeouts)
