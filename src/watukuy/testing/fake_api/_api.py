"""FakeApi: the vendor core with its faces (transport, server, tenant views) on top."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from watukuy.model.errors import ConfigError
from watukuy.model.ports import Clock

from ._server import FakeServer
from ._tenant import FakeTenant, TenantOps
from ._transport import make_transport
from ._vendor import DEFAULT_BASE_URL, Vendor

__all__ = ["FakeApi"]


class FakeApi(Vendor, TenantOps):
    """A scriptable vendor API for tests, demos and benchmarks (see the package docstring).

    The API itself is the default tenant (``""``); ``api.tenant(name)`` gives the others.

    Args:
        clock: Time source for ``updated_at`` stamps, latency and the log (default: the
            system clock; pass a ``VirtualClock`` to keep tests instant).
        items: Initial items of the default tenant (as :meth:`seed`).
        base_url: Where the in-process transport answers; its path is also the route
            prefix of :meth:`serve`.
        page_size: Default page size of every listing.
        tenants: Initial tenants: names, or a mapping of name to items.
        log_limit: Most recent requests kept in :attr:`log` (``None``: keep all).

    Raises:
        ConfigError: An argument is invalid.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        items: Iterable[Mapping[str, Any]] | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        page_size: int = 100,
        tenants: Mapping[str, Iterable[Mapping[str, Any]]] | Iterable[str] | None = None,
        log_limit: int | None = 100_000,
    ) -> None:
        super().__init__(clock, base_url=base_url, page_size=page_size, log_limit=log_limit)
        self._vendor = self
        self._name = ""
        if items is not None:
            self.seed(items)
        if isinstance(tenants, str):
            raise ConfigError(f"expected names or a mapping, got {tenants!r}", field="tenants")
        if isinstance(tenants, Mapping):
            for name, tenant_items in tenants.items():
                self.tenant(name).seed(tenant_items)
        elif tenants is not None:
            for name in tenants:
                self.tenant(name)

    def __repr__(self) -> str:
        return f"FakeApi({self.base_url!r}, tenants={len(self.tenants())}, calls={self.calls})"

    def tenant(self, name: str) -> FakeTenant:
        """The view of tenant ``name``, created empty on first use (``""`` is the default)."""
        self._open(name)
        return FakeTenant(self, name)

    # --- faces ------------------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        """An ``httpx.MockTransport`` serving the routes at :attr:`base_url` in process.

        Use it with ``httpx.AsyncClient(transport=api.transport(), base_url=api.base_url)``.
        Requests for another origin or outside the base path get a 404 and are not logged.
        """
        return make_transport(self)

    async def serve(
        self, host: str = "127.0.0.1", port: int = 0, *, control: bool = True
    ) -> FakeServer:
        """Serve the API over real HTTP/1.1 in the running event loop.

        Args:
            host: Interface to bind.
            port: TCP port; ``0`` picks a free one (read it from ``server.url``).
            control: Also serve the ``/_control/...`` API used by ``FakeApiClient``.

        Returns:
            The running server: ``server.url``, ``await server.close()``, or ``async with``.
        """
        server = FakeServer(self, control=control)
        await server.start(host, port)
        return server
