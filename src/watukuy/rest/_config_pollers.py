"""The ``[pollers.NAME]`` tables of a configuration file, built into poller definitions.

A table holds three kinds of keys:

- the request: ``url`` (required), ``method``, ``params``, ``headers``, ``json``;
- the description: ``items``, ``identity`` (required), ``version``, ``paginator`` (a type
  name, or a table with ``type`` and the paginator's keywords; ``type`` may also be
  ``"package.module:Class"``), ``mode``, ``auth`` (a table with ``type`` and the auth's
  keywords; a secret may be ``{ env = "NAME" }``, read at request time), ``transform``
  (``"package.module:function"``) and ``reconcile`` (a table: ``every`` and the keys of
  the request and description that differ from the poller's);
- the :func:`~watukuy.define_poller` options that are data: ``schedule``, ``budget``,
  ``budget_weight``, ``budget_cost``, ``retain``, ``max_pages_per_cycle``,
  ``schema_version``, ``delivery``, ``deletes``, ``circuit``, ``log``, ``ids``,
  ``partitions`` (an array of keys, a table of key -> data, or
  ``"package.module:function"``), ``partitions_refresh``, ``on_invalid``,
  ``on_schema_change``, ``source``, ``array_key``, ``prefetch``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, TypeVar

from watukuy.model.errors import ConfigError
from watukuy.model.options import (
    Backoff,
    Circuit,
    Deletes,
    Delivery,
    EventIds,
    EventLog,
    Poison,
    Retry,
    Schedule,
)
from watukuy.model.partition import Partition
from watukuy.runtime.poller import PollerDefinition

from ._auth import AUTHS
from ._build import define_rest_poller
from ._describe import Listing, Request
from ._interpolate import Interpolated
from ._paginate import PAGINATORS
from ._toml_tables import (
    Path,
    Source,
    Table,
    as_keywords,
    json_only,
    keywords_of,
    suggestion,
    type_name,
)

__all__ = ["read_option", "read_poller"]

T = TypeVar("T")

_REQUEST = ("url", "method", "params", "headers", "json")
_DESCRIPTION = (
    "items",
    "identity",
    "version",
    "paginator",
    "mode",
    "auth",
    "transform",
    "reconcile",
)
_OPTION_TABLES: dict[str, type[Any]] = {
    "schedule": Schedule,
    "delivery": Delivery,
    "deletes": Deletes,
    "circuit": Circuit,
    "log": EventLog,
}
_SCALARS = (
    "budget",
    "budget_weight",
    "budget_cost",
    "retain",
    "max_pages_per_cycle",
    "schema_version",
    "partitions_refresh",
    "on_invalid",
    "on_schema_change",
    "source",
    "array_key",
    "prefetch",
)
_POLLER_KEYS = (*_REQUEST, *_DESCRIPTION, *_OPTION_TABLES, *_SCALARS, "ids", "partitions")
# Option tables whose fields are option dataclasses themselves.
_NESTED: dict[tuple[type[Any], str], type[Any]] = {
    (Schedule, "backoff"): Backoff,
    (Delivery, "retry"): Retry,
    (Delivery, "poison"): Poison,
    (Retry, "backoff"): Backoff,
}
# Auth keywords whose value is a table of data (any other table is a secret named by
# { env = "NAME" }).
_AUTH_TABLES = frozenset({"extra"})
# Option fields that take a function: named in the file as "package.module:function".
_CALLABLES = {(Delivery, "ordering_key"), (Deletes, "verify")}
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def _scalar(value: Any) -> Any:
    """A value for a constructor: a number or a boolean taken from the environment is
    read as one (the file can only hold a string there)."""
    if isinstance(value, Interpolated):
        text = value.strip()
        if _INT.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text):
            return float(text)
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        return str(value)
    if isinstance(value, list):
        return [_scalar(item) for item in value]
    if isinstance(value, dict):
        return {key: _scalar(item) for key, item in value.items()}
    return value


def read_option(source: Source, path: Path, data: Any, cls: type[T]) -> T:
    """An option object (``Schedule``, ``Delivery``...) from the table at ``path``."""
    known = keywords_of(cls)
    table = Table(source, path, data, allowed=known)
    keywords: dict[str, Any] = {}
    for key, value in table.data.items():
        nested = _NESTED.get((cls, key))
        if nested is not None and isinstance(value, dict):
            keywords[key] = read_option(source, (*path, key), value, nested)
        elif (cls, key) in _CALLABLES:
            keywords[key] = source.load((*path, key), value)
        else:
            keywords[key] = _scalar(value)
    return _construct(source, path, cls, keywords)


def _construct(
    source: Source,
    path: Path,
    target: Callable[..., T],
    keywords: dict[str, Any],
    *,
    prefix: str | None = None,
) -> T:
    try:
        return target(**keywords)
    except ConfigError as error:
        raise source.wrap(path, error, prefix=prefix) from None
    except (TypeError, ValueError) as error:
        raise source.error(path, f"{type(error).__name__}: {error}") from None


def read_poller(source: Source, path: Path, data: Any) -> PollerDefinition[Any]:
    """The poller the table at ``path`` describes, built with ``define_rest_poller``.

    Raises:
        ConfigError: A mistake in the table, or one the description's constructors found.
    """
    name = str(path[-1])
    table = Table(source, path, data, allowed=_POLLER_KEYS, required=("url", "identity"))
    keywords: dict[str, Any] = {"name": name, "request": _request(table, None)}
    keywords.update(_description(table))
    if "reconcile" in table:
        keywords["reconcile"] = _listing(table)
    for key, cls in _OPTION_TABLES.items():
        if key in table:
            keywords[key] = read_option(source, (*path, key), table.data[key], cls)
    keywords.update(_scalars(table))
    if "ids" in table:
        value = table.data["ids"]
        keywords["ids"] = (
            read_option(source, (*path, "ids"), value, EventIds)
            if isinstance(value, dict)
            else table.text("ids", choices=("distinct", "compat"))
        )
    if "partitions" in table:
        keywords["partitions"] = _partitions(table)
    poller: PollerDefinition[Any] = _construct(
        source, path, define_rest_poller, keywords, prefix=""
    )
    return poller


def _request(table: Table, base: Table | None) -> Any:
    """A ``Request`` from the request keys of ``table``; keys it lacks come from ``base``."""

    def pick(key: str) -> Table | None:
        if key in table:
            return table
        if base is not None and key in base:
            return base
        return None

    keywords: dict[str, Any] = {}
    if (holder := pick("url")) is not None:
        keywords["url"] = holder.text("url")
    if (holder := pick("method")) is not None:
        keywords["method"] = holder.text("method")
    if (holder := pick("params")) is not None:
        keywords["params"] = holder.mapping("params")
    if (holder := pick("headers")) is not None:
        keywords["headers"] = holder.mapping("headers", values="str")
    if (holder := pick("json")) is not None:
        json_only(holder.source, (*holder.path, "json"), holder.data["json"])
        keywords["json"] = holder.raw("json")
    # Request names its fields request.url, request.params...: in the file they are keys
    # of the poller's (or the reconcile's) own table.
    return _construct(table.source, table.path, Request, keywords, prefix="request.")


def _description(table: Table) -> dict[str, Any]:
    keywords: dict[str, Any] = {}
    for key in ("items", "identity", "version"):
        if key in table:
            keywords[key] = table.text(key)
    if "mode" in table:
        keywords["mode"] = table.text("mode", choices=("keyset", "token", "full"))
    if "paginator" in table:
        keywords["paginator"] = _paginator(
            table.source, (*table.path, "paginator"), table.data["paginator"]
        )
    if "auth" in table:
        keywords["auth"] = _auth(table.source, (*table.path, "auth"), table.data["auth"])
    if "transform" in table:
        transform = table.source.load((*table.path, "transform"), table.data["transform"])
        if not callable(transform):
            table.fail("transform", "does not name a function")
        keywords["transform"] = transform
    return keywords


def _listing(table: Table) -> Any:
    allowed = ("every", *_REQUEST, *(keywords_of(Listing) or ()))
    path = (*table.path, "reconcile")
    reconcile = Table(
        table.source,
        path,
        table.data["reconcile"],
        allowed=set(allowed) - {"request"},
        required=("every",),
    )
    keywords: dict[str, Any] = {"every": reconcile.duration("every")}
    if any(key in reconcile for key in _REQUEST):
        keywords["request"] = _request(reconcile, table)
    description = _description(
        Table(
            table.source,
            path,
            {key: value for key, value in reconcile.data.items() if key in _DESCRIPTION},
            allowed=None,
        )
    )
    keywords.update(description)
    for key in reconcile.names():
        if key not in keywords and key not in _REQUEST and key != "every":
            keywords[key] = _scalar(reconcile.data[key])
    return _construct(table.source, path, Listing, keywords)


def _scalars(table: Table) -> dict[str, Any]:
    keywords: dict[str, Any] = {}
    readers: dict[str, Callable[[str], Any]] = {
        "budget": table.text,
        "budget_weight": table.number,
        "budget_cost": table.number,
        "retain": lambda key: table.text(key, choices=("hash", "payload")),
        "max_pages_per_cycle": table.integer,
        "schema_version": table.integer,
        "partitions_refresh": table.duration,
        "on_invalid": lambda key: table.text(key, choices=("quarantine", "skip", "fail")),
        "on_schema_change": lambda key: table.text(key, choices=("rebaseline", "emit")),
        "source": table.text,
        "array_key": table.text,
        "prefetch": table.boolean,
    }
    for key, read in readers.items():
        if key in table:
            keywords[key] = read(key)
    return keywords


def _partitions(table: Table) -> Callable[[], list[str | Partition]]:
    value = table.data["partitions"]
    path = (*table.path, "partitions")
    if isinstance(value, str):
        loaded = table.source.load(path, value)
        if not callable(loaded):
            table.fail("partitions", "does not name a function")
        result: Callable[[], list[str | Partition]] = loaded
        return result
    if isinstance(value, list):
        keys: list[str | Partition] = list(table.strings("partitions"))
        return lambda: list(keys)
    if isinstance(value, dict):
        json_only(table.source, path, value)
        data = table.raw("partitions")
        listed: list[str | Partition] = [Partition(key, item) for key, item in data.items()]
        return lambda: list(listed)
    raise table.error(
        "partitions",
        "expected an array of keys, a table of key -> data, or 'package.module:function', "
        f"got {type_name(value)}",
    )


def _typed(
    source: Source, path: Path, data: Any, registry: dict[str, Any], what: str
) -> tuple[Any, Table]:
    """The class a ``type`` key names (from ``registry`` or as ``package.module:Class``)."""
    if isinstance(data, str):
        data = {"type": data}
    head = Table(source, path, data, allowed=None, required=("type",))
    kind = head.text("type")
    if ":" in kind:
        return source.load((*path, "type"), kind), head
    if kind not in registry:
        listed = ", ".join(sorted(registry))
        head.fail(
            "type",
            f"unknown {what} type {kind!r}{suggestion(kind, registry)}; the types are {listed}, or 'package.module:Class'",
        )
    return registry[kind], head


def _paginator(source: Source, path: Path, data: Any) -> Any:
    cls, head = _typed(source, path, data, dict(PAGINATORS), "paginator")
    options = {key: value for key, value in head.data.items() if key != "type"}
    # TOML has no null: `false` turns off an optional name (`after_param = false`: no
    # tie-break parameter), where the Python description takes None.
    optional = _optional_names(cls)
    options = {
        key: None if value is False and key in optional else value for key, value in options.items()
    }
    keywords = as_keywords(source, path, _scalar(options), cls)
    return _construct(source, path, cls, keywords)


def _optional_names(cls: Any) -> frozenset[str]:
    """The fields of a built-in paginator that take a name or None (not a boolean)."""
    if not dataclasses.is_dataclass(cls):
        return frozenset()
    return frozenset(
        field.name
        for field in dataclasses.fields(cls)
        if isinstance(field.type, str) and "None" in field.type and "bool" not in field.type
    )


def _auth(source: Source, path: Path, data: Any) -> Any:
    if not isinstance(data, dict):
        raise source.at(path, f"expected a table with a 'type' key, got {type_name(data)}")
    cls, head = _typed(source, path, data, dict(AUTHS), "auth")
    options: dict[str, Any] = {}
    for key, value in head.data.items():
        if key == "type":
            continue
        if isinstance(value, dict) and key not in _AUTH_TABLES:
            # A secret read from the environment at each request: { env = "NAME" }.
            secret = Table(source, (*path, key), value, allowed=("env",), required=("env",))
            # The auth checks the name itself, inside _construct, so a bad one is reported
            # with the file and the table like any other mistake.
            options[key] = {"env": secret.text("env")}
        else:
            options[key] = value
    known = keywords_of(cls)
    if known is not None:
        for key in options:
            if key not in known:
                raise source.error(path, f"unknown key {key!r}{suggestion(key, known)}", key=key)
    return _construct(source, path, cls, {key: _plain(value) for key, value in options.items()})


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Interpolated) else value
