"""The interpreter of the measured children: a venv that holds what a user installs.

The development venv holds test and tool packages a user's venv never has, and some of
them change what every child pays: httpcore imports ``trio`` whenever it is installed (a
dependency of selenium there), about 90 ms in every process, floor and engine alike,
which would flatter the engine's ratio. So the vendor, the floor and the engine children
run in ``.venv-bench`` at the repository's root: ``watukuy[postgres-binary]`` installed
from ``pyproject.toml`` (editable, so it runs the tree being measured) and nothing else.

It is created on first use with nothing but this Python, and created again from scratch
whenever ``pyproject.toml`` is newer than its stamp, so a dependency dropped there is gone
from it too. ``WATUKUY_BENCH_PYTHON=/path/to/python`` runs the children with another
interpreter instead (``.venv/bin/python`` for the development venv's figures).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-bench"
EXTRA = "postgres-binary"
_STAMP = VENV / ".installed"


def _is_fresh() -> bool:
    try:
        return _STAMP.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime
    except FileNotFoundError:
        return False


def _create() -> None:
    print(f"== creating {VENV.name}: watukuy[{EXTRA}] and nothing else", flush=True)
    # ``-m venv`` run from inside another venv builds on the base interpreter: nothing of
    # the development venv leaks in. ``--clear`` drops whatever an older install left.
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[{EXTRA}]"],
        check=True,
    )
    _STAMP.touch()


@functools.cache
def child_python() -> str:
    """The interpreter the children run with; creates or refreshes ``.venv-bench``."""
    chosen = os.environ.get("WATUKUY_BENCH_PYTHON")
    if chosen:
        return chosen
    if not _is_fresh():
        _create()
    return str(VENV / "bin" / "python")
