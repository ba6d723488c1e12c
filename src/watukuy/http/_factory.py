"""The engine-wide owner of the ``httpx.AsyncClient`` behind every ``ctx.http``."""

from __future__ import annotations

import functools
from typing import Final

import httpx

from watukuy.core.errors import ConfigError
from watukuy.core.http_port import HttpScope
from watukuy.core.redact import Redaction

from ._client import HttpClient
from ._redact import guard_library_logs

__all__ = ["DEFAULT_TIMEOUT", "HttpxFactory", "default_user_agent"]

DEFAULT_TIMEOUT: Final = httpx.Timeout(30.0)
"""Timeout of the client :class:`HttpxFactory` creates itself (per connect, read, write)."""

DEFAULT_LIMITS: Final = httpx.Limits(max_connections=100, max_keepalive_connections=100)
"""Pool of the client :class:`HttpxFactory` creates itself.

httpx keeps at most 20 idle connections by default: with more keys than that polling at
once, every answer beyond the twentieth closes its connection and the next request opens
a new one (a TCP handshake, and the pool's bookkeeping, per request). Keeping as many idle
connections as the pool may open reuses them all.
"""


@functools.cache
def default_user_agent() -> str:
    """``watukuy/<version>``, the version read from the installed package metadata."""
    from importlib import metadata  # slow to import; read once, on the first engine

    try:
        version = metadata.version("watukuy")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        version = "0+unknown"
    return f"watukuy/{version}"


class HttpxFactory:
    """Hands every lane cycle its ``ctx.http``, all sharing one ``httpx.AsyncClient``.

    Pass your own client to control connection pooling, proxies, TLS, authentication or
    the transport (an ``httpx.MockTransport`` in tests); the factory then never closes it.
    Without one, a client is created on the first request (timeout 30 s, redirects
    followed, up to 100 connections all kept alive between requests) and closed by
    :meth:`aclose`.

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
    """

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        *,
        user_agent: str | None = None,
        redaction: Redaction | None = None,
    ) -> None:
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise ConfigError(f"expected an httpx.AsyncClient, got {client!r}", field="http_client")
        if user_agent is not None and (not isinstance(user_agent, str) or not user_agent.strip()):
            raise ConfigError(
                f"expected a non-empty string, got {user_agent!r}", field="user_agent"
            )
        self._client = client
        self._owned = client is None
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
            self._client = httpx.AsyncClient(
                timeout=DEFAULT_TIMEOUT, limits=DEFAULT_LIMITS, follow_redirects=True
            )
        return self._client

    def bind(self, scope: HttpScope) -> HttpClient:
        """The ``ctx.http`` of one lane cycle (no I/O happens here)."""
        return HttpClient(lambda: self.client, scope, user_agent=self._user_agent)

    async def aclose(self) -> None:
        """Close the client if this factory created it; an injected client stays open.

        A later request creates a fresh client, so an engine can be started again.
        """
        if self._owned and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def __repr__(self) -> str:
        origin = "owned" if self._owned else "injected"
        return f"HttpxFactory({origin}, user_agent={self._user_agent!r})"
