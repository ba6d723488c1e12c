"""OAuth2 client credentials (RFC 6749 section 4.4) for declarative pollers.

The token request is made with Authlib's client-side pieces (the form body, the client's
authentication, the token's expiry) and sent through ``ctx.http`` like any other
request, so the engine's timeouts, TLS and redirect rules and its redaction of logs and
errors hold for it too. The token is kept in memory only, one per (auth object,
partition), until shortly before it expires; it is never logged, stored or put in an
error.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from watukuy.model.errors import ConfigError, HttpError, WatukuyError
from watukuy.model.redact import DEFAULT_REDACTION, Redaction

from ._call import Call
from ._describe import fill
from ._secret import Secret, coerce_secret, resolve_secret, shown

if TYPE_CHECKING:
    from watukuy.model.http_api import FetchResponse
    from watukuy.runtime.context import FetchContext

__all__ = ["OAuth2ClientCredentials"]

_METHODS: Final = {"basic": "client_secret_basic", "body": "client_secret_post"}
_URL_STARTS: Final = ("https://", "http://", "/", "{partition")
_RESERVED: Final = frozenset({"grant_type", "client_id", "client_secret", "scope", "audience"})
# A token is renewed this long before it expires (a tenth of its lifetime when shorter),
# so a request never leaves with a token that expires on its way.
_MARGIN_S: Final = 30.0
# Slots of partitions whose token went stale (a tenant removed, or idle past its token's
# life) are dropped once the slots outnumber twice what the last sweep left, and never
# fewer than this: the memory held stays proportional to the partitions in use.
_SWEEP_FROM: Final = 256
# A token issued without ``expires_in`` never goes stale on its own: a sweep drops its slot
# once no request used it for this long (the partition's next request asks for a token
# again), so a removed tenant's token of that kind does not stay in memory for good.
_IDLE_S: Final = 3600.0


def _require_authlib() -> None:
    if importlib.util.find_spec("authlib") is None:
        raise ImportError("rest.OAuth2ClientCredentials needs Authlib: pip install 'watukuy[rest]'")


@dataclass(slots=True)
class _Slot:
    """The token of one partition, and the lock its requests wait on while it is fetched
    (so concurrent requests share one token request)."""

    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    token: Any = None  # an authlib OAuth2Token
    margin: float = 0.0
    used: float = 0.0  # the loop's time of the last request that asked for the slot

    @property
    def access(self) -> str | None:
        return None if self.token is None else str(self.token["access_token"])

    def fresh(self) -> bool:
        return self.token is not None and not self.token.is_expired(leeway=self.margin)

    def needed(self, now: float) -> bool:
        """A request is renewing the token, or the token is fresh (one that never expires
        only while requests used it within the last ``_IDLE_S`` seconds)."""
        if self.lock.locked():
            return True
        if not self.fresh():
            return False
        return self.token.get("expires_at") is not None or now - self.used < _IDLE_S


@dataclass(frozen=True, slots=True, kw_only=True, repr=False, eq=False)
class OAuth2ClientCredentials:
    """OAuth2 client credentials: a token asked of ``token_url`` with the client's id and
    secret, sent as ``Authorization: Bearer <token>``.

    The token is asked for on first use, kept per partition until shortly before its
    ``expires_in`` (without one, until a ``401``), and asked for again once when the API
    answers ``401``. Concurrent requests of a partition share one token request. The
    token request goes through ``ctx.http`` without charging the poller's budget. The
    token of a partition no longer polled is let go once it has expired.

    Example::

        rest.OAuth2ClientCredentials(
            token_url="https://auth.example.com/oauth/token",
            client_id="{partition.client_id}",
            client_secret=rest.Env("ERP_SECRET_{partition}"),
            scope=["orders:read"],
        )

    Args:
        token_url: The token endpoint (``{partition...}`` placeholders allowed).
        client_id: The client's id: a string (placeholders allowed), an
            :class:`~watukuy.rest.Env`, or a function of the partition.
        client_secret: The client's secret, of the same kinds.
        scope: The scope to ask for: one string, or a list joined with spaces.
        audience: The ``audience`` parameter some servers require (Auth0, Okta).
        client_auth: How the client authenticates: ``"basic"`` (an ``Authorization:
            Basic`` header, the RFC's default) or ``"body"`` (``client_id`` and
            ``client_secret`` in the form body).
        extra: More form parameters of the token request (``resource``, ...).

    Raises:
        ConfigError: An argument is not of an accepted kind.
        ImportError: Authlib is not installed (``pip install 'watukuy[rest]'``).
    """

    token_url: str
    client_id: Secret
    client_secret: Secret
    scope: str | Sequence[str] | None = None
    audience: str | None = None
    client_auth: Literal["basic", "body"] = "basic"
    extra: Mapping[str, str] | None = None
    _slots: dict[str, _Slot] = field(default_factory=dict, init=False)
    _sweep_at: list[int] = field(default_factory=lambda: [_SWEEP_FROM], init=False)

    def __post_init__(self) -> None:
        url = self.token_url
        if not isinstance(url, str) or not url.startswith(_URL_STARTS):
            shown_url = repr(DEFAULT_REDACTION.url(url)) if isinstance(url, str) else type(url)
            raise ConfigError(f"expected an http(s) URL, got {shown_url}", field="auth.token_url")
        object.__setattr__(self, "client_id", coerce_secret(self.client_id, "auth.client_id"))
        object.__setattr__(
            self, "client_secret", coerce_secret(self.client_secret, "auth.client_secret")
        )
        object.__setattr__(self, "scope", _scope(self.scope))
        if self.audience is not None and (not isinstance(self.audience, str) or not self.audience):
            raise ConfigError(f"expected a string, got {self.audience!r}", field="auth.audience")
        if self.client_auth not in _METHODS:
            raise ConfigError(
                f"expected 'basic' or 'body', got {self.client_auth!r}", field="auth.client_auth"
            )
        object.__setattr__(self, "extra", _extra(self.extra))
        _require_authlib()

    async def apply(self, call: Call, ctx: FetchContext[Any]) -> Call:
        """``call`` with this partition's token, asked for first when there is none
        fresh."""
        slot = self._slot(ctx.partition.key)
        if not slot.fresh():
            async with slot.lock:
                if not slot.fresh():  # another request may have renewed it meanwhile
                    await self._renew(slot, ctx)
        return call.with_headers(Authorization=f"Bearer {slot.access}")

    async def refresh(self, call: Call, ctx: FetchContext[Any]) -> bool:
        """After a ``401`` to ``call`` (as it was sent): ask for a new token, unless
        another request already replaced the one refused. True once a new token is
        there.

        Raises:
            HttpError: The token endpoint refused or failed.
            WatukuyError: It answered something that holds no token.
        """
        refused = _bearer_of(call)
        slot = self._slot(ctx.partition.key)
        async with slot.lock:
            if slot.access is not None and slot.access != refused:
                return True
            slot.token = None
            await self._renew(slot, ctx)
        return True

    def _slot(self, partition: str) -> _Slot:
        loop = asyncio.get_running_loop()
        slot = self._slots.get(partition)
        # A lock belongs to one event loop: a definition reused under another loop (a
        # second asyncio.run, a test) starts over with a slot of its own.
        if slot is None or slot.loop is not loop:
            slot = self._slots[partition] = _Slot(loop)
            if len(self._slots) > self._sweep_at[0]:
                self._sweep(loop, keep=partition)
        slot.used = loop.time()
        return slot

    def _sweep(self, loop: asyncio.AbstractEventLoop, *, keep: str) -> None:
        """Drop the slots no request needs (``keep``'s excepted, just made for a request):
        no fresh token (or one that never expires, unused for ``_IDLE_S``) and no request
        renewing it, or made under another event loop. A request holding a slot that is
        dropped goes on with it; the next request of that partition asks for a token
        again."""
        now = loop.time()
        for partition, slot in list(self._slots.items()):
            if partition == keep:
                continue
            if slot.loop is not loop or not slot.needed(now):
                del self._slots[partition]
        self._sweep_at[0] = max(_SWEEP_FROM, 2 * len(self._slots))

    async def _renew(self, slot: _Slot, ctx: FetchContext[Any]) -> None:
        from authlib.oauth2.auth import ClientAuth
        from authlib.oauth2.rfc6749 import OAuth2Token
        from authlib.oauth2.rfc6749.parameters import prepare_token_request

        partition = ctx.partition
        url = fill(self.token_url, partition, "auth.token_url")
        client_id = await resolve_secret(self.client_id, partition, "auth.client_id")
        secret = await resolve_secret(self.client_secret, partition, "auth.client_secret")
        body = prepare_token_request("client_credentials", **self._form(ctx))
        headers = {"content-type": "application/x-www-form-urlencoded"}
        client = ClientAuth(client_id, secret, _METHODS[self.client_auth])
        _, headers, body = client.prepare("POST", url, headers, body)
        response = await ctx.http.request(
            "POST", url, headers=headers, content=body, cost=0, validators=False,
            raise_for_status=False,
        )  # fmt: skip
        clean = Redaction(values=[secret])
        shown_url = clean.url(url)
        token, expires_in = _token_of(response, shown_url, clean)
        slot.token = OAuth2Token.from_dict({"access_token": token, "expires_in": expires_in})
        slot.margin = 0.0 if expires_in is None else min(_MARGIN_S, expires_in / 10)
        ctx.logger.debug(
            "OAuth2 token obtained from %s (expires in %s)",
            shown_url,
            "an unknown time" if expires_in is None else f"{expires_in:g} s",
        )

    def _form(self, ctx: FetchContext[Any]) -> dict[str, str]:
        partition = ctx.partition
        form: dict[str, str] = {}
        if self.scope:
            form["scope"] = fill(" ".join(self.scope), partition, "auth.scope")
        if self.audience is not None:
            form["audience"] = fill(self.audience, partition, "auth.audience")
        for name, value in (self.extra or {}).items():
            form[name] = fill(value, partition, f"auth.extra.{name}")
        return form

    def __repr__(self) -> str:
        return (
            f"OAuth2ClientCredentials(token_url={DEFAULT_REDACTION.url(self.token_url)!r}, "
            f"client_id={_client_id(self.client_id)}, "
            f"client_secret={shown(self.client_secret)}, scope={self.scope!r}, "
            f"audience={self.audience!r}, client_auth={self.client_auth!r})"
        )


def _client_id(value: Secret) -> str:
    # A client id identifies the client without proving anything (RFC 6749 section 2.2):
    # showing it tells which client a poller uses.
    return repr(value) if isinstance(value, str) else shown(value)


def _scope(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    scopes = value.split() if isinstance(value, str) else value
    if not isinstance(scopes, Sequence) or not all(
        isinstance(one, str) and one and not any(c.isspace() for c in one) for one in scopes
    ):
        raise ConfigError(
            f"expected a string or a list of scope names, got {value!r}", field="auth.scope"
        )
    return tuple(scopes)


def _extra(value: object) -> Mapping[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(name, str) and name and isinstance(one, str) for name, one in value.items()
    ):
        raise ConfigError("expected a table of form parameter names to strings", field="auth.extra")
    taken = sorted(_RESERVED & set(value))
    if taken:
        raise ConfigError(
            f"{taken[0]!r} is set by the flow itself; use the keyword of its own if it has one",
            field="auth.extra",
        )
    return dict(value)


def _bearer_of(call: Call) -> str | None:
    token = None
    for name, value in call.headers.items():
        if name.lower() == "authorization" and value[:7].lower() == "bearer ":
            token = value[7:]
    return token


def _token_of(
    response: FetchResponse, shown_url: str, clean: Redaction
) -> tuple[str, float | None]:
    """The access token and its lifetime in seconds from the token endpoint's answer.

    Raises:
        HttpError: The endpoint answered an error status.
        WatukuyError: A success that is not JSON, or holds no token.
    """
    where = f"the OAuth2 token request to {shown_url}"
    if not response.ok or response.not_modified:
        _raise_refused(response, where, clean)
    kind = response.headers.get("content-type") or "no content type"
    try:
        body = response.json()
    except ValueError:
        raise WatukuyError(
            f"{where} answered {response.status} ({kind}) with a body that is not JSON "
            f"({len(response.content)} bytes)",
            code="INVALID_PAGE",
        ) from None
    if not isinstance(body, Mapping):
        raise WatukuyError(
            f"{where} answered {response.status} with JSON that is not an object "
            f"({type(body).__name__})",
            code="INVALID_PAGE",
        )
    if "error" in body:
        raise WatukuyError(clean.text(f"{where} answered {_oauth_error(body)}"), code="HTTP")
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise WatukuyError(
            f"{where} answered {response.status} without an access_token "
            f"(keys: {', '.join(sorted(map(str, body))) or 'none'})",
            code="INVALID_PAGE",
        )
    return token, _lifetime(body.get("expires_in"), where)


def _lifetime(value: object, where: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        seconds = math.nan
    if isinstance(value, bool) or not math.isfinite(seconds) or seconds <= 0:
        raise WatukuyError(
            f"{where} answered an expires_in that is not a positive number: {value!r}",
            code="INVALID_PAGE",
        )
    return seconds


def _oauth_error(body: Mapping[str, Any]) -> str:
    error = str(body.get("error"))
    description = body.get("error_description")
    return f"{error} ({description})" if description else error


def _raise_refused(response: FetchResponse, where: str, clean: Redaction) -> None:
    try:
        response.raise_for_status()
    except HttpError as error:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, Mapping) and "error" in body:
            detail = _oauth_error(body)
        elif error.problem and (error.problem.get("detail") or error.problem.get("title")):
            detail = str(error.problem.get("detail") or error.problem.get("title"))
        else:
            excerpt = response.text[:120].strip()
            detail = repr(excerpt) if excerpt else "an empty body"
        raise HttpError(
            clean.text(f"{where} answered {error.status}: {detail}"),
            status=error.status,
            url=error.url,
            method=error.method,
            retry_after=error.retry_after,
            rate_limit=error.rate_limit,
            problem=error.problem,
            body_text=clean.text(error.body_text),
        ) from None
    # a 304: nothing can be made of it
    raise WatukuyError(f"{where} answered 304 Not Modified", code="INVALID_PAGE")
