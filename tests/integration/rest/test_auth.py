"""The auth kinds of declarative pollers against real servers on 127.0.0.1, through a
``ctx.http`` bound as the engine binds it (and, for what is stored, through an engine).

The OAuth2 tests run against :class:`support.rest_vendors.OAuthVendor`, whose API
refuses missing, unknown and expired tokens, and which counts every token request.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

import watukuy as wk
from support.rest_vendors import OAuthVendor
from support.servers import ScriptedServer, engine_http, reply_with
from watukuy import rest
from watukuy.http import HttpxFactory
from watukuy.rest import Call

SECRET = "s3cr3t-Zq9-client"
LOGGER = "watukuy.tests.rest.auth"


def context(http: Any, partition: wk.Partition | None = None) -> wk.FetchContext[Any]:
    return wk.FetchContext(
        cursor=None,
        page=1,
        partition=partition or wk.Partition(""),
        lane="live",
        http=http,
        attempt=1,
        logger=logging.getLogger(LOGGER),
    )


async def send(auth: rest.Auth, url: str, ctx: wk.FetchContext[Any]) -> wk.FetchResponse:
    """One request the way the built fetch sends it: apply, send, and after a 401 refresh
    and send once more; a second 401 raises."""
    template = Call("GET", url)
    call = await auth.apply(template, ctx)
    response = await ctx.http.request(
        call.method, call.url, params=call.params, headers=call.headers, raise_for_status=False
    )
    if response.status == 401 and await auth.refresh(call, ctx):
        call = await auth.apply(template, ctx)
        response = await ctx.http.request(
            call.method, call.url, params=call.params, headers=call.headers
        )
    return response.raise_for_status()


@pytest.fixture
async def http() -> AsyncIterator[Any]:
    factory = HttpxFactory()
    try:
        yield engine_http(factory, LOGGER)
    finally:
        await factory.aclose()


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    server = await ScriptedServer(reply_with(lambda seen: (200, {}, b'{"data": []}'))).start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def vendor() -> Iterator[OAuthVendor]:
    with OAuthVendor({"client-a": SECRET, "client-b": "other-secret"}, token_ttl=300) as api:
        api.add(name="first")
        yield api


def oauth(vendor: OAuthVendor, **options: Any) -> rest.OAuth2ClientCredentials:
    return rest.OAuth2ClientCredentials(
        token_url=f"{vendor.base_url}/oauth/token",
        **{"client_id": "client-a", "client_secret": SECRET, **options},
    )


# --- static credentials ---------------------------------------------------------------------


async def test_bearer_sends_the_token_from_a_string_an_env_or_a_function(
    http: Any, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERP_TOKEN_acme", "from-env")

    async def vault(partition: wk.Partition) -> str:
        return f"from-vault-{partition.key}"

    ctx = context(http, wk.Partition("acme", data={"token": "from-data"}))
    for auth in (
        rest.Bearer(token="plain"),
        rest.Bearer(token="{partition.token}"),
        rest.Bearer(token=rest.Env("ERP_TOKEN_{partition}")),
        rest.Bearer(token={"env": "ERP_TOKEN_{partition}"}),  # type: ignore[arg-type]  # from TOML
        rest.Bearer(token=vault),
        rest.Bearer(token=lambda partition: "sync", scheme="token"),
    ):
        await send(auth, f"{server.origin}/items", ctx)
    assert [seen.headers["authorization"] for seen in server.seen] == [
        "Bearer plain",
        "Bearer from-data",
        "Bearer from-env",
        "Bearer from-env",
        "Bearer from-vault-acme",
        "token sync",
    ]


async def test_an_api_key_goes_in_its_header_or_in_the_query(
    http: Any, server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ctx = context(http)
    await send(rest.ApiKey(value="k-123"), f"{server.origin}/items", ctx)
    await send(rest.ApiKey(name="X-Goog-Api-Key", value="k-456"), f"{server.origin}/items", ctx)
    await send(
        rest.ApiKey(name="api_key", value="k-789", location="query"),
        f"{server.origin}/items?page=2",
        ctx,
    )
    first, second, third = server.seen
    assert first.headers["x-api-key"] == "k-123"
    assert second.headers["x-goog-api-key"] == "k-456"
    assert third.target == "/items?page=2&api_key=k-789"
    assert "x-api-key" not in third.headers
    logged = "\n".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    assert "api_key=***" in logged
    for key in ("k-123", "k-456", "k-789"):
        assert key not in logged


async def test_basic_auth_sends_the_encoded_pair(http: Any, server: ScriptedServer) -> None:
    await send(rest.Basic(username="ana", password="pä ss"), f"{server.origin}/x", context(http))
    (seen,) = server.seen
    scheme, _, encoded = seen.headers["authorization"].partition(" ")
    assert (scheme, base64.b64decode(encoded).decode()) == ("Basic", "ana:pä ss")


async def test_a_missing_variable_or_field_is_a_config_error_naming_it(http: Any) -> None:
    ctx = context(http, wk.Partition("acme", data={"other": 1}))
    with pytest.raises(wk.ConfigError, match=r"auth.token: the environment variable 'NOPE_acme'"):
        await rest.Bearer(token=rest.Env("NOPE_{partition}")).apply(Call("GET", "/"), ctx)
    with pytest.raises(wk.ConfigError, match=r"auth.value: .*has no 'key'"):
        await rest.ApiKey(value="{partition.key}").apply(Call("GET", "/"), ctx)
    with pytest.raises(wk.ConfigError, match=r"auth.password: .*returned int") as raised:
        await rest.Basic(username="u", password=lambda p: 42).apply(Call("GET", "/"), ctx)  # type: ignore[arg-type,return-value]
    with pytest.raises(wk.ConfigError, match=r"auth.token: .*control characters") as raised:
        await rest.Bearer(token="tok-Q7x\nX-Injected: 1").apply(Call("GET", "/"), ctx)
    assert "Q7x" not in str(raised.value)


async def test_static_credentials_renew_only_when_they_were_changed(
    http: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = context(http)
    monkeypatch.setenv("ROTATED", "old")
    auth = rest.Bearer(token=rest.Env("ROTATED"))
    sent = await auth.apply(Call("GET", "/items"), ctx)
    assert await auth.refresh(sent, ctx) is False
    monkeypatch.setenv("ROTATED", "new")
    assert await auth.refresh(sent, ctx) is True
    assert (
        await rest.Bearer(token="same").refresh(
            await rest.Bearer(token="same").apply(Call("GET", "/items"), ctx), ctx
        )
        is False
    )


# --- OAuth2 client credentials ----------------------------------------------------------------


@pytest.mark.parametrize("client_auth", ["basic", "body"])
async def test_one_token_serves_many_requests_even_concurrent_ones(
    http: Any, vendor: OAuthVendor, client_auth: str
) -> None:
    auth = oauth(vendor, client_auth=client_auth, scope=["items:read", "items:list"])
    ctx = context(http)
    await asyncio.gather(*(send(auth, f"{vendor.base_url}/items", ctx) for _ in range(12)))
    for _ in range(5):
        response = await send(auth, f"{vendor.base_url}/items", ctx)
        assert response.json()["data"][0]["name"] == "first"
    assert vendor.token_requests == 1
    assert vendor.api_clients == ["client-a"] * 17
    (logged,) = vendor.token_log
    assert logged["client_id"] == "client-a"
    assert logged["client_auth"] == client_auth
    assert logged["form"]["grant_type"] == "client_credentials"
    assert logged["form"]["scope"] == "items:read items:list"


async def test_audience_and_extra_parameters_go_in_the_form(http: Any, vendor: OAuthVendor) -> None:
    auth = oauth(vendor, audience="https://api.{partition}", extra={"resource": "r-{partition}"})
    await send(auth, f"{vendor.base_url}/items", context(http, wk.Partition("eu")))
    (logged,) = vendor.token_log
    assert logged["form"] == {
        "grant_type": "client_credentials",
        "audience": "https://api.eu",
        "resource": "r-eu",
    }


async def test_a_refused_token_is_renewed_once_and_the_request_sent_again(
    http: Any, vendor: OAuthVendor
) -> None:
    auth = oauth(vendor)
    ctx = context(http)
    await send(auth, f"{vendor.base_url}/items", ctx)
    vendor.revoke_tokens()  # the token still looks fresh to the client: only a 401 tells
    # Several requests refused together ask for one new token between them.
    await asyncio.gather(*(send(auth, f"{vendor.base_url}/items", ctx) for _ in range(6)))
    assert vendor.token_requests == 2
    assert vendor.requests - len(vendor.api_clients) == 6  # the refused ones
    assert len(vendor.api_clients) == 7


async def test_a_second_401_raises(http: Any, vendor: OAuthVendor) -> None:
    vendor.token_ttl = 0  # every token is dead on arrival, yet announced as good for long
    vendor.announced_ttl = 3600
    with pytest.raises(wk.HttpError) as raised:
        await send(oauth(vendor), f"{vendor.base_url}/items", context(http))
    assert raised.value.status == 401
    assert vendor.token_requests == 2
    assert vendor.requests == 2


async def test_an_expiring_token_is_renewed_before_the_api_refuses_it(
    http: Any, vendor: OAuthVendor
) -> None:
    vendor.announced_ttl = 1  # the server would take it for longer: no 401 can come
    auth = oauth(vendor)
    ctx = context(http)
    await send(auth, f"{vendor.base_url}/items", ctx)
    await asyncio.sleep(1.5)  # past its expires_in: no 401 needed to know it is stale
    await send(auth, f"{vendor.base_url}/items", ctx)
    assert vendor.token_requests == 2
    assert vendor.requests == len(vendor.api_clients) == 2


async def test_a_token_without_expires_in_is_kept_until_refused(
    http: Any, vendor: OAuthVendor
) -> None:
    vendor.omit_expires_in = True
    auth = oauth(vendor)
    ctx = context(http)
    for _ in range(3):
        await send(auth, f"{vendor.base_url}/items", ctx)
    vendor.revoke_tokens()
    await send(auth, f"{vendor.base_url}/items", ctx)
    assert vendor.token_requests == 2


async def test_each_partition_gets_its_own_token_with_its_own_credentials(
    http: Any, vendor: OAuthVendor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_a", SECRET)
    monkeypatch.setenv("SECRET_b", "other-secret")
    auth = oauth(
        vendor, client_id="{partition.client}", client_secret=rest.Env("SECRET_{partition}")
    )
    tenants = [
        wk.Partition("a", data={"client": "client-a"}),
        wk.Partition("b", {"client": "client-b"}),
    ]
    await asyncio.gather(
        *(
            send(auth, f"{vendor.base_url}/items", context(http, tenant))
            for _ in range(5)
            for tenant in tenants
        )
    )
    assert vendor.token_requests == 2
    assert sorted(entry["client_id"] for entry in vendor.token_log) == ["client-a", "client-b"]
    assert sorted(vendor.api_clients) == ["client-a"] * 5 + ["client-b"] * 5


@pytest.mark.parametrize("expiring", [True, False])
async def test_tokens_of_partitions_no_longer_polled_are_let_go(expiring: bool) -> None:
    """Once expired; or, for a token issued without ``expires_in``, once no request of its
    partition used it for an hour."""
    from authlib.oauth2.rfc6749 import OAuth2Token

    auth = rest.OAuth2ClientCredentials(
        token_url="https://auth.example.com/oauth/token", client_id="c", client_secret="s"
    )
    live = {f"live-{n}" for n in range(100)}
    for n in range(2_000):
        name = f"live-{n}" if n < 100 else f"gone-{n}"
        slot = auth._slot(name)
        if expiring:
            expires_at = 4_000_000_000 if name in live else 1  # 2096, or long past
            slot.token = OAuth2Token({"access_token": name, "expires_at": expires_at})
        else:
            slot.token = OAuth2Token.from_dict({"access_token": name, "expires_in": None})
            if name not in live:
                slot.used -= 3601  # its partition's last request, over an hour ago
    slots = auth._slots
    assert live <= set(slots)  # every token in use is kept
    # The stale ones do not pile up: at most those made since the last sweep remain.
    assert len(slots) <= 256 + 1
    assert auth._slot("live-0").fresh()


async def test_a_refused_client_raises_an_http_error_that_says_what_came_back(
    http: Any, vendor: OAuthVendor
) -> None:
    auth = oauth(vendor, client_secret="wrong-" + SECRET, client_auth="body")
    with pytest.raises(wk.HttpError) as raised:
        await auth.apply(Call("GET", f"{vendor.base_url}/items"), context(http))
    assert raised.value.status == 401
    assert str(raised.value) == (
        f"the OAuth2 token request to {vendor.base_url}/oauth/token answered 401: "
        "invalid_client (client authentication failed)"
    )


@pytest.mark.parametrize(
    ("failure", "raised", "text"),
    [
        ((503, "text/html", b"<html>down for maintenance</html>"), wk.HttpError,
         "answered 503: '<html>down for maintenance</html>'"),
        ((500, "application/json", b""), wk.HttpError, "answered 500: an empty body"),
        ((200, "text/html", b"<html>login</html>"), wk.WatukuyError,
         "answered 200 (text/html) with a body that is not JSON (18 bytes)"),
        ((200, "application/json", b'{"token_type": "Bearer"}'), wk.WatukuyError,
         "answered 200 without an access_token (keys: token_type)"),
        ((200, "application/json", b'{"access_token": "t", "expires_in": "soon"}'),
         wk.WatukuyError, "answered an expires_in that is not a positive number: 'soon'"),
        ((200, "application/json", b'{"error": "slow_down"}'), wk.WatukuyError,
         "answered slow_down"),
    ],
)  # fmt: skip
async def test_a_token_endpoint_failure_says_what_came_back_and_from_where(
    http: Any, vendor: OAuthVendor, failure: tuple[int, str, bytes], raised: type, text: str
) -> None:
    vendor.token_failure = failure
    with pytest.raises(raised) as error:
        await oauth(vendor).apply(Call("GET", f"{vendor.base_url}/items"), context(http))
    assert str(error.value) == (f"the OAuth2 token request to {vendor.base_url}/oauth/token {text}")
    assert vendor.requests == 0  # no API request went out without a token


async def test_a_throttled_token_request_is_a_throttle_for_the_scheduler(
    http: Any, vendor: OAuthVendor
) -> None:
    vendor.token_failure = (429, "application/json", b'{"error": "slow_down"}')
    vendor.token_failure_headers = {"retry-after": "7"}
    with pytest.raises(wk.HttpError) as raised:
        await oauth(vendor).apply(Call("GET", f"{vendor.base_url}/items"), context(http))
    assert (raised.value.is_throttle, raised.value.retry_after) == (True, 7.0)
    assert str(raised.value).endswith("answered 429: slow_down")


# --- secrets stay secret ----------------------------------------------------------------------


def test_no_repr_shows_a_secret() -> None:
    kinds = [
        rest.Bearer(token=SECRET),
        rest.ApiKey(value=SECRET, location="query", name="api_key"),
        rest.Basic(username="ana", password=SECRET),
        rest.OAuth2ClientCredentials(
            token_url=f"https://auth.test/token?client_secret={SECRET}",
            client_id="client-a",
            client_secret=SECRET,
        ),
    ]
    for auth in kinds:
        assert SECRET not in repr(auth)
        assert SECRET not in str(auth)
    assert repr(kinds[3]).startswith(
        "OAuth2ClientCredentials(token_url='https://auth.test/token?client_secret=***', "
        "client_id='client-a', client_secret='***'"
    )
    assert (
        repr(rest.Bearer(token=rest.Env("TOKEN")))
        == "Bearer(token=Env(name='TOKEN'), scheme='Bearer')"
    )


async def test_no_log_record_and_no_stored_error_shows_the_secret_or_a_token(
    vendor: OAuthVendor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    auth = oauth(vendor)

    async def fetch(ctx: wk.FetchContext[Any]) -> wk.Page[Any]:
        response = await send(auth, f"{vendor.base_url}/items", ctx)
        return wk.Page(items=response.json()["data"])

    items = wk.define_poller(
        name="items", identity=lambda item: item["id"], cursor=wk.SnapshotDiff(), fetch=fetch
    )
    client = httpx.AsyncClient(timeout=10)
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[items], http_client=client)
    try:
        (good,) = (await engine.tick()).polled
        assert good.error is None
        vendor.revoke_tokens()
        # The server now quotes the secret back in its refusal: the error must not.
        vendor.token_failure = (
            400,
            "application/json",
            b'{"error": "invalid_client", "error_description": "bad secret %s"}' % SECRET.encode(),
        )
        await engine.trigger("items")
        (bad,) = (await engine.tick()).polled
        report = await engine.inspect()
    finally:
        await client.aclose()
    assert bad.error is not None
    assert "invalid_client (bad secret ***)" in str(bad.error)
    (entry,) = report["pollers"]
    stored = repr(entry)
    logged = "\n".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    assert "invalid_client" in stored
    assert vendor.tokens_issued
    for secret in [SECRET, *vendor.tokens_issued]:
        assert secret not in stored
        assert secret not in logged
        assert secret not in repr(auth)
    assert any("OAuth2 token obtained" in record.getMessage() for record in caplog.records)
