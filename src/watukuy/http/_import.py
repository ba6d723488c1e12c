"""Import httpx without its command-line client.

``import httpx`` also imports ``httpx._main`` (the ``httpx`` console command) whenever click,
rich and pygments are installed, which the ``watukuy`` command needs them to be: tens of
milliseconds of every engine's start-up spent on a module it never calls. When this
process has not imported httpx yet, :func:`import_httpx` lets httpx bind ``httpx.main`` to
a forwarder instead, which imports the real command on its first call; ``import
httpx._main`` keeps working as before.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_CLI = "httpx._main"


def _forward_main(*args: Any, **kwargs: Any) -> Any:
    """``httpx.main``, imported when it is first called."""
    return importlib.import_module(_CLI).main(*args, **kwargs)


def import_httpx() -> types.ModuleType:
    """``httpx``, imported (once per process) without ``httpx._main`` when possible."""
    if "httpx" in sys.modules or _CLI in sys.modules:
        return importlib.import_module("httpx")
    stand_in = types.ModuleType(_CLI)
    stand_in.main = _forward_main  # type: ignore[attr-defined]
    sys.modules[_CLI] = stand_in
    try:
        return importlib.import_module("httpx")
    finally:
        # Only httpx's own ``from ._main import main`` should ever see the stand-in.
        if sys.modules.get(_CLI) is stand_in:
            del sys.modules[_CLI]
        package = sys.modules.get("httpx")
        if package is not None and getattr(package, "_main", None) is stand_in:
            delattr(package, "_main")
