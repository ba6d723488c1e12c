"""The code in the README runs, exactly as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"<!-- tested: (?P<name>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.S)


def runnable_blocks() -> dict[str, str]:
    return {m["name"]: m["code"] for m in _BLOCK.finditer(README.read_text(encoding="utf-8"))}


def test_the_readme_marks_its_runnable_blocks() -> None:
    assert "quickstart" in runnable_blocks()


def run_block(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "snippet.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_the_quickstart_runs_and_says_what_the_readme_says(tmp_path: Path) -> None:
    code = runnable_blocks()["quickstart"]
    first = run_block(code, tmp_path)
    assert first.returncode == 0, first.stderr
    assert [line.split()[:2] for line in first.stdout.splitlines()] == [
        *(["created", f"item-00{i}"] for i in range(1, 6)),
        ["updated", "item-002"],
    ]

    again = run_block(code, tmp_path)  # same database: nothing is emitted twice
    assert again.returncode == 0, again.stderr
    assert again.stdout == ""


DOCS = README.parent / "docs"
_PYTHON = re.compile(r"```python\n(?P<code>.*?)```", re.S)


def python_blocks() -> list[tuple[str, str]]:
    """``(file name, code)`` of every Python block in README.md and docs/*.md."""
    files = [README, *sorted(DOCS.glob("*.md"))]
    return [
        (path.name, m["code"])
        for path in files
        for m in _PYTHON.finditer(path.read_text(encoding="utf-8"))
    ]


def test_handlers_in_the_docs_name_pollers_their_engine_has() -> None:
    wrong = []
    for name, code in python_blocks():
        listed = re.search(r"pollers=\[(?P<names>[^\]]*)\]", code)
        if listed is None:
            continue
        pollers = {part.strip() for part in listed["names"].split(",")}
        for handled in re.findall(r'engine\.on\("(?P<poller>[\w.-]+)"', code):
            if handled not in pollers:
                wrong.append((name, handled, sorted(pollers)))
    assert wrong == []


def test_docs_annotations_hold_under_strict_type_checking() -> None:
    bare = re.compile(r"wk\.Event(?!\[)(?=[,)\s])|-> dict:|: dict[,)]|wk\.Event\[dict\]")
    found = [(name, m.group()) for name, code in python_blocks() for m in bare.finditer(code)]
    assert found == []


def test_service_name_goes_on_the_resource_not_on_span_attributes() -> None:
    found = [
        name
        for name, code in python_blocks()
        if re.search(r"OtelHooks\([^)]*service\.name", code, re.S)
    ]
    assert found == []
