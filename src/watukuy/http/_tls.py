"""The TLS context of the engine's own client, built on its first TLS connection.

``httpx.AsyncClient()`` builds its TLS context when it is created: it imports ``certifi``
and loads its bundle of certificate authorities (tens of milliseconds), even when every
request of the process goes to ``http://``, as a nothing-changed ``tick()`` against a
service next door does. The engine's own transport (:mod:`watukuy.http._transport`) is handed
:func:`httpx_default_context` itself and calls it on its first ``https`` connection: it
builds the context httpx would have built, with ``httpx.create_ssl_context()``
(``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured, certifi otherwise). When a proxy from the
environment sends requests through httpx's own transport, which wants an
``ssl.SSLContext``, the client is given a :class:`DeferredTLSContext` instead: it builds
that same context on the first TLS handshake and hands that handshake and every later one
to it. Certificates are verified exactly as before: no connection is ever made with the
deferred object's own, empty, certificate store.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["DeferredTLSContext", "httpx_default_context"]


def httpx_default_context() -> ssl.SSLContext:
    """The context httpx builds for ``verify=True`` (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
    honoured, certifi otherwise), built now."""
    import httpx

    return httpx.create_ssl_context()


class DeferredTLSContext(ssl.SSLContext):
    """An ``ssl.SSLContext`` that builds the real one when a connection first needs it.

    httpx and httpcore use a client context in two ways: they choose the ALPN protocols
    (``set_alpn_protocols``) and then wrap a connection (``wrap_bio`` by asyncio, anyio and
    trio, ``wrap_socket`` by the synchronous backend). Both are forwarded to the real
    context, built once by ``build`` (by default the context ``httpx`` builds for
    ``verify=True``). Reading this object's own settings shows a verifying client context
    (``CERT_REQUIRED``, hostname checks on), as the real one is.

    Args:
        build: Returns the context to use; called on the first TLS connection.
    """

    _build: Callable[[], ssl.SSLContext]
    _built: ssl.SSLContext | None

    def __new__(
        cls, build: Callable[[], ssl.SSLContext] = httpx_default_context
    ) -> DeferredTLSContext:
        self = super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)
        self._build = build
        self._built = None
        return self

    @property
    def built(self) -> bool:
        """Whether the real context exists yet (a TLS connection has asked for it)."""
        return self._built is not None

    def context(self) -> ssl.SSLContext:
        """The real context, built on the first call."""
        if self._built is None:
            self._built = self._build()
        return self._built

    def set_alpn_protocols(self, alpn_protocols: Iterable[str]) -> None:
        """Set the ALPN protocols of the real context."""
        self.context().set_alpn_protocols(alpn_protocols)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        """Wrap a connection with the real context."""
        return self.context().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        """Wrap a socket with the real context."""
        return self.context().wrap_socket(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<DeferredTLSContext {'built' if self.built else 'not built yet'}>"
