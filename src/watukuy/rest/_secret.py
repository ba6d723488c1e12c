"""Secrets of a declarative poller: where a credential comes from, read at request time.

A :data:`Secret` is one of three things, resolved for each request and each partition:

* a ``str``, which may hold ``{partition}`` (the partition's key) and ``{partition.NAME}``
  (a field of the partition's ``data``) placeholders, so each tenant's credential can
  travel in the data that ``partitions()`` returned;
* an :class:`Env`, the name of an environment variable read when the request is made
  (its name may hold the same placeholders: ``Env("TOKEN_{partition}")``);
* a function of the :class:`~watukuy.Partition` returning the value, or an awaitable of
  it (a vault look-up, a token service of your own).

A resolved secret never appears in an error message: errors name the field and, for an
environment variable, the variable's name.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from watukuy.model.errors import ConfigError
from watukuy.model.partition import Partition

from ._describe import fill

__all__ = ["Env", "Secret", "coerce_secret", "resolve_secret", "shown"]

# Control characters in a header value would be refused by the HTTP layer with a message
# quoting the value: refuse them first, without it.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Env:
    """A secret read from the environment when each request is made.

    Reading it late lets a rotated credential take effect without a restart, and keeps
    the value out of the poller's definition (and so out of every ``repr``).

    Args:
        name: The variable's name; it may hold ``{partition}`` and ``{partition.NAME}``
            placeholders (``Env("ERP_TOKEN_{partition}")``: one variable per tenant).

    Raises:
        ConfigError: ``name`` is not a non-empty string without ``=`` or whitespace.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(
                f"expected the name of an environment variable, got {self.name!r}", field="name"
            )
        if "=" in self.name or any(character.isspace() for character in self.name):
            raise ConfigError(
                f"an environment variable's name has no '=' or whitespace, got {self.name!r}",
                field="name",
            )

    def read(self, partition: Partition, field: str = "secret") -> str:
        """The variable's value for ``partition``.

        Raises:
            ConfigError: The variable is unset or empty (the message names it).
        """
        name = fill(self.name, partition, field)
        value = os.environ.get(name)
        if not value:
            state = "is not set" if value is None else "is empty"
            raise ConfigError(f"the environment variable {name!r} {state}", field=field)
        return value


Secret: TypeAlias = str | Env | Callable[[Partition], str | Awaitable[str]]
"""A credential: a string (placeholders allowed), an :class:`Env`, or a function of the
partition that returns one (or an awaitable of one)."""


def coerce_secret(value: object, field: str) -> Secret:
    """Check a secret given to a constructor; ``{"env": "NAME"}`` (what a TOML table
    gives) becomes ``Env("NAME")``.

    Raises:
        ConfigError: It is none of the accepted kinds. The message names its type, never
            its value.
    """
    if isinstance(value, str):
        if not value:
            raise ConfigError("expected a non-empty secret, got an empty string", field=field)
        return value
    if isinstance(value, Env):
        return value
    if isinstance(value, Mapping):
        if set(value) != {"env"}:
            raise ConfigError(
                f"a table for a secret takes one key, 'env' (the variable's name), "
                f"got {sorted(map(str, value))}",
                field=field,
            )
        name = value["env"]
        try:
            return Env(name)
        except ConfigError as error:
            raise ConfigError(error.message.removeprefix("name: "), field=f"{field}.env") from None
    if callable(value):
        return value  # what it returns is checked when it is called
    raise ConfigError(
        "expected a string, rest.Env('NAME') or a function of the partition, "
        f"got {type(value).__name__}",
        field=field,
    )


async def resolve_secret(secret: Secret, partition: Partition, field: str) -> str:
    """The value of ``secret`` for ``partition``, for this request.

    Raises:
        ConfigError: The value is missing, empty, not a string, or holds control
            characters (a header cannot carry them). The value itself is never quoted.
    """
    if isinstance(secret, str):
        value: object = fill(secret, partition, field)
    elif isinstance(secret, Env):
        value = secret.read(partition, field)
    else:
        value = secret(partition)
        if inspect.isawaitable(value):
            value = await value
    if not isinstance(value, str):
        raise ConfigError(
            f"the secret's function returned {type(value).__name__}, expected a string",
            field=field,
        )
    if not value:
        raise ConfigError("the secret resolved to an empty string", field=field)
    if _CONTROL.search(value):
        raise ConfigError(
            "the secret holds control characters (a line break?), which no header can carry",
            field=field,
        )
    return value


def shown(secret: Any) -> str:
    """How a secret appears in a ``repr``: an :class:`Env` by its name, a function by its
    name, a string never."""
    if isinstance(secret, Env):
        return repr(secret)
    if isinstance(secret, str):
        return "'***'"
    name = getattr(secret, "__qualname__", None) or type(secret).__name__
    return f"<function {name}>"
