"""Replica processes and the served API they poll, shared by the replica scenarios."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from watukuy.testing import FakeApi, fake_items

from ._services import store_url
from .replica import tenant_name

__all__ = [
    "Replica",
    "make_api",
    "now_ms",
    "read_events",
    "replica_arguments",
    "spawn",
    "start_all",
    "terminate",
]

REPO = Path(__file__).resolve().parents[2]


def now_ms() -> int:
    """Wall-clock epoch milliseconds (the API's log and the replicas use the same clock)."""
    return time.time_ns() // 1_000_000


@dataclass
class Replica:
    """A running replica process."""

    instance: str
    process: asyncio.subprocess.Process
    events: Path
    stderr: Path
    stderr_file: IO[bytes]

    def stderr_tail(self, lines: int = 15) -> str:
        """The last lines the replica wrote to stderr."""
        self.stderr_file.flush()
        text = self.stderr.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])


async def spawn(instance: str, folder: Path, arguments: Sequence[str]) -> Replica:
    events = folder / f"{instance}.jsonl"
    stderr = folder / f"{instance}.err"
    stderr_file = stderr.open("wb")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.scale.replica",
        "--instance",
        instance,
        "--events",
        str(events),
        *arguments,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr_file,
        cwd=REPO,
        env=env,
    )
    return Replica(instance, process, events, stderr, stderr_file)


async def start_all(replicas: list[Replica]) -> None:
    """Wait until every replica says ``ready``, then release them at once."""
    for replica in replicas:
        assert replica.process.stdout is not None
        try:
            line = await asyncio.wait_for(replica.process.stdout.readline(), 60)
        except TimeoutError:
            line = b""
        if line.strip() != b"ready":
            raise RuntimeError(
                f"replica {replica.instance} did not start:\n{replica.stderr_tail()}"
            )
    for replica in replicas:
        assert replica.process.stdin is not None
        replica.process.stdin.write(b"go\n")
    for replica in replicas:
        assert replica.process.stdin is not None
        await replica.process.stdin.drain()


async def terminate(replicas: Iterable[Replica], timeout: float = 30.0) -> dict[str, int | None]:
    """SIGTERM every live replica and wait; SIGKILL the ones that do not exit in time."""
    alive = [r for r in replicas if r.process.returncode is None]
    for replica in alive:
        replica.process.send_signal(signal.SIGTERM)
    for replica in alive:
        try:
            await asyncio.wait_for(replica.process.wait(), timeout)
        except TimeoutError:
            replica.process.kill()
            await replica.process.wait()
    codes: dict[str, int | None] = {}
    for replica in replicas:
        codes[replica.instance] = replica.process.returncode
        replica.stderr_file.close()
    return codes


def replica_arguments(
    kind: str, space: str, api_url: str, partitions: int, options: Mapping[str, object]
) -> list[str]:
    """Command-line arguments of :mod:`bench.scale.replica` (``options``: extra flags)."""
    arguments = [
        "--store",
        kind,
        "--store-url",
        store_url(kind),
        "--namespace",
        space,
        "--api",
        api_url,
        "--partitions",
        str(partitions),
    ]
    for name, value in options.items():
        arguments += [f"--{name}", str(value)]
    return arguments


def read_events(paths: Iterable[Path]) -> list[tuple[str, str, int, str]]:
    rows = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                partition, subject, version, type_ = json.loads(line)
                rows.append((partition, subject, int(version), type_))
    return rows


def make_api(partitions: int, items: int, latency: str, page_size: int) -> tuple[FakeApi, set[Any]]:
    api = FakeApi(page_size=page_size, log_limit=None)
    # Stamped in the past so that every item is visible to the first poll.
    seeded = fake_items(items, start=now_ms() - 3_600_000)
    for index in range(partitions):
        api.tenant(tenant_name(index)).seed(seeded)
    api.set_latency(latency)
    created = {(tenant_name(i), item["id"], 1) for i in range(partitions) for item in seeded}
    return api, created
