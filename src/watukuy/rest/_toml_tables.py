"""Reading the tables of a configuration file, with errors that say where.

Every mistake becomes a :class:`~watukuy.ConfigError` whose one-line message starts with
the file name and names the table and the key::

    pollers.toml: [pollers.issues.paginator] unknown key 'rell' (did you mean 'rel'?)

A value that came from the environment is never quoted back (it may be a secret), and
neither is any other value: a message says what type was expected and what type came.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from watukuy.model.errors import ConfigError

from ._interpolate import Interpolated

__all__ = ["Source", "Table", "keywords_of", "type_name"]

Path = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# Substituted values shorter than this are not scrubbed from messages: a "1" or a "true"
# would garble them, and a secret is longer.
_MIN_SCRUBBED = 4


def type_name(value: Any) -> str:
    """How TOML calls the type of ``value`` ("a string", "an array"...)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return "a date or time"
    return f"a {type(value).__name__}"


def render_path(path: Path) -> str:
    """``pollers.issues.paginator``, ``sinks.out.pollers[0]``, ``pollers."a.b"``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        name = part if _BARE_KEY.fullmatch(part) else '"' + part.replace('"', '\\"') + '"'
        text += f".{name}" if text else name
    return text


def split_path(path: Path) -> tuple[Path, str]:
    """The table holding the value at ``path`` and the key within it (``pollers[0]``)."""
    last_key = max((i for i, part in enumerate(path) if isinstance(part, str)), default=-1)
    if last_key < 0:
        return (), render_path(path)
    return path[:last_key], render_path(path[last_key:])


def suggestion(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def keywords_of(target: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword arguments ``target`` takes, or ``None`` when it takes any (``**kw``)."""
    if dataclasses.is_dataclass(target) and isinstance(target, type):
        return frozenset(f.name for f in dataclasses.fields(target) if f.init)
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return None
    names: set[str] = set()
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if parameter.kind in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            names.add(parameter.name)
    return frozenset(names)


@dataclass
class Source:
    """The file being read: its name for messages, and the values to keep out of them.

    Args:
        name: The file's path as the caller gave it.
        directory: The file's directory (importable by dotted names in the file).
    """

    name: str
    directory: str
    secrets: set[str] = field(default_factory=set)

    def remember(self, value: str) -> None:
        """Keep ``value`` (taken from the environment) out of every message."""
        if len(value) >= _MIN_SCRUBBED:
            self.secrets.add(value)

    def scrub(self, text: str) -> str:
        """``text`` with every remembered value shown as ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def error(self, path: Path, message: str, *, key: str | None = None) -> ConfigError:
        """A ``ConfigError``: ``<file>: [<table>] <message>``, with ``field`` set to the
        dotted path of the table (and ``key``)."""
        return self._error(path, message, (*path, key) if key is not None else path)

    def at(self, path: Path, message: str) -> ConfigError:
        """An error about the value at ``path`` (``[table] key: message``)."""
        table, key = split_path(path)
        return self._error(table, f"{key}: {message}", path)

    def _error(self, table: Path, message: str, field: Path) -> ConfigError:
        where = f"[{render_path(table)}] " if table else ""
        error = ConfigError(self.scrub(f"{self.name}: {where}{' '.join(message.split())}"))
        error.field = render_path(field) or None
        return error

    def wrap(self, path: Path, error: ConfigError, *, prefix: str | None = None) -> ConfigError:
        """A ``ConfigError`` raised by a constructor, with the file and table in front.

        The constructor names its field from its own point of view (``budget.per``,
        ``request.url``); ``prefix`` (default: the table's own name and a dot) is taken
        off, since the table already says where (``[budgets.github] per: ...``).
        """
        message = error.message
        field = error.field
        if prefix is None and path:
            prefix = f"{path[-1]}."
        if field and prefix and field.startswith(prefix) and message.startswith(f"{field}: "):
            field = field[len(prefix) :]
            message = f"{field}: {message[len(error.field or '') + 2 :]}"
        wrapped = self.error(path, message)
        wrapped.field = render_path(path) + (f".{field}" if field else "")
        return wrapped

    def load(self, path: Path, dotted: Any) -> Any:
        """The object ``package.module:attribute`` names (the value at ``path``).

        The file's directory and the current directory are importable.
        """
        if not isinstance(dotted, str):
            raise self.at(path, f"expected 'package.module:name', got {type_name(dotted)}")
        module_name, sep, attribute = dotted.partition(":")
        if not sep or not _DOTTED.fullmatch(module_name) or not _DOTTED.fullmatch(attribute):
            raise self.at(path, f"expected 'package.module:name', got {dotted!r}")
        for directory in (os.getcwd(), self.directory):
            if directory not in sys.path:
                sys.path.insert(0, directory)
        try:
            value: Any = importlib.import_module(module_name)
        except Exception as error:
            raise self.at(
                path, f"cannot import {module_name!r}: {type(error).__name__}: {error}"
            ) from None
        for part in attribute.split("."):
            try:
                value = getattr(value, part)
            except AttributeError:
                raise self.at(
                    path, f"module {module_name!r} has no attribute {attribute!r}"
                ) from None
        return value


def _strip(value: Any) -> Any:
    """``value`` with every :class:`Interpolated` turned back into a plain ``str``."""
    if isinstance(value, Interpolated):
        return str(value)
    if isinstance(value, dict):
        return {key: _strip(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


class Table:
    """One table of the file, read key by key.

    Unknown keys and missing required keys are reported as soon as the table is opened.

    Args:
        source: The file.
        path: Where the table is.
        data: Its contents.
        allowed: The keys it may hold (``None``: any).
        required: The keys it must hold.
    """

    def __init__(
        self,
        source: Source,
        path: Path,
        data: Any,
        *,
        allowed: Collection[str] | None,
        required: Collection[str] = (),
    ) -> None:
        if not isinstance(data, dict):
            raise source.at(path, f"expected a table, got {type_name(data)}")
        self.source = source
        self.path = path
        self.data: dict[str, Any] = data
        if allowed is not None:
            for key in data:
                if key not in allowed:
                    raise source.error(
                        path, f"unknown key {key!r}{suggestion(key, allowed)}", key=key
                    )
        for key in required:
            if key not in data:
                raise source.error(path, f"missing required key {key!r}", key=key)

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def names(self) -> list[str]:
        """The keys present, in file order."""
        return list(self.data)

    def error(self, key: str, message: str) -> ConfigError:
        """An error about ``key`` of this table."""
        return self.source.at((*self.path, key), message)

    def fail(self, key: str, message: str) -> NoReturn:
        """Raise an error about ``key`` of this table."""
        raise self.error(key, message)

    def _expected(self, key: str, what: str) -> NoReturn:
        value = self.data[key]
        got = type_name(value)
        if isinstance(value, Interpolated):
            got += " (taken from the environment; its value is not shown)"
        self.fail(key, f"expected {what}, got {got}")

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as parsed (any type), or ``default``."""
        return _strip(self.data[key]) if key in self.data else default

    def text(self, key: str, default: Any = None, *, choices: Collection[str] = ()) -> Any:
        """A string (one of ``choices`` when given)."""
        if key not in self.data:
            return default
        value = self.data[key]
        if not isinstance(value, str):
            self._expected(key, "a string")
        if choices and value not in choices:
            listed = ", ".join(repr(choice) for choice in choices)
            self.fail(key, f"expected one of {listed}{suggestion(value, choices)}")
        return str(value)

    def integer(self, key: str, default: Any = None) -> Any:
        """An integer (a string from the environment holding one is read as one)."""
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, Interpolated) and re.fullmatch(r"[+-]?\d+", value.strip()):
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self._expected(key, "an integer")
        return value

    def number(self, key: str, default: Any = None) -> Any:
        """An integer or a float (or a string from the environment holding one)."""
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, Interpolated):
            try:
                return float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int | float):
            self._expected(key, "a number")
        return value

    def boolean(self, key: str, default: Any = None) -> Any:
        """A boolean (or ``true``/``false`` from the environment)."""
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, Interpolated) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if not isinstance(value, bool):
            self._expected(key, "a boolean (true or false)")
        return value

    def duration(self, key: str, default: Any = None) -> Any:
        """A duration: a string like ``"5s"`` or a number of seconds."""
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self._expected(key, "a duration like '5s' (or a number of seconds)")
        return str(value) if isinstance(value, str) else value

    def strings(self, key: str, default: Any = None) -> Any:
        """An array of strings."""
        if key not in self.data:
            return default
        value = self.data[key]
        if not isinstance(value, list):
            self._expected(key, "an array of strings")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.source.at(
                    (*self.path, key, index), f"expected a string, got {type_name(item)}"
                )
        return [str(item) for item in value]

    def table(
        self, key: str, *, allowed: Collection[str] | None, required: Collection[str] = ()
    ) -> Table | None:
        """The sub-table at ``key``, or ``None``."""
        if key not in self.data:
            return None
        return Table(
            self.source, (*self.path, key), self.data[key], allowed=allowed, required=required
        )

    def mapping(self, key: str, *, values: str = "any") -> dict[str, Any] | None:
        """A table taken as data (query parameters, headers): ``values="str"`` requires
        string values."""
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, dict):
            self._expected(key, "a table")
        if values == "str":
            for name, item in value.items():
                if not isinstance(item, str):
                    raise self.source.at(
                        (*self.path, key, name), f"expected a string, got {type_name(item)}"
                    )
        json_only(self.source, (*self.path, key), value)
        result = _strip(value)
        assert isinstance(result, dict)
        return result


def json_only(source: Source, path: Path, value: Any) -> None:
    """Refuse TOML dates and times where JSON goes (they have no JSON form)."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        raise source.at(path, "a TOML date or time has no JSON form; write it as a string")
    if isinstance(value, dict):
        for key, item in value.items():
            json_only(source, (*path, key), item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            json_only(source, (*path, index), item)


def as_keywords(
    source: Source, path: Path, data: Mapping[str, Any], target: Callable[..., Any]
) -> dict[str, Any]:
    """``data`` checked against the keywords ``target`` accepts (with a suggestion)."""
    known = keywords_of(target)
    if known is not None:
        for key in data:
            if key not in known:
                raise source.error(path, f"unknown key {key!r}{suggestion(key, known)}", key=key)
    result = _strip(dict(data))
    assert isinstance(result, dict)
    return result
