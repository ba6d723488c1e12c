"""``ctx.http`` of an engine core built without an HTTP client (``EngineCore(http=None)``)."""

from __future__ import annotations

import pytest

import watukuy as wk
from watukuy.runtime.requests import NO_HTTP


async def test_every_request_is_refused_with_the_reason() -> None:
    with pytest.raises(
        wk.ConfigError, match=r"GET https://api\.example\.com/orders: this engine"
    ) as got:
        await NO_HTTP.get("https://api.example.com/orders", params={"page": 1})
    assert got.value.field == "http"
    with pytest.raises(
        wk.ConfigError, match="cannot send POST /v1/search: this engine has no HTTP"
    ):
        await NO_HTTP.request("POST", "/v1/search", json={})


def test_it_is_what_fetch_expects_ctx_http_to_be() -> None:
    assert isinstance(NO_HTTP, wk.FetchHttp)
