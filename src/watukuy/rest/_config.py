"""Pollers described in a TOML file, and the engine that runs them.

::

    from watukuy import rest

    config = rest.load_config("pollers.toml")      # every mistake is raised here
    engine = config.build_engine()                  # or build_engine(store=...) to override
    engine.run()

or from a shell, ``watukuy run pollers.toml``. The file's tables:

- ``[engine]``: ``store`` (a URL, see :func:`watukuy.store_from_url`), ``source_prefix``,
  and the other :class:`~watukuy.Engine` options that are data (``instance_id``,
  ``http_max_in_flight``, ``dispatch_batch_size``, ``max_concurrent_keys``,
  ``tick_concurrency``, ``resync_every``, ``auto_migrate``, ``fair_share_spread``,
  ``redact``, ``lease``).
- ``[budgets.NAME]``: the keywords of :class:`~watukuy.Budget`.
- ``[pollers.NAME]``: a :func:`watukuy.rest.define_rest_poller` description (see
  :mod:`watukuy.rest._config_pollers`).
- ``[sinks.NAME]``: where the events go (see :mod:`watukuy.rest._config_sinks`).

Every string value may hold ``${NAME}``, ``${NAME:-default}`` and ``$$`` (see
:mod:`watukuy.rest._interpolate`), resolved when the file is loaded. Every mistake is a
:class:`~watukuy.ConfigError` whose one-line message starts with the file name and names
the table and the key, e.g. ``pollers.toml: [pollers.issues.paginator] unknown key 'rell'
(did you mean 'rel'?)``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from watukuy.engine import Engine
from watukuy.model.errors import ConfigError
from watukuy.model.options import Budget
from watukuy.model.ports import StateStore
from watukuy.model.redact import redact_url
from watukuy.runtime.poller import PollerDefinition
from watukuy.runtime.results import LeaseOptions
from watukuy.stores import store_from_url

from ._config_pollers import read_option, read_poller
from ._config_sinks import ConfigSink, read_sink
from ._interpolate import InterpolationError, interpolate
from ._toml_tables import Source, Table, suggestion

__all__ = ["Config", "engine_from_toml", "load_config"]

_TOP = ("engine", "budgets", "pollers", "sinks")
_ENGINE_KEYS = (
    "store",
    "source_prefix",
    "instance_id",
    "http_max_in_flight",
    "dispatch_batch_size",
    "max_concurrent_keys",
    "tick_concurrency",
    "resync_every",
    "auto_migrate",
    "fair_share_spread",
    "redact",
    "lease",
)
_BUDGET_KEYS = ("requests", "per", "fairness", "max_wait", "burst")
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


@dataclass(frozen=True, repr=False)
class Config:
    """A configuration file, read and checked: everything an engine needs but the store.

    Built by :func:`load_config`; :meth:`build_engine` makes the engine.

    Attributes:
        path: The file, as it was named.
        store: The ``[engine] store`` URL, or ``None``.
        engine_options: The other ``[engine]`` keys, as :class:`~watukuy.Engine` keywords.
        budgets: The ``[budgets.NAME]`` tables.
        pollers: The ``[pollers.NAME]`` tables, built.
        sinks: The ``[sinks.NAME]`` tables, built.
    """

    path: str
    store: str | None
    engine_options: Mapping[str, Any] = field(default_factory=dict)
    budgets: Mapping[str, Budget] = field(default_factory=dict)
    pollers: Mapping[str, PollerDefinition[Any]] = field(default_factory=dict)
    sinks: Mapping[str, ConfigSink] = field(default_factory=dict)

    def build_engine(self, store: StateStore | str | None = None) -> Engine:
        """An engine with the file's pollers, budgets and options, each sink attached.

        Args:
            store: A store, or a store URL, instead of ``[engine] store`` (the command
                line's ``--store``).

        Raises:
            ConfigError: No store is given here or in the file, or the URL is not one
                :func:`~watukuy.store_from_url` takes.
        """
        source = Source(self.path, os.path.dirname(os.path.abspath(self.path)))
        chosen = store if store is not None else self.store
        if chosen is None:
            raise source.error(
                ("engine",),
                "missing required key 'store' (or pass a store, --store on the command line)",
                key="store",
            )
        if isinstance(chosen, str):
            try:
                chosen = store_from_url(chosen)
            except ConfigError as error:
                if store is not None:
                    raise
                raise source.error(("engine",), error.message, key="store") from None
        try:
            # What only the whole engine can check (a poller's budget_cost that its budget
            # never grants, say) is still a mistake in the file.
            engine = Engine(
                store=chosen,
                pollers=list(self.pollers.values()),
                budgets=dict(self.budgets),
                **self.engine_options,
            )
            for sink in self.sinks.values():
                for name in sink.pollers if sink.pollers is not None else self.pollers:
                    engine.on(name, sink.handler, consumer=sink.name)
        except ConfigError as error:
            raise source.error((), error.message) from None
        return engine

    def __repr__(self) -> str:
        # The store URL may hold a password, and a sink or an option a secret: name them.
        store = None if self.store is None else redact_url(self.store)
        return (
            f"Config({self.path!r}, store={store!r}, pollers={list(self.pollers)!r}, "
            f"budgets={list(self.budgets)!r}, sinks={list(self.sinks)!r})"
        )

    async def aclose(self) -> None:
        """Release what the sinks hold (the HTTP clients of webhook sinks); call it after
        the engine stopped."""
        for sink in self.sinks.values():
            if sink.close is not None:
                await sink.close()


def load_config(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    require_sinks: bool = True,
) -> Config:
    """Read, interpolate and check a configuration file, and build its pollers and sinks.

    Args:
        path: The TOML file.
        env: Where ``${NAME}`` is read from (default: ``os.environ``).
        require_sinks: Refuse a poller that no ``[sinks.NAME]`` table takes (its events
            would wait forever). ``False`` when the caller attaches its own handlers to
            the engine (``engine.on(...)``) before starting it.

    Returns:
        The file, ready for :meth:`Config.build_engine`.

    Raises:
        ConfigError: The file cannot be read, is not valid TOML (the message names the
            line and column), or holds a mistake (the message names the table and key).
    """
    name = os.fspath(path)
    source = Source(name, os.path.dirname(os.path.abspath(name)))
    try:
        with open(name, "rb") as file:
            document = tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"{name}: cannot read the file: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{name}: {_toml_position(str(error))}") from None
    try:
        document = interpolate(
            document, os.environ if env is None else env, on_value=source.remember
        )
    except InterpolationError as error:
        raise source.at(error.path, error.message) from None
    top = Table(source, (), document, allowed=_TOP, required=("pollers",))
    engine = top.table("engine", allowed=_ENGINE_KEYS)
    store, options = _engine_options(source, engine) if engine is not None else (None, {})
    budgets = _budgets(source, top)
    pollers_table = Table(source, ("pollers",), document["pollers"], allowed=None)
    if not pollers_table.names():
        raise source.error(("pollers",), "no poller is described: add a [pollers.NAME] table")
    # The sinks first: they only name pollers, and a missing one is cheaper to report
    # than a poller that cannot be built.
    sinks = _sinks(source, top, pollers_table.names(), require_sinks)
    pollers: dict[str, PollerDefinition[Any]] = {}
    for poller_name in pollers_table.names():
        poller = read_poller(source, ("pollers", poller_name), pollers_table.data[poller_name])
        if poller.budget is not None and poller.budget not in budgets:
            raise source.error(
                ("pollers", poller_name),
                f"budget: there is no [budgets.{poller.budget}] table"
                f"{suggestion(poller.budget, budgets)}",
                key="budget",
            )
        pollers[poller_name] = poller
    return Config(name, store, options, budgets, pollers, sinks)


def engine_from_toml(
    path: str | os.PathLike[str],
    *,
    store: StateStore | str | None = None,
    env: Mapping[str, str] | None = None,
) -> Engine:
    """``load_config(path, env=env).build_engine(store)``: the engine a file describes.

    Raises:
        ConfigError: See :func:`load_config` and :meth:`Config.build_engine`.
    """
    return load_config(path, env=env).build_engine(store)


def _toml_position(message: str) -> str:
    """``line 3, column 9: Invalid value`` from tomllib's ``Invalid value (at line 3,
    column 9)``."""
    match = _TOML_POSITION.search(message)
    if match is None:
        return f"invalid TOML: {message}"
    text = message[: match.start()]
    return f"line {match.group(1)}, column {match.group(2)}: invalid TOML: {text}"


def _engine_options(source: Source, table: Table) -> tuple[str | None, dict[str, Any]]:
    options: dict[str, Any] = {}
    for key in ("source_prefix", "instance_id"):
        if key in table:
            options[key] = table.text(key)
    for key in (
        "http_max_in_flight",
        "dispatch_batch_size",
        "max_concurrent_keys",
        "tick_concurrency",
    ):
        if key in table:
            options[key] = table.integer(key)
    for key in ("resync_every", "fair_share_spread"):
        if key in table:
            options[key] = table.duration(key)
    if "auto_migrate" in table:
        options["auto_migrate"] = table.boolean("auto_migrate")
    if "redact" in table:
        options["redact"] = table.strings("redact")
    if "lease" in table:
        options["lease"] = read_option(
            source, ("engine", "lease"), table.data["lease"], LeaseOptions
        )
    return table.text("store"), options


def _budgets(source: Source, top: Table) -> dict[str, Budget]:
    holder = top.table("budgets", allowed=None)
    if holder is None:
        return {}
    budgets: dict[str, Budget] = {}
    for name in holder.names():
        table = holder.table(name, allowed=_BUDGET_KEYS, required=("requests", "per"))
        assert table is not None
        keywords: dict[str, Any] = {
            "requests": table.integer("requests"),
            "per": table.duration("per"),
        }
        if "fairness" in table:
            keywords["fairness"] = table.text("fairness", choices=("round-robin", "weighted"))
        if "max_wait" in table:
            keywords["max_wait"] = table.duration("max_wait")
        if "burst" in table:
            keywords["burst"] = table.integer("burst")
        try:
            budgets[name] = Budget(**keywords)
        except ConfigError as error:
            raise source.wrap(table.path, error, prefix="budget.") from None
    return budgets


def _sinks(
    source: Source, top: Table, pollers: Sequence[str], required: bool
) -> dict[str, ConfigSink]:
    holder = top.table("sinks", allowed=None)
    sinks: dict[str, ConfigSink] = {}
    if holder is not None:
        for name in holder.names():
            sink = read_sink(source, ("sinks", name), holder.data[name])
            for index, poller in enumerate(sink.pollers or ()):
                if poller not in pollers:
                    raise source.at(
                        ("sinks", name, "pollers", index),
                        f"there is no [pollers.{poller}] table{suggestion(poller, pollers)}",
                    )
            sinks[name] = sink
    taken = {
        poller
        for sink in sinks.values()
        for poller in (sink.pollers if sink.pollers is not None else pollers)
    }
    for poller in pollers:
        if required and poller not in taken:
            raise source.error(
                ("pollers", poller),
                "no sink takes this poller's events, so they would wait forever: add a "
                '[sinks.NAME] table (type = "stdout", "jsonl", "webhook" or "handler") '
                "whose pollers list names it, or that leaves pollers out",
            )
    return sinks
