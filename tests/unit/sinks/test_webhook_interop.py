"""Standard Webhooks interop with the reference ``standardwebhooks`` package, both ways,
for a ``whsec_`` secret and for a raw one."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook

from watukuy import ConfigError, Event
from watukuy._system import SystemClock
from watukuy.sinks import (
    sign_webhook,
    standard_webhook_secret,
    verify_webhook_signature,
    webhook_sink,
)

WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
RAW = "correct horse battery staple"
BODY = b'{"id":"e1","type":"orders.created","data":{"id":"o1","total":12.5}}'
MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"


def _now() -> tuple[datetime, str]:
    seconds = SystemClock().now() // 1000
    return datetime.fromtimestamp(seconds, tz=UTC), str(seconds)


def _reference(secret: str) -> Webhook:
    """How a receiver using the reference library is configured for our secret."""
    return Webhook(standard_webhook_secret(secret))


@pytest.mark.parametrize("secret", [WHSEC, RAW], ids=["whsec", "raw"])
def test_ours_signs_and_the_reference_verifies(secret: str) -> None:
    _, timestamp = _now()
    signature = sign_webhook(secret, MSG_ID, timestamp, BODY)
    headers = {"webhook-id": MSG_ID, "webhook-timestamp": timestamp, "webhook-signature": signature}
    assert _reference(secret).verify(BODY, headers) == json.loads(BODY)


@pytest.mark.parametrize("secret", [WHSEC, RAW], ids=["whsec", "raw"])
def test_the_reference_signs_and_ours_verifies(secret: str) -> None:
    when, timestamp = _now()
    signature = _reference(secret).sign(MSG_ID, when, BODY.decode())
    assert verify_webhook_signature(secret, MSG_ID, timestamp, BODY, signature)
    # The derived whsec_ form is the same key: it verifies too.
    assert verify_webhook_signature(
        standard_webhook_secret(secret), MSG_ID, timestamp, BODY, signature
    )


@pytest.mark.parametrize("secret", [WHSEC, RAW], ids=["whsec", "raw"])
async def test_the_sink_is_verified_by_the_reference_library(secret: str) -> None:
    seen: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    event = Event(
        id="e1",
        type="created",
        source="urn:watukuy:orders",
        subject="o1",
        time="2026-01-01T00:00:00Z",
        poller="orders",
        partition="",
        lane="live",
        sequence=1,
        data={"id": "o1"},
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(receive)) as client:
        sink = webhook_sink("https://receiver.example/hooks", secret, client=client)
        assert await sink.publish(event) == 204
    [request] = seen
    payload: Any = _reference(secret).verify(request.content, dict(request.headers))
    assert payload["id"] == "e1"


def test_the_whsec_form_of_a_raw_secret_is_its_utf8_bytes_in_base64() -> None:
    derived = standard_webhook_secret(RAW)
    assert derived == "whsec_" + base64.b64encode(RAW.encode()).decode()
    assert standard_webhook_secret(derived) == derived
    assert standard_webhook_secret(WHSEC) == WHSEC
    assert standard_webhook_secret(b"\x00\x01key") == "whsec_AAFrZXk="
    with pytest.raises(ConfigError, match="secret"):
        standard_webhook_secret("whsec_***")
    with pytest.raises(ConfigError, match="secret"):
        standard_webhook_secret("")


@settings(max_examples=40, deadline=None)
@given(secret=st.one_of(st.text(min_size=1, max_size=40), st.binary(min_size=1, max_size=40)))
def test_any_raw_secret_interoperates_through_its_whsec_form(secret: str | bytes) -> None:
    assume(not (isinstance(secret, str) and secret.startswith("whsec_")))
    when, timestamp = _now()
    reference = Webhook(standard_webhook_secret(secret))
    ours = sign_webhook(secret, MSG_ID, timestamp, BODY)
    reference.verify(
        BODY, {"webhook-id": MSG_ID, "webhook-timestamp": timestamp, "webhook-signature": ours}
    )
    theirs = reference.sign(MSG_ID, when, BODY.decode())
    assert verify_webhook_signature(secret, MSG_ID, timestamp, BODY, theirs)


def test_a_bad_header_value_is_not_echoed_when_its_name_is_sensitive() -> None:
    with pytest.raises(ConfigError) as raised:
        webhook_sink("https://r.example/h", WHSEC, headers={"x-tenant-token": b"s3cr3t"})  # type: ignore[dict-item]
    assert "s3cr3t" not in str(raised.value)
    assert "x-tenant-token" in str(raised.value)
