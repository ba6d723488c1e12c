"""Type checkers hold the public API to its promises, both ways.

The README quickstart, ``tests/typing/api.py``, ``tests/typing/inbox.py`` and
``tests/typing/typed_fetch.py`` must pass ``mypy --strict`` and
``pyright --strict``; every ``# case:`` region of ``tests/typing/negative/`` must draw an
error from both (a fetch given another cursor's position, a handler of another item type),
and the code before the first case none, so a negative case cannot pass by being broken
from its first line.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs import runnable_blocks

ROOT = Path(__file__).resolve().parents[2]
NEGATIVE = ROOT / "tests" / "typing" / "negative"
BIN = Path(sys.executable).parent
_CASE = re.compile(r"^# case: (?P<name>.+)$")

pytestmark = pytest.mark.slow


def cases(path: Path) -> list[tuple[str, int, int]]:
    """``(name, first line, last line)`` of every ``# case:`` region, 1-based."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [(i + 1, m["name"]) for i, line in enumerate(lines) if (m := _CASE.match(line))]
    ends = [start - 1 for start, _ in starts[1:]] + [len(lines)]
    return [(name, start, end) for (start, name), end in zip(starts, ends, strict=True)]


def mypy_errors(paths: list[Path], cwd: Path) -> dict[str, list[int]]:
    result = subprocess.run(
        # The project's cache (``make typecheck`` fills it) spares re-reading watukuy.
        [str(BIN / "mypy"), "--strict", "--cache-dir", str(ROOT / ".mypy_cache"), *map(str, paths)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    found: dict[str, list[int]] = {}
    for line in result.stdout.splitlines():
        match = re.match(r"(?P<file>[^:]+):(?P<line>\d+): error:", line)
        if match:
            found.setdefault(Path(match["file"]).name, []).append(int(match["line"]))
    return found


def pyright_errors(directory: Path) -> dict[str, list[int]]:
    """Run pyright --strict on ``directory`` with this interpreter's packages."""
    config = {
        "venvPath": str(Path(sys.prefix).parent),
        "venv": Path(sys.prefix).name,
        "pythonVersion": "3.11",
        "typeCheckingMode": "strict",
    }
    (directory / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    result = subprocess.run(
        [str(BIN / "pyright"), "--outputjson", str(directory)],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(result.stdout)
    found: dict[str, list[int]] = {}
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] == "error":
            name = Path(diagnostic["file"]).name
            found.setdefault(name, []).append(diagnostic["range"]["start"]["line"] + 1)
    return found


@pytest.fixture(scope="module")
def negative_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("negative")
    for path in NEGATIVE.glob("*.py"):
        shutil.copy(path, directory / path.name)
    return directory


@pytest.fixture(scope="module")
def checked(negative_copy: Path) -> dict[str, dict[str, list[int]]]:
    files = sorted(negative_copy.glob("*.py"))
    return {"mypy": mypy_errors(files, negative_copy), "pyright": pyright_errors(negative_copy)}


def test_there_are_negative_cases() -> None:
    names = {path.name for path in NEGATIVE.glob("*.py")}
    assert {
        "cursor_mismatch.py",
        "filter_mismatch.py",
        "handler_mismatch.py",
        "hooks_mismatch.py",
        "inbox_mismatch.py",
        "response_typo.py",
    } <= names
    assert all(cases(NEGATIVE / name) for name in names)


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
@pytest.mark.parametrize(
    "file",
    [
        "cursor_mismatch.py",
        "filter_mismatch.py",
        "handler_mismatch.py",
        "hooks_mismatch.py",
        "inbox_mismatch.py",
        "response_typo.py",
    ],
)
def test_every_negative_case_is_a_type_error(
    checked: dict[str, dict[str, list[int]]], checker: str, file: str
) -> None:
    errors = checked[checker].get(file, [])
    regions = cases(NEGATIVE / file)
    first = regions[0][1]
    assert [line for line in errors if line < first] == [], f"{checker}: the preamble is broken"
    missed = [name for name, start, end in regions if not any(start <= n <= end for n in errors)]
    assert missed == [], f"{checker} accepted: {missed}"


def test_the_quickstart_and_the_typing_module_pass_both_checkers(tmp_path: Path) -> None:
    (tmp_path / "quickstart.py").write_text(runnable_blocks()["quickstart"], encoding="utf-8")
    shutil.copy(ROOT / "tests" / "typing" / "api.py", tmp_path / "api.py")
    shutil.copy(ROOT / "tests" / "typing" / "inbox.py", tmp_path / "inbox.py")
    shutil.copy(ROOT / "tests" / "typing" / "typed_fetch.py", tmp_path / "typed_fetch.py")
    files = sorted(tmp_path.glob("*.py"))

    assert mypy_errors(files, tmp_path) == {}
    assert pyright_errors(tmp_path) == {}
