"""The admin page's Host and Origin rules, on plain header values."""

from __future__ import annotations

import pytest

from watukuy.cli._ui import served_hosts
from watukuy.integrations.admin._origin import (
    LOOPBACK_NAMES,
    HostRule,
    cross_origin,
    normal_origins,
    split_host,
)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        ("LocalHost", ("localhost", None)),
        ("[::1]:8765", ("[::1]", 8765)),
        ("[::1]", ("[::1]", None)),
        ("", None),
        ("evil.example:99999", None),
        ("evil.example:80:80", None),
        ("user@evil.example", None),
        ("a b", None),
        ("[::1", None),
        (":8765", None),
    ],
)
def test_split_host(value: str, parsed: tuple[str, int | None] | None) -> None:
    assert split_host(value) == parsed


def test_a_host_rule_allows_its_names_and_nothing_else() -> None:
    rule = HostRule.of(["127.0.0.1:8765", "localhost:8765", "ops.internal", "*.example.com"])
    for host in ("127.0.0.1:8765", "LOCALHOST:8765", "ops.internal", "ops.internal:443"):
        assert rule.allows(host), host
    assert rule.allows("a.b.example.com:8443")
    for host in (
        "evil.example:8765",
        "127.0.0.1:8766",
        "127.0.0.1",
        "example.com",
        "evilexample.com",
        "",
        None,
        "127.0.0.1:8765@evil",
    ):
        assert not rule.allows(host), host
    assert HostRule.of(["*"]).allows("anything.at.all:1")
    loopback = HostRule.of(LOOPBACK_NAMES)
    assert loopback.allows("[::1]:9000")
    assert not loopback.allows("127.0.0.2:9000")


@pytest.mark.parametrize("bad", ["", "http://x", "a/b", "*.", "x:0"])
def test_a_host_rule_refuses_what_is_not_a_host(bad: str) -> None:
    with pytest.raises(ValueError, match="expected a host name"):
        HostRule.of([bad])


def test_watukuy_ui_answers_to_the_address_it_listens_on() -> None:
    assert served_hosts("127.0.0.1", 8765, ()) == ["127.0.0.1:8765", "localhost:8765"]
    assert served_hosts("::1", 8765, ("ops.internal",)) == [
        "[::1]:8765",
        "localhost:8765",
        "ops.internal",
    ]
    assert served_hosts("10.0.0.5", 80, ()) == ["10.0.0.5:80"]
    assert served_hosts("0.0.0.0", 80, ()) == ["*"]  # every name is its own; the token guards
    assert served_hosts("0.0.0.0", 80, ("ops.internal",)) == ["ops.internal"]


HOST = {"host": "127.0.0.1:8765"}


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://127.0.0.1:8765"},
        {"origin": "http://127.0.0.1:8765", "sec-fetch-site": "same-origin"},
        {"sec-fetch-site": "same-origin"},
        {"referer": "http://127.0.0.1:8765/key?poller=orders"},
        {},  # not a browser: the CSRF token and cookie decide
    ],
)
def test_the_pages_own_origin_may_post(headers: dict[str, str]) -> None:
    assert cross_origin({**HOST, **headers}) is None


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"origin": "https://evil.example"}, "Origin 'https://evil.example'"),
        ({"origin": "http://127.0.0.1:8766"}, "is not this page's origin"),
        ({"origin": "http://localhost:8765"}, "is not this page's origin"),
        ({"origin": "null"}, "Origin 'null'"),
        ({"origin": "http://127.0.0.1:8765", "sec-fetch-site": "cross-site"}, "'cross-site'"),
        ({"sec-fetch-site": "same-site"}, "'same-site'"),
        ({"sec-fetch-site": "none"}, "'none'"),
        ({"referer": "https://evil.example/x"}, "Referer"),
    ],
)
def test_other_origins_may_not(headers: dict[str, str], why: str) -> None:
    reason = cross_origin({**HOST, **headers})
    assert reason is not None
    assert why in reason


def test_the_default_port_and_a_proxy_ending_tls() -> None:
    # Behind a proxy that ends TLS, Host has no port and the scheme seen is http.
    assert cross_origin({"host": "ops.example.com", "origin": "https://ops.example.com"}) is None
    assert cross_origin({"host": "ops.example.com", "origin": "http://ops.example.com"}) is None
    refused = cross_origin({"host": "ops.example.com", "origin": "https://ops.example.com:8443"})
    assert refused is not None


def test_allowed_origins() -> None:
    allowed = normal_origins(["https://Admin.Example.com:443", "http://10.0.0.5:8080"])
    assert allowed == {"https://admin.example.com", "http://10.0.0.5:8080"}
    headers = {**HOST, "origin": "https://admin.example.com", "sec-fetch-site": "cross-site"}
    assert cross_origin(headers, allowed) is None
    assert cross_origin(headers) is not None
    with pytest.raises(ValueError, match="expected an origin"):
        normal_origins(["admin.example.com"])
