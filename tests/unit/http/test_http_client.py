"""``ctx.http`` end to end over ``httpx.MockTransport``: no network, virtual clock."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from importlib import metadata

import httpx
import pytest
from http_fakes import BASE, KEY, LEASE, NOW, FakeGate, HttpRig

from watukuy.budget import InMemoryBudgetStore
from watukuy.budget.manager import BudgetManager
from watukuy.http import MAX_ERROR_BODY, HttpClient, HttpxFactory, build_url, url_hash
from watukuy.model.errors import (
    BudgetTimeoutError,
    ConfigError,
    HttpError,
    LeaseLostError,
    NotModifiedError,
    StoreError,
)
from watukuy.model.http_port import BudgetGate, HttpFactory
from watukuy.model.options import Budget
from watukuy.model.rows import RateLimitInfo, Validator

# --- URL and query building -------------------------------------------------------------


async def test_query_drops_none_repeats_lists_and_writes_booleans(rig: HttpRig) -> None:
    res = await rig.http().get(
        BASE,
        params={
            "a": 1,
            "b": ["x", "y", None],
            "c": None,
            "d": True,
            "e": False,
            "f": "sp ace&more",
            "g": 1.5,
            "h": 2.0,
            "i": ("t1", "t2"),
        },
    )
    expected = f"{BASE}?a=1&b=x&b=y&d=true&e=false&f=sp+ace%26more&g=1.5&h=2&i=t1&i=t2"
    assert str(rig.requests[0].url) == expected
    assert res.url == expected
    assert rig.requests[0].url.params.get_list("b") == ["x", "y"]


def test_build_url_keeps_the_existing_query_and_drops_the_fragment() -> None:
    assert build_url(f"{BASE}?page=2#top", {"limit": 10}) == f"{BASE}?page=2&limit=10"
    assert build_url(BASE) == BASE
    assert build_url(BASE, {"only": None}) == BASE
    assert build_url(httpx.URL(BASE), {"q": "é"}) == f"{BASE}?q=%C3%A9"


@pytest.mark.parametrize("url", ["/items", "api.example.com/items", "ftp://x.example/f", ""])
async def test_relative_or_non_http_urls_are_a_config_error(rig: HttpRig, url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        await rig.http().get(url)
    assert caught.value.field == "url"
    assert repr(url) in str(caught.value)
    assert rig.requests == []


async def test_unsupported_query_values_are_a_config_error(rig: HttpRig) -> None:
    with pytest.raises(ConfigError, match=r"^params.since: expected a string.*got \{'a': 1\}"):
        await rig.http().get(BASE, params={"since": {"a": 1}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"^params.x: .*got nan"):
        await rig.http().get(BASE, params={"x": float("nan")})
    assert rig.requests == []


def test_url_hash_is_sha256_hex_of_the_full_url() -> None:
    url = "https://api.example.com/items?page=1"
    assert url_hash(url) == hashlib.sha256(url.encode()).hexdigest()
    assert url_hash(f"{BASE}?page=1") != url_hash(f"{BASE}?page=2")
    assert url_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# --- headers and methods ----------------------------------------------------------------


async def test_default_user_agent_and_accept(rig: HttpRig) -> None:
    await rig.http().get(BASE)
    headers = rig.requests[0].headers
    assert headers["user-agent"] == f"watukuy/{metadata.version('watukuy')}"
    assert headers["accept"] == "application/json"


async def test_caller_headers_override_defaults_whatever_their_case(rig: HttpRig) -> None:
    await rig.http().get(BASE, headers={"User-Agent": "custom/2", "ACCEPT": "text/csv"})
    headers = rig.requests[0].headers
    assert headers.get_list("user-agent") == ["custom/2"]
    assert headers.get_list("accept") == ["text/csv"]


async def test_factory_user_agent_replaces_the_default(rig: HttpRig) -> None:
    factory = HttpxFactory(rig.client, user_agent="my-app/1.0")
    await factory.bind(rig.scope()).get(BASE)
    assert rig.requests[0].headers["user-agent"] == "my-app/1.0"


async def test_request_sends_method_and_json_body(rig: HttpRig) -> None:
    rig.reply(201, json={"id": 9})
    res = await rig.http().request("post", BASE, json={"name": "x"})
    sent = rig.requests[0]
    assert sent.method == "POST"
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.content) == {"name": "x"}
    assert (res.status, res.ok, res.json()) == (201, True, {"id": 9})


async def test_request_sends_raw_content(rig: HttpRig) -> None:
    await rig.http().request("PUT", BASE, content=b"raw-bytes")
    assert rig.requests[0].content == b"raw-bytes"


async def test_bad_request_arguments_are_config_errors(rig: HttpRig) -> None:
    http = rig.http()
    with pytest.raises(ConfigError, match=r"^method: .*got 'G E T'"):
        await http.request("G E T", BASE)
    with pytest.raises(ConfigError, match=r"^json: pass either json or content"):
        await http.request("POST", BASE, json={}, content=b"x")
    with pytest.raises(ConfigError, match=r"^timeout: .*got 'soon'"):
        await http.get(BASE, timeout="soon")
    with pytest.raises(ConfigError, match=r"^headers: .*'x-page': 5"):
        await http.get(BASE, headers={"x-page": 5})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"^headers: .*'Authorization': \*\*\*$"):
        await http.get(BASE, headers={"Authorization": b"Bearer s3cret"})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"^cost: .*got -1"):
        await http.get(BASE, cost=-1)
    assert rig.requests == []


async def test_timeout_is_a_duration_passed_to_httpx(rig: HttpRig) -> None:
    await rig.http().get(BASE, timeout="2500ms")
    timeout = rig.requests[0].extensions["timeout"]
    assert timeout == {"connect": 2.5, "read": 2.5, "write": 2.5, "pool": 2.5}


# --- conditional requests ---------------------------------------------------------------


async def test_stored_validators_are_sent_and_new_ones_stored(rig: HttpRig) -> None:
    url = f"{BASE}?page=1"
    rig.store.validators[(KEY, url_hash(url))] = Validator(
        etag='"v1"', last_modified="Wed, 21 Oct 2015 07:28:00 GMT", stored_at=1
    )
    rig.reply(200, json=[], headers={"ETag": '"v2"'})
    res = await rig.http().get(BASE, params={"page": 1})
    assert res.ok
    assert rig.store.gets == [(KEY, url_hash(url))]
    sent = rig.requests[0].headers
    assert sent["if-none-match"] == '"v1"'
    assert sent["if-modified-since"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert rig.store.sets == [
        (KEY, LEASE, url_hash(url), Validator(etag='"v2"', last_modified=None, stored_at=NOW))
    ]


async def test_caller_conditional_headers_win(rig: HttpRig) -> None:
    rig.store.validators[(KEY, url_hash(BASE))] = Validator('"stored"', None, 1)
    await rig.http().get(BASE, headers={"If-None-Match": '"mine"'})
    assert rig.requests[0].headers.get_list("if-none-match") == ['"mine"']


async def test_nothing_is_stored_when_the_response_has_no_validators(rig: HttpRig) -> None:
    await rig.http().get(BASE)
    assert rig.store.sets == []


async def test_validators_default_to_get_and_head_and_can_be_forced(rig: HttpRig) -> None:
    rig.reply(200, json=[], headers={"Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT"})
    http = rig.http()
    await http.request("POST", BASE)
    await http.get(BASE, validators=False)
    assert rig.store.gets == []
    assert rig.store.sets == []
    await http.request("POST", BASE, validators=True)
    await http.request("HEAD", BASE)
    assert len(rig.store.gets) == 2
    assert [v.last_modified for *_, v in rig.store.sets] == ["Wed, 21 Oct 2015 07:28:00 GMT"] * 2


async def test_304_is_ok_not_modified_and_has_no_body(rig: HttpRig) -> None:
    rig.reply(304, headers={"ETag": '"a"'})
    res = await rig.http().get(BASE)
    assert (res.status, res.ok, res.not_modified) == (304, True, True)
    assert rig.observations.not_modified is True
    for read in (lambda: res.json(), lambda: res.text, lambda: res.content):
        with pytest.raises(NotModifiedError, match="304 Not Modified, which has no body") as caught:
            read()
        assert caught.value.code == "INVALID_STATE"
    assert rig.store.sets == []


async def test_a_200_does_not_set_not_modified(rig: HttpRig) -> None:
    res = await rig.http().get(BASE)
    assert (res.status, res.ok, res.not_modified) == (200, True, False)
    assert rig.observations.not_modified is False
    assert res.json() == {"ok": True}
    assert res.text == '{"ok":true}'
    assert res.content == b'{"ok":true}'


async def test_lease_lost_while_storing_validators_propagates(rig: HttpRig) -> None:
    rig.store.lease_lost = True
    rig.reply(200, json=[], headers={"ETag": '"x"'})
    with pytest.raises(LeaseLostError) as caught:
        await rig.http().get(BASE)
    assert (caught.value.poller, caught.value.partition, caught.value.epoch) == ("orders", "eu", 7)


async def test_validator_store_failures_only_cost_the_shortcut(
    rig: HttpRig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=rig.logger.name)
    rig.store.fail_get = StoreError("db down")
    rig.store.fail_set = StoreError("db down")
    rig.reply(200, json=[], headers={"ETag": '"x"'})
    res = await rig.http().get(BASE)
    assert res.ok
    assert "if-none-match" not in rig.requests[0].headers
    assert [r.getMessage() for r in caplog.records] == [
        f"could not load HTTP validators for {BASE}: db down",
        f"could not store HTTP validators for {BASE}: db down",
    ]


# --- errors -----------------------------------------------------------------------------


async def test_a_429_problem_raises_a_complete_http_error(rig: HttpRig) -> None:
    body = json.dumps({"title": "Too Many Requests", "status": 429, "detail": "slow down"})
    rig.reply(
        429,
        content=body.encode(),
        headers={
            "content-type": "application/problem+json",
            "Retry-After": "120",
            "RateLimit": '"default";r=0;t=120',
            "RateLimit-Policy": '"default";q=100;w=60',
        },
    )
    with pytest.raises(HttpError) as caught:
        await rig.http().get(BASE, params={"q": "x"})
    error = caught.value
    info = RateLimitInfo(
        limit=100, remaining=0, reset_at=NOW + 120_000, policy='"default";q=100;w=60', source="ietf"
    )
    assert str(error) == f"GET {BASE}?q=x responded 429: Too Many Requests"
    assert (error.code, error.status, error.method, error.url) == (
        "HTTP",
        429,
        "GET",
        f"{BASE}?q=x",
    )
    assert error.retry_after == 120.0
    assert error.rate_limit == info
    assert error.problem == {"title": "Too Many Requests", "status": 429, "detail": "slow down"}
    assert error.body_text == body
    assert error.is_throttle is True
    assert rig.observations.rate_limit == info


async def test_a_503_with_an_http_date_retry_after_is_a_throttle(rig: HttpRig) -> None:
    rig.reply(503, text="busy", headers={"Retry-After": "Tue, 14 Nov 2023 22:14:20 GMT"})
    with pytest.raises(HttpError) as caught:
        await rig.http().get(BASE)
    # NOW is 2023-11-14T22:13:20Z: the date is 60 seconds ahead.
    assert caught.value.retry_after == 60.0
    assert caught.value.is_throttle is True
    assert str(caught.value) == f"GET {BASE} responded 503"


@pytest.mark.parametrize(("status", "throttle"), [(503, False), (500, False), (429, True)])
async def test_throttle_without_retry_after(rig: HttpRig, status: int, throttle: bool) -> None:
    rig.reply(status, text="x")
    with pytest.raises(HttpError) as caught:
        await rig.http().get(BASE)
    assert caught.value.retry_after is None
    assert caught.value.is_throttle is throttle


async def test_message_uses_detail_when_there_is_no_title(rig: HttpRig) -> None:
    rig.reply(422, json={"detail": "Invalid cursor", "code": "E42"})
    with pytest.raises(HttpError) as caught:
        await rig.http().request("delete", BASE)
    assert str(caught.value) == f"DELETE {BASE} responded 422: Invalid cursor"
    assert caught.value.problem == {"detail": "Invalid cursor", "code": "E42"}


async def test_error_body_is_capped_at_64_kib(rig: HttpRig) -> None:
    rig.reply(500, content=b"x" * (MAX_ERROR_BODY + 10_000))
    with pytest.raises(HttpError) as caught:
        await rig.http().get(BASE)
    assert len(caught.value.body_text) == MAX_ERROR_BODY == 65_536


async def test_an_empty_error_body(rig: HttpRig) -> None:
    rig.reply(404)
    with pytest.raises(HttpError) as caught:
        await rig.http().get(BASE)
    error = caught.value
    assert (error.body_text, error.problem, error.retry_after) == ("", None, None)
    assert str(error) == f"GET {BASE} responded 404"


async def test_raise_for_status_false_returns_the_error_response(rig: HttpRig) -> None:
    rig.reply(500, text="nope", headers={"content-type": "text/plain"})
    res = await rig.http().get(BASE, raise_for_status=False)
    assert (res.status, res.ok, res.not_modified, res.text) == (500, False, False, "nope")
    assert rig.store.sets == []


async def test_responses_speak_httpx(rig: HttpRig) -> None:
    rig.reply(200, json={"data": [1]}, headers={"x-total": "1"})
    res = await rig.http().get(BASE)
    assert (res.status_code, res.is_success, res.headers["X-Total"]) == (200, True, "1")
    assert (res.json(), json.loads(res.text)) == ({"data": [1]}, {"data": [1]})
    assert res.raise_for_status() is res


async def test_raise_for_status_raises_what_the_request_would_have(rig: HttpRig) -> None:
    rig.reply(
        429,
        json={"title": "Slow down"},
        headers={"content-type": "application/problem+json", "retry-after": "7"},
    )
    res = await rig.http().get(BASE, raise_for_status=False)
    assert (res.status_code, res.is_success) == (429, False)
    with pytest.raises(HttpError) as caught:
        res.raise_for_status()
    error = caught.value
    assert str(error) == f"GET {BASE} responded 429: Slow down"
    assert (error.status, error.retry_after, error.is_throttle) == (429, 7, True)
    assert error.problem == {"title": "Slow down"}


async def test_raise_for_status_on_a_304_returns_the_response(rig: HttpRig) -> None:
    rig.reply(304)
    res = await rig.http().get(BASE)
    assert res.raise_for_status() is res


async def test_network_errors_and_timeouts_propagate_unwrapped(rig: HttpRig) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    rig.responder = fail
    with pytest.raises(httpx.ConnectError):
        await rig.http().get(BASE)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    rig.responder = slow
    with pytest.raises(httpx.ReadTimeout):
        await rig.http().get(BASE)
    assert rig.observations.requests == 2


async def test_the_helper_never_retries(rig: HttpRig) -> None:
    rig.reply(500, text="boom")
    with pytest.raises(HttpError):
        await rig.http().get(BASE)
    assert len(rig.requests) == 1


# --- rate limits ------------------------------------------------------------------------


async def test_rate_limit_headers_reach_the_response_and_observations(rig: HttpRig) -> None:
    rig.reply(
        200,
        json=[],
        headers={
            "X-RateLimit-Limit": "60",
            "X-RateLimit-Remaining": "59",
            "X-RateLimit-Reset": "30",
        },
    )
    http = rig.http()
    res = await http.get(BASE)
    info = RateLimitInfo(limit=60, remaining=59, reset_at=NOW + 30_000, source="vendor")
    assert res.rate_limit == info
    assert rig.observations.rate_limit == info
    rig.reply(200, json=[])
    res = await http.get(BASE)
    # A response without the headers keeps the latest known information.
    assert res.rate_limit is None
    assert rig.observations.rate_limit == info
    assert rig.observations.requests == 2


# --- telling when a request goes out ---------------------------------------------------


async def test_on_sending_is_called_before_the_request_reaches_the_transport(
    rig: HttpRig,
) -> None:
    told: list[int] = []  # requests the transport had seen when told
    http = rig.http(on_sending=lambda: told.append(len(rig.requests)))
    await http.get(BASE)
    await http.get(BASE)
    assert told == [0, 1]


async def test_on_sending_is_called_before_a_budget_grant_that_may_wait(rig: HttpRig) -> None:
    gate = FakeGate(waited=1_500)
    told: list[int] = []  # budget calls made when told
    http = rig.http(gate=gate, budget="erp", on_sending=lambda: told.append(len(gate.calls)))
    await http.get(BASE)
    assert told[0] == 0  # before the grant, then again before the send
    assert len(rig.requests) == 1


# --- budget -----------------------------------------------------------------------------


async def test_budget_is_charged_before_sending(rig: HttpRig) -> None:
    gate = FakeGate()
    http = rig.http(
        gate=gate, budget="erp", budget_cost=2.0, budget_weight=3.0, lane="backfill", max_wait_ms=9
    )
    await http.get(BASE)
    await http.get(BASE, cost=5)
    await http.get(BASE, cost=0)
    assert gate.calls == [
        {
            "budget": "erp",
            "requester": "orders/eu",
            "lane": "backfill",
            "weight": 3.0,
            "cost": cost,
            "max_wait_ms": 9,
        }
        for cost in (2.0, 5.0)
    ]
    assert gate.sent_before == [0, 1]
    assert len(rig.requests) == 3


async def test_no_budget_or_no_gate_means_no_charge(rig: HttpRig) -> None:
    gate = FakeGate()
    await rig.http(gate=gate, budget=None).get(BASE)
    await rig.http(gate=None, budget="erp").get(BASE)
    assert gate.calls == []


async def test_budget_timeout_sends_nothing(rig: HttpRig) -> None:
    gate = FakeGate(error=BudgetTimeoutError("erp", 1_000))
    with pytest.raises(BudgetTimeoutError):
        await rig.http(gate=gate, budget="erp").get(BASE)
    assert rig.requests == []
    assert rig.observations.requests == 0


async def test_a_wait_is_reported_to_the_hook_and_observations(rig: HttpRig) -> None:
    seen: list[tuple[str, int]] = []

    async def on_wait(budget: str, waited: int) -> None:
        await asyncio.sleep(0)
        seen.append((budget, waited))

    http = rig.http(gate=FakeGate(waited=1_500), budget="erp", on_budget_wait=on_wait)
    await http.get(BASE)
    await http.get(BASE)
    assert seen == [("erp", 1_500), ("erp", 1_500)]
    assert rig.observations.waited_ms == 3_000


async def test_a_failing_wait_hook_does_not_fail_the_request(
    rig: HttpRig, caplog: pytest.LogCaptureFixture
) -> None:
    def on_wait(budget: str, waited: int) -> None:
        raise RuntimeError("hook boom")

    caplog.set_level(logging.WARNING, logger=rig.logger.name)
    http = rig.http(gate=FakeGate(waited=10), budget="erp", on_budget_wait=on_wait)
    assert (await http.get(BASE)).ok
    assert [r.getMessage() for r in caplog.records] == ["on_budget_wait failed: hook boom"]


async def test_with_the_real_budget_manager_on_a_virtual_clock(rig: HttpRig) -> None:
    manager = BudgetManager({"erp": Budget(requests=1, per="1s")}, InMemoryBudgetStore(), rig.clock)
    assert isinstance(manager, BudgetGate)
    waits: list[tuple[str, int]] = []
    http = rig.http(gate=manager, budget="erp", on_budget_wait=lambda b, w: waits.append((b, w)))
    await http.get(BASE)
    second = asyncio.ensure_future(http.get(BASE))
    await rig.clock.advance("999ms")
    assert len(rig.requests) == 1
    await rig.clock.advance("1ms")
    assert (await second).ok
    assert len(rig.requests) == 2
    assert waits == [("erp", 1_000)]
    assert rig.observations.waited_ms == 1_000


# --- logging ----------------------------------------------------------------------------


async def test_logged_requests_never_show_credentials(
    rig: HttpRig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=rig.logger.name)
    rig.reply(200, json={}, headers={"Set-Cookie": "session=s3ss10n", "X-Trace": "t-1"})
    await rig.http().get(
        BASE, headers={"Authorization": "Bearer s3cret", "X-Api-Key": "k3y", "X-Tenant": "eu"}
    )
    [record] = caplog.records
    assert record.levelno == logging.DEBUG
    assert record.getMessage() == f"GET {BASE} -> 200"
    assert record.__dict__["method"] == "GET"
    assert record.__dict__["url"] == BASE
    assert record.__dict__["status"] == 200
    assert record.__dict__["request_headers"]["authorization"] == "***"
    assert record.__dict__["request_headers"]["x-api-key"] == "***"
    assert record.__dict__["request_headers"]["x-tenant"] == "eu"
    assert record.__dict__["response_headers"]["set-cookie"] == "***"
    assert record.__dict__["response_headers"]["x-trace"] == "t-1"
    dumped = repr(record.__dict__) + caplog.text
    for secret in ("s3cret", "k3y", "s3ss10n"):
        assert secret not in dumped
    # The request itself still carried the real header.
    assert rig.requests[0].headers["authorization"] == "Bearer s3cret"


async def test_failed_requests_are_logged_redacted(
    rig: HttpRig, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    caplog.set_level(logging.DEBUG, logger=rig.logger.name)
    rig.responder = fail
    with pytest.raises(httpx.ConnectError):
        await rig.http().get(BASE, headers={"cookie": "id=s3cret"})
    [record] = caplog.records
    assert record.getMessage() == f"GET {BASE} failed: refused"
    assert record.__dict__["request_headers"]["cookie"] == "***"
    assert "s3cret" not in repr(record.__dict__)


# --- the factory ------------------------------------------------------------------------


async def test_an_injected_client_is_never_closed(rig: HttpRig) -> None:
    factory = HttpxFactory(rig.client)
    assert factory.client is rig.client
    await factory.aclose()
    assert rig.client.is_closed is False


async def test_an_owned_client_is_created_lazily_and_closed() -> None:
    factory = HttpxFactory()
    first = factory.client
    assert factory.client is first
    assert first.follow_redirects is True
    assert first.timeout == httpx.Timeout(30.0)
    await factory.aclose()
    assert first.is_closed is True
    second = factory.client
    assert second is not first
    await factory.aclose()
    assert second.is_closed is True


async def test_bind_returns_the_helper_without_io(rig: HttpRig) -> None:
    assert isinstance(rig.factory, HttpFactory)
    http = rig.factory.bind(rig.scope())
    assert isinstance(http, HttpClient)
    assert repr(http) == "<HttpClient orders/eu lane=live>"
    assert rig.requests == []


def test_factory_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"^user_agent: expected a non-empty string, got ''"):
        HttpxFactory(user_agent="")
    with pytest.raises(ConfigError, match=r"^http_client: expected an httpx.AsyncClient"):
        HttpxFactory(httpx.Client())  # type: ignore[arg-type]
