"""What the partitions scenario records, and the figures it becomes.

See :mod:`bench.scale.partitions` for the scenario and the definitions of the terms.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import watukuy as wk

from ._report import Figure, ratio

__all__ = [
    "DEFINITIONS",
    "CountingSqliteStore",
    "Pass",
    "PartitionsRun",
    "Profiles",
    "figures",
]

IDLE_RATIO_TARGET = 2.0
RUN_RATIO_TARGET = 2.0

DEFINITIONS = """
pass: one wake-up of the daemon: the virtual clock reaches the earliest pending timer and
  every woken task runs to completion (SQLite thread included); CPU = time.process_time()
  of the whole process around it (the VirtualClock's settling is part of it).
idle pass: a pass in which no key was leased and nothing was fetched (in this engine: the
  periodic resync, a partitions refresh, or a wake-up for a key that was not due).
key run: a leased run of one key; CPU per key run = CPU of the passes that ran keys
  without a resync, divided by their key runs.
idle tick(): a tick() from a fresh engine on the same store that polled no key.
changes delivered: events with the item's partition, id and new version that reached the
  handler (1% of the partitions change per virtual minute, each change on its own key).
"""

_COUNTED = (
    "load_state",
    "count_pending",
    "acquire_lease",
    "renew_lease",
    "release_lease",
    "save_state",
    "save_state_unfenced",
    "list_keys",
    "load_versions",
    "commit_poll",
    "load_pending",
    "ack_events",
    "held_keys",
    "get_validator",
    "set_validator",
)


class CountingSqliteStore(wk.SqliteStore):
    """A ``SqliteStore`` that counts calls per operation (``calls``)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.calls: Counter[str] = Counter()


def _counting(name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    base = getattr(wk.SqliteStore, name)

    async def method(self: CountingSqliteStore, *args: Any, **kwargs: Any) -> Any:
        self.calls[name] += 1
        return await base(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in _COUNTED:
    setattr(CountingSqliteStore, _name, _counting(_name))


@dataclass
class Pass:
    """One daemon pass."""

    at: int
    cpu_s: float
    runs: int
    fetches: int
    calls: Counter[str]

    @property
    def idle(self) -> bool:
        """No key was leased and nothing was fetched."""
        return self.runs == 0 and self.fetches == 0


@dataclass
class PartitionsRun:
    """Everything measured for one partition count."""

    partitions: int
    initial_cpu_s: float = 0.0
    initial_wall_s: float = 0.0
    passes: list[Pass] = field(default_factory=list)
    window_ms: tuple[int, int] = (0, 0)
    changes: int = 0
    changes_delivered: int = 0
    created: int = 0
    created_delivered: int = 0
    idle_ticks: list[tuple[float, int, Counter[str]]] = field(default_factory=list)
    wall_s: float = 0.0

    def idle_passes(self) -> list[Pass]:
        """Passes in which no key was leased or fetched."""
        return [p for p in self.passes if p.idle]

    def resync(self, p: Pass) -> bool:
        """True when the pass re-read (almost) every key's state."""
        return p.calls["load_state"] >= self.partitions

    def run_passes(self) -> list[Pass]:
        """Passes that ran keys, without a resync in them."""
        return [p for p in self.passes if p.runs and not self.resync(p)]

    def cpu_per_idle_pass(self) -> float:
        """Mean CPU seconds of the idle passes."""
        idle = self.idle_passes()
        return statistics.fmean(p.cpu_s for p in idle) if idle else 0.0

    def calls_per_idle_pass(self) -> float:
        """Mean number of store calls made by an idle pass."""
        idle = self.idle_passes()
        return statistics.fmean(sum(p.calls.values()) for p in idle) if idle else 0.0

    def cpu_per_run(self) -> float:
        """CPU seconds per key run, over the passes that ran keys without a resync."""
        passes = self.run_passes()
        return ratio(sum(p.cpu_s for p in passes), sum(p.runs for p in passes))

    def cpu_per_minute(self) -> float:
        """CPU seconds per virtual minute while the partitions were changing."""
        start, end = self.window_ms
        inside = [p for p in self.passes if start <= p.at < end]
        return ratio(sum(p.cpu_s for p in inside), (end - start) / 60_000)

    def idle_tick_cpu(self) -> float:
        """Mean CPU seconds of the ``tick()`` calls that polled nothing."""
        idle = [cpu for cpu, polled, _ in self.idle_ticks if polled == 0]
        return statistics.fmean(idle) if idle else float("nan")

    def summary(self) -> dict[str, Any]:
        """JSON-ready details."""
        idle = self.idle_passes()
        return {
            "partitions": self.partitions,
            "initial_sync_cpu_s": self.initial_cpu_s,
            "initial_sync_wall_s": self.initial_wall_s,
            "passes": len(self.passes),
            "idle_passes": len(idle),
            "idle_passes_with_resync": sum(1 for p in idle if self.resync(p)),
            "idle_pass_cpu_s": {
                "mean": self.cpu_per_idle_pass(),
                "max": max((p.cpu_s for p in idle), default=0.0),
                "median": statistics.median(p.cpu_s for p in idle) if idle else 0.0,
            },
            "idle_pass_store_calls": dict(sum((p.calls for p in idle), Counter())),
            "key_runs": sum(p.runs for p in self.passes),
            "cpu_per_key_run_s": self.cpu_per_run(),
            "store_calls_per_key_run": {
                name: count / max(1, sum(p.runs for p in self.run_passes()))
                for name, count in sum((p.calls for p in self.run_passes()), Counter()).items()
            },
            "cpu_per_virtual_minute_s": self.cpu_per_minute(),
            "changes": self.changes,
            "changes_delivered": self.changes_delivered,
            "created": self.created,
            "created_delivered": self.created_delivered,
            "idle_ticks": [
                {"cpu_s": cpu, "polled": polled, "store_calls": dict(calls)}
                for cpu, polled, calls in self.idle_ticks
            ],
            "wall_s": self.wall_s,
        }


class Profiles:
    """cProfile statistics of idle and due passes, merged."""

    def __init__(self) -> None:
        self.stats: dict[str, pstats.Stats | None] = {"idle": None, "due": None}
        self.due_seen = 0

    def keep(self, kind: str, profile: cProfile.Profile) -> None:
        current = self.stats[kind]
        if current is None:
            self.stats[kind] = pstats.Stats(profile)
        else:
            current.add(profile)

    def dump(self, folder: Path, partitions: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for kind, stats in self.stats.items():
            if stats is not None:
                stats.dump_stats(str(folder / f"partitions-{partitions}-{kind}.pstats"))


def figures(results: list[PartitionsRun]) -> list[Figure]:
    """The figures of the scenario; the ratios compare the largest size to the smallest."""
    out: list[Figure] = []
    scenario = "partitions"
    for r in results:
        n = f"{r.partitions:,}"
        idle = r.idle_passes()
        out += [
            Figure(
                scenario,
                f"idle_pass_cpu_{r.partitions}",
                f"{n} partitions: CPU per idle pass ({len(idle)} passes)",
                r.cpu_per_idle_pass() * 1000,
                "ms",
            ),
            Figure(
                scenario,
                f"idle_pass_calls_{r.partitions}",
                f"{n} partitions: store calls per idle pass",
                r.calls_per_idle_pass(),
            ),
            Figure(
                scenario,
                f"run_cpu_{r.partitions}",
                f"{n} partitions: CPU per key run",
                r.cpu_per_run() * 1000,
                "ms",
            ),
            Figure(
                scenario,
                f"minute_cpu_{r.partitions}",
                f"{n} partitions: CPU per virtual minute",
                r.cpu_per_minute(),
                "s",
            ),
            Figure(
                scenario,
                f"idle_tick_cpu_{r.partitions}",
                f"{n} partitions: CPU per idle tick()",
                r.idle_tick_cpu() * 1000,
                "ms",
            ),
            Figure(
                scenario,
                f"idle_tick_calls_{r.partitions}",
                f"{n} partitions: store calls per idle tick()",
                statistics.fmean(sum(c.values()) for _, _, c in r.idle_ticks)
                if r.idle_ticks
                else 0.0,
            ),
            Figure(
                scenario,
                f"initial_sync_{r.partitions}",
                f"{n} partitions: initial sync (CPU)",
                r.initial_cpu_s,
                "s",
            ),
            Figure(
                scenario,
                f"delivered_{r.partitions}",
                f"{n} partitions: changes delivered",
                f"{r.changes_delivered}/{r.changes}",
                "",
                "all",
                r.changes_delivered == r.changes and r.created_delivered == r.created,
            ),
        ]
    if len(results) >= 2:
        small, large = results[0], results[-1]
        scale = f"{large.partitions // max(1, small.partitions)}x partitions"
        idle_ratio = ratio(large.cpu_per_idle_pass(), small.cpu_per_idle_pass())
        run_ratio = ratio(large.cpu_per_run(), small.cpu_per_run())
        tick_ratio = ratio(large.idle_tick_cpu(), small.idle_tick_cpu())
        out += [
            Figure(
                scenario,
                "idle_pass_ratio",
                f"CPU per idle pass, {scale}",
                idle_ratio,
                "x",
                f"<= {IDLE_RATIO_TARGET:g}x",
                idle_ratio <= IDLE_RATIO_TARGET,
            ),
            Figure(
                scenario,
                "run_ratio",
                f"CPU per key run, {scale}",
                run_ratio,
                "x",
                f"<= {RUN_RATIO_TARGET:g}x",
                run_ratio <= RUN_RATIO_TARGET,
            ),
            Figure(
                scenario,
                "idle_tick_ratio",
                f"CPU per idle tick(), {scale}",
                tick_ratio,
                "x",
                f"<= {IDLE_RATIO_TARGET:g}x",
                tick_ratio <= IDLE_RATIO_TARGET,
            ),
        ]
    return out
