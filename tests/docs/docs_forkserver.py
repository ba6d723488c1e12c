"""Run docs modules as scripts, each in a forked child of one process that imported the
heavy packages once (importing watukuy, httpx and friends is most of a block's run time).

A child is a fresh process for the block: its own working directory, environment, ``sys.path``
entry and ``__main__``, and nothing the other blocks did. The protocol is one JSON line per
job on stdin (``path``, ``cwd``, ``env``, ``timeout``, ``stderr``) and one JSON line per
answer on stdout (``returncode``; ``-9`` when the job ran out of time). POSIX only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback
from typing import Any

PRELOAD = (
    "asyncio",
    "httpx",
    "watukuy",
    "watukuy.testing",
    "watukuy.sinks",
    "watukuy.integrations",
    "watukuy.otel",
    "fastapi",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.metrics",
    "psycopg",
    "psycopg_pool",
    "redis.asyncio",
)


def _child(job: dict[str, Any]) -> None:
    code = 0
    try:
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        with open(job["stderr"], "w", encoding="utf-8") as err:
            os.dup2(err.fileno(), 2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        sys.path.insert(0, job["cwd"])
        sys.argv = [job["path"]]
        runpy.run_path(job["path"], run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.005)


def main() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(job)
        returncode = _wait(pid, float(job["timeout"]))
        sys.stdout.write(json.dumps({"returncode": returncode}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
