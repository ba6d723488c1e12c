"""A snapshot diff over a million items: peak memory and speed of the no-change cycle.

The harness serves a ``FakeApi`` holding ``items`` items over real HTTP on 127.0.0.1 (page
listing, ``page_size`` per page) in its own event loop. Two child processes
(:mod:`bench.scale.snapshot_child`) then run one ``SnapshotDiff`` poller against one store:

1. the **initial sync**: every item is created, committed and delivered to a no-op handler;
2. the **no-change cycle**: a fresh process triggers the key and lists everything again;
   nothing changed, so no event is written.

Each cycle runs in a process of its own so that its peak resident set (``VmHWM`` of
``/proc/<pid>/status``, read by the child at its end; the harness also samples it while the
child runs) is the cycle's alone, interpreter and imports included. The time of a cycle
is the wall time of its ``tick()``, without process start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watukuy.testing import FakeApi, fake_items

from ._report import Figure, ratio
from ._services import namespace, store_url
from .snapshot_child import proc_status_kb

__all__ = ["DEFINITIONS", "SnapshotConfig", "SnapshotRun", "run_snapshot", "snapshot_figures"]

REPO = Path(__file__).resolve().parents[2]
RSS_LIMIT_MB = 300.0

DEFINITIONS = """
cycle time: wall time of the tick() that runs the cycle (process start-up excluded).
peak RSS: VmHWM of /proc/<pid>/status of the child process that ran the cycle (one process
  per cycle, interpreter and imports included), read by the child as it ends.
"""


@dataclass(frozen=True)
class SnapshotConfig:
    """Knobs of the snapshot scenario."""

    items: int = 1_000_000
    page_size: int = 1_000
    timeout_s: float = 3_600.0


@dataclass
class SnapshotRun:
    """Both cycles of one store kind."""

    kind: str
    items: int
    initial: dict[str, Any] = field(default_factory=dict)
    again: dict[str, Any] = field(default_factory=dict)


async def _child(arguments: list[str], timeout: float) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.scale.snapshot_child",
        *arguments,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env=env,
    )
    sampled_kb = 0

    async def sample() -> None:
        nonlocal sampled_kb
        while True:
            sampled_kb = max(sampled_kb, proc_status_kb(process.pid).get("VmHWM", 0))
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines = stdout.decode().strip().splitlines()
    try:
        summary: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = "\n".join(stderr.decode(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"snapshot child failed (exit {process.returncode}):\n{tail}") from None
    summary["process_wall_s"] = time.perf_counter() - started
    summary["sampled_vm_hwm_kb"] = sampled_kb
    return summary


@asynccontextmanager
async def _store_arguments(kind: str, folder: Path) -> AsyncIterator[list[str]]:
    if kind == "sqlite":
        yield ["--store", "sqlite", "--store-url", str(folder / "snapshot.db")]
        return
    async with namespace("postgres") as schema:
        yield ["--store", "postgres", "--store-url", store_url("postgres"), "--namespace", schema]


async def run_snapshot(
    kinds: tuple[str, ...], config: SnapshotConfig, folder: Path
) -> list[SnapshotRun]:
    """Both cycles on each store kind (``sqlite``, ``postgres``) against one served API."""
    print(f"  snapshot: building {config.items:,} items ...", flush=True)
    past = time.time_ns() // 1_000_000 - 86_400_000
    api = FakeApi(items=fake_items(config.items, start=past), page_size=config.page_size)
    server = await api.serve()
    runs = []
    try:
        for kind in kinds:
            run = SnapshotRun(kind, config.items)
            async with _store_arguments(kind, folder) as store:
                common = [*store, "--api", server.url, "--page-size", str(config.page_size)]
                print(f"  snapshot/{kind}: initial sync ...", flush=True)
                run.initial = await _child([*common, "--phase", "initial"], config.timeout_s)
                print(f"  snapshot/{kind}: no-change cycle ...", flush=True)
                run.again = await _child([*common, "--phase", "again"], config.timeout_s)
            runs.append(run)
    finally:
        await server.close()
    return runs


def snapshot_figures(run: SnapshotRun) -> list[Figure]:
    """The figures of one store kind."""
    scenario = f"snapshot/{run.kind}"
    n = f"{run.items:,}"
    initial, again = run.initial, run.again
    again_mb = again.get("vm_hwm_kb", 0) / 1024
    return [
        Figure(
            scenario,
            "initial_seconds",
            f"initial sync of {n} items, created and delivered "
            f"({ratio(initial['items'], initial['seconds']):,.0f} items/s)",
            initial["seconds"],
            "s",
        ),
        Figure(
            scenario,
            "initial_rss",
            "initial sync: peak RSS",
            initial.get("vm_hwm_kb", 0) / 1024,
            "MB",
        ),
        Figure(
            scenario,
            "again_seconds",
            f"no-change cycle over {n} items "
            f"({ratio(again['items'], again['seconds']):,.0f} items/s)",
            again["seconds"],
            "s",
        ),
        Figure(
            scenario,
            "again_rate",
            "no-change cycle: items per second",
            ratio(again["items"], again["seconds"]),
            "items/s",
        ),
        Figure(
            scenario,
            "again_rss",
            "no-change cycle: peak RSS",
            again_mb,
            "MB",
            f"< {RSS_LIMIT_MB:g} MB",
            again_mb < RSS_LIMIT_MB,
        ),
        Figure(
            scenario,
            "again_events",
            f"no-change cycle: items seen, events written ({again['items']:,} seen)",
            again["events"],
            "",
            f"0 (and {n} seen)",
            again["events"] == 0 and again["items"] == run.items and again["error"] is None,
        ),
    ]
