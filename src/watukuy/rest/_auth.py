"""The credentials a declarative poller sends: bearer tokens, API keys, Basic auth and
OAuth2 client credentials.

Each kind is a frozen dataclass that checks its arguments when it is built
(``ConfigError`` naming the field), resolves its secrets for each request and each
partition (see :data:`~watukuy.rest.Secret`), and implements
:class:`~watukuy.rest.Auth`. None of them shows a secret in its ``repr``. :data:`AUTHS`
maps the ``type`` names of a TOML ``auth`` table to the classes, whose keywords are the
table's other keys::

    auth = { type = "bearer", token = "${GITHUB_TOKEN}" }
    auth = { type = "api_key", name = "X-Api-Key", value = { env = "ERP_KEY_{partition}" } }
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from watukuy.model.errors import ConfigError

from ._auth_port import Auth
from ._call import Call
from ._oauth2 import OAuth2ClientCredentials
from ._secret import Secret, coerce_secret, resolve_secret, shown

if TYPE_CHECKING:
    from watukuy.runtime.context import FetchContext

__all__ = ["AUTHS", "ApiKey", "Basic", "Bearer"]

# RFC 9110 token characters: what a header name (and an auth scheme) may be made of.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _token(value: object, field: str, what: str) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise ConfigError(f"expected {what}, got {value!r}", field=field)
    return value


async def _read_again(auth: Auth, call: Call, ctx: FetchContext[Any]) -> bool:
    """Whether credentials that do not expire by themselves changed since ``call`` was
    made: read again (a rotated environment variable, a function that now answers
    otherwise), they would make another request."""
    return await auth.apply(call, ctx) != call


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Bearer:
    """``Authorization: Bearer <token>`` on every request.

    Example::

        rest.Bearer(token=rest.Env("GITHUB_TOKEN"))

    Args:
        token: The token: a string (``{partition...}`` placeholders allowed), a
            :class:`~watukuy.rest.Env`, or a function of the partition.
        scheme: The word before the token (``"token"`` or ``"Token"`` for APIs that ask
            for it).

    Raises:
        ConfigError: ``token`` or ``scheme`` is not of an accepted kind.
    """

    token: Secret
    scheme: str = "Bearer"

    def __post_init__(self) -> None:
        object.__setattr__(self, "token", coerce_secret(self.token, "auth.token"))
        _token(self.scheme, "auth.scheme", "an authorization scheme like 'Bearer'")

    async def apply(self, call: Call, ctx: FetchContext[Any]) -> Call:
        """``call`` with the ``Authorization`` header of this partition's token."""
        token = await resolve_secret(self.token, ctx.partition, "auth.token")
        return call.with_headers(Authorization=f"{self.scheme} {token}")

    async def refresh(self, call: Call, ctx: FetchContext[Any]) -> bool:
        """After a ``401``: True when the secret read now differs from the one ``call``
        carried (it was rotated), so the request is worth sending again."""
        return await _read_again(self, call, ctx)

    def __repr__(self) -> str:
        return f"Bearer(token={shown(self.token)}, scheme={self.scheme!r})"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ApiKey:
    """An API key in a header (``X-Api-Key: <key>``) or a query parameter.

    The key is masked in logs and errors only when its name is one the engine's redaction
    policy knows as sensitive (``X-Api-Key``, ``api_key``, ``apikey``, names ending in
    ``-key``/``_key`` or containing ``token``, ...). Add any other name with
    ``Engine(redact=["name"])``, above all for a key sent in the query string, which is
    part of every logged URL.

    Args:
        value: The key: a string (placeholders allowed), an
            :class:`~watukuy.rest.Env`, or a function of the partition.
        name: The header's or the parameter's name.
        location: ``"header"`` or ``"query"``.

    Raises:
        ConfigError: An argument is not of an accepted kind.
    """

    value: Secret
    name: str = "X-Api-Key"
    location: Literal["header", "query"] = "header"

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", coerce_secret(self.value, "auth.value"))
        if self.location not in ("header", "query"):
            raise ConfigError(
                f"expected 'header' or 'query', got {self.location!r}", field="auth.location"
            )
        if self.location == "header":
            _token(self.name, "auth.name", "a header name like 'X-Api-Key'")
        elif not isinstance(self.name, str) or not self.name:
            raise ConfigError(
                f"expected a query parameter name like 'api_key', got {self.name!r}",
                field="auth.name",
            )

    async def apply(self, call: Call, ctx: FetchContext[Any]) -> Call:
        """``call`` with this partition's key in its header or its query."""
        key = await resolve_secret(self.value, ctx.partition, "auth.value")
        if self.location == "query":
            return call.with_params(**{self.name: key})
        return call.with_headers(**{self.name: key})

    async def refresh(self, call: Call, ctx: FetchContext[Any]) -> bool:
        """After a ``401``: True when the secret read now differs from the one ``call``
        carried (it was rotated), so the request is worth sending again."""
        return await _read_again(self, call, ctx)

    def __repr__(self) -> str:
        return f"ApiKey(name={self.name!r}, value={shown(self.value)}, location={self.location!r})"


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Basic:
    """HTTP Basic authentication (RFC 7617): ``Authorization: Basic <base64>``.

    Args:
        username: The user name: a string (placeholders allowed), an
            :class:`~watukuy.rest.Env`, or a function of the partition.
        password: The password, of the same kinds.

    Raises:
        ConfigError: An argument is not of an accepted kind.
    """

    username: Secret
    password: Secret

    def __post_init__(self) -> None:
        object.__setattr__(self, "username", coerce_secret(self.username, "auth.username"))
        object.__setattr__(self, "password", coerce_secret(self.password, "auth.password"))

    async def apply(self, call: Call, ctx: FetchContext[Any]) -> Call:
        """``call`` with the ``Authorization`` header of this partition's credentials.

        Raises:
            ConfigError: The user name holds a ``:``, which Basic auth cannot carry.
        """
        username = await resolve_secret(self.username, ctx.partition, "auth.username")
        if ":" in username:
            raise ConfigError("a Basic auth user name cannot hold ':'", field="auth.username")
        password = await resolve_secret(self.password, ctx.partition, "auth.password")
        pair = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        return call.with_headers(Authorization=f"Basic {pair}")

    async def refresh(self, call: Call, ctx: FetchContext[Any]) -> bool:
        """After a ``401``: True when the secret read now differs from the one ``call``
        carried (it was rotated), so the request is worth sending again."""
        return await _read_again(self, call, ctx)

    def __repr__(self) -> str:
        return f"Basic(username={shown(self.username)}, password={shown(self.password)})"


AUTHS: Mapping[str, Callable[..., Auth]] = MappingProxyType(
    {
        "bearer": Bearer,
        "api_key": ApiKey,
        "basic": Basic,
        "oauth2_client_credentials": OAuth2ClientCredentials,
    }
)
"""The auth kinds by the ``type`` name a TOML ``auth`` table gives; the table's other keys
are the class's keywords."""
