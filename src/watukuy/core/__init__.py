"""Deprecated: the old home of :mod:`watukuy.model` and :mod:`watukuy.runtime`.

``watukuy.core`` was split in two before the first release. Code written against it keeps
importing until watukuy 1.0: each module below re-exports the names of its new home, and
warns once, on import, with a ``DeprecationWarning`` that names that home.

=========================  =============================================================
old import                 new home
=========================  =============================================================
``watukuy.core.errors``    :mod:`watukuy.model.errors` (``serialize_error``: ``watukuy``)
``watukuy.core.json``      :mod:`watukuy.model.json`
``watukuy.core.events``    :mod:`watukuy.model.events`
``watukuy.core.rows``      :mod:`watukuy.model.rows`
``watukuy.core.ports``     :mod:`watukuy.model.ports`
``watukuy.core.records``   :mod:`watukuy.model.records`
=========================  =============================================================

The names are the very same objects as in their new homes, so ``isinstance`` checks and
``except`` clauses written against either path agree. Import from ``watukuy`` itself, or
from the new paths; this package goes away in 1.0.
"""

from __future__ import annotations

import warnings
from typing import Any, Final

__all__: list[str] = []

REMOVED_IN: Final = "1.0"
"""The release that removes the alias."""

MOVED: Final[dict[str, str]] = {
    "errors": "watukuy.model.errors",
    "json": "watukuy.model.json",
    "events": "watukuy.model.events",
    "rows": "watukuy.model.rows",
    "ports": "watukuy.model.ports",
    "records": "watukuy.model.records",
}
"""Each alias module of ``watukuy.core`` and the module whose names it re-exports."""


def warn_moved(old: str, new: str) -> None:
    """Warn that ``old`` is deprecated, naming ``new``, at the line that imported it.

    Called from the alias module's body: ``warnings`` skips the import machinery's frames,
    so level 3 (this function, the alias module, its importer) is the user's import line,
    where Python's default filters show it for code run as ``__main__``.
    """
    warnings.warn(
        f"{old} is deprecated and goes away in watukuy {REMOVED_IN}: use {new} instead",
        DeprecationWarning,
        stacklevel=3,
    )


def __getattr__(name: str) -> Any:
    # ``import watukuy.core`` alone warns nothing; each name taken from it does.
    if name in MOVED:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
