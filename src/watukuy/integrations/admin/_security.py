"""Who may see the page, and which forms it accepts.

- **Auth.** Every request (pages, actions, static files) first goes through the ``auth``
  callable: it receives the Starlette ``Request`` and returns something truthy (sync or
  async) to let it through. Falsy answers 403; raising Starlette's ``HTTPException``
  answers with that status and headers (a 401 with ``WWW-Authenticate``, a redirect to a
  login page); any other exception is logged and answers 403, so a broken check never
  opens the page.
- **CSRF.** The page gives each browser a random session id in an ``HttpOnly``,
  ``SameSite=Strict`` cookie, and every form carries ``HMAC-SHA256(secret, session id)``
  in a hidden field. A POST whose field is missing or does not match its cookie answers
  403. The secret is random per app unless one is given (give one when several worker
  processes serve the page, so a form rendered by one is accepted by another).
- **Headers.** A strict Content-Security-Policy (scripts and styles from the page's own
  static files only), no framing, no referrer outside the page, no caching.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "SESSION_COOKIE",
    "AuthCheck",
    "Csrf",
    "Guard",
]

_log = logging.getLogger("watukuy")

AuthCheck = Callable[[Request], Any | Awaitable[Any]]
"""``(request) -> truthy``, sync or async; may raise ``HTTPException``."""

SESSION_COOKIE = "watukuy_admin_session"

_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


class Guard:
    """ASGI middleware: the auth check before anything, the security headers after.

    Args:
        app: The admin routes.
        auth: The check, or ``None`` to serve everyone (the page then shows a banner).
    """

    def __init__(self, app: ASGIApp, auth: AuthCheck | None) -> None:
        self._app = app
        self._auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() not in {header for header, _ in _HEADERS}
                ]
                message = {**message, "headers": [*headers, *_HEADERS]}
            await send(message)

        refusal = await self._refusal(Request(scope, receive))
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self._app(scope, receive, send_with_headers)

    async def _refusal(self, request: Request) -> Response | None:
        if self._auth is None:
            return None
        try:
            allowed = self._auth(request)
            if inspect.isawaitable(allowed):
                allowed = await allowed
        except HTTPException as error:
            return PlainTextResponse(
                str(error.detail), status_code=error.status_code, headers=error.headers
            )
        except Exception as error:
            _log.warning(
                "admin page: the auth check raised %s; request refused", type(error).__name__
            )
            return PlainTextResponse("forbidden", status_code=403)
        if not allowed:
            return PlainTextResponse("forbidden", status_code=403)
        return None


class Csrf:
    """Form tokens bound to a browser's session cookie.

    Args:
        secret: Key of the HMAC (random when ``None``).
    """

    def __init__(self, secret: str | bytes | None) -> None:
        if secret is None:
            self._key = secrets.token_bytes(32)
        else:
            self._key = secret.encode() if isinstance(secret, str) else bytes(secret)

    @staticmethod
    def new_session() -> str:
        """A fresh session id for the cookie."""
        return secrets.token_urlsafe(24)

    def token(self, session: str) -> str:
        """The form token of a session."""
        return hmac.new(self._key, session.encode(), hashlib.sha256).hexdigest()

    def valid(self, session: str | None, token: object) -> bool:
        """Whether a submitted token belongs to the session of the cookie."""
        if not session or not isinstance(token, str) or not token:
            return False
        return hmac.compare_digest(self.token(session), token)
