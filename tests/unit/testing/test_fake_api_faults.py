"""FakeApi faults and knobs: scripted failures, rate limits, ETags, latency, the log."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from watukuy.model.errors import ConfigError, HttpError
from watukuy.testing.clock import VirtualClock
from watukuy.testing.fake_api import FakeApi, fake_items

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def api(clock: VirtualClock) -> FakeApi:
    return FakeApi(clock, items=fake_items(2), tenants={"acme": fake_items(1)})


@pytest.fixture
async def http(api: FakeApi) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=api.transport(), base_url=api.base_url) as client:
        yield client


# --- scripted faults ----------------------------------------------------------------------


def test_direct_calls_take_faults_in_order(api: FakeApi) -> None:
    api.fail_next(500)
    api.fail_next("network")
    assert api.pending_faults() == 2
    with pytest.raises(HttpError) as caught:
        api.list_all()
    error = caught.value
    assert (error.status, error.method, error.url) == (500, "GET", "https://fake.api/items/all")
    assert error.problem == {"type": "about:blank", "title": "Internal Server Error", "status": 500}
    assert str(error) == "GET https://fake.api/items/all responded 500: Internal Server Error"
    with pytest.raises(httpx.ConnectError):
        api.list_all()
    assert len(api.list_all()) == 2
    assert api.pending_faults() == 0
    assert api.calls == 3
    assert [record.status for record in api.log] == [500, 0, 200]


def test_times_repeats_a_fault_and_clear_faults_drops_them(api: FakeApi) -> None:
    api.fail_next("timeout", times=2)
    for _ in range(2):
        with pytest.raises(httpx.ReadTimeout):
            api.list_since()
    assert len(api.list_since().data) == 2
    api.fail_next(503, times=3)
    api.clear_faults()
    assert api.pending_faults() == 0
    assert len(api.list_page().data) == 2


def test_direct_429_carries_retry_after_and_is_a_throttle(api: FakeApi) -> None:
    api.fail_next(429, retry_after=7)
    api.fail_next(503, retry_after=dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC))
    with pytest.raises(HttpError) as first:
        api.list_since(limit=1)
    assert (first.value.status, first.value.retry_after, first.value.is_throttle) == (
        429,
        7.0,
        True,
    )
    assert first.value.url == "https://fake.api/items?limit=1"
    with pytest.raises(HttpError) as second:
        api.list_since()
    assert (second.value.retry_after, second.value.is_throttle) == (30.0, True)


def test_direct_malformed_answer_raises_a_json_error(api: FakeApi) -> None:
    api.fail_next("malformed")
    with pytest.raises(json.JSONDecodeError):
        api.list_all()
    assert api.log[-1].status == 200


async def test_http_fault_sends_status_retry_after_and_problem(
    api: FakeApi, http: httpx.AsyncClient
) -> None:
    api.fail_next(429, retry_after=5)
    response = await http.get("/items")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "5"
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json() == {"type": "about:blank", "title": "Too Many Requests", "status": 429}
    assert (await http.get("/items")).status_code == 200


@pytest.mark.parametrize(
    ("retry_after", "header"),
    [
        (1.5, "1.5"),
        (dt.timedelta(minutes=2), "120"),
        (dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC), "Thu, 01 Jan 2026 00:00:30 GMT"),
        (
            dt.datetime(2026, 1, 1, 1, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            "Thu, 01 Jan 2026 00:00:30 GMT",
        ),
        ("soon", "soon"),
    ],
)
async def test_retry_after_forms(
    api: FakeApi, http: httpx.AsyncClient, retry_after: object, header: str
) -> None:
    api.fail_next(503, retry_after=retry_after)  # type: ignore[arg-type]
    response = await http.get("/items/all")
    assert (response.status_code, response.headers["retry-after"]) == (503, header)


async def test_problem_body_and_header_overrides(api: FakeApi, http: httpx.AsyncClient) -> None:
    problem = {"type": "https://errors.example/cursor", "title": "Invalid cursor", "status": 422}
    api.fail_next(422, problem=problem, headers={"X-Request-Id": "r-1"})
    api.fail_next(502, body="<html>bad gateway</html>", headers={"content-type": "text/html"})
    api.fail_next(200, body={"data": "not a list"})
    first = await http.get("/items")
    assert (first.status_code, first.json(), first.headers["x-request-id"]) == (422, problem, "r-1")
    assert first.headers["content-type"] == "application/problem+json"
    second = await http.get("/items")
    assert (second.status_code, second.text) == (502, "<html>bad gateway</html>")
    assert second.headers["content-type"] == "text/html"
    third = await http.get("/items")
    assert (third.status_code, third.json()) == (200, {"data": "not a list"})


async def test_network_timeout_and_malformed_over_the_transport(
    api: FakeApi, http: httpx.AsyncClient
) -> None:
    api.fail_next("network")
    api.fail_next("timeout")
    api.fail_next("malformed")
    with pytest.raises(httpx.ConnectError):
        await http.get("/items")
    with pytest.raises(httpx.ReadTimeout):
        await http.get("/items")
    broken = await http.get("/items")
    assert (broken.status_code, broken.headers["content-type"]) == (200, "application/json")
    with pytest.raises(json.JSONDecodeError):
        broken.json()
    assert [record.status for record in api.log] == [0, 0, 200]
    assert api.calls == 3


async def test_faults_can_target_a_path(api: FakeApi, http: httpx.AsyncClient) -> None:
    api.fail_next(503, path="/items/page")
    api.fail_next(500, path="/t/*/items")
    assert (await http.get("/items")).status_code == 200
    assert (await http.get("/t/acme/items/page")).status_code == 200
    assert api.pending_faults() == 2
    assert (await http.get("/t/acme/items")).status_code == 500
    assert (await http.get("/items/page")).status_code == 503
    assert api.pending_faults() == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((99,), {}, r"^status: expected an HTTP status 200-599, got 99"),
        (("boom",), {}, r"^status: expected an HTTP status or one of network, timeout, malformed"),
        ((True,), {}, r"^status: expected an HTTP status 200-599, got True"),
        (("network",), {"retry_after": 1}, r"^retry_after: a network fault sends no response"),
        (("timeout",), {"body": "x"}, r"^body: a timeout fault sends no response"),
        ((500,), {"times": 0}, r"^times: expected a positive integer, got 0"),
        ((500,), {"problem": {}, "body": "x"}, r"^problem: give either problem or body"),
        ((500,), {"path": "items"}, r"^path: expected a path glob starting with '/'"),
        ((429,), {"retry_after": -1}, r"^retry_after: expected seconds, a datetime"),
        (("malformed",), {"body": {"a": 1}}, r"^body: a malformed fault takes raw text"),
    ],
)
def test_fail_next_validates(
    api: FakeApi, args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        api.fail_next(*args, **kwargs)  # type: ignore[arg-type]
    assert api.pending_faults() == 0


# --- rate limits --------------------------------------------------------------------------


async def test_ietf_headers_count_down_and_429_when_exhausted(
    api: FakeApi, http: httpx.AsyncClient, clock: VirtualClock
) -> None:
    api.set_rate_limit("ietf", limit=2, window="30s")
    first = await http.get("/items")
    assert first.headers["ratelimit"] == '"default";r=1;t=30'
    assert first.headers["ratelimit-policy"] == '"default";q=2;w=30'
    await clock.advance("10s")
    second = await http.get("/items")
    assert second.headers["ratelimit"] == '"default";r=0;t=20'
    denied = await http.get("/items")
    assert denied.status_code == 429
    assert denied.headers["retry-after"] == "20"
    assert denied.headers["ratelimit"] == '"default";r=0;t=20'
    assert denied.headers["content-type"] == "application/problem+json"
    assert denied.json()["title"] == "Too Many Requests"
    await clock.advance("20s")
    fresh = await http.get("/items")
    assert (fresh.status_code, fresh.headers["ratelimit"]) == (200, '"default";r=1;t=30')
    assert "ratelimit-limit" not in fresh.headers
    assert "x-ratelimit-limit" not in fresh.headers


async def test_legacy_headers_use_delta_seconds_rounded_up(
    api: FakeApi, http: httpx.AsyncClient, clock: VirtualClock
) -> None:
    api.set_rate_limit("legacy", limit=5, window="1m")
    await http.get("/items")
    await clock.advance("1500ms")
    response = await http.get("/items")
    assert {
        k: response.headers[k]
        for k in ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset")
    } == {
        "ratelimit-limit": "5",
        "ratelimit-remaining": "3",
        "ratelimit-reset": "59",
    }
    assert "ratelimit" not in response.headers


@pytest.mark.parametrize(
    ("style", "reset", "prefix", "value"),
    [
        ("vendor", None, "x-ratelimit", "1767225660"),
        ("vendor", "epoch", "x-ratelimit", "1767225660"),
        ("vendor", "epoch_ms", "x-ratelimit", "1767225660000"),
        ("vendor", "delta", "x-ratelimit", "60"),
        ("vendor-x-rate", None, "x-rate-limit", "1767225660"),
    ],
)
async def test_vendor_headers(
    api: FakeApi, http: httpx.AsyncClient, style: str, reset: str | None, prefix: str, value: str
) -> None:
    api.set_rate_limit(style, limit=60, window=60, reset=reset, reset_after=True)  # type: ignore[arg-type]
    response = await http.get("/items/all")
    assert response.headers[f"{prefix}-limit"] == "60"
    assert response.headers[f"{prefix}-remaining"] == "59"
    assert response.headers[f"{prefix}-reset"] == value
    assert response.headers[f"{prefix}-reset-after"] == "60"


async def test_rate_limit_rides_on_faults_and_304s_and_turns_off(
    api: FakeApi, http: httpx.AsyncClient
) -> None:
    api.set_rate_limit("ietf", limit=10, window="10s")
    api.set_etags()
    api.fail_next(500)
    fault = await http.get("/items/all")
    assert (fault.status_code, fault.headers["ratelimit"]) == (500, '"default";r=9;t=10')
    ok = await http.get("/items/all")
    cached = await http.get("/items/all", headers={"if-none-match": ok.headers["etag"]})
    assert (cached.status_code, cached.headers["ratelimit"]) == (304, '"default";r=7;t=10')
    api.set_rate_limit(None)
    assert "ratelimit" not in (await http.get("/items/all")).headers


def test_direct_calls_count_against_the_limit(api: FakeApi, clock: VirtualClock) -> None:
    api.set_rate_limit("legacy", limit=1, window="5s")
    api.list_all()
    with pytest.raises(HttpError) as caught:
        api.list_all()
    assert (caught.value.status, caught.value.retry_after, caught.value.is_throttle) == (
        429,
        5.0,
        True,
    )
    assert [record.status for record in api.log] == [200, 429]


async def test_windows_per_tenant_and_per_client(api: FakeApi, http: httpx.AsyncClient) -> None:
    api.set_rate_limit("legacy", limit=1, window="10s", per="tenant")
    assert (await http.get("/items")).status_code == 200
    assert (await http.get("/t/acme/items")).status_code == 200
    assert (await http.get("/items")).status_code == 429
    api.set_rate_limit("legacy", limit=1, window="10s", per="client")
    assert (await http.get("/items", headers={"x-client-id": "a"})).status_code == 200
    assert (await http.get("/items", headers={"x-client-id": "b"})).status_code == 200
    assert (await http.get("/items", headers={"x-client-id": "a"})).status_code == 429


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("graphql",), {}, r"^style: expected 'ietf', 'legacy', 'vendor', 'vendor-x-rate' or None"),
        (("ietf",), {"limit": 0}, r"^limit: expected a positive integer, got 0"),
        (("ietf",), {"window": "0s"}, r"^window: must be greater than zero"),
        (("ietf",), {"window": "soon"}, r"^window: expected a duration"),
        (("ietf",), {"reset": "epoch"}, r"^reset: expected 'delta' for ietf, got 'epoch'"),
        (("vendor",), {"reset": "hours"}, r"^reset: expected 'delta', 'epoch' or 'epoch_ms'"),
        (("legacy",), {"reset_after": True}, r"^reset_after: only vendor styles send it"),
        (("ietf",), {"per": "ip"}, r"^per: expected 'api', 'tenant' or 'client', got 'ip'"),
    ],
)
def test_set_rate_limit_validates(
    api: FakeApi, args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        api.set_rate_limit(*args, **kwargs)  # type: ignore[arg-type]


# --- conditional requests -----------------------------------------------------------------


async def test_strong_etag_and_304(api: FakeApi, http: httpx.AsyncClient) -> None:
    api.set_etags()
    first = await http.get("/items/all")
    etag = first.headers["etag"]
    assert etag == '"' + hashlib.sha256(first.content).hexdigest()[:32] + '"'
    cached = await http.get("/items/all", headers={"If-None-Match": etag})
    assert (cached.status_code, cached.content, cached.headers["etag"]) == (304, b"", etag)
    assert "content-type" not in cached.headers
    assert api.log[-1].status == 304
    for header in (f'"x", W/{etag}', "*"):
        assert (await http.get("/items/all", headers={"if-none-match": header})).status_code == 304
    assert (await http.get("/items/all", headers={"if-none-match": '"stale"'})).status_code == 200
    api.update("item-001", total=1)
    changed = await http.get("/items/all", headers={"if-none-match": etag})
    assert changed.status_code == 200
    assert changed.headers["etag"] != etag
    single = await http.get("/items/item-002")
    assert "etag" in single.headers
    assert "etag" not in (await http.get("/items/nope")).headers


async def test_etags_are_off_by_default_and_can_be_turned_off(
    api: FakeApi, http: httpx.AsyncClient
) -> None:
    assert "etag" not in (await http.get("/items/all")).headers
    api.set_etags()
    etag = (await http.get("/items/all")).headers["etag"]
    api.set_etags(False)
    response = await http.get("/items/all", headers={"if-none-match": etag})
    assert (response.status_code, response.headers.get("etag")) == (200, None)


async def test_last_modified_and_if_modified_since(
    api: FakeApi, http: httpx.AsyncClient, clock: VirtualClock
) -> None:
    api.set_last_modified()
    first = await http.get("/items")
    stamp = first.headers["last-modified"]
    assert stamp == "Thu, 01 Jan 2026 00:00:00 GMT"
    cached = await http.get("/items", headers={"if-modified-since": stamp})
    assert (cached.status_code, cached.headers["last-modified"]) == (304, stamp)
    await clock.advance("5s")
    api.update("item-001", total=5)
    changed = await http.get("/items", headers={"if-modified-since": stamp})
    assert (changed.status_code, changed.headers["last-modified"]) == (
        200,
        "Thu, 01 Jan 2026 00:00:05 GMT",
    )
    # If-None-Match wins over If-Modified-Since.
    both = await http.get("/items", headers={"if-modified-since": stamp, "if-none-match": '"x"'})
    assert both.status_code == 200
    other = await http.get("/t/acme/items", headers={"if-modified-since": stamp})
    assert other.status_code == 304  # acme did not change


# --- latency ------------------------------------------------------------------------------


async def test_latency_waits_on_the_virtual_clock(
    api: FakeApi, http: httpx.AsyncClient, clock: VirtualClock
) -> None:
    api.set_latency("250ms")
    assert api.latency_ms == 250
    task = asyncio.create_task(http.get("/items/all"))
    await clock.settle()
    assert not task.done()
    assert clock.pending_timers() == 1
    assert api.calls == 0
    await clock.advance("249ms")
    assert not task.done()
    await clock.advance("1ms")
    assert task.done()
    assert task.result().status_code == 200
    assert api.log[0].at == T0 + 250


async def test_faults_apply_after_the_latency(
    api: FakeApi, http: httpx.AsyncClient, clock: VirtualClock
) -> None:
    api.set_latency(0.1)
    api.fail_next("network")
    task = asyncio.create_task(http.get("/items"))
    await clock.settle()
    assert not task.done()
    await clock.advance("100ms")
    with pytest.raises(httpx.ConnectError):
        await task
    api.set_latency(0)
    assert (await http.get("/items")).status_code == 200


def test_set_latency_validates(api: FakeApi) -> None:
    with pytest.raises(ConfigError, match=r"^latency: expected a non-negative finite duration"):
        api.set_latency(-1)
    with pytest.raises(ConfigError, match=r"^latency: expected a duration like"):
        api.set_latency("fast")


# --- log and stats ------------------------------------------------------------------------


async def test_log_records_requests_with_redacted_headers_and_client_id(
    api: FakeApi, http: httpx.AsyncClient, clock: VirtualClock
) -> None:
    await clock.advance("1234ms")
    headers = {"Authorization": "Bearer s3cret", "X-Api-Key": "k", "X-Client-Id": "worker-1"}
    await http.get("/t/acme/items", params={"limit": 1}, headers=headers)
    await http.post("/nope")
    first, second = api.log
    assert (first.seq, first.at, first.method, first.path, first.route) == (
        1,
        T0 + 1234,
        "GET",
        "/t/acme/items",
        "since",
    )
    assert (first.query, first.status, first.client, first.tenant) == (
        {"limit": "1"},
        200,
        "worker-1",
        "acme",
    )
    assert first.headers["authorization"] == "***"
    assert first.headers["x-api-key"] == "***"
    assert first.headers["x-client-id"] == "worker-1"
    assert "s3cret" not in json.dumps(first.to_dict())
    assert (second.method, second.path, second.route, second.status, second.client) == (
        "POST",
        "/nope",
        None,
        404,
        None,
    )


def test_reset_stats_keeps_counting_seq(api: FakeApi) -> None:
    api.list_all()
    api.list_all()
    api.fail_next(500)
    api.reset_stats()
    assert (api.calls, api.log, api.pending_faults()) == (0, [], 1)
    with pytest.raises(HttpError):
        api.list_all()
    assert [record.seq for record in api.log] == [3]
    assert api.last_seq == 3
    assert [record.seq for record in api.log_after(2)] == [3]
    assert api.log_after(3) == []


def test_log_limit_keeps_the_most_recent(clock: VirtualClock) -> None:
    api = FakeApi(clock, log_limit=2)
    for _ in range(3):
        api.list_all()
    assert [record.seq for record in api.log] == [2, 3]
    assert api.calls == 3
