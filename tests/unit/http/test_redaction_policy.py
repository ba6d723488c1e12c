"""The redaction policy: URLs, names, free text, stacks, the logger, and ``ctx.http``."""

from __future__ import annotations

import logging
import re
import sys

import httpx
import pytest
from http_fakes import HttpRig

import watukuy as wk
from watukuy.http import RedactingFilter, redact_headers, redact_text, redact_url
from watukuy.model.errors import ConfigError, HttpError
from watukuy.model.redact import (
    DEFAULT_REDACTION,
    RedactingLogger,
    Redaction,
    format_stack,
    relative_source_path,
    serialize_error,
)

MARK = "M4RK3R"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"GET https://svc:{MARK}@api.test/items?api_key={MARK}&page=2 responded 500",
            "GET https://svc:***@api.test/items?api_key=***&page=2 responded 500",
        ),
        (f"https://{MARK}@github.com/x", "https://***@github.com/x"),
        (f"https://h/cb#access_token={MARK}&state=1", "https://h/cb#access_token=***&state=1"),
        (
            f"https://h/?Token={MARK}&Signature={MARK}&sig={MARK}",
            "https://h/?Token=***&Signature=***&sig=***",
        ),
        (f"https://h/?api%5Fkey={MARK}", "https://h/?api%5Fkey=***"),
        (f"postgresql://app:{MARK}@db:5432/app", "postgresql://app:***@db:5432/app"),
        (f"failed: password={MARK} user=bob", "failed: password=*** user=bob"),
        (f"error:api_key={MARK}", "error:api_key=***"),
        (f"{{'X-Auth-Token': '{MARK}', 'x-id': '7'}}", "{'X-Auth-Token': '***', 'x-id': '7'}"),
        (f'{{"client_secret":"{MARK}"}}', '{"client_secret":"***"}'),
        (f"Headers([('x-foo-token', '{MARK}')])", "Headers([('x-foo-token', '***')])"),
        (f"authorization: Bearer {MARK}{MARK}", "authorization: ***"),
        (f"sent Bearer {MARK}{MARK} to it", "sent Bearer *** to it"),
        ("ordering_key=a partition=eu page=2", "ordering_key=a partition=eu page=2"),
        ("Basic usage: nothing to hide", "Basic usage: nothing to hide"),
    ],
)
def test_default_policy_masks_secrets_in_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "--token: use at least 12 characters",
        "secret: expected a non-empty string or bytes, got ''",
        "array_key: expected a member name or None, got 5",
        "auth: expected a callable or None, got 1",
        "password: must not be empty",
    ],
)
def test_a_message_about_a_sensitive_name_is_not_mangled(text: str) -> None:
    # "name: sentence" is what our errors say about an option: its first word is prose.
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"--token: {MARK.lower()}", "--token: ***"),  # a value that ends the text
        ("token: hunter", "token: ***"),
        ("password: hunter was refused", "password: *** was refused"),  # not an opener
        ("api_key: supersecretvalue is invalid", "api_key: *** is invalid"),
        (f"token: {MARK} was refused", "token: *** was refused"),  # not a plain word
        ("token: abc123 expired", "token: *** expired"),
        ("token:hunter was refused", "token:*** was refused"),  # no space: a value
        ("--token=abcdefghijkl now", "--token=*** now"),  # after '=': always a value
        ("token=use more", "token=*** more"),
        ("{'token': 'use me'}", "{'token': '*** me'}"),  # quoted: a value
        (f"Authorization: Bearer {MARK}{MARK} now", "Authorization: *** now"),
    ],
)
def test_a_sensitive_value_is_still_masked_next_to_words(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "apikey",
        "key",
        "token",
        "access_token",
        "secret",
        "password",
        "signature",
        "sig",
        "auth",
        "Authorization",
        "X-Auth-Token",
        "Api-Key",
        "X-API-KEY",
        "x-foo-token",
        "Cookie",
        "Set-Cookie",
        "client_secret",
        "Ocp-Apim-Subscription-Key",
    ],
)
def test_sensitive_names_match_case_insensitively_and_as_substrings(name: str) -> None:
    assert DEFAULT_REDACTION.is_sensitive(name)


@pytest.mark.parametrize("name", ["page", "limit", "x-tenant", "ordering_key", "since", "id"])
def test_ordinary_names_are_kept(name: str) -> None:
    assert not DEFAULT_REDACTION.is_sensitive(name)


def test_the_policy_is_extensible_and_allows_names_back() -> None:
    policy = wk.Redaction(
        names=["X-Tenant"],
        parts=["ssn"],
        allow=["key"],
        values=[MARK],
        patterns=[r"acct-\d{4}"],
    )
    assert policy.is_sensitive("x-tenant")
    assert policy.is_sensitive("customer_ssn_hash")
    assert not policy.is_sensitive("key")
    assert policy.text(f"x-tenant=acme key=public note {MARK} acct-1234") == (
        "x-tenant=*** key=public note *** ***"
    )
    assert policy.headers({"X-Tenant": "acme", "X-Id": "1"}) == {"X-Tenant": "***", "X-Id": "1"}
    assert Redaction.coerce(["x-tenant"]).is_sensitive("X-TENANT")
    assert Redaction.coerce(None) is DEFAULT_REDACTION
    assert Redaction(values=(v for v in [MARK])).text(MARK) == "***"  # a generator is fine


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"names": [""]}, "redact.names"),
        ({"values": "one-secret"}, "redact.values"),
        ({"values": [3]}, "redact.values"),
        ({"patterns": ["("]}, "redact.patterns"),
        ({"names": 3}, "redact.names"),
    ],
)
def test_bad_policy_arguments_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(field)):
        Redaction(**kwargs)  # type: ignore[arg-type]


def test_engine_takes_the_policy_and_refuses_a_bare_string() -> None:
    poller = wk.define_poller(
        name="orders",
        identity=lambda item: item["id"],
        cursor=wk.SnapshotDiff(),
        fetch=lambda ctx: {"items": []},
    )
    engine = wk.Engine(store=wk.MemoryStore(), pollers=[poller], redact=["x-tenant"])
    assert engine.redaction.is_sensitive("x-tenant")
    with pytest.raises(ConfigError, match="redact"):
        wk.Engine(store=wk.MemoryStore(), pollers=[poller], redact="x-tenant")  # type: ignore[arg-type]


def test_headers_cover_the_extended_default_list() -> None:
    headers = {"X-Auth-Token": MARK, "Api-Key": MARK, "X-Foo-Token": MARK, "Accept": "a/b"}
    assert redact_headers(headers) == {
        "X-Auth-Token": "***",
        "Api-Key": "***",
        "X-Foo-Token": "***",
        "Accept": "a/b",
    }
    assert redact_url(f"https://u:{MARK}@h/p?key={MARK}") == "https://u:***@h/p?key=***"


# --- serialised errors and stacks -----------------------------------------------------------


def _raise(message: str) -> None:
    raise RuntimeError(message)


def test_serialized_errors_are_clean_in_message_stack_and_cause() -> None:
    try:
        try:
            _raise(f"inner https://u:{MARK}@h/?token={MARK}")
        except RuntimeError as inner:
            raise ValueError(f"outer password={MARK}") from inner
    except ValueError as error:
        serialized = serialize_error(error)
    assert MARK not in repr(serialized)
    assert serialized["message"] == "outer password=***"
    assert serialized["cause"]["message"] == "inner https://u:***@h/?token=***"


def test_stacks_name_files_relative_to_their_import_path() -> None:
    try:
        _raise("boom")
    except RuntimeError as error:
        stack = format_stack(error)
    assert 'File "unit/http/test_redaction_policy.py"' in stack or (
        'File "test_redaction_policy.py"' in stack
    )
    assert __file__ not in stack
    assert relative_source_path("/nowhere/at/all/module.py") == "module.py"
    site = next(p for p in sys.path if p.endswith("site-packages"))
    assert relative_source_path(f"{site}/httpx/_client.py") == "httpx/_client.py"
    assert relative_source_path("<string>") == "<string>"


# --- logging ----------------------------------------------------------------------------------


def test_the_redacting_logger_cleans_message_args_extra_and_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = RedactingLogger(logging.getLogger("watukuy.tests.redact"), DEFAULT_REDACTION)
    caplog.set_level(logging.DEBUG, logger="watukuy.tests.redact")
    try:
        _raise(f"GET https://h/?api_key={MARK} failed")
    except RuntimeError as error:
        logger.debug("fetch of %s failed: %s", f"https://u:{MARK}@h/", error, exc_info=True)
        logger.warning(
            "x", extra={"headers": {"X-Auth-Token": MARK}, "url": f"https://h/?sig={MARK}"}
        )
    debug, warning = caplog.records
    assert debug.levelno == logging.DEBUG
    assert debug.funcName == "test_the_redacting_logger_cleans_message_args_extra_and_traceback"
    assert "Traceback" in debug.getMessage()
    assert "api_key=***" in debug.getMessage()
    assert warning.__dict__["headers"] == {"X-Auth-Token": "***"}
    assert warning.__dict__["url"] == "https://h/?sig=***"
    assert MARK not in caplog.text
    assert all(MARK not in repr(vars(r)) for r in caplog.records)


def test_redacting_filter_cleans_your_own_records(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("watukuy.tests.filter")
    flt = RedactingFilter()
    logger.addFilter(flt)
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            logger.info("calling %s", f"https://h/?token={MARK}", extra={"h": {"Api-Key": MARK}})
    finally:
        logger.removeFilter(flt)
    assert MARK not in caplog.text
    assert MARK not in repr(vars(caplog.records[0]))


# --- ctx.http ---------------------------------------------------------------------------------


async def test_http_errors_and_debug_logs_carry_no_credentials(
    rig: HttpRig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=rig.logger.name)
    rig.reply(500, json={"title": "down"}, headers={"content-type": "application/problem+json"})
    url = f"https://svc:{MARK}@api.example.com/items"
    with pytest.raises(HttpError) as raised:
        await rig.http().get(
            url,
            params={"api_key": MARK, "page": 2},
            headers={"X-Auth-Token": MARK, "Api-Key": MARK, "X-Foo-Token": MARK},
        )
    error = raised.value
    assert error.url == "https://svc:***@api.example.com/items?api_key=***&page=2"
    assert str(error) == f"GET {error.url} responded 500: down"
    assert MARK not in repr(serialize_error(error))
    assert MARK not in caplog.text
    assert all(MARK not in repr(vars(r)) for r in caplog.records)
    # The request itself carried everything.
    sent = rig.requests[0]
    assert sent.headers["x-auth-token"] == MARK
    assert sent.url.params["api_key"] == MARK


async def test_http_client_uses_the_scope_policy(rig: HttpRig) -> None:
    rig.reply(404)
    policy = Redaction(names=["tenant"])
    with pytest.raises(HttpError) as raised:
        await rig.http(redaction=policy).get(
            httpx.URL("https://h.test/x"), params={"tenant": "acme"}
        )
    assert raised.value.url == "https://h.test/x?tenant=***"


def test_the_httpx_logger_is_cleaned_once_a_factory_exists(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from watukuy.http import HttpxFactory

    policy = Redaction(names=["tenant"])  # held by its engine in real life
    HttpxFactory(redaction=policy)
    HttpxFactory()  # a second factory adds no second filter
    library = logging.getLogger("httpx")
    assert sum(type(f).__name__ == "_LibraryFilter" for f in library.filters) == 1
    caplog.set_level(logging.INFO, logger="httpx")
    url = httpx.URL(f"https://u:{MARK}@h.test/x?api_key={MARK}&tenant=acme&page=2")
    library.info('HTTP Request: %s %s "%s %d %s"', "GET", url, "HTTP/1.1", 200, "OK")
    [record] = caplog.records
    assert record.getMessage() == (
        'HTTP Request: GET https://u:***@h.test/x?api_key=***&tenant=***&page=2 "HTTP/1.1 200 OK"'
    )


def test_a_partition_repr_shows_no_data() -> None:
    partition = wk.Partition("acme", data={"token": MARK})
    assert repr(partition) == "Partition(key='acme')"
    assert partition.data == {"token": MARK}
