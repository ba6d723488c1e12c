"""The core starts no threads and reads no real clock: time is the ``Clock`` port, blocking
user code goes through the ``Offload`` port.

The import contracts cannot see a call such as ``asyncio.to_thread`` or
``loop.call_later`` (``asyncio`` itself is allowed), so this reads the source: every module
of the runtime, the pipeline, the building blocks and the model, parsed, not grepped.
"""

from __future__ import annotations

import ast
from pathlib import Path

import watukuy

ROOT = Path(watukuy.__file__).parent
PACKAGES = ("runtime", "pipeline", "scheduler", "cursor", "diff", "budget", "validate", "model")

# Calls that start threads or read the event loop's clock, by attribute name.
FORBIDDEN_ATTRIBUTES = {"to_thread", "run_in_executor", "call_later", "call_at"}
# Modules that are threads or the real clock.
FORBIDDEN_MODULES = {"time", "threading", "concurrent", "concurrent.futures"}


def _offences(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _forbidden_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if _forbidden_module(node.module):
                found.append((node.lineno, node.module))
            found += [(node.lineno, a.name) for a in node.names if a.name in FORBIDDEN_ATTRIBUTES]
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                found.append((node.lineno, node.attr))
            elif isinstance(node.value, ast.Name) and node.value.id in FORBIDDEN_MODULES:
                found.append((node.lineno, f"{node.value.id}.{node.attr}"))
            elif node.attr == "time" and _is_loop(node.value):
                found.append((node.lineno, "loop.time"))
    return found


def _forbidden_module(name: str) -> bool:
    return name in FORBIDDEN_MODULES or name.split(".")[0] in {"threading", "concurrent"}


def _is_loop(node: ast.expr) -> bool:
    """``loop``, ``self._loop``, ``asyncio.get_running_loop()`` and the like."""
    if isinstance(node, ast.Call):
        node = node.func
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return "loop" in name.lower()


def _scan() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            where = path.relative_to(ROOT).as_posix()
            found |= {(where, what) for _, what in _offences(tree)}
    return found


def test_the_core_starts_no_threads_and_reads_no_real_clock() -> None:
    found = _scan()
    assert found == set()


def test_the_scan_sees_each_forbidden_form() -> None:
    source = (
        "import time\n"
        "import threading\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from asyncio import to_thread\n"
        "async def f(loop):\n"
        "    await asyncio.to_thread(g)\n"
        "    await loop.run_in_executor(None, g)\n"
        "    loop.call_later(1, g)\n"
        "    asyncio.get_running_loop().call_at(1, g)\n"
        "    return loop.time() + asyncio.get_running_loop().time() + time.monotonic()\n"
    )
    whats = sorted(what for _, what in _offences(ast.parse(source)))
    assert whats == sorted(
        [
            "time",
            "threading",
            "concurrent.futures",
            "to_thread",
            "to_thread",
            "run_in_executor",
            "call_later",
            "call_at",
            "loop.time",
            "loop.time",
            "time.monotonic",
        ]
    )
