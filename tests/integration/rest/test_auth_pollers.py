"""Declarative pollers with credentials, end to end: ``define_rest_poller`` against the
REST test vendors, through an engine, with the secrets kept out of what it stores and logs.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

import watukuy as wk
from support.rest_vendors import LinkVendor, OAuthVendor, StripeVendor
from watukuy import rest

SECRET_A = "s3cr3t-tenant-a-Q1"
SECRET_B = "s3cr3t-tenant-b-Q2"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def cycle(engine: wk.Engine, name: str, partitions: str | None = None) -> list[Any]:
    """Trigger the keys of ``name`` (``partitions``: their keys, one letter each; ``None``
    on a first cycle) and run one tick; the polled results, by partition."""
    for partition in partitions or "":
        await engine.trigger(name, partition=partition)
    polled = (await engine.tick()).polled
    return sorted(polled, key=lambda result: result.partition)


def recorder(engine: wk.Engine, name: str) -> list[tuple[str, str, str]]:
    events: list[tuple[str, str, str]] = []

    @engine.on(name)
    def record(event: wk.Event[Any], ctx: wk.HandlerContext) -> None:
        events.append((event.partition, event.type, event.subject))

    return events


async def test_a_link_header_listing_with_a_bearer_token_from_the_environment(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_TOKEN", "gh-token-1")
    with LinkVendor(token="gh-token-1") as api:
        for n in range(5):
            api.add(title=f"issue {n}")
        issues = rest.define_rest_poller(
            name="issues",
            request=rest.Request(url=f"{api.base_url}/items", params={"per_page": 2}),
            identity="id",
            version="updated_at",
            paginator=rest.LinkHeader(),
            auth=rest.Bearer(token=rest.Env("GH_TOKEN")),
        )
        engine = wk.Engine(store=wk.MemoryStore(), pollers=[issues], http_client=client)
        events = recorder(engine, "issues")
        (first,) = (await engine.tick()).polled
        assert first.error is None
        assert sorted(events) == [("", "created", str(n)) for n in range(1, 6)]
        # The vendor rotates the token: until the environment follows, every cycle fails.
        api.token = "gh-token-2"
        await engine.trigger("issues")
        (refused,) = (await engine.tick()).polled
        assert refused.error is not None
        assert refused.error["status"] == 401
        monkeypatch.setenv("GH_TOKEN", "gh-token-2")
        api.update(2, title="edited")
        await engine.trigger("issues")
        (second,) = (await engine.tick()).polled
        assert second.error is None
        assert events[-1] == ("", "updated", "2")


async def test_a_stripe_list_with_a_bearer_secret_key(client: httpx.AsyncClient) -> None:
    with StripeVendor(token="sk_test_123") as api:
        for n in range(5):
            api.add(amount=n)
        charges = rest.define_rest_poller(
            name="charges",
            request=f"{api.base_url}/v1/items",
            items="data",
            identity="id",
            version="updated_at",
            paginator=rest.StartingAfter(limit=2),
            auth=rest.Bearer(token="sk_test_123"),
        )
        engine = wk.Engine(store=wk.MemoryStore(), pollers=[charges], http_client=client)
        events = recorder(engine, "charges")
        (result,) = (await engine.tick()).polled
    assert result.error is None
    assert sorted(events) == [("", "created", f"it_00000{n}") for n in range(1, 6)]
    assert api.requests == 3


@pytest.fixture
def oauth_vendor() -> Iterator[OAuthVendor]:
    with OAuthVendor({"client-a": SECRET_A, "client-b": SECRET_B}, token_ttl=300) as api:
        for n in range(3):
            api.add(name=f"item {n}")
        yield api


def tenants_poller(api: OAuthVendor) -> wk.PollerDefinition[Any]:
    def tenants() -> list[wk.Partition]:
        return [
            wk.Partition("a", data={"client": "client-a", "secret": SECRET_A}),
            wk.Partition("b", data={"client": "client-b", "secret": SECRET_B}),
        ]

    return rest.define_rest_poller(
        name="records",
        request=rest.Request(url=f"{api.base_url}/items"),
        items="data",
        identity="id",
        version="updated_at",
        paginator=rest.PageNumber(
            size_param="per_page", size=2, end="has_more", has_more="has_more"
        ),
        auth=rest.OAuth2ClientCredentials(
            token_url=f"{api.base_url}/oauth/token",
            client_id="{partition.client}",
            client_secret=lambda partition: partition.data["secret"],
        ),
        partitions=tenants,
    )


async def test_each_tenant_polls_with_its_own_oauth2_token_renewed_after_a_401(
    client: httpx.AsyncClient, oauth_vendor: OAuthVendor
) -> None:
    engine = wk.Engine(
        store=wk.MemoryStore(), pollers=[tenants_poller(oauth_vendor)], http_client=client
    )
    events = recorder(engine, "records")
    results = await cycle(engine, "records")
    assert [result.error for result in results] == [None, None]
    assert sorted(events) == sorted(
        (tenant, "created", str(n)) for tenant in "ab" for n in range(1, 4)
    )
    assert oauth_vendor.token_requests == 2  # one token per tenant for all their pages
    assert sorted(set(oauth_vendor.api_clients)) == ["client-a", "client-b"]

    oauth_vendor.revoke_tokens()
    oauth_vendor.update(1, name="edited")
    results = await cycle(engine, "records", "ab")
    assert [result.error for result in results] == [None, None]
    assert oauth_vendor.token_requests == 4  # each tenant renewed its token once
    assert sorted(event for event in events if event[1] == "updated") == [
        ("a", "updated", "1"),
        ("b", "updated", "1"),
    ]


async def test_a_second_401_fails_the_cycle_and_nothing_stored_or_logged_holds_a_secret(
    client: httpx.AsyncClient, oauth_vendor: OAuthVendor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    oauth_vendor.token_ttl = 0  # dead on arrival, announced as good for an hour
    oauth_vendor.announced_ttl = 3600
    poller = tenants_poller(oauth_vendor)
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[poller], http_client=client)
    results = await cycle(engine, "records")
    report = await engine.inspect()
    assert [result.error["status"] for result in results] == [401, 401]
    assert oauth_vendor.token_requests == 4  # a token, a 401, a new token, a 401: per tenant
    stored = repr(report) + repr(results)
    logged = "\n".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    for secret in [SECRET_A, SECRET_B, *oauth_vendor.tokens_issued]:
        assert secret not in stored
        assert secret not in logged
        assert secret not in repr(poller)


SECRET_IN_QUERY = "s3cr3t-in-the-query-Q9"


@pytest.mark.parametrize(
    ("name", "params", "auth"),
    [
        # The key of an ApiKey auth in the query: the auth puts it back on each request.
        ("api_key", {}, rest.ApiKey(name="api_key", value=SECRET_IN_QUERY, location="query")),
        # A token passed as a plain parameter (in TOML, perhaps "${API_TOKEN}"), whose
        # name says it is a credential: the built fetch puts it back.
        ("access_token", {"access_token": SECRET_IN_QUERY}, None),
    ],
)
async def test_a_credential_in_the_query_is_kept_out_of_the_stored_next_links(
    client: httpx.AsyncClient,
    tmp_path: Any,
    name: str,
    params: dict[str, str],
    auth: rest.Auth | None,
) -> None:
    with LinkVendor() as api:  # its next links repeat every query parameter, the secret too
        for n in range(5):
            api.add(title=f"issue {n}")
        issues = rest.define_rest_poller(
            name="issues",
            request=rest.Request(url=f"{api.base_url}/items", params={"per_page": 2, **params}),
            identity="id",
            version="updated_at",
            paginator=rest.LinkHeader(),
            auth=auth,
            max_pages_per_cycle=1,
        )
        database = tmp_path / "state.db"
        engine = wk.Engine(
            store=wk.SqliteStore(str(database)), pollers=[issues], http_client=client
        )
        events = recorder(engine, "issues")
        await engine.tick(catch_up=False)  # page 1 of 3: the pass stops with a next link
        await engine.stop()
        stored = b"".join(path.read_bytes() for path in tmp_path.glob("state.db*"))
        assert b"page=2" in stored  # the next link is stored (the WAL included) ...
        assert SECRET_IN_QUERY.encode() not in stored  # ... without the secret
        # A new engine resumes the pass at page 2, and the secret goes back, once.
        engine = wk.Engine(
            store=wk.SqliteStore(str(database)), pollers=[issues], http_client=client
        )
        events = recorder(engine, "issues")
        (result,) = (await engine.tick()).polled
        assert result.error is None
        await engine.stop()
    assert [subject for _, _, subject in events] == ["3", "4", "5"]
    later = [target for target in api.targets if "&page=" in target]
    assert len(later) == 2, api.targets
    sent = f"{name}={SECRET_IN_QUERY}"
    assert all(target.count(sent) == 1 for target in api.targets), api.targets
