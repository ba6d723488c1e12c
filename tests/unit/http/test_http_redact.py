"""Redaction: header dicts and the logging filter for users who log requests themselves."""

from __future__ import annotations

import logging

import httpx
import pytest

from watukuy.http import REDACTED, RedactingFilter, redact_headers


def test_sensitive_headers_are_masked_case_insensitively() -> None:
    headers = {
        "Authorization": "Bearer t",
        "COOKIE": "a=b",
        "set-cookie": "s=1",
        "X-Api-Key": "k",
        "Proxy-Authorization": "Basic p",
        "X-Tenant": "eu",
        "Accept": "application/json",
    }
    assert redact_headers(headers) == {
        "Authorization": "***",
        "COOKIE": "***",
        "set-cookie": "***",
        "X-Api-Key": "***",
        "Proxy-Authorization": "***",
        "X-Tenant": "eu",
        "Accept": "application/json",
    }
    assert headers["Authorization"] == "Bearer t"
    assert REDACTED == "***"


def test_httpx_headers_and_pairs_are_accepted() -> None:
    assert redact_headers(httpx.Headers({"Authorization": "x", "A": "b"})) == {
        "authorization": "***",
        "a": "b",
    }
    assert redact_headers([("x-api-key", "k"), ("x-id", "1")]) == {"x-api-key": "***", "x-id": "1"}


def _record(logger: logging.Logger, caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    [record] = caplog.records
    return record


def test_filter_redacts_extra_dicts_nested_and_args(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("watukuy.tests.redact")
    redacting = RedactingFilter()
    logger.addFilter(redacting)
    try:
        caplog.set_level(logging.INFO, logger=logger.name)
        headers = {"Authorization": "Bearer s3cret", "X-Id": "7"}
        logger.info(
            "calling %(service)s",
            {"service": "erp", "x-api-key": "k3y"},
            extra={
                "headers": headers,
                "request": {"url": "https://x", "headers": {"Cookie": "c00kie"}},
                "count": 3,
            },
        )
        record = _record(logger, caplog)
    finally:
        logger.removeFilter(redacting)
    assert record.__dict__["headers"] == {"Authorization": "***", "X-Id": "7"}
    assert record.__dict__["request"] == {"url": "https://x", "headers": {"Cookie": "***"}}
    assert record.__dict__["count"] == 3
    assert record.getMessage() == "calling erp"
    assert record.args == {"service": "erp", "x-api-key": "***"}
    # The caller's own dict is left alone.
    assert headers["Authorization"] == "Bearer s3cret"
    assert "s3cret" not in repr(record.__dict__)


def test_filter_keeps_records_without_secrets_untouched(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("watukuy.tests.redact.plain")
    redacting = RedactingFilter()
    logger.addFilter(redacting)
    try:
        caplog.set_level(logging.INFO, logger=logger.name)
        payload = {"x-id": "1"}
        logger.info("plain %s", "text", extra={"payload": payload})
        record = _record(logger, caplog)
    finally:
        logger.removeFilter(redacting)
    assert record.__dict__["payload"] is payload
    assert record.getMessage() == "plain text"


def test_filter_never_drops_a_record() -> None:
    record = logging.makeLogRecord({"msg": "m", "headers": {"authorization": "t"}})
    assert RedactingFilter().filter(record) is True
    assert record.__dict__["headers"] == {"authorization": "***"}
