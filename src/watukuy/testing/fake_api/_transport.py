"""The in-process face: an ``httpx.MockTransport`` in front of the vendor's request handling."""

from __future__ import annotations

import httpx

from ._protocol import Request, problem_response, split_path
from ._vendor import Vendor

__all__ = ["make_transport"]


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port if url.port != default else None)


def make_transport(vendor: Vendor) -> httpx.MockTransport:
    """Build the transport serving ``vendor`` at its base URL."""
    scheme, host, port = vendor._origin
    expected = (scheme, host, port if port != {"http": 80, "https": 443}.get(scheme) else None)

    async def handle(request: httpx.Request) -> httpx.Response:
        raw_path = request.url.raw_path.split(b"?", 1)[0].decode("ascii")
        relative = vendor._relative(split_path(raw_path))
        if _origin(request.url) != expected or relative is None:
            missing = problem_response(404, f"nothing is served at {request.url}")
            return httpx.Response(404, headers=missing.headers, content=missing.body)
        query: dict[str, str] = {}
        for name, value in request.url.params.multi_items():
            query.setdefault(name, value)
        outcome = await vendor._handle(
            Request(
                method=request.method.upper(),
                segments=relative,
                query=query,
                headers={k.lower(): v for k, v in request.headers.items()},
                body=await request.aread(),
            )
        )
        if outcome == "network":
            raise httpx.ConnectError("connection dropped (scripted fault)", request=request)
        if outcome == "timeout":
            raise httpx.ReadTimeout("no answer (scripted fault)", request=request)
        return httpx.Response(outcome.status, headers=outcome.headers, content=outcome.body)

    return httpx.MockTransport(handle)
