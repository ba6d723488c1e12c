"""Standard Webhooks signing and verification, checked against the spec's vector and the
``standardwebhooks`` reference package."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from standardwebhooks import Webhook

from watukuy import ConfigError
from watukuy.sinks import decode_webhook_secret, sign_webhook, verify_webhook_signature

SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
RAW_SECRET = "correct horse battery staple"
NOW_S = 1_767_225_600  # 2026-01-01T00:00:00Z
BODY = b'{"hello":"world"}'


def test_reference_vector_of_the_spec() -> None:
    signature = sign_webhook(
        SPEC_SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}'
    )

    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_same_signature_as_the_standardwebhooks_package() -> None:
    reference = Webhook(SPEC_SECRET).sign(
        "msg_1", dt.datetime.fromtimestamp(NOW_S, tz=dt.UTC), BODY.decode()
    )

    assert sign_webhook(SPEC_SECRET, "msg_1", NOW_S, BODY) == reference
    assert sign_webhook(SPEC_SECRET, "msg_1", str(NOW_S), BODY.decode()) == reference


def test_decode_secret_forms() -> None:
    assert decode_webhook_secret("whsec_aGVsbG8=") == b"hello"
    assert decode_webhook_secret("whsec_aGVsbG8") == b"hello"  # padding may be left out
    assert decode_webhook_secret("hello") == b"hello"
    assert decode_webhook_secret(b"\x00\x01") == b"\x00\x01"
    assert len(decode_webhook_secret(SPEC_SECRET)) == 24


def test_raw_and_prefixed_forms_of_one_key_sign_alike() -> None:
    prefixed = "whsec_" + base64.b64encode(RAW_SECRET.encode()).decode()

    assert sign_webhook(RAW_SECRET, "id", 1, "{}") == sign_webhook(prefixed, "id", 1, "{}")
    assert sign_webhook(RAW_SECRET.encode(), "id", 1, "{}") == sign_webhook(prefixed, "id", 1, "{}")


@pytest.mark.parametrize("secret", ["", b"", "whsec_", "whsec_%%%", "whsec_a"])
def test_unusable_secrets_are_config_errors_that_do_not_echo_them(secret: str | bytes) -> None:
    with pytest.raises(ConfigError) as caught:
        decode_webhook_secret(secret)

    assert caught.value.field == "secret"
    if isinstance(secret, str) and len(secret) > len("whsec_"):
        assert secret not in str(caught.value)


def _verify(signature: str, **overrides: object) -> bool:
    arguments: dict[str, object] = {
        "secret": RAW_SECRET,
        "id": "msg_1",
        "timestamp": str(NOW_S),
        "body": BODY,
        "signature_header": signature,
        "now": NOW_S,
    }
    arguments.update(overrides)
    return verify_webhook_signature(**arguments)  # type: ignore[arg-type]


def test_verify_accepts_a_good_signature_and_rejects_any_tampering() -> None:
    good = sign_webhook(RAW_SECRET, "msg_1", NOW_S, BODY)

    assert _verify(good) is True
    assert _verify(good, timestamp=NOW_S) is True
    assert _verify(good, body=BODY.decode()) is True
    assert _verify(good, body=BODY + b" ") is False
    assert _verify(good, id="msg_2") is False
    assert _verify(good, timestamp=str(NOW_S + 1)) is False
    assert _verify(good, secret="another secret") is False


def test_verify_checks_the_timestamp_tolerance_both_ways() -> None:
    good = sign_webhook(RAW_SECRET, "msg_1", NOW_S, BODY)

    assert _verify(good, now=NOW_S + 300) is True
    assert _verify(good, now=NOW_S + 300.999) is True  # still 300 whole seconds
    assert _verify(good, now=NOW_S + 301) is False
    assert _verify(good, now=NOW_S - 300) is True
    assert _verify(good, now=NOW_S - 301) is False
    assert _verify(good, now=NOW_S + 301, tolerance="10m") is True
    assert _verify(good, now=NOW_S + 30, tolerance=10) is False


def test_verify_takes_now_as_epoch_seconds_or_an_aware_datetime() -> None:
    good = sign_webhook(RAW_SECRET, "msg_1", NOW_S, BODY)
    instant = dt.datetime.fromtimestamp(NOW_S, dt.UTC)

    assert _verify(good, now=instant) is True
    assert _verify(good, now=instant + dt.timedelta(seconds=300)) is True
    assert _verify(good, now=instant + dt.timedelta(seconds=301)) is False
    # Milliseconds are not seconds: read as seconds they are far in the future.
    assert _verify(good, now=NOW_S * 1000) is False


@pytest.mark.parametrize("now", [dt.datetime(2026, 1, 1), "1767225600", True, float("nan")])
def test_verify_refuses_a_now_it_cannot_read(now: object) -> None:
    good = sign_webhook(RAW_SECRET, "msg_1", NOW_S, BODY)

    with pytest.raises(ConfigError) as caught:
        _verify(good, now=now)
    assert caught.value.field == "now"


@pytest.mark.parametrize("timestamp", ["", "nope", "-5", "1.5", "1234567890123456", True])
def test_verify_rejects_malformed_timestamps(timestamp: object) -> None:
    signature = sign_webhook(RAW_SECRET, "msg_1", str(timestamp), BODY)

    assert _verify(signature, timestamp=timestamp) is False


def test_verify_takes_any_v1_entry_of_a_rotation_header() -> None:
    good = sign_webhook(RAW_SECRET, "msg_1", NOW_S, BODY)
    old_key = sign_webhook("rotated out", "msg_1", NOW_S, BODY)
    encoded = good.partition(",")[2]

    assert _verify(f"{old_key} {good}") is True
    assert _verify(f"{good} {old_key}") is True
    assert _verify(f"v1,not-base64!! {good}") is True
    assert _verify(f"v1a,{encoded} v2,{encoded} v1") is False
    assert _verify(f"{old_key} v1,AAAA") is False
    assert _verify("") is False


def test_verify_uses_the_system_clock_without_now() -> None:
    now_s = int(dt.datetime.now(dt.UTC).timestamp())
    signature = sign_webhook(RAW_SECRET, "msg_1", now_s, BODY)

    assert verify_webhook_signature(RAW_SECRET, "msg_1", str(now_s), BODY, signature) is True
    stale = str(now_s - 3600)
    stale_signature = sign_webhook(RAW_SECRET, "msg_1", stale, BODY)
    assert verify_webhook_signature(RAW_SECRET, "msg_1", stale, BODY, stale_signature) is False
