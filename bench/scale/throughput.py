"""The same backlog synced by one replica and by three, on one shared store.

The harness serves a ``FakeApi`` over real HTTP with a fixed latency, creates a fresh
PostgreSQL schema or Redis key prefix, and starts replica processes
(:mod:`bench.scale.replica`) that sync the backlog: ``partitions`` tenants of ``items``
items each, in pages of ``page_size``. Every replica runs at most ``max_concurrent`` keys at
a time, so the API's latency, not the CPU, bounds the work, and one more replica should
add as much throughput as the first. The time runs from the start signal until every item
has reached a handler. Next to it the harness shows the *API floor* (requests x latency /
requests in flight: the time the API alone imposes) and how busy the machine's CPUs were,
so a run bounded by the CPU rather than the API can be told apart.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ._fleet import Replica, make_api, read_events, replica_arguments, spawn, start_all, terminate
from ._report import Figure, ratio
from ._services import namespace, store_url
from .replica import make_store

__all__ = [
    "DEFINITIONS",
    "ThroughputConfig",
    "ThroughputRun",
    "run_throughput",
    "throughput_figures",
]

THROUGHPUT_RATIO_TARGET = 2.0

DEFINITIONS = """
items delivered per second: the backlog's items over the time from the start signal to
  the last item reaching a handler (process start-up excluded).
API floor: requests x latency / (replicas x keys at a time): the time the API alone needs.
machine CPU busy: share of all CPUs busy during the run (/proc/stat), every process counted.
"""


@dataclass(frozen=True)
class ThroughputConfig:
    """Knobs of the throughput comparison."""

    partitions: int = 300
    items: int = 20
    page_size: int = 5
    latency: str = "200ms"
    max_concurrent: int = 5
    counts: tuple[int, ...] = (1, 3)
    timeout_s: float = 300.0


@dataclass
class ThroughputRun:
    """One backlog sync by ``replicas`` replicas."""

    kind: str
    replicas: int
    seconds: float
    events: int
    requests: int
    per_replica: dict[str, int]
    floor_s: float
    cpu_busy: float

    @property
    def rate(self) -> float:
        """Items delivered per second."""
        return ratio(self.events, self.seconds)


async def _throughput_once(
    kind: str, replicas_count: int, config: ThroughputConfig, folder: Path
) -> ThroughputRun:
    api, created = make_api(config.partitions, config.items, config.latency, config.page_size)
    server = await api.serve()
    replicas: list[Replica] = []
    try:
        async with namespace(kind) as space:
            store = make_store(kind, store_url(kind), space)
            await store.migrate()
            await store.close()
            options = {
                # Not due again during the measurement: each key syncs its backlog once.
                "schedule-min": "10m",
                "schedule-max": "10m",
                "max-concurrent": config.max_concurrent,
                "page-size": config.page_size,
            }
            arguments = replica_arguments(kind, space, server.url, config.partitions, options)
            replicas = [
                await spawn(f"{kind[:2]}-t{replicas_count}-{i + 1}", folder, arguments)
                for i in range(replicas_count)
            ]
            await start_all(replicas)
            cpu = _machine_cpu()
            started = time.perf_counter()
            deadline = started + config.timeout_s
            while True:
                await asyncio.sleep(0.05)
                seen = {(p, s, v) for p, s, v, _ in read_events(r.events for r in replicas)}
                if created <= seen:
                    break
                if time.perf_counter() > deadline:
                    raise RuntimeError(
                        f"throughput with {replicas_count} replica(s): {len(created - seen)} "
                        f"of {len(created)} items undelivered after {config.timeout_s:g} s"
                    )
            seconds = time.perf_counter() - started
            cpu_busy = _busy_share(cpu, _machine_cpu())
            await terminate(replicas)
    finally:
        await terminate(replicas)
        await server.close()
    per_replica = Counter(r.client or "" for r in api.log)
    # The time the API alone needs: every request waits the latency, and at most
    # max_concurrent requests per replica are in flight.
    floor_s = len(api.log) * api.latency_ms / 1000 / (replicas_count * config.max_concurrent)
    return ThroughputRun(
        kind,
        replicas_count,
        seconds,
        len(created),
        len(api.log),
        dict(per_replica),
        floor_s,
        cpu_busy,
    )


def _machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from ``/proc/stat`` ((0, 0) elsewhere)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return (0, 0)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields) - idle, sum(fields))


def _busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else float("nan")


async def run_throughput(kind: str, config: ThroughputConfig, folder: Path) -> list[ThroughputRun]:
    """The same backlog synced by each replica count in ``config.counts``."""
    return [await _throughput_once(kind, n, config, folder) for n in config.counts]


def throughput_figures(runs: list[ThroughputRun], config: ThroughputConfig) -> list[Figure]:
    """Events/s per replica count and the ratio of the largest count to one replica."""
    if not runs:
        return []
    scenario = f"throughput/{runs[0].kind}"
    work = (
        f"{config.partitions} keys x {config.items} items, pages of {config.page_size}, "
        f"{config.latency} latency, {config.max_concurrent} keys at a time per replica"
    )
    out = [
        Figure(
            scenario,
            f"rate_{run.replicas}",
            f"{run.replicas} replica(s): items delivered per second ({run.seconds:.1f} s; "
            f"API floor {run.floor_s:.1f} s, machine CPU {run.cpu_busy:.0%} busy)",
            run.rate,
            "items/s",
        )
        for run in runs
    ]
    first, last = runs[0], runs[-1]
    speedup = ratio(last.rate, first.rate)
    out.append(
        Figure(
            scenario,
            "speedup",
            f"{last.replicas} replicas vs {first.replicas} ({work})",
            speedup,
            "x",
            f">= {THROUGHPUT_RATIO_TARGET:g}x",
            speedup >= THROUGHPUT_RATIO_TARGET,
        )
    )
    return out
