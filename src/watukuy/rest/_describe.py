"""Describing an endpoint as data: the request template, its placeholders, and where the
items, their identity and their version are found in an answer.

A :class:`Request` is a template: its strings may hold ``{partition}`` (the partition key)
and ``{partition.NAME}`` (a field of the partition's ``data``), filled in for each request
by :meth:`Request.render`. Only those exact patterns are replaced; any other brace (a
GraphQL query is full of them) is left alone.

Selectors say where things are: ``items`` is a dotted path to the list in the body
(``"results"``, ``"data.orders.nodes"``; ``"."`` or ``""`` for the body itself),
``identity`` and ``version`` dotted paths inside one item; each may be a callable instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from watukuy.cursor.path import MISSING, check_path, resolve_path
from watukuy.model.durations import Duration, parse_duration
from watukuy.model.errors import ConfigError
from watukuy.model.page import InvalidPageError
from watukuy.model.partition import Partition
from watukuy.model.redact import DEFAULT_REDACTION, REDACTED, redact_url

from ._auth_port import Auth
from ._call import Call
from ._paging import Paginator

__all__ = [
    "METHODS",
    "SAFE_HEADERS",
    "FieldSpec",
    "ItemsSpec",
    "Listing",
    "Request",
    "check_auth",
    "check_paginator",
    "field_reader",
    "fill",
    "fill_value",
    "items_reader",
    "redacted_headers",
]

ItemsSpec: TypeAlias = "str | Callable[[Any], Sequence[Any]]"
"""Where the list of items is in a body: a dotted path (``"."`` or ``""``: the body
itself), or ``(body) -> list``."""

FieldSpec: TypeAlias = "str | Callable[[Any], Any]"
"""Where a value is in an item: a dotted path (``"id"``, ``"meta.updated_at"``), or
``(item) -> value``."""

METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "QUERY"})
"""The HTTP methods a :class:`Request` accepts (in any case)."""

SAFE_HEADERS: Final = frozenset(
    {"accept", "accept-encoding", "accept-language", "content-type", "user-agent"}
)
"""Headers whose values a ``repr`` shows; every other header value is shown as ``***``."""

_PLACEHOLDER: Final = re.compile(r"\{partition(?:\.([A-Za-z_][A-Za-z0-9_-]*))?\}")


# --- placeholders ---------------------------------------------------------------------


def _lookup(partition: Partition, name: str | None, field: str) -> Any:
    if name is None:
        return partition.key
    data = partition.data
    if isinstance(data, Mapping):
        if name in data:
            return data[name]
    elif data is not None and hasattr(data, name):
        return getattr(data, name)
    # The data may hold credentials: name the missing field, never show the data.
    raise ConfigError(
        f"{{partition.{name}}}: the data of partition {partition.key!r} has no {name!r}",
        field=field,
    )


def fill(text: str, partition: Partition, field: str) -> str:
    """``text`` with ``{partition}`` and ``{partition.NAME}`` replaced.

    Args:
        text: A template string; braces that are not one of the two patterns stay.
        partition: The partition being polled.
        field: The option being filled in, named by the error.

    Raises:
        ConfigError: ``{partition.NAME}`` names a field the partition's data lacks.
    """
    if "{partition" not in text:
        return text
    return _PLACEHOLDER.sub(lambda match: str(_lookup(partition, match.group(1), field)), text)


def fill_value(value: Any, partition: Partition, field: str) -> Any:
    """Fill placeholders in every string of ``value`` (dicts and lists, recursively).

    A string that is exactly one placeholder is replaced by the value itself, not its
    text, so ``{"limit": "{partition.limit}"}`` sends the partition's number as a number.
    """
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole is not None:
            return _lookup(partition, whole.group(1), field)
        return fill(value, partition, field)
    if isinstance(value, Mapping):
        return {key: fill_value(inner, partition, f"{field}.{key}") for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [fill_value(inner, partition, field) for inner in value]
    return value


# --- selectors ------------------------------------------------------------------------


def items_reader(spec: object, field: str = "items") -> Callable[[Any], list[Any]]:
    """A function that takes the list of items out of a decoded body.

    Args:
        spec: A dotted path (``"."`` or ``""``: the body itself), or ``(body) -> list``.
        field: The option's name, for errors.

    Raises:
        ConfigError: ``spec`` is neither a usable path nor a callable.
    """
    if callable(spec):
        function: Callable[[Any], Any] = spec

        def call(body: Any) -> list[Any]:
            return _as_list(function(body), f"what {field}() returned")

        return call
    if not isinstance(spec, str):
        raise ConfigError(
            f"expected a dotted path like 'results' or a callable, got {spec!r}", field=field
        )
    if spec in ("", "."):
        return lambda body: _as_list(body, "the body")
    problem = check_path(spec)
    if problem:
        raise ConfigError(problem, field=field)

    def read(body: Any) -> list[Any]:
        found = resolve_path(body, spec)
        if found is MISSING:
            raise InvalidPageError(f"the body has no {spec!r} (items={spec!r})")
        return _as_list(found, f"{spec!r} in the body")

    return read


def _as_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidPageError(f"expected a list of items as {what}, got {type(value).__name__}")
    return list(value)


def field_reader(spec: object, field: str) -> Callable[[Any], Any]:
    """A function that reads one value out of an item.

    Args:
        spec: A dotted path (keys of dicts, indexes of lists, attributes of objects), or a
            callable ``(item) -> value``.
        field: The option's name, for errors.

    Returns:
        The reader; on an item without the path it raises ``ValueError`` (the engine then
        treats the item as invalid, as it does when an ``identity`` function fails).

    Raises:
        ConfigError: ``spec`` is neither a usable path nor a callable.
    """
    if callable(spec):
        return spec
    problem = check_path(spec)
    if problem:
        raise ConfigError(
            f"{problem}, or a callable" if isinstance(spec, str) else problem, field=field
        )
    path: str = spec  # type: ignore[assignment]  # check_path accepted it: a str

    def read(item: Any) -> Any:
        found = resolve_path(item, path)
        if found is MISSING:
            raise ValueError(f"the item has no {path!r} ({field}={path!r})")
        return found

    return read


# --- the request template ---------------------------------------------------------------


def _check_mapping(value: object, field: str, *, text_values: bool) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected a table of names to values, got {value!r}", field=field)
    checked: dict[str, Any] = {}
    for name, inner in value.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"expected names that are non-empty strings, got {name!r}", field=field
            )
        if text_values and not isinstance(inner, str):
            shown = REDACTED if name.lower() not in SAFE_HEADERS else repr(inner)
            raise ConfigError(
                f"expected a string value, got {type(inner).__name__} {shown}",
                field=f"{field}.{name}",
            )
        if not text_values and not _is_query_value(inner):
            raise ConfigError(
                f"expected a string, number, boolean, None or a list of them, "
                f"got {type(inner).__name__}",
                field=f"{field}.{name}",
            )
        checked[name] = inner
    return checked


def _check_json(value: object, field: str) -> None:
    """Raise unless ``value`` is JSON data: objects with text keys, lists, text, numbers,
    booleans and ``None``."""
    if value is None or isinstance(value, str | int | float | bool):
        return
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"expected text keys, got {key!r}", field=field)
            _check_json(inner, f"{field}.{key}")
        return
    if isinstance(value, list | tuple):
        for inner in value:
            _check_json(inner, field)
        return
    raise ConfigError(f"expected JSON data, got {type(value).__name__}", field=field)


def _is_query_value(value: object) -> bool:
    scalar = (str, int, float, bool, type(None))
    if isinstance(value, scalar):
        return True
    return isinstance(value, list | tuple) and all(isinstance(inner, scalar) for inner in value)


def _redacted_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: REDACTED if DEFAULT_REDACTION.is_sensitive(name) else value
        for name, value in params.items()
    }


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with every value masked except those of :data:`SAFE_HEADERS`."""
    return {
        name: value if name.lower() in SAFE_HEADERS else REDACTED for name, value in headers.items()
    }


@dataclass(frozen=True, slots=True, repr=False)
class Request:
    """The request a declarative poller sends, as a template.

    Every string in ``url``, ``params``, ``headers`` and ``json`` (at any depth) may hold
    ``{partition}`` and ``{partition.NAME}`` placeholders.

    Args:
        url: The URL of the first page: absolute, or relative to the engine's HTTP client
            ``base_url``.
        method: The HTTP method (``"POST"`` for search endpoints that take a JSON body).
        params: Query parameters sent with every page (the paginator adds its own).
        headers: Request headers. Their values are shown in a ``repr`` only for
            :data:`SAFE_HEADERS`.
        json: A JSON body sent with every page.

    Raises:
        ConfigError: A value has the wrong type; the message names the field
            (``request.url``, ``request.params.per_page``, ...).
    """

    url: str
    method: str = "GET"
    params: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.strip():
            raise ConfigError(f"expected a non-empty URL, got {self.url!r}", field="request.url")
        method = self.method.upper() if isinstance(self.method, str) else self.method
        if method not in METHODS:
            raise ConfigError(
                f"expected one of {', '.join(sorted(METHODS))}, got {self.method!r}",
                field="request.method",
            )
        object.__setattr__(self, "method", method)
        object.__setattr__(
            self, "params", _check_mapping(self.params, "request.params", text_values=False)
        )
        object.__setattr__(
            self, "headers", _check_mapping(self.headers, "request.headers", text_values=True)
        )
        _check_json(self.json, "request.json")

    @classmethod
    def of(cls, value: Request | str, field: str = "request") -> Request:
        """Accept a :class:`Request` or a bare URL.

        Raises:
            ConfigError: ``value`` is neither.
        """
        if isinstance(value, Request):
            return value
        if isinstance(value, str):
            return cls(url=value)
        raise ConfigError(f"expected a rest.Request or a URL, got {value!r}", field=field)

    def render(self, partition: Partition) -> Call:
        """The :class:`~watukuy.rest.Call` of this template for ``partition``.

        Raises:
            ConfigError: A ``{partition.NAME}`` placeholder names a field the partition's
                data lacks.
        """
        return Call(
            method=self.method,
            url=fill(self.url, partition, "request.url"),
            params=fill_value(self.params, partition, "request.params"),
            headers={
                name: fill(value, partition, f"request.headers.{name}")
                for name, value in self.headers.items()
            },
            json=fill_value(self.json, partition, "request.json"),
        )

    def __repr__(self) -> str:
        parts = [f"{self.method} {redact_url(self.url)!r}"]
        if self.params:
            parts.append(f"params={_redacted_params(self.params)!r}")
        if self.headers:
            parts.append(f"headers={redacted_headers(self.headers)!r}")
        if self.json is not None:
            parts.append("json=...")  # a body may carry credentials too
        return f"Request({', '.join(parts)})"


# --- a second listing: reconcile ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Listing:
    """A full listing that finds deletes next to an incremental description
    (``define_rest_poller(reconcile=rest.Listing(...))``).

    It is built into a ``wk.Reconcile(every=..., fetch=...)`` whose ``fetch`` reads the whole
    listing from its first page on every run, paged by ``ctx.page`` (a token paginator keeps
    the page -> token chain in memory, as a ``mode="full"`` description does). Every
    field left ``None`` is the main description's.

    Args:
        every: Time between complete listings (``"6h"``, a ``timedelta``, seconds).
        request: The listing's request (or URL); default: the main request.
        items: Where the items are in its answers; default: the main ``items``.
        paginator: How it pages; default: the main paginator (a ``Keyset`` then walks the
            whole listing, each page after the previous page's last item).
        auth: Its credentials; default: the main ``auth``.

    Raises:
        ConfigError: A value has the wrong type; the message names ``reconcile.<field>``.
    """

    every: Duration
    request: Request | str | None = None
    items: ItemsSpec | None = None
    paginator: Paginator | None = None
    auth: Auth | None = None

    def __post_init__(self) -> None:
        every = parse_duration(self.every, "reconcile.every")
        if every <= 0:
            raise ConfigError(
                f"must be greater than zero, got {self.every!r}", field="reconcile.every"
            )
        if self.request is not None:
            object.__setattr__(self, "request", Request.of(self.request, "reconcile.request"))
        if self.items is not None:
            items_reader(self.items, "reconcile.items")
        if self.paginator is not None:
            check_paginator(self.paginator, "reconcile.paginator")
        if self.auth is not None:
            check_auth(self.auth, "reconcile.auth")


def check_paginator(value: object, field: str = "paginator") -> Paginator:
    """``value`` if it is a paginator (a built-in one, or an object with the protocol).

    Raises:
        ConfigError: It is not.
    """
    if not isinstance(value, Paginator) or value.kind not in ("page", "token", "keyset"):
        raise ConfigError(
            f"expected a paginator (rest.LinkHeader(), rest.PageNumber(), ..., or an object "
            f"with kind, ends_on_not_found, apply() and step()), got {value!r}",
            field=field,
        )
    return value


def check_auth(value: object, field: str = "auth") -> Auth:
    """``value`` if it is an auth (an object with ``apply()`` and ``refresh()``).

    Raises:
        ConfigError: It is not (the message shows its type only: it may hold a secret).
    """
    if not isinstance(value, Auth):
        raise ConfigError(
            f"expected an auth (rest.Bearer(...), rest.ApiKey(...), ..., or an object with "
            f"async apply() and refresh()), got a {type(value).__name__}",
            field=field,
        )
    return value
