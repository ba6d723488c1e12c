"""At most ``max_in_flight`` of the engine's requests are in a client's pool at once.

An injected client is bounded like the engine's own: a pool of hundreds of connections,
handed every request a budget grants at once, spends the process's CPU on matching
requests to connections. The requests beyond the bound wait in the factory, in order.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from http_fakes import HttpRig

from watukuy.http import HttpxFactory
from watukuy.model.errors import ConfigError


class HeldVendor(httpx.AsyncBaseTransport):
    """Holds every request until ``release`` is set, counting those it holds."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.holding = 0
        self.most = 0
        self.order: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.order.append(request.url.params["n"])
        self.holding += 1
        self.most = max(self.most, self.holding)
        try:
            await self.release.wait()
        finally:
            self.holding -= 1
        return httpx.Response(200, json={"ok": True})


async def _crowd(factory: HttpxFactory, rig: HttpRig, vendor: HeldVendor, count: int) -> None:
    http = factory.bind(rig.scope())
    tasks = [
        asyncio.create_task(http.get("https://api.test/items", params={"n": str(n)}))
        for n in range(count)
    ]
    for _ in range(20):
        await asyncio.sleep(0)
    held = vendor.holding
    vendor.release.set()
    answers = await asyncio.gather(*tasks)
    assert all(answer.status == 200 for answer in answers)
    assert held == vendor.most


async def test_an_injected_client_gets_at_most_twenty_requests_at_once() -> None:
    vendor = HeldVendor()
    rig = HttpRig()
    async with httpx.AsyncClient(
        transport=vendor, limits=httpx.Limits(max_connections=200)
    ) as client:
        await _crowd(HttpxFactory(client), rig, vendor, 30)
    assert vendor.most == 20
    # The others went out in the order they asked, as answers made room.
    assert vendor.order == [str(n) for n in range(30)]


async def test_max_in_flight_sets_the_bound() -> None:
    vendor = HeldVendor()
    rig = HttpRig()
    async with httpx.AsyncClient(transport=vendor) as client:
        await _crowd(HttpxFactory(client, max_in_flight=5), rig, vendor, 12)
    assert vendor.most == 5


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "20"])
def test_max_in_flight_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        HttpxFactory(max_in_flight=bad)  # type: ignore[arg-type]
    assert caught.value.field == "max_in_flight"


def _poller() -> object:
    import watukuy as wk

    async def fetch(ctx: wk.FetchContext[object]) -> wk.Page[object]:
        return wk.Page(items=[])

    return wk.define_poller(
        name="items", identity=lambda item: item["id"], cursor=wk.SnapshotDiff(), fetch=fetch
    )


async def test_the_engine_passes_its_bound_to_its_client() -> None:
    import watukuy as wk

    vendor = HeldVendor()
    rig = HttpRig()
    async with httpx.AsyncClient(transport=vendor) as client:
        engine = wk.Engine(
            store=wk.MemoryStore(),
            pollers=[_poller()],  # type: ignore[list-item]
            http_client=client,
            http_max_in_flight=50,
        )
        factory = engine._http
        assert isinstance(factory, HttpxFactory)
        await _crowd(factory, rig, vendor, 60)
    assert vendor.most == 50


@pytest.mark.parametrize("bad", [0, 2.5, True])
def test_the_engine_names_its_bound_when_it_is_wrong(bad: object) -> None:
    import watukuy as wk

    with pytest.raises(ConfigError) as caught:
        wk.Engine(
            store=wk.MemoryStore(),
            pollers=[_poller()],  # type: ignore[list-item]
            http_max_in_flight=bad,  # type: ignore[arg-type]
        )
    assert caught.value.field == "http_max_in_flight"
