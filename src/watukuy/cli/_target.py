"""Finding what a command operates on: the application's engine, or a bare store.

``--app package.module:attribute`` (or ``WATUKUY_APP``) names an engine the way uvicorn and
celery name applications: the module is imported with the current directory on
``sys.path``, the attribute path is followed, and a zero-argument callable (sync or async)
is called to build the engine. ``--store URL`` (or ``WATUKUY_STORE``) builds a store with
:func:`watukuy.store_from_url` for the store-only commands. When both are given the
application wins: its engine already carries the store it was written for.

``--app pollers.toml`` (any path ending in ``.toml``) names a configuration file instead
(:func:`watukuy.rest.load_config`): the engine is built from it, and there ``--store``
wins over the file's ``[engine] store``, so one file serves several stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from watukuy._system import SystemClock
from watukuy.model.durations import parse_duration
from watukuy.model.ports import StateStore
from watukuy.model.redact import redact_url as core_redact_url
from watukuy.runtime.engine import EngineCore
from watukuy.stores import store_from_url

from ._errors import CliError
from ._operators import EngineOperator, Operator, StoreOperator

__all__ = [
    "Target",
    "build_store",
    "connect_timeout_s",
    "is_config_file",
    "load_config_engine",
    "load_engine",
    "open_target",
    "redact_url",
]

_DEFAULT_CONNECT_TIMEOUT = "10s"


@dataclass
class Target:
    """What a command works on.

    Attributes:
        operator: The store-only operations (engine-backed or store-backed).
        engine: The application's engine, when ``--app`` was given.
        label: How to name the store in messages.
        release: Releases what the application holds besides the engine (the sinks of a
            configuration file), after the engine stopped.
        stdout_taken: The application prints its events on stdout (a configuration file
            with a ``stdout`` sink), so the command prints its own output on stderr.
    """

    operator: Operator
    engine: EngineCore | None
    label: str
    release: Callable[[], Awaitable[None]] | None = None
    stdout_taken: bool = False

    @property
    def store(self) -> StateStore:
        """The store behind the target."""
        return self.operator.store

    async def close(self) -> None:
        """Stop the engine (closing its HTTP client) and close the store."""
        try:
            if self.engine is not None:
                await self.engine.stop(drain=True, timeout="30s")
        finally:
            if self.release is not None:
                await self.release()
            await self.store.close()


def connect_timeout_s() -> float:
    """How long to wait for a store to answer (``WATUKUY_CONNECT_TIMEOUT``, default 10s)."""
    raw = os.environ.get("WATUKUY_CONNECT_TIMEOUT", _DEFAULT_CONNECT_TIMEOUT)
    try:
        return parse_duration(raw, "WATUKUY_CONNECT_TIMEOUT") / 1000
    except Exception as error:
        raise CliError(str(error)) from None


def is_config_file(spec: str) -> bool:
    """Whether ``--app`` names a configuration file rather than ``package.module:attr``."""
    return spec.lower().endswith(".toml")


def load_config_engine(
    path: str, store_url: str | None
) -> tuple[EngineCore, Callable[[], Awaitable[None]], bool]:
    """The engine a configuration file describes, what releases its sinks, and whether one
    of them prints on stdout.

    Args:
        path: The TOML file.
        store_url: ``--store``, which wins over the file's ``[engine] store``.

    Raises:
        CliError: The file does not exist, or ``--store`` is not a store URL.
        ConfigError: A mistake in the file (the message names the file, table and key).
    """
    from watukuy.rest import load_config

    if not os.path.isfile(path):
        raise CliError(f"--app: there is no configuration file at {path!r}")
    config = load_config(path)
    store = build_store(store_url, must_exist=False) if store_url else None
    stdout = any(sink.type == "stdout" for sink in config.sinks.values())
    return config.build_engine(store), config.aclose, stdout


async def load_engine(spec: str) -> EngineCore:
    """Import ``package.module:attribute`` and return the engine it names (or build the
    engine of a configuration file ending in ``.toml``).

    Raises:
        CliError: The spec is malformed, the module cannot be imported, the attribute is
            missing, or it is not (and does not build) a watukuy engine.
        ConfigError: A mistake in a configuration file.
    """
    if is_config_file(spec):
        return load_config_engine(spec, None)[0]
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise CliError(f"--app: expected 'package.module:attribute', got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (
            module_name == error.name or module_name.startswith(error.name + ".")
        ):
            raise CliError(f"--app: cannot import module {module_name!r}: {error}") from None
        raise CliError(f"--app: importing {module_name!r} failed: {error}") from None
    except Exception as error:
        raise CliError(
            f"--app: importing {module_name!r} failed: {type(error).__name__}: {error}"
        ) from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CliError(
                f"--app: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    if not isinstance(value, EngineCore) and callable(value):
        try:
            value = value()
            if inspect.isawaitable(value):
                value = await value
        except CliError:
            raise
        except Exception as error:
            raise CliError(
                f"--app: calling {spec!r} failed: {type(error).__name__}: {error}"
            ) from None
    if not isinstance(value, EngineCore):
        raise CliError(
            f"--app: {spec!r} is a {type(value).__name__}, not a watukuy Engine; point it at "
            "an Engine or at a function that returns one"
        )
    return value


def redact_url(url: str) -> str:
    """``url`` with its password and sensitive parameters shown as ``***`` (for messages)."""
    return core_redact_url(url)


def _sqlite_path(url: str) -> str | None:
    """The file a ``sqlite://`` URL names, or ``None`` (not SQLite, or in memory)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "sqlite":
        return None
    location = rest.partition("?")[0]
    if location in (":memory:", "/:memory:") or not location.startswith("/"):
        return None
    return unquote(location[1:])


def build_store(url: str, *, must_exist: bool) -> StateStore:
    """A store for ``--store``.

    Raises:
        CliError: The URL is not understood, the backend's extra is missing, or (with
            ``must_exist``) a SQLite file that does not exist yet.
    """
    try:
        store = store_from_url(url)
    except ImportError as error:
        raise CliError(f"--store: {error}") from None
    path = _sqlite_path(url)
    if must_exist and path is not None and not os.path.exists(path):
        raise CliError(
            f"--store: there is no SQLite database at {path!r}; create one with "
            f"'watukuy migrate --store {url}'"
        )
    return store


async def open_target(
    *,
    command: str,
    app: str | None,
    store_url: str | None,
    need_engine: bool = False,
    create: bool = False,
) -> Target:
    """Load the application or build the store, then check that the store answers.

    Args:
        command: Command name, for messages.
        app: ``--app`` / ``WATUKUY_APP`` (a ``.toml`` path: a configuration file).
        store_url: ``--store`` / ``WATUKUY_STORE`` (with a configuration file, it wins
            over the file's store).
        need_engine: The command needs poller definitions (``tick``, ``run``...).
        create: The command may create the store (``migrate``): no existence check, and
            the probe is the migration itself.

    Raises:
        CliError: Neither given, an engine needed but only a store given, or the store
            does not answer within ``WATUKUY_CONNECT_TIMEOUT``.
    """
    if app and is_config_file(app):
        engine, release, stdout = load_config_engine(app, store_url)
        target = Target(EngineOperator(engine), engine, repr(engine.store), release, stdout)
    elif app:
        engine = await load_engine(app)
        target = Target(EngineOperator(engine), engine, repr(engine.store))
    elif need_engine:
        raise CliError(
            f"{command} needs the application's poller definitions: pass --app "
            "package.module:engine or a pollers.toml file (or set WATUKUY_APP)"
        )
    elif store_url:
        store = build_store(store_url, must_exist=not create)
        target = Target(StoreOperator(store, SystemClock()), None, redact_url(store_url))
    else:
        raise CliError(
            f"{command} needs --app package.module:engine (or WATUKUY_APP), or --store URL "
            "(or WATUKUY_STORE)"
        )
    await _probe(target, create=create)
    return target


async def _probe(target: Target, *, create: bool) -> None:
    """Fail fast, in one line, when the store does not answer (instead of a pool timeout)."""
    timeout = connect_timeout_s()
    # Stores migrate lazily on first use, so a read is enough to surface a missing server.
    probe = target.store.migrate() if create else target.store.list_keys()
    try:
        with _quiet_pool_logs():
            await asyncio.wait_for(probe, timeout)
    except BaseException as error:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(target.store.close(), 2)
        if isinstance(error, TimeoutError):
            raise CliError(
                f"store: no answer from {target.label} within {timeout:g}s "
                "(WATUKUY_CONNECT_TIMEOUT sets the wait)"
            ) from None
        raise


@contextlib.contextmanager
def _quiet_pool_logs() -> Iterator[None]:
    """psycopg_pool logs every failed connection attempt while it retries; the probe
    reports the outcome in one line instead."""
    logger = logging.getLogger("psycopg.pool")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)
