"""The engine-wide owner of the ``httpx.AsyncClient`` behind every ``ctx.http``."""

from __future__ import annotations

import asyncio
import functools
import ssl
from typing import Final

import httpx

from watukuy.model.errors import ConfigError
from watukuy.model.http_port import HttpScope
from watukuy.model.options import _positive_int
from watukuy.model.redact import Redaction

from ._client import HttpClient
from ._redact import guard_library_logs
from ._tls import DeferredTLSContext, httpx_default_context
from ._transport import AsyncioTransport

__all__ = ["DEFAULT_TIMEOUT", "HttpxFactory", "default_user_agent"]

DEFAULT_TIMEOUT: Final = httpx.Timeout(30.0)
"""Timeout of the client :class:`HttpxFactory` creates itself (per connect, read, write)."""

DEFAULT_MAX_CONNECTIONS: Final = 20
DEFAULT_LIMITS: Final = httpx.Limits(
    max_connections=DEFAULT_MAX_CONNECTIONS, max_keepalive_connections=DEFAULT_MAX_CONNECTIONS
)
"""Pool of the client :class:`HttpxFactory` creates itself.

httpx's own default (100 connections, 20 kept alive) closes a connection after every
answer beyond the twentieth in flight and opens a new one for the next request, and its
pool scans every waiting request against every connection each time a request starts
or ends: with hundreds of keys polling at once, most of the engine's CPU. Here every
connection is kept alive, and requests beyond the pool's size wait in the factory, in
order, so the pool never holds more requests than connections.
"""

DEFAULT_MAX_IN_FLIGHT: Final = DEFAULT_MAX_CONNECTIONS
"""Requests of the engine in a client's pool at once, an injected client's too.

httpx's pool matches every request it holds against every connection it has each time a
request starts or ends. Handed hundreds of granted requests at once (a budget of 150 a
second refills all at once), a pool of 200 connections spends a core on that bookkeeping
alone; twenty requests in flight carry 200 a second from a vendor answering in 100 ms.
"""


def _environment_proxies() -> bool:
    """Whether the environment names a proxy httpx would use (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY``, any case)."""
    import urllib.request

    proxies = urllib.request.getproxies()
    return any(scheme in proxies for scheme in ("http", "https", "all"))


@functools.cache
def default_user_agent() -> str:
    """``watukuy/<version>``, the package's version (``watukuy.__version__``)."""
    from watukuy._version import __version__

    return f"watukuy/{__version__}"


class HttpxFactory:
    """Hands every lane cycle its ``ctx.http``, all sharing one ``httpx.AsyncClient``.

    Pass your own client to control connection pooling, proxies, TLS, authentication or
    the transport (an ``httpx.MockTransport`` in tests); the factory then never closes it.
    Either way at most ``max_in_flight`` of the engine's requests are in the client's pool
    at once; the others wait here, in the order they were granted their budget.
    Without one, a client is created on the first request (timeout 30 s, redirects
    followed, 20 connections kept alive, at most 20 requests in flight, the others
    waiting in order, certificates verified as httpx does by default, with a context built
    on the first TLS connection, HTTP/1.1 over asyncio streams unless the environment
    names a proxy; see :mod:`watukuy.http._transport`) and closed by :meth:`aclose`.

    Redirects (when the client's ``follow_redirects`` is on) are followed by watukuy, not
    httpx: a hop to another origin (scheme, host or port) drops every sensitive header,
    query parameter and the URL's user info, and ``https`` to ``http`` is refused.

    Requests carry ``user-agent: watukuy/<version>`` and ``accept: application/json``
    unless the request passes its own; these take precedence over headers configured on
    the client.

    The ``httpx`` logger writes every request's full URL at INFO; the factory adds a
    filter to it (once per process) that masks user info and sensitive parameters, with
    ``redaction`` as well as the default policy.

    Args:
        client: The client to use; by default one is created lazily.
        user_agent: Default ``User-Agent`` instead of ``watukuy/<version>``.
        redaction: The engine's secrets policy, for the ``httpx`` log records.
        max_in_flight: Requests of the engine in the client's pool at once (default
            :data:`DEFAULT_MAX_IN_FLIGHT`, 20).
    """

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        *,
        user_agent: str | None = None,
        redaction: Redaction | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise ConfigError(f"expected an httpx.AsyncClient, got {client!r}", field="http_client")
        if user_agent is not None and (not isinstance(user_agent, str) or not user_agent.strip()):
            raise ConfigError(
                f"expected a non-empty string, got {user_agent!r}", field="user_agent"
            )
        max_in_flight = _positive_int(max_in_flight, "max_in_flight")
        self._client = client
        self._owned = client is None
        self._max_in_flight = max_in_flight
        self._slots: asyncio.Semaphore | None = None
        guard_library_logs(redaction)
        self._user_agent = user_agent if user_agent is not None else default_user_agent()

    @property
    def user_agent(self) -> str:
        """The default ``User-Agent`` of every request."""
        return self._user_agent

    @property
    def client(self) -> httpx.AsyncClient:
        """The shared client, created on first use when none was injected."""
        if self._client is None:
            # The context httpx builds for ``verify=True``, built on the first TLS
            # connection: a process polling only ``http://`` never loads the CA bundle.
            transport: AsyncioTransport | None = None
            verify: ssl.SSLContext | bool = True
            if _environment_proxies():
                # A proxy from the environment goes through httpx's own transport, which
                # speaks to proxies and takes its context as an ``ssl.SSLContext``.
                verify = DeferredTLSContext()
            else:
                # Any other request goes over asyncio streams, whose transport builds the
                # context itself (httpx reads ``verify`` only for transports it makes).
                transport = AsyncioTransport(
                    ssl_context=httpx_default_context, limits=DEFAULT_LIMITS
                )
            self._client = httpx.AsyncClient(
                timeout=DEFAULT_TIMEOUT,
                limits=DEFAULT_LIMITS,
                follow_redirects=True,
                verify=verify,
                transport=transport,
            )
        return self._client

    def _request_slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_in_flight)
        return self._slots

    def bind(self, scope: HttpScope) -> HttpClient:
        """The ``ctx.http`` of one lane cycle (no I/O happens here)."""
        return HttpClient(
            lambda: self.client, scope, user_agent=self._user_agent, slots=self._request_slots
        )

    async def aclose(self) -> None:
        """Close the client if this factory created it; an injected client stays open.

        A later request creates a fresh client, so an engine can be started again.
        """
        # A started-again engine may run on another event loop: a fresh semaphore for it.
        self._slots = None
        if self._owned and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def __repr__(self) -> str:
        origin = "owned" if self._owned else "injected"
        return f"HttpxFactory({origin}, user_agent={self._user_agent!r})"
