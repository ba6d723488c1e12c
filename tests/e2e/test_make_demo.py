"""``make demo`` installs the package alone, says so, and leaves the full set to
``make test``. Dry runs (``make -n``) against a .venv path of the test's own: what each
target would do, without installing anything."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def dry_run(target: str, venv: Path) -> str:
    if shutil.which("make") is None:
        pytest.fail("make is not installed: the Makefile's targets cannot be checked")
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_a_fresh_demo_installs_the_package_alone_and_says_so(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    plan = dry_run("demo", venv)
    assert f"-m venv {venv}" in plan
    assert 'echo "creating .venv"' in plan
    with (ROOT / "pyproject.toml").open("rb") as file:
        count = len(tomllib.load(file)["project"]["dependencies"])
    assert f"installing watukuy and its {count} runtime dependencies into .venv" in plan
    [install] = [line for line in plan.splitlines() if " pip install " in line]
    assert install.endswith(" -e .")
    assert "--group" not in plan
    assert "--upgrade" not in plan  # the venv's own pip is enough for -e .
    assert plan.rstrip().endswith(f"{venv}/bin/watukuy demo")


def test_the_demo_uses_a_full_venv_as_it_is(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed").touch()  # newer than pyproject.toml: make test's set is there
    plan = dry_run("demo", venv)
    assert "pip install" not in plan
    assert plan.rstrip().endswith(f"{venv}/bin/watukuy demo")


def test_make_test_after_make_demo_installs_the_full_set(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".demo-installed").touch()
    plan = dry_run("lint", venv)
    assert "-e '.[all,postgres-binary]' --group dev" in plan
