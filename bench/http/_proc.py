"""Child processes measured from the outside: wall, CPU and peak RSS of the whole process."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from ._venv import ROOT, child_python


def child_env() -> dict[str, str]:
    """This process's environment for a child, with bytecode caching on.

    An installed package has its ``.pyc`` files (pip writes them); a source tree run with
    ``PYTHONDONTWRITEBYTECODE`` would compile every module of watukuy in every child, a
    cost no deployment pays and the floor (whose imports are all installed) never sees.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_package() -> None:
    """Write the ``.pyc`` files of the watukuy package being measured, as pip would.

    The children's interpreter does it, for the package it imports.
    """
    subprocess.run(
        [
            child_python(),
            "-c",
            "import compileall, os, watukuy; "
            "compileall.compile_dir(os.path.dirname(watukuy.__file__), quiet=1)",
        ],
        check=True,
        env=child_env(),
    )


@dataclass
class Measured:
    """One child process: its whole-process figures and the JSON line it printed."""

    wall: float
    cpu: float
    rss_mb: float
    out: dict[str, Any] = field(default_factory=dict)
    written_mb: float = 0.0
    """What the process wrote to storage (``ru_oublock``: the database, its WAL, the
    checkpoints), in MB."""


def measure(module: str, *args: str) -> Measured:
    """Run ``python -m module args`` to its end and measure it.

    ``os.wait4`` reaps the child with its own rusage: the CPU of all its threads, the
    high-water mark of its resident set and the blocks it wrote; the wall runs from spawn
    to exit.
    """
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            [child_python(), "-m", module, *args],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=child_env(),
            cwd=ROOT,
        )
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        child.stdout.close()
        if child.returncode:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"{module} {' '.join(args)} exited {child.returncode}:\n{tail}")
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    return Measured(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        rss_mb=usage.ru_maxrss / 1024,
        out=orjson.loads(lines[-1]) if lines else {},
        written_mb=usage.ru_oublock * 512 / 1e6,
    )


class VendorProcess:
    """``bench.http.vendor`` in its own process, for a ``with`` block."""

    def __init__(
        self,
        items: int,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        shape: str = "asyncio",
    ) -> None:
        self._args = [
            "--items",
            str(items),
            "--shape",
            shape,
            "--latency-ms",
            str(latency_ms),
            "--jitter-ms",
            str(jitter_ms),
        ]
        self.url = ""
        self._child: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> VendorProcess:
        self._child = subprocess.Popen(
            [child_python(), "-m", "bench.http.vendor", *self._args],
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
            env=child_env(),
            cwd=ROOT,
        )
        assert self._child.stdout is not None
        line = self._child.stdout.readline().decode().split()
        if len(line) != 2 or line[0] != "port":
            self.__exit__()
            raise RuntimeError(f"the vendor did not start: {line}")
        self.url = f"http://127.0.0.1:{line[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._child is not None:
            assert self._child.stdin is not None
            self._child.stdin.close()  # the vendor serves until stdin closes
            try:
                self._child.wait(10)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            self._child = None

    def post(self, path: str) -> Any:
        import httpx

        return httpx.post(self.url + path, timeout=60).json()

    def get(self, path: str) -> Any:
        import httpx

        return httpx.get(self.url + path, timeout=60).json()

    def connections(self) -> int:
        """Connections the vendor accepted so far, this request's own included."""
        count: int = self.get("/_stats")["connections"]
        return count
