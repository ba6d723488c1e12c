"""The engine's side of the hooks: who listens to what, and the calls.

The detail records live in :mod:`watukuy.runtime.hooks`; that module (nineteen frozen
dataclasses) is imported the first time a hook that someone listens to fires, so an engine
without hooks never builds them, nor a record per event.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._hook_names import HOOK_NAMES

if TYPE_CHECKING:
    from .hooks import HookContext

__all__ = ["HookBus", "as_hook_list", "record_type"]


class HookBus:
    """Calls every registered hook of a name, in registration order, isolating failures.

    Args:
        hooks: Hook sets (objects with any of the ``on_*`` methods).
        logger: Where a failing hook is reported.
    """

    def __init__(
        self,
        hooks: Iterable[object],
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self._logger = logger
        self._table: dict[str, list[Any]] = {name: [] for name in HOOK_NAMES}
        for hook_set in hooks:
            for name in HOOK_NAMES:
                method = getattr(hook_set, name, None)
                if method is not None and callable(method):
                    self._table[name].append(method)

    def has(self, name: str) -> bool:
        """True when at least one hook set implements ``name``."""
        return bool(self._table[name])

    async def emit(self, name: str, /, **fields: Any) -> None:
        """Call every ``name`` hook with its record built from ``fields``.

        The record (``on_fetch``: :class:`~watukuy.runtime.hooks.FetchDetails`, and so on)
        is built only when someone listens; errors of the hooks are logged, never raised.
        """
        methods = self._table[name]
        if not methods:
            return
        details = record_type(name)(**fields)
        for method in methods:
            try:
                result = method(details)
                if inspect.isawaitable(result):
                    await result
            except Exception as error:  # a hook must never break the engine
                self._logger.warning(
                    "hook %s raised %s: %s",
                    name,
                    type(error).__name__,
                    error,
                    extra={"hook": name, "poller": details.poller, "partition": details.partition},
                )


def record_type(name: str) -> type[HookContext]:
    """The detail record class of hook ``name`` (imports :mod:`watukuy.runtime.hooks`)."""
    from .hooks import RECORD_TYPES

    return RECORD_TYPES[name]


def as_hook_list(hooks: object | Sequence[object] | None) -> list[object]:
    """Normalise the ``hooks`` engine option into a list of hook sets."""
    if hooks is None:
        return []
    if isinstance(hooks, list | tuple):
        return list(hooks)
    return [hooks]
