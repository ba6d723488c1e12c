"""Who may see the page, and which forms it accepts.

- **Host.** A request whose ``Host`` is not one of the page's names answers 400 before
  anything else (see :mod:`._origin`: DNS rebinding).
- **Origin.** A ``POST`` (any method but ``GET``, ``HEAD`` and ``OPTIONS``) from another
  origin answers 403, before the auth check (see :func:`._origin.cross_origin`).
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
- **Confirmations.** A destructive action is never done by the request that asks for it:
  that request only renders a confirmation page carrying a token of its own
  (:class:`Confirmations`), bound to the browser's session and to the exact form, valid
  for five minutes and once. Only a second request with that token does it.
- **Headers.** A strict Content-Security-Policy (scripts and styles from the page's own
  static files only), no framing, no referrer outside the page, no caching.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._origin import HostRule, cross_origin

__all__ = [
    "SESSION_COOKIE",
    "AuthCheck",
    "Confirmations",
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


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# What a refused operator reads: the check is the application's own, so only it knows how
# to get in; the page says where to look rather than a bare word.
_REFUSED = (
    "forbidden: this application's auth check refused the request. Sign in the way it "
    "asks (its login, SSO, or the user name and password of basic_auth), then reload."
)


class Guard:
    """ASGI middleware: the ``Host``, ``Origin`` and auth checks before anything, the
    security headers after.

    Args:
        app: The admin routes.
        auth: The check, or ``None`` to serve everyone (the page then shows a banner).
        hosts: The ``Host`` names answered (``None``: any, the app in front checks them).
        origins: Origins besides the page's own allowed to post (normalised).
    """

    def __init__(
        self,
        app: ASGIApp,
        auth: AuthCheck | None,
        hosts: HostRule | None = None,
        origins: frozenset[str] = frozenset(),
    ) -> None:
        self._app = app
        self._auth = auth
        self._hosts = hosts
        self._origins = origins

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

        request = Request(scope, receive)
        refusal = self._misdirected(request) or await self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self._app(scope, receive, send_with_headers)

    def _misdirected(self, request: Request) -> Response | None:
        """A foreign ``Host`` (400) or a change from another origin (403)."""
        host = request.headers.get("host")
        if self._hosts is not None and not self._hosts.allows(host):
            shown = "no Host header" if host is None else f"host {host[:100]!r}"
            _log.warning(
                "admin page: refused a request for %s (not one of its allowed_hosts)", shown
            )
            return PlainTextResponse(
                f"bad request: this page does not answer to {shown}", status_code=400
            )
        if request.method in _SAFE_METHODS:
            return None
        reason = cross_origin(request.headers, self._origins)
        if reason is None:
            return None
        _log.warning("admin page: refused a %s: %s", request.method, reason)
        return PlainTextResponse(f"forbidden: {reason}", status_code=403)

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
            return PlainTextResponse(_REFUSED, status_code=403)
        if not allowed:
            return PlainTextResponse(_REFUSED, status_code=403)
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

    def sign(self, text: str) -> str:
        """``HMAC-SHA256`` of ``text`` under the same key, for other tokens of the page."""
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()


class Confirmations:
    """Single-use tokens of the confirmation step of destructive actions.

    A token is ``<expiry>.<nonce>.<mac>``, the MAC covering the session, the expiry, the
    nonce and the form it confirms; a redeemed nonce is remembered until its expiry, so
    each token works once (in this process: several worker processes each keep their own
    list, and a token still expires after ``ttl_ms``).

    Args:
        csrf: Whose key signs the tokens.
        ttl_ms: How long a confirmation page stays valid.
        keep: Most redeemed nonces remembered (the oldest are dropped first).
    """

    def __init__(self, csrf: Csrf, ttl_ms: int = 300_000, keep: int = 10_000) -> None:
        self._csrf = csrf
        self._ttl_ms = ttl_ms
        self._keep = keep
        self._used: OrderedDict[str, int] = OrderedDict()

    def issue(self, session: str, form: str, now: int) -> str:
        """A token confirming ``form`` (its canonical text) for ``session``."""
        expires = now + self._ttl_ms
        nonce = secrets.token_urlsafe(16)
        return f"{expires}.{nonce}.{self._mac(session, expires, nonce, form)}"

    def redeem(self, session: str | None, token: object, form: str, now: int) -> bool:
        """Whether ``token`` confirms ``form`` for ``session`` now; it is spent if so."""
        if not session or not isinstance(token, str):
            return False
        expires_text, _, rest = token.partition(".")
        nonce, _, mac = rest.partition(".")
        if not expires_text.isdigit() or not nonce or not mac:
            return False
        expires = int(expires_text)
        if expires <= now or nonce in self._used:
            return False
        if not hmac.compare_digest(self._mac(session, expires, nonce, form), mac):
            return False
        self._used[nonce] = expires
        while self._used and (
            len(self._used) > self._keep or next(iter(self._used.values())) <= now
        ):
            self._used.popitem(last=False)
        return True

    def _mac(self, session: str, expires: int, nonce: str, form: str) -> str:
        return self._csrf.sign(f"confirm|{session}|{expires}|{nonce}|{form}")
