"""``watukuy.core`` is a deprecated alias of ``watukuy.model`` and ``watukuy.runtime``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import watukuy.model
import watukuy.model.errors
import watukuy.runtime.engine
from watukuy.core import MOVED


def test_every_old_module_is_the_new_module_and_warns() -> None:
    # In a fresh interpreter: the warning fires on the first import of each name only.
    code = (
        "import importlib, warnings\n"
        "from watukuy.core import MOVED\n"
        "for name, new in MOVED.items():\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        old = importlib.import_module('watukuy.core.' + name)\n"
        "    assert old is importlib.import_module(new), name\n"
        "    assert [w.category for w in caught] == [DeprecationWarning], (name, caught)\n"
        "    assert new in str(caught[0].message), caught[0].message\n"
        "print(len(MOVED))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "24"


def test_the_moved_modules_are_exactly_the_new_packages() -> None:
    import pathlib

    root = pathlib.Path(watukuy.model.__file__).parent.parent
    found = {
        path.stem: f"watukuy.{package}.{path.stem}"
        for package in ("model", "runtime")
        for path in (root / package).glob("*.py")
        if path.stem != "__init__"
    }
    # Modules born after the split had no old name to keep.
    born_after = {
        "partition",
        "filters",
        "operator",
        "_hookbus",
        "_hook_names",
        "admission",
        "_turn",
        "late",
        "late_watch",
        "stalls",
        "acks",
    }
    assert {name: path for name, path in found.items() if name not in born_after} == MOVED


def test_old_names_resolve_to_the_same_objects() -> None:
    with pytest.warns(DeprecationWarning, match=r"watukuy\.model\.ConfigError"):
        from watukuy.core import ConfigError
    assert ConfigError is watukuy.model.errors.ConfigError
    sys.modules.pop("watukuy.core.errors", None)  # warned again: imported afresh
    with pytest.warns(DeprecationWarning, match=r"watukuy\.model\.errors"):
        errors = importlib.import_module("watukuy.core.errors")
    assert errors is watukuy.model.errors
    sys.modules.pop("watukuy.core.engine", None)
    with pytest.warns(DeprecationWarning, match=r"watukuy\.runtime\.engine"):
        engine = importlib.import_module("watukuy.core.engine")
    assert engine.EngineCore is watukuy.runtime.engine.EngineCore


def test_an_unknown_name_is_an_attribute_error() -> None:
    import watukuy.core

    with pytest.raises(AttributeError, match="nothing"):
        _ = watukuy.core.nothing
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("watukuy.core.nothing")
