"""An admin page for operators, to mount in your own Starlette or FastAPI app.

::

    from fastapi import FastAPI
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from watukuy.integrations.admin import admin_app, basic_auth

    app = FastAPI(lifespan=watukuy_lifespan(engine))
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=["ops.example.com"])
    # The browser asks for the user name and password; or give your own check: a
    # session cookie of your app, a header your SSO proxy sets.
    app.mount("/watukuy", admin_app(engine, auth=basic_auth("ops", OPS_PASSWORD)))

Pages: the overview of every (poller, partition) key (lag, last poll, next due, circuit,
outbox, parked, lease holder, budget; paged, sortable and filterable), one key's page (its
cursors, schedule, last error, a lag chart, recent logged events, parked rows, and the
actions: trigger, pause, resume, reset the cursor, backfill, retry or discard parked rows,
confirm or discard held deletes), and the parked rows of every key. The pages refresh
their live parts every few seconds without a full reload (a small script of the page's
own; without JavaScript they reload).

Safety (see :mod:`._security`): a request for a ``Host`` the page does not answer to is
refused (DNS rebinding: ``allowed_hosts``; an app that serves the page under its own names
checks them with a trusted-host middleware, as above); a change from another origin is
refused (``Origin``, ``Sec-Fetch-Site``); every request goes through ``auth``; every change
is a ``POST`` carrying a CSRF token bound to the browser's session cookie; a destructive
change is done only by a second request, from its confirmation page; values are escaped,
errors pass through the engine's redaction policy, and neither item payloads of logged
events nor partition ``data`` are shown. ``watukuy ui`` serves the same page on 127.0.0.1.
Needs ``pip install 'watukuy[admin]'``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

try:
    import jinja2  # noqa: F401  (the templates)
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
except ImportError as _error:  # pragma: no cover - exercised in a child process
    raise ImportError(
        "watukuy.integrations.admin needs Starlette and Jinja2: pip install 'watukuy[admin]'"
    ) from _error

from importlib import resources

from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.ports import Clock
from watukuy.runtime.engine import EngineCore

from ._auth import basic_auth
from ._backend import AdminOperator, Backend, KeySummary
from ._origin import LOOPBACK_NAMES, HostRule, normal_origins
from ._security import AuthCheck, Csrf, Guard
from ._views import Pages, PagesConfig

__all__ = ["AdminOperator", "AuthCheck", "KeySummary", "admin_app", "basic_auth"]

_log = logging.getLogger("watukuy")


def admin_app(
    engine: EngineCore | AdminOperator,
    *,
    auth: AuthCheck | None,
    secret: str | bytes | None = None,
    title: str = "watukuy",
    page_size: int = 50,
    refresh: Duration = "5s",
    index_ttl: Duration = "10s",
    clock: Clock | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
) -> Starlette:
    """The admin page as an ASGI app: ``app.mount("/watukuy", admin_app(engine, auth=...))``.

    Args:
        engine: The engine to operate; or, for a store alone, an :class:`AdminOperator`
            (what ``watukuy ui --store`` passes: no backfill then, and cursors as stored).
        auth: ``(request) -> truthy``, sync or async, called for every request; a falsy
            answer is 403, a Starlette ``HTTPException`` it raises is answered as such
            (a 401 with ``WWW-Authenticate``, a redirect to your login).
            :func:`basic_auth` is one a browser can answer with no code of yours. Required:
            ``auth=None`` serves the page to anyone who can reach it, and the page then
            says so in a red banner; use it only behind a check of your own or on
            127.0.0.1.
        secret: Key of the CSRF tokens. Random per app by default; give the same one to
            every worker process that serves the page.
        title: Shown in the header and the window title.
        page_size: Keys per overview page (10 to 500).
        refresh: How often the live parts of a page refresh (``"0s"`` turns it off).
        index_ttl: Longest age of the snapshot of every key behind sorted and filtered
            views (those read every key's state; the default view reads only its page).
        clock: Time for a store alone (default: the system clock); an engine brings its own.
        allowed_hosts: The ``Host`` names the page answers to (``"localhost"``,
            ``"127.0.0.1:8765"``, ``"*.example.com"``, ``"*"`` for any); any other answers
            400 before anything is served, which is what stops DNS rebinding. Default: with
            ``auth=None`` only this machine's names (``localhost``, ``127.0.0.1``,
            ``[::1]``), since the page is then for this machine only; with an ``auth``
            check any, and the app serving the page checks its own names (Starlette's
            ``TrustedHostMiddleware``).
        allowed_origins: Origins besides the page's own from which changes may be posted
            (``"https://ops.example.com"``). A ``POST`` whose ``Origin`` is neither, or
            whose ``Sec-Fetch-Site`` is not ``same-origin``, answers 403.

    Returns:
        A Starlette application.

    Raises:
        ConfigError: An option is invalid.
    """
    if auth is not None and not callable(auth):
        raise ConfigError(f"expected a callable or None, got {auth!r}", field="auth")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 10 <= page_size <= 500:
        raise ConfigError(
            f"expected an integer from 10 to 500, got {page_size!r}", field="page_size"
        )
    if not isinstance(title, str) or not title.strip():
        raise ConfigError(f"expected a non-empty string, got {title!r}", field="title")
    if secret is not None and (not isinstance(secret, str | bytes) or len(secret) < 16):
        raise ConfigError("expected at least 16 characters or bytes", field="secret")
    refresh_ms = parse_duration(refresh, "refresh")
    index_ttl_ms = parse_duration(index_ttl, "index_ttl")
    hosts = _host_rule(allowed_hosts, open_access=auth is None)
    origins = _origins(allowed_origins)
    backend = Backend(engine, clock)
    if auth is None:
        _log.warning(
            "admin page: served without authentication (auth=None); anyone who reaches it "
            "can pause pollers and discard parked events"
        )
    pages = Pages(
        backend,
        Csrf(secret),
        PagesConfig(
            title=title.strip(),
            page_size=page_size,
            refresh_s=refresh_ms / 1000,
            open_access=auth is None,
        ),
        index_ttl_ms,
    )
    static = resources.files("watukuy.integrations.admin") / "static"
    app = Starlette(
        routes=[
            Route("/", pages.guarded(pages.overview), methods=["GET"], name="overview"),
            Route("/key", pages.guarded(pages.key), methods=["GET"], name="key"),
            Route("/parked", pages.guarded(pages.parked), methods=["GET"], name="parked"),
            Route("/action", pages.guarded(pages.action), methods=["POST"], name="action"),
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ],
    )
    app.add_middleware(Guard, auth=auth, hosts=hosts, origins=origins)
    return app


def _host_rule(allowed: Sequence[str] | None, *, open_access: bool) -> HostRule | None:
    if allowed is None:
        return HostRule.of(LOOPBACK_NAMES) if open_access else None
    if isinstance(allowed, str):
        raise ConfigError(f"expected a list of host names, got {allowed!r}", field="allowed_hosts")
    try:
        return HostRule.of(allowed)
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error), field="allowed_hosts") from None


def _origins(allowed: Sequence[str]) -> frozenset[str]:
    if isinstance(allowed, str):
        raise ConfigError(f"expected a list of origins, got {allowed!r}", field="allowed_origins")
    try:
        return normal_origins(allowed)
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error), field="allowed_origins") from None
