"""``ctx.http`` with a client that has a ``base_url``: relative URLs are resolved against it
(httpx's own rule) before the budget, the validators, the redirect rules and the redaction
see the request, so all of them work on the absolute URL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from http_fakes import HttpRig

from watukuy.http import build_url, url_hash
from watukuy.http._url import resolve_url
from watukuy.model.errors import ConfigError, HttpError
from watukuy.model.rows import Validator

API = "https://api.example.com"


@pytest.fixture
async def based() -> AsyncIterator[HttpRig]:
    """A scripted API reached through a client whose ``base_url`` is ``{API}/v1``."""
    rig = HttpRig(base_url=f"{API}/v1")
    yield rig
    await rig.client.aclose()


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        (f"{API}/v1", "/customers"),
        (f"{API}/v1", "customers"),
        (f"{API}/v1/", "/customers"),
        (f"{API}/v1/", "customers/7?expand=lines#top"),
        (API, "/customers"),
        (API, ""),
        (f"{API}/v1", "../customers"),
        (f"{API}/v1", "api.example.com/customers"),
        (f"{API}/v1", "//other.example.com/customers"),
        (f"{API}/v1?tenant=acme", "customers"),
        ("http://user:pw@127.0.0.1:8080/base", "/a%20b"),
        (f"{API}/v1", "https://elsewhere.example.com/customers"),
    ],
)
def test_relative_urls_resolve_as_httpx_resolves_them(base_url: str, url: str) -> None:
    client = httpx.AsyncClient(base_url=base_url)
    expected = client.build_request("GET", url).url.copy_with(fragment=None)
    assert str(resolve_url(url, client.base_url).copy_with(fragment=None)) == str(expected)
    assert build_url(url, base_url=client.base_url) == str(expected)


def test_a_relative_url_without_a_base_url_says_how_to_fix_it() -> None:
    for base_url in (None, "", httpx.AsyncClient().base_url):
        with pytest.raises(ConfigError) as caught:
            build_url("/v1/customers", base_url=base_url)
        assert caught.value.field == "url"
        message = str(caught.value)
        assert "'/v1/customers'" in message
        assert "give an absolute URL, or set base_url on the httpx.AsyncClient" in message


def test_a_base_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"ftp://files\.example\.com/pub/customers"):
        build_url("customers", base_url="ftp://files.example.com/pub")


async def test_the_request_and_the_response_carry_the_absolute_url(based: HttpRig) -> None:
    based.reply(200, json={"data": []})
    response = await based.http().get("/customers", params={"page": 2, "since": None})
    assert str(based.requests[0].url) == f"{API}/v1/customers?page=2"
    assert response.url == f"{API}/v1/customers?page=2"


async def test_validators_are_kept_under_the_absolute_url(based: HttpRig) -> None:
    based.reply(200, json={"data": []}, headers={"etag": '"v1"'})
    await based.http().get("customers")
    ((_, _, stored_under, validator),) = based.store.sets
    assert stored_under == url_hash(f"{API}/v1/customers")
    # The same resource asked for absolutely is the same resource: its validator is sent.
    based.store.validators[(based.store.sets[0][0], stored_under)] = Validator(
        etag='"v1"', last_modified=None, stored_at=validator.stored_at
    )
    based.reply(304)
    response = await based.http().get(f"{API}/v1/customers")
    assert response.not_modified
    assert based.requests[1].headers["if-none-match"] == '"v1"'


async def test_errors_name_the_absolute_url_with_credentials_masked() -> None:
    rig = HttpRig(base_url="https://robot:hunter2@api.example.com/v1")
    rig.reply(503, text="down")
    try:
        with pytest.raises(HttpError) as caught:
            await rig.http().get("/customers", params={"api_key": "hunter3"})
    finally:
        await rig.client.aclose()
    error = caught.value
    assert error.url is not None
    assert "api.example.com/v1/customers" in error.url
    for secret in ("hunter2", "hunter3"):
        assert secret not in str(error)
        assert secret not in error.url


async def test_a_redirect_from_a_relative_request_is_judged_on_the_absolute_url(
    based: HttpRig,
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "api.example.com":
            return httpx.Response(302, headers={"location": "http://cdn.example.com/customers"})
        return httpx.Response(200, json={"data": []})

    based.responder = answer
    based.client.follow_redirects = True
    with pytest.raises(HttpError, match="refused a redirect from https to http"):
        await based.http().get("/customers")
    assert [str(request.url) for request in based.requests] == [f"{API}/v1/customers"]
