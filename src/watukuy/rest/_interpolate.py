"""``${NAME}`` interpolation in the string values of a parsed TOML file.

The file is parsed first, so quoting and escapes stay TOML's; then every string value
(never a key) is scanned once, left to right:

- ``${NAME}``: the environment variable ``NAME``; unset, it is an error.
- ``${NAME:-default}``: ``NAME`` when it is set and not empty, else ``default`` (taken
  literally, it holds no further ``${...}``).
- ``$$``: a literal ``$``.

Any other ``$`` is kept as it is. A string that took a value from the environment comes
back as :class:`Interpolated`, a ``str`` that remembers it did, so the loader can read a
number or a boolean out of it and never quote it back in a message (it may be a secret).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Interpolated", "InterpolationError", "interpolate"]

_TOKEN = re.compile(r"\$(?:(?P<dollar>\$)|\{(?P<body>[^}]*)(?P<close>\}?))")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Path = tuple[str | int, ...]
"""Where a value sits in the document: table keys, and array indexes."""


class Interpolated(str):
    """A string value that took (part of) its text from the environment."""

    __slots__ = ()


class InterpolationError(Exception):
    """A reference that cannot be resolved, at ``path``.

    Args:
        path: Where the string value is in the document.
        message: What is wrong (never the value of a variable).
    """

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def interpolate(
    document: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    on_value: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """A copy of ``document`` with every ``${...}`` in its string values resolved.

    Args:
        document: The parsed TOML document.
        env: The environment to read variables from.
        on_value: Called with every value taken from ``env`` (so the caller can keep
            them out of its messages).

    Raises:
        InterpolationError: An unset variable without a default, an unclosed ``${``, a
            reference that is not a variable name, or a nested reference.
    """
    result = _walk(document, (), env, on_value)
    assert isinstance(result, dict)
    return result


def _walk(
    value: Any, path: Path, env: Mapping[str, str], on_value: Callable[[str], None] | None
) -> Any:
    if isinstance(value, str):
        return _resolve(value, path, env, on_value)
    if isinstance(value, dict):
        return {key: _walk(item, (*path, key), env, on_value) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, (*path, index), env, on_value) for index, item in enumerate(value)]
    return value


def _resolve(
    text: str, path: Path, env: Mapping[str, str], on_value: Callable[[str], None] | None
) -> str:
    if "$" not in text:
        return text
    parts: list[str] = []
    taken = False
    position = 0
    for match in _TOKEN.finditer(text):
        parts.append(text[position : match.start()])
        position = match.end()
        if match.group("dollar"):
            parts.append("$")
            continue
        body = match.group("body")
        if not match.group("close"):
            raise InterpolationError(path, "an unclosed '${' (write '$$' for a literal '$')")
        name, sep, default = body.partition(":-")
        if not _NAME.fullmatch(name):
            raise InterpolationError(
                path,
                f"the reference '${{{body}}}' is not one: expected ${{NAME}} or "
                "${NAME:-default}, NAME made of letters, digits and '_'",
            )
        if "$" in default:
            raise InterpolationError(
                path,
                f"the default of the reference to {name} holds a '$': nested references "
                "are not supported",
            )
        found = env.get(name)
        if found is None or (sep and found == ""):
            if not sep:
                raise InterpolationError(
                    path,
                    f"the environment variable {name} is not set (set it, or write a "
                    "default after ':-' inside the braces)",
                )
            parts.append(default)
            continue
        if on_value is not None:
            on_value(found)
        parts.append(found)
        taken = True
    parts.append(text[position:])
    joined = "".join(parts)
    return Interpolated(joined) if taken else joined
