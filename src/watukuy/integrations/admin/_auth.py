"""Sign-in a browser can do by itself: HTTP Basic authentication for the admin page.

A check of one's own (``auth=`` a session cookie of the app, a header an SSO proxy sets)
stays the best choice when the app has one. When it has none, :func:`basic_auth` is the
check that needs nothing more: a browser asks for a user name and password in its own
dialog, sends them with every request of the page, and a refused or missing answer is a
``401`` whose ``WWW-Authenticate`` header makes it ask again. Over anything but a loopback
address, serve the page over HTTPS: Basic credentials travel in every request.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os

from starlette.exceptions import HTTPException
from starlette.requests import Request

from watukuy.model.errors import ConfigError

from ._security import AuthCheck

__all__ = ["MIN_PASSWORD", "PASSWORD_ENV", "USER_ENV", "basic_auth"]

USER_ENV = "WATUKUY_ADMIN_USER"
PASSWORD_ENV = "WATUKUY_ADMIN_PASSWORD"
MIN_PASSWORD = 12


def _credentials(header: str) -> tuple[bytes, bytes] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


def basic_auth(
    username: str | None = None,
    password: str | None = None,
    *,
    realm: str = "watukuy admin",
) -> AuthCheck:
    """An ``auth`` check for :func:`admin_app` that a browser can answer: HTTP Basic.

    A request without the right user name and password answers ``401`` with
    ``WWW-Authenticate: Basic realm="..."``, so the browser shows its sign-in dialog; the
    credentials are compared in constant time. ``watukuy ui --token`` uses this check.

    Args:
        username: The user name to accept. Default: the environment variable
            ``WATUKUY_ADMIN_USER``; when neither is set, any user name is accepted and the
            password alone decides.
        password: The password, at least 12 characters. Default: the environment
            variable ``WATUKUY_ADMIN_PASSWORD``.
        realm: The name the browser shows in its dialog.

    Returns:
        The check to pass as ``admin_app(engine, auth=...)``.

    Raises:
        ConfigError: No password (neither given nor in the environment), one shorter than
            12 characters, or a realm that is empty or holds a quote.
    """
    user = username if username is not None else os.environ.get(USER_ENV) or None
    secret = password if password is not None else os.environ.get(PASSWORD_ENV)
    if not secret:
        raise ConfigError(
            f"no password given, and {PASSWORD_ENV} is not set; pass "
            f"basic_auth(username, password) or set {PASSWORD_ENV}",
            field="password",
        )
    if not isinstance(secret, str) or len(secret) < MIN_PASSWORD:
        raise ConfigError(f"use at least {MIN_PASSWORD} characters", field="password")
    if user is not None and (not isinstance(user, str) or not user or ":" in user):
        raise ConfigError(f"expected a non-empty name without ':', got {user!r}", field="username")
    if not isinstance(realm, str) or not realm.strip() or '"' in realm or "\\" in realm:
        raise ConfigError(f"expected a non-empty name without quotes, got {realm!r}", field="realm")
    expected_user = None if user is None else user.encode()
    expected_password = secret.encode()
    challenge = {"WWW-Authenticate": f'Basic realm="{realm}", charset="UTF-8"'}

    def check(request: Request) -> bool:
        given = _credentials(request.headers.get("authorization", ""))
        if given is not None:
            given_user, given_password = given
            # Both comparisons run every time: how long a refusal takes says nothing
            # about which half was wrong.
            user_ok = expected_user is None or hmac.compare_digest(given_user, expected_user)
            password_ok = hmac.compare_digest(given_password, expected_password)
            if user_ok and password_ok:
                return True
        raise HTTPException(
            401,
            "authentication required: sign in with the admin page's user name and "
            "password (your browser asks for them; a script sends an Authorization: "
            "Basic header)",
            headers=challenge,
        )

    return check
