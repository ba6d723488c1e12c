"""Credentials of pollers described in a TOML file: the ``auth`` table builds the auth kind,
secrets come from the file's interpolation or from the environment at request time, and a
mistake names the table and key without the secret."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import watukuy as wk
from support.rest_vendors import OAuthVendor
from watukuy import rest

SECRET = "s3cr3t-from-toml-Q4"


@pytest.fixture
def vendor() -> Iterator[OAuthVendor]:
    with OAuthVendor({"client-a": SECRET}, token_ttl=300) as api:
        for n in range(3):
            api.add(name=f"item {n}")
        yield api


def write(tmp_path: Path, auth: str, base_url: str = "http://127.0.0.1:9") -> Path:
    path = tmp_path / "pollers.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [pollers.items]
            url = "{base_url}/items"
            items = "data"
            identity = "id"
            version = "updated_at"
            paginator = {{ type = "page_number", size_param = "per_page", size = 2, end = "has_more", has_more = "has_more" }}
            auth = {auth}

            [sinks.out]
            type = "jsonl"
            path = "{tmp_path / "events.jsonl"}"
            """
        ),
        encoding="utf-8",
    )
    return path


async def test_an_oauth2_poller_from_a_toml_file(
    tmp_path: Path, vendor: OAuthVendor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ITEMS_SECRET", SECRET)
    auth = (
        '{ type = "oauth2_client_credentials", token_url = "${TOKEN_URL}", '
        'client_id = "${CLIENT_ID}", client_secret = { env = "ITEMS_SECRET" }, '
        'scope = ["items:read"], client_auth = "body" }'
    )
    path = write(tmp_path, auth, vendor.base_url)
    env = {"TOKEN_URL": f"{vendor.base_url}/oauth/token", "CLIENT_ID": "client-a"}
    config = rest.load_config(path, env=env)
    engine = config.build_engine(store="memory://")
    try:
        (result,) = (await engine.tick()).polled
        await engine.tick()  # what the first pass left pending is delivered
    finally:
        await engine.stop()
        await config.aclose()
    assert result.error is None
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["subject"] for line in lines) == ["1", "2", "3"]
    (logged,) = vendor.token_log
    assert logged["client_auth"] == "body"
    assert logged["form"]["scope"] == "items:read"
    assert SECRET not in repr(engine.pollers)


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ('{ type = "bearer", toke = "${TOKEN}" }', "unknown key 'toke' (did you mean 'token'?)"),
        ('{ type = "bearer", token = 42 }', "token: expected a string, rest.Env('NAME') or a function of the partition, got int"),
        ('{ type = "api_key", value = "${TOKEN}", location = "cookie" }', "location: expected 'header' or 'query', got 'cookie'"),
        ('{ type = "basic", username = "ana", password = 1.5 }', "password: expected a string, rest.Env('NAME') or a function of the partition, got float"),
        ('{ type = "oauth2_client_credentials", token_url = "https://a/t", client_id = "c", client_secret = "${TOKEN}", extra = { client_secret = "${TOKEN}" } }', "extra: 'client_secret' is set by the flow itself"),
    ],
)  # fmt: skip
def test_a_mistake_in_the_auth_table_names_it_without_the_secret(
    tmp_path: Path, auth: str, message: str
) -> None:
    path = write(tmp_path, auth)
    with pytest.raises(wk.ConfigError) as raised:
        rest.load_config(path, env={"TOKEN": SECRET})
    text = str(raised.value)
    assert text.startswith(f"{path}: [pollers.items.auth] ")
    assert message in text
    assert SECRET not in text
