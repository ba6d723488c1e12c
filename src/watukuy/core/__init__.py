"""Deprecated: ``watukuy.core`` was split into :mod:`watukuy.model` and :mod:`watukuy.runtime`.

Every module that lived here still imports under its old name, for the 0.1 series, and is
the very same module object as its new home (``watukuy.core.errors is watukuy.model.errors``),
so ``isinstance`` checks and ``except`` clauses keep working. Each old name warns once with a
``DeprecationWarning`` that names the new one. The alias goes away in 0.2; import from
``watukuy`` itself, or from the new module paths, instead.

Type checkers see only the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any, Final

__all__: list[str] = []

#: Where each module of the old ``watukuy.core`` lives now.
MOVED: Final[dict[str, str]] = {
    **{
        name: f"watukuy.model.{name}"
        for name in (
            "durations",
            "errors",
            "events",
            "http_port",
            "json",
            "options",
            "page",
            "ports",
            "records",
            "redact",
            "rows",
        )
    },
    **{
        name: f"watukuy.runtime.{name}"
        for name in (
            "consumers",
            "context",
            "deadline",
            "dispatcher",
            "engine",
            "hooks",
            "lane",
            "lease",
            "operations",
            "partition_book",
            "poller",
            "results",
            "runner",
        )
    },
}


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and goes away in watukuy 0.2: import {new} instead",
        DeprecationWarning,
        stacklevel=3,
    )


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve ``watukuy.core.<name>`` to the module that replaced it."""

    def find_spec(
        self,
        fullname: str,
        path: object = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        parent, _, name = fullname.rpartition(".")
        if parent != __name__ or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name.rpartition(".")[2]]
        _warn(spec.name, new)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module was executed under its new name already."""


if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())


def __getattr__(name: str) -> Any:
    # ``from watukuy.core import ConfigError``: the names the old package re-exported.
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    model = importlib.import_module("watukuy.model")
    if name in model.__all__:
        _warn(f"watukuy.core.{name}", f"watukuy.model.{name}")
        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
