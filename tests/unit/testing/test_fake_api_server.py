"""FakeApi over real loopback HTTP: serve(), the control API, FakeApiClient, ``python -m``.

These tests open real sockets on 127.0.0.1 (and one child process); nothing else.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from watukuy.model.errors import ConfigError
from watukuy.testing.fake_api import FakeApi, FakeApiClient, FakeServer, fake_items
from watukuy.testing.fake_api._cli import main


@pytest.fixture
def api() -> FakeApi:
    return FakeApi(items=fake_items(3), tenants={"acme": fake_items(2)})


@pytest.fixture
async def server(api: FakeApi) -> AsyncIterator[FakeServer]:
    async with await api.serve() as running:
        yield running


@pytest.fixture
async def http(server: FakeServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
        yield client


async def test_serve_answers_the_routes_over_keep_alive(
    server: FakeServer, http: httpx.AsyncClient, api: FakeApi
) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}"
    first = await http.get("/items/all", headers={"x-client-id": "p1"})
    assert (first.status_code, first.json()) == (200, {"data": fake_items(3)})
    assert first.headers["connection"] == "keep-alive"
    page = await http.get("/t/acme/items", params={"limit": 1})
    assert page.json() == {"data": fake_items(2)[:1], "has_more": True}
    missing = await http.get("/nope")
    assert (missing.status_code, missing.headers["content-type"]) == (
        404,
        "application/problem+json",
    )
    assert [(r.path, r.status, r.client) for r in api.log] == [
        ("/items/all", 200, "p1"),
        ("/t/acme/items", 200, None),
        ("/nope", 404, None),
    ]


async def test_served_faults_etags_and_head(http: httpx.AsyncClient, api: FakeApi) -> None:
    api.fail_next(503, retry_after=2)
    unavailable = await http.get("/items")
    assert (unavailable.status_code, unavailable.headers["retry-after"]) == (503, "2")
    api.set_etags()
    ok = await http.get("/items/all")
    cached = await http.get("/items/all", headers={"if-none-match": ok.headers["etag"]})
    assert (cached.status_code, cached.content) == (304, b"")
    head = await http.head("/items/all")
    assert (head.status_code, head.content, head.headers["allow"]) == (405, b"", "GET")
    assert (await http.get("/items/item-001")).json() == fake_items(1)[0]


async def test_served_network_and_timeout_faults(server: FakeServer, api: FakeApi) -> None:
    api.fail_next("network")
    api.fail_next("timeout")
    async with httpx.AsyncClient(base_url=server.url, timeout=0.3) as http:
        with pytest.raises(httpx.TransportError):
            await http.get("/items")
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/items")
        assert (await http.get("/items")).status_code == 200
    assert [record.status for record in api.log] == [0, 0, 200]


async def test_close_stops_serving(api: FakeApi) -> None:
    server = await api.serve()
    url = server.url
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        assert (await http.get("/items")).status_code == 200
        api.fail_next("timeout")
        stalled = asyncio.create_task(http.get("/items"))
        while api.pending_faults():
            await asyncio.sleep(0.01)
        await server.close()  # also ends the silent connection
        with pytest.raises(httpx.TransportError):
            await stalled
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get("/items")
    await server.close()  # closing twice is harmless


async def test_served_base_path(api: FakeApi) -> None:
    prefixed = FakeApi(items=fake_items(1), base_url="https://fake.api/v1")
    async with await prefixed.serve() as server:
        assert server.url.endswith("/v1")
        async with httpx.AsyncClient(timeout=5) as http:
            assert (await http.get(server.url + "/items/all")).status_code == 200
            assert (
                await http.get(server.url.removesuffix("/v1") + "/items/all")
            ).status_code == 404


async def test_malformed_requests_get_a_4xx(server: FakeServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"NONSENSE\r\n\r\n")
    await writer.drain()
    answer = await reader.read()
    writer.close()
    await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"malformed request line" in answer


# --- the control API ----------------------------------------------------------------------


async def test_control_api_drives_the_dataset(server: FakeServer, api: FakeApi) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
        added = await http.post("/_control/add", json={"tenant": "new", "item": {"id": "x"}})
        assert added.status_code == 200
        assert added.json()["id"] == "x"
        bad = await http.post("/_control/add", json={"item": {"id": "x"}, "oops": 1})
        assert (bad.status_code, bad.json()["detail"]) == (400, "oops: unknown argument(s) oops")
        wrong = await http.get("/_control/add")
        assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
        garbage = await http.post("/_control/seed", content=b"[1, 2")
        assert garbage.status_code == 400
        unknown = await http.get("/_control/items", params={"tenant": "ghost"})
        assert (unknown.status_code, unknown.json()["detail"]) == (404, "unknown tenant 'ghost'")
        assert (await http.get("/_control/nope")).status_code == 404
    assert api.tenant("new").get("x") is not None
    assert (api.calls, api.log) == (0, [])  # control requests are not counted


async def test_fake_api_client_against_a_served_instance(server: FakeServer, api: FakeApi) -> None:
    def drive() -> None:
        with FakeApiClient(server.url) as client:
            assert client.size() == 3
            stored = client.add({"id": "item-100", "total": 1})
            assert stored["version"] == 1
            assert client.update("item-100", total=2)["version"] == 2
            assert client.get("item-100") is not None
            assert client.get("missing") is None
            assert client.remove("item-100") is True
            assert client.remove("item-100") is False
            with pytest.raises(KeyError):
                client.update("missing", total=1)
            with pytest.raises(ConfigError, match="already exists"):
                client.add({"id": "item-001"})
            acme = client.tenant("acme")
            acme.seed(fake_items(4))
            assert [item["id"] for item in acme.all()] == [i["id"] for i in fake_items(4)]
            client.tenant("fresh").add({"id": "f"})
            assert client.tenants() == ["", "acme", "fresh"]
            with pytest.raises(LookupError):
                client.tenant("ghost").all()
            client.fail_next(429, retry_after=3, path="/items", times=2)
            assert client.pending_faults() == 2
            client.clear_faults()
            client.fail_next("network")
            client.set_rate_limit("vendor", limit=5, window="1m", reset="delta")
            client.set_etags()
            client.set_last_modified()
            client.set_latency("5ms")
            assert client.stats()["latency_ms"] == 5
            client.set_latency(0)
            acme.clear()
            assert acme.size() == 0

    await asyncio.to_thread(drive)
    assert api.pending_faults() == 1
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
        with pytest.raises(httpx.TransportError):
            await http.get("/items")
        response = await http.get("/items", headers={"x-client-id": "child-7"})
        assert response.headers["x-ratelimit-remaining"] == "4"  # the dropped one never counted
        assert response.headers["x-ratelimit-reset"] == "60"
        assert "etag" in response.headers
        assert "last-modified" in response.headers

    def read_log() -> tuple[list[dict[str, object]], dict[str, object], list[dict[str, object]]]:
        with FakeApiClient(server.url) as client:
            entries = client.log()
            stats = client.stats()
            later = client.log(after=entries[0]["seq"])
            client.reset_stats()
            assert client.calls == 0
            return entries, stats, later

    entries, stats, later = await asyncio.to_thread(read_log)
    assert [(e["path"], e["status"], e["client"], e["tenant"]) for e in entries] == [
        ("/items", 0, None, ""),
        ("/items", 200, "child-7", ""),
    ]
    assert [e["seq"] for e in later] == [2]
    assert stats == {
        "calls": 2,
        "pending_faults": 0,
        "last_seq": 2,
        "log_size": 2,
        "latency_ms": 0,
        "tenants": 3,
        "items": 4,
    }


# --- python -m watukuy.testing.fake_api ---------------------------------------------------


async def test_module_entry_point_serves_until_stopped() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "watukuy.testing.fake_api",
        "--port",
        "0",
        "--items",
        "3",
        "--tenants",
        "2",
        "--latency",
        "1ms",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    try:
        line = await asyncio.wait_for(process.stdout.readline(), timeout=30)  # type: ignore[union-attr]
        url = line.decode().strip()
        assert url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            response = await http.get("/t/t2/items/all", headers={"x-client-id": "parent"})
            assert [item["id"] for item in response.json()["data"]] == [
                "item-001",
                "item-002",
                "item-003",
            ]
            stats = (await http.get("/_control/stats")).json()
            assert (stats["tenants"], stats["items"], stats["latency_ms"]) == (3, 9, 1)
            log = (await http.get("/_control/log")).json()["entries"]
            assert [(e["path"], e["client"]) for e in log] == [("/t/t2/items/all", "parent")]
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, stderr.decode()
    assert stderr == b""


def test_entry_point_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--items", "-1"])
    assert caught.value.code == 2
    assert "--items: expected a non-negative integer, got -1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        main(["--latency", "soon"])
    assert caught.value.code == 2
    assert "--latency: expected a duration like" in capsys.readouterr().err
