"""Standard Webhooks signatures (https://www.standardwebhooks.com), both sides.

A signature is ``v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>``, where ``id`` is
the ``webhook-id`` header, ``timestamp`` the ``webhook-timestamp`` header (unix seconds) and
``body`` the exact request bytes. A ``webhook-signature`` header may hold several
space-separated signatures (key rotation); any valid ``v1`` one is enough.

Secrets come in two forms. ``whsec_<base64>`` is the Standard Webhooks form: the HMAC key
is the decoded bytes, and every Standard Webhooks library reads it the same way. Any other
string is a raw secret whose UTF-8 bytes are the key (as the original watukuy does); the
reference libraries read every string as base64, so give a receiver that uses one the
``whsec_`` form of the same key, :func:`standard_webhook_secret`, or the key bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import re
from datetime import datetime
from typing import Final

from watukuy._system import SystemClock
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError

__all__ = [
    "DEFAULT_WEBHOOK_TOLERANCE",
    "WEBHOOK_SECRET_PREFIX",
    "decode_webhook_secret",
    "sign_webhook",
    "standard_webhook_secret",
    "verify_webhook_signature",
]

WEBHOOK_SECRET_PREFIX: Final = "whsec_"
"""Prefix of a base64-encoded Standard Webhooks secret."""

DEFAULT_WEBHOOK_TOLERANCE: Final = "5m"
"""How far ``webhook-timestamp`` may be from now, either way (the spec's recommendation)."""

_VERSION: Final = "v1"
_TIMESTAMP: Final = re.compile(r"^\d{1,15}$")


def decode_webhook_secret(secret: str | bytes) -> bytes:
    """The HMAC key of a webhook secret.

    ``whsec_<base64>`` (the Standard Webhooks form) is base64-decoded; any other string is
    used as its UTF-8 bytes (as the original watukuy does); ``bytes`` are used as they are.

    Raises:
        ConfigError: The secret is empty, or its ``whsec_`` part is not valid base64 (the
            secret itself is never written into the message).
    """
    if isinstance(secret, bytes):
        if not secret:
            raise ConfigError("expected a non-empty secret", field="secret")
        return secret
    if not isinstance(secret, str) or not secret:
        shown = "''" if secret == "" else type(secret).__name__
        raise ConfigError(f"expected a non-empty string or bytes, got {shown}", field="secret")
    if not secret.startswith(WEBHOOK_SECRET_PREFIX):
        return secret.encode()
    encoded = secret[len(WEBHOOK_SECRET_PREFIX) :]
    try:
        # Some providers drop the padding; the reference implementation tolerates that too.
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise ConfigError(
            f"the text after {WEBHOOK_SECRET_PREFIX!r} is not valid base64", field="secret"
        )
    return key


def standard_webhook_secret(secret: str | bytes) -> str:
    """The ``whsec_<base64>`` form of a secret: what to give a Standard Webhooks receiver.

    A raw string (or bytes) becomes ``whsec_`` + the base64 of its key bytes; a
    ``whsec_`` secret is returned as it is. Signatures made with either form are equal::

        >>> standard_webhook_secret("my shared secret")
        'whsec_bXkgc2hhcmVkIHNlY3JldA=='

    A receiver using the reference ``standardwebhooks`` library then verifies with
    ``Webhook(standard_webhook_secret(raw))``; ``Webhook(raw)`` would base64-decode the raw
    text and reject every signature.

    Raises:
        ConfigError: The secret is unusable (never echoed).
    """
    if isinstance(secret, str) and secret.startswith(WEBHOOK_SECRET_PREFIX):
        decode_webhook_secret(secret)  # validates it
        return secret
    return WEBHOOK_SECRET_PREFIX + base64.b64encode(decode_webhook_secret(secret)).decode()


def _content(id: str, timestamp: str, body: bytes | str) -> bytes:
    raw = body.encode() if isinstance(body, str) else bytes(body)
    return f"{id}.{timestamp}.".encode() + raw


def _mac(key: bytes, content: bytes) -> bytes:
    return hmac.new(key, content, hashlib.sha256).digest()


def sign_webhook(secret: str | bytes, id: str, timestamp: int | str, body: bytes | str) -> str:
    """The ``webhook-signature`` value for one message.

    Args:
        secret: ``whsec_<base64>``, a raw string, or key bytes.
        id: The ``webhook-id`` (watukuy sends ``event.id``).
        timestamp: The ``webhook-timestamp``, unix seconds.
        body: The exact request body.

    Returns:
        ``"v1,<base64>"``.

    Raises:
        ConfigError: The secret is unusable.
    """
    key = decode_webhook_secret(secret)
    mac = _mac(key, _content(id, str(timestamp), body))
    return f"{_VERSION},{base64.b64encode(mac).decode()}"


def verify_webhook_signature(
    secret: str | bytes,
    id: str,
    timestamp: int | str,
    body: bytes | str,
    signature_header: str,
    now: datetime | float | None = None,
    tolerance: Duration = DEFAULT_WEBHOOK_TOLERANCE,
) -> bool:
    """Check a received webhook, for receivers and tests.

    Every ``v1,`` entry of the space-separated header is compared with a constant-time
    comparison; one match is enough. Entries of other versions and undecodable ones are
    ignored. The timestamp must be whole unix seconds within ``tolerance`` of ``now``, in
    either direction, which stops replays of old messages.

    Args:
        secret: ``whsec_<base64>``, a raw string, or key bytes.
        id: The ``webhook-id`` header.
        timestamp: The ``webhook-timestamp`` header.
        body: The raw request body, exactly as received.
        signature_header: The ``webhook-signature`` header.
        now: The current time: an aware ``datetime``, or epoch **seconds** (the unit of
            the ``webhook-timestamp`` header), or ``None`` for the system clock.
        tolerance: Largest accepted distance between ``timestamp`` and ``now``.

    Returns:
        True when the timestamp is fresh and a signature matches.

    Raises:
        ConfigError: The secret, ``now`` or ``tolerance`` is unusable.
    """
    key = decode_webhook_secret(secret)
    now_s = _now_seconds(now)
    tolerance_ms = parse_duration(tolerance, "tolerance")
    text = (
        str(timestamp)
        if isinstance(timestamp, int) and not isinstance(timestamp, bool)
        else timestamp
    )
    if not isinstance(text, str) or _TIMESTAMP.fullmatch(text) is None:
        return False
    if abs(math.floor(now_s) - int(text)) * 1000 > tolerance_ms:
        return False
    expected = _mac(key, _content(id, text, body))
    matched = False
    for entry in signature_header.split():
        version, _, encoded = entry.partition(",")
        if version != _VERSION or not encoded:
            continue
        try:
            candidate = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        # Keep comparing after a match so the time taken does not say which entry matched.
        matched = hmac.compare_digest(expected, candidate) or matched
    return matched


def _now_seconds(now: datetime | float | None) -> float:
    if now is None:
        return SystemClock().now() / 1000
    if isinstance(now, datetime):
        if now.tzinfo is None or now.utcoffset() is None:
            raise ConfigError(
                f"expected an aware datetime (with a time zone), got {now!r}", field="now"
            )
        return now.timestamp()
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise ConfigError(f"expected a datetime or epoch seconds, got {now!r}", field="now")
    return float(now)
