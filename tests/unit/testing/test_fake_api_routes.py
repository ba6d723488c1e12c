"""FakeApi routes through the in-process httpx transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from watukuy.testing.clock import VirtualClock
from watukuy.testing.fake_api import FakeApi, fake_items

ISO0 = "2026-01-01T00:00:00.000Z"


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def api(clock: VirtualClock) -> FakeApi:
    return FakeApi(clock, items=fake_items(5), tenants={"acme": fake_items(2), "a/b": []})


@pytest.fixture
async def http(api: FakeApi) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=api.transport(), base_url=api.base_url) as client:
        yield client


def ids(body: dict[str, Any]) -> list[str]:
    return [item["id"] for item in body["data"]]


async def test_keyset_route_honours_since_after_id_and_limit(
    clock: VirtualClock, http: httpx.AsyncClient, api: FakeApi
) -> None:
    api.seed([{"id": i, "updated_at": ISO0} for i in ("a", "b", "c")] + fake_items(1, start=1))
    response = await http.get("/items", params={"since": ISO0, "after_id": "a", "limit": 1})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "data": [{"id": "b", "updated_at": ISO0, "version": 1}],
        "has_more": True,
    }
    walked: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        body = (await http.get("/items", params=params)).json()
        walked += ids(body)
        if not body["has_more"]:
            break
        last = body["data"][-1]
        params = {"since": last["updated_at"], "after_id": last["id"], "limit": 2}
    assert walked == ["item-001", "a", "b", "c"]
    first_param = (await http.get("/items?since=&after_id=b")).json()
    assert ids(first_param) == ["item-001", "a", "b", "c"]  # empty since: from the start


async def test_page_route(http: httpx.AsyncClient) -> None:
    response = await http.get("/items/page", params={"page": 2, "page_size": 2})
    assert response.json() == {"data": fake_items(5)[2:4], "page": 2, "pages": 3, "has_more": True}
    default = (await http.get("/items/page")).json()
    assert (len(default["data"]), default["page"], default["pages"], default["has_more"]) == (
        5,
        1,
        1,
        False,
    )


async def test_token_route_walks_with_next(http: httpx.AsyncClient) -> None:
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    requests = 0
    while True:
        body = (await http.get("/items/token", params=params)).json()
        requests += 1
        seen += ids(body)
        if body["next"] is None:
            break
        params = {"cursor": body["next"], "limit": 2}
    assert (seen, requests) == ([item["id"] for item in fake_items(5)], 3)


async def test_all_and_item_routes(http: httpx.AsyncClient) -> None:
    assert (await http.get("/items/all")).json() == {"data": fake_items(5)}
    item = await http.get("/items/item-002")
    assert (item.status_code, item.json()) == (200, fake_items(5)[1])
    missing = await http.get("/items/nope")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json() == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "no item 'nope'",
    }


async def test_tenant_prefix(http: httpx.AsyncClient) -> None:
    assert ids((await http.get("/t/acme/items/all")).json()) == ["item-001", "item-002"]
    assert (await http.get("/t/a%2Fb/items/all")).json() == {"data": []}
    unknown = await http.get("/t/ghost/items")
    assert (unknown.status_code, unknown.json()["detail"]) == (
        404,
        "unknown tenant in /t/ghost/items",
    )


@pytest.mark.parametrize(
    ("method", "path", "status", "detail"),
    [
        ("GET", "/nope", 404, "no route GET /nope"),
        ("GET", "/items/", 404, "no route GET /items/"),
        ("GET", "/t/acme", 404, "no route GET /t/acme"),
        ("POST", "/items/all", 405, "/items/all only answers GET"),
        ("DELETE", "/items/item-001", 405, "/items/item-001 only answers GET"),
        ("GET", "/items/page?page_size=abc", 400, "page_size: expected an integer, got 'abc'"),
        ("GET", "/items/page?page=0", 400, "page: expected a positive integer, got 0"),
        (
            "GET",
            "/items?since=garbage",
            400,
            "since: expected an ISO 8601 time or epoch, got 'garbage'",
        ),
        ("GET", "/items?limit=-2", 400, "limit: expected a positive integer, got -2"),
        ("GET", "/items/token?cursor=zzz", 400, "cursor: not a token issued by this API: 'zzz'"),
    ],
)
async def test_errors_are_problem_details(
    http: httpx.AsyncClient, method: str, path: str, status: int, detail: str
) -> None:
    response = await http.request(method, path)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == detail
    assert response.json()["status"] == status
    if status == 405:
        assert response.headers["allow"] == "GET"


async def test_a_base_path_prefixes_every_route(clock: VirtualClock) -> None:
    api = FakeApi(clock, items=fake_items(1), base_url="https://api.example.com/v2/")
    assert api.base_url == "https://api.example.com/v2"
    async with httpx.AsyncClient(transport=api.transport()) as http:
        assert (await http.get("https://api.example.com/v2/items/all")).status_code == 200
        assert (await http.get("https://api.example.com/items/all")).status_code == 404
        assert (await http.get("https://elsewhere.example/v2/items/all")).status_code == 404
        assert (await http.get("http://api.example.com/v2/items/all")).status_code == 404
        assert (await http.get("https://api.example.com:443/v2/items/all")).status_code == 200
    assert [record.path for record in api.log] == ["/items/all", "/items/all"]


async def test_requests_outside_the_api_are_not_logged(
    api: FakeApi, http: httpx.AsyncClient
) -> None:
    assert (await http.get("https://other.example/items")).status_code == 404
    assert (api.calls, api.log) == (0, [])
