"""``watukuy.core``, the pre-split home of the model, imports until 1.0 and says where each
name lives now."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import watukuy
import watukuy.model.errors
from watukuy.core import MOVED


def test_serialize_error_imports_from_its_old_home_with_a_warning() -> None:
    sys.modules.pop("watukuy.core.errors", None)
    with pytest.warns(DeprecationWarning, match=r"watukuy\.serialize_error") as caught:
        from watukuy.core.errors import ConfigError, serialize_error
    assert serialize_error is watukuy.serialize_error
    assert ConfigError is watukuy.model.errors.ConfigError
    assert "goes away in watukuy 1.0" in str(caught[0].message)
    assert caught[0].filename == __file__  # the warning points at the import line


@pytest.mark.parametrize("name", sorted(MOVED))
def test_each_alias_re_exports_its_new_home_and_names_it(name: str) -> None:
    sys.modules.pop(f"watukuy.core.{name}", None)
    new = importlib.import_module(MOVED[name])
    with pytest.warns(DeprecationWarning, match=MOVED[name].replace(".", r"\.")):
        old = importlib.import_module(f"watukuy.core.{name}")
    assert set(new.__all__) <= set(old.__all__)
    for exported in new.__all__:
        assert getattr(old, exported) is getattr(new, exported), exported


def test_the_warning_shows_under_default_filters_for_a_script() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from watukuy.core.rows import PKey"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "DeprecationWarning: watukuy.core.rows is deprecated" in out.stderr
    assert "watukuy.model.rows" in out.stderr


def test_the_package_alone_warns_nothing_and_unknown_names_fail() -> None:
    import watukuy.core

    with pytest.raises(AttributeError, match="nothing"):
        _ = watukuy.core.nothing
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("watukuy.core.nothing")
