"""The published wheel installs from a clean clone with only the core dependencies, and with
each extra alone (``scripts/check-wheel``: fresh virtual environments, pip's cache)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-wheel"
TARGETS = [
    "core",
    "postgres",
    "postgres-binary",
    "redis",
    "otel",
    "fastapi",
    "nats",
    "rabbitmq",
    "celery",
    "kafka",
    "sqs",
    "sinks",
    "aiosqlite",
    "sqlalchemy",
    "rest",
    "all",
]


@pytest.mark.slow
def test_the_wheel_installs_with_core_dependencies_and_with_each_extra_alone() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", ",".join(TARGETS)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr
    installed = [line.rsplit("[", 1)[1].split("]")[0] for line in result.stdout.splitlines()]
    assert installed == TARGETS
