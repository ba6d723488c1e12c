"""The auth kinds check their arguments when built, the way a TOML file builds them, and
name the field without showing a secret."""

from __future__ import annotations

from typing import Any

import pytest

import watukuy as wk
from watukuy import rest

SECRET = "s3cr3t-value-9Zq"


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("bearer", {"token": 42}, "auth.token: expected a string, rest.Env('NAME') or a function of the partition, got int"),
        ("bearer", {"token": ""}, "auth.token: expected a non-empty secret, got an empty string"),
        ("bearer", {"token": SECRET, "scheme": "Bad Scheme"}, "auth.scheme: expected an authorization scheme like 'Bearer', got 'Bad Scheme'"),
        ("bearer", {"token": {"env": "A B"}}, "auth.token.env: an environment variable's name has no '=' or whitespace, got 'A B'"),
        ("bearer", {"token": {"name": "A"}}, "auth.token: a table for a secret takes one key, 'env' (the variable's name), got ['name']"),
        ("api_key", {"value": SECRET, "location": "cookie"}, "auth.location: expected 'header' or 'query', got 'cookie'"),
        ("api_key", {"value": SECRET, "name": "X Api Key"}, "auth.name: expected a header name like 'X-Api-Key', got 'X Api Key'"),
        ("api_key", {"value": SECRET, "name": "", "location": "query"}, "auth.name: expected a query parameter name like 'api_key', got ''"),
        ("basic", {"username": "ana", "password": 1.5}, "auth.password: expected a string, rest.Env('NAME') or a function of the partition, got float"),
        ("oauth2_client_credentials", {"token_url": "ftp://x", "client_id": "c", "client_secret": SECRET}, "auth.token_url: expected an http(s) URL, got 'ftp://x'"),
        ("oauth2_client_credentials", {"token_url": "https://a/t", "client_id": "c", "client_secret": SECRET, "client_auth": "jwt"}, "auth.client_auth: expected 'basic' or 'body', got 'jwt'"),
        ("oauth2_client_credentials", {"token_url": "https://a/t", "client_id": "c", "client_secret": SECRET, "scope": ["a b"]}, "auth.scope: expected a string or a list of scope names, got ['a b']"),
        ("oauth2_client_credentials", {"token_url": "https://a/t", "client_id": "c", "client_secret": SECRET, "extra": {"grant_type": "password"}}, "auth.extra: 'grant_type' is set by the flow itself; use the keyword of its own if it has one"),
        ("oauth2_client_credentials", {"token_url": "https://a/t", "client_id": "c", "client_secret": SECRET, "extra": {"resource": 1}}, "auth.extra: expected a table of form parameter names to strings"),
    ],
)  # fmt: skip
def test_a_wrong_argument_is_a_config_error_naming_the_field(
    kind: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(wk.ConfigError) as raised:
        rest.AUTHS[kind](**options)
    assert str(raised.value) == message
    assert SECRET not in str(raised.value)


def test_the_registry_builds_each_kind_from_the_keys_of_a_toml_table() -> None:
    assert sorted(rest.AUTHS) == ["api_key", "basic", "bearer", "oauth2_client_credentials"]
    bearer = rest.AUTHS["bearer"](token={"env": "GITHUB_TOKEN"})
    assert bearer == rest.Bearer(token=rest.Env("GITHUB_TOKEN"))
    oauth = rest.AUTHS["oauth2_client_credentials"](
        token_url="https://auth.test/token",
        client_id="client",
        client_secret=SECRET,
        scope="read write",
        audience="https://api.test",
        client_auth="body",
        extra={"resource": "orders"},
    )
    assert isinstance(oauth, rest.OAuth2ClientCredentials)
    assert oauth.scope == ("read", "write")
    for auth in (bearer, oauth):
        assert isinstance(auth, rest.Auth)


def test_an_unknown_keyword_is_refused_by_the_constructor() -> None:
    with pytest.raises(TypeError, match="toke"):
        rest.AUTHS["bearer"](toke=SECRET)


def test_the_auth_kinds_are_values() -> None:
    assert rest.ApiKey(value="k") == rest.ApiKey(value="k")
    with pytest.raises(AttributeError):
        rest.Bearer(token="t").token = "other"  # type: ignore[misc]
